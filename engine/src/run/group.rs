//! Group commit in the run loop: the records of the messages that may
//! share a commit (`decide::group`) and the intents of the tasks started
//! after them go into one transaction; the calls, the crash points that
//! name a commit and the "ended" progress lines wait for that commit
//! (`flush`). A SIGKILL before it loses the group whole — receipts and
//! intents alike, nothing of it sent — and one after it leaves intents
//! without receipts: in doubt, as a kill right after an intent's own commit
//! always did. The recovery rules do not change.

use super::start::Held;
use super::{Msg, Runner};
use crate::decide::group::{self, Answer, Handling};
use crate::error::Result;
use crate::failpoint;
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

    /// The message, as far as grouping cares.
    fn handling(&self, msg: &Msg) -> Handling {
        match msg {
            Msg::Progress { progress: Progress::Spawned { .. }, .. } => Handling::Spawned,
            Msg::Progress { progress: Progress::Dispatched { .. }, .. } => Handling::Dispatched,
            Msg::Progress { progress: Progress::Handle { .. }, .. } => Handling::Handle,
            Msg::Finished { attempt_id, outcome, level } => {
                let flight = self.in_flight.get(attempt_id);
                let stopped = level.end().is_some() || flight.is_some_and(|f| f.cancel_asked);
                let task = flight.and_then(|f| self.plan.task(&f.task_ref));
                let judged_by_receipt = task.is_some_and(|t| t.validations.is_empty()) && self.guard.is_empty();
                let answer = match outcome {
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
