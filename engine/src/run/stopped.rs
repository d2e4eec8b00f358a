//! A person's stop, recorded: the coordinator's side of `stop`. Each call
//! in flight ends as `decide::stop` says — `cancelled` (its task runs again
//! on the next plain run; a repair's task is the failure it was), its
//! observed effect kept as a receipt for the next run to judge, or
//! `effect_unknown` for a person to settle — and validations a stop ended
//! leave the receipt they judge for the next run, never a failure.

use std::time::Duration;

use providers::{Handle, Outcome, Receipt};
use serde_json::json;

use super::look::Looked;
use super::progress::Update;
use super::record::{self, unknown_in_tx};
use super::stop::StopEvent;
use super::{CheckRun, Runner};
use crate::decide::stop::{self, Reached, Stopped};
use crate::error::Result;
use crate::evidence::{Evidence, StopEnd, StoppedWhat, UnknownReason};
use crate::ids::AttemptId;
use crate::limits::STOP_GRACE;
use crate::plan::Task;
use crate::state::{AttemptKind, AttemptState, StopSignal, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LedgerTx};

impl Runner<'_> {
    /// Has a person stopped the run? A signal not acted on yet is acted on
    /// now (nothing new is dispatched from here on).
    pub(super) async fn stopping(&mut self) -> Result<bool> {
        if self.stop.pending() {
            // What the open group holds is committed (and its calls sent)
            // before a stop acts on the calls in flight.
            self.flush()?;
            let signal = crate::signals::received().unwrap_or(StopSignal::Interrupt);
            self.on_stop(StopEvent::Begin(signal)).await?;
        }
        Ok(self.stop.active())
    }

    pub(super) async fn on_stop(&mut self, event: StopEvent) -> Result<()> {
        match event {
            StopEvent::Begin(signal) => {
                let groups = self.stop.begin(signal);
                let in_flight = self.in_flight.len();
                let data = json!({"signal": signal, "in_flight": in_flight, "process_groups": groups,
                    "grace_ms": STOP_GRACE.as_millis() as u64});
                self.write_event(Durability::Normal, EventKind::RunStopping, None, None, data)?;
                self.progress.update(&Update::Stopping { signal, in_flight, groups, grace: STOP_GRACE });
                self.cancel_handles()?;
            }
            StopEvent::Kill { by_signal } => {
                let groups = self.stop.kill(by_signal);
                self.progress.update(&Update::Killing { groups, by_signal });
                // Calls without a process of their own had the grace to answer.
                let dropped: Vec<AttemptId> =
                    self.in_flight.iter().filter(|(_, f)| f.processless && !f.validating).map(|(&id, _)| id).collect();
                for id in dropped {
                    self.unanswered(id).await?;
                }
            }
            StopEvent::GiveUp => {
                self.stop.give_up();
                let left: Vec<AttemptId> = self.in_flight.keys().copied().collect();
                for id in left {
                    self.unanswered(id).await?;
                }
            }
        }
        Ok(())
    }

    /// Ask each provider that named an accepted request (an MCP task) to
    /// cancel it; its call then ends with the provider's answer, recorded
    /// as stopped (`StopEnd::CancelAsked`), not as the provider's own.
    fn cancel_handles(&mut self) -> Result<()> {
        let handles: Vec<(AttemptId, Handle)> =
            self.in_flight.iter().filter_map(|(&id, f)| Some((id, f.handle.clone()?))).collect();
        for (attempt_id, handle) in handles {
            let Some(task_ref) = self.in_flight.get(&attempt_id).map(|f| f.task_ref.clone()) else { continue };
            let Ok(task) = self.task(&task_ref) else { continue };
            let Some(provider) = self.providers.get(&task.provider).cloned() else { continue };
            let attempt = self.ledger.read().attempt(attempt_id)?;
            let call = self.call_for(task, &attempt.operation_id, attempt.try_no as u32, None);
            if let Some(f) = self.in_flight.get_mut(&attempt_id) {
                f.cancel_asked = true;
            }
            tokio::spawn(async move {
                // The provider's answer arrives as the call's own outcome; a
                // provider that cannot cancel leaves the call to the grace.
                if let Some(fut) = provider.cancel(&call, &handle) {
                    fut.await;
                }
            });
        }
        Ok(())
    }

    /// Stop waiting for an attempt's call or validations: no answer came.
    async fn unanswered(&mut self, attempt_id: AttemptId) -> Result<()> {
        let Some(flight) = self.in_flight.get(&attempt_id) else { return Ok(()) };
        if let Some(work) = &flight.work {
            work.abort();
        }
        let (validating, task_ref) = (flight.validating, flight.task_ref.clone());
        let task = self.task(&task_ref)?.clone();
        if validating {
            self.validations_stopped(attempt_id, &task, Vec::new(), StopEnd::Dropped)?;
        } else {
            self.call_stopped(attempt_id, &task, None, StopEnd::Dropped).await?;
        }
        self.ended(&task_ref)
    }

    /// A call a person's stop ended (its process group signalled, or no
    /// longer waited for): cancelled, its observed effect kept, or unknown.
    pub(super) async fn call_stopped(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        outcome: Option<Outcome>,
        end: StopEnd,
    ) -> Result<()> {
        self.in_flight.remove(&attempt_id);
        let attempt = self.ledger.read().attempt(attempt_id)?;
        let reached =
            if attempt.state == AttemptState::IntentRecorded { Reached::NotDispatched } else { Reached::Dispatched };
        // Read back only: the request was just cancelled or cut off, so
        // asking by its handle would find what the stop did.
        let looked = if stop::needs_observation(reached, task.effect, task.idempotent) {
            self.look(&attempt, task, false).await
        } else {
            Looked::nothing()
        };
        let resolved = stop::resolve(reached, task.effect, task.idempotent, looked.observed);
        let observation = looked.observation();
        let signal = self.stop.signal().unwrap_or(StopSignal::Interrupt);
        let mut list = vec![Evidence::Stopped { signal, what: StoppedWhat::ProviderCall, check_id: None, end }];
        let receipt = match outcome {
            Some(Outcome::Received(Receipt::Command(r))) => Some(r),
            _ => None,
        };
        let revision = self.revision;
        match resolved {
            Stopped::Unknown => {
                let reason = UnknownReason::StoppedAfterDispatch;
                list.push(Evidence::EffectMarker { reason, safe_to_resend: false });
                self.ledger.write(Durability::Full, |tx| {
                    process_exit(tx, &attempt, receipt.as_ref())?;
                    let mut list = list.clone();
                    list.extend(looked.evidence(tx)?);
                    unknown_in_tx(tx, revision, &attempt, list, reason)
                })?;
                self.states.insert(task.task_ref.clone(), TaskState::EffectUnknown);
                let op = super::UnknownOp::of(&attempt, attempt.state, Some(reason));
                self.stops.unknown.push(op);
            }
            Stopped::Receipt | Stopped::Cancelled => {
                let kept = resolved == Stopped::Receipt;
                let state = self.cancelled_state(&attempt);
                let detail = self.cancelled_detail(&attempt, signal, kept);
                self.ledger.write(Durability::Full, |tx| {
                    process_exit(tx, &attempt, receipt.as_ref())?;
                    for e in list.iter().cloned().chain(looked.evidence(tx)?) {
                        tx.insert_evidence(&attempt.goal_id, revision, Some(attempt.id), &e)?;
                    }
                    if kept {
                        let data = json!({"source": "observation", "stopped": signal, "evidence": observation});
                        tx.insert_receipt(attempt.intent(), &data)?;
                    } else {
                        tx.finish_attempt(attempt.id, AttemptState::Cancelled, None, None)?;
                    }
                    cancel_task(tx, &attempt, state, &detail, signal, end)
                })?;
                self.states.insert(task.task_ref.clone(), state);
            }
        }
        Ok(())
    }

    /// A cancelled attempt's task: cancelled, unless it was a person's
    /// repair, whose task is still the failure it was (a plain run never
    /// runs a failed task: `engine repair` again does).
    fn cancelled_state(&self, attempt: &AttemptRecord) -> TaskState {
        match attempt.kind {
            AttemptKind::Repair if self.asked.repairs.contains_key(&attempt.task_ref) => TaskState::Failed,
            _ => TaskState::Cancelled,
        }
    }

    fn cancelled_detail(&self, attempt: &AttemptRecord, signal: StopSignal, kept: bool) -> serde_json::Value {
        let why = if kept {
            "a person stopped the run; the observed effect is kept as its receipt, judged by the next run"
        } else {
            "a person stopped the run"
        };
        let mut detail = json!({"attempt_id": attempt.id, "signal": signal, "why": why});
        if let (TaskState::Failed, Some(rep)) =
            (self.cancelled_state(attempt), self.asked.repairs.get(&attempt.task_ref))
        {
            let class = rep.classification.as_ref().map(|c| c.class);
            detail = json!({"attempt_id": rep.failed_attempt, "class": class, "signal": signal,
                "why": "the repair was stopped by a person: the task is the failure it was"});
        }
        detail
    }

    /// Validations a person's stop ended or kept from starting: the
    /// receipt they judge is kept and judged by the next run; the task is
    /// cancelled, not failed. `runs` names the checks the stop reached;
    /// when none reported, every validation ended as `all`.
    pub(super) fn validations_stopped(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        runs: Vec<CheckRun>,
        all: StopEnd,
    ) -> Result<()> {
        self.in_flight.remove(&attempt_id);
        let attempt = self.ledger.read().attempt(attempt_id)?;
        let signal = self.stop.signal().unwrap_or(StopSignal::Interrupt);
        let stopped: Vec<(String, StopEnd)> = if runs.is_empty() {
            task.validations.iter().map(|v| (v.id.clone(), all)).collect()
        } else {
            runs.iter().filter_map(|r| r.stopped.map(|end| (r.id.clone(), end))).collect()
        };
        let detail = json!({"attempt_id": attempt_id, "signal": signal,
            "why": "a person stopped the run before its validations ended; the receipt is kept and judged by the next run"});
        let revision = self.revision;
        self.ledger.write(Durability::Normal, |tx| {
            for (check_id, end) in &stopped {
                let e = Evidence::Stopped {
                    signal,
                    what: StoppedWhat::Validation,
                    check_id: Some(check_id.clone()),
                    end: *end,
                };
                tx.insert_evidence(&attempt.goal_id, revision, Some(attempt_id), &e)?;
            }
            let key = TaskKey { goal_id: &attempt.goal_id, revision, task_ref: &attempt.task_ref };
            tx.set_task_state(key, TaskState::Cancelled, &detail)?;
            let ids: Vec<&str> = stopped.iter().map(|(id, _)| id.as_str()).collect();
            let data = json!({"signal": signal, "validations": ids, "state": TaskState::Cancelled});
            let e = Event::goal(EventKind::ValidationsStopped, &attempt.goal_id, revision, data);
            tx.append_event(&e.task(&attempt.task_ref).attempt(attempt_id)).map(|_| ())
        })?;
        self.states.insert(task.task_ref.clone(), TaskState::Cancelled);
        Ok(())
    }

    /// A task this run started came to rest: say so (once).
    pub(super) fn ended(&mut self, task_ref: &str) -> Result<()> {
        let Some(began) = self.started.remove(task_ref) else { return Ok(()) };
        let state = self.state(task_ref);
        let class = match state {
            TaskState::Failed | TaskState::EffectUnknown => self
                .ledger
                .read()
                .task(&self.goal_id, self.revision, task_ref)?
                .and_then(|t| t.class().and_then(crate::state::FailureClass::parse)),
            _ => None,
        };
        let task = self.task(task_ref)?;
        let took = began.elapsed();
        let update = Update::TaskEnded { task_ref, title: &task.title, state, class, took: round(took) };
        self.progress.update(&update);
        Ok(())
    }
}

/// Durations to the millisecond (what a person reads).
fn round(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

/// How a stopped provider process ended, with what it printed, as evidence.
fn process_exit(tx: &mut dyn LedgerTx, attempt: &AttemptRecord, r: Option<&providers::CommandReceipt>) -> Result<()> {
    let Some(r) = r else { return Ok(()) };
    let (stdout, stderr) = (record::output(tx, &r.stdout)?, record::output(tx, &r.stderr)?);
    let e = Evidence::ProcessExit { exit: r.exit, timed_out: r.timed_out, duration_ms: r.duration_ms, stdout, stderr };
    tx.insert_evidence(&attempt.goal_id, attempt.revision, Some(attempt.id), &e).map(|_| ())
}

/// The task of a stopped attempt, and the event that says what the stop did.
fn cancel_task(
    tx: &mut dyn LedgerTx,
    attempt: &AttemptRecord,
    state: TaskState,
    detail: &serde_json::Value,
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
