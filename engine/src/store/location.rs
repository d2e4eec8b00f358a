//! Where a store lives. Provider processes may write the workspace (the
//! sandbox allows it, and a Landlock rule on a folder covers everything
//! beneath it), so the default store is kept outside it, in a per-user
//! state folder keyed by the workspace's canonical path:
//!
//! `${XDG_STATE_HOME:-~/.local/state}/engine/stores/<key>/engine.db`,
//! `<key>` = the first 32 hex digits of BLAKE3
//! `derive_key("engine store key v1", canonical workspace path bytes)`.
//!
//! Beside the store, a `workspace` file records the canonical path the key
//! was made from; a store whose file names another path is refused (a key
//! collision, or a state folder copied from elsewhere). `--store PATH` and
//! `ENGINE_STORE` still choose a store explicitly. A command without a plan
//! finds its store by searching upward from the current folder (or
//! `--workspace DIR`): for each ancestor, its key and that store.
//!
//! An old store inside the workspace (`.engine/engine.db`, where earlier
//! engines kept it) is never used on its own: a provider could have
//! written it. When no store is found and one is there, the error says so
//! and how to use it on purpose.

use std::fs::DirBuilder;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::limits::STORE_SEARCH_DEPTH_MAX;

use super::access::{self, Kind};
use super::STORE_FILE;

/// The folders under the state home that hold the stores.
const STORES_DIR: [&str; 2] = ["engine", "stores"];

/// Beside a default store: the canonical workspace path it belongs to.
pub const WORKSPACE_FILE: &str = "workspace";

/// Where earlier engines kept a workspace's store (never used on its own).
pub const LEGACY_DIR: &str = crate::workspace::STORE_DIR;

/// How a store's place was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chosen {
    /// `--store PATH`.
    Flag,
    /// `ENGINE_STORE`.
    Env,
    /// The workspace's own store in the state folder.
    Default { workspace: PathBuf },
}

/// A store's path and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub chosen: Chosen,
}

impl Location {
    /// `--store`, else `ENGINE_STORE`, else `None`.
    fn explicit(flag: Option<&Path>) -> Option<Location> {
        if let Some(p) = flag {
            return Some(Location { path: p.to_path_buf(), chosen: Chosen::Flag });
        }
        std::env::var_os("ENGINE_STORE")
            .filter(|p| !p.is_empty())
            .map(|p| Location { path: PathBuf::from(p), chosen: Chosen::Env })
    }

    /// The store of a command that names its workspace (`run`, `revise`):
    /// explicit, or the workspace's default store (which may not exist
    /// yet). `workspace` is canonical.
    pub fn for_workspace(flag: Option<&Path>, workspace: &Path) -> Result<Location> {
        if let Some(l) = Location::explicit(flag) {
            return Ok(l);
        }
        let path = default_for(workspace)?;
        Ok(Location { path, chosen: Chosen::Default { workspace: workspace.to_path_buf() } })
    }

    /// The store of a command without a plan: explicit, or the nearest
    /// ancestor of `start` (itself first) that has a default store. `Ok(None)`:
    /// no store for `start` or any folder above it.
    pub fn find(flag: Option<&Path>, start: &Path) -> Result<Option<Location>> {
        if let Some(l) = Location::explicit(flag) {
            return Ok(Some(l));
        }
        let start = start.canonicalize().map_err(|e| {
            Error::usage(format!("cannot look for a store from this folder: {e}")).at(start.display().to_string())
        })?;
        let home = state_home()?;
        // A folder, not only its file: a store whose file was deleted is
        // found (and refused as damaged by its mark), never skipped over.
        for dir in start.ancestors().take(STORE_SEARCH_DEPTH_MAX) {
            let folder = home.join(key(dir));
            if std::fs::symlink_metadata(&folder).is_ok() {
                let path = folder.join(STORE_FILE);
                return Ok(Some(Location { path, chosen: Chosen::Default { workspace: dir.to_path_buf() } }));
            }
        }
        Ok(None)
    }

    /// A shared PostgreSQL store (`postgres://…`): not a path, so none of
    /// the file rules (its folder, its `workspace` file, a `.gitignore`)
    /// applies to it.
    pub fn shared(&self) -> bool {
        super::is_shared(&self.path)
    }

    /// Before a default store is opened: its `workspace` file must name
    /// the workspace it was found for (`create`: write it when missing,
    /// with the store's folders made 0700). Before an explicit store is
    /// opened for writing inside a git worktree: a `.gitignore` of `*`
    /// beside it, so the ledger is never committed by accident.
    pub fn prepare(&self, create: bool) -> Result<()> {
        if self.shared() {
            return Ok(());
        }
        match &self.chosen {
            Chosen::Default { workspace } => self.claim(workspace, create),
            Chosen::Flag | Chosen::Env if create => ignore_in_git(&self.path),
            Chosen::Flag | Chosen::Env => Ok(()),
        }
    }

