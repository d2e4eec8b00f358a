//! Plan files: the model, loading with exact error places, structural
//! validation, and the digests that give tasks and goals their identity.

pub mod adapters;
mod auth;
pub mod bounds;
pub mod cache;
pub mod digests;
pub mod load;
pub mod model;
mod observe;
pub mod probe;
pub mod reach;
pub mod suggest;
pub mod validate;
pub mod warnings;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Code, Error, Result};
use crate::workspace;
pub use digests::PlanDigests;
pub use model::*;

/// A plan that passed every check. Only `Plan::load`, `Plan::from_file` and
/// `Plan::checked` build one, so holding a `Plan` means: parsed,
/// structurally valid (now, or its exact bytes earlier, by this engine's
/// version: the plan cache), providers' files readable, and its inputs
/// inside the workspace — or, says `inputs`, still to be checked.
#[derive(Debug, Clone)]
pub struct Plan {
    pub file: PlanFile,
    /// The workspace: the plan file's folder unless `--workspace` says otherwise.
    pub workspace: PathBuf,
    /// Task indices, dependencies first.
    pub order: Vec<usize>,
    pub index: HashMap<String, usize>,
    /// Computed at first use (`Plan::digests`): `engine check` never
    /// needs them, and they were half of its time at 100,000 tasks.
    digests: std::sync::OnceLock<PlanDigests>,
    /// Were the inputs found inside the workspace at load?
    pub inputs: Inputs,
    /// The plan file it was read from (canonical), when it was read from
    /// one: the run protects it from providers by default.
    pub source: Option<PathBuf>,
}

/// Whether a plan's inputs were checked against the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// At load: before anything was registered or run.
    Checked,
    /// Not yet: the plan cache vouched for the plan file's bytes, so the
    /// revision is registered already and nothing is written before the
    /// run. The run checks them under the lease, before it writes anything
    /// (`run::inputs`), in the same expansion of each input that observes
    /// the complete tasks' checkpoints: one look at the workspace, not two.
    ToCheck,
}

/// A plan file read and parsed, not yet checked: its bytes' cache key
/// (`cache::file_key`) and the resolved workspace beside it.
pub struct Source {
    pub file: PlanFile,
    pub workspace: PathBuf,
    pub key: String,
    /// The plan file, canonical (`None` if it cannot be resolved).
    pub path: Option<PathBuf>,
}

impl Plan {
    pub fn load(path: &Path, workspace: Option<&Path>) -> Result<Plan> {
        let source = Plan::read(path, workspace)?;
        let at = source.path.clone();
        let plan = Plan { source: at, ..Plan::from_file(source.file, source.workspace)? };
        plan_file_not_an_output(&plan)?;
        Ok(plan)
    }

    /// Read and parse a plan file; nothing checked beyond the parse.
    pub fn read(path: &Path, workspace: Option<&Path>) -> Result<Source> {
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
        Ok(Source { file, workspace, key: cache::file_key(&bytes), path: std::fs::canonicalize(path).ok() })
    }

    pub fn from_file(mut file: PlanFile, workspace: PathBuf) -> Result<Plan> {
        sort_free_form(&mut file);
        let order = validate::validate_structure(&file)?;
        check_files(&file, &workspace)?;
        let index = index_of(&file);
        Ok(Plan {
            file,
            workspace,
            order,
            index,
            digests: std::sync::OnceLock::new(),
            inputs: Inputs::Checked,
            source: None,
        })
    }

    /// The plan of `source`: when `cached` (the plan cache's row for its
    /// key) vouches for these bytes (`CachedPlan::derived`), the order and
    /// digests the full path derived from them before are taken from it,
    /// the providers' files are checked again, and the inputs are left to
    /// the run (`Inputs::ToCheck`: the file system may have changed since,
    /// and the run's first look at the workspace checks them); otherwise
    /// the full path. The flag says whether the cache was used.
    pub fn checked(mut source: Source, cached: Option<&cache::CachedPlan>) -> Result<(Plan, bool)> {
        let Some((order, digests)) = cached.and_then(|c| c.derived(&source.key, &source.file)) else {
            let at = source.path.clone();
            let plan = Plan { source: at, ..Plan::from_file(source.file, source.workspace)? };
            plan_file_not_an_output(&plan)?;
            return Ok((plan, false));
        };
        sort_free_form(&mut source.file);
        let Source { file, workspace, path, .. } = source;
        check_providers(&file, &workspace)?;
        let index = index_of(&file);
        let digests = std::sync::OnceLock::from(digests);
        Ok((Plan { file, workspace, order, index, digests, inputs: Inputs::ToCheck, source: path }, true))
    }

