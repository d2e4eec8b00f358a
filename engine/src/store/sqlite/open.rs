//! Opening a store file and what every open and commit shares: the
//! connection's settings, the schema version check, the errors SQLite
//! gives translated into the engine's (a damaged store, a full disk), and
//! the commit count the mark is kept against.

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::files::{check_owned_dir, check_store_file, StoreFiles};
use super::header;
use super::identity::{self, Verdict};
use super::mark::Mark;
use super::schema;
use super::sql::qrow;
use super::version;
use crate::error::{is_no_room, Code, Error, Result};
use crate::limits::{STORE_BUSY_TIMEOUT, STORE_STATEMENTS_CACHED};
use crate::store::access::Sharing;
use crate::store::Durability;

/// Count one more committed write transaction; the new count.
/// An UPDATE and a SELECT rather than `UPDATE … RETURNING`, which SQLite
/// runs through a temporary b-tree each time (every transaction pays it).
pub(super) fn count_commit(tx: &Connection) -> Result<i64> {
    tx.prepare_cached("UPDATE store_meta SET commits = commits + 1 WHERE id = 1")?.execute([])?;
    Ok(tx.prepare_cached("SELECT commits FROM store_meta WHERE id = 1")?.query_row([], |r| r.get(0))?)
}

/// Count a run's write transaction if the mark will record it: a `Full`
/// one (the new count, for the mark), not a `Normal` one (`None`).
/// The mark is written only after a `Full` commit and at the lease's edges
/// (which always count), and the check refuses a store holding fewer
/// commits than its mark: a store that lost a suffix of its commits holds
/// fewer exactly when the suffix took a marked commit, whether or not the
/// `Normal` commits between are counted. Counting them told the mark
/// nothing and wrote `store_meta`'s page in every commit of a `none` task.
pub(super) fn count_if_marked(tx: &Connection, durability: Durability) -> Result<Option<i64>> {
    match durability {
        Durability::Full => count_commit(tx).map(Some),
        Durability::Normal => Ok(None),
    }
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
/// the journal mode) and judge it (`version.rs`): a newer store is refused
/// untouched, damaged version bytes are `STORE_CORRUPT` naming them.
pub(super) fn schema_version(conn: &Connection, files: &StoreFiles) -> Result<i64> {
    let path = &files.db;
    let claimed = claimed_version(conn, files)?;
    if claimed == schema::SCHEMA_VERSION {
        return Ok(claimed);
    }
    let store = version::schema_of(conn).map_err(|e| located(e, path))?;
    let marked = Mark::read(&files.mark).ok().flatten().and_then(|m| m.schema);
    match version::judge(claimed, &version::matching(&store)?, marked) {
        version::Verdict::Believed => Ok(claimed),
        version::Verdict::TooNew => Err(Error::new(
            Code::SchemaTooNew,
            format!(
                "the store has schema version {claimed}; this engine knows up to {}. Use a newer engine.",
                schema::SCHEMA_VERSION
            ),
        )
        .at(path.display().to_string())),
        version::Verdict::Damaged(why) => Err(Error::new(
            Code::StoreCorrupt,
            format!("the store file's SQLite header is damaged: {why} (see \"A damaged store\" in docs/store.md)"),
        )
        .at(path.display().to_string())),
    }
}

/// The schema version the store file's header claims, not yet judged.
pub(super) fn claimed_version(conn: &Connection, files: &StoreFiles) -> Result<i64> {
    qrow(conn, "PRAGMA user_version", [], |r| r.get(0)).map_err(|e| store_open_error(e, &files.db))
}

/// The store's files as every open finds them, before SQLite reads a byte.
pub(super) enum Found {
    /// No store file, and no mark says there was one.
    Nothing,
    /// A store file, whose files passed, shared as its group file says.
    Store(Sharing),
}

/// What every open checks before SQLite reads a byte of the store, in
/// order (`engine verify` included): the group file is read (a folder
/// closed to this user is named as that); the side files and the mark are
/// regular files, not symlinks; the folder is not a symlink; a store file
/// is there unless no mark says there was one; the owners and modes of
/// the files are the ones the engine gave them (recorded in the mark:
/// `STORE_TAMPERED` naming a change, the group file's and the group it
/// names included); the mark is intact; the store file's header is
/// SQLite's as the engine writes it (`header.rs`).
pub(super) fn check_files(files: &StoreFiles) -> Result<Found> {
    // No folder at all: no store, and no mark that says there was one (a
    // `--store` in a folder not made yet; `open_rw` makes it).
    if std::fs::symlink_metadata(&files.dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(Found::Nothing);
    }
    let sharing = files.sharing();
    // A group file that is there but cannot be used (made unreadable, or
    // naming a group the system lost) is judged with the store's files
    // first, as the mark records it: a chmod is named as that change.
    let group_file_there = std::fs::symlink_metadata(files.group_file()).is_ok();
    if !group_file_there {
        sharing.as_ref().map_err(Clone::clone)?;
    }
    files.refuse_odd_side_files()?;
    check_owned_dir(&files.dir, group_file_there)?;
    let mark = Mark::read(&files.mark).map_err(|e| e.at(files.place()));
    if !files.db_exists() {
        return match mark? {
            Some(m) => Err(identity::missing_store(files, &m)),
            None => Ok(Found::Nothing),
        };
    }
    check_store_file(&files.db)?;
    // A mark made unreadable by a chmod is named as that change first.
    let recorded = mark.as_ref().ok().and_then(|m| m.as_ref()).and_then(|m| m.owner);
    let names = match &sharing {
        Ok(Sharing::Group(g)) => Some(g.gid),
        Ok(Sharing::Owner) => None,
        Err(_) => recorded.and_then(|r| r.shared()),
    };
    files.check_owners(recorded, names)?;
    mark?;
    let sharing = sharing?;
    header::check(&files.db)?;
    Ok(Found::Store(sharing))
}

/// Open an existing store file (`None`: there is none, and no mark says
/// there was one) after the checks every open makes (`check_files`);
/// `mode` is read-only or read-write, never create.
pub(super) fn open_existing(files: &StoreFiles, mode: OpenFlags) -> Result<Option<Connection>> {
    match check_files(files)? {
        Found::Nothing => Ok(None),
        Found::Store(_) => Ok(Some(connect(&files.db, mode)?)),
    }
}

/// What every open checks once SQLite has the file, before anything else
/// reads it (`engine verify` included): the schema version (a newer store
/// refused untouched, damaged version bytes named: `version.rs`), then the store against its mark (`identity.rs`: a
/// store that lost commits, or another store in its place, refused).
pub(super) fn judge(conn: &Connection, files: &StoreFiles) -> Result<(i64, Verdict)> {
    let version = schema_version(conn, files)?;
    let (verdict, _, _) = identity::verify(conn, files)?;
    Ok((version, verdict))
}

/// A store SQLite could open only for reading, though the engine asked to
/// write it: its owner and mode allow writing (checked before), so the
/// system refuses this process — a read-only file system, or a sandbox
/// (Landlock, as the engine puts its own providers in) or a security
/// module. Named as that, before any write fails as "readonly database".
pub(super) fn refuse_unwritable(conn: &Connection, files: &StoreFiles) -> Result<()> {
    if !conn.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(false) {
        return Ok(());
    }
    let tried = std::fs::OpenOptions::new().read(true).write(true).open(&files.db);
    let why = match tried.as_ref().map_err(|e| e.raw_os_error()) {
        Err(Some(libc::EROFS)) => "it is on a read-only file system".to_string(),
        Err(Some(libc::EACCES | libc::EPERM)) => "the system refuses this process writes to it although its owner \
            and mode allow them: a sandbox (Landlock: is this engine running as another engine's provider?) or \
            a security module denies them"
            .to_string(),
        Err(_) => {
            format!("it cannot be opened for writing ({})", tried.err().map(|e| e.to_string()).unwrap_or_default())
        }
        Ok(_) => "SQLite opened it read-only".to_string(),
    };
    Err(Error::usage(format!(
        "this process may not write the store: {why}. Nothing was written; run the engine where it may write \
         its store, or give it another (--store PATH)"
    ))
    .at(files.place())
    .with_details(serde_json::json!({"reason": "store_not_writable"})))
}

/// SQLite's settings for the whole process, made once before its first
/// connection (every opener here calls this first): no memory statistics
/// (`SQLITE_CONFIG_MEMSTATUS`, on by default), which the engine never
/// reads (it sets no soft heap limit) and which took a process-wide mutex
/// around every one of SQLite's allocations — about a tenth of a
/// simulated seed's instructions (callgrind, `engine-sim`). Too late (a
/// connection of other code opened first), SQLite refuses it with
/// `SQLITE_MISUSE` and keeps counting: nothing else changes.
pub(super) fn process_settings() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config is called once, before this process opens
        // a connection through the engine (the `Once` above holds every
        // other opener back until it returns); it only sets a flag.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::os::raw::c_int);
        }
    });
}

