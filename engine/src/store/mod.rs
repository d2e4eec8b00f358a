//! The ledger store: one SQLite file under `.engine/`, opened with checked
//! permissions, migrated, and written only through `Store::write`, which
//! runs one transaction and first checks that this process still holds the
//! lease generation it acquired (fencing). Beside it, its mark (`mark.rs`)
//! keeps the store's identity and commit count outside SQLite, so a store
//! that lost commits is refused (`identity.rs`); a new store is made whole
//! or not at all (`create.rs`).
//!
//! Architecture invariant: the rest of the engine reaches SQLite only
//! through this module (and `ledger`, which it hosts), so another ledger
//! backend can take its place.

pub mod blobs;
mod create;
pub mod events;
pub mod files;
pub mod identity;
pub mod lease;
pub mod ledger;
pub mod mark;
pub mod schema;
pub mod verify;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{is_no_room, Code, Error, Result};
use files::{check_owned_dir, check_owned_file, StoreFiles};
use identity::Verdict;
use mark::{Mark, MarkFile};

pub const STORE_FILE: &str = "engine.db";

/// How durable a commit must be. `Full` fsyncs the WAL at commit, for the
/// records that must survive power loss: intents, receipts, settlements,
/// approvals; the mark then counts the commit too (`mark.rs`). `Normal`
/// may lose the last commits on power loss (never on a process crash) and
/// is used for bookkeeping the engine can re-derive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Normal,
    Full,
}

pub struct Store {
    conn: Connection,
    files: StoreFiles,
    /// The lease generation this process holds; `None` for a reader.
    generation: Option<i64>,
    durability: Durability,
    /// The mark, open for updates while this process holds the lease.
    mark: Option<MarkFile>,
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
    /// Open for writing, making the store (atomically, `create.rs`) if there
    /// is none — unless its mark says one existed: a lost store is refused,
    /// never made again. The folder is 0700, the files 0600; symlinks and
    /// other users' files are refused.
    pub fn open_rw(path: &Path) -> Result<Store> {
        let files = StoreFiles::new(path);
        let path = &files.db.clone();
        files.make_dir()?;
        files.refuse_odd_side_files()?;
        create::sweep_leftovers(&files);
        // The mark first: it exists only once the store file does.
        let mark = Mark::read(&files.mark).map_err(|e| e.at(files.place()))?;
        if !files.db_exists() {
            if let Some(m) = &mark {
                return Err(identity::missing_store(&files, m));
            }
            create::create(&files)?;
        }
        check_owned_file(path)?;
        let conn = connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        refuse_newer_schema(&conn, path)?;
        // Judged before anything is written, migrations included.
        let (verdict, _, _) = identity::verify(&conn, &files)?;
        configure(&conn).map_err(|e| sqlite_error(&conn, e, path))?;
        schema::migrate(&conn).map_err(|e| match sqlite_error(&conn, e, path) {
            e if e.code == Code::Internal => {
                Error { message: format!("cannot migrate store: {}", e.message), ..e }.at(path.display().to_string())
            }
            e => located(e, path),
        })?;
        files.tighten_side_files();
        if verdict == Verdict::Unmarked {
            let facts = identity::facts(&conn).map_err(|e| located(e.into(), path))?;
            let id = facts.store_id.ok_or_else(|| Error::internal("a migrated store without its identity"))?;
            MarkFile::create(&files.mark, &Mark::new(&id)).map_err(|e| located(e, path))?;
        }
        Ok(Store { conn, files, generation: None, durability: Durability::Normal, mark: None })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet. A store that lost commits is
    /// refused; one not known to be whole is checked first (`trust`).
    pub fn open_ro(path: &Path) -> Result<Option<Store>> {
        let files = StoreFiles::new(path);
        let path = &files.db.clone();
        // Read-write flags so WAL readers can use the shared memory file;
        // this handle never writes (no lease, `write` refuses).
        let Some(conn) = open_existing(&files, OpenFlags::SQLITE_OPEN_READ_WRITE)? else { return Ok(None) };
        let version = refuse_newer_schema(&conn, path)?;
        let (verdict, _, _) = identity::verify(&conn, &files)?;
        if version < schema::SCHEMA_VERSION {
            // A reader never writes, so it does not migrate either.
            return Err(Error::usage(format!(
                "the store has schema version {version}, older than this engine's {}; a writing command (`engine run`) migrates it",
                schema::SCHEMA_VERSION
            ))
            .at(path.display().to_string()));
        }
        configure(&conn)?;
        let store = Store { conn, files, generation: None, durability: Durability::Normal, mark: None };
        if let Verdict::Marked { unclean, changed } = verdict {
            // A live writer's store is in motion, not damaged: not checked.
            let dead_writer = unclean && lease::live_holder(&store.conn)?.is_none();
            if let Some(why) = doubt(false, dead_writer, changed) {
                identity::integrity(&store.conn, path, why)?;
            }
        }
        Ok(Some(store))
    }

    /// The schema version of an existing store file (`None`: no file
    /// there), read without writing to it — but a hot journal an older
    /// engine left is rolled back (that needs a read-write handle).
    pub fn schema_version(path: &Path) -> Result<Option<i64>> {
        let files = StoreFiles::new(path);
        let path = &files.db.clone();
        let Some(conn) = open_existing(&files, OpenFlags::SQLITE_OPEN_READ_WRITE)? else { return Ok(None) };
        Ok(Some(conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| store_open_error(e, path))?))
    }

