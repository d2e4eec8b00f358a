//! A completed task as a reuse decision weighs it (`decide::reuse`): the
//! reuse pass of a run (`driver::refresh`), `engine revise` and the report
//! read completions through here.

use crate::decide::reuse::{Completion, ValidationResult};
use crate::error::Result;
use crate::ids::{GoalId, Revision};
use crate::plan::{digests, ProviderSpec, Task};
use crate::store::evidence::CompletionRecord;
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
pub fn weighed(done: CompletionRecord, task: &Task, meaning_core: String) -> Completion<'_> {
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
