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
    let mut files = BTreeMap::new();
    let mut expander = workspace::Expander::new(workspace_dir)?;
    for glob in globs {
        for rel in expander.expand(glob).map_err(|e| format!("protected path `{glob}` {e}"))? {
            let digest = cache
                .digest(&workspace_dir.join(&rel))
                .map_err(|e| format!("cannot read protected file {rel}: {e}"))?;
            files.insert(rel, digest);
        }
    }
    Ok(Checkpoint::of(files, BTreeMap::new()))
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
}
