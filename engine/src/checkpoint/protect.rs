//! Observing the goal's protected paths now: every file their globs expand
//! to (a literal path that does not exist is recorded as absent, so its
//! creation is seen), hashed through the file-state cache. The result is a
//! checkpoint without context values, stored like any other.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Checkpoint, FileCache};
use crate::workspace;

/// The protected paths (`globs`, from every checkable constraint) as they
/// are now.
pub fn observe_protected(workspace_dir: &Path, globs: &[String], cache: &mut FileCache) -> Result<Checkpoint, String> {
    observe_protected_with(workspace::Expander::new(workspace_dir)?, workspace_dir, globs, cache)
}

/// As `observe_protected`, through `expander` (one the caller made under
/// the workspace's real path, resolved once for the run:
/// `Expander::resolved`). A file's metadata is read once, by its
/// expansion, and handed to the cache.
pub fn observe_protected_with(
    mut expander: workspace::Expander,
    workspace_dir: &Path,
    globs: &[String],
    cache: &mut FileCache,
) -> Result<Checkpoint, String> {
    let mut files = BTreeMap::new();
    let mut found = Vec::new();
    for glob in globs {
        found.clear();
        expander.expand_observed(glob, &mut found).map_err(|e| format!("protected path `{glob}` {e}"))?;
        for (rel, known) in found.drain(..) {
            let digest = with_mode(&workspace_dir.join(&rel), known, cache)
                .map_err(|e| format!("cannot read protected file {rel}: {e}"))?;
            files.insert(rel, digest);
        }
    }
    Ok(Checkpoint::of(files, BTreeMap::new()))
}

/// The entry of a protected file at `path` (`known`: its metadata, when
/// its expansion read it): its content through `cache` and its mode
/// (`super::mode`), from one `statx`; `None`: absent.
fn with_mode(path: &Path, known: Option<std::fs::Metadata>, cache: &mut FileCache) -> std::io::Result<Option<String>> {
    use std::os::unix::fs::MetadataExt;
    let meta = match known.map_or_else(|| std::fs::metadata(path), Ok) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mode = meta.mode();
    Ok(cache.digest_known(path, Some(meta))?.map(|d| super::mode::with_mode(d, mode)))
}

/// Every file in the workspace as it is now, added to `files` (a path
/// already there is left as it is): what an
/// attempt is judged against for undeclared writes
/// (`decide::declared`). Symlinks are not followed: a link is recorded by
/// its target's text, a FIFO, socket or device by its kind, so neither a
/// link out of the workspace nor a pipe stops the look. The engine's own
/// folder (`.engine`: the store writes there while the attempt runs, and
/// the sandbox keeps providers out of it) is not walked. Regular files are
/// hashed through the file-state cache: a look costs a `statx` a file
/// (relative to its open folder, not a walk of the whole path) and a hash
/// only for a file that changed.
pub fn observe_workspace(
    workspace_dir: &Path,
    cache: &mut FileCache,
    files: &mut BTreeMap<String, Option<String>>,
) -> Result<(), String> {
    let unreadable = |e: std::io::Error| format!("the workspace cannot be read: {e}");
    // Folders still to read: (path, workspace-relative path with a
    // trailing `/`, empty at the top).
    let mut folders: Vec<(std::path::PathBuf, String)> = vec![(workspace_dir.to_path_buf(), String::new())];
    let (mut seen, mut walked) = (0usize, Vec::new());
    while let Some((dir, prefix)) = folders.pop() {
        // One buffer for the folder's entries' paths: no allocation a file.
        let mut path = dir.clone();
        for entry in std::fs::read_dir(&dir).map_err(unreadable)? {
            let entry = entry.map_err(unreadable)?;
            let name = entry.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| format!("{} is not a UTF-8 path in the workspace", entry.path().display()))?;
            let rel = format!("{prefix}{name}");
            let kind = entry.file_type().map_err(|e| format!("cannot read {rel}: {e}"))?;
            if kind.is_dir() {
                if !(prefix.is_empty() && name == workspace::STORE_DIR) {
                    folders.push((entry.path(), format!("{rel}/")));
                }
                continue;
            }
            seen += 1;
            if seen > crate::limits::INPUT_FILES_MAX {
                return Err(format!("the workspace holds more than {} files", crate::limits::INPUT_FILES_MAX));
            }
            if files.contains_key(&rel) {
                // Observed already as a protected path (as inputs expand): kept
                // as it was, so the two looks agree on it.
                continue;
            }
            path.push(name);
            let digest = look(&entry, &path, kind, cache).map_err(|e| format!("cannot read {rel}: {e}"));
            path.pop();
            walked.push((rel, digest?));
        }
    }
    add_walked(files, walked);
    Ok(())
}

/// `walked` (paths `files` lacks) added to `files`: sorted and built in one
/// pass when `files` is small beside it (the protected paths beside a whole
/// workspace), not inserted one by one.
fn add_walked(files: &mut BTreeMap<String, Option<String>>, mut walked: Vec<(String, Option<String>)>) {
    if files.len() >= walked.len() {
        files.extend(walked);
        return;
    }
    walked.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let protected = std::mem::replace(files, walked.into_iter().collect());
    files.extend(protected);
}