    /// The digests of SPEC.md's table (computed once, at first use).
    pub fn digests(&self) -> &PlanDigests {
        self.digests.get_or_init(|| PlanDigests::compute(&self.file))
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

/// Free-form JSON (actions, observe rules) in canonical key order from
/// here on: the order keys were written in is not meaning.
fn sort_free_form(file: &mut PlanFile) {
    for task in &mut file.tasks {
        crate::digest::sort_keys(&mut task.action);
        if let Some(rule) = &mut task.observe {
            crate::digest::sort_keys(rule);
        }
    }
}

/// What the file system decides: every literal input inside the
/// workspace, every provider's files readable.
/// The plan file is never a task's output: a literal `outputs` path that
/// names it (or a folder it lies in) is refused at its place. (A glob that
/// happens to match it gives no right: the plan file stays the engine's
/// protected path.)
fn plan_file_not_an_output(plan: &Plan) -> Result<()> {
    let Some(rel) = plan.source.as_deref().and_then(|p| p.strip_prefix(&plan.workspace).ok()) else { return Ok(()) };
    let Some(rel) = rel.to_str() else { return Ok(()) };
    for (i, task) in plan.file.tasks.iter().enumerate() {
        let names_it = |o: &String| !o.contains(['*', '?', '[']) && crate::decide::constraints::covers(o, rel);
        if let Some(j) = task.outputs.iter().position(names_it) {
            return Err(Error::new(
                Code::PlanInvalid,
                format!(
                    "`outputs` of task `{}` names the plan file {rel}: the plan file is never a task's output",
                    task.task_ref
                ),
            )
            .at(format!("$.tasks[{i}].outputs[{j}]")));
        }
    }
    Ok(())
}

fn check_files(file: &PlanFile, workspace: &Path) -> Result<()> {
    let mut expander = workspace::Expander::checking(workspace).map_err(|why| workspace_unusable(workspace, &why))?;
    for (i, task) in file.tasks.iter().enumerate() {
        for (j, input) in task.inputs.iter().enumerate() {
            expander.expand(input).map_err(|why| input_refused(file, i, j, &why))?;
        }
    }
    check_providers(file, workspace)
}

fn check_providers(file: &PlanFile, workspace: &Path) -> Result<()> {
    for (name, spec) in &file.providers {
        adapters::check_files(name, spec, workspace)?;
    }
    Ok(())
}

/// The workspace could not be resolved to look at its inputs.
pub fn workspace_unusable(workspace: &Path, why: &str) -> Error {
    Error::new(Code::PlanInvalid, format!("workspace folder is not usable: {why}")).at(workspace.display().to_string())
}

/// Input `j` of task `i` is refused (`why`: the workspace's reason): the
/// same error whether the load checks it or the run (`Inputs::ToCheck`).
pub fn input_refused(file: &PlanFile, i: usize, j: usize, why: &str) -> Error {
    let (task, input) = match file.tasks.get(i) {
        Some(t) => (t.task_ref.as_str(), t.inputs.get(j).map(String::as_str).unwrap_or_default()),
        None => ("", ""),
    };
    Error::new(Code::InputOutsideWorkspace, format!("input `{input}` of task `{task}` {why}"))
        .at(format!("$.tasks[{i}].inputs[{j}]"))
}

fn index_of(file: &PlanFile) -> HashMap<String, usize> {
    file.tasks.iter().enumerate().map(|(i, t)| (t.task_ref.clone(), i)).collect()
}

/// The JSON Schema of the plan file, derived from the same types serde reads.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(PlanFile)).expect("a schema serializes")
}
