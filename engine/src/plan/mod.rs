//! Plan files: the model, loading with exact error places, structural
//! validation, and the digests that give tasks and goals their identity.

pub mod adapters;
pub mod bounds;
pub mod digests;
pub mod load;
pub mod model;
mod observe;
pub mod probe;
pub mod suggest;
pub mod validate;
pub mod warnings;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Code, Error, Result};
use crate::workspace;
pub use digests::PlanDigests;
pub use model::*;

/// A plan that passed every check. Only `Plan::load` builds one, so holding
/// a `Plan` means: parsed, structurally valid, inputs inside the workspace.
#[derive(Debug, Clone)]
pub struct Plan {
    pub file: PlanFile,
    /// The workspace: the plan file's folder unless `--workspace` says otherwise.
    pub workspace: PathBuf,
    /// Task indices, dependencies first.
    pub order: Vec<usize>,
    pub index: HashMap<String, usize>,
    pub digests: PlanDigests,
}

impl Plan {
    pub fn load(path: &Path, workspace: Option<&Path>) -> Result<Plan> {
        let bytes = load::read_plan_bytes(path)?;
        let file = load::parse_plan(&bytes, &path.display().to_string())?;
        let workspace = match workspace {
            Some(w) => w.to_path_buf(),
            None => path
                .parent()
                .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
                .unwrap_or(Path::new("."))
                .to_path_buf(),
        };
        let workspace = std::fs::canonicalize(&workspace).map_err(|e| {
            Error::new(Code::PlanInvalid, format!("workspace folder is not usable: {e}"))
                .at(workspace.display().to_string())
        })?;
        Plan::from_file(file, workspace)
    }

    pub fn from_file(mut file: PlanFile, workspace: PathBuf) -> Result<Plan> {
        // Free-form JSON (actions) in canonical key order from here on: the
        // order keys were written in is not meaning.
        for task in &mut file.tasks {
            crate::digest::sort_keys(&mut task.action);
            if let Some(rule) = &mut task.observe {
                crate::digest::sort_keys(rule);
            }
        }
        let order = validate::validate_structure(&file)?;
        let mut expander = workspace::Expander::checking(&workspace).map_err(|why| {
            Error::new(Code::PlanInvalid, format!("workspace folder is not usable: {why}"))
                .at(workspace.display().to_string())
        })?;
        for (i, task) in file.tasks.iter().enumerate() {
            for (j, input) in task.inputs.iter().enumerate() {
                expander.expand(input).map_err(|why| {
                    Error::new(
                        Code::InputOutsideWorkspace,
                        format!("input `{input}` of task `{}` {why}", task.task_ref),
                    )
                    .at(format!("$.tasks[{i}].inputs[{j}]"))
                })?;
            }
        }
        for (name, spec) in &file.providers {
            adapters::check_files(name, spec, &workspace)?;
        }
        let index = file.tasks.iter().enumerate().map(|(i, t)| (t.task_ref.clone(), i)).collect();
        let digests = PlanDigests::compute(&file);
        Ok(Plan { file, workspace, order, index, digests })
    }

    pub fn goal(&self) -> &Goal {
        self.file.goal.as_ref().expect("a validated plan has a goal")
    }

    pub fn task(&self, task_ref: &str) -> Option<&Task> {
        self.index.get(task_ref).map(|&i| &self.file.tasks[i])
    }

    pub fn provider_of(&self, task: &Task) -> &ProviderSpec {
        &self.file.providers[&task.provider]
    }
}

/// The JSON Schema of the plan file, derived from the same types serde reads.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(PlanFile)).expect("a schema serializes")
}
