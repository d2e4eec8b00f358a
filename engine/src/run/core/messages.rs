//! What the calls and checks in flight report, handled one message at a
//! time in the order they came: a provider's progress (its process, the
//! dispatch, the request's handle), its outcome (an answer, nothing handed
//! over, or an answer lost), an attempt's validations.

use providers::{Outcome, Progress};

use super::action::Judged;
use super::attempt::Next;
use super::event::Msg;
use super::state::Run;
use crate::decide::scheduler::Scheduler;
use crate::error::{Error, Result};
use crate::evidence::{EngineErrorKind, Evidence, StopEnd};
use crate::ids::AttemptId;
use crate::plan::Task;
use crate::store::Durability;

/// The progress events one attempt records at most.
pub const PROGRESS_EVENTS_MAX: u32 = 8;

/// Is the `seen`-th note of an attempt recorded? The 1st, 2nd, 4th, …
/// up to the `PROGRESS_EVENTS_MAX`-th power of two.
pub fn records_note(seen: u64) -> bool {
    seen.is_power_of_two() && seen.trailing_zeros() < PROGRESS_EVENTS_MAX
}

impl Run<'_> {
    /// Handle one message of a call in flight, in the open group or on
    /// its own (`group_for`); a task that left the flight completes in the
    /// scheduler.
    pub async fn take(
        &mut self,
        msg: Msg,
        scheduler: &mut Scheduler,
        position: &std::collections::HashMap<&str, usize>,
    ) -> Result<()> {
        self.group_for(&msg).await?;
        let attempt_id = msg.attempt_id();
        let task_ref = self.in_flight.get(&attempt_id).map(|f| f.task_ref.clone());
        self.handle(msg).await?;
        if let Some(r) = &task_ref {
            self.release_if_idle(r).await?;
        }
        if let Some(r) = task_ref.filter(|_| !self.in_flight.contains_key(&attempt_id)) {
            if let (true, Some(&p)) = (self.state(&r).is_complete(), position.get(r.as_str())) {
                scheduler.completed(p);
            }
            self.note_ended(r).await?;
        }
        Ok(())
    }

    async fn handle(&mut self, msg: Msg) -> Result<()> {
        match msg {
            Msg::Progress { attempt_id, progress: Progress::Spawned { process } } => {
                // Kept until the dispatch is recorded, in the same write.
                if let Some(f) = self.in_flight.get_mut(&attempt_id) {
                    f.process = Some(process);
                }
            }
            Msg::Progress { attempt_id, progress: Progress::Dispatched { detail } } => {
                self.record_dispatched(attempt_id, detail).await?;
            }
            Msg::Progress { attempt_id, progress: Progress::Handle { handle, detail } } => {
                // Committed before anything else of the call: what an engine
                // asks about after a crash, and what a person's stop cancels.
                self.record_handle(attempt_id, &handle, &detail).await?;
            }
            Msg::Progress { attempt_id, progress: Progress::Note(note) } => self.note(attempt_id, note).await?,
            Msg::Finished { attempt_id, outcome, level } => {
                self.io.crashpoint("after_receipt").await;
                let flight = self.flight(attempt_id)?;
                let cancel_asked = flight.cancel_asked.then_some(StopEnd::CancelAsked);
                let task = self.task(&flight.task_ref)?;
                if let Some(end) = level.end().or(cancel_asked) {
                    // Its process group was ended, or its provider asked to
                    // cancel it, by a person's stop: not an answer of the
                    // provider's own.
                    return self.call_stopped(attempt_id, task, Some(*outcome), end).await;
                }
                match self.outcome(attempt_id, task, *outcome).await? {
                    Next::Validate if self.stop.active() => {
                        self.validations_stopped(attempt_id, task, Vec::new(), StopEnd::NotStarted).await?;
                    }
                    Next::Validate => self.start_validations(attempt_id, task).await?,
                    Next::Done => {
                        self.in_flight.remove(&attempt_id);
                    }
                }
            }
            Msg::Validated { attempt_id, runs, constraint_runs } => {
                let task = self.task(&self.flight(attempt_id)?.task_ref)?;
                if runs.iter().chain(&constraint_runs).any(|r| r.stopped.is_some()) {
                    let runs = runs.into_iter().chain(constraint_runs).collect();
                    return self.validations_stopped(attempt_id, task, runs, StopEnd::NotStarted).await;
                }
                let mut protected = self.judge_protected(attempt_id, task).await?;
                let flight = self
                    .in_flight
                    .remove(&attempt_id)
                    .ok_or_else(|| Error::internal(format!("attempt {attempt_id} was validated twice")))?;
                if let Some(writes) = flight.writes.clone() {
                    // The task's writes as they were before its validations.
                    protected.retain(|e| !matches!(e, Evidence::UndeclaredWrite { .. }));
                    protected.extend(writes);
                }
                let after = self.observe_checkpoint(task, flight.reported.as_ref()).await;
                let judged = Judged { runs, constraint_runs, protected };
                // Outputs are read only from an attempt that passed: a
                // failed one keeps none.
                let kept = match judged.passed() && !task.outputs.is_empty() {
                    true => self.io.collect_outputs(&task.task_ref).await,
                    false => None,
                };
                self.record_validations(attempt_id, task, (flight.before, after), (judged, kept)).await?;
            }
        }
        Ok(())
    }

    /// A provider's word on its progress: shown on the task's line; and
    /// recorded as an event for the 1st, 2nd, 4th, 8th … note of the
    /// attempt, at most `PROGRESS_EVENTS_MAX` of them (the provider already
    /// spaces its notes in time), so a chatty server cannot fill the log.
    async fn note(&mut self, attempt_id: AttemptId, note: providers::Note) -> Result<()> {
        let Some(f) = self.in_flight.get_mut(&attempt_id) else { return Ok(()) };
        f.notes_seen += 1;
        let (seen, task_ref) = (f.notes_seen, f.task_ref.clone());
        let providers::Note { progress, total, message } = note;
        if records_note(seen) {
            let data = serde_json::json!({"note": seen, "progress": progress, "total": total, "message": message,
                                          "authority": "provider"});
            let kind = crate::store::events::EventKind::ProviderProgress;
            self.write_event(Durability::Normal, kind, Some(&task_ref), Some(attempt_id), data).await?;
        }
        self.io.say(super::action::Say::Note { task_ref, progress, total, message }).await;
        Ok(())
    }

    /// The call's outcome, recorded: nothing handed over (a failure that
    /// does not count against the budgets), an answer lost (looked at), or
    /// the provider's answer.
    async fn outcome(&mut self, attempt_id: AttemptId, task: &Task, outcome: Outcome) -> Result<Next> {
        match outcome {
            Outcome::NotDispatched(nd) => {
                let e = Evidence::EngineError { error: EngineErrorKind::from(nd.kind), message: nd.message };
                self.fail_with(attempt_id, task, None, vec![e], (Durability::Full, true)).await?;
                self.hit_committed("after_receipt_commit").await;
                Ok(Next::Done)
            }
            Outcome::Lost { reason, detail } => self.lost(attempt_id, task, reason.into(), detail).await,
            Outcome::Received(receipt) => {
                // Judged now in case the answer is a failure (no validations
                // follow it, and the next attempt would start on whatever
                // this one left); an ok answer is judged after its validations.
                let protected = self.judge_protected(attempt_id, task).await?;
                self.note_writes(attempt_id, &protected);
                self.received(attempt_id, task, receipt, None, protected).await
            }
        }
    }
}

impl Run<'_> {
    /// Keep an attempt's undeclared writes as judged at its receipt, for
    /// the judgment after its validations (`Flight::writes`).
    pub(super) fn note_writes(&mut self, attempt_id: AttemptId, judged: &[Evidence]) {
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.writes = Some(judged.iter().filter(|e| matches!(e, Evidence::UndeclaredWrite { .. })).cloned().collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_events_are_bounded_and_spread() {
        let recorded: Vec<u64> = (1..=1_000_000).filter(|&n| records_note(n)).collect();
        assert_eq!(recorded, vec![1, 2, 4, 8, 16, 32, 64, 128]);
        assert!(!records_note(0));
    }
}
