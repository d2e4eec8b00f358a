//! `engine retry OPERATION_ID`: re-send an operation a person settled as
//! not run, or one whose failure class is retryable — same operation id,
//! next try number, approval checked again at the call site. Whether it
//! may is `decide::retry`. Where a read-back applies, the call is read
//! back first (`run::core::read_first`); for an operation settled
//! `not_run` whose read-back cannot answer, a person may ask to re-send
//! it without (`--without-read-back --reason WHY`), recorded with their
//! request on the act chain and kept for that try's re-send (the call
//! that spends its approval too).

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
use crate::ids::{GoalId, OperationId, Revision};
use crate::limits::RETRY_AFTER_WAIT_MAX_S;
use crate::plan::{Plan, PlanFile};
use crate::run::progress::Sink;
use crate::run::{self, Asked, RunReport, Sandboxes};
use crate::state::{AttemptState, TaskState};
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LeaseGuard, LedgerRead, LedgerTx};

/// What a person named: a task ref of a goal (default: the store's
/// latest), or an operation id of a task of an active revision.
pub struct Named<'a> {
    pub arg: &'a str,
    pub goal: Option<&'a GoalId>,
    /// `--without-read-back --reason WHY`: why the person re-sends it
    /// without reading it back first.
    pub without_read_back: Option<&'a str>,
}

/// The call a retry sends again: a task of its goal's active revision and
/// the operation of its latest call (a repair's own, when a repair made it).
#[derive(Debug, Clone)]
pub struct Target {
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub state: TaskState,
    pub operation_id: OperationId,
}

/// The target a person named. An operation id is taken as one only when
/// no `--goal` narrows the search and a task of an active revision has it;
/// anything else is a task ref (with a "did you mean" when none matches).
pub fn target(read: &dyn LedgerRead, named: &Named) -> Result<Target> {
    if named.goal.is_none() {
        if let Some(t) = read.active_task_of_operation(&OperationId::new(named.arg))? {
            return Ok(Target {
                goal_id: t.goal_id,
                revision: t.revision,
                task_ref: t.task_ref,
                state: t.state,
                operation_id: OperationId::new(named.arg),
            });
        }
    }
    let g = read.goal_or_latest(named.goal)?;
    let tasks = read.tasks(&g.id, g.active_revision)?;
    let Some(task) = tasks.iter().find(|t| t.task_ref == named.arg) else {
        let refs = tasks.iter().map(|t| t.task_ref.as_str());
        let hint = crate::plan::suggest::did_you_mean(named.arg, refs);
        return Err(Error::usage(format!(
            "goal `{}` revision {} has no task `{}`, and no task of an active revision has operation `{}`{hint}",
            g.id, g.active_revision, named.arg, named.arg
        ))
        .at(named.arg.to_string()));
    };
    let attempts = read.attempts_of_task(&g.id, &task.task_ref)?;
    let latest = attempts.iter().rev().find(|a| a.revision == g.active_revision && a.state != AttemptState::Abandoned);
    let operation_id = match (task.pending_operation(), latest) {
        (Some(op), _) if task.state == TaskState::AwaitingApproval => OperationId::new(op),
        (_, Some(a)) => a.operation_id.clone(),
        (_, None) => task.operation_id.clone(),
    };
    Ok(Target {
        goal_id: g.id,
        revision: g.active_revision,
        task_ref: task.task_ref.clone(),
        state: task.state,
        operation_id,
    })
}

/// May `person` retry the named call (`NOT_PERMITTED` otherwise)?
pub fn permitted(read: &dyn LedgerRead, named: &Named, person: &Person) -> Result<()> {
    let t = target(read, named)?;
    super::permitted(read, &t.goal_id, Act::Retry, person)
}

pub fn retry(
    ledger: &mut LeaseGuard,
    named: &Named,
    jobs: usize,
    person: &Person,
    request_id: Option<&NewRequestId>,
    progress: Arc<dyn Sink>,
) -> Result<RunReport> {
    let read = ledger.read();
    let Target { goal_id, revision, task_ref, state, operation_id } = target(&*read, named)?;
    super::hold::refuse_if_held(&*read, &goal_id, &task_ref, "retry")?;
    let operation_id = &operation_id;
    let attempts = read.attempts_of_task(&goal_id, &task_ref)?;
    let latest = attempts.iter().rev().find(|a| a.operation_id == *operation_id).cloned();
    // Only the task's latest call can be re-sent: an older operation that a
    // repair or a revision replaced is history.
    let latest_call_is_other =
        attempts.iter().rev().find(|a| a.revision == revision).is_some_and(|a| a.operation_id != *operation_id);
    let latest_try = latest.as_ref().map(|a| LatestTry { try_no: a.try_no, state: a.state, class: a.class() });
    match retry::decide(state, latest_try, latest_call_is_other) {
        Ok(()) => {}
        Err(Refusal::NotLatestCall) => {
            return Err(Error::usage(format!(
            "operation {operation_id} is not task {task_ref}'s latest call (task state {state}); nothing to retry{}",
            next_words(&*read, &goal_id, &task_ref)?
        ))
            .at(named.arg.to_string()))
        }
        Err(refusal) => {
            return Err(Error::usage(format!(
                "operation {operation_id} (task {task_ref}) is not retryable: {}{}",
                refusal.why(),
                next_words(&*read, &goal_id, &task_ref)?
            ))
            .at(named.arg.to_string()))
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
    let after_try = latest.as_ref().map(|a| a.try_no);
    let waived = read_back_waived(&*read, (&goal_id, revision, &task_ref), operation_id, (named, latest.as_ref()))?;
    let row = read.revision(&goal_id, revision)?;
    let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of {goal_id} r{revision} does not parse: {e}"))
    })?;
    let mut plan = Plan::from_file(file, PathBuf::from(&row.workspace))?;
    plan.source = super::recorded_source(&row.plan_path, &plan.workspace);
    let sandboxes = Sandboxes::prepare(&plan, ledger.path())?;
    sandboxes.hold_to_shared(ledger)?;
    let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task_ref };
    let asked = (after_try, named.without_read_back);
    ledger.write(Durability::Full, |tx| record_request(tx, key, operation_id, (person, asked), request_id))?;
    // A retry of a call that carried a person's answers carries them again.
    let answers = super::answer::in_force(&*ledger.read(), &goal_id, revision)?;
    let retry = HashSet::from([operation_id.clone()]);
    let read_back_waived = if waived { retry.clone() } else { HashSet::new() };
    let reruns = super::rerun::in_force(&*ledger.read(), &goal_id, revision)?;
    let asked = Asked { retry, read_back_waived, answers, reruns, ..Asked::default() };
    run::execute(ledger, &plan, revision, jobs, asked, sandboxes, progress)
}

