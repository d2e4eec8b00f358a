//! The workspace boundary: expanding a task's declared inputs (paths, globs,
//! folders) to files, refusing anything that leaves the workspace — by `..`,
//! by an absolute path, or through a symlink.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// The engine's own folder inside a workspace; never an input.
pub const STORE_DIR: &str = ".engine";

/// Expanded inputs are bounded: a glob that matches more is an error, not a
/// silent cut (TigerStyle: a limit on everything).
pub use crate::limits::INPUT_FILES_MAX;

/// Expand one declared input to workspace-relative file paths (sorted).
/// A literal path that does not exist yet expands to itself: a task may
/// create its inputs' files, and the checkpoint then records them as absent.
pub fn expand_input(workspace: &Path, pattern: &str) -> Result<Vec<String>, String> {
    Expander::new(workspace)?.expand(pattern)
}

/// Expands inputs under one workspace, resolving each folder's real path
/// once (a task's ten files in one folder cost one `realpath`, not ten).
/// Short-lived on purpose: a folder swapped for a symlink later is seen by
/// the next `Expander`.
pub struct Expander {
    root: PathBuf,
    dirs: HashMap<PathBuf, PathBuf>,
    /// The metadata of the regular files expanded from a literal path (not
    /// symlinks: theirs is the link's), by relative path.
    files: HashMap<String, std::fs::Metadata>,
}

impl Expander {
    pub fn new(workspace: &Path) -> Result<Expander, String> {
        let root = std::fs::canonicalize(workspace).map_err(|e| format!("cannot resolve workspace: {e}"))?;
        Ok(Expander { root, dirs: HashMap::new(), files: HashMap::new() })
    }

    pub fn expand(&mut self, pattern: &str) -> Result<Vec<String>, String> {
        lexically_inside(pattern).map_err(str::to_string)?;
        let mut out = Vec::new();
        // `dir/**` is everything under `dir`, but the glob crate yields only
        // the folders below `dir` for it, never the files directly in `dir`:
        // expanded as the folder `dir` (or the folders a glob `dir` names).
        let (pattern, everything_under) = match pattern.strip_suffix("/**") {
            Some(dir) if !dir.is_empty() => (dir, true),
            _ if pattern == "**" => (".", true),
            _ => (pattern, false),
        };
        if pattern.contains(['*', '?', '[']) {
            // The workspace's own path is literal: a folder named `a[1]` is
            // not a character class.
            let root = glob::Pattern::escape(&self.root.to_string_lossy());
            let full = format!("{root}/{pattern}");
            let opts = glob::MatchOptions { require_literal_leading_dot: true, ..Default::default() };
            let paths = glob::glob_with(&full, opts).map_err(|e| format!("is not a valid glob: {e}"))?;
            for entry in paths {
                let path = entry.map_err(|e| format!("cannot be read: {e}"))?;
                self.collect(&path, &mut out)?;
            }
        } else {
            let path = self.root.join(normalize(pattern));
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                self.collect_known(&path, Some(meta), &mut out)?;
            } else {
                // Absent: make sure no existing ancestor is a symlink out.
                self.check_inside(&path)?;
                if !everything_under {
                    out.push(normalize(pattern));
                }
            }
        }
        if out.len() > INPUT_FILES_MAX {
            return Err(format!("matches {} files; the limit is {INPUT_FILES_MAX}", out.len()));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The metadata `expand` read of `rel`, a regular file named by a
    /// literal input (a later read need not `statx` it again).
    pub fn metadata_of(&mut self, rel: &str) -> Option<std::fs::Metadata> {
        self.files.remove(rel)
    }

    fn collect(&mut self, path: &Path, out: &mut Vec<String>) -> Result<(), String> {
        self.collect_known(path, None, out)
    }

    /// `meta`: the path's `symlink_metadata`, when the caller has it.
    fn collect_known(
        &mut self,
        path: &Path,
        meta: Option<std::fs::Metadata>,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        let file = meta.as_ref().filter(|m| m.file_type().is_file()).cloned();
        let (_real, is_dir) = self.check_inside_known(path, meta)?;
        let rel = relative(&self.root, path)?;
        if let Some(m) = file {
            self.files.insert(rel.clone(), m);
        }
        if rel.split('/').next() == Some(STORE_DIR) {
            return Ok(());
        }
        if is_dir {
            // Symlinks are followed (walkdir refuses loops), so a linked folder's
            // files are inputs under the link's path; every file is then
            // checked to resolve inside the workspace.
            for entry in walkdir::WalkDir::new(path).follow_links(true).sort_by_file_name() {
                let entry = entry.map_err(|e| format!("cannot be read: {e}"))?;
                let p = entry.path();
                if entry.file_type().is_dir() {
                    continue;
                }
                self.check_inside_known(p, None)?;
                let rel = relative(&self.root, p)?;
                if rel.split('/').next() != Some(STORE_DIR) {
                    out.push(rel);
                }
            }
        } else {
            out.push(rel);
        }
        Ok(())
    }

    /// The real path of a folder, resolved once per `Expander`.
    fn real_dir(&mut self, dir: &Path) -> Result<PathBuf, String> {
        if let Some(real) = self.dirs.get(dir) {
            return Ok(real.clone());
        }
        let real = std::fs::canonicalize(dir).map_err(|e| format!("cannot be resolved: {e}"))?;
        self.dirs.insert(dir.to_path_buf(), real.clone());
        Ok(real)
    }

    /// Resolve `path` (following symlinks, as far as it exists) and require
    /// the result to be inside the workspace. Returns the resolved path.
    fn check_inside(&mut self, path: &Path) -> Result<PathBuf, String> {
        self.check_inside_known(path, None).map(|(real, _)| real)
    }

    /// As `check_inside`, also saying whether the resolved path is a folder.
    fn check_inside_known(&mut self, path: &Path, meta: Option<std::fs::Metadata>) -> Result<(PathBuf, bool), String> {
        let meta = match meta {
            Some(m) => Ok(m),
            None => std::fs::symlink_metadata(path),
        };
        let (real, is_dir) = match meta {
            // Not a symlink itself: its real path is its folder's plus its name.
            Ok(meta) if !meta.file_type().is_symlink() => match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) => (self.real_dir(parent)?.join(name), meta.is_dir()),
                _ => {
                    let real = std::fs::canonicalize(path).map_err(|e| format!("cannot be resolved: {e}"))?;
                    let is_dir = real.is_dir();
                    (real, is_dir)
                }
            },
            Ok(_) => {
                let real = std::fs::canonicalize(path).map_err(|e| format!("cannot be resolved: {e}"))?;
                let is_dir = real.is_dir();
                (real, is_dir)
            }
            Err(_) => {
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
                (real, false)
            }
        };
        if real.starts_with(&self.root) {
            Ok((real, is_dir))
        } else {
            Err(format!("resolves through a symlink to {}, outside the workspace", real.display()))
        }
    }
}

