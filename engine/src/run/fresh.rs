//! Are completed tasks still complete? Like a build tool with stale
//! targets: a task whose inputs changed since its validations judged them
//! (or whose upstream runs again) runs again; one whose checkpoint still
//! matches is not touched. External effects stand: they are never re-sent
//! on the strength of a local observation.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::Runner;
use crate::checkpoint;
use crate::decide::reuse::{self, Candidate, Completion, ValidationResult};
use crate::error::Result;
use crate::ids::{GoalId, Revision};
use crate::plan::{digests, Effect, ProviderSpec, Task};
use crate::state::TaskState;
use crate::store::events::EventKind;
use crate::store::evidence::CompletionRecord;
use crate::store::Durability;
use crate::store::LedgerRead;

/// The completion of `task_ref` in `revision`, as a reuse decision weighs
/// it; `task_then`: the task as that revision defined it, with its
/// provider's spec then (`None`: it had no such task).
pub fn completion<'t>(
    ledger: &dyn LedgerRead,
    goal: &GoalId,
    revision: Revision,
    task_then: Option<(&'t Task, Option<&ProviderSpec>)>,
    task_ref: &str,
) -> Result<Option<Completion<'t>>> {
    let Some((task, spec)) = task_then else { return Ok(None) };
    let Some(done) = ledger.completion(goal, revision, task_ref)? else { return Ok(None) };
    // No provider then: nothing to compare with, so the core differs.
    let meaning_core = spec.map(|s| digests::meaning_core_digest(task, s)).unwrap_or_default();
    Ok(Some(weighed(done, task, meaning_core)))
}

/// A recorded completion as the reuse decision weighs it: `task` and
/// `meaning_core` are the task as the completion's revision defined it.
fn weighed(done: CompletionRecord, task: &Task, meaning_core: String) -> Completion<'_> {
    Completion {
        revision: done.revision,
        attempt_id: done.attempt_id,
        task,
        meaning: done.meaning,
        meaning_core,
        dependencies: done.dependencies,
        checkpoint: done.checkpoint,
        reusable: done.reusable,
        validations: done
            .validations
            .into_iter()
            .map(|c| ValidationResult {
                id: c.check_id,
                passed: c.passed,
                checkpoint: c.checkpoint,
                evidence_id: c.evidence_id,
            })
            .collect(),
    }
}

impl Runner<'_> {
    pub(super) fn refresh_completions(&mut self) -> Result<()> {
        // Decide everything inside one snapshot, then write what went stale.
        let tool_context: std::collections::HashMap<&str, _> =
            self.plan.file.tasks.iter().map(|t| (t.task_ref.as_str(), self.tool_context(t))).collect();
        // The first look's expansions, when it made them and nothing ran
        // since (`inputs.rs`): each input resolved once a run.
        let mut looked = self.first_look.take().unwrap_or_default();
        // The completions read at the run's start, when nothing ran since.
        let mut read_early = self.completions_read.take();
        let (plan, goal_id, revision, states, cache) =
            (&self.plan, &self.goal_id, self.revision, &self.states, &mut self.cache);
        let sandbox = self.sandboxes.checks();
        let stale = self.ledger.snapshot(|ledger| {
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
                let task = &plan.file.tasks[i];
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
                let Some(d) = plan.digests.tasks.get(r) else { continue };
                // The completion is of this revision's task, with this
                // provider: its core meaning is the one computed at load.
                let done = completions.remove(r).map(|c| weighed(c, task, d.meaning_core.clone()));
                let upstream = task.depends_on.iter().find(|d| rerun.contains(d.as_str())).map(String::as_str);
                let decision = reuse::decide(
                    false,
                    done.as_ref(),
                    &Candidate {
                        task,
                        meaning: &d.meaning,
                        meaning_core: &d.meaning_core,
                        dependencies: &d.dependencies,
                    },
                    upstream,
                    || {
                        let (secrets, workspace) = (&plan.file.secrets, &plan.workspace);
                        let cp = match looked.remove(&i) {
                            Some(expanded) => {
                                checkpoint::observe_expanded(expanded, workspace, task, secrets, &sandbox, cache)?
                            }
                            None => checkpoint::observe_with(&mut expander, workspace, task, secrets, &sandbox, cache)?,
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
        })?;
        for (r, detail) in stale {
            self.write_event(Durability::Normal, EventKind::CompletionStale, Some(&r), None, detail.clone())?;
            self.set_task(&r, TaskState::Pending, detail)?;
        }
        Ok(())
    }
}
