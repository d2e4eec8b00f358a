//! Making a new store, atomically: the whole store (schema, identity, WAL
//! mode in its header) is built under a temporary name in the same folder,
//! flushed, and hard-linked into place — `link` never replaces an existing
//! file, so of several engines making the same store at once exactly one
//! places its own and the others open that one. A kill at any moment leaves
//! either no store or a complete one (plus a temporary file, which the next
//! creation sweeps away once its maker is dead).

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::files::{flushes, io_error, pid_alive, sync_dir, with_suffix, write_error, StoreFiles};
use super::fresh;
use super::open::{sqlite_error, store_open_error};
use crate::error::Result;
use crate::failpoint;

/// The name part that marks a temporary file of a store or its mark:
/// `<store>.new-<pid>-<ms>` and `<store>.mark.new-<pid>-<ms>`.
const TEMP: &str = ".new-";

/// Make the store at `files.db` unless another process makes it first.
pub fn create(files: &StoreFiles) -> Result<()> {
    let tmp = with_suffix(&files.db, &format!("{TEMP}{}-{}", std::process::id(), crate::clock::now_ms()));
    // Whatever goes wrong is about the store being made, not the temporary name.
    let placed = build(&tmp).map_err(|e| e.at(files.place())).and_then(|_| {
        failpoint::hit("store_built");
        place(&tmp, files)
    });
    remove_temp(&tmp);
    placed?;
    failpoint::hit("store_placed");
    Ok(())
}

/// A complete store at `tmp`: the schema laid in one step (`fresh.rs`: the
/// store the migrations make, without replaying them) with its rollback
/// journal in memory and no flush of its own (`synchronous=OFF`: a
/// temporary file that a crash leaves to the sweep, never linked into
/// place unflushed), then switched to WAL (which writes the mode into the
/// header), closed (which folds the WAL back), and flushed once, whole.
/// (The migrations' own commits flushed the journal, the folder and the
/// file each: a dozen flushes a new store, a tenth of a second on a busy
/// disk; bench/README.md, issue 38's fourth round.)
fn build(tmp: &Path) -> Result<()> {
    build_with(tmp, fresh::lay)
}

/// `build`, the schema made by `schema` (the tests compare the one-step
/// text with the migrations this way).
pub(super) fn build_with(tmp: &Path, schema: fn(&Connection) -> Result<()>) -> Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(tmp)
        .map_err(|e| write_error(e, tmp, "cannot create store"))?;
    super::open::process_settings();
    let conn = Connection::open_with_flags(
        tmp,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| store_open_error(e, tmp))?;
    let built = (|| -> Result<()> {
        conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA journal_mode = MEMORY;")?;
        // No page is freed on the way: a new store starts with no free
        // page (a zeroed free page is damage `verify` cannot see).
        schema(&conn)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if mode != "wal" {
            return Err(crate::error::Error::internal(format!("the new store stayed in {mode} mode")));
        }
        Ok(())
    })()
    .map_err(|e| sqlite_error(&conn, e, tmp));
    built?;
    conn.close().map_err(|(c, e)| sqlite_error(&c, e.into(), tmp))?;
    if !flushes() {
        return Ok(());
    }
    std::fs::File::open(tmp).and_then(|f| f.sync_all()).map_err(|e| io_error(e, tmp, "cannot flush the new store"))
}

/// Link `tmp` into place (another creator's store, placed first, stays).
fn place(tmp: &Path, files: &StoreFiles) -> Result<()> {
    match std::fs::hard_link(tmp, &files.db) {
        Ok(()) => {
            failpoint::hit("store_linked");
            sync_dir(&files.dir)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(write_error(e, &files.db, "cannot place the new store")),
    }
}

/// The temporary name and any file SQLite made beside it.
fn remove_temp(tmp: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(with_suffix(tmp, suffix));
    }
}

/// Remove temporary files of creations whose maker is dead (a kill
/// mid-creation); every writer's open does this.
pub fn sweep_leftovers(files: &StoreFiles) {
    let Ok(entries) = std::fs::read_dir(&files.dir) else { return };
    let prefixes: Vec<String> = [&files.db, &files.mark]
        .iter()
        .filter_map(|p| p.file_name().map(|n| format!("{}{TEMP}", n.to_string_lossy())))
        .collect();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let maker = prefixes.iter().find_map(|p| name.strip_prefix(p.as_str())).and_then(maker_pid);
        if maker.is_some_and(|pid| pid != std::process::id() as i32 && !pid_alive(pid)) {
            let _ = std::fs::remove_file(PathBuf::from(&files.dir).join(&name));
        }
    }
}

/// The pid in `<pid>-<ms>[-journal|-wal|-shm]`.
fn maker_pid(rest: &str) -> Option<i32> {
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::schema;
    use super::*;

    #[test]
    fn a_new_store_has_no_free_page() {
        let dir = tempfile::tempdir().unwrap();
        let files = StoreFiles::new(&dir.path().join("engine.db"));
        create(&files).unwrap();
        let conn = Connection::open(&files.db).unwrap();
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
        assert_eq!(free, 0);
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, schema::SCHEMA_VERSION);
    }

    #[test]
    fn leftovers_of_dead_makers_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let files = StoreFiles::new(&dir.path().join("engine.db"));
        // No process has pid 2^22 + 1 (above Linux's pid_max limit).
        let dead = 4_194_305;
        let names = [
            format!("engine.db.new-{dead}-17"),
            format!("engine.db.new-{dead}-17-journal"),
            format!("engine.db.mark.new-{dead}-18"),
            format!("engine.db.new-{}-19", std::process::id()),
            "engine.db".to_string(),
            "engine.db.mark".to_string(),
            "notes.new-1-2".to_string(),
        ];
        for n in &names {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        sweep_leftovers(&files);
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        let mut want = names[3..].to_vec();
        want.sort();
        assert_eq!(left, want);
    }
}
