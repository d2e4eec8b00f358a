//! The run loop as a state machine: events in, actions out, and nothing
//! else — no ledger, no provider, no file, no clock, no thread, no signal
//! inside. `Core::resume` takes the event that answers the last action
//! (`event.rs`) and gives the next action (`action.rs`), until the run's
//! report. A driver performs the actions (`driver`): the real one on the
//! store, the workspace and the world of providers, processes and signals
//! (`live`); the simulator's on the same store code in a world it makes up
//! from one seed.
//!
//! The run's code is written as plain sequential code over one door
//! (`io.rs`): every `.await` in this folder is an action handed out and its
//! event taken back; the compiler turns the code into the state machine.
//! What the run knows between two events is `state::Run`. The phases, in
//! order: the first look, tool authority (`tools`), reconciliation (`in_doubt`),
//! the reuse pass, the loop (`schedule`, with `start`, `messages`,
//! `attempt`, `group`, `stopping`, `shared`), the acceptance checks, the
//! verdict.
//!
//! Inside the folder, each file calls only the files listed after it:
//! `schedule` → `shared` → `start` → `cutoff` → `read_first` → `messages` → `in_doubt` → `stopping`
//! → `attempt` → `group` → `tools` → `state` → `io` → `action`, `event`.

mod action;
mod attempt;
mod cutoff;
mod event;
mod group;
mod in_doubt;
mod io;
mod messages;
mod read_first;
mod schedule;
mod shared;
mod start;
mod state;
mod stopping;
#[cfg(test)]
mod tests;
mod tools;

use std::future::Future;

use serde_json::Value;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

pub use action::{
    Action, CallStopped, Closing, CutoffAnswer, Dispatch, FromReadBack, GateCall, InDoubt, Listed, Observed, Read,
    Receiving, Record, Say, Sending, StopWait, StoppedAs, SupersededLook, Validating, Validations, Via, Wait,
    WorldAction, Write,
};
pub use event::{Applied, Level, Msg, Opened, Spent, Verdict, Wake};
use io::Io;
pub use io::{Answered, Reply};
use state::{Run, StopEvent};

use crate::error::{Error, Result};
use crate::ids::Revision;
use crate::plan::Plan;
use crate::run::asked::Asked;
use crate::run::check::{CheckRun, CheckSpec};
use crate::run::constraints::Guard;
use crate::run::report::{AcceptanceLine, RunReport};
use crate::store::events::EventKind;
use crate::store::{Durability, GOAL_CLAIM};

/// What stepping the core gives.
#[derive(Debug)]
pub enum Step {
    /// Perform this, answer it through its reply, then resume.
    Act(Action),
    /// The run is over.
    Done(Result<RunReport>),
}

/// One run, as a state machine.
pub struct Core<'p> {
    io: Io,
    run: Option<Pin<Box<dyn Future<Output = Result<RunReport>> + 'p>>>,
}

impl<'p> Core<'p> {
    /// The run of revision `revision` of `plan`, `jobs` calls at a time;
    /// `shared`: on a store other workers share; `guard`: the paths and
    /// checks its attempts are judged by (the driver looks them up).
    pub fn new(plan: &'p Plan, revision: Revision, jobs: usize, asked: Asked, shared: bool, guard: Guard) -> Core<'p> {
        let io = Io::default();
        let mut run = Run::new(io.clone(), plan, revision, jobs.max(1), asked, shared, guard);
        Core { io, run: Some(Box::pin(async move { run.run().await })) }
    }

    /// Go on (first, or with the last request answered through its
    /// reply) to the next request, or to the end.
    pub fn resume(&mut self) -> Step {
        let Some(run) = self.run.as_mut() else { return Step::Done(Err(Error::internal("the run is over"))) };
        let waker = Waker::from(Arc::new(Nudge));
        match run.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(report) => {
                self.run = None;
                Step::Done(report)
            }
            Poll::Pending => match self.io.0.borrow_mut().take() {
                Some(action) => Step::Act(action),
                None => {
                    // The last request went unanswered: nothing is made up for it.
                    self.run = None;
                    Step::Done(Err(Error::internal("the run's driver left a request unanswered")))
                }
            },
        }
    }
}

