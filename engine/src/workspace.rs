//! The workspace boundary: expanding a task's declared inputs (paths, globs,
//! folders) to files, refusing anything that leaves the workspace — by `..`,
//! by an absolute path, or through a symlink.

use std::path::{Path, PathBuf};

use crate::plan::validate::lexically_inside;

/// The engine's own folder inside a workspace; never an input.
pub const STORE_DIR: &str = ".engine";

/// Expanded inputs are bounded: a glob that matches more is an error, not a
/// silent cut (TigerStyle: a limit on everything).
pub const INPUT_FILES_MAX: usize = 1_000_000;

/// Expand one declared input to workspace-relative file paths (sorted).
/// A literal path that does not exist yet expands to itself: a task may
/// create its inputs' files, and the checkpoint then records them as absent.
pub fn expand_input(workspace: &Path, pattern: &str) -> Result<Vec<String>, String> {
    lexically_inside(pattern).map_err(str::to_string)?;
    let root = std::fs::canonicalize(workspace).map_err(|e| format!("cannot resolve workspace: {e}"))?;
    let mut out = Vec::new();
    if pattern.contains(['*', '?', '[']) {
        let full = root.join(pattern);
        let opts = glob::MatchOptions { require_literal_leading_dot: true, ..Default::default() };
        let paths = glob::glob_with(&full.to_string_lossy(), opts).map_err(|e| format!("is not a valid glob: {e}"))?;
        for entry in paths {
            let path = entry.map_err(|e| format!("cannot be read: {e}"))?;
            collect(&root, &path, &mut out)?;
        }
    } else {
        let path = root.join(normalize(pattern));
        if std::fs::symlink_metadata(&path).is_ok() {
            collect(&root, &path, &mut out)?;
        } else {
            // Absent: make sure no existing ancestor is a symlink out.
            check_inside(&root, &path)?;
            out.push(normalize(pattern));
        }
    }
    if out.len() > INPUT_FILES_MAX {
        return Err(format!("matches {} files; the limit is {INPUT_FILES_MAX}", out.len()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn collect(root: &Path, path: &Path, out: &mut Vec<String>) -> Result<(), String> {
    let real = check_inside(root, path)?;
    let rel = relative(root, path)?;
    if rel.split('/').next() == Some(STORE_DIR) {
        return Ok(());
    }
    if real.is_dir() {
        for entry in walkdir::WalkDir::new(path).follow_links(false).sort_by_file_name() {
            let entry = entry.map_err(|e| format!("cannot be read: {e}"))?;
            let p = entry.path();
            if entry.file_type().is_dir() {
                if p.file_name().is_some_and(|n| n == STORE_DIR) {
                    continue;
                }
                continue;
            }
            let real = check_inside(root, p)?;
            if real.is_dir() {
                // A symlink to a folder inside the workspace: its files are
                // reached through their own path, not twice.
                continue;
            }
            let rel = relative(root, p)?;
            if rel.split('/').next() != Some(STORE_DIR) {
                out.push(rel);
            }
        }
    } else {
        out.push(rel);
    }
    Ok(())
}

/// Resolve `path` (following symlinks, as far as it exists) and require the
/// result to be inside `root`. Returns the resolved path.
fn check_inside(root: &Path, path: &Path) -> Result<PathBuf, String> {
    // Resolve the longest existing ancestor; the rest cannot be a symlink.
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut real = std::fs::canonicalize(&existing).map_err(|e| format!("cannot be resolved: {e}"))?;
    for name in rest.into_iter().rev() {
        real.push(name);
    }
    if real.starts_with(root) {
        Ok(real)
    } else {
        Err(format!("resolves through a symlink to {}, outside the workspace", real.display()))
    }
}

fn relative(root: &Path, path: &Path) -> Result<String, String> {
    let rel = path
        .strip_prefix(root)
        .map_err(|_| format!("{} is outside the workspace", path.display()))?;
    Ok(rel.to_string_lossy().replace('\\', "/"))
}

/// `./a//b` → `a/b`; `a/../b` → `b` (lexically; already checked inside).
fn normalize(pattern: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_glob_and_folder_expand_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("src/sub")).unwrap();
        std::fs::write(w.join("src/b.py"), "b").unwrap();
        std::fs::write(w.join("src/a.py"), "a").unwrap();
        std::fs::write(w.join("src/sub/c.txt"), "c").unwrap();
        assert_eq!(expand_input(w, "src/*.py").unwrap(), vec!["src/a.py", "src/b.py"]);
        assert_eq!(expand_input(w, "src").unwrap(), vec!["src/a.py", "src/b.py", "src/sub/c.txt"]);
        assert_eq!(expand_input(w, "./src//a.py").unwrap(), vec!["src/a.py"]);
        assert_eq!(expand_input(w, "new/file.txt").unwrap(), vec!["new/file.txt"]);
    }

    #[test]
    fn escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::os::unix::fs::symlink(outside.path(), w.join("out")).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        assert!(expand_input(w, "../x").is_err());
        assert!(expand_input(w, "/etc/passwd").is_err());
        assert!(expand_input(w, "out/secret").unwrap_err().contains("symlink"));
        assert!(expand_input(w, "out/*").unwrap_err().contains("symlink"));
        assert!(expand_input(w, "out/not-yet").unwrap_err().contains("symlink"));
        assert!(expand_input(w, "a/../../x").is_err());
    }
}
