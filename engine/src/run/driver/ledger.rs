//! The core's writes, each one transaction of the ledger (`LeaseGuard::
//! write`, or the open group's). The transactions that judge a provider's
//! answer are `receipt`'s; the call site's is `gate`'s; the rest are here.

use serde_json::{json, Value};

use super::scope::Scope;
use super::{gate, read_first, receipt};
use crate::decide::budget::Exhausted;
use crate::decide::classify;
use crate::decide::durability::{self, Stakes};
use crate::decide::in_doubt::Resolution;
use crate::error::Result;
use crate::evidence::{Evidence, StopEnd, UnknownReason};
use crate::ids::{AttemptId, Seq};
use crate::run::check::CheckRun;
use crate::run::core::{
    Applied, CallStopped, Dispatch, FromReadBack, GateCall, Receiving, Spent, StoppedAs, Validations, Verdict, Write,
};
use crate::run::looked::Looked;
use crate::run::report::AcceptanceLine;
use crate::run::world::World;
use crate::signals::StopSignal;
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::attempts::Intent;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LeaseGuard, LedgerTx};

/// Perform one of the core's writes whose answer is only that it committed.
pub fn write(ledger: &mut LeaseGuard, scope: &Scope, w: Write) -> Result<()> {
    let revision = scope.revision;
    match w {
        Write::Event { durability, kind, task_ref, attempt, data } => {
            event(ledger, scope, durability, (kind, task_ref.as_deref(), attempt), &data)
        }
        Write::TaskState { task_ref, state, detail } => {
            ledger.write(Durability::Normal, |tx| set_task_in(tx, scope.key(&task_ref), state, detail.clone()))
        }
        Write::Handle { attempt_id, intent, task_ref, handle, detail } => {
            let data = json!({"handle": handle, "detail": detail});
            ledger.write(Durability::Full, |tx| {
                tx.record_handle(intent, &handle)?;
                let e = Event::goal(EventKind::HandleRecorded, &scope.goal_id, revision, data.clone());
                tx.append_event(&e.task(&task_ref).attempt(attempt_id)).map(|_| ())
            })
        }
        Write::Dispatched(d) => ledger.write(Durability::Normal, dispatched(scope, d)),
        Write::Failed { attempt_id, task_ref, looked, evidence, durability, never_dispatched } => {
            let durability = durability::for_write(durability, Stakes::of_task(scope.task(&task_ref)?));
            ledger.write(durability, |tx| {
                receipt::failed(tx, scope, (attempt_id, &task_ref), looked.as_deref(), &evidence, never_dispatched)
            })
        }
        Write::GoalConstraints(runs) => {
            ledger.write(Durability::Normal, |tx| receipt::goal_constraints(tx, scope, &runs))
        }
        Write::ObservedReceipt { attempt, reason, detail, looked } => ledger
            .write(Durability::Full, |tx| receipt::observed_receipt(tx, scope, &attempt, (reason, &detail), &looked)),
        Write::Superseded { attempt, resolution, looked } => {
            ledger.write(Durability::Full, |tx| superseded(tx, &attempt, resolution, &looked))
        }
        Write::Abandon { attempt, looked } => {
            ledger.write(Durability::Full, |tx| abandon(tx, revision, &attempt, &looked))
        }
        Write::CallStopped(stopped) => ledger.write(Durability::Full, |tx| call_stopped(tx, revision, &stopped)),
        Write::ValidationsStopped { attempt, stopped, signal, detail } => ledger
            .write(Durability::Normal, |tx| validations_stopped(tx, revision, &attempt, (&stopped, signal), &detail)),
        Write::RetryStaysUnknown { task_ref, operation_id, looked } => ledger
            .write(Durability::Full, |tx| read_first::stays_unknown(tx, scope, (&task_ref, &operation_id), &looked)),
        Write::ClaimTakenOver { task_ref, previous_worker, previous_generation, generation } => {
            let data = json!({
                "previous_worker": previous_worker, "previous_generation": previous_generation,
                "generation": generation, "worker": ledger.worker_id(),
                "why": "the previous worker's claim expired without a heartbeat",
            });
            event(ledger, scope, Durability::Normal, (EventKind::ClaimTakenOver, task_ref.as_deref(), None), &data)
        }
    }
}

