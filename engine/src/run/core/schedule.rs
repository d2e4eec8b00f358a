//! The loop: run every task whose dependencies are complete, `jobs` at a
//! time, in plan order (`decide::scheduler`); each round's intents share
//! one commit with the records of the messages just handled; wait for the
//! next message (or a person's stop, or a look at a shared ledger).

use std::collections::{HashMap, HashSet};

use super::action::Wait;
use super::event::Wake;
use super::start::stops_new_work;
use super::state::Run;
use crate::decide::scheduler::{Candidates, Scheduler};
use crate::error::{Error, Result};
use crate::state::TaskState;

/// The scheduler's view of the run: states and retry waits by position.
struct View<'a> {
    order: &'a [String],
    states: &'a HashMap<String, TaskState>,
    waits_for_retry: &'a HashSet<String>,
}

impl Candidates for View<'_> {
    fn state(&self, p: usize) -> TaskState {
        self.order.get(p).and_then(|r| self.states.get(r)).copied().unwrap_or(TaskState::Pending)
    }
    fn waits_for_retry(&self, p: usize) -> bool {
        self.order.get(p).is_some_and(|r| self.waits_for_retry.contains(r))
    }
}

impl Run<'_> {
    /// Run every task whose dependencies are complete, `jobs` at a time; a
    /// refused call (plan changed, operation conflict) stops new work, but
    /// what is already in flight is drained so its receipts are kept. A
    /// person's stop also stops new work, and ends what is in flight.
    pub async fn schedule(&mut self) -> Result<()> {
        let order = self.order();
        self.look_afresh(&order).await?;
        let waits_for_retry = self.held_back().await?;
        let position: HashMap<&str, usize> = order.iter().enumerate().map(|(p, r)| (r.as_str(), p)).collect();
        let deps = self.deps(&order, &position);
        let mut scheduler = Scheduler::new(deps.clone());
        let mut refused: Option<Error> = None;
        // Shared store: the run ends only after a fresh look at the ledger
        // found nothing to start and no other worker holding a task.
        let mut looked_idle = false;
        loop {
            // The intents of this round share one commit with the records
            // of the messages just handled; their calls wait for it.
            self.begin_group().await;
            self.start_ready(&order, &mut scheduler, &waits_for_retry, &mut refused).await?;
            self.flush().await?;
            if self.in_flight.is_empty() {
                let stopped = refused.is_some() || self.stops.budget.is_some() || self.stops.login.is_some();
                if !self.shared || stopped || self.stop.active() {
                    break;
                }
                match self.idle_look(&order, &deps, &mut looked_idle).await? {
                    Some(fresh) => scheduler = fresh,
                    None => break,
                }
                continue;
            }
            looked_idle = false;
            let Some(msg) = self.next_msg(&mut scheduler, &order, &deps).await? else { continue };
            self.take(msg, &mut scheduler, &position).await?;
            // Messages already waiting join the same group when they may.
            while let Some(msg) = self.io.try_message().await {
                self.take(msg, &mut scheduler, &position).await?;
            }
        }
        self.flush().await?;
        if let Some(e) = refused.or_else(|| self.stops.login.take()) {
            return Err(e);
        }
        if self.stop.active() {
            // Tasks that did not start were stopped, not blocked.
            return Ok(());
        }
        self.mark_blocked(&order, &scheduler, &waits_for_retry).await
    }

    /// The plan's tasks in plan order, by ref.
    fn order(&self) -> Vec<String> {
        let plan = self.plan;
        plan.order.iter().filter_map(|&i| plan.file.tasks.get(i)).map(|t| t.task_ref.clone()).collect()
    }

    /// Each task's dependencies, by position in `order`.
    fn deps(&self, order: &[String], position: &HashMap<&str, usize>) -> Vec<Vec<usize>> {
        let plan = self.plan;
        order
            .iter()
            .map(|r| {
                let depends_on = plan.task(r).map(|t| t.depends_on.as_slice()).unwrap_or_default();
                depends_on.iter().filter_map(|d| position.get(d.as_str()).copied()).collect()
            })
            .collect()
    }

    /// The tasks that wait for a person's act: a settled `not_run` for
    /// `engine retry`, a task a person holds for `engine release`.
    async fn held_back(&self) -> Result<HashSet<String>> {
        let mut waits_for_retry = self.waits_for_retry().await?;
        let forget_holds = crate::failpoint::fault(crate::failpoint::Fault::StartHeldTask);
        if !forget_holds {
            waits_for_retry.extend(self.person_held.iter().cloned());
        }
        Ok(waits_for_retry)
    }

    /// Start what is ready, in plan order, until `jobs` are in flight, or a
    /// person's stop, an exhausted budget, a login or a refused call
    /// (`refused`: it stops new work) says no more.
    async fn start_ready(
        &mut self,
        order: &[String],
        scheduler: &mut Scheduler,
        waits_for_retry: &HashSet<String>,
        refused: &mut Option<Error>,
    ) -> Result<()> {
        while !self.stopping().await?
            && self.stops.budget.is_none()
            && self.stops.login.is_none()
            && refused.is_none()
            && self.in_flight.len() < self.jobs
        {
            let view = View { order, states: &self.states, waits_for_retry };
            let Some(p) = scheduler.next(&view) else { break };
            let Some(task_ref) = order.get(p) else { break };
            match self.start(task_ref).await {
                // Kept without a call (early cutoff): its dependants may start.
                Ok(()) if self.state(task_ref).is_complete() => scheduler.completed(p),
                Ok(()) => {}
                Err(e) if stops_new_work(&e) => *refused = Some(e),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Decide and, if the gate allows, commit the intent and dispatch (on
    /// a shared store, under the task's claim).
    async fn start(&mut self, task_ref: &str) -> Result<()> {
        if self.shared {
            return self.start_shared(task_ref).await;
        }
        self.start_claimed(task_ref).await
    }

    /// Wait for the next message of a call in flight. `None`: a person's
    /// stop, or (on a shared store, where other workers' completions make
    /// dependents ready) a look at the ledger, came first.
    async fn next_msg(
        &mut self,
        scheduler: &mut Scheduler,
        order: &[String],
        deps: &[Vec<usize>],
    ) -> Result<Option<super::event::Msg>> {
        let poll = self.shared && self.in_flight.len() < self.jobs && !self.stop.active();
        let wait = Wait { messages: true, accepted: false, poll, stop: self.stop.wait() };
        match self.io.wait(wait).await {
            Wake::Message(msg) => Ok(Some(msg)),
            Wake::Signal(s) => self.on_stop_event(Some(s)).await,
            Wake::Timer => self.on_stop_event(None).await,
            Wake::Poll => {
                (*scheduler, _) = self.poll(order, deps).await?;
                Ok(None)
            }
            Wake::Closed | Wake::Accepted(_) => Err(Error::internal("the run's message channel closed")),
        }
    }

    async fn on_stop_event(&mut self, signal: Option<crate::state::StopSignal>) -> Result<Option<super::event::Msg>> {
        if let Some(event) = self.stop.event(signal) {
            self.on_stop(event).await?;
        }
        Ok(None)
    }

    /// Whatever could not start waits on something: say what.
    async fn mark_blocked(
        &mut self,
        order: &[String],
        scheduler: &Scheduler,
        waits_for_retry: &HashSet<String>,
    ) -> Result<()> {
        self.decide_put_off().await?;
        // A completion put off for an upstream that did not complete again
        // (`cutoff.rs`) stands in the ledger as it was: it is decided by
        // the run in which that upstream completes, and shown stale meanwhile.
        for (r, was) in std::mem::take(&mut self.deferred) {
            self.states.insert(r, was);
        }
        let view = View { order, states: &self.states, waits_for_retry };
        let mut blocked = Vec::new();
        for (p, r) in order.iter().enumerate() {
            if self.state(r) == TaskState::Pending {
                let waits: Vec<String> = scheduler
                    .waits_on(p, &view)
                    .into_iter()
                    .filter_map(|d| {
                        let r = order.get(d)?;
                        let word = if self.person_held.contains(r) { "held" } else { view.state(d).as_str() };
                        Some(format!("{r} ({word})"))
                    })
                    .collect();
                if !waits.is_empty() {
                    blocked.push((r.clone(), waits));
                }
            }
        }
        for (r, waits) in blocked {
            self.set_task(&r, TaskState::Blocked, super::state::waits_on(waits)).await?;
        }
        Ok(())
    }

    /// A completion put off for an upstream that completed again in this
    /// run, though the run ended before the task would have started (a
    /// budget spent, say): decided now, as it would have been then — stale
    /// and pending when what it stands on changed, kept on byte-identical
    /// outputs once every upstream is complete again (until then a kept
    /// answer is not final and it stays put off), never left standing on
    /// outputs an upstream no longer has.
    async fn decide_put_off(&mut self) -> Result<()> {
        let put_off: Vec<String> = self.deferred.keys().cloned().collect();
        for r in put_off {
            let task = self.task(&r)?;
            let complete = |d: &String| self.state(d) == TaskState::Succeeded;
            let again = task.depends_on.iter().any(|d| self.dispatched.contains(d) && complete(d));
            let all_complete = task.depends_on.iter().all(complete);
            if again {
                self.decide_cutoff(&r, !all_complete).await?;
            }
        }
        Ok(())
    }

    /// Tasks that stopped earlier are looked at afresh (but not those whose
    /// validations reconciliation just resumed); a task held back by an
    /// earlier unknown try goes on once that try is settled.
    async fn look_afresh(&mut self, order: &[String]) -> Result<()> {
        let busy: HashSet<String> = self.in_flight.values().map(|f| f.task_ref.clone()).collect();
        for r in order {
            let state = self.afresh(r, self.state(r), busy.contains(r)).await?;
            self.states.insert(r.clone(), state);
        }
        Ok(())
    }

    /// Tasks whose latest attempt a person settled as `not_run`: sent
    /// again only when a person asks (`engine retry`), never by a plain run.
    async fn waits_for_retry(&self) -> Result<HashSet<String>> {
        let settled = self.io.settled_not_run().await?;
        Ok(settled
            .into_iter()
            .filter(|a| self.state(&a.task_ref) != TaskState::AwaitingApproval)
            .filter(|a| {
                let op = self.plan.digests().tasks.get(&a.task_ref).map(|d| &d.operation_id);
                !op.is_some_and(|op| self.asked.retry.contains(op))
            })
            .map(|a| a.task_ref)
            .collect())
    }
}
