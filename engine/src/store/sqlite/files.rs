//! The files a store is made of — the SQLite file, its `-wal`, `-shm` and
//! `-journal`, and the mark (`mark.rs`) — and the checks every open makes on
//! them before SQLite touches any: they are regular files, not symlinks,
//! and their owners and modes are the ones the engine gave them
//! (`owner.rs`: its owner's alone, or shared with a group by its owner,
//! with the group file `<store>.group` among them).

use std::fs::{DirBuilder, File};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::owner::{self, GroupFile, Owner, Part, Seen, Wrong};
use crate::error::{Code, Error, Result};
use crate::store::access::{self, current_uid, group_record, Kind, Sharing};

/// The mark's name beside the store (`engine.db.mark`).
pub const MARK_SUFFIX: &str = ".mark";

/// SQLite's own files beside the store.
const SQLITE_SIDE: [&str; 3] = ["-wal", "-shm", "-journal"];

#[derive(Debug, Clone)]
pub struct StoreFiles {
    pub db: PathBuf,
    pub dir: PathBuf,
    pub mark: PathBuf,
}

impl StoreFiles {
    /// The files of the store at `db`, by absolute path (so every error
    /// names them in full, whatever the current folder).
    pub fn new(db: &Path) -> StoreFiles {
        let db = &std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
        let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        StoreFiles { db: db.to_path_buf(), dir, mark: with_suffix(db, MARK_SUFFIX) }
    }

    pub fn side(&self, suffix: &str) -> PathBuf {
        with_suffix(&self.db, suffix)
    }

    pub fn db_exists(&self) -> bool {
        std::fs::symlink_metadata(&self.db).is_ok()
    }

    /// The place errors about this store name.
    pub fn place(&self) -> String {
        self.db.display().to_string()
    }

    /// A folder to make a new store in must be the user's own.
    pub fn check_folder_is_yours(&self) -> Result<()> {
        let uid = Owner::of(&self.dir).map_err(|e| io_error(e, &self.dir, "cannot inspect the store folder"))?.uid;
        if uid != current_uid() {
            return Err(Error::usage(format!("the store folder is owned by uid {uid}, not by you; refused"))
                .at(self.dir.display().to_string()));
        }
        Ok(())
    }

    /// The file naming the group the store is shared with.
    pub fn group_file(&self) -> PathBuf {
        group_record(&self.db)
    }

    /// Who the store is for (`access::Sharing::of`).
    pub fn sharing(&self) -> Result<Sharing> {
        Sharing::of(&self.db)
    }

    /// Make the folder (0700) if it is missing, then check it.
    pub fn make_dir(&self) -> Result<()> {
        if std::fs::symlink_metadata(&self.dir).is_err() {
            DirBuilder::new()
                .recursive(true)
                .mode(access::FOLDER_MODE)
                .create(&self.dir)
                .map_err(|e| write_error(e, &self.dir, "cannot create store folder"))?;
        }
        check_owned_dir(&self.dir, std::fs::symlink_metadata(self.group_file()).is_ok())
    }

    /// A side file that is a symlink, or not a regular file, is refused
    /// naming it, before SQLite opens (and follows) it.
    pub fn refuse_odd_side_files(&self) -> Result<()> {
        let sides = SQLITE_SIDE.iter().map(|s| self.side(s)).chain([self.mark.clone()]);
        for side in sides {
            let Ok(meta) = std::fs::symlink_metadata(&side) else { continue };
            if meta.file_type().is_symlink() {
                return Err(Error::usage("a file of the store is a symlink; refused (nothing is written through it)")
                    .at(side.display().to_string()));
            }
            if !meta.file_type().is_file() {
                return Err(
                    Error::usage("a file of the store is not a regular file; refused").at(side.display().to_string())
                );
            }
        }
        Ok(())
    }

    /// SQLite gives `-wal`/`-shm` the store's mode; make sure of it. A
    /// shared store's are left as SQLite made them (the store's mode, the
    /// folder's group): the next open judges them, nothing repairs them.
    pub fn tighten_side_files(&self, sharing: &Sharing) {
        if let Sharing::Group(_) = sharing {
            return;
        }
        for suffix in SQLITE_SIDE {
            let side = self.side(suffix);
            // Only when the mode differs: a chmod moves the file's change
            // time, which the lease compares (`checked::Checked`).
            let wrong_mode = |m: &std::fs::Metadata| m.permissions().mode() & 0o7777 != access::FILE_MODE;
            if std::fs::symlink_metadata(&side).is_ok_and(|m| m.file_type().is_file() && wrong_mode(&m)) {
                let _ = std::fs::set_permissions(&side, std::fs::Permissions::from_mode(access::FILE_MODE));
            }
        }
    }

    /// The store's files that exist now (`seen` lists them), for the
    /// sharing to give to the group.
    pub fn existing(&self) -> Vec<PathBuf> {
        self.files().filter(|p| std::fs::symlink_metadata(p).is_ok()).collect()
    }

