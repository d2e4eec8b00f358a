//! `engine approve`: a person's approval, bound to the exact request and
//! plan, consumed by the one call it allows (`decide::gate` weighs it).
//!
//! Architecture invariant: `record`, reached only from `engine approve`
//! (the CLI), is the only caller of the ledger's `insert_approval`. Nothing
//! a provider or model returns flows here: `record` takes the operation id,
//! note and person a person typed, and reads the request it binds to from
//! the ledger itself.
//!
//! One approval pays for one call: approving a request that already holds
//! an unspent approval records nothing new ("already approved; waiting for
//! the call"), whatever the person typed.
//!
//! An approval answers a question the engine asked: only an operation a
//! task of a goal's active revision is `awaiting_approval` on can be
//! approved (`NOTHING_TO_APPROVE` otherwise: an unknown operation, one
//! never gated, one already done). It binds what the person saw — the
//! request digest, the plan revision and the call's cost — and `approve`
//! prints all three; the gate spends it only on a call that matches all
//! three (`APPROVAL_STALE`, naming what changed). `--expect-cost N` is the
//! person's word on the cost they saw: another cost records nothing.

use serde::Serialize;
use serde_json::json;

use crate::cost::Cost;
use crate::decide::gate::ApprovalFacts;
use crate::decide::people::Act;
use crate::decide::spend::{self, Nothing, Standing};
use crate::error::{Code, Error, Result};
use crate::ids::{ApprovalId, GoalId, OperationId, RequestDigest, Revision};
use crate::state::TaskState;
use crate::store::acts::{ActRef, NewApproval, NewRequestId, Person};
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard, LedgerRead};

#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub approval_id: ApprovalId,
    pub operation_id: OperationId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
    /// The cost of the call approved (the task's `cost` in this revision).
    pub cost: Cost,
    pub person: Person,
    /// The request already held this unspent approval: nothing new was
    /// recorded.
    pub already_approved: bool,
    /// The command whose call spends it.
    pub spent_by: String,
    /// When it expires (`--for`, the plan's `approvals.expire_after`);
    /// `None`: it lasts until spent.
    pub expires_at_ms: Option<i64>,
}

/// What an approval of `operation_id` binds to.
struct Target {
    goal_id: GoalId,
    revision: Revision,
    task_ref: String,
    request_digest: RequestDigest,
    /// The call's cost: its task's `cost` in the revision.
    cost: Cost,
}

/// The request an approval of `operation_id` answers, while it stands
/// (`decide::spend::waits`): the newest request the engine asked a person
/// to approve in a goal's active revision, its task still waiting on it —
/// a repair with an instruction is its own operation, which only that
/// request row carries — or the operation of a task whose latest attempt
/// failed or was settled not run, ahead of the retry that will need one.
fn target(read: &dyn LedgerRead, operation_id: &OperationId) -> Result<Target> {
    let asked = read.pending_request(operation_id)?;
    let active = read.active_task_of_operation(operation_id)?;
    let (goal_id, revision, task_ref) = match (&asked, &active) {
        (Some(p), _) => (p.goal_id.clone(), p.revision, p.task_ref.clone()),
        (None, Some(t)) => (t.goal_id.clone(), t.revision, t.task_ref.clone()),
        (None, None) => return Err(nothing(operation_id, None, &Nothing::Unknown)),
    };
    let task = read.task(&goal_id, revision, &task_ref)?;
    let latest = read
        .attempts_of_task(&goal_id, &task_ref)?
        .into_iter()
        .rfind(|a| a.revision == revision && a.operation_id == *operation_id)
        .map(|a| a.state);
    let plan = super::active_plan(read, &goal_id)?;
    let spec = plan.tasks.iter().find(|x| x.task_ref == task_ref).ok_or_else(|| {
        Error::new(Code::StoreCorrupt, format!("the stored plan of goal {goal_id} has no task {task_ref}"))
    })?;
    let standing = Standing {
        task: task.as_ref().map(|t| t.state),
        asked: asked.is_some()
            && task.as_ref().is_some_and(|t| {
                t.state == TaskState::AwaitingApproval
                    && t.pending_operation().unwrap_or(t.operation_id.as_str()) == operation_id.as_str()
            }),
        latest,
        repeat_needs_approval: {
            let (always, paid_or_external) = ApprovalFacts::of_task(spec);
            always || paid_or_external
        },
    };
    if let Err(why) = spend::waits(&standing) {
        return Err(nothing(operation_id, Some((&task_ref, &goal_id, revision)), &why));
    }
    let request_digest = match (asked, active) {
        (Some(p), _) => p.request_digest,
        (None, Some(t)) => t.request_digest,
        (None, None) => return Err(nothing(operation_id, None, &Nothing::Unknown)),
    };
    Ok(Target { goal_id, revision, task_ref, request_digest, cost: spec.cost() })
}

/// `NOTHING_TO_APPROVE`, saying why.
fn nothing(op: &OperationId, task: Option<(&str, &GoalId, Revision)>, why: &Nothing) -> Error {
    let task_words = |(r, g, n): (&str, &GoalId, Revision)| format!("task {r} (goal {g}, revision {n})");
    let why = match (why, task) {
        (Nothing::NotAsked { task: state }, Some(t)) => format!(
            "{} is {state}, and no call of it waits on an approval: the engine asks for one when a call needs it (`engine run` asks first)",
            task_words(t)
        ),
        (Nothing::NeedsNone { task: state }, Some(t)) => format!(
            "{} is {state}, and sending it again needs no approval (it is neither paid, nor external, nor `requires_approval`)",
            task_words(t)
        ),
        _ => format!("no task of a goal's active revision has operation {op}"),
    };
    Error::new(
        Code::NothingToApprove,
        format!(
            "{why}: nothing waits on an approval of {op}, so nothing was recorded (`engine status` lists what does)"
        ),
    )
    .at(op.to_string())
}