/// Nothing to wake: the core only moves when it is resumed.
struct Nudge;

impl std::task::Wake for Nudge {
    fn wake(self: Arc<Self>) {}
}

impl Run<'_> {
    async fn run(&mut self) -> Result<RunReport> {
        // Every task's state, the inputs the load left to the run checked,
        // the caches read (beside the look, where the store can).
        let opened = self.io.open().await?;
        self.states = opened.states;
        self.person_held = opened.held.into_iter().collect();
        self.began_ms = opened.now_ms;
        let jobs = self.jobs;
        self.started_seq = self.io.record(|reply| Record::RunStarted { jobs, reply }).await?;
        let raises = self.io.read(Read::Raises).await?;
        self.budgets = crate::decide::raise::in_force(&self.plan.file.budgets, &raises);
        self.states_at_start = self.states.clone();
        self.check_tools().await?;
        let complete = self.states.values().filter(|s| s.is_complete()).count();
        self.io.say(Say::Began { total: self.plan.file.tasks.len(), complete }).await;
        self.reconcile_where(None).await?;
        if !self.shared {
            // On a shared store each worker sees its own workspace: a
            // completion stands until a revision says otherwise.
            self.refresh_completions().await?;
        }
        self.schedule().await?;
        if self.shared && !self.hold_goal_claim().await? {
            let closing = Box::new(self.closing(None));
            let report = self.io.report(|reply| Action::ReportJudged(closing, reply)).await;
            self.release_if_idle(GOAL_CLAIM).await?;
            return report;
        }
        let acceptance = self.acceptance().await?;
        let closing = Box::new(self.closing(acceptance));
        let report = self.io.report(|reply| Action::Finish(closing, reply)).await;
        self.release_if_idle(GOAL_CLAIM).await?;
        report
    }

    /// Are completed tasks still complete? Like a build tool with stale
    /// targets (`decide::reuse`, in the driver's one snapshot): a stale one
    /// is pending again, and the event says why.
    async fn refresh_completions(&mut self) -> Result<()> {
        let mut states: Vec<(String, crate::state::TaskState)> =
            self.states.iter().map(|(r, s)| (r.clone(), *s)).collect();
        states.sort_by(|a, b| a.0.cmp(&b.0));
        let across_tool_change = self.asked.across_tool_change.is_some();
        // A task a person reruns without `--downstream` stands for its
        // dependants on its completion: theirs are kept.
        let alone = self.asked.reruns.iter().filter(|(_, x)| !x.downstream).map(|(r, _)| r.clone()).collect();
        let tools = self.tools.clone();
        let stale = self.io.ask(|reply| Action::Refresh { states, tools, across_tool_change, alone, reply }).await?;
        for (r, detail) in stale {
            if let (Some(act), Some(true)) =
                (&self.asked.across_tool_change, detail.get("keep").and_then(Value::as_bool))
            {
                // A person's act: kept although its tool changed.
                let mut data = detail;
                let words = format!("kept by a person's act: {}", reason_words(&data, "kept"));
                self.rechecked.insert(r.clone(), words);
                data["by"] = serde_json::json!(act.person);
                data["ask_id"] = serde_json::json!(act.ask_id);
                data["act"] = Value::String("--reuse-across-tool-change".into());
                self.write_event(Durability::Full, EventKind::CompletionKept, Some(&r), None, data).await?;
                continue;
            }
            if detail.get("defer").and_then(Value::as_bool) == Some(true) {
                // Decided when its upstream is complete again (`cutoff.rs`):
                // the ledger keeps its completion meanwhile.
                let was = self.state(&r);
                self.deferred.insert(r.clone(), was);
                self.states.insert(r, crate::state::TaskState::Pending);
                continue;
            }
            self.rechecked.insert(r.clone(), format!("ran again: {}", reason_words(&detail, "stale")));
            self.write_event(Durability::Normal, EventKind::CompletionStale, Some(&r), None, detail.clone()).await?;
            self.set_task(&r, crate::state::TaskState::Pending, detail).await?;
        }
        Ok(())
    }

    /// When every task is complete (and no person stopped the run): the
    /// goal's constraint checks once more (the state the goal would be
    /// judged in: a revision whose every task is reused runs no attempt),
    /// then its acceptance checks. A stop ends the one running and skips the
    /// rest, and those are recorded as stopped, never as failed.
    async fn acceptance(&mut self) -> Result<Option<Vec<AcceptanceLine>>> {
        if !self.states.values().all(|s| s.is_complete()) {
            return Ok(None);
        }
        let checks: Vec<CheckSpec> = self.plan.goal().acceptance.iter().filter_map(CheckSpec::of_acceptance).collect();
        if self.stopping().await? {
            self.acceptance_stopped = checks.into_iter().map(|c| c.id).collect();
            return Ok(None);
        }
        // The checks may read what the tasks made, on whichever worker
        // judges the goal.
        self.io.materialize(None).await?;
        self.io.say(Say::Accepting { checks: checks.len() }).await;
        let ids: Vec<String> = checks.iter().map(|c| c.id.clone()).collect();
        let constraint_checks = self.guard.checks.clone();
        self.io.world(|reply| WorldAction::Accept { constraint_checks, checks, reply }).await;
        let runs = loop {
            let wait = Wait { messages: false, accepted: true, poll: false, stop: self.stop.wait() };
            let event = match self.io.wait(wait).await {
                Wake::Accepted(runs) => break runs,
                Wake::Signal(s) => self.stop.event(Some(s)),
                Wake::Timer => self.stop.event(None),
                _ => None,
            };
            match event {
                Some(StopEvent::GiveUp) => {
                    self.io.world(WorldAction::AbortAccept).await;
                    self.on_stop(StopEvent::GiveUp).await?;
                    break None;
                }
                Some(event) => self.on_stop(event).await?,
                None => {}
            }
        };
        let Some((constraint_runs, runs)) = runs.filter(|(c, _)| c.iter().all(|r| r.stopped.is_none())) else {
            // A stop ended a constraint check: nothing of the goal's end is judged.
            self.acceptance_stopped = ids;
            return Ok(None);
        };
        if !constraint_runs.is_empty() {
            let results: Vec<(String, bool)> = constraint_runs.iter().map(|r| (r.id.clone(), r.passed())).collect();
            self.io.write_done(Write::GoalConstraints(constraint_runs)).await?;
            self.tally.goal_checks.extend(results);
        }
        let (done, stopped): (Vec<CheckRun>, Vec<CheckRun>) = runs.into_iter().partition(|r| r.stopped.is_none());
        let lines = self.io.record(|reply| Record::Acceptance(done, reply)).await?;
        if stopped.is_empty() {
            return Ok(Some(lines));
        }
        self.acceptance_stopped = stopped.into_iter().map(|r| r.id).collect();
        Ok(None)
    }

    /// What the run ends on, for the verdict and the report.
    fn closing(&mut self, acceptance: Option<Vec<AcceptanceLine>>) -> Closing {
        let repairs = self
            .asked
            .repairs
            .iter()
            .map(|(r, rep)| {
                let forced = rep.classification.as_ref().is_some_and(|c| crate::decide::repair::needs_force(c.class));
                (r.clone(), forced)
            })
            .collect();
        Closing {
            acceptance,
            unknown: std::mem::take(&mut self.stops.unknown),
            same_request: std::mem::take(&mut self.stops.same_request),
            awaiting: std::mem::take(&mut self.stops.awaiting),
            budget: self.stops.budget.clone(),
            budgets: self.budgets.clone(),
            tally: self.tally.clone(),
            signal: self.stop.signal,
            grace_cut: self.stop.grace_cut,
            acceptance_stopped: std::mem::take(&mut self.acceptance_stopped),
            dispatched: self.dispatched.clone(),
            states_at_start: self.states_at_start.clone(),
            repairs,
            rechecked: std::mem::take(&mut self.rechecked),
        }
    }
}

/// `CODE: detail` of a reuse pass's judgement (`key`: `stale` or `kept`).
pub(super) fn reason_words(data: &Value, key: &str) -> String {
    let code = data.get(key).and_then(Value::as_str).unwrap_or("?");
    match data.get("detail").and_then(Value::as_str) {
        Some(detail) if !detail.is_empty() => format!("{code}: {detail}"),
        _ => code.to_string(),
    }
}
