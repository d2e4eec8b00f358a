//! Are completed tasks still complete? Like a build tool with stale
//! targets: a task whose inputs changed since its validations judged them
//! (or whose upstream runs again) runs again; one whose checkpoint still
//! matches is not touched. External effects stand: they are never re-sent
//! on the strength of a local observation. Every decision is
//! `decide::reuse`'s, inside one snapshot of the ledger; the core writes
//! what went stale.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{json, Value};

use super::early::Completions;
use super::inputs::FirstLook;
use super::scope::Scope;
use crate::checkpoint::{self, FileCache};
use crate::decide::reuse::{self, Candidate};
use crate::decide::tools::{self, Inventory};
use crate::error::Result;
use crate::plan::Effect;
use crate::run::fresh::weighed;
use crate::state::TaskState;
use crate::store::LeaseGuard;

/// What the reuse pass may take from the run's first look, if nothing ran
/// since: each complete task's expanded inputs, and the completions read.
pub struct Looked {
    pub first_look: Option<FirstLook>,
    pub completions: Option<Completions>,
}

/// The complete tasks that went stale, each with why (in plan order).
pub fn stale(
    ledger: &LeaseGuard,
    scope: &Scope,
    (states, tools): (&[(String, TaskState)], &BTreeMap<String, Inventory>),
    (cache, sandbox): (&mut FileCache, &providers::sandbox::Sandbox),
    early: Looked,
) -> Result<Vec<(String, Value)>> {
    let plan = scope.plan;
    let states: HashMap<&str, TaskState> = states.iter().map(|(r, s)| (r.as_str(), *s)).collect();
    let tool_context: HashMap<&str, _> =
        plan.file.tasks.iter().map(|t| (t.task_ref.as_str(), tools::context_of(&plan.file, t, tools))).collect();
    // The first look's expansions, when it made them and nothing ran
    // since (`inputs.rs`): each input resolved once a run.
    let mut looked = early.first_look.unwrap_or_default();
    // The completions read at the run's start, when nothing ran since.
    let mut read_early = early.completions;
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    ledger.snapshot(|ledger| {
        // Every completion of the revision in one read, not five per task.
        let mut completions = match read_early.take() {
            Some(c) => c,
            None => ledger.completions(goal_id, revision)?,
        };
        // One expander for the pass: the workspace and each folder
        // resolved once, not once per task.
        let mut expander = None;
        let mut rerun: HashSet<&str> = HashSet::new();
        let mut stale: Vec<(String, Value)> = Vec::new();
        for &i in &plan.order {
            let Some(task) = plan.file.tasks.get(i) else { continue };
            let r = task.task_ref.as_str();
            if !states.get(r).is_some_and(|s| s.is_complete()) {
                // Not done: it runs (or waits) now, so what depends on
                // it cannot stand on an older completion.
                rerun.insert(r);
                continue;
            }
            if task.effect == Effect::External {
                continue;
            }
            let Some(d) = plan.digests().tasks.get(r) else { continue };
            // The completion is of this revision's task, with this
            // provider: its core meaning is the one computed at load.
            let done = completions.remove(r).map(|c| weighed(c, task, d.meaning_core.clone()));
            let upstream = task.depends_on.iter().find(|d| rerun.contains(d.as_str())).map(String::as_str);
            let decision = reuse::decide(
                false,
                done.as_ref(),
                &Candidate { task, meaning: &d.meaning, meaning_core: &d.meaning_core, dependencies: &d.dependencies },
                upstream,
                || {
                    let (secrets, workspace) = (&plan.file.secrets, &plan.workspace);
                    let cp = match looked.remove(&i) {
                        Some(expanded) => {
                            checkpoint::observe_expanded(expanded, workspace, task, secrets, sandbox, cache)?
                        }
                        None => checkpoint::observe_with(&mut expander, workspace, task, secrets, sandbox, cache)?,
                    };
                    Ok(cp.with_context(tool_context.get(r).cloned().unwrap_or_default()))
                },
            );
            if let reuse::Decision::Run { refusal } = decision {
                stale.push((r.to_string(), json!({"stale": refusal.code(), "detail": refusal.detail()})));
                rerun.insert(r);
            }
        }
        Ok(stale)
    })
}
