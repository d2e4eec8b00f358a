//! The call site's transaction: gather the gate's facts inside the
//! transaction that would commit the intent, ask `decide::gate`, apply its
//! answer in that same transaction. Only once the intent is committed does
//! the core hand the call to its provider.

use providers::sandbox::Record;
use serde_json::json;

use super::scope::Scope;
use crate::decide::budget::Usage;
use crate::decide::gate::{self, ApprovalFacts, Decision, OpenApproval, SameRequest};
use crate::error::{Code, Error, Result};
use crate::ids::{ApprovalId, GoalId, Revision};
use crate::plan::Task;
use crate::run::core::{Applied, GateCall};
use crate::state::{AttemptState, TaskState};
use crate::store::acts::{ActRef, PendingRequest};
use crate::store::attempts::{GateAsk, GateAttempts, NewIntent};
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{LedgerRead, LedgerTx};

/// One transaction: the facts, the gate's decision, and its records.
/// `now_ms`: the world's clock (the deadline counts from `began_ms`).
pub fn gate(tx: &mut dyn LedgerTx, scope: &Scope, call: &GateCall, sandbox: &Record, now_ms: i64) -> Result<Applied> {
    let task = scope.task(&call.task_ref)?;
    let answer = call.answer_expires.as_ref().map(|x| (x.ask_id, x.at_ms));
    let (decision, last_try) = match gate::answer_expired(answer, now_ms) {
        Some(expired) => (expired, None),
        None => {
            let (decision, read) = decision_and_reads(&*tx, scope, call, (now_ms, Projected::default()))?;
            (decision, Some(read.last_try))
        }
    };
    let needed = match &decision {
        Decision::AwaitApproval(_) => Some(needed(&*tx, scope, call, task)?),
        _ => None,
    };
    apply(tx, scope.key(&call.task_ref), (task, call, sandbox), (decision, needed), last_try)
}

/// What a dry run counts as spent by the calls it would make before this
/// one (a real run has spent it in the ledger).
#[derive(Debug, Clone, Copy, Default)]
pub struct Projected {
    pub provider_calls: u64,
    pub cost: crate::cost::Cost,
}

/// The gate's facts, read from the ledger as they stand, and its
/// decision: nothing written. The run's call site and `engine run
/// --dry-run` ask the same.
pub fn decision<L: LedgerRead + ?Sized>(
    tx: &L,
    scope: &Scope,
    call: &GateCall,
    (now_ms, projected): (i64, Projected),
) -> Result<Decision> {
    Ok(decision_and_reads(tx, scope, call, (now_ms, projected))?.0)
}

/// `decision`, and the reads of the task's attempts it was made on (the
/// intent takes its try number from them: nothing is written between).
fn decision_and_reads<L: LedgerRead + ?Sized>(
    tx: &L,
    scope: &Scope,
    call: &GateCall,
    (now_ms, projected): (i64, Projected),
) -> Result<(Decision, GateAttempts)> {
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    let task = scope.task(&call.task_ref)?;
    let task_ref = call.task_ref.as_str();
    // The goal's row once: its active revision and its counters.
    let (goal, used) = tx.goal_and_use(goal_id)?.ok_or_else(|| Error::internal(format!("goal {goal_id} vanished")))?;
    // Only the digest: the full revision row carries the whole plan JSON,
    // and reading it at every intent made a run quadratic.
    let active_plan_digest = tx.revision_plan_digest(goal_id, goal.active_revision)?;
    let open = open_approvals(tx, call)?;
    // The task's attempts and the operation's tries: one read where the
    // store can (`gate_attempts`).
    let read = tx.gate_attempts(GateAsk {
        goal: goal_id,
        revision,
        task_ref,
        operation: &call.operation_id,
        request: &call.request_digest,
    })?;
    let attempts_of_task = attempts_of_task(tx, (goal_id, revision), task_ref, read.count)?;
    let (always, paid_or_external) = ApprovalFacts::of_task(task);
    let budgets = budgets(call);
    let facts = gate::Facts {
        revision,
        active_revision: goal.active_revision,
        plan_digest: &scope.plan.digests().plan,
        active_plan_digest: &active_plan_digest,
        unsettled: read.unsettled,
        same_request: same_request(tx, call, goal_id)?,
        conflict: read.conflict.clone(),
        request_digest: &call.request_digest,
        budgets: &budgets,
        usage: Usage {
            attempts_of_task,
            provider_calls: used.calls + projected.provider_calls,
            cost: used.cost.plus(projected.cost),
            // The deadline bounds this run of work, not the goal's life.
            elapsed_seconds: ((now_ms - call.began_ms).max(0) / 1000) as u64,
        },
        call_cost: task.cost(),
        may_spend: task.may_spend,
        approval: ApprovalFacts {
            always,
            paid_or_external,
            asked_repeat: call.asked_repeat,
            prior_dispatch: read.prior_dispatch,
            open: &open,
        },
        now_ms,
    };
    let decision = gate::decide(&facts);
    Ok((decision, read))
}

