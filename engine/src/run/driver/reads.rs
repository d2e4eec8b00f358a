//! The facts the core asks for, read from the ledger.

use super::scope::Scope;
use crate::error::Result;
use crate::ids::AttemptId;
use crate::run::core::{Facts, Read};
use crate::state::AttemptState;
use crate::store::events::EventKind;
use crate::store::LeaseGuard;

pub fn read(ledger: &LeaseGuard, scope: &Scope, r: Read) -> Result<Facts> {
    let (goal, revision) = (&scope.goal_id, scope.revision);
    let read = ledger.read();
    Ok(match r {
        Read::Raises => Facts::Raises(crate::budgets::raises(&*read, goal)?),
        Read::InDoubt => {
            drop(read);
            let skip = ledger.held_elsewhere(goal)?;
            Facts::InDoubt { skip, attempts: ledger.read().attempts_in_doubt(goal)? }
        }
        Read::Unjudged { waiting } => {
            let mut to_validate = read.attempts_in_state(goal, AttemptState::ReceiptRecorded)?;
            for a in read.latest_attempts_in_state(goal, revision, AttemptState::SettledOk)? {
                if !read.is_judged(a.id)? && waiting.contains(&a.task_ref) {
                    // The engine goes on only on a settlement the act chain
                    // vouches for (STORE_TAMPERED otherwise: nothing runs).
                    read.check_settled(a.id)?;
                    to_validate.push(a);
                }
            }
            Facts::Attempts(to_validate)
        }
        Read::Attempt(id) => Facts::Attempt(Box::new(read.attempt(id)?)),
        Read::AttemptsOf(task_ref) => Facts::Attempts(read.attempts_of_task(goal, &task_ref)?),
        Read::WaitedTrySettled(task_ref) => {
            let task = read.task(goal, revision, &task_ref)?;
            let mut settled = false;
            if let Some(waited) = task.as_ref().and_then(|t| t.waits_on_attempt()) {
                let s = read.attempt(AttemptId(waited))?.state;
                settled = !s.in_doubt() && s != AttemptState::EffectUnknown;
            }
            Facts::Flag(settled)
        }
        Read::SettledNotRun => {
            Facts::Attempts(read.latest_attempts_in_state(goal, revision, AttemptState::SettledNotRun)?)
        }
        Read::Tasks => Facts::Tasks(read.tasks(goal, revision)?.into_iter().map(|t| (t.task_ref, t.state)).collect()),
        Read::HeldElsewhere => {
            drop(read);
            Facts::Refs(ledger.held_elsewhere(goal)?)
        }
        Read::TaskNow(task_ref) => Facts::State(read.task(goal, revision, &task_ref)?.map(|t| t.state)),
        Read::FinishedSince(started) => {
            let last = read.latest_event(goal, revision, EventKind::RunFinished)?;
            Facts::Flag(last.is_some_and(|l| l.seq > started))
        }
    })
}