fn relative(root: &Path, path: &Path) -> Result<String, String> {
    let rel = path.strip_prefix(root).map_err(|_| format!("{} is outside the workspace", path.display()))?;
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

/// An input must be relative and never climb above the workspace.
pub fn lexically_inside(input: &str) -> Result<(), &'static str> {
    if input.is_empty() {
        return Err("is empty");
    }
    let path = Path::new(input);
    let mut depth: i64 = 0;
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => return Err("is an absolute path"),
            // Any `..` is refused, not only one that climbs out: after a
            // symlinked folder, `link/..` is not the folder it reads as, so
            // the checkpoint would cover another file than the one named.
            Component::ParentDir => {
                depth -= 1;
                return Err(if depth < 0 {
                    "climbs out of the workspace with `..`"
                } else {
                    "uses `..`; name the path without it"
                });
            }
            Component::CurDir => {}
            Component::Normal(_) => depth += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_regular_file_keeps_the_metadata_its_expansion_read() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::write(w.join("a.txt"), "abc").unwrap();
        std::os::unix::fs::symlink("a.txt", w.join("link.txt")).unwrap();
        let mut e = Expander::new(w).unwrap();
        assert_eq!(e.expand("a.txt").unwrap(), vec!["a.txt"]);
        assert_eq!(e.metadata_of("a.txt").map(|m| m.len()), Some(3));
        assert!(e.metadata_of("a.txt").is_none(), "taken once");
        assert_eq!(e.expand("link.txt").unwrap(), vec!["link.txt"]);
        assert!(e.metadata_of("link.txt").is_none(), "a symlink's own metadata is not its target's");
        assert_eq!(e.expand("*.txt").unwrap(), vec!["a.txt", "link.txt"]);
        assert!(e.metadata_of("a.txt").is_none(), "a glob's matches are read again");
    }

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
    fn everything_under_a_folder_includes_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("tests/unit")).unwrap();
        std::fs::write(w.join("tests/a.py"), "a").unwrap();
        std::fs::write(w.join("tests/unit/b.py"), "b").unwrap();
        std::fs::write(w.join("top.txt"), "t").unwrap();
        let all = vec!["tests/a.py".to_string(), "tests/unit/b.py".to_string()];
        assert_eq!(expand_input(w, "tests/**").unwrap(), all);
        assert_eq!(expand_input(w, "./tests/**").unwrap(), all);
        assert_eq!(expand_input(w, "tes*/**").unwrap(), all);
        assert_eq!(expand_input(w, "tests/**/*.py").unwrap(), all);
        assert_eq!(expand_input(w, "**").unwrap(), vec!["tests/a.py", "tests/unit/b.py", "top.txt"]);
        assert_eq!(expand_input(w, "missing/**").unwrap(), Vec::<String>::new(), "nothing under an absent folder");
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
        assert!(expand_input(w, "a/../x").unwrap_err().contains("`..`"));
    }

    #[test]
    fn a_linked_folder_inside_is_walked_under_its_link() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("src")).unwrap();
        std::fs::create_dir_all(w.join("vendor/lib")).unwrap();
        std::fs::write(w.join("src/main.py"), "m").unwrap();
        std::fs::write(w.join("vendor/lib/m.py"), "X=1").unwrap();
        std::os::unix::fs::symlink("../vendor/lib", w.join("src/lib")).unwrap();
        assert_eq!(expand_input(w, "src").unwrap(), vec!["src/lib/m.py", "src/main.py"]);
        // A linked folder that leads out is refused, file by file.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("s"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), w.join("src/out")).unwrap();
        assert!(expand_input(w, "src").unwrap_err().contains("outside the workspace"));
    }
}