/// The approvals open for the call's operation, each one vouched for by
/// the act chain: a row written by anything else stops the run here, and
/// nothing is dispatched (STORE_TAMPERED names the row).
fn open_approvals<L: LedgerRead + ?Sized>(tx: &L, call: &GateCall) -> Result<Vec<OpenApproval>> {
    let open: Vec<OpenApproval> = tx
        .open_approvals(&call.operation_id)?
        .into_iter()
        .map(|a| OpenApproval {
            id: a.id,
            request_digest: a.request_digest,
            plan_digest: a.plan_digest,
            revision: a.revision,
            cost: a.cost,
            expires_at_ms: a.expires_at_ms,
        })
        .collect();
    let open: Vec<OpenApproval> = match crate::failpoint::fault(crate::failpoint::Fault::SpendExpiredApproval) {
        // Planted fault: no approval is ever past its time.
        true => open.into_iter().map(|a| OpenApproval { expires_at_ms: None, ..a }).collect(),
        false => open,
    };
    for a in &open {
        tx.check_on_chain(ActRef::Approval(a.id))?;
    }
    Ok(open)
}

/// The task's attempts in this revision that count against its budget
/// (`counted`: the store's count of them).
fn attempts_of_task<L: LedgerRead + ?Sized>(
    tx: &L,
    (goal_id, revision): (&GoalId, Revision),
    task_ref: &str,
    counted: u64,
) -> Result<u64> {
    let mut attempts = counted;
    if crate::failpoint::fault(crate::failpoint::Fault::StopConsumesAttempt) {
        // Planted fault: the attempts a person's stop cancelled count too.
        let cancelled = tx.attempts_in_state(goal_id, AttemptState::Cancelled)?;
        attempts += cancelled.iter().filter(|a| a.revision == revision && a.task_ref == task_ref).count() as u64;
    }
    Ok(attempts)
}

/// The budgets the call is weighed against.
fn budgets(call: &GateCall) -> crate::plan::Budgets {
    let mut budgets = call.budgets.clone();
    if crate::failpoint::fault(crate::failpoint::Fault::SkipCallBudget) {
        // Planted fault: the provider-call budget is not checked.
        budgets.max_provider_calls = u64::MAX;
    }
    budgets
}

/// Why a call the gate stopped for an approval needs one (read only then).
fn needed(tx: &dyn LedgerTx, scope: &Scope, call: &GateCall, task: &Task) -> Result<gate::Needed> {
    let (always, paid_or_external) = ApprovalFacts::of_task(task);
    let (goal_id, task_ref) = (&scope.goal_id, call.task_ref.as_str());
    let facts = ApprovalFacts {
        always,
        paid_or_external,
        asked_repeat: call.asked_repeat,
        prior_dispatch: tx.prior_dispatch(goal_id, task_ref)?,
        open: &[],
    };
    Ok(facts.needed_because(earlier_call(tx, goal_id, task_ref)?, scope.revision, gate::Work::of_task(task)))
}

/// The revision of the task's latest call that was sent, and whether one
/// of its calls succeeded (that one's revision, then): why a repeat of it
/// needs a person's approval.
fn earlier_call(tx: &dyn LedgerTx, goal_id: &GoalId, task_ref: &str) -> Result<Option<(Revision, bool)>> {
    let attempts = tx.attempts_of_task(goal_id, task_ref)?;
    if let Some(a) = attempts.iter().rfind(|a| a.state == AttemptState::Succeeded) {
        return Ok(Some((a.revision, true)));
    }
    let sent = |a: &&crate::store::attempts::AttemptRecord| {
        !matches!(a.state, AttemptState::IntentRecorded | AttemptState::SettledNotRun)
    };
    Ok(attempts.iter().rev().find(sent).map(|a| (a.revision, false)))
}