    /// The store file, the mark, SQLite's side files.
    fn files(&self) -> impl Iterator<Item = PathBuf> + '_ {
        [self.db.clone(), self.mark.clone()].into_iter().chain(SQLITE_SIDE.iter().map(|s| self.side(s)))
    }

    /// The store's files that exist now — the store file, the mark,
    /// SQLite's side files, the group file — and the folder, with their
    /// owners and modes.
    fn seen(&self) -> Result<Vec<Seen>> {
        let files = self.files().map(|p| (p, Part::File)).chain([(self.group_file(), Part::GroupFile)]);
        let mut seen = Vec::new();
        for (path, part) in files {
            match Owner::of(&path) {
                Ok(now) => seen.push(Seen { path, now, part }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(e, &path, "cannot inspect a file of the store")),
            }
        }
        let now = Owner::of(&self.dir).map_err(|e| io_error(e, &self.dir, "cannot inspect the store folder"))?;
        seen.push(Seen { path: self.dir.clone(), now, part: Part::Folder });
        Ok(seen)
    }

    /// Every file's owner and mode as the engine made them, `recorded` in
    /// the mark (`owner.rs`), checked before anything reads a byte of
    /// them, with the group file naming the group of gid `names` (`None`:
    /// there is none): a change is `STORE_TAMPERED` naming the file and
    /// the change; a store that is wholly another user's is refused as
    /// theirs.
    pub fn check_owners(&self, recorded: Option<Owner>, names: Option<u32>) -> Result<()> {
        let group = GroupFile { path: self.group_file(), names };
        match owner::judge(&self.seen()?, recorded, &group, current_uid()) {
            None => Ok(()),
            Some(Wrong::NotYours { path, uid }) => {
                Err(Error::usage(format!("the store is owned by uid {uid}, not by you; refused"))
                    .at(path.display().to_string()))
            }
            Some(Wrong::Changed { path, change }) => Err(Error::new(
                Code::StoreTampered,
                format!(
                    "a file of the store was changed outside the engine: {change}. Nothing was read from the store. \
                     Find out what changed it (a provider's chown or chmod?), then put it back as the engine made \
                     it (see \"A damaged store\" in docs/store.md)"
                ),
            )
            .at(path.display().to_string())
            .with_details(change.details(&path))),
        }
    }

    /// The owner and mode of the store file now: what the mark records
    /// when the engine has just made it (or judged it as made).
    pub fn owner(&self) -> Result<Owner> {
        Owner::of(&self.db).map_err(|e| io_error(e, &self.db, "cannot inspect store"))
    }
}

pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Does a flush reach the disk? Always, except under the simulator
/// (`sim`): its crashes are an engine process dying, which loses nothing
/// the kernel holds; a power loss is not what it simulates, and a flush
/// per commit would make its runs a thousand times slower.
pub fn flushes() -> bool {
    if crate::failpoint::sim::active() {
        return false;
    }
    true
}

/// Flush a folder's entries (a rename or link into it) to disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    if !flushes() {
        return Ok(());
    }
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error(e, dir, "cannot flush the store folder"))
}

/// An I/O error on a store file: `STORE_FULL` when there is no room,
/// otherwise internal; either way naming the file.
pub fn io_error(e: std::io::Error, path: &Path, what: &str) -> Error {
    crate::error::store_io(&e, what, false).at(path.display().to_string())
}

/// The same, for making or writing a file of the store: a refusal by the
/// system is `store_not_writable`.
pub fn write_error(e: std::io::Error, path: &Path, what: &str) -> Error {
    crate::error::store_io(&e, what, true).at(path.display().to_string())
}

/// The store folder is a folder of ours, not a symlink (its owner is also
/// judged with the store's files, `StoreFiles::check_owners`); a `shared`
/// one (a group file beside the store) is never closed here.
pub fn check_owned_dir(dir: &Path, shared: bool) -> Result<()> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::internal(format!("cannot inspect store folder: {e}")).at(dir.display().to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(Error::usage("the store folder is a symlink; refused (point --store at the real folder)")
            .at(dir.display().to_string()));
    }
    if access::opened_up(meta.mode())
        && !shared
        && meta.uid() == current_uid()
        && dir.file_name().is_some_and(|n| n == crate::workspace::STORE_DIR)
    {
        // Our own folder: repair group/other bits rather than leave it open
        // (a folder `--store` names may be anyone's: left as it is).
        access::owner_only(dir, Kind::Folder)?;
    }
    Ok(())
}

/// The store file is a regular file, not a symlink (its owner and mode are
/// judged with the store's other files, `StoreFiles::check_owners`).
pub fn check_store_file(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::internal(format!("cannot inspect store: {e}")).at(path.display().to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(Error::usage("the store is a symlink; refused").at(path.display().to_string()));
    }
    if !meta.file_type().is_file() {
        return Err(Error::usage("the store is not a regular file").at(path.display().to_string()));
    }
    Ok(())
}

/// Is process `pid` alive (a temporary file's maker, say)?
pub fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}
