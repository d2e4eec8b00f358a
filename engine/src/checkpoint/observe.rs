//! Observing a task's checkpoint now: its inputs expanded and hashed
//! (through the file-state cache), its context values read.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::{Checkpoint, FileCache};
use crate::digest::{Digester, Kind};
use crate::plan::{ContextSource, Task};
use crate::workspace;

/// Observe a task's checkpoint now, through `cache`. `secrets` are the
/// plan's secret variable names: their values are recorded only as digests.
pub fn observe(
    workspace_dir: &Path,
    task: &Task,
    secrets: &[String],
    cache: &mut FileCache,
) -> Result<Checkpoint, String> {
    let mut files = BTreeMap::new();
    let mut expander = workspace::Expander::new(workspace_dir)?;
    for input in &task.inputs {
        for rel in expander.expand(input)? {
            let digest =
                cache.digest(&workspace_dir.join(&rel)).map_err(|e| format!("cannot read input {rel}: {e}"))?;
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
            ContextSource::Command(argv) => super::context::command_value(workspace_dir, argv),
        };
        context.insert(name.clone(), value);
    }
    let digest = Digester::new(Kind::Checkpoint).json("files", &json!(files)).json("context", &json!(context)).finish();
    Ok(Checkpoint { files, context, digest })
}