    /// Remove the temporary files engines killed while making this store
    /// left behind (their second names would keep the sandbox from
    /// protecting the folder).
    pub fn sweep_leftovers(&self) {
        if self.shared() {
            return;
        }
        if let Some(dir) = self.path.parent().filter(|d| d.is_dir()) {
            super::Store::sweep_leftovers(&self.path);
            if matches!(self.chosen, Chosen::Default { .. }) {
                sweep_dead_makers(&dir.join(WORKSPACE_FILE));
            }
        }
    }

    fn claim(&self, workspace: &Path, create: bool) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        let file = dir.join(WORKSPACE_FILE);
        // Nothing is read or written through a symlinked folder.
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::usage("the store folder is a symlink; refused (point --store at the real folder)")
                .at(dir.display().to_string()));
        }
        let recorded = match std::fs::read(&file) {
            Ok(bytes) => {
                keep_private(dir)?;
                bytes
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                make_private_dirs(dir)?;
                keep_private(dir)?;
                record_workspace(&file, workspace)?
            }
            // A store made by hand without the file: nothing to compare.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(
                    Error::usage(format!("cannot read the store's workspace file: {e}")).at(file.display().to_string())
                )
            }
        };
        if recorded != workspace.as_os_str().as_bytes() {
            return Err(Error::usage(format!(
                "the store at {} belongs to workspace {}, not {}: refused (a store is never shared by two workspaces); pass --store to choose a store",
                self.path.display(),
                String::from_utf8_lossy(&recorded),
                workspace.display()
            ))
            .at(file.display().to_string()));
        }
        Ok(())
    }
}

/// Write `file` whole, or find it written whole by another engine that
/// raced this one (built under a temporary name, renamed into place); the
/// bytes it holds now.
fn record_workspace(file: &Path, workspace: &Path) -> Result<Vec<u8>> {
    let failed = |e: std::io::Error| {
        crate::error::store_io(&e, "cannot record the store's workspace", true).at(file.display().to_string())
    };
    sweep_dead_makers(file);
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(access::FILE_MODE)
        .open(&tmp)
        .map_err(failed)?;
    let linked =
        f.write_all(workspace.as_os_str().as_bytes()).and_then(|_| f.sync_all()).and_then(|_| rename_new(&tmp, file));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(workspace.as_os_str().as_bytes().to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read(file).map_err(failed),
        Err(e) => Err(failed(e)),
    }
}

