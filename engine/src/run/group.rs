//! Group commit in the run loop: the records of the messages that may
//! share a commit (`decide::group`) and the intents of the tasks started
//! after them go into one transaction; the calls, the crash points that
//! name a commit and the "ended" progress lines wait for that commit
//! (`flush`). A SIGKILL before it loses the group whole — receipts and
//! intents alike, nothing of it sent — and one after it leaves intents
//! without receipts: in doubt, as a kill right after an intent's own commit
//! always did. The recovery rules do not change.

use serde_json::json;

use super::start::Held;
use super::{Msg, Runner};
use crate::decide::group::{self, Answer, Handling};
use crate::error::Result;
use crate::failpoint;
use crate::ids::AttemptId;
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LedgerTx};
use providers::{Outcome, Progress};

/// What waits for the open group's commit.
#[derive(Default)]
pub(super) struct Waiting {
    /// A group is open: the ledger gathers the writes.
    open: bool,
    /// Calls whose intents are in the group.
    pub calls: Vec<Held>,
    /// Crash points named for a commit that is in the group.
    points: Vec<&'static str>,
    /// Tasks that ended, for their progress line.
    ended: Vec<String>,
}

impl Runner<'_> {
    /// Gather the writes from here on into one commit.
    pub(super) fn begin_group(&mut self) {
        self.ledger.begin_group();
        self.held.open = true;
    }

    /// Commit the group, then what waited for it: the crash points that
    /// name its commit, the progress of the tasks that ended, the calls.
    pub(super) fn flush(&mut self) -> Result<()> {
        self.ledger.commit_group()?;
        self.held.open = false;
        for point in std::mem::take(&mut self.held.points) {
            failpoint::hit(point);
        }
        for task_ref in std::mem::take(&mut self.held.ended) {
            self.ended(&task_ref)?;
        }
        for held in std::mem::take(&mut self.held.calls) {
            self.send(held);
        }
        Ok(())
    }

    /// A crash point named for a commit just made: now, or once the group
    /// holding it is committed.
    pub(super) fn hit_committed(&mut self, point: &'static str) {
        if self.held.open {
            self.held.points.push(point);
        } else {
            failpoint::hit(point);
        }
    }

    /// A task ended: its progress line, once what says so is committed.
    pub(super) fn note_ended(&mut self, task_ref: String) -> Result<()> {
        if !self.held.open {
            return self.ended(&task_ref);
        }
        self.held.ended.push(task_ref);
        Ok(())
    }

    /// Join the open group with `msg`'s records, or commit the group first
    /// and record `msg` on its own (`decide::group`).
    pub(super) fn group_for(&mut self, msg: &Msg) -> Result<()> {
        if !group::shares_commit(self.handling(msg)) {
            return self.flush();
        }
        self.begin_group();
        Ok(())
    }

    /// May this call's dispatch record wait for the open group's commit
    /// (`decide::group::dispatch_may_wait`)?
    pub(super) fn dispatch_may_wait(&self, attempt_id: AttemptId) -> bool {
        let Some(flight) = self.in_flight.get(&attempt_id) else { return false };
        let Some(task) = self.plan.task(&flight.task_ref) else { return false };
        group::dispatch_may_wait(task.effect, !task.cost().is_zero(), flight.process.is_some())
    }

    /// Record that the provider has the call: at once, or (when it may
    /// wait) in the open group's transaction, with its next write or its
    /// commit — the crash point `after_dispatch` follows that commit.
    pub(super) fn record_dispatched(&mut self, attempt_id: AttemptId, detail: String) -> Result<()> {
        let may_wait = self.dispatch_may_wait(attempt_id);
        let flight = self.flight(attempt_id)?;
        let (task_ref, intent, process) = (flight.task_ref.clone(), flight.intent, flight.process.clone());
        let mut data = json!({"detail": detail});
        if let Some(p) = &process {
            data["process"] = json!(p);
        }
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let write = move |tx: &mut dyn LedgerTx| {
            tx.mark_dispatched(intent, &detail, process.as_ref())?;
            let e = Event::goal(EventKind::Dispatched, &goal_id, revision, data.clone());
            tx.append_event(&e.task(&task_ref).attempt(attempt_id)).map(|_| ())
        };
        if !may_wait {
            self.ledger.write(Durability::Normal, write)?;
            failpoint::hit("after_dispatch");
            return Ok(());
        }
        self.ledger.write_later(write)?;
        self.hit_committed("after_dispatch");
        Ok(())
    }

    /// The message, as far as grouping cares.
    fn handling(&self, msg: &Msg) -> Handling {
        match msg {
            Msg::Progress { progress: Progress::Spawned { .. }, .. } => Handling::Spawned,
            Msg::Progress { attempt_id, progress: Progress::Dispatched { .. } } => {
                Handling::Dispatched { may_wait: self.dispatch_may_wait(*attempt_id) }
            }
            Msg::Progress { progress: Progress::Handle { .. }, .. } => Handling::Handle,
            Msg::Finished { attempt_id, outcome, level } => {
                let flight = self.in_flight.get(attempt_id);
                let stopped = level.end().is_some() || flight.is_some_and(|f| f.cancel_asked);
                let task = flight.and_then(|f| self.plan.task(&f.task_ref));
                let judged_by_receipt =
                    task.is_some_and(|t| t.validations.is_empty()) && self.guard.judged_at_receipt();
                let answer = match &**outcome {
                    Outcome::Received(_) => Answer::Received,
                    Outcome::NotDispatched(_) => Answer::NotDispatched,
                    Outcome::Lost { .. } => Answer::Lost,
                };
                Handling::Finished { answer, stopped, judged_by_receipt }
            }
            Msg::Validated { runs, constraint_runs, .. } => {
                Handling::Validated { stopped: runs.iter().chain(constraint_runs).any(|r| r.stopped.is_some()) }
            }
        }
    }
}
