//! The SQLite ledger: one file (by default `.engine/engine.db` in the
//! workspace), opened with checked permissions, migrated, in WAL mode. The
//! only code in the engine that names `rusqlite` or writes SQL.
//!
//! `Db` opens, migrates and runs transactions; `Sql` is a connection (or a
//! transaction) seen through the ledger's traits, implemented by aggregate
//! in the files beside this one. Beside the store file, its mark
//! (`mark.rs`) keeps the store's identity and commit count outside SQLite,
//! so a store that lost commits is refused (`identity.rs`); a new store is
//! made whole or not at all (`create.rs`); `files.rs` owns the paths and
//! their permissions.

mod acts;
mod attempts;
mod columns;
mod create;
mod events;
mod evidence;
pub mod files;
mod goals;
pub mod identity;
mod inspect;
mod lease;
pub mod mark;
mod schema;
pub mod verify;

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use super::lease::{Acquired, Fence, Holder};
use super::{Durability, LedgerRead, LedgerTx};
use crate::error::{is_no_room, Code, Error, Result};
use crate::limits::{STORE_BUSY_TIMEOUT, STORE_STATEMENTS_CACHED};
use crate::state::Lifecycle;
use files::{check_owned_dir, check_owned_file, StoreFiles};
use identity::Verdict;
use mark::{Mark, MarkFile};

pub use schema::SCHEMA_VERSION;

pub(super) struct Db {
    conn: Connection,
    files: StoreFiles,
    durability: Durability,
    /// The mark, open for updates while this process holds the lease.
    mark: Option<MarkFile>,
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
    /// Open for writing, making the store (atomically, `create.rs`) if there
    /// is none — unless its mark says one existed: a lost store is refused,
    /// never made again. The folder is 0700, the files 0600; symlinks and
    /// other users' files are refused.
    pub fn open_rw(path: &Path) -> Result<Db> {
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
        Ok(Db { conn, files, durability: Durability::Normal, mark: None })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet. A store that lost commits is
    /// refused; one not known to be whole is checked first.
    pub fn open_ro(path: &Path) -> Result<Option<Db>> {
        let files = StoreFiles::new(path);
        let path = &files.db.clone();
        // Read-write flags so WAL readers can use the shared memory file;
        // this handle never writes (no lease, no write).
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
        let db = Db { conn, files, durability: Durability::Normal, mark: None };
        if let Verdict::Marked { unclean, changed } = verdict {
            // A live writer's store is in motion, not damaged: not checked.
            let dead_writer = unclean && lease::live_holder(&db.conn)?.is_none();
            if let Some(why) = doubt(false, dead_writer, changed) {
                identity::integrity(&db.conn, path, why)?;
            }
        }
        Ok(Some(db))
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
    /// the commit, fsynced when `durability` is `Full`. Every transaction
    /// counts itself in `store_meta.commits`; a `Full` one is then recorded
    /// in the mark before the caller acts on it. A transaction that does not
    /// fit on the disk is rolled back whole: `STORE_FULL`.
    /// Each commit is counted for `ENGINE_CRASH_AFTER_COMMITS` (a testing aid).
    pub fn write<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        f: impl FnOnce(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        let result = self.write_counted(fence, durability, f);
        result.map_err(|e| located(sqlite_error(&self.conn, e, &self.files.db), &self.files.db))
    }

    fn write_counted<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        f: impl FnOnce(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        self.set_durability(durability)?;
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        lease::check_fence(&tx, fence)?;
        let value = f(&mut Sql { conn: &tx, fence: Some(fence) })?;
        let commits = count_commit(&tx)?;
        tx.commit()?;
        if durability == Durability::Full {
            self.mark_commit(commits, fence.generation())?;
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

    pub fn acquire_lease(&mut self) -> Result<Acquired> {
        lease::acquire(self)
    }

    pub fn release_lease(&mut self, fence: Fence) -> Result<()> {
        lease::release(self, fence)
    }

    pub fn live_holder(&self) -> Result<Option<Holder>> {
        lease::live_holder(&self.conn)
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
    conn.busy_timeout(STORE_BUSY_TIMEOUT).map_err(|e| store_open_error(e, path))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(|e| store_open_error(e, path))?;
    Ok(conn)
}

fn configure(conn: &Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STORE_STATEMENTS_CACHED);
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
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull => Error::new(
                Code::StoreFull,
                format!("the store's disk is full ({e}); the transaction that did not fit was rolled back whole"),
            ),
            // SQLite's extended code rides along, so the store can tell a
            // failed write() (SQLITE_IOERR_*) apart and ask why (errno).
            rusqlite::Error::SqliteFailure(f, _) => Error::internal(format!("store error: {e}"))
                .with_details(serde_json::json!({"sqlite_code": f.extended_code})),
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
