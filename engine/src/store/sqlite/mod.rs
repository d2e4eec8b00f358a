//! The SQLite ledger: one file (by default `.engine/engine.db` in the
//! workspace), opened with checked permissions, migrated, in WAL mode. The
//! only code in the engine that names `rusqlite` or writes SQL.
//!
//! `Db` opens, migrates and runs transactions; `Sql` is a connection (or a
//! transaction) seen through the ledger's traits, implemented by aggregate
//! in the files beside this one.

mod acts;
mod attempts;
mod columns;
mod events;
mod evidence;
mod goals;
mod inspect;
mod lease;
mod schema;

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::lease::{Acquired, Fence, Holder};
use super::{Durability, LedgerRead, LedgerTx};
use crate::error::{Code, Error, Result};
use crate::limits::{STORE_BUSY_TIMEOUT, STORE_STATEMENTS_CACHED};
use crate::state::Lifecycle;

pub use schema::SCHEMA_VERSION;

pub(super) struct Db {
    conn: Connection,
    path: PathBuf,
    durability: Durability,
}

/// A connection, or a transaction on it, seen through the ledger's traits.
/// Writes are reachable only as `&mut dyn LedgerTx`, which `Db::write`
/// hands out inside a transaction begun under a checked fence.
pub(super) struct Sql<'c> {
    conn: &'c Connection,
    fence: Option<Fence>,
}

impl LedgerRead for Sql<'_> {}

impl LedgerTx for Sql<'_> {
    fn fence(&self) -> Fence {
        // Only `Db::write` builds a writing `Sql`, always with its fence.
        self.fence.unwrap_or(Fence::new(-1))
    }
}

impl Db {
    /// Open (creating if needed) for writing. The folder is made 0700 and
    /// the file 0600; a symlink or another user's file is refused.
    pub fn open_rw(path: &Path) -> Result<Db> {
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
        Ok(Db { conn, path: path.to_path_buf(), durability: Durability::Normal })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet.
    pub fn open_ro(path: &Path) -> Result<Option<Db>> {
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
        Ok(Some(Db { conn, path: path.to_path_buf(), durability: Durability::Normal }))
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

    pub fn reader(&self) -> Sql<'_> {
        Sql { conn: &self.conn, fence: None }
    }

    /// Run `f` inside one read transaction (one snapshot).
    pub fn snapshot<T>(&self, f: impl FnOnce(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        self.conn.execute_batch("BEGIN DEFERRED")?;
        let value = f(&self.reader());
        self.conn.execute_batch("COMMIT")?;
        value
    }

    /// One IMMEDIATE transaction: the fence is checked first (a superseded
    /// writer gets `STALE_GENERATION` and writes nothing), then `f`, then
    /// the commit, fsynced when `durability` is `Full`.
    pub fn write<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        f: impl FnOnce(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        if durability != self.durability {
            let mode = match durability {
                Durability::Full => "FULL",
                Durability::Normal => "NORMAL",
            };
            self.conn.execute_batch(&format!("PRAGMA synchronous = {mode}"))?;
            self.durability = durability;
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        lease::check_fence(&tx, fence)?;
        let value = f(&mut Sql { conn: &tx, fence: Some(fence) })?;
        tx.commit()?;
        Ok(value)
    }

    pub fn acquire_lease(&mut self) -> Result<Acquired> {
        lease::acquire(&mut self.conn, &self.path)
    }

    pub fn release_lease(&mut self, fence: Fence) -> Result<()> {
        lease::release(&self.conn, fence)
    }

    pub fn live_holder(&self) -> Result<Option<Holder>> {
        lease::live_holder(&self.conn)
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
    conn.set_prepared_statement_cache_capacity(STORE_STATEMENTS_CACHED);
    conn.busy_timeout(STORE_BUSY_TIMEOUT)?;
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

/// An attempt that was, or may have been, dispatched: every one but a call
/// the provider refused before anything was handed over (its engine-error
/// evidence says so). One that stopped between intent and receipt counts,
/// abandoned for a new try or not: it may have gone out.
const DISPATCHED_OR_MAYBE: &str =
    "NOT EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'engine_error')";

/// `'a','b'`: the stable words of `states`, for an SQL `IN (...)` list.
fn words<S: Copy>(states: &[S], word: fn(S) -> &'static str) -> String {
    states.iter().map(|&s| format!("'{}'", word(s))).collect::<Vec<_>>().join(",")
}

/// Why a guarded state change changed no row: the table refused the move
/// from the state the row is in, or there is no such row.
fn refusal<S: Lifecycle>(what: &str, now: Option<S>, to: S) -> Error {
    match now.map(|from| from.check(to)) {
        Some(Err(refused)) => Error::internal(format!("{what}: {refused}")),
        Some(Ok(())) => Error::internal(format!("{what}: the move to {to} changed nothing")),
        None => Error::internal(format!("{what} is not in the ledger")),
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) =>
            {
                Error::new(Code::StoreCorrupt, format!("store is corrupt: {e}"))
            }
            _ => Error::internal(format!("store error: {e}")),
        }
    }
}

/// Run a statement through the connection's prepared-statement cache
/// (`Connection::execute` parses the SQL again at every call).
fn exec<P: rusqlite::Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `query_row` through the prepared-statement cache.
fn qrow<T, P: rusqlite::Params, F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: F,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

/// All rows of a query through the statement cache.
fn rows<T, P: rusqlite::Params, F: FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: F,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let out = stmt.query_map(params, f)?.collect::<rusqlite::Result<Vec<T>>>()?;
    Ok(out)
}