/// One event of the goal's, of a task and attempt where it names them.
fn event(
    ledger: &mut LeaseGuard,
    scope: &Scope,
    durability: Durability,
    (kind, task_ref, attempt): (EventKind, Option<&str>, Option<AttemptId>),
    data: &Value,
) -> Result<()> {
    ledger.write(durability, |tx| {
        let mut e = Event::goal(kind, &scope.goal_id, scope.revision, data.clone());
        e.task_ref = task_ref;
        e.attempt_id = attempt;
        tx.append_event(&e).map(|_| ())
    })
}

/// `run_started`: its event's sequence number.
pub fn run_started(ledger: &mut LeaseGuard, scope: &Scope, jobs: usize) -> Result<Seq> {
    let data = json!({"generation": ledger.fence().generation(), "jobs": jobs, "pid": std::process::id()});
    ledger.write(Durability::Normal, |tx| {
        tx.append_event(&Event::goal(EventKind::RunStarted, &scope.goal_id, scope.revision, data.clone()))
    })
}

/// The call-site gate's transaction (`gate`), as durable as the attempt's stakes.
pub fn gate(ledger: &mut LeaseGuard, scope: &Scope, world: &dyn World, call: &GateCall) -> Result<Applied> {
    let task = scope.task(&call.task_ref)?;
    let (sandbox, now_ms) = (world.sandbox_record(task), world.now_ms());
    let mut durability = durability::of_attempt(Stakes::of_task(task));
    if crate::failpoint::fault(crate::failpoint::Fault::ExternalIntentNormal) {
        // Planted fault: the intent waits for no disk, whatever it risks.
        durability = Durability::Normal;
    }
    ledger.write(durability, |tx| gate::gate(tx, scope, call, &sandbox, now_ms))
}

/// A provider's answer (`receipt::receipt`): its verdict and spending.
pub fn receipt(ledger: &mut LeaseGuard, scope: &Scope, r: &Receiving) -> Result<(Verdict, Option<Spent>)> {
    let durability = durability::of_attempt(Stakes::of_task(scope.task(&r.task_ref)?));
    ledger.write(durability, |tx| receipt::receipt(tx, scope, r))
}

/// Nobody can tell: `effect_unknown`; the attempt as it was before.
pub fn unknown(
    ledger: &mut LeaseGuard,
    scope: &Scope,
    (attempt_id, looked, evidence, reason): (AttemptId, Option<Box<Looked>>, Vec<Evidence>, UnknownReason),
) -> Result<Box<AttemptRecord>> {
    let attempt = ledger.read().attempt(attempt_id)?;
    ledger.write(Durability::Full, |tx| {
        receipt::unknown(tx, scope.revision, &attempt, looked.as_deref(), &evidence, reason)
    })?;
    Ok(Box::new(attempt))
}

/// An attempt's validations, judged: the goal constraints' evidence recorded.
pub fn validations(ledger: &mut LeaseGuard, scope: &Scope, v: &Validations) -> Result<Vec<Evidence>> {
    ledger.write(Durability::Normal, |tx| receipt::validations(tx, scope, v))
}

/// The goal's acceptance checks: the report's lines.
pub fn acceptance(ledger: &mut LeaseGuard, scope: &Scope, runs: &[CheckRun]) -> Result<Vec<AcceptanceLine>> {
    ledger.write(Durability::Normal, |tx| receipt::acceptance(tx, scope, runs))
}

/// A person's retry completed from its read-back (`read_first::completed`).
pub fn completed_from_read_back(
    ledger: &mut LeaseGuard,
    scope: &Scope,
    world: &dyn World,
    from: &FromReadBack,
) -> Result<std::result::Result<Intent, Exhausted>> {
    let (sandbox, now) = (world.sandbox_record(scope.task(&from.task_ref)?), world.now_ms());
    ledger.write(Durability::Full, |tx| read_first::completed(tx, scope, from, &sandbox, now))
}

/// The dispatch record, as a transaction to run now or with the open group.
pub fn dispatched(scope: &Scope, d: Dispatch) -> impl FnMut(&mut dyn LedgerTx) -> Result<()> + Send + 'static {
    let (goal_id, revision) = (scope.goal_id.clone(), scope.revision);
    let mut data = json!({"detail": d.detail});
    if let Some(p) = &d.process {
        data["process"] = json!(p);
    }
    move |tx: &mut dyn LedgerTx| {
        tx.mark_dispatched(d.intent, &d.detail, d.process.as_ref())?;
        let e = Event::goal(EventKind::Dispatched, &goal_id, revision, data.clone());
        tx.append_event(&e.task(&d.task_ref).attempt(d.attempt_id)).map(|_| ())
    }
}