/// A connection that waits for a busy store (from its first statement on:
/// racing openers never see "database is locked") and never checkpoints
/// when it closes, so only a writer's explicit checkpoints touch the store
/// file (what the mark's fingerprint relies on) and the WAL is never
/// deleted behind a crashed writer's back.
pub(super) fn connect(path: &Path, mode: OpenFlags) -> Result<Connection> {
    process_settings();
    let flags = mode | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    // Each commit's WAL frames in one write (`walbuf.rs`); without the
    // VFS (no "unix" to wrap), SQLite's own writes.
    let conn = match super::walbuf::registered() {
        true => Connection::open_with_flags_and_vfs(path, flags, super::walbuf::VFS_NAME),
        false => Connection::open_with_flags(path, flags),
    }
    .map_err(|e| store_open_error(e, path))?;
    conn.busy_timeout(STORE_BUSY_TIMEOUT).map_err(|e| store_open_error(e, path))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(|e| store_open_error(e, path))?;
    map_store_file(&conn).map_err(|e| store_open_error(e, path))?;
    Ok(conn)
}

/// Reads of the store file through a memory map (`STORE_MAP_BYTES_MAX`):
/// a no-op re-run reads about 2,300 pages of a 1,000-task store, each a
/// `pread`, a copy and a page of this connection's cache. Writes still go
/// through `pwrite` to the WAL (this SQLite is built without
/// `SQLITE_MMAP_READWRITE`), so the commits, the flushes and the store
/// file's fingerprint (`checked.rs`, the mark) are as before. SQLite maps
/// only what the file holds and maps again when a checkpoint grows it;
/// the one new failure is the kernel's: a read error of the disk, or the
/// file cut short by something other than SQLite while mapped, ends the
/// process with `SIGBUS` (a crash, as `SIGKILL` is one) instead of
/// `STORE_CORRUPT` or an I/O error (docs/store.md, "What it cannot
/// detect").
fn map_store_file(conn: &Connection) -> rusqlite::Result<()> {
    let bytes = crate::limits::STORE_MAP_BYTES_MAX;
    conn.execute_batch(&format!("PRAGMA mmap_size = {bytes}"))
}

