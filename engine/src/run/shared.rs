//! The run loop on a shared store, where several workers run one goal.
//!
//! A worker claims a task before it touches it (`LeaseGuard::claim`; on
//! SQLite always granted, so none of this changes a single-writer run):
//! a task another live worker holds is left to it; a task whose worker's
//! claim expired is taken over, and its attempts left between intent and
//! receipt go through the same in-doubt resolver as after a crash. After
//! claiming, the task is read again from the ledger (another worker may
//! have finished it meanwhile). While it has nothing of its own in
//! flight, a worker polls the ledger for tasks other workers completed
//! (their dependents are ready) or abandoned; the run ends when nothing
//! is startable and no other live worker holds a task of the goal. The
//! goal's acceptance checks and verdict are taken under the goal's own
//! claim, once: a worker that finds the goal already judged reports it.

use std::collections::HashSet;

use serde_json::json;

use super::Runner;
use crate::decide::scheduler::Scheduler;
use crate::error::Result;
use crate::state::TaskState;
use crate::store::events::EventKind;
use crate::store::{Claimed, Durability, GOAL_CLAIM};

impl Runner<'_> {
    /// Claim `task_ref` for this run; `false`: another live worker has it.
    /// A takeover is logged (who held it, at which generation).
    pub(super) fn claim_for(&mut self, task_ref: &str) -> Result<bool> {
        if !self.shared {
            return Ok(true);
        }
        match self.ledger.claim(&self.goal_id, task_ref)? {
            Claimed::Elsewhere => {
                self.met_claim = true;
                Ok(false)
            }
            Claimed::Mine { generation, took_over } => {
                if let Some(t) = took_over {
                    let data = json!({
                        "previous_worker": t.worker_id, "previous_generation": t.generation,
                        "generation": generation, "worker": self.ledger.worker_id(),
                        "why": "the previous worker's claim expired without a heartbeat",
                    });
                    let task = (task_ref != GOAL_CLAIM).then_some(task_ref);
                    self.write_event(Durability::Normal, EventKind::ClaimTakenOver, task, None, data)?;
                }
                Ok(true)
            }
        }
    }

    /// Give the claim back once this run has nothing of the task in flight.
    pub(super) fn release_if_idle(&mut self, task_ref: &str) -> Result<()> {
        if self.shared && !self.in_flight.values().any(|f| f.task_ref == task_ref) {
            self.ledger.release_claim(&self.goal_id, task_ref)?;
        }
        Ok(())
    }

    /// The call site on a shared store: claim, reconcile what a dead
    /// worker left of the task, read its state again, and only then gate.
    pub(super) async fn start_shared(&mut self, task_ref: &str) -> Result<()> {
        if !self.claim_for(task_ref)? {
            self.states.insert(task_ref.to_string(), TaskState::Running);
            return Ok(());
        }
        self.reconcile_where(Some(task_ref)).await?;
        let now = self.ledger.read().task(&self.goal_id, self.revision, task_ref)?.map(|t| t.state);
        let busy = self.in_flight.values().any(|f| f.task_ref == task_ref);
        let state = self.afresh(task_ref, now.unwrap_or(TaskState::Pending), busy)?;
        self.states.insert(task_ref.to_string(), state);
        let started = if !busy && matches!(state, TaskState::Pending | TaskState::AwaitingApproval) {
            self.tried.insert(task_ref.to_string());
            self.start_claimed(task_ref).await
        } else {
            Ok(())
        };
        self.release_if_idle(task_ref)?;
        started
    }

    /// Look at the ledger again: reconcile what dead workers left, take
    /// every task's state as it is now (a task another live worker holds
    /// is running), and a scheduler whose candidates are every task this
    /// run has not tried yet. Returns the tasks other workers hold.
    pub(super) async fn poll(&mut self, order: &[String], deps: &[Vec<usize>]) -> Result<(Scheduler, HashSet<String>)> {
        self.reconcile_where(None).await?;
        let elsewhere = self.ledger.held_elsewhere(&self.goal_id)?;
        let busy: HashSet<String> = self.in_flight.values().map(|f| f.task_ref.clone()).collect();
        for row in self.ledger.read().tasks(&self.goal_id, self.revision)? {
            if busy.contains(&row.task_ref) {
                continue;
            }
            let state = if elsewhere.contains(&row.task_ref) {
                TaskState::Running
            } else {
                self.afresh(&row.task_ref, row.state, false)?
            };
            self.states.insert(row.task_ref, state);
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
    pub(super) async fn idle_look(
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
            let stop = tokio::select! {
                _ = tokio::time::sleep(crate::limits::WORKER_POLL) => None,
                event = self.stop.next() => Some(event),
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
    pub(super) async fn hold_goal_claim(&mut self) -> Result<bool> {
        while !self.claim_for(GOAL_CLAIM)? {
            if self.stop.active() {
                // A stopped worker does not wait for another one's verdict.
                return Ok(false);
            }
            tokio::time::sleep(crate::limits::WORKER_POLL).await;
        }
        let last = self.ledger.read().latest_event(&self.goal_id, self.revision, EventKind::RunFinished)?;
        Ok(last.is_none_or(|l| l.seq <= self.started_seq))
    }
}