/// `from` renamed to `to` only if `to` does not exist (`AlreadyExists`
/// otherwise): never two names for one file, which the sandbox refuses
/// in the store's folder.
fn rename_new(from: &Path, to: &Path) -> std::io::Result<()> {
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that outlive the call.
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The temporary files of engines killed while they recorded the
/// workspace (`workspace.tmp.PID` whose process is gone).
fn sweep_dead_makers(file: &Path) {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else { return };
    let prefix = format!("{}.tmp.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = n.strip_prefix(&prefix).and_then(|p| p.parse::<i32>().ok()) else { continue };
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The key of a (canonical) workspace path.
pub fn key(workspace: &Path) -> String {
    let k = blake3::derive_key("engine store key v1", workspace.as_os_str().as_bytes());
    blake3::Hash::from(k).to_hex()[..32].to_string()
}

/// `$XDG_STATE_HOME/engine/stores`, or `~/.local/state/engine/stores`. A
/// relative `XDG_STATE_HOME` is ignored, as the XDG spec says.
pub fn state_home() -> Result<PathBuf> {
    let xdg = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    let base = match (xdg, home) {
        (Some(x), _) => x,
        (None, Some(h)) => h.join(".local").join("state"),
        (None, None) => {
            return Err(Error::usage(
                "no place for the store: neither XDG_STATE_HOME nor HOME is set to an absolute path; pass --store PATH or set ENGINE_STORE",
            ))
        }
    };
    Ok(STORES_DIR.iter().fold(base, |p, d| p.join(d)))
}

/// The default store of a canonical workspace path.
pub fn default_for(workspace: &Path) -> Result<PathBuf> {
    Ok(state_home()?.join(key(workspace)).join(STORE_FILE))
}

/// An old store inside `dir` or one of its ancestors (`.engine/engine.db`).
pub fn legacy_near(start: &Path) -> Option<PathBuf> {
    let start = start.canonicalize().ok()?;
    start
        .ancestors()
        .take(STORE_SEARCH_DEPTH_MAX)
        .map(|d| d.join(LEGACY_DIR).join(STORE_FILE))
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

/// What to say when no store was found for `start`.
pub fn not_found(start: &Path, then: &str) -> Error {
    let mut message = format!("no store for {} or the folders above it: {then}", start.display());
    if let Some(old) = legacy_near(start) {
        message.push_str(&legacy_hint(&old));
    }
    Error::usage(message)
}

/// `STORE_NOT_FOUND`: no store at `path` (neither its file nor a mark that
/// says there was one), for a command that never makes one. A folder the
/// engine hides from its providers (an empty read-only file system over
/// it) is named as that: the command runs as another engine's provider.
pub fn no_store_at(path: &Path) -> Error {
    // The first folder above it that is there (the stores' root is hidden
    // whole: the store's own folder is then not there at all).
    let there = path.ancestors().skip(1).find(|d| std::fs::symlink_metadata(d).is_ok());
    let hidden = there.is_some_and(hidden_from_providers);
    let why = match hidden {
        true => format!(
            "no store at {}: its folder is an empty read-only file system, as an engine hides its stores from \
             the providers it runs (is this command running as another engine's provider?); run it outside \
             that engine's tasks",
            path.display()
        ),
        false => format!(
            "no store at {}: only `engine run PLAN` makes a store (check the path, or run the plan first with \
             --store {})",
            path.display(),
            path.display()
        ),
    };
    Error::new(crate::error::Code::StoreNotFound, why).at(path.display().to_string())
}

/// Is `dir` an empty read-only tmpfs: a stores folder hidden by the
/// sandbox's mount namespace (`providers::sandbox::namespaces`)?
fn hidden_from_providers(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c` is a NUL-terminated path; `fs` and `vfs` are plain data
    // the calls write.
    let (mut fs, mut vfs): (libc::statfs, libc::statvfs) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 || unsafe { libc::statvfs(c.as_ptr(), &mut vfs) } != 0 {
        return false;
    }
    let read_only = vfs.f_flag & libc::ST_RDONLY != 0;
    // `f_type`'s width is the architecture's (`long`).
    #[allow(clippy::unnecessary_cast)]
    let tmpfs = fs.f_type as i64 == TMPFS_MAGIC;
    read_only && tmpfs && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// The sentence about an old store in a workspace.
pub fn legacy_hint(old: &Path) -> String {
    format!(
        ". There is an old store at {}: this engine no longer uses a store inside a workspace on its own, because a provider process could have written it. To read it, pass --store {}; to go on with it, move its folder out of the workspace and pass --store NEW_FOLDER/{STORE_FILE}",
        old.display(),
        old.display()
    )
}

/// A default store's folder and the stores' root above it are the
/// owner's alone (`access`): checked, and closed again if opened up.
fn keep_private(dir: &Path) -> Result<()> {
    if let Some(root) = dir.parent() {
        access::owner_only(root, Kind::Folder)?;
    }
    access::owner_only(dir, Kind::Folder)?;
    let file = dir.join(WORKSPACE_FILE);
    if std::fs::symlink_metadata(&file).is_ok() {
        access::owner_only(&file, Kind::File)?;
    }
    Ok(())
}

/// Every missing folder from the state home down, 0700.
fn make_private_dirs(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(access::FOLDER_MODE)
        .create(dir)
        .map_err(|e| crate::error::store_io(&e, "cannot create the store's folder", true).at(dir.display().to_string()))
}

/// A store's folder inside a git worktree gets a `.gitignore` of `*`.
fn ignore_in_git(store: &Path) -> Result<()> {
    let Ok(abs) = std::path::absolute(store) else { return Ok(()) };
    let Some(dir) = abs.parent() else { return Ok(()) };
    let in_git = dir.ancestors().take(STORE_SEARCH_DEPTH_MAX).any(|d| d.join(".git").exists());
    let ignore = dir.join(".gitignore");
    if !in_git || std::fs::symlink_metadata(&ignore).is_ok() {
        return Ok(());
    }
    make_private_dirs(dir)?;
    std::fs::write(&ignore, "*\n").map_err(|e| {
        crate::error::store_io(&e, "cannot write the store folder's .gitignore", true).at(ignore.display().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_derived_from_the_path_bytes() {
        let k = key(Path::new("/home/a/proj"));
        assert_eq!(k.len(), 32);
        assert!(k.chars().all(|c| c.is_ascii_hexdigit()));
        let expected = blake3::Hash::from(blake3::derive_key("engine store key v1", b"/home/a/proj")).to_hex();
        assert_eq!(k, &expected[..32]);
        assert_ne!(k, key(Path::new("/home/a/proj2")));
        assert_ne!(k, key(Path::new("/home/a/proj/")), "canonical paths have no trailing slash");
    }
}