/// One entry of the workspace (not a folder) at `path`: a regular file by
/// its content (through `cache`, with the metadata read relative to its
/// folder), a link by its target's text, anything else by its kind; a
/// file or special file with its mode (`super::mode`: a `chmod` is a
/// change). A link has no mode of its own on Linux (a `chmod` of one
/// changes its target): its entry is marked as a link instead, and a
/// special file's names its kind, so no swap of kinds compares equal.
fn look(
    entry: &std::fs::DirEntry,
    path: &Path,
    kind: std::fs::FileType,
    cache: &mut FileCache,
) -> std::io::Result<Option<String>> {
    use std::os::unix::fs::MetadataExt;
    if kind.is_symlink() {
        let target = std::fs::read_link(path)?;
        let digest = crate::digest::content(format!("symlink:{}", target.display()).as_bytes());
        return Ok(Some(super::mode::link(digest)));
    }
    let meta = entry.metadata()?;
    let mode = meta.mode();
    if kind.is_file() {
        return Ok(cache.digest_known(path, Some(meta))?.map(|d| super::mode::with_mode(d, mode)));
    }
    // The digest's text is what older looks recorded (std's `FileType`
    // Debug, the same for every special kind); the kind is in the mark.
    let digest = crate::digest::content(format!("special:{kind:?}").as_bytes());
    Ok(Some(super::mode::special(digest, &special_kind(kind, meta.rdev()), mode)))
}

/// A special file's kind, and a device's number (a device swapped for
/// another is a change).
fn special_kind(kind: std::fs::FileType, rdev: u64) -> String {
    use std::os::unix::fs::FileTypeExt;
    match () {
        _ if kind.is_fifo() => "fifo".to_string(),
        _ if kind.is_socket() => "socket".to_string(),
        _ if kind.is_char_device() => format!("char {rdev}"),
        _ if kind.is_block_device() => format!("block {rdev}"),
        _ => "other".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_changes_creations_and_deletions_under_the_globs() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("tests/unit")).unwrap();
        std::fs::write(ws.join("tests/a.py"), "a").unwrap();
        std::fs::write(ws.join("tests/unit/b.py"), "b").unwrap();
        std::fs::write(ws.join("money.py"), "m").unwrap();
        let globs = vec!["tests/**".to_string(), "pyproject.toml".to_string()];
        let mut cache = FileCache::default();
        let before = observe_protected(ws, &globs, &mut cache).unwrap();
        let paths: Vec<&str> = before.files.keys().map(String::as_str).collect();
        assert_eq!(paths, vec!["pyproject.toml", "tests/a.py", "tests/unit/b.py"]);
        assert_eq!(before.files["pyproject.toml"], None, "absent, recorded as absent");
        std::fs::write(ws.join("pyproject.toml"), "[x]").unwrap();
        std::fs::remove_file(ws.join("tests/unit/b.py")).unwrap();
        std::fs::write(ws.join("tests/a.py"), "A").unwrap();
        let after = observe_protected(ws, &globs, &mut cache).unwrap();
        assert_ne!(after.digest, before.digest);
        assert!(after.files["pyproject.toml"].is_some());
        assert!(!after.files.contains_key("tests/unit/b.py"));
        assert_ne!(after.files["tests/a.py"], before.files["tests/a.py"]);
        // Outside the workspace is refused, never read.
        assert!(observe_protected(ws, &["../x".to_string()], &mut cache).is_err());
    }

    #[test]
    fn the_workspace_is_seen_whole_links_unfollowed_and_the_store_folder_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".engine")).unwrap();
        std::fs::write(ws.join(".git/commondir"), "../evil").unwrap();
        std::fs::write(ws.join(".engine/store.db"), "ledger").unwrap();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("out")).unwrap();
        let mut cache = FileCache::default();
        let mut files = BTreeMap::new();
        observe_workspace(ws, &mut cache, &mut files).unwrap();
        let paths: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(paths, vec![".git/commondir", "a.txt", "out"]);
        // A link retargeted is a change.
        std::fs::remove_file(ws.join("out")).unwrap();
        std::os::unix::fs::symlink("/tmp", ws.join("out")).unwrap();
        let mut again = BTreeMap::new();
        observe_workspace(ws, &mut cache, &mut again).unwrap();
        assert_ne!(files["out"], again["out"]);
        assert_eq!(files["a.txt"], again["a.txt"]);
    }

    /// A `chmod` is seen by both looks (content unchanged), a link's target
    /// by its text alone.
    #[test]
    fn a_mode_change_is_seen_by_the_walk_and_the_protected_look() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        std::fs::set_permissions(ws.join("a.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let globs = vec!["a.txt".to_string()];
        let mut cache = FileCache::default();
        let (mut walked, protected) = (BTreeMap::new(), observe_protected(ws, &globs, &mut cache).unwrap());
        observe_workspace(ws, &mut cache, &mut walked).unwrap();
        let entry = walked["a.txt"].clone().unwrap();
        assert_eq!(protected.files["a.txt"].as_deref(), Some(entry.as_str()), "the two looks agree");
        assert_eq!(super::super::mode::split(&entry), (blake3::hash(b"a").to_hex().as_str(), Some("0644")));
        std::fs::set_permissions(ws.join("a.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut again = BTreeMap::new();
        observe_workspace(ws, &mut cache, &mut again).unwrap();
        let now = observe_protected(ws, &globs, &mut cache).unwrap();
        assert_eq!(
            again["a.txt"].as_deref().map(super::super::mode::split),
            Some((entry.split(';').next().unwrap(), Some("0755")))
        );
        assert_eq!(now.files["a.txt"], again["a.txt"]);
        assert_ne!(now.digest, protected.digest);
    }
}
