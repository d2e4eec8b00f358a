//! A person's stop (SIGINT, SIGTERM, SIGHUP), as the core lives it. The
//! first signal stops new dispatches and sends SIGTERM to the process
//! group of every call and check in flight; after `STOP_GRACE` (or at a
//! second signal) what is left gets SIGKILL, and calls without a process
//! of their own (HTTP, MCP) are no longer waited for; after
//! `STOP_DRAIN_MAX` more, whatever has not reported is recorded as
//! stopped without an answer. Each call in flight ends as `decide::stop`
//! says — `cancelled` (its task runs again on the next plain run; a
//! repair's task is the failure it was), its observed effect kept as a
//! receipt for the next run to judge, or `effect_unknown` for a person to
//! settle — and validations a stop ended leave the receipt they judge for
//! the next run, never a failure.

use providers::{Outcome, Receipt};
use serde_json::{json, Value};

use super::action::{CallStopped, Say, StoppedAs, WorldAction, Write};
use super::event::Level;
use super::state::{Phase, Run, StopEvent};
use crate::decide::stop::{self, Reached, Stopped};
use crate::error::Result;
use crate::evidence::{Evidence, StopEnd, StoppedWhat, UnknownReason};
use crate::ids::AttemptId;
use crate::limits::{STOP_DRAIN_MAX, STOP_GRACE};
use crate::plan::Task;
use crate::run::check::CheckRun;
use crate::run::looked::Looked;
use crate::run::report::UnknownOp;
use crate::state::{AttemptKind, AttemptState, StopSignal, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventKind;
use crate::store::Durability;

impl Run<'_> {
    /// Has a person stopped the run? A signal not acted on yet is acted on
    /// now (nothing new is dispatched from here on).
    pub async fn stopping(&mut self) -> Result<bool> {
        if self.stop.phase == Phase::Running {
            if let Some(signal) = self.io.signal_pending().await {
                // What the open group holds is committed (and its calls sent)
                // before a stop acts on the calls in flight.
                self.flush().await?;
                self.on_stop(StopEvent::Begin(signal)).await?;
            }
        }
        Ok(self.stop.active())
    }

    pub async fn on_stop(&mut self, event: StopEvent) -> Result<()> {
        match event {
            StopEvent::Begin(signal) => {
                self.stop.signal = Some(signal);
                self.stop.phase = Phase::Grace;
                let groups = self.io.signal_groups(Level::Term, Some(STOP_GRACE)).await;
                let in_flight = self.in_flight.len();
                let data = json!({"signal": signal, "in_flight": in_flight, "process_groups": groups,
                    "grace_ms": STOP_GRACE.as_millis() as u64});
                self.write_event(Durability::Normal, EventKind::RunStopping, None, None, data).await?;
                self.io.say(Say::Stopping { signal, in_flight, groups, grace: STOP_GRACE }).await;
                self.cancel_handles().await?;
            }
            StopEvent::Kill { by_signal } => {
                self.stop.grace_cut |= by_signal;
                self.stop.phase = Phase::Draining;
                let groups = self.io.signal_groups(Level::Kill, Some(STOP_DRAIN_MAX)).await;
                self.io.say(Say::Killing { groups, by_signal }).await;
                // Calls without a process of their own had the grace to answer.
                let dropped: Vec<AttemptId> =
                    self.in_flight.iter().filter(|(_, f)| f.processless && !f.validating).map(|(&id, _)| id).collect();
                for id in dropped {
                    self.unanswered(id).await?;
                }
            }
            StopEvent::GiveUp => {
                self.stop.phase = Phase::Over;
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
    async fn cancel_handles(&mut self) -> Result<()> {
        let handles: Vec<AttemptId> =
            self.in_flight.iter().filter(|(_, f)| f.handle.is_some()).map(|(&id, _)| id).collect();
        for attempt_id in handles {
            let Some(task_ref) = self.in_flight.get(&attempt_id).map(|f| f.task_ref.clone()) else { continue };
            if self.task(&task_ref).is_err() {
                continue;
            }
            let attempt = self.io.attempt(attempt_id).await?;
            if let Some(f) = self.in_flight.get_mut(&attempt_id) {
                f.cancel_asked = true;
            }
            // The provider's answer arrives as the call's own outcome; a
            // provider that cannot cancel leaves the call to the grace.
            self.io.world(|reply| WorldAction::Cancel(Box::new(attempt), reply)).await;
        }
        Ok(())
    }

    /// Stop waiting for an attempt's call or validations: no answer came.
    async fn unanswered(&mut self, attempt_id: AttemptId) -> Result<()> {
        let Some(flight) = self.in_flight.get(&attempt_id) else { return Ok(()) };
        let (validating, task_ref) = (flight.validating, flight.task_ref.clone());
        self.io.world(|reply| WorldAction::Abort(attempt_id, reply)).await;
        let task = self.task(&task_ref)?;
        if validating {
            self.validations_stopped(attempt_id, task, Vec::new(), StopEnd::Dropped).await?;
        } else {
            self.call_stopped(attempt_id, task, None, StopEnd::Dropped).await?;
        }
        self.ended(&task_ref).await
    }

    /// A call a person's stop ended (its process group signalled, or no
    /// longer waited for): cancelled, its observed effect kept, or unknown.
    pub async fn call_stopped(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        outcome: Option<Outcome>,
        end: StopEnd,
    ) -> Result<()> {
        self.in_flight.remove(&attempt_id);
        let attempt = self.io.attempt(attempt_id).await?;
        // The provider's answer counts as much as the ledger's record: its
        // `dispatched` may not have been recorded when the stop came.
        let provider_had_it = matches!(outcome, Some(Outcome::Received(_) | Outcome::Lost { .. }));
        let reached = Reached::of(attempt.state != AttemptState::IntentRecorded, provider_had_it);
        // Read back only: the request was just cancelled or cut off, so
        // asking by its handle would find what the stop did.
        let looked = if stop::needs_observation(reached, task.effect, task.idempotent) {
            self.look(&attempt, false).await
        } else {
            Looked::nothing()
        };
        let resolved = stop::resolve(reached, task.effect, task.idempotent, looked.observed);
        let signal = self.stop.signal.unwrap_or(StopSignal::Interrupt);
        let mut evidence = vec![Evidence::Stopped { signal, what: StoppedWhat::ProviderCall, check_id: None, end }];
        let receipt = match outcome {
            Some(Outcome::Received(Receipt::Command(r))) => Some(r),
            _ => None,
        };
        let now = match resolved {
            Stopped::Unknown => {
                let reason = UnknownReason::StoppedAfterDispatch;
                let dispatched = reached == Reached::Dispatched;
                evidence.push(Evidence::EffectMarker { reason, safe_to_resend: false, dispatched });
                StoppedAs::Unknown(reason)
            }
            Stopped::Receipt | Stopped::Cancelled => {
                let kept = resolved == Stopped::Receipt;
                let task_state = self.cancelled_state(&attempt);
                let detail = self.cancelled_detail(&attempt, signal, kept);
                StoppedAs::Cancelled { kept, task_state, detail }
            }
        };
        let state = match &now {
            StoppedAs::Unknown(_) => TaskState::EffectUnknown,
            StoppedAs::Cancelled { task_state, .. } => *task_state,
        };
        let unknown = matches!(now, StoppedAs::Unknown(_));
        let stopped = CallStopped { attempt: attempt.clone(), receipt, evidence, looked, signal, end, now };
        self.io.write_done(Write::CallStopped(Box::new(stopped))).await?;
        self.states.insert(task.task_ref.clone(), state);
        if unknown {
            let reason = Some(UnknownReason::StoppedAfterDispatch);
            self.stops.unknown.push(UnknownOp::of(&attempt, attempt.state, reason));
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

    fn cancelled_detail(&self, attempt: &AttemptRecord, signal: StopSignal, kept: bool) -> Value {
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
    pub async fn validations_stopped(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        runs: Vec<CheckRun>,
        all: StopEnd,
    ) -> Result<()> {
        self.in_flight.remove(&attempt_id);
        let attempt = self.io.attempt(attempt_id).await?;
        let signal = self.stop.signal.unwrap_or(StopSignal::Interrupt);
        let stopped: Vec<(String, StopEnd)> = if runs.is_empty() {
            task.validations.iter().map(|v| (v.id.clone(), all)).collect()
        } else {
            runs.iter().filter_map(|r| r.stopped.map(|end| (r.id.clone(), end))).collect()
        };
        let detail = json!({"attempt_id": attempt_id, "signal": signal,
            "why": "a person stopped the run before its validations ended; the receipt is kept and judged by the next run"});
        let write = Write::ValidationsStopped { attempt: Box::new(attempt), stopped, signal, detail };
        self.io.write_done(write).await?;
        self.states.insert(task.task_ref.clone(), TaskState::Cancelled);
        Ok(())
    }
}
