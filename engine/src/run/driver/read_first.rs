//! The transactions of a person's retry that read the target back first
//! (`core::read_first`): the try completed from the read-back, or the
//! operation left unknown with nothing sent.

use serde_json::json;

use super::receipt::looked_evidence;
use super::scope::Scope;
use crate::cost::Cost;
use crate::decide::budget::Exhausted;
use crate::decide::budget::{self, Usage};
use crate::error::Result;
use crate::ids::OperationId;
use crate::run::core::FromReadBack;
use crate::run::looked::Looked;
use crate::state::{AttemptKind, TaskState};
use crate::store::attempts::{Intent, NewIntent};
use crate::store::events::{Event, EventKind};
use crate::store::LedgerTx;
use providers::sandbox::Record;

/// The retry's try, recorded without a dispatch: its intent (cost 0:
/// nothing paid was sent; the read-back counts as the call, within the
/// budgets as any call: when none is left, nothing is recorded and the
/// run stops on the budget), the read-back as its receipt, the task
/// running (its validations next).
pub fn completed(
    tx: &mut dyn LedgerTx,
    scope: &Scope,
    from: &FromReadBack,
    sandbox: &Record,
    now_ms: i64,
) -> Result<std::result::Result<Intent, Exhausted>> {
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    let task = scope.task(&from.task_ref)?;
    let used = tx.budget_use(goal_id)?;
    let usage = Usage {
        attempts_of_task: tx.attempt_count(goal_id, revision, &task.task_ref)?,
        provider_calls: used.calls,
        cost: used.cost,
        elapsed_seconds: ((now_ms - from.began_ms).max(0) / 1000) as u64,
    };
    if let Err(exhausted) = budget::check_call(&from.budgets, &usage, budget::Call::default()) {
        let e = Event::goal(EventKind::BudgetExhausted, goal_id, revision, json!(exhausted)).task(&task.task_ref);
        tx.append_event(&e)?;
        return Ok(Err(exhausted));
    }
    let intent = tx.insert_intent(&NewIntent {
        goal_id,
        revision,
        task_ref: &task.task_ref,
        operation_id: &from.operation_id,
        try_no: from.try_no,
        kind: AttemptKind::Retry,
        request_digest: &from.request_digest,
        request_json: &from.request,
        effect: task.effect,
        cost: Cost::ZERO,
        inputs_at_intent: from.inputs_at_intent.as_ref().map(|c| c.digest.as_str()),
        instruction: None,
        sandbox,
        protected_at_intent: from.protected.as_ref().map(|c| c.digest.as_str()),
    })?;
    for cp in from.inputs_at_intent.iter().chain(from.protected.iter()) {
        tx.put_checkpoint(cp)?;
    }
    let id = intent.attempt_id();
    let looked = &from.looked;
    for e in looked_evidence(tx, looked)? {
        tx.insert_evidence(goal_id, revision, Some(id), &e)?;
    }
    let receipt = json!({"source": "observation", "before": "retry", "evidence": looked.summary(),
                         "read_back": looked.decided()});
    tx.insert_receipt(intent, &receipt)?;
    tx.set_task_state(scope.key(&task.task_ref), TaskState::Running, &json!({"attempt_id": id}))?;
    let data = json!({"operation_id": from.operation_id, "try": from.try_no, "read_back": looked.summary()});
    let e = Event::goal(EventKind::CompletedFromReadBack, goal_id, revision, data);
    tx.append_event(&e.task(&task.task_ref).attempt(id))?;
    Ok(Ok(intent))
}

/// The read-back before a retry could not tell whether the operation took
/// effect: nothing sent, the task unknown, and the event that says why.
pub fn stays_unknown(
    tx: &mut dyn LedgerTx,
    scope: &Scope,
    (task_ref, operation_id): (&str, &OperationId),
    looked: &Looked,
) -> Result<()> {
    let why = format!(
        "retry of {operation_id}: the read-back before sending again could not tell whether it took effect ({}); \
         nothing was sent",
        looked.summary()
    );
    let detail = json!({"operation_id": operation_id, "why": why});
    tx.set_task_state(scope.key(task_ref), TaskState::EffectUnknown, &detail)?;
    let data = json!({"operation_id": operation_id, "why": why, "read_back": looked.summary()});
    let e = Event::goal(EventKind::CallRefused, &scope.goal_id, scope.revision, data).task(task_ref);
    tx.append_event(&e).map(|_| ())
}
