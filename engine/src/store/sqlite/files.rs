//! The files a store is made of — the SQLite file, its `-wal`, `-shm` and
//! `-journal`, and the mark (`mark.rs`) — and the checks every open makes on
//! them before SQLite touches any: the folder and files are ours and
//! private (or, for a store its owner shared with a group, that group's
//! and no one else's: `access::Sharing`), and not symlinks.

use std::fs::{DirBuilder, File};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{is_no_room, Code, Error, Result};
use crate::store::access::{self, Kind, Sharing};

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

    /// Who the store is for (`access::Sharing::of`).
    pub fn sharing(&self) -> Result<Sharing> {
        Sharing::of(&self.db)
    }

    /// Make the folder (0700) if it is missing, then check it.
    pub fn make_dir(&self, sharing: &Sharing) -> Result<()> {
        if std::fs::symlink_metadata(&self.dir).is_err() {
            DirBuilder::new()
                .recursive(true)
                .mode(access::FOLDER_MODE)
                .create(&self.dir)
                .map_err(|e| io_error(e, &self.dir, "cannot create store folder"))?;
        }
        check_owned_dir(&self.dir, sharing)
    }

    /// A side file that is a symlink, or not a regular file, is refused
    /// naming it, before SQLite opens (and follows) it; so is another
    /// user's, unless the store is shared with a group (any member's
    /// engine makes them then: `access::check` judges their group and mode).
    pub fn refuse_odd_side_files(&self, sharing: &Sharing) -> Result<()> {
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
            match sharing {
                Sharing::Owner if meta.uid() != access::current_uid() => {
                    return Err(Error::usage(format!(
                        "a file of the store is owned by uid {}, not by you; refused",
                        meta.uid()
                    ))
                    .at(side.display().to_string()));
                }
                Sharing::Owner => {}
                Sharing::Group(_) => access::check(&side, Kind::File, sharing)?,
            }
        }
        Ok(())
    }

    /// SQLite gives `-wal`/`-shm` the store's mode; make sure of it (a
    /// group store's: the group's, 0660).
    pub fn tighten_side_files(&self, sharing: &Sharing) {
        for suffix in SQLITE_SIDE {
            let side = self.side(suffix);
            if std::fs::symlink_metadata(&side).is_ok_and(|m| m.file_type().is_file()) {
                let _ = match sharing {
                    Sharing::Owner => {
                        std::fs::set_permissions(&side, std::fs::Permissions::from_mode(access::FILE_MODE))
                            .map_err(Error::from)
                    }
                    Sharing::Group(_) => access::check(&side, Kind::File, sharing),
                };
            }
        }
    }
}

pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Flush a folder's entries (a rename or link into it) to disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error(e, dir, "cannot flush the store folder"))
}

/// An I/O error on a store file: `STORE_FULL` when there is no room,
/// otherwise internal; either way naming the file.
pub fn io_error(e: std::io::Error, path: &Path, what: &str) -> Error {
    let code = if e.raw_os_error().is_some_and(is_no_room) { Code::StoreFull } else { Code::Internal };
    Error::new(code, format!("{what}: {e}")).at(path.display().to_string())
}

pub fn check_owned_dir(dir: &Path, sharing: &Sharing) -> Result<()> {
    if let Sharing::Group(_) = sharing {
        return access::check(dir, Kind::Folder, sharing);
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::internal(format!("cannot inspect store folder: {e}")).at(dir.display().to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(Error::usage("the store folder is a symlink; refused (point --store at the real folder)")
            .at(dir.display().to_string()));
    }
    if meta.uid() != access::current_uid() {
        return Err(Error::usage(format!("the store folder is owned by uid {}, not by you; refused", meta.uid()))
            .at(dir.display().to_string()));
    }
    if access::opened_up(meta.mode()) && dir.file_name().is_some_and(|n| n == crate::workspace::STORE_DIR) {
        // Our own folder: repair group/other bits rather than leave it open
        // (a folder `--store` names may be anyone's: left as it is).
        access::owner_only(dir, Kind::Folder)?;
    }
    Ok(())
}

pub fn check_owned_file(path: &Path, sharing: &Sharing) -> Result<()> {
    access::check(path, Kind::File, sharing)
}

/// Is process `pid` alive (a temporary file's maker, say)?
pub fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}
