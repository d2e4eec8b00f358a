//! `engine init [DIR]`: a starter plan a person can run at once and then
//! change — a command task, an agent-json task (with the small POSIX sh
//! agent it uses), validations, an acceptance check and budgets — and the
//! plan's JSON Schema for editors. Existing files are never overwritten.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Code, Error, Result};

/// The starter plan (`engine run` takes it to `satisfied` as it is).
pub const PLAN: &str = include_str!("plan.json");
/// The stand-in agent its second task runs.
pub const AGENT: &str = include_str!("agent.sh");

/// What `init` wrote.
pub struct Written {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

/// The files, their contents and modes, in the order they are written.
fn files() -> Vec<(&'static str, String, u32)> {
    let schema = format!("{}\n", serde_json::to_string_pretty(&crate::plan::schema()).unwrap_or_default());
    vec![
        ("plan.json", PLAN.to_string(), 0o644),
        ("agent.sh", AGENT.to_string(), 0o755),
        ("plan.schema.json", schema, 0o644),
    ]
}

/// Write the starter into `dir` (created if missing). If any of its files
/// exists already, nothing is written and the error names them.
pub fn write(dir: &Path) -> Result<Written> {
    let files = files();
    let taken: Vec<String> = files
        .iter()
        .map(|(name, _, _)| dir.join(name))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !taken.is_empty() {
        return Err(Error::usage(format!(
            "{} already {}; init never overwrites a file: choose another folder (`engine init DIR`) or move {}",
            taken.join(", "),
            if taken.len() == 1 { "exists" } else { "exist" },
            if taken.len() == 1 { "it" } else { "them" }
        ))
        .at(dir.display().to_string()));
    }
    std::fs::create_dir_all(dir).map_err(|e| cannot(dir, &e))?;
    let mut written = Vec::new();
    for (name, text, mode) in files {
        let path = dir.join(name);
        if let Err(e) = create_new(&path, &text, mode) {
            // Whole or nothing: take back what this call wrote.
            for p in &written {
                let _ = std::fs::remove_file(p);
            }
            return Err(cannot(&path, &e));
        }
        written.push(path);
    }
    Ok(Written { dir: dir.to_path_buf(), files: written })
}

/// A new file (`O_EXCL`: one made since the check above is not replaced).
fn create_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

fn cannot(path: &Path, e: &std::io::Error) -> Error {
    Error::new(Code::UsageError, format!("cannot write {}: {e}", path.display())).at(path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_plan_is_a_valid_plan_without_warnings() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path()).unwrap();
        let plan = crate::plan::Plan::load(&dir.path().join("plan.json"), None).unwrap();
        let warnings = crate::plan::probe::check(&dir.path().join("plan.json"), &plan).unwrap();
        assert_eq!(warnings, vec![], "the starter teaches by example: no trap in it");
        assert_eq!(plan.file.schema.as_deref(), Some("plan.schema.json"));
    }

    #[test]
    fn the_starter_shows_where_a_network_is_declared() {
        let plan: serde_json::Value = serde_json::from_str(PLAN).unwrap();
        assert_eq!(plan["providers"]["agent"]["network"], serde_json::json!({"connect": []}), "{PLAN}");
    }

    #[test]
    fn init_refuses_to_overwrite_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("agent.sh"), "mine").unwrap();
        let e = write(dir.path()).err().unwrap();
        assert_eq!(e.code, Code::UsageError);
        assert!(e.message.contains("agent.sh") && e.message.contains("never overwrites"), "{}", e.message);
        assert!(e.message.contains("agent.sh already exists;") && e.message.ends_with("or move it"), "{}", e.message);
        assert_eq!(std::fs::read_to_string(dir.path().join("agent.sh")).unwrap(), "mine");
        assert!(!dir.path().join("plan.json").exists(), "nothing written when one file is taken");
    }
}
