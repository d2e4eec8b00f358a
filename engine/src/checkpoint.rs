//! Checkpoints: the observed state of a task's declared inputs (globs
//! expanded, sorted, each file's BLAKE3) plus declared context values.
//! Validations are judged against a checkpoint; reuse compares them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::digest::{Digester, Kind};
use crate::plan::{ContextSource, Task};
use crate::workspace;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Workspace-relative path → content digest (`None`: absent).
    pub files: BTreeMap<String, Option<String>>,
    /// Context name → value (or `digest:<hex>` for secrets).
    pub context: BTreeMap<String, String>,
    pub digest: String,
}

impl Checkpoint {
    /// The first path whose digest differs between two checkpoints.
    pub fn first_difference(&self, other: &Checkpoint) -> Option<String> {
        let mut paths: Vec<&String> = self.files.keys().chain(other.files.keys()).collect();
        paths.sort();
        paths.dedup();
        for p in paths {
            if self.files.get(p) != other.files.get(p) {
                return Some(p.clone());
            }
        }
        let mut names: Vec<&String> = self.context.keys().chain(other.context.keys()).collect();
        names.sort();
        names.dedup();
        names.into_iter().find(|n| self.context.get(*n) != other.context.get(*n)).map(|n| format!("context:{n}"))
    }
}

/// Observe a task's checkpoint now. `secrets` are the plan's secret
/// variable names: their values are recorded only as digests.
pub fn observe(workspace_dir: &Path, task: &Task, secrets: &[String]) -> Result<Checkpoint, String> {
    let mut files = BTreeMap::new();
    for input in &task.inputs {
        for rel in workspace::expand_input(workspace_dir, input)? {
            let digest = match std::fs::read(workspace_dir.join(&rel)) {
                Ok(bytes) => Some(blake3::hash(&bytes).to_hex().to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(format!("cannot read input {rel}: {e}")),
            };
            files.insert(rel, digest);
        }
    }
    let mut context = BTreeMap::new();
    for (name, source) in &task.context {
        let value = match source {
            ContextSource::Env { env } => {
                let v = std::env::var(env).unwrap_or_default();
                if secrets.contains(env) {
                    format!("digest:{}", blake3::hash(v.as_bytes()).to_hex())
                } else {
                    v
                }
            }
            ContextSource::Command(argv) => run_context_command(workspace_dir, argv),
        };
        context.insert(name.clone(), value);
    }
    let digest = Digester::new(Kind::Checkpoint)
        .json("files", &json!(files))
        .json("context", &json!(context))
        .finish();
    Ok(Checkpoint { files, context, digest })
}

/// A context command's trimmed stdout (bounded), or a marker of failure.
fn run_context_command(workspace_dir: &Path, argv: &[String]) -> String {
    let Some((prog, args)) = argv.split_first() else { return "error: empty argv".into() };
    match std::process::Command::new(prog).args(args).current_dir(workspace_dir).env_remove("ENGINE_STORE").output() {
        Ok(out) => {
            let mut s = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if s.is_empty() {
                s = String::from_utf8_lossy(&out.stderr).trim().to_string();
            }
            s.chars().take(4096).collect()
        }
        Err(e) => format!("error: {e}"),
    }
}
