//! The facts the core asks for, read from the ledger, each answered
//! through its own reply.

use super::scope::Scope;
use crate::error::Result;
use crate::ids::AttemptId;
use crate::run::core::{Answered, InDoubt, Read};
use crate::state::AttemptState;
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventKind;
use crate::store::LeaseGuard;

pub fn read(ledger: &LeaseGuard, scope: &Scope, r: Read) -> Answered {
    let (goal, revision) = (&scope.goal_id, scope.revision);
    match r {
        Read::Raises(reply) => reply.send(crate::budgets::raises(&*ledger.read(), goal)),
        Read::InDoubt(reply) => reply.send(in_doubt(ledger, scope)),
        Read::Unjudged { waiting, reply } => reply.send(unjudged(ledger, scope, &waiting)),
        Read::Attempt(id, reply) => reply.send(ledger.read().attempt(id)),
        Read::AttemptsOf(task_ref, reply) => reply.send(ledger.read().attempts_of_task(goal, &task_ref)),
        Read::WaitedTrySettled(task_ref, reply) => reply.send(waited_try_settled(ledger, scope, &task_ref)),
        Read::SettledNotRun(reply) => {
            reply.send(ledger.read().latest_attempts_in_state(goal, revision, AttemptState::SettledNotRun))
        }
        Read::Tasks(reply) => reply.send(
            ledger.read().tasks(goal, revision).map(|tasks| tasks.into_iter().map(|t| (t.task_ref, t.state)).collect()),
        ),
        Read::HeldElsewhere(reply) => reply.send(ledger.held_elsewhere(goal)),
        Read::TaskNow(task_ref, reply) => {
            reply.send(ledger.read().task(goal, revision, &task_ref).map(|t| t.map(|t| t.state)))
        }
        Read::FinishedSince(started, reply) => {
            let last = ledger.read().latest_event(goal, revision, EventKind::RunFinished);
            reply.send(last.map(|last| last.is_some_and(|l| l.seq > started)))
        }
    }
}

/// Every attempt left between intent and receipt, and the tasks other
/// live workers hold.
fn in_doubt(ledger: &LeaseGuard, scope: &Scope) -> Result<InDoubt> {
    let skip = ledger.held_elsewhere(&scope.goal_id)?;
    Ok(InDoubt { skip, attempts: ledger.read().attempts_in_doubt(&scope.goal_id)? })
}

/// Receipts not judged yet, and settled-`ok` attempts of `waiting` tasks.
fn unjudged(
    ledger: &LeaseGuard,
    scope: &Scope,
    waiting: &std::collections::HashSet<String>,
) -> Result<Vec<AttemptRecord>> {
    let (goal, revision) = (&scope.goal_id, scope.revision);
    let read = ledger.read();
    let mut to_validate = read.attempts_in_state(goal, AttemptState::ReceiptRecorded)?;
    for a in read.latest_attempts_in_state(goal, revision, AttemptState::SettledOk)? {
        if !read.is_judged(a.id)? && waiting.contains(&a.task_ref) {
            // The engine goes on only on a settlement the act chain
            // vouches for (STORE_TAMPERED otherwise: nothing runs).
            read.check_settled(a.id)?;
            to_validate.push(a);
        }
    }
    Ok(to_validate)
}

/// Is the earlier try a task waits on settled since?
fn waited_try_settled(ledger: &LeaseGuard, scope: &Scope, task_ref: &str) -> Result<bool> {
    let read = ledger.read();
    let task = read.task(&scope.goal_id, scope.revision, task_ref)?;
    let Some(waited) = task.as_ref().and_then(|t| t.waits_on_attempt()) else { return Ok(false) };
    let s = read.attempt(AttemptId(waited))?.state;
    Ok(!s.in_doubt() && s != AttemptState::EffectUnknown)
}