/// May `person` approve `operation_id` (`NOT_PERMITTED` otherwise)?
pub fn permitted(read: &dyn LedgerRead, operation_id: &OperationId, person: &Person) -> Result<()> {
    let t = target(read, operation_id)?;
    super::permitted(read, &t.goal_id, Act::Approve, person)
}

/// `--expect-cost N`: the person's word on the cost they saw. Another
/// cost is refused before anything is recorded.
fn expected_cost(operation_id: &OperationId, task_ref: &str, cost: Cost, expected: Option<Cost>) -> Result<()> {
    match expected.filter(|e| *e != cost) {
        None => Ok(()),
        Some(expected) => Err(Error::usage(format!(
            "the call of task {task_ref} that waits on this approval costs {cost}, not {expected} (--expect-cost): \
             nothing is recorded; `engine status` shows what waits and what it costs"
        ))
        .at(operation_id.to_string())
        .with_details(json!({"operation_id": operation_id, "cost": cost, "expected": expected}))),
    }
}

/// `engine approve`: record a person's approval of the pending request of
/// `operation_id` in the goal's active revision (and `request_id`, in the
/// same transaction) — unless an unspent approval already waits for it.
pub fn record(
    ledger: &mut LeaseGuard,
    operation_id: &OperationId,
    (note, expect_cost, for_ms): (&str, Option<Cost>, Option<u64>),
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<Recorded> {
    if note.trim().is_empty() {
        return Err(Error::usage("an approval needs a note (--note TEXT): say why this call may be made"));
    }
    let read = ledger.read();
    let t = target(&*read, operation_id)?;
    let cost = t.cost;
    expected_cost(operation_id, &t.task_ref, cost, expect_cost)?;
    let row = read.revision(&t.goal_id, t.revision)?;
    let asked_by = read.task(&t.goal_id, t.revision, &t.task_ref)?.and_then(|task| task.asked_by());
    let spent_by = crate::decide::spend::spending_command(asked_by, operation_id.as_str(), &t.task_ref, &row.plan_path);
    let plan_digest = row.plan_digest;
    let expires_at_ms = lasts(&*read, &t.goal_id, for_ms)?.map(|ms| crate::clock::now_ms().saturating_add(ms as i64));
    let waiting = waiting(&*read, operation_id, &t, &plan_digest)?;
    let recorded = |approval_id, already_approved, expires_at_ms| Recorded {
        approval_id,
        operation_id: operation_id.clone(),
        goal_id: t.goal_id.clone(),
        revision: t.revision,
        task_ref: t.task_ref.clone(),
        request_digest: t.request_digest.clone(),
        plan_digest: plan_digest.clone(),
        cost,
        person: person.clone(),
        already_approved,
        spent_by: spent_by.clone(),
        expires_at_ms,
    };
    if let Some((id, at)) = waiting {
        if let Some(r) = request_id {
            ledger.write(Durability::Full, |tx| tx.insert_request_id(r))?;
        }
        return Ok(recorded(id, true, at));
    }
    let approval_id = ledger.write(Durability::Full, |tx| {
        let id = tx.insert_approval(&NewApproval {
            operation_id,
            goal_id: &t.goal_id,
            revision: t.revision,
            task_ref: &t.task_ref,
            request_digest: &t.request_digest,
            plan_digest: &plan_digest,
            cost,
            person,
            note,
            expires_at_ms,
        })?;
        let data = json!({
            "approval_id": id, "operation_id": operation_id, "request_digest": t.request_digest,
            "plan_digest": plan_digest, "revision": t.revision, "cost": cost, "actor": person.actor, "uid": person.uid, "user": person.user, "note": note,
            "expires_at_ms": expires_at_ms,
        });
        tx.append_event(&Event::goal(EventKind::ApprovalRecorded, &t.goal_id, t.revision, data).task(&t.task_ref))?;
        if let Some(r) = request_id {
            tx.insert_request_id(r)?;
        }
        Ok(id)
    })?;
    Ok(recorded(approval_id, false, expires_at_ms))
}

/// An unspent approval of `operation_id` that already waits for this very
/// request (same digests, revision and cost, not expired): its id and
/// when it ends.
fn waiting(
    read: &dyn LedgerRead,
    operation_id: &OperationId,
    t: &Target,
    plan_digest: &str,
) -> Result<Option<(ApprovalId, Option<i64>)>> {
    let mut waiting = None;
    for a in read.open_approvals(operation_id)? {
        read.check_on_chain(ActRef::Approval(a.id))?;
        let binds = a.request_digest == t.request_digest && a.plan_digest == *plan_digest;
        // An expired one waits for nothing: a new approval is recorded.
        let expired = a.expires_at_ms.is_some_and(|at| crate::clock::now_ms() >= at);
        if binds && a.revision == t.revision && a.cost.is_none_or(|c| c == t.cost) && !expired {
            waiting = Some((a.id, a.expires_at_ms));
        }
    }
    Ok(waiting)
}

/// How long an approval lasts: `--for`, else the goal's active plan's
/// `approvals.expire_after`, else until spent (`None`).
pub(super) fn lasts(read: &dyn LedgerRead, goal: &GoalId, for_ms: Option<u64>) -> Result<Option<u64>> {
    if for_ms.is_some() {
        return Ok(for_ms);
    }
    let plan = super::active_plan(read, goal)?;
    let after = plan.approvals.and_then(|a| a.expire_after);
    after.map(|s| crate::decide::expiry::parse(&s).map_err(|why| Error::new(Code::StoreCorrupt, why))).transpose()
}
