//! The ledger side of a provider whose answer is a question for a person
//! (an MCP server's `input_required` or elicitation): the attempt ends
//! `input_asked`, the task waits `awaiting_input` with the question in its
//! detail, and an event says so — inside the receipt's own transaction, so
//! a crash never leaves a receipt without the question it carried.
//! Nothing here answers: only `engine answer` (a person's act) does.

use providers::InputAsk;
use serde_json::json;

use super::scope::Scope;
use crate::error::Result;
use crate::ids::AttemptId;
use crate::state::{AttemptState, TaskState};
use crate::store::events::{Event, EventKind};
use crate::store::LedgerTx;

/// Record what the server asks, in the caller's transaction.
pub fn asked(
    tx: &mut dyn LedgerTx,
    scope: &Scope,
    (attempt_id, task_ref): (AttemptId, &str),
    ask: &InputAsk,
) -> Result<()> {
    let attempt = tx.attempt(attempt_id)?;
    tx.finish_attempt(attempt_id, AttemptState::InputAsked, None, None)?;
    let detail = json!({
        "attempt_id": attempt_id, "operation_id": attempt.operation_id, "try": attempt.try_no,
        "input": ask, "authority": "provider",
    });
    tx.set_task_state(scope.key(task_ref), TaskState::AwaitingInput, &detail)?;
    let data = json!({
        "operation_id": attempt.operation_id, "try": attempt.try_no,
        "questions": ask.questions.iter().map(|q| &q.question).collect::<Vec<_>>(),
        "task_id": ask.task_id,
    });
    let e = Event::goal(EventKind::InputRequested, &scope.goal_id, scope.revision, data);
    tx.append_event(&e.task(task_ref).attempt(attempt_id)).map(|_| ())
}
