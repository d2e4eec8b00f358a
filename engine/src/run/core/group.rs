//! Group commit in the run loop: the records of the messages that may
//! share a commit (`decide::group`) and the intents of the tasks started
//! after them go into one transaction; the calls, the crash points that
//! name a commit and the "ended" progress lines wait for that commit
//! (`flush`). A SIGKILL before it loses the group whole — receipts and
//! intents alike, nothing of it sent — and one after it leaves intents
//! without receipts: in doubt, as a kill right after an intent's own commit
//! always did. The recovery rules do not change.

use providers::{Outcome, Progress};

use super::action::{Action, Dispatch, Sending, WorldAction, Write};
use super::event::Msg;
use super::state::Run;
use crate::decide::group::{self, Answer, Handling};
use crate::error::Result;
use crate::ids::AttemptId;

impl Run<'_> {
    /// Gather the writes from here on into one commit.
    pub async fn begin_group(&mut self) {
        self.io.begin_group().await;
        self.held.open = true;
    }

    /// Commit the group, then what waited for it: the crash points that
    /// name its commit, the progress of the tasks that ended, the calls.
    pub async fn flush(&mut self) -> Result<()> {
        if crate::failpoint::fault(crate::failpoint::Fault::SendBeforeCommit) {
            // Planted fault: the calls go out before their intents' commit.
            for call in std::mem::take(&mut self.held.calls) {
                self.send(call).await;
            }
        }
        self.io.commit_group().await?;
        self.held.open = false;
        for point in std::mem::take(&mut self.held.points) {
            self.io.crashpoint(point).await;
        }
        for task_ref in std::mem::take(&mut self.held.ended) {
            self.ended(&task_ref).await?;
        }
        for call in std::mem::take(&mut self.held.calls) {
            self.send(call).await;
        }
        Ok(())
    }

    /// Hand a held call over, its intent committed.
    async fn send(&mut self, call: Sending) {
        self.io.crashpoint("after_intent").await;
        if crate::failpoint::fault(crate::failpoint::Fault::SendTwice) {
            // Planted fault: the call goes out a second time.
            let again = call.clone();
            self.io.world(|reply| WorldAction::Send(again, reply)).await;
        }
        self.io.world(|reply| WorldAction::Send(call, reply)).await;
    }

    /// A task this run started came to rest: say so (once).
    pub async fn ended(&self, task_ref: &str) -> Result<()> {
        self.io.ended(task_ref, self.state(task_ref)).await
    }

    /// A crash point named for a commit just made: now, or once the group
    /// holding it is committed.
    pub async fn hit_committed(&mut self, point: &'static str) {
        if self.held.open {
            self.held.points.push(point);
        } else {
            self.io.crashpoint(point).await;
        }
    }

    /// A task ended: its progress line, once what says so is committed.
    pub async fn note_ended(&mut self, task_ref: String) -> Result<()> {
        if !self.held.open {
            return self.ended(&task_ref).await;
        }
        self.held.ended.push(task_ref);
        Ok(())
    }

    /// Join the open group with `msg`'s records, or commit the group first
    /// and record `msg` on its own (`decide::group`).
    pub async fn group_for(&mut self, msg: &Msg) -> Result<()> {
        if !group::shares_commit(self.handling(msg)) {
            return self.flush().await;
        }
        self.begin_group().await;
        Ok(())
    }

    /// May this call's dispatch record wait for the open group's commit
    /// (`decide::group::dispatch_may_wait`)?
    fn dispatch_may_wait(&self, attempt_id: AttemptId) -> bool {
        let Some(flight) = self.in_flight.get(&attempt_id) else { return false };
        let Some(task) = self.plan.task(&flight.task_ref) else { return false };
        group::dispatch_may_wait(task.effect, !task.cost().is_zero(), flight.process.is_some())
    }

    /// Record that the provider has the call: at once, or (when it may
    /// wait) in the open group's transaction, with its next write or its
    /// commit — the crash point `after_dispatch` follows that commit.
    pub async fn record_dispatched(&mut self, attempt_id: AttemptId, detail: String) -> Result<()> {
        let may_wait = self.dispatch_may_wait(attempt_id);
        let flight = self.flight(attempt_id)?;
        let (task_ref, intent, process) = (flight.task_ref.clone(), flight.intent, flight.process.clone());
        let dispatch = Dispatch { attempt_id, intent, task_ref, detail, process };
        if !may_wait {
            self.io.write_done(Write::Dispatched(dispatch)).await?;
            self.io.crashpoint("after_dispatch").await;
            return Ok(());
        }
        self.io.ask(|reply| Action::WriteLater(dispatch, reply)).await?;
        self.hit_committed("after_dispatch").await;
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
            Msg::Progress { progress: Progress::Note(_), .. } => Handling::Note,
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
