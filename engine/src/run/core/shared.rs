//! The run loop on a shared store, where several workers run one goal.
//!
//! A worker claims a task before it touches it (on SQLite always granted,
//! so none of this changes a single-writer run): a task another live
//! worker holds is left to it; a task whose worker's claim expired is
//! taken over, and its attempts left between intent and receipt go through
//! the same in-doubt resolver as after a crash. After claiming, the task is
//! read again from the ledger (another worker may have finished it
//! meanwhile). While it has nothing of its own in flight, a worker polls
//! the ledger for tasks other workers completed (their dependents are
//! ready) or abandoned; the run ends when nothing is startable and no other
//! live worker holds a task of the goal. The goal's acceptance checks and
//! verdict are taken under the goal's own claim, once: a worker that finds
//! the goal already judged reports it.

use std::collections::HashSet;

use super::action::{StopWait, Wait};
use super::event::Wake;
use super::state::Run;
use crate::decide::scheduler::Scheduler;
use crate::error::Result;
use crate::state::TaskState;
use crate::store::GOAL_CLAIM;

impl Run<'_> {
    /// The call site on a shared store: claim, reconcile what a dead
    /// worker left of the task, read its state again, and only then gate.
    pub async fn start_shared(&mut self, task_ref: &str) -> Result<()> {
        if !self.claim_for(task_ref).await? {
            self.states.insert(task_ref.to_string(), TaskState::Running);
            return Ok(());
        }
        self.reconcile_where(Some(task_ref)).await?;
        let now = self.io.task_now(task_ref).await?;
        let busy = self.in_flight.values().any(|f| f.task_ref == task_ref);
        let state = self.afresh(task_ref, now.unwrap_or(TaskState::Pending), busy).await?;
        self.states.insert(task_ref.to_string(), state);
        let started = if !busy && matches!(state, TaskState::Pending | TaskState::AwaitingApproval) {
            self.tried.insert(task_ref.to_string());
            self.start_claimed(task_ref).await
        } else {
            Ok(())
        };
        self.release_if_idle(task_ref).await?;
        started
    }

    /// Look at the ledger again: reconcile what dead workers left, take
    /// every task's state as it is now (a task another live worker holds
    /// is running), and a scheduler whose candidates are every task this
    /// run has not tried yet. Returns the tasks other workers hold.
    pub async fn poll(&mut self, order: &[String], deps: &[Vec<usize>]) -> Result<(Scheduler, HashSet<String>)> {
        self.reconcile_where(None).await?;
        let elsewhere = self.io.held_elsewhere().await?;
        let busy: HashSet<String> = self.in_flight.values().map(|f| f.task_ref.clone()).collect();
        let rows = self.io.tasks().await?;
        for (task_ref, state) in rows {
            if busy.contains(&task_ref) {
                continue;
            }
            let state = if elsewhere.contains(&task_ref) {
                TaskState::Running
            } else {
                self.afresh(&task_ref, state, false).await?
            };
            self.states.insert(task_ref, state);
        }
        let mut fresh = Scheduler::new(deps.to_vec());
        for (p, r) in order.iter().enumerate() {
            if self.tried.contains(r) || busy.contains(r) {
                fresh.mark_started(p);
            }
        }
        Ok((fresh, elsewhere))
    }

    /// Nothing of this run in flight: look at the ledger again. `None`:
    /// the run is idle (the last look found no task held elsewhere and no
    /// claim since met another worker's); else the fresh scheduler, after a
    /// poll interval (cut short by a person's stop) when others hold tasks.
    pub async fn idle_look(
        &mut self,
        order: &[String],
        deps: &[Vec<usize>],
        looked_idle: &mut bool,
    ) -> Result<Option<Scheduler>> {
        if *looked_idle && !self.met_claim {
            return Ok(None);
        }
        self.met_claim = false;
        let (fresh, elsewhere) = self.poll(order, deps).await?;
        *looked_idle = elsewhere.is_empty();
        if !*looked_idle {
            let wait = Wait { messages: false, accepted: false, poll: true, stop: self.stop.wait() };
            let stop = match self.io.wait(wait).await {
                Wake::Signal(s) => self.stop.event(Some(s)),
                Wake::Timer => self.stop.event(None),
                _ => None,
            };
            if let Some(event) = stop {
                self.on_stop(event).await?;
            }
        }
        Ok(Some(fresh))
    }

    /// Before the acceptance checks: hold the goal's own claim (waiting
    /// while another worker judges it). `false`: another worker judged the
    /// goal since this run started; report its verdict, do not judge again.
    pub async fn hold_goal_claim(&mut self) -> Result<bool> {
        while !self.claim_for(GOAL_CLAIM).await? {
            if self.stop.active() {
                // A stopped worker does not wait for another one's verdict.
                return Ok(false);
            }
            let wait = Wait { messages: false, accepted: false, poll: true, stop: StopWait::Nothing };
            self.io.wait(wait).await;
        }
        let judged_since = self.io.finished_since(self.started_seq).await?;
        Ok(!judged_since)
    }
}
