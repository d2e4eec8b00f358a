//! `engine retry OPERATION_ID`: re-send an operation a person settled as
//! not run, or one whose failure class is retryable — same operation id,
//! next try number, approval checked again at the call site. Whether it
//! may is `decide::retry`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::clock::{now_ms, utc};
use crate::decide::people::Act;
use crate::decide::retry::{self, LatestTry, Refusal};
use crate::error::{Code, Error, Result};
use crate::evidence::Evidence;
use crate::ids::OperationId;
use crate::limits::RETRY_AFTER_WAIT_MAX_S;
use crate::plan::{Plan, PlanFile};
use crate::run::progress::Sink;
use crate::run::{self, Asked, RunReport, Sandboxes};
use crate::state::TaskState;
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LeaseGuard, LedgerRead};

/// May `person` retry `operation_id` (`NOT_PERMITTED` otherwise)?
pub fn permitted(read: &dyn LedgerRead, operation_id: &OperationId, person: &Person) -> Result<()> {
    let task = read.active_task_of_operation(operation_id)?.ok_or_else(|| not_active(operation_id))?;
    super::permitted(read, &task.goal_id, Act::Retry, person)
}

fn not_active(operation_id: &OperationId) -> Error {
    Error::usage(format!("no task of an active plan revision has operation {operation_id}"))
        .at(operation_id.to_string())
}

pub fn retry(
    ledger: &mut LeaseGuard,
    operation_id: &OperationId,
    jobs: usize,
    person: &Person,
    request_id: Option<&NewRequestId>,
    progress: Arc<dyn Sink>,
) -> Result<RunReport> {
    let read = ledger.read();
    let task = read.active_task_of_operation(operation_id)?.ok_or_else(|| not_active(operation_id))?;
    let (goal_id, revision, task_ref) = (task.goal_id, task.revision, task.task_ref);
    let attempts = read.attempts_of_task(&goal_id, &task_ref)?;
    let latest = attempts.iter().rev().find(|a| a.operation_id == *operation_id).cloned();
    // Only the task's latest call can be re-sent: an older operation that a
    // repair or a revision replaced is history.
    let latest_call_is_other =
        attempts.iter().rev().find(|a| a.revision == revision).is_some_and(|a| a.operation_id != *operation_id);
    let latest_try = latest.as_ref().map(|a| LatestTry { try_no: a.try_no, state: a.state, class: a.class() });
    match retry::decide(task.state, latest_try, latest_call_is_other) {
        Ok(()) => {}
        Err(Refusal::NotLatestCall) => {
            return Err(Error::usage(format!(
                "operation {operation_id} is not task {task_ref}'s latest call (task state {}); nothing to retry",
                task.state
            ))
            .at(operation_id.to_string()))
        }
        Err(refusal) => {
            return Err(Error::usage(format!(
                "operation {operation_id} (task {task_ref}) is not retryable: {}",
                refusal.why()
            ))
            .at(operation_id.to_string()))
        }
    }
    if let Some(a) = latest.as_ref().filter(|a| a.state.is_settled()) {
        // A person's settlement is what allows this re-send: only one the
        // act chain vouches for.
        read.check_settled(a.id)?;
    }
    if let Some(a) = &latest {
        honour_retry_after(&*read, a)?;
    }
    let row = read.revision(&goal_id, revision)?;
    let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of {goal_id} r{revision} does not parse: {e}"))
    })?;
    let mut plan = Plan::from_file(file, PathBuf::from(&row.workspace))?;
    plan.source = super::recorded_source(&row.plan_path, &plan.workspace);
    let sandboxes = Sandboxes::prepare(&plan, ledger.path())?;
    let after_try = latest.as_ref().map(|a| a.try_no);
    ledger.write(Durability::Full, |tx| {
        let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task_ref };
        tx.set_task_state(key, TaskState::Pending, &json!({"retry_requested": operation_id}))?;
        let said = json!({"after_try": after_try});
        let ask = NewAsk {
            kind: AskKind::Retry,
            goal_id: &goal_id,
            revision,
            task_ref: Some(&task_ref),
            operation_id: Some(operation_id),
            person,
            data: &said,
        };
        let ask_id = tx.insert_ask(&ask)?;
        let data = json!({"operation_id": operation_id, "after_try": after_try, "ask_id": ask_id,
            "actor": person.actor, "uid": person.uid, "user": person.user});
        tx.append_event(&Event::goal(EventKind::RetryRequested, &goal_id, revision, data).task(&task_ref))?;
        match request_id {
            Some(r) => tx.insert_request_id(r),
            None => Ok(()),
        }
    })?;
    let asked = Asked { retry: HashSet::from([operation_id.clone()]), ..Asked::default() };
    run::execute(ledger, &plan, revision, jobs, asked, sandboxes, progress)
}

/// A provider that answered 429/503 with `Retry-After` is not asked again
/// before that time: wait it out (bounded), or refuse saying when.
fn honour_retry_after(ledger: &dyn LedgerRead, a: &AttemptRecord) -> Result<()> {
    let retry_after = ledger.evidence_of_attempt(a.id)?.into_iter().find_map(|r| match r.evidence {
        Evidence::ProviderError { retry_after_seconds: Some(s), .. } => Some(s),
        _ => None,
    });
    let (Some(seconds), Some(finished)) = (retry_after, a.finished_at_ms) else { return Ok(()) };
    let not_before_ms = finished.saturating_add((seconds as i64).saturating_mul(1000));
    let wait_ms = not_before_ms - now_ms();
    if wait_ms <= 0 {
        return Ok(());
    }
    let wait_s = (wait_ms as u64).div_ceil(1000);
    if wait_s > RETRY_AFTER_WAIT_MAX_S {
        return Err(Error::usage(format!(
            "the provider asked not to be called again for {seconds}s (Retry-After); retry after {}",
            utc(not_before_ms)
        )));
    }
    eprintln!("engine: waiting {wait_s}s: the provider answered Retry-After: {seconds}");
    std::thread::sleep(Duration::from_millis(wait_ms as u64));
    Ok(())
}