/// The person's retry request, one transaction: the task pending again,
/// the request on the act chain (with why the read-back is waived, if it
/// is), its event, and the request id.
fn record_request(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    operation_id: &OperationId,
    (person, (after_try, without_read_back)): (&Person, (Option<i64>, Option<&str>)),
    request_id: Option<&NewRequestId>,
) -> Result<()> {
    let (goal_id, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
    tx.set_task_state(key, TaskState::Pending, &json!({"retry_requested": operation_id}))?;
    let without_read_back = without_read_back.map(|why| json!({"reason": why}));
    let mut said = json!({"after_try": after_try});
    if let Some(w) = &without_read_back {
        said["without_read_back"] = w.clone();
    }
    let ask = NewAsk {
        kind: AskKind::Retry,
        goal_id,
        revision,
        task_ref: Some(task_ref),
        operation_id: Some(operation_id),
        person,
        data: &said,
    };
    let ask_id = tx.insert_ask(&ask)?;
    let mut data = json!({"operation_id": operation_id, "after_try": after_try, "ask_id": ask_id,
        "actor": person.actor, "uid": person.uid, "user": person.user});
    if let Some(w) = without_read_back {
        data["without_read_back"] = w;
    }
    tx.append_event(&Event::goal(EventKind::RetryRequested, goal_id, revision, data).task(task_ref))?;
    match request_id {
        Some(r) => tx.insert_request_id(r),
        None => Ok(()),
    }
}

/// Is this re-send to go without the read-back? Asked now (only for an
/// operation a person settled `not_run`: that settlement is the person's
/// word the read-back would replace), or asked by a person's earlier
/// retry of this very try (whose call then waited on an approval).
fn read_back_waived(
    read: &dyn LedgerRead,
    (goal_id, revision, task_ref): (&GoalId, Revision, &str),
    operation_id: &OperationId,
    (named, latest): (&Named, Option<&AttemptRecord>),
) -> Result<bool> {
    let settled_not_run = latest.is_some_and(|a| a.state == AttemptState::SettledNotRun);
    if let Some(why) = named.without_read_back {
        if why.trim().is_empty() {
            return Err(Error::usage("--without-read-back needs a reason (--reason WHY)").at(named.arg.to_string()));
        }
        if !settled_not_run {
            return Err(Error::usage(format!(
                "--without-read-back is for an operation a person settled `not_run` whose read-back cannot answer; \
                 operation {operation_id}'s latest try is not settled `not_run`: `engine retry {}` reads it back as it should",
                crate::decide::advice::shell_word(task_ref)
            ))
            .at(named.arg.to_string()));
        }
        return Ok(true);
    }
    let Some(e) = read.latest_event(goal_id, revision, EventKind::RetryRequested)? else { return Ok(false) };
    let same = e.task_ref.as_deref() == Some(task_ref)
        && e.data.get("operation_id").and_then(|o| o.as_str()) == Some(operation_id.as_str())
        && e.data.get("after_try").and_then(|t| t.as_i64()) == latest.map(|a| a.try_no);
    Ok(settled_not_run && same && e.data.get("without_read_back").is_some_and(|w| w.is_object()))
}

/// `; next: …` — the way out of the task's state (`decide::advice`), or
/// nothing when no way waits on a person.
fn next_words(read: &dyn LedgerRead, goal_id: &GoalId, task_ref: &str) -> Result<String> {
    let g = read.goal_or_latest(Some(goal_id))?;
    let Some(task) = read.task(goal_id, g.active_revision, task_ref)? else { return Ok(String::new()) };
    let place = super::advice::Place::of(read, &g)?;
    let a = super::advice::of_task(read, &g, &place, &task)?;
    Ok(match a.ways.is_empty() {
        true => String::new(),
        false => format!("; next: {}", a.sentence()),
    })
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
    crate::say_line!("engine: waiting {wait_s}s: the provider answered Retry-After: {seconds}");
    std::thread::sleep(Duration::from_millis(wait_ms as u64));
    Ok(())
}