/// A task's state and the event that says so, inside the caller's
/// transaction.
pub fn set_task_in(tx: &mut dyn LedgerTx, key: TaskKey, state: TaskState, detail: Value) -> Result<()> {
    tx.set_task_state(key, state, &detail)?;
    let e = Event::goal(EventKind::TaskState, key.goal_id, key.revision, json!({"state": state, "detail": detail}));
    let seq = tx.append_event(&e.task(key.task_ref))?;
    // A task of a satisfied goal that runs again (its completion stale: an
    // edited input, a changed tool) opens its goal in the same
    // transaction, as `engine rerun` does: a crash while it runs never
    // leaves `satisfied` over a try in flight (`engine verify`'s
    // `goal_verdicts`; simulator seed 9775).
    if state == TaskState::Pending && tx.goal(key.goal_id)?.is_some_and(|g| g.state == GoalState::Satisfied) {
        let open = if tx.unknown_count(key.goal_id)? > 0 { GoalState::NeedsSettlement } else { GoalState::Open };
        tx.set_goal_state(key.goal_id, open, seq)?;
    }
    Ok(())
}

/// Given up for a new try: safe, because the effect is `none` or the task
/// idempotent (and observation did not find it); the try keeps counting.
fn abandon(tx: &mut dyn LedgerTx, revision: crate::ids::Revision, a: &AttemptRecord, looked: &Looked) -> Result<()> {
    for e in receipt::looked_evidence(tx, looked)? {
        tx.insert_evidence(&a.goal_id, revision, Some(a.id), &e)?;
    }
    tx.finish_attempt(a.id, AttemptState::Abandoned, None, Some(UnknownReason::EngineRestarted))?;
    let key = TaskKey { goal_id: &a.goal_id, revision, task_ref: &a.task_ref };
    tx.set_task_state(key, TaskState::Pending, &json!({"rerun_of": a.id}))?;
    let data = json!({
        "operation_id": a.operation_id, "try": a.try_no, "last_state": a.state,
        "why": "no receipt; the effect is none or idempotent, so a new try is safe",
    });
    let e = Event::goal(EventKind::RerunAfterRestart, &a.goal_id, revision, data);
    tx.append_event(&e.task(&a.task_ref).attempt(a.id)).map(|_| ())
}

/// A superseded revision's in-doubt attempt, resolved, in one transaction.
fn superseded(tx: &mut dyn LedgerTx, a: &AttemptRecord, resolution: Resolution, looked: &Looked) -> Result<()> {
    for e in receipt::looked_evidence(tx, looked)? {
        tx.insert_evidence(&a.goal_id, a.revision, Some(a.id), &e)?;
    }
    let reason = UnknownReason::EngineRestarted;
    let now = match resolution {
        Resolution::Answer { .. } => receipt::answer_kept(tx, a, looked)?,
        Resolution::Receipt { .. } => {
            let receipt = json!({"source": "observation", "lost": reason.as_str(), "evidence": looked.summary(),
                                 "read_back": looked.decided()});
            tx.insert_receipt(a.intent(), &receipt)?;
            AttemptState::ReceiptRecorded
        }
        Resolution::Failed { .. } => {
            let c = classify::classify_with_claims(&tx.evidence_of_attempt(a.id)?, tx.claim_ids(a.id)?);
            tx.finish_attempt(a.id, AttemptState::Failed, Some(&c), None)?;
            AttemptState::Failed
        }
        Resolution::Abandoned { .. } | Resolution::Unknown => {
            let unknown = resolution == Resolution::Unknown;
            let dispatched = a.dispatched_at_ms.is_some();
            let marker = Evidence::EffectMarker { reason, safe_to_resend: resolution.safe_to_resend(), dispatched };
            tx.insert_evidence(&a.goal_id, a.revision, Some(a.id), &marker)?;
            let to = if unknown { AttemptState::EffectUnknown } else { AttemptState::Abandoned };
            tx.finish_attempt(a.id, to, None, Some(reason))?;
            if unknown {
                let key = TaskKey { goal_id: &a.goal_id, revision: a.revision, task_ref: &a.task_ref };
                let detail = json!({"attempt_id": a.id, "why": reason.as_str(), "operation_id": a.operation_id});
                tx.set_task_state(key, TaskState::EffectUnknown, &detail)?;
            }
            to
        }
    };
    let data = json!({
        "operation_id": a.operation_id, "try": a.try_no, "last_state": a.state, "now": now,
        "observed": looked.looked(),
        "why": "left without a receipt by a stopped engine; its revision is no longer active, so it is never re-sent",
    });
    let e = Event::goal(EventKind::SupersededAttemptReconciled, &a.goal_id, a.revision, data);
    tx.append_event(&e.task(&a.task_ref).attempt(a.id)).map(|_| ())
}