    pub fn path(&self) -> &Path {
        &self.files.db
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// Run `f` in one IMMEDIATE transaction, after checking that this
    /// process still holds its lease generation (`STALE_GENERATION`
    /// otherwise: a superseded writer writes nothing). Every transaction
    /// counts itself in `store_meta.commits`; a `Full` one is then recorded
    /// in the mark before the caller acts on it. A transaction that does not
    /// fit on the disk is rolled back whole: `STORE_FULL`.
    /// Each commit is counted for `ENGINE_CRASH_AFTER_COMMITS` (a testing aid).
    pub fn write<T>(&mut self, durability: Durability, f: impl FnOnce(&Transaction) -> Result<T>) -> Result<T> {
        let result = self.write_counted(durability, f);
        result.map_err(|e| located(sqlite_error(&self.conn, e, &self.files.db), &self.files.db))
    }

    fn write_counted<T>(&mut self, durability: Durability, f: impl FnOnce(&Transaction) -> Result<T>) -> Result<T> {
        let generation = self.generation.ok_or_else(|| Error::internal("write without holding the store lease"))?;
        self.set_durability(durability)?;
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
        let commits = count_commit(&tx)?;
        tx.commit()?;
        if durability == Durability::Full {
            self.mark_commit(commits, generation)?;
        }
        crate::failpoint::committed();
        Ok(value)
    }

    /// The mark learns of a durable commit (the store is held: open);
    /// written, not flushed (`mark.rs` says why).
    fn mark_commit(&mut self, commits: i64, generation: i64) -> Result<()> {
        let mark = self.mark.as_mut().ok_or_else(|| Error::internal("a durable commit without the store's mark"))?;
        let next = Mark { commits, generation, open: true, closed_file: None, ..mark.last().clone() };
        mark.record(next, false)
    }

    fn set_durability(&mut self, durability: Durability) -> Result<()> {
        if durability != self.durability {
            let mode = match durability {
                Durability::Full => "FULL",
                Durability::Normal => "NORMAL",
            };
            self.conn.execute_batch(&format!("PRAGMA synchronous = {mode}"))?;
            self.durability = durability;
        }
        Ok(())
    }
}

/// Count one more committed write transaction; the new count.
fn count_commit(tx: &Transaction) -> Result<i64> {
    Ok(tx
        .prepare_cached("UPDATE store_meta SET commits = commits + 1 WHERE id = 1 RETURNING commits")?
        .query_row([], |r| r.get(0))?)
}

/// Why a store must pass `integrity_check` before it is trusted, if it
/// must: its last writer died holding it, or it was not closed cleanly,
/// or its file changed since the engine closed it.
fn doubt(took_over: bool, unclean: bool, changed: bool) -> Option<&'static str> {
    if took_over {
        Some("its last writer died holding the lease")
    } else if unclean {
        Some("its last writer did not close it cleanly")
    } else if changed {
        Some("the store file changed since the engine last closed it")
    } else {
        None
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

/// Open an existing store file (`None`: there is none, and no mark says
/// there was one) after the same ownership and symlink checks as any open;
/// `mode` is read-only or read-write, never create.
fn open_existing(files: &StoreFiles, mode: OpenFlags) -> Result<Option<Connection>> {
    files.refuse_odd_side_files()?;
    let mark = Mark::read(&files.mark).map_err(|e| e.at(files.place()))?;
    if !files.db_exists() {
        return match mark {
            Some(m) => Err(identity::missing_store(files, &m)),
            None => Ok(None),
        };
    }
    check_owned_dir(&files.dir)?;
    check_owned_file(&files.db)?;
    Ok(Some(connect(&files.db, mode)?))
}

/// A connection that waits for a busy store (from its first statement on:
/// racing openers never see "database is locked") and never checkpoints
/// when it closes, so only a writer's explicit checkpoints touch the store
/// file (what the mark's fingerprint relies on) and the WAL is never
/// deleted behind a crashed writer's back.
fn connect(path: &Path, mode: OpenFlags) -> Result<Connection> {
    let conn =
        Connection::open_with_flags(path, mode | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW)
            .map_err(|e| store_open_error(e, path))?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(|e| store_open_error(e, path))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(|e| store_open_error(e, path))?;
    Ok(conn)
}

fn configure(conn: &Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(256);
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;",
    )?;
    Ok(())
}

fn store_open_error(e: rusqlite::Error, path: &Path) -> Error {
    let e = Error::from(e);
    let e = match e.code {
        Code::StoreCorrupt | Code::StoreFull => e,
        _ => Error { message: format!("cannot open store: {}", e.message), ..e },
    };
    if e.place.is_none() {
        e.at(path.display().to_string())
    } else {
        e
    }
}

/// Name the store in a damaged-store or full-disk error that names no
/// place yet (other errors keep theirs: they are about something else).
fn located(e: Error, path: &Path) -> Error {
    match (&e.place, e.code) {
        (None, Code::StoreCorrupt | Code::StoreFull) => e.at(path.display().to_string()),
        _ => e,
    }
}

/// A failed `write()` under SQLite (`SQLITE_IOERR_*`) whose errno says
/// "no room" is `STORE_FULL`, like SQLite's own `SQLITE_FULL` (which it
/// reports only for a short write; `EFBIG` from a file size limit, or
/// `ENOSPC` on the first byte, come back as an I/O error).
fn sqlite_error(conn: &Connection, e: Error, path: &Path) -> Error {
    let io_failure = e.code == Code::Internal
        && e.details
            .get("sqlite_code")
            .and_then(|c| c.as_i64())
            .is_some_and(|c| c & 0xff == rusqlite::ffi::SQLITE_IOERR as i64);
    // SAFETY: the handle is valid while `conn` lives; sqlite3_system_errno
    // only reads the connection's last recorded errno.
    let errno = unsafe { rusqlite::ffi::sqlite3_system_errno(conn.handle()) };
    if io_failure && is_no_room(errno) {
        let why = std::io::Error::from_raw_os_error(errno);
        return Error::new(
            Code::StoreFull,
            format!("no room for the store ({why}); the transaction that did not fit was rolled back whole"),
        )
        .at(path.display().to_string());
    }
    e
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
