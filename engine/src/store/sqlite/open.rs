//! Opening a store file and what every open and commit shares: the
//! connection's settings, the schema version check, the errors SQLite
//! gives translated into the engine's (a damaged store, a full disk), and
//! the commit count the mark is kept against.

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::files::{check_owned_dir, check_owned_file, StoreFiles};
use super::identity;
use super::mark::Mark;
use super::schema;
use crate::error::{is_no_room, Code, Error, Result};
use crate::limits::{STORE_BUSY_TIMEOUT, STORE_STATEMENTS_CACHED};

/// Count one more committed write transaction; the new count.
/// An UPDATE and a SELECT rather than `UPDATE … RETURNING`, which SQLite
/// runs through a temporary b-tree each time (every transaction pays it).
pub(super) fn count_commit(tx: &Connection) -> Result<i64> {
    tx.prepare_cached("UPDATE store_meta SET commits = commits + 1 WHERE id = 1")?.execute([])?;
    Ok(tx.prepare_cached("SELECT commits FROM store_meta WHERE id = 1")?.query_row([], |r| r.get(0))?)
}

/// Why a store must pass `integrity_check` before it is trusted, if it
/// must: its last writer died holding it, or it was not closed cleanly,
/// or its file changed since the engine closed it.
pub(super) fn doubt(took_over: bool, unclean: bool, changed: bool) -> Option<&'static str> {
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
pub(super) fn refuse_newer_schema(conn: &Connection, path: &Path) -> Result<i64> {
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
pub(super) fn open_existing(files: &StoreFiles, mode: OpenFlags) -> Result<Option<Connection>> {
    let sharing = files.sharing()?;
    files.refuse_odd_side_files(&sharing)?;
    let mark = Mark::read(&files.mark).map_err(|e| e.at(files.place()))?;
    if !files.db_exists() {
        return match mark {
            Some(m) => Err(identity::missing_store(files, &m)),
            None => Ok(None),
        };
    }
    check_owned_dir(&files.dir, &sharing)?;
    check_owned_file(&files.db, &sharing)?;
    Ok(Some(connect(&files.db, mode)?))
}

/// A connection that waits for a busy store (from its first statement on:
/// racing openers never see "database is locked") and never checkpoints
/// when it closes, so only a writer's explicit checkpoints touch the store
/// file (what the mark's fingerprint relies on) and the WAL is never
/// deleted behind a crashed writer's back.
pub(super) fn connect(path: &Path, mode: OpenFlags) -> Result<Connection> {
    let conn =
        Connection::open_with_flags(path, mode | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW)
            .map_err(|e| store_open_error(e, path))?;
    conn.busy_timeout(STORE_BUSY_TIMEOUT).map_err(|e| store_open_error(e, path))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(|e| store_open_error(e, path))?;
    Ok(conn)
}

pub(super) fn configure(conn: &Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STORE_STATEMENTS_CACHED);
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;",
    )?;
    Ok(())
}

pub(super) fn store_open_error(e: rusqlite::Error, path: &Path) -> Error {
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
pub(super) fn located(e: Error, path: &Path) -> Error {
    match (&e.place, e.code) {
        (None, Code::StoreCorrupt | Code::StoreFull) => e.at(path.display().to_string()),
        _ => e,
    }
}

/// A failed `write()` under SQLite (`SQLITE_IOERR_*`) whose errno says
/// "no room" is `STORE_FULL`, like SQLite's own `SQLITE_FULL` (which it
/// reports only for a short write; `EFBIG` from a file size limit, or
/// `ENOSPC` on the first byte, come back as an I/O error).
pub(super) fn sqlite_error(conn: &Connection, e: Error, path: &Path) -> Error {
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