/// A call a person's stop ended: what its process printed, the stop's
/// evidence and what looking found, then unknown, kept or cancelled.
fn call_stopped(tx: &mut dyn LedgerTx, revision: crate::ids::Revision, s: &CallStopped) -> Result<()> {
    let attempt = &s.attempt;
    process_exit(tx, attempt, s.receipt.as_ref())?;
    match &s.now {
        StoppedAs::Unknown(reason) => {
            let mut list = s.evidence.clone();
            list.extend(receipt::looked_evidence(tx, &s.looked)?);
            receipt::unknown_in_tx(tx, revision, attempt, list, *reason)
        }
        StoppedAs::Cancelled { kept, task_state, detail } => {
            for e in s.evidence.iter().cloned().chain(receipt::looked_evidence(tx, &s.looked)?) {
                tx.insert_evidence(&attempt.goal_id, revision, Some(attempt.id), &e)?;
            }
            if *kept {
                let data = json!({"source": "observation", "stopped": s.signal, "evidence": s.looked.observation()});
                tx.insert_receipt(attempt.intent(), &data)?;
            } else {
                tx.finish_attempt(attempt.id, AttemptState::Cancelled, None, None)?;
            }
            cancel_task(tx, attempt, *task_state, detail, s.signal, s.end)
        }
    }
}

/// How a stopped provider process ended, with what it printed, as evidence.
fn process_exit(tx: &mut dyn LedgerTx, attempt: &AttemptRecord, r: Option<&providers::CommandReceipt>) -> Result<()> {
    let Some(r) = r else { return Ok(()) };
    let (stdout, stderr) = (receipt::output(tx, &r.stdout)?, receipt::output(tx, &r.stderr)?);
    let e = Evidence::ProcessExit { exit: r.exit, timed_out: r.timed_out, duration_ms: r.duration_ms, stdout, stderr };
    tx.insert_evidence(&attempt.goal_id, attempt.revision, Some(attempt.id), &e).map(|_| ())
}

/// The task of a stopped attempt, and the event that says what the stop did.
fn cancel_task(
    tx: &mut dyn LedgerTx,
    attempt: &AttemptRecord,
    state: TaskState,
    detail: &Value,
    signal: StopSignal,
    end: StopEnd,
) -> Result<()> {
    let key = TaskKey { goal_id: &attempt.goal_id, revision: attempt.revision, task_ref: &attempt.task_ref };
    tx.set_task_state(key, state, detail)?;
    let data = json!({
        "operation_id": attempt.operation_id, "try": attempt.try_no, "signal": signal, "end": end.as_str(),
        "last_state": attempt.state, "task_state": state,
    });
    let e = Event::goal(EventKind::AttemptCancelled, &attempt.goal_id, attempt.revision, data);
    tx.append_event(&e.task(&attempt.task_ref).attempt(attempt.id)).map(|_| ())
}

/// Validations a person's stop ended: the stop's evidence for each, the
/// task cancelled (its receipt kept for the next run), and the event.
fn validations_stopped(
    tx: &mut dyn LedgerTx,
    revision: crate::ids::Revision,
    attempt: &AttemptRecord,
    (stopped, signal): (&[(String, StopEnd)], StopSignal),
    detail: &Value,
) -> Result<()> {
    for (check_id, end) in stopped {
        let e = Evidence::Stopped {
            signal,
            what: crate::evidence::StoppedWhat::Validation,
            check_id: Some(check_id.clone()),
            end: *end,
        };
        tx.insert_evidence(&attempt.goal_id, revision, Some(attempt.id), &e)?;
    }
    let key = TaskKey { goal_id: &attempt.goal_id, revision, task_ref: &attempt.task_ref };
    tx.set_task_state(key, TaskState::Cancelled, detail)?;
    let ids: Vec<&str> = stopped.iter().map(|(id, _)| id.as_str()).collect();
    let data = json!({"signal": signal, "validations": ids, "state": TaskState::Cancelled});
    let e = Event::goal(EventKind::ValidationsStopped, &attempt.goal_id, revision, data);
    tx.append_event(&e.task(&attempt.task_ref).attempt(attempt.id)).map(|_| ())
}
