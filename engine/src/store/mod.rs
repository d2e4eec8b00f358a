//! The ledger store: one SQLite file under `.engine/`, opened with checked
//! permissions, migrated, and written only through `Store::write`, which
//! runs one transaction and first checks that this process still holds the
//! lease generation it acquired (fencing).
//!
//! Architecture invariant: the rest of the engine reaches SQLite only
//! through this module (and `ledger`, which it hosts), so another ledger
//! backend can take its place.

pub mod blobs;
pub mod events;
pub mod lease;
pub mod ledger;
pub mod schema;
pub mod verify;

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{Code, Error, Result};

pub const STORE_FILE: &str = "engine.db";

/// How durable a commit must be. `Full` fsyncs the WAL at commit, for the
/// records that must survive power loss: intents, receipts, settlements,
/// approvals. `Normal` may lose the last commits on power loss (never on a
/// process crash) and is used for bookkeeping the engine can re-derive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Normal,
    Full,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The lease generation this process holds; `None` for a reader.
    generation: Option<i64>,
    durability: Durability,
}

/// Where the store lives: `--store`, then `ENGINE_STORE`, then
/// `<workspace>/.engine/engine.db`.
pub fn resolve_path(flag: Option<&Path>, workspace: &Path) -> PathBuf {
    if let Some(p) = flag {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("ENGINE_STORE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    workspace.join(crate::workspace::STORE_DIR).join(STORE_FILE)
}

impl Store {
    /// Open (creating if needed) for writing. The folder is made 0700 and
    /// the file 0600; a symlink or another user's file is refused.
    pub fn open_rw(path: &Path) -> Result<Store> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        match std::fs::symlink_metadata(dir) {
            Ok(_) => check_owned_dir(dir)?,
            Err(_) => {
                DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| {
                    Error::internal(format!("cannot create store folder: {e}")).at(dir.display().to_string())
                })?;
                check_owned_dir(dir)?;
            }
        }
        match std::fs::symlink_metadata(path) {
            Ok(_) => check_owned_file(path)?,
            Err(_) => {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)
                    .map_err(|e| Error::internal(format!("cannot create store: {e}")).at(path.display().to_string()))?;
            }
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|e| store_open_error(e, path))?;
        refuse_newer_schema(&conn, path)?;
        configure(&conn)?;
        schema::migrate(&conn).map_err(|e| {
            if e.code == Code::Internal {
                store_open_error_msg(&e.message, path)
            } else {
                e
            }
        })?;
        // SQLite gives -wal/-shm the db file's mode; make sure of it.
        for suffix in ["-wal", "-shm"] {
            let side = PathBuf::from(format!("{}{suffix}", path.display()));
            if let Ok(meta) = std::fs::symlink_metadata(&side) {
                if meta.file_type().is_symlink() {
                    return Err(Error::new(Code::StoreCorrupt, "store side file is a symlink; refused")
                        .at(side.display().to_string()));
                }
                let _ = std::fs::set_permissions(&side, std::fs::Permissions::from_mode(0o600));
            }
        }
        Ok(Store { conn, path: path.to_path_buf(), generation: None, durability: Durability::Normal })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet.
    pub fn open_ro(path: &Path) -> Result<Option<Store>> {
        // Read-write flags so WAL readers can use the shared memory file;
        // this handle never writes (no lease, `write` refuses).
        let Some(conn) = open_existing(path, OpenFlags::SQLITE_OPEN_READ_WRITE)? else { return Ok(None) };
        let version = refuse_newer_schema(&conn, path)?;
        if version < schema::SCHEMA_VERSION {
            // A reader never writes, so it does not migrate either.
            return Err(Error::usage(format!(
                "the store has schema version {version}, older than this engine's {}; a writing command (`engine run`) migrates it",
                schema::SCHEMA_VERSION
            ))
            .at(path.display().to_string()));
        }
        configure(&conn)?;
        Ok(Some(Store { conn, path: path.to_path_buf(), generation: None, durability: Durability::Normal }))
    }

    /// The schema version of an existing store file, read without
    /// touching it (`None`: no file there).
    pub fn schema_version(path: &Path) -> Result<Option<i64>> {
        let Some(conn) = open_existing(path, OpenFlags::SQLITE_OPEN_READ_ONLY)? else { return Ok(None) };
        Ok(Some(conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| store_open_error(e, path))?))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// Run `f` in one IMMEDIATE transaction, after checking that this
    /// process still holds its lease generation (`STALE_GENERATION`
    /// otherwise: a superseded writer writes nothing).
    /// Each commit is counted for `ENGINE_CRASH_AFTER_COMMITS` (a testing aid).
    pub fn write<T>(&mut self, durability: Durability, f: impl FnOnce(&Transaction) -> Result<T>) -> Result<T> {
        let generation = self.generation.ok_or_else(|| Error::internal("write without holding the store lease"))?;
        if durability != self.durability {
            let mode = match durability {
                Durability::Full => "FULL",
                Durability::Normal => "NORMAL",
            };
            self.conn.execute_batch(&format!("PRAGMA synchronous = {mode}"))?;
            self.durability = durability;
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: Option<i64> = tx
            .prepare_cached("SELECT generation FROM lease WHERE id = 1")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .ok();
        if current != Some(generation) {
            return Err(Error::new(
                Code::StaleGeneration,
                format!(
                    "this engine's lease (generation {generation}) was taken over (now {}); it writes nothing more",
                    current.map_or("none".to_string(), |g| g.to_string())
                ),
            ));
        }
        let value = f(&tx)?;
        tx.commit()?;
        crate::failpoint::committed();
        Ok(value)
    }
}

/// Read the schema version before anything else touches the file (even
/// the journal mode): a newer store is refused untouched.
fn refuse_newer_schema(conn: &Connection, path: &Path) -> Result<i64> {
    let version: i64 =
        conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| store_open_error(e, path))?;
    if version > schema::SCHEMA_VERSION {
        return Err(Error::new(
            Code::SchemaTooNew,
            format!(
                "the store has schema version {version}; this engine knows up to {}. Use a newer engine.",
                schema::SCHEMA_VERSION
            ),
        )
        .at(path.display().to_string()));
    }
    Ok(version)
}