/// The commits after which a ledger connection reads the store by copy
/// again (`unmap_store_file`). A no-op re-run commits about eight times
/// and keeps the map; a run that does work commits twice a task.
pub(super) const MAPPED_COMMITS: u32 = 64;

/// Reads by copy from here on. Through the map, SQLite looks every page it
/// fetches up in the WAL's index first, even a page its own cache holds,
/// and that look walks every frame of the page in the index's block: the
/// pages a run writes at every commit (its goal's, the attempts' last
/// leaves) hold hundreds, and the look was 7.7 % of a 300-task chain's
/// instructions (callgrind). By copy, a page in the connection's cache
/// is taken from it without the look. Outside a transaction (after a
/// commit); a refusal leaves the map on, which costs only that time.
pub(super) fn unmap_store_file(conn: &Connection) {
    let _ = conn.execute_batch("PRAGMA mmap_size = 0");
}

pub(super) fn configure(conn: &Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STORE_STATEMENTS_CACHED);
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;",
    )?;
    if !super::files::flushes() {
        conn.execute_batch("PRAGMA synchronous = OFF")?;
    }
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

#[cfg(test)]
mod tests {
    use rusqlite::OpenFlags;

    #[test]
    fn a_ledger_connection_reads_the_store_file_through_a_map() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.db");
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn = super::connect(&path, flags).unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
        let mapped: i64 = conn.query_row("PRAGMA mmap_size", [], |r| r.get(0)).unwrap();
        assert_eq!(mapped as u64, crate::limits::STORE_MAP_BYTES_MAX);
        assert_eq!(conn.query_row("SELECT x FROM t", [], |r| r.get::<_, i64>(0)).unwrap(), 1);
    }

    /// A writer keeps the map for its first `MAPPED_COMMITS` commits (a
    /// no-op re-run's), then reads by copy; what it wrote reads the same.
    #[test]
    fn a_writer_reads_by_copy_after_its_mapped_commits() {
        use crate::store::events::{Event, EventKind};
        use crate::store::Durability;
        let dir = tempfile::tempdir().unwrap();
        let mut db = super::super::Db::open_rw(&dir.path().join("store/engine.db")).unwrap();
        let fence = db.acquire_lease().unwrap().fence;
        let mapped = |db: &super::super::Db| db.conn.query_row("PRAGMA mmap_size", [], |r| r.get::<_, i64>(0)).unwrap();
        let event = |n: u32| Event::store(EventKind::RunStopping, serde_json::json!({"n": n}));
        for n in 1..super::MAPPED_COMMITS {
            db.write(fence, Durability::Normal, |tx| tx.append_event(&event(n)).map(|_| ())).unwrap();
        }
        assert_eq!(mapped(&db) as u64, crate::limits::STORE_MAP_BYTES_MAX, "mapped until the last counted commit");
        db.begin_group();
        db.write(fence, Durability::Normal, |tx| tx.append_event(&event(64)).map(|_| ())).unwrap();
        db.commit_group(fence).unwrap();
        assert_eq!(mapped(&db), 0, "a group's commit counts too");
        db.write(fence, Durability::Full, |tx| tx.append_event(&event(65)).map(|_| ())).unwrap();
        let n: i64 =
            db.conn.query_row("SELECT COUNT(*) FROM events WHERE kind = 'run_stopping'", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 65);
        db.release_lease(fence).unwrap();
    }
}