/// Another operation with this call's request by content, of any task or
/// goal in the store, whose outcome nobody knows (the gate's rule 3).
fn same_request<L: LedgerRead + ?Sized>(tx: &L, call: &GateCall, goal_id: &GoalId) -> Result<Option<SameRequest>> {
    let Some(fp) = &call.fingerprint else { return Ok(None) };
    Ok(tx.same_request_unsettled(fp, &call.operation_id, goal_id)?.map(|a| SameRequest {
        attempt: a.id,
        operation_id: a.operation_id,
        goal_id: a.goal_id,
        task_ref: a.task_ref,
        state: a.state,
    }))
}

/// The gate's decision, recorded in the intent's transaction.
/// `last_try`: the operation's highest try as the decision read it.
fn apply(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    (task, call, sandbox): (&Task, &GateCall, &Record),
    (decision, needed): (Decision, Option<gate::Needed>),
    last_try: Option<i64>,
) -> Result<Applied> {
    let (goal_id, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
    let op = &call.operation_id;
    let event = |kind, data| Event::goal(kind, goal_id, revision, data).task(task_ref);
    match decision {
        Decision::PlanMoved { active } => Err(Error::new(
            Code::PlanChanged,
            format!("goal {goal_id} moved to revision {active} while this run was on revision {revision}; nothing more is dispatched"),
        )),
        Decision::Conflict { recorded } => Err(Error::new(
            Code::OperationConflict,
            format!("operation {op} was recorded with request digest {recorded}, not {}; refusing to send a different request under the same operation id", call.request_digest),
        )
        .at(task_ref.to_string())),
        Decision::Unsettled { attempt, state } => {
            // Never a new call of a task while an earlier attempt of it (of
            // this operation or another) is unknown or in doubt.
            let why = format!("attempt {} of this task is {state}: settle it first", tx.attempt_number(attempt)?);
            let detail = json!({"operation_id": op, "waits_on_attempt": attempt, "why": why});
            tx.set_task_state(key, TaskState::EffectUnknown, &detail)?;
            tx.append_event(&event(EventKind::CallRefused, json!({"operation_id": op, "why": why})))?;
            Ok(Applied::Stopped(Decision::Unsettled { attempt, state }))
        }
        Decision::SameRequest(first) => {
            // Blocked, not unknown: nothing of this task was sent; it goes
            // on once a person settles the first one.
            let why = first.why();
            let detail = json!({"operation_id": op, "same_request": first, "settle": first.settle(), "why": why});
            tx.set_task_state(key, TaskState::Blocked, &detail)?;
            tx.append_event(&event(EventKind::CallRefused, detail))?;
            Ok(Applied::Stopped(Decision::SameRequest(first)))
        }
        Decision::Budget(exhausted) => {
            tx.append_event(&event(EventKind::BudgetExhausted, json!(exhausted)))?;
            Ok(Applied::Stopped(Decision::Budget(exhausted)))
        }
        Decision::AwaitApproval(missing) => {
            await_approval(tx, key, call, (&missing, needed))?;
            Ok(Applied::Stopped(Decision::AwaitApproval(missing)))
        }
        Decision::AnswerExpired { ask_id, at_ms } => {
            answer_expired(tx, key, call, (ask_id, at_ms))?;
            Ok(Applied::Stopped(Decision::AnswerExpired { ask_id, at_ms }))
        }
        Decision::Go { consume, void } => {
            commit_intent(tx, key, (task, call, sandbox), (consume, &void), last_try)
        }
    }
}

/// A call that waits on a person's approval: the task says why, and the
/// request waits for `engine approve`.
fn await_approval(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    call: &GateCall,
    (missing, needed): (&gate::Missing, Option<gate::Needed>),
) -> Result<()> {
    let (goal_id, revision, task_ref, op) = (key.goal_id, key.revision, key.task_ref, &call.operation_id);
    // A repeat says why it needs a person; a task that declares
    // `requires_approval` says so in its plan (its words as before).
    let why = match needed {
        Some(n) if n != gate::Needed::Declared => format!("{}; {}", n.words(), missing.why()),
        _ => missing.why(),
    };
    // `asked_by`: which command's call waits, so `engine status` can
    // name the command that spends the approval.
    let detail = json!({"operation_id": op, "request_digest": call.request_digest, "why": why, "asked_by": call.kind});
    tx.set_task_state(key, TaskState::AwaitingApproval, &detail)?;
    tx.append_event(&Event::goal(EventKind::ApprovalRequired, goal_id, revision, detail).task(task_ref))?;
    tx.insert_pending_request(&PendingRequest {
        operation_id: op.clone(),
        goal_id: goal_id.clone(),
        revision,
        task_ref: task_ref.to_string(),
        request_digest: call.request_digest.clone(),
    })
}

/// A call whose person's answer expired: never sent; the task waits on
/// the question again, as it did before the answer.
fn answer_expired(tx: &mut dyn LedgerTx, key: TaskKey, call: &GateCall, (ask_id, at_ms): (i64, i64)) -> Result<()> {
    let (goal_id, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
    let mut detail = call.answer_expires.as_ref().map(|x| x.question.clone()).unwrap_or_else(|| json!({}));
    if let Some(d) = detail.as_object_mut() {
        d.insert("answer_expired".into(), json!({"ask_id": ask_id, "at_ms": at_ms}));
    }
    tx.set_task_state(key, TaskState::AwaitingInput, &detail)?;
    let why = format!(
        "the person's answer expired at {} UTC: never sent; the task asks again (`engine answer {task_ref}`)",
        crate::clock::utc(at_ms)
    );
    let data = json!({"operation_id": call.operation_id, "ask_id": ask_id, "answer_expired_at_ms": at_ms, "why": why});
    tx.append_event(&Event::goal(EventKind::CallRefused, goal_id, revision, data).task(task_ref))?;
    Ok(())
}

/// The intent, with the approval it spends (or the ones it voids), the
/// task running, and the event — one commit.
fn commit_intent(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    (task, call, sandbox): (&Task, &GateCall, &Record),
    (consume, void): (Option<ApprovalId>, &[ApprovalId]),
    last_try: Option<i64>,
) -> Result<Applied> {
    let (goal_id, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
    let try_no = match last_try {
        Some(last) => last,
        None => tx.last_try(&call.operation_id)?,
    } + 1;
    let intent = tx.insert_intent(&NewIntent {
        goal_id,
        revision,
        task_ref,
        operation_id: &call.operation_id,
        try_no,
        kind: call.kind,
        request_digest: &call.request_digest,
        request_json: &call.request,
        effect: task.effect,
        cost: task.cost(),
        inputs_at_intent: call.inputs_at_intent.as_ref().map(|c| c.digest.as_str()),
        instruction: call.repair.as_ref().and_then(|r| r.instruction.as_deref()),
        sandbox,
        protected_at_intent: call.protected.as_ref().map(|c| c.digest.as_str()),
    })?;
    let id = intent.attempt_id();
    for cp in call.inputs_at_intent.iter().chain(&call.protected) {
        tx.put_checkpoint(cp)?;
    }
    if let Some(approval) = consume {
        tx.consume_approval(approval, id)?;
    }
    if !void.is_empty() {
        tx.void_approvals(void, id)?;
        let data = json!({
            "approval_ids": void, "why": "this call needed no approval; approvals are never kept for a later repeat",
        });
        let e = Event::goal(EventKind::ApprovalsVoided, goal_id, revision, data).task(task_ref).attempt(id);
        tx.append_event(&e)?;
    }
    tx.set_task_state(key, TaskState::Running, &json!({"attempt_id": id}))?;
    let data = json!({
        "operation_id": call.operation_id, "try": try_no, "request_digest": call.request_digest,
        "approval_consumed": consume,
    });
    tx.append_event(&Event::goal(EventKind::IntentRecorded, goal_id, revision, data).task(task_ref).attempt(id))?;
    Ok(Applied::Go { intent, try_no })
}