/// Open an existing store file (`None`: there is none) after the same
/// ownership and symlink checks as any open; `mode` is read-only or
/// read-write, never create.
fn open_existing(path: &Path, mode: OpenFlags) -> Result<Option<Connection>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        check_owned_dir(dir)?;
    }
    check_owned_file(path)?;
    let conn =
        Connection::open_with_flags(path, mode | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW)
            .map_err(|e| store_open_error(e, path))?;
    Ok(Some(conn))
}

fn configure(conn: &Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(256);
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;",
    )?;
    Ok(())
}

fn store_open_error(e: rusqlite::Error, path: &Path) -> Error {
    store_open_error_msg(&e.to_string(), path)
}

fn store_open_error_msg(msg: &str, path: &Path) -> Error {
    let code =
        if msg.contains("not a database") || msg.contains("malformed") { Code::StoreCorrupt } else { Code::Internal };
    Error::new(code, format!("cannot open store: {msg}")).at(path.display().to_string())
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

fn check_owned_dir(dir: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::internal(format!("cannot inspect store folder: {e}")).at(dir.display().to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(Error::usage("the store folder is a symlink; refused (point --store at the real folder)")
            .at(dir.display().to_string()));
    }
    if meta.uid() != current_uid() {
        return Err(Error::usage(format!("the store folder is owned by uid {}, not by you; refused", meta.uid()))
            .at(dir.display().to_string()));
    }
    if meta.mode() & 0o077 != 0 && dir.file_name().is_some_and(|n| n == crate::workspace::STORE_DIR) {
        // Our own folder: repair group/other bits rather than leave it open.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn check_owned_file(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::internal(format!("cannot inspect store: {e}")).at(path.display().to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(Error::usage("the store is a symlink; refused").at(path.display().to_string()));
    }
    if !meta.file_type().is_file() {
        return Err(Error::usage("the store is not a regular file").at(path.display().to_string()));
    }
    if meta.uid() != current_uid() {
        return Err(Error::usage(format!("the store is owned by uid {}, not by you; refused", meta.uid()))
            .at(path.display().to_string()));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Run a statement through the connection's prepared-statement cache
/// (`Connection::execute` parses the SQL again at every call).
pub fn exec<P: rusqlite::Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `query_row` through the prepared-statement cache.
pub fn qrow<T, P: rusqlite::Params, F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: F,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}
