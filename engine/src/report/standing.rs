//! What a succeeded or reused task's completion is worth: whether a later
//! revision could reuse it (`decide::reuse::standing`), and if not why; and
//! whether it rests on a person's settlement rather than the engine's
//! observation. `status` and `explain` show it beside the task's state, so
//! that completion and reusability are never read as one.

use serde_json::{json, Value};

use crate::decide::reuse;
use crate::error::Result;
use crate::ids::{GoalId, Revision};
use crate::plan::PlanFile;
use crate::run;
use crate::state::{AttemptState, TaskState};
use crate::store::LedgerRead;

/// A completion's standing, for a person and for scripts.
pub struct Standing {
    /// One line, without the task ref.
    pub text: String,
    pub json: Value,
}

/// The standing of `task_ref`'s completion in `revision`; `None` when the
/// task is neither succeeded nor reused.
pub fn of_task(
    ledger: &dyn LedgerRead,
    goal: &GoalId,
    revision: Revision,
    plan: &PlanFile,
    task_ref: &str,
    state: TaskState,
) -> Result<Option<Standing>> {
    if !state.is_complete() {
        return Ok(None);
    }
    let task = plan.tasks.iter().find(|t| t.task_ref == task_ref);
    let then = task.map(|t| (t, plan.providers.get(&t.provider)));
    let Some(done) = run::completion(ledger, goal, revision, then, task_ref)? else {
        let text = "completion not reusable: NO_PRIOR_COMPLETION (no succeeded attempt is recorded for it)".into();
        return Ok(Some(Standing { text, json: json!({"reusable": false, "reason": "NO_PRIOR_COMPLETION"}) }));
    };
    let settled = ledger.attempt(done.attempt_id)?.state == AttemptState::SettledOk;
    let number = ledger.attempt_number(done.attempt_id)?;
    let basis = if settled {
        format!(
            "attempt {number} (its effect rests on a person's settlement `settled_ok`, not on the engine's observation)"
        )
    } else {
        format!("attempt {number}")
    };
    let provenance = json!({"revision": done.revision, "attempt_id": done.attempt_id, "attempt": number,
        "settled_by_person": settled});
    let standing = match reuse::standing(&done) {
        None => Standing {
            text: format!(
                "completion ({basis}): reusable by a later revision while its goal, meaning, dependencies and inputs \
                 still match checkpoint {}",
                done.checkpoint.as_ref().map_or("?", |c| super::short(c.digest()))
            ),
            json: json!({"reusable": true, "completion": provenance}),
        },
        Some(refusal) => Standing {
            text: format!("completion ({basis}): not reusable: {} — {}", refusal.code(), refusal.detail()),
            json: json!({"reusable": false, "reason": refusal.code(), "detail": refusal.detail(),
                         "completion": provenance}),
        },
    };
    Ok(Some(standing))
}
