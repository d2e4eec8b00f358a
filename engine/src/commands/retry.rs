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
use crate::decide::retry::{self, LatestTry, Refusal};
use crate::error::{Code, Error, Result};
use crate::evidence::Evidence;
use crate::ids::OperationId;
use crate::limits::RETRY_AFTER_WAIT_MAX_S;
use crate::plan::{Plan, PlanFile};
use crate::run::progress::Sink;
use crate::run::{self, Asked, RunReport};
use crate::state::TaskState;
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::LedgerRead;
use crate::store::{Durability, Store};

pub fn retry(store: Store, operation_id: &OperationId, jobs: usize, progress: Arc<dyn Sink>) -> Result<RunReport> {
    let mut ledger = run::orphans::take_lease(store)?;
    let read = ledger.read();
    let task = read.active_task_of_operation(operation_id)?.ok_or_else(|| {
        Error::usage(format!("no task of an active plan revision has operation {operation_id}"))
            .at(operation_id.to_string())
    })?;
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
    if let Some(a) = &latest {
        honour_retry_after(&*read, a)?;
    }
    let row = read.revision(&goal_id, revision)?;
    let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of {goal_id} r{revision} does not parse: {e}"))
    })?;
    let plan = Plan::from_file(file, PathBuf::from(&row.workspace))?;
    ledger.write(Durability::Normal, |tx| {
        let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task_ref };
        tx.set_task_state(key, TaskState::Pending, &json!({"retry_requested": operation_id}))?;
        let data = json!({"operation_id": operation_id, "after_try": latest.as_ref().map(|a| a.try_no)});
        let e = Event::goal(EventKind::RetryRequested, &goal_id, revision, data).task(&task_ref);
        tx.append_event(&e).map(|_| ())
    })?;
    let asked = Asked { retry: HashSet::from([operation_id.clone()]), ..Asked::default() };
    run::execute(&mut ledger, plan, revision, jobs, asked, progress)
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
