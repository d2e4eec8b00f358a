//! The edge of `engine check`'s warnings: the machine's answers (is a
//! program on PATH, does an input match a file) and the one fact the typed
//! plan loses (which tasks wrote `effect`). `warnings` decides; this looks.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::warnings::{self, Probe, Warning};
use super::Plan;
use crate::error::Result;
use crate::workspace::Expander;

/// The warnings of a loaded plan, read from `path` again for what serde's
/// defaults hide (a missing `effect`).
pub fn check(path: &Path, plan: &Plan) -> Result<Vec<Warning>> {
    let bytes = super::load::read_plan_bytes(path)?;
    let declared = effect_declared(&bytes);
    let env = Environment::of(&plan.workspace);
    Ok(warnings::warnings(&plan.file, &declared, &env))
}

/// For each task, in file order: did it write an `effect` key? (Everything
/// else is skipped unread; a plan that parsed once parses here too, and if
/// it somehow does not, every task counts as declared: no false warning.)
pub fn effect_declared(bytes: &[u8]) -> Vec<bool> {
    #[derive(Deserialize)]
    struct Tasks {
        #[serde(default)]
        tasks: Vec<EffectKey>,
    }
    #[derive(Deserialize)]
    struct EffectKey {
        #[serde(default)]
        effect: Option<IgnoredAny>,
    }
    match serde_json::from_slice::<Tasks>(bytes) {
        Ok(t) => t.tasks.iter().map(|k| k.effect.is_some()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The machine the plan is checked on: its PATH and the workspace.
pub struct Environment {
    workspace: PathBuf,
    path: Option<OsString>,
}

impl Environment {
    pub fn of(workspace: &Path) -> Environment {
        Environment { workspace: workspace.to_path_buf(), path: std::env::var_os("PATH") }
    }
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Probe for Environment {
    fn finds_executable(&self, program: &str) -> bool {
        if program.contains('/') {
            // Tasks start in the workspace: a relative path is read from there.
            return is_executable_file(&self.workspace.join(program));
        }
        let Some(path) = &self.path else { return false };
        std::env::split_paths(path).any(|dir| is_executable_file(&dir.join(program)))
    }

    fn matches_a_file(&self, input: &str) -> bool {
        let Ok(mut expander) = Expander::new(&self.workspace) else { return false };
        // A literal path that is absent expands to itself: look for it.
        expander.expand(input).is_ok_and(|files| files.iter().any(|f| self.workspace.join(f).exists()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_declared_follows_file_order_and_ignores_values() {
        let plan = br#"{"version": 1, "tasks": [{"ref": "a", "effect": "none"}, {"ref": "b"},
            {"ref": "c", "effect": {"odd": [1, 2]}}]}"#;
        assert_eq!(effect_declared(plan), vec![true, false, true]);
        assert_eq!(effect_declared(b"not json"), Vec::<bool>::new());
    }

    #[test]
    fn programs_are_found_on_path_or_in_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let tool = bin.path().join("my-tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(ws.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(ws.path().join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let env = Environment { workspace: ws.path().to_path_buf(), path: Some(bin.path().as_os_str().to_owned()) };
        assert!(env.finds_executable("my-tool"));
        assert!(!env.finds_executable("no-such-tool"));
        assert!(!env.finds_executable("./run.sh"), "not executable");
        std::fs::set_permissions(ws.path().join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(env.finds_executable("./run.sh"));
        assert!(!env.finds_executable("./missing.sh"));
    }

    #[test]
    fn inputs_match_files_by_path_folder_or_glob() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::fs::create_dir(ws.path().join("empty")).unwrap();
        std::fs::write(ws.path().join("src/a.py"), "").unwrap();
        let env = Environment { workspace: ws.path().to_path_buf(), path: None };
        assert!(env.matches_a_file("src/a.py"));
        assert!(env.matches_a_file("src"));
        assert!(env.matches_a_file("src/*.py"));
        assert!(!env.matches_a_file("src/*.rs"));
        assert!(!env.matches_a_file("missing.txt"));
        assert!(!env.matches_a_file("empty"));
    }
}
