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
    let (tool_text, tool_json) = tool_identity(ledger, plan, task, &done)?;
    let standing = match reuse::standing(&done) {
        None => Standing {
            text: format!(
                "completion ({basis}): reusable by a later revision while its goal, meaning, dependencies and inputs \
                 still match checkpoint {} ({tool_text})",
                done.checkpoint.as_ref().map_or("?", |c| super::short(c.digest()))
            ),
            json: json!({"reusable": true, "completion": provenance, "tool": tool_json}),
        },
        Some(refusal) => Standing {
            text: format!("completion ({basis}): not reusable: {} — {}", refusal.code(), refusal.detail()),
            json: json!({"reusable": false, "reason": refusal.code(), "detail": refusal.detail(),
                         "completion": provenance, "tool": tool_json}),
        },
    };
    Ok(Some(standing))
}

/// Who did the completion's work, as its checkpoint recorded it, and what
/// is not compared and why (`decide::reuse::tool::identity_words`); an
/// agent's model from its report (a claim, kept as it said it).
fn tool_identity(
    ledger: &dyn LedgerRead,
    plan: &PlanFile,
    task: Option<&crate::plan::Task>,
    done: &reuse::Completion<'_>,
) -> Result<(String, Value)> {
    use crate::plan::model::{Protocol, ProviderSpec};
    let spec = task.and_then(|t| plan.providers.get(&t.provider));
    let kind = match spec {
        Some(ProviderSpec::Command { protocol: Some(Protocol::AgentJson), .. }) => "agent-json",
        Some(ProviderSpec::Command { .. }) => "command",
        Some(ProviderSpec::Http { .. }) => "http",
        Some(ProviderSpec::Mcp { .. }) => "mcp",
        _ => "builtin",
    };
    let model = match kind {
        "agent-json" => ledger
            .claims_of_attempt(done.attempt_id)?
            .into_iter()
            .find_map(|c| c.data.get("model").and_then(Value::as_str).map(str::to_string)),
        _ => None,
    };
    let model = model.map(|m| super::escape::for_terminal(&m).to_string());
    let context = done.checkpoint.as_ref().and_then(|c| c.checkpoint()).map(|c| c.context).unwrap_or_default();
    Ok(reuse::tool::identity_words(&context, spec, model.as_deref()))
}
