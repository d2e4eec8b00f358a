//! The default stores in the state folder (`location::state_home()`), one
//! folder each, as `engine stores` lists and prunes them: what each folder
//! holds, read without a write to any store, and the removal of one whole.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::access::{self, Kind};
use super::attempts::Unsettled;
use super::location::WORKSPACE_FILE;
use super::{Store, STORE_FILE};
use crate::error::{Error, Result};
use crate::limits::STORES_LISTED_MAX;

/// One store's folder and what it holds.
#[derive(Debug, Clone)]
pub struct StoreFolder {
    pub folder: PathBuf,
    /// The workspace its `workspace` file records (`None`: no such file,
    /// or one that cannot be read).
    pub workspace: Option<PathBuf>,
    pub workspace_exists: bool,
    /// Every file in the folder, together.
    pub bytes: u64,
    /// When an engine last wrote it (ms since the epoch): the newest
    /// modification time of its files but SQLite's `-shm`, which readers
    /// write too.
    pub last_written_ms: Option<i64>,
    /// Its unsettled operations, or why they could not be read.
    pub unsettled: std::result::Result<Unsettled, String>,
    /// The pid of a live engine holding its lease.
    pub in_use_by: Option<i64>,
}

impl StoreFolder {
    pub fn store(&self) -> PathBuf {
        self.folder.join(STORE_FILE)
    }
}

/// The stores under `root` (the state folder's `engine/stores`), by folder
/// name, at most `STORES_LISTED_MAX`; and how many more there were. The
/// root is checked to be the owner's alone first (and closed if opened up).
pub fn list(root: &Path) -> Result<(Vec<StoreFolder>, usize)> {
    if std::fs::symlink_metadata(root).is_err() {
        return Ok((Vec::new(), 0));
    }
    access::owner_only(root, Kind::Folder)?;
    let entries = std::fs::read_dir(root)
        .map_err(|e| Error::usage(format!("cannot list the stores: {e}")).at(root.display().to_string()))?;
    let mut folders: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| is_key(&e.file_name().to_string_lossy()))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    folders.sort();
    let left_out = folders.len().saturating_sub(STORES_LISTED_MAX);
    folders.truncate(STORES_LISTED_MAX);
    let stores = folders.into_iter().map(|f| examine(&f)).collect::<Result<Vec<_>>>()?;
    Ok((stores, left_out))
}

/// A store folder's name: a key (`location::key`), 32 hex digits.
fn is_key(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What one folder holds. Its folder and `workspace` file are made the
/// owner's alone as every open of a store makes them; the ledger's own
/// files are judged when the store is opened (a changed owner or mode is
/// `STORE_TAMPERED`, never repaired in silence: `sqlite/owner.rs`).
fn examine(folder: &Path) -> Result<StoreFolder> {
    access::owner_only(folder, Kind::Folder)?;
    let workspace = std::fs::read(folder.join(WORKSPACE_FILE)).ok().map(|bytes| {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(std::ffi::OsString::from_vec(bytes))
    });
    let workspace_exists = workspace.as_deref().is_some_and(still_there);
    let (mut bytes, mut last_written_ms) = (0u64, None::<i64>);
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() {
            if entry.file_name() == WORKSPACE_FILE {
                access::owner_only(&entry.path(), Kind::File)?;
            }
            bytes = bytes.saturating_add(meta.len());
            // SQLite's shared-memory file changes on every read: not a write.
            if entry.file_name().to_string_lossy().ends_with("-shm") {
                continue;
            }
            let ms = meta.mtime().saturating_mul(1000).saturating_add(meta.mtime_nsec() / 1_000_000);
            last_written_ms = Some(last_written_ms.map_or(ms, |m| m.max(ms)));
        }
    }
    let (unsettled, in_use_by) = read_ledger(&folder.join(STORE_FILE));
    Ok(StoreFolder {
        folder: folder.to_path_buf(),
        workspace,
        workspace_exists,
        bytes,
        last_written_ms,
        unsettled,
        in_use_by,
    })
}

/// Is a workspace folder still there? Only a path that is not found (or
/// runs through a file) counts as gone: one that cannot be looked at says
/// nothing, and counts as there.
fn still_there(workspace: &Path) -> bool {
    match std::fs::metadata(workspace) {
        Ok(meta) => meta.is_dir(),
        // ENOTDIR by number: `ErrorKind::NotADirectory` is newer than the
        // Rust this package supports (Cargo.toml's rust-version).
        Err(e) => !(e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)),
    }
}

/// The unsettled operations of the store at `path` and the live holder of
/// its lease, read only. A folder without a store file holds nothing.
fn read_ledger(path: &Path) -> (std::result::Result<Unsettled, String>, Option<i64>) {
    let store = match Store::open_ro(path) {
        Ok(Some(store)) => store,
        Ok(None) => return (Ok(Unsettled::default()), None),
        Err(e) => return (Err(format!("{}: {}", e.code.as_str(), e.message)), None),
    };
    let holder = store.live_holder().ok().flatten().map(|h| h.pid);
    let unsettled =
        store.snapshot(|l| l.unsettled_operations()).map_err(|e| format!("{}: {}", e.code.as_str(), e.message));
    (unsettled, holder)
}

/// Remove a store's folder whole (never through a symlink).
pub fn remove(folder: &Path) -> Result<()> {
    access::owner_only(folder, Kind::Folder)?;
    std::fs::remove_dir_all(folder)
        .map_err(|e| Error::usage(format!("cannot remove the store's folder: {e}")).at(folder.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_key_named_folders_are_stores() {
        assert!(is_key("0123456789abcdef0123456789ABCDEF"));
        assert!(!is_key("0123456789abcdef0123456789abcde"));
        assert!(!is_key("notes"));
        assert!(!is_key("0123456789abcdef0123456789abcdeg"));
    }
}
