//! The run loop: reconcile in-doubt attempts, re-check completions, run
//! ready tasks (intent → dispatch → receipt → validations), then the goal's
//! acceptance checks, and the verdict.
//!
//! The `Runner` does the I/O and the sequencing only; every decision is a
//! pure function of `decide/` (the call-site gate, the in-doubt resolver,
//! the scheduler, classification, reuse, the verdict). One coordinator
//! owns the ledger and is its only writer; provider calls and checks run as
//! tokio tasks that report back over a bounded channel, so every ledger
//! write happens in one place, in the order events really happened.

mod checks;
mod constraints;
mod early;
mod fresh;
mod group;
mod in_doubt;
mod inputs;
mod look;
mod materialize;
pub mod orphans;
mod outputs;
pub mod progress;
pub mod provider;
mod read_first;
mod reconcile;
mod record;
mod report;
pub mod sandboxes;
mod shared;
mod start;
pub mod stop;
mod stopped;
mod tools;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use providers::process::ProcessId;
use providers::{Call, Outcome, Progress, Provider};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::checkpoint::{self, Checkpoint, FileCache};
use crate::decide::budget::Exhausted;
use crate::decide::scheduler::{self, Candidates, Scheduler};
use crate::error::{Code, Error, Result};
use crate::evidence::{Classification, StopEnd};
use crate::failpoint;
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, Revision, Seq};
use crate::limits::{OUTPUT_BYTES_MAX, RUN_MESSAGES_MAX};
use crate::plan::{Budgets, Plan, ProviderSpec, Task};
use crate::state::{AttemptState, TaskState};
use crate::store::attempts::Intent;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::LedgerTx;
use crate::store::{Durability, LeaseGuard};
use checks::CheckRun;
pub use constraints::Tally;
pub use fresh::completion;
use progress::{Sink, Update};
pub use report::{
    AcceptanceLine, Awaiting, ConstraintLine, PlanFileChanged, RunReport, StopReport, TaskLine, UnknownOp,
};
pub use sandboxes::Sandboxes;
use stop::{Level, Stop, StopEvent};
pub use tools::list_now as list_tools_now;

/// What a person asked of this run, beyond running the plan.
#[derive(Debug, Default)]
pub struct Asked {
    /// Operations a person asked to re-send (`engine retry`).
    pub retry: HashSet<OperationId>,
    /// Tasks a person asked to repair (`engine repair`), by ref.
    pub repairs: HashMap<String, Repair>,
}

/// What a repair sends: a new request (the instruction is part of it) with
/// the failure evidence handed to the provider.
#[derive(Debug, Clone)]
pub struct Repair {
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    pub instruction: Option<String>,
    pub failed_attempt: AttemptId,
    pub classification: Option<Classification>,
    pub evidence: Value,
}

/// Run revision `revision` of `plan` under `ledger`'s lease, on a
/// current-thread runtime, telling `progress` what happens as it happens.
pub fn execute(
    ledger: &mut LeaseGuard,
    plan: &Plan,
    revision: Revision,
    jobs: usize,
    asked: Asked,
    sandboxes: Sandboxes,
    progress: Arc<dyn Sink>,
) -> Result<RunReport> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let providers = provider::build_all(&plan.file.providers, &plan.workspace)?;
    let mut runner = Runner::new(ledger, plan, revision, jobs.max(1), asked, (providers, sandboxes), progress);
    let report = rt.block_on(runner.run());
    // Every path out of the run ends what the providers kept for it (an
    // MCP server's process group, an HTTP session), the failed ones too.
    rt.block_on(provider::shutdown_all(&runner.providers));
    runner.progress.update(&Update::Ended);
    report
}

/// Messages from in-flight work to the coordinator.
enum Msg {
    Progress {
        attempt_id: AttemptId,
        progress: Progress,
    },
    /// The call's outcome (boxed: a receipt is large, the other messages
    /// small), and how far a person's stop reached its process.
    Finished {
        attempt_id: AttemptId,
        outcome: Box<Outcome>,
        level: Level,
    },
    /// An attempt's validations ran, then the goal's constraint checks.
    Validated {
        attempt_id: AttemptId,
        runs: Vec<CheckRun>,
        constraint_runs: Vec<CheckRun>,
    },
}

impl Msg {
    fn attempt_id(&self) -> AttemptId {
        match self {
            Msg::Progress { attempt_id, .. } | Msg::Finished { attempt_id, .. } | Msg::Validated { attempt_id, .. } => {
                *attempt_id
            }
        }
    }
}

struct InFlight {
    /// The committed intent this work belongs to.
    intent: Intent,
    task_ref: String,
    /// The checkpoint observed when its validations started.
    before: Option<Checkpoint>,
    /// The provider process, once started: recorded with the dispatch, so
    /// an engine taking over after a crash can end its process group.
    process: Option<ProcessId>,
    /// The call as its provider (named) received it, while it is out.
    call: Option<(String, Call)>,
    /// The provider's name for the request once it accepted it (an MCP
    /// task id): what a person's interrupt asks it to cancel.
    handle: Option<providers::Handle>,
    /// The protected paths it is judged against (also in the ledger, by
    /// its intent's `protected_at_intent`).
    protected: Option<Checkpoint>,
    /// A person's stop asked the provider to cancel the request: whatever
    /// answer comes after is the stop's doing, not the provider's own.
    cancel_asked: bool,
    /// The task running its call or its validations, to stop waiting for.
    work: Option<tokio::task::AbortHandle>,
    /// The call runs in no process group of its own (HTTP, MCP): a stop
    /// past its grace stops waiting for it.
    processless: bool,
    /// The provider answered; its validations run.
    validating: bool,
}

impl InFlight {
    fn new(intent: Intent, task_ref: &str) -> InFlight {
        InFlight {
            intent,
            task_ref: task_ref.to_string(),
            before: None,
            process: None,
            call: None,
            protected: None,
            handle: None,
            cancel_asked: false,
            work: None,
            processless: false,
            validating: false,
        }
    }
}

/// What woke the coordinator.
enum Wake {
    Msg(Option<Msg>),
    Stop(StopEvent),
    /// Time to look at a shared ledger again.
    Poll,
}

/// What the run ends waiting on, besides failed tasks.
#[derive(Default)]
struct Stops {
    unknown: Vec<UnknownOp>,
    awaiting: Vec<Awaiting>,
    budget: Option<Exhausted>,
}

struct Runner<'l> {
    ledger: &'l mut LeaseGuard,
    plan: &'l Plan,
    goal_id: GoalId,
    revision: Revision,
    jobs: usize,
    providers: HashMap<String, Arc<dyn Provider>>,
    /// Secret values (from the variables the plan names), for redaction.
    secrets: Vec<String>,
    asked: Asked,
    /// A shared store: claims per task, other workers beside this one.
    shared: bool,
    /// Tasks this run took to the call site (never again in this run).
    tried: HashSet<String>,
    /// A claim met another worker's since the last look at the ledger.
    met_claim: bool,
    /// The ledger position of this run's `run_started` event.
    started_seq: Seq,
    states: HashMap<String, TaskState>,
    /// Each task's state when this run began, and the tasks it sent a
    /// call for: the summary tells what this run did from what it kept.
    states_at_start: HashMap<String, TaskState>,
    dispatched: HashSet<String>,
    in_flight: HashMap<AttemptId, InFlight>,
    /// What waits for the open group's commit (`group.rs`).
    held: group::Waiting,
    stops: Stops,
    /// The goal's checkable constraints, and what this run saw of them.
    guard: constraints::Guard,
    tally: Tally,
    /// Each MCP provider's tools as its server listed them before the first
    /// intent (a provider whose server could not be asked is absent).
    tools: BTreeMap<String, crate::decide::tools::Inventory>,
    /// File-state cache for checkpoints; flushed when the run finishes.
    cache: FileCache,
    /// Where each process the run starts may write.
    sandboxes: Sandboxes,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    /// A person's stop (SIGINT, SIGTERM, SIGHUP) and the process groups it
    /// reaches.
    stop: Stop,
    /// Acceptance checks a person's stop ended before they finished.
    acceptance_stopped: Vec<String>,
    progress: Arc<dyn Sink>,
    /// When each task this run started began, for its duration.
    started: HashMap<String, Instant>,
    /// The budgets in force: the plan's, raised by a person's raises.
    budgets: Budgets,
    /// When this run of work began: `deadline_seconds` counts from here.
    began_ms: i64,
    /// Does any task declare `outputs`? (Else nothing is materialized, at
    /// no cost per task.)
    outputs_declared: bool,
    /// What the first look at the workspace read of the complete tasks'
    /// inputs, for the reuse pass (`inputs.rs`).
    first_look: Option<inputs::FirstLook>,
    /// The revision's completions as the run's start read them (`early.rs`),
    /// for the reuse pass while nothing ran since.
    completions_read: Option<early::Completions>,
}

/// The scheduler's view of the runner: states and retry waits by position.
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

impl<'l> Runner<'l> {
    fn new(
        ledger: &'l mut LeaseGuard,
        plan: &'l Plan,
        revision: Revision,
        jobs: usize,
        asked: Asked,
        (providers, sandboxes): (HashMap<String, Arc<dyn Provider>>, Sandboxes),
        progress: Arc<dyn Sink>,
    ) -> Self {
        let secrets =
            plan.file.secrets.iter().filter_map(|name| std::env::var(name).ok()).filter(|v| !v.is_empty()).collect();
        let (tx, rx) = mpsc::channel(RUN_MESSAGES_MAX);
        let goal_id = GoalId::new(&plan.goal().id);
        let shared = ledger.shared();
        let shadows = if plan.goal().constraints.iter().any(|c| c.checked().is_some_and(|c| !c.protect.is_empty())) {
            constraints::shadows(plan)
        } else {
            Vec::new()
        };
        let guard = constraints::Guard::of(plan.goal(), &shadows, constraints::engine_protected(plan));
        let outputs_declared = plan.file.tasks.iter().any(|t| !t.outputs.is_empty());
        Runner {
            ledger,
            plan,
            goal_id,
            revision,
            jobs,
            providers,
            secrets,
            asked,
            shared,
            tried: HashSet::new(),
            met_claim: false,
            started_seq: Seq(0),
            states: HashMap::new(),
            states_at_start: HashMap::new(),
            dispatched: HashSet::new(),
            in_flight: HashMap::new(),
            held: group::Waiting::default(),
            stops: Stops::default(),
            guard,
            tally: Tally::default(),
            tools: BTreeMap::new(),
            cache: FileCache::default(),
            sandboxes,
            tx,
            rx,
            stop: Stop::new(stop::Groups::default()),
            acceptance_stopped: Vec::new(),
            progress,
            started: HashMap::new(),
            budgets: Budgets::default(),
            began_ms: crate::clock::now_ms(),
            outputs_declared,
            first_look: None,
            completions_read: None,
        }
    }

    async fn run(&mut self) -> Result<RunReport> {
        // The file-state cache and the completions are read while the
        // inputs are looked at (`early.rs`).
        let early = self.read_early();
        self.read_states()?;
        // Inputs the load left to the run are refused before it writes
        // anything, as the load would have refused them.
        self.check_inputs()?;
        self.take_early(early)?;
        let data =
            json!({"generation": self.ledger.fence().generation(), "jobs": self.jobs, "pid": std::process::id()});
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.started_seq = self.ledger.write(Durability::Normal, |tx| {
            tx.append_event(&Event::goal(EventKind::RunStarted, &goal_id, revision, data.clone()))
        })?;
        let raises = crate::budgets::raises(&*self.ledger.read(), &self.goal_id)?;
        self.budgets = crate::decide::raise::in_force(&self.plan.file.budgets, &raises);
        self.states_at_start = self.states.clone();
        self.check_tools().await?;
        let complete = self.states.values().filter(|s| s.is_complete()).count();
        let (goal, revision, total) = (&self.goal_id, self.revision, self.plan.file.tasks.len());
        self.progress.update(&Update::Began { goal, revision, total, complete });
        self.reconcile().await?;
        if !self.shared {
            // On a shared store each worker sees its own workspace: a
            // completion stands until a revision says otherwise.
            self.refresh_completions()?;
        }
        self.schedule().await?;
        if self.shared && !self.hold_goal_claim().await? {
            let report = self.report_judged();
            self.release_if_idle(crate::store::GOAL_CLAIM)?;
            return report;
        }
        let acceptance = self.acceptance().await?;
        let report = self.finish(acceptance);
        self.release_if_idle(crate::store::GOAL_CLAIM)?;
        report
    }

    /// Each task's state as the ledger has it when the run begins.
    fn read_states(&mut self) -> Result<()> {
        for (task_ref, state) in self.ledger.read().task_states(&self.goal_id, self.revision)? {
            self.states.insert(task_ref, state);
        }
        // Every task of the plan has its row: the scheduler reads states by
        // the plan's refs and must never meet one the ledger lacks.
        if let Some(t) = self.plan.file.tasks.iter().find(|t| !self.states.contains_key(&t.task_ref)) {
            return Err(Error::new(
                Code::StoreCorrupt,
                format!(
                    "task `{}` of goal `{}` revision {} has no row in the ledger",
                    t.task_ref, self.goal_id, self.revision
                ),
            ));
        }
        Ok(())
    }

    fn task(&self, task_ref: &str) -> Result<&Task> {
        self.plan.task(task_ref).ok_or_else(|| Error::internal(format!("task {task_ref} is not in the plan")))
    }

    fn state(&self, task_ref: &str) -> TaskState {
        self.states.get(task_ref).copied().unwrap_or(TaskState::Pending)
    }

    fn write_event(
        &mut self,
        d: Durability,
        kind: EventKind,
        task_ref: Option<&str>,
        attempt: Option<AttemptId>,
        data: Value,
    ) -> Result<()> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.ledger.write(d, |tx| {
            let mut e = Event::goal(kind, &goal_id, revision, data.clone());
            e.task_ref = task_ref;
            e.attempt_id = attempt;
            tx.append_event(&e).map(|_| ())
        })
    }

    fn set_task(&mut self, task_ref: &str, state: TaskState, detail: Value) -> Result<()> {
        let goal_id = self.goal_id.clone();
        let key = TaskKey { goal_id: &goal_id, revision: self.revision, task_ref };
        self.ledger.write(Durability::Normal, |tx| set_task_in(tx, key, state, detail.clone()))?;
        self.states.insert(task_ref.to_string(), state);
        Ok(())
    }

    /// Run every task whose dependencies are complete, `jobs` at a time; a
    /// refused call (plan changed, operation conflict) stops new work, but
    /// what is already in flight is drained so its receipts are kept. A
    /// person's stop also stops new work, and ends what is in flight.
    async fn schedule(&mut self) -> Result<()> {
        let order: Vec<String> = self.plan.order.iter().map(|&i| self.plan.file.tasks[i].task_ref.clone()).collect();
        self.look_afresh(&order)?;
        let waits_for_retry = self.waits_for_retry()?;
        let position: HashMap<&str, usize> = order.iter().enumerate().map(|(p, r)| (r.as_str(), p)).collect();
        let deps: Vec<Vec<usize>> = order
            .iter()
            .map(|r| {
                let depends_on = self.plan.task(r).map(|t| t.depends_on.as_slice()).unwrap_or_default();
                depends_on.iter().filter_map(|d| position.get(d.as_str()).copied()).collect()
            })
            .collect();
        let mut scheduler = Scheduler::new(deps.clone());
        let mut refused: Option<Error> = None;
        // Shared store: the run ends only after a fresh look at the ledger
        // found nothing to start and no other worker holding a task.
        let mut looked_idle = false;
        loop {
            // The intents of this round share one commit with the records
            // of the messages just handled; their calls wait for it.
            self.begin_group();
            while !self.stopping().await?
                && self.stops.budget.is_none()
                && refused.is_none()
                && self.in_flight.len() < self.jobs
            {
                let view = View { order: &order, states: &self.states, waits_for_retry: &waits_for_retry };
                let Some(p) = scheduler.next(&view) else { break };
                match self.start(&order[p]).await {
                    Ok(()) => {}
                    Err(e) if matches!(e.code, Code::PlanChanged | Code::OperationConflict | Code::StoreTampered) => {
                        refused = Some(e)
                    }
                    Err(e) => return Err(e),
                }
            }
            self.flush()?;
            if self.in_flight.is_empty() {
                if !self.shared || refused.is_some() || self.stops.budget.is_some() || self.stop.active() {
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
            while let Ok(msg) = self.rx.try_recv() {
                self.take(msg, &mut scheduler, &position).await?;
            }
        }
        self.flush()?;
        if let Some(e) = refused {
            return Err(e);
        }
        if self.stop.active() {
            // Tasks that did not start were stopped, not blocked.
            return Ok(());
        }
        self.mark_blocked(&order, &scheduler, &waits_for_retry)
    }

    /// Handle one message of a call in flight, in the open group or on
    /// its own (`group_for`); a task that left the flight completes in the
    /// scheduler.
    async fn take(&mut self, msg: Msg, scheduler: &mut Scheduler, position: &HashMap<&str, usize>) -> Result<()> {
        self.group_for(&msg)?;
        let attempt_id = msg.attempt_id();
        let task_ref = self.in_flight.get(&attempt_id).map(|f| f.task_ref.clone());
        self.handle(msg).await?;
        if let Some(r) = &task_ref {
            self.release_if_idle(r)?;
        }
        if let Some(r) = task_ref.filter(|_| !self.in_flight.contains_key(&attempt_id)) {
            if let (true, Some(&p)) = (self.state(&r).is_complete(), position.get(r.as_str())) {
                scheduler.completed(p);
            }
            self.note_ended(r)?;
        }
        Ok(())
    }

    /// Wait for the next message of a call in flight. `None`: a person's
    /// stop, or (on a shared store, where other workers' completions make
    /// dependents ready) a look at the ledger, came first.
    async fn next_msg(
        &mut self,
        scheduler: &mut Scheduler,
        order: &[String],
        deps: &[Vec<usize>],
    ) -> Result<Option<Msg>> {
        let poll_due = self.shared && self.in_flight.len() < self.jobs && !self.stop.active();
        let wake = tokio::select! {
            msg = self.rx.recv() => Wake::Msg(msg),
            event = self.stop.next() => Wake::Stop(event),
            _ = tokio::time::sleep(crate::limits::WORKER_POLL), if poll_due => Wake::Poll,
        };
        match wake {
            Wake::Msg(msg) => msg.map(Some).ok_or_else(|| Error::internal("the run's message channel closed")),
            Wake::Stop(event) => {
                self.on_stop(event).await?;
                Ok(None)
            }
            Wake::Poll => {
                (*scheduler, _) = self.poll(order, deps).await?;
                Ok(None)
            }
        }
    }

    /// Whatever could not start waits on something: say what.
    fn mark_blocked(
        &mut self,
        order: &[String],
        scheduler: &Scheduler,
        waits_for_retry: &HashSet<String>,
    ) -> Result<()> {
        let view = View { order, states: &self.states, waits_for_retry };
        let mut blocked = Vec::new();
        for (p, r) in order.iter().enumerate() {
            if self.state(r) == TaskState::Pending {
                let waits: Vec<String> = scheduler
                    .waits_on(p, &view)
                    .into_iter()
                    .filter_map(|d| Some(format!("{} ({})", order.get(d)?, view.state(d))))
                    .collect();
                if !waits.is_empty() {
                    blocked.push((r.clone(), waits));
                }
            }
        }
        for (r, waits) in blocked {
            self.set_task(&r, TaskState::Blocked, json!({"waits_on": waits}))?;
        }
        Ok(())
    }

    /// Tasks that stopped earlier are looked at afresh (but not those whose
    /// validations reconciliation just resumed); a task held back by an
    /// earlier unknown try goes on once that try is settled.
    fn look_afresh(&mut self, order: &[String]) -> Result<()> {
        let busy: HashSet<String> = self.in_flight.values().map(|f| f.task_ref.clone()).collect();
        for r in order {
            let state = self.afresh(r, self.state(r), busy.contains(r))?;
            self.states.insert(r.clone(), state);
        }
        Ok(())
    }

    /// A task's state as this run takes it up (`scheduler::afresh`), with
    /// whether the earlier try it waits on was settled since.
    fn afresh(&self, task_ref: &str, state: TaskState, busy: bool) -> Result<TaskState> {
        let mut waited_try_settled = false;
        if state == TaskState::EffectUnknown {
            let task = self.ledger.read().task(&self.goal_id, self.revision, task_ref)?;
            if let Some(waited) = task.as_ref().and_then(|t| t.waits_on_attempt()) {
                let s = self.ledger.read().attempt(AttemptId(waited))?.state;
                waited_try_settled = !s.in_doubt() && s != AttemptState::EffectUnknown;
            }
        }
        Ok(scheduler::afresh(state, busy, waited_try_settled))
    }

    /// Tasks whose latest attempt a person settled as `not_run`: sent
    /// again only when a person asks (`engine retry`), never by a plain run.
    fn waits_for_retry(&self) -> Result<HashSet<String>> {
        let settled =
            self.ledger.read().latest_attempts_in_state(&self.goal_id, self.revision, AttemptState::SettledNotRun)?;
        Ok(settled
            .into_iter()
            .filter(|a| self.state(&a.task_ref) != TaskState::AwaitingApproval)
            .filter(|a| {
                let op = self.plan.digests.tasks.get(&a.task_ref).map(|d| &d.operation_id);
                !op.is_some_and(|op| self.asked.retry.contains(op))
            })
            .map(|a| a.task_ref)
            .collect())
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
                self.record_dispatched(attempt_id, detail)?;
            }
            Msg::Progress { attempt_id, progress: Progress::Handle { handle, detail } } => {
                // Committed before anything else of the call: what an engine
                // asks about after a crash, and what a person's stop cancels.
                self.record_handle(attempt_id, &handle, &detail)?;
            }
            Msg::Finished { attempt_id, outcome, level } => {
                failpoint::hit("after_receipt");
                let flight = self.flight(attempt_id)?;
                let cancel_asked = flight.cancel_asked.then_some(StopEnd::CancelAsked);
                let task = self.task(&flight.task_ref)?.clone();
                if let Some(end) = level.end().or(cancel_asked) {
                    // Its process group was ended, or its provider asked to
                    // cancel it, by a person's stop: not an answer of the
                    // provider's own.
                    return self.call_stopped(attempt_id, &task, Some(*outcome), end).await;
                }
                match self.outcome(attempt_id, &task, *outcome).await? {
                    record::Next::Validate if self.stop.active() => {
                        self.validations_stopped(attempt_id, &task, Vec::new(), StopEnd::NotStarted)?;
                    }
                    record::Next::Validate => self.start_validations(attempt_id, &task).await?,
                    record::Next::Done => {
                        self.in_flight.remove(&attempt_id);
                    }
                }
            }
            Msg::Validated { attempt_id, runs, constraint_runs } => {
                let task = self.task(&self.flight(attempt_id)?.task_ref)?.clone();
                if runs.iter().chain(&constraint_runs).any(|r| r.stopped.is_some()) {
                    let runs = runs.into_iter().chain(constraint_runs).collect();
                    return self.validations_stopped(attempt_id, &task, runs, StopEnd::NotStarted);
                }
                let protected = self.judge_protected(attempt_id, &task).await?;
                let flight = self
                    .in_flight
                    .remove(&attempt_id)
                    .ok_or_else(|| Error::internal(format!("attempt {attempt_id} was validated twice")))?;
                let after = self.observe_checkpoint(&task).await.map(|cp| cp.with_context(self.tool_context(&task)));
                let judged = record::Judged { runs, constraint_runs, protected };
                // Outputs are read only from an attempt that passed: a
                // failed one keeps none.
                let kept = match judged.passed() {
                    true => self.collect_outputs(&task).await,
                    false => None,
                };
                self.record_validations(attempt_id, &task, flight.before, after, (judged, kept))?;
            }
        }
        Ok(())
    }

    /// The provider accepted the request and named it: committed durably,
    /// on its own, the moment it arrives — an engine restarted after a
    /// crash asks the provider about it by this name.
    fn record_handle(&mut self, attempt_id: AttemptId, handle: &providers::Handle, detail: &str) -> Result<()> {
        let flight = self.flight(attempt_id)?;
        let (task_ref, intent) = (flight.task_ref.clone(), flight.intent);
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let data = json!({"handle": handle, "detail": detail});
        self.ledger.write(Durability::Full, |tx| {
            tx.record_handle(intent, handle)?;
            let e = Event::goal(EventKind::HandleRecorded, &goal_id, revision, data.clone());
            tx.append_event(&e.task(&task_ref).attempt(attempt_id)).map(|_| ())
        })?;
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.handle = Some(handle.clone());
        }
        failpoint::hit("after_handle");
        Ok(())
    }

    fn flight(&self, attempt_id: AttemptId) -> Result<&InFlight> {
        self.in_flight.get(&attempt_id).ok_or_else(|| Error::internal(format!("attempt {attempt_id} is not in flight")))
    }

    /// Observe the checkpoint the validations will judge, then run them,
    /// then the goal's constraint checks (on the same path).
    async fn start_validations(&mut self, attempt_id: AttemptId, task: &Task) -> Result<()> {
        let before = self.observe_checkpoint(task).await.ok().map(|cp| cp.with_context(self.tool_context(task)));
        self.progress.update(&Update::Validating { task_ref: &task.task_ref });
        let specs = task.validations.iter().map(checks::CheckSpec::of_validation).collect();
        let constraint_specs = self.guard.checks.clone();
        let tx = self.tx.clone();
        // The task's validations in its provider's sandbox; the goal's
        // constraint checks in the one acceptance checks run in.
        let place = |sandbox| checks::Place {
            workspace: self.plan.workspace.clone(),
            operation_id: self.operation_of(&task.task_ref).to_string(),
            secrets: self.secrets.clone(),
            groups: self.stop.groups.clone(),
            sandbox,
        };
        let (at, at_goal) = (place(self.sandboxes.validation(task)), place(self.sandboxes.checks()));
        let work = tokio::spawn(async move {
            let runs = checks::run_checks(specs, &at, OUTPUT_BYTES_MAX).await;
            let constraint_runs = checks::run_checks(constraint_specs, &at_goal, OUTPUT_BYTES_MAX).await;
            let _ = tx.send(Msg::Validated { attempt_id, runs, constraint_runs }).await;
        });
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.before = before;
            f.validating = true;
            f.work = Some(work.abort_handle());
        }
        Ok(())
    }

    /// A task's checkpoint now. Hashing many or large inputs and running
    /// context commands can take a while: that runs off the coordinator's
    /// thread, so the calls in flight keep reading their providers' output
    /// meanwhile. A checkpoint of a few small files is observed in place
    /// (`checkpoint::observes_quickly`: bounded, and cheaper than the hop).
    async fn observe_checkpoint(&mut self, task: &Task) -> std::result::Result<Checkpoint, String> {
        let sandbox = self.sandboxes.checks();
        if checkpoint::observes_quickly(&self.plan.workspace, task) {
            return checkpoint::observe(&self.plan.workspace, task, &self.plan.file.secrets, &sandbox, &mut self.cache);
        }
        let (workspace, secrets) = (self.plan.workspace.clone(), self.plan.file.secrets.clone());
        let (task, mut cache) = (task.clone(), std::mem::take(&mut self.cache));
        let observed = tokio::task::spawn_blocking(move || {
            let cp = checkpoint::observe(&workspace, &task, &secrets, &sandbox, &mut cache);
            (cp, cache)
        })
        .await;
        match observed {
            Ok((cp, cache)) => {
                self.cache = cache;
                cp
            }
            // The cache went with the failed thread: the next observation
            // hashes again, which is only slower.
            Err(e) => Err(format!("observing the inputs failed: {e}")),
        }
    }

    /// The task's operation id in this revision's plan.
    fn operation_of(&self, task_ref: &str) -> &str {
        self.plan.digests.tasks.get(task_ref).map_or("", |d| d.operation_id.as_str())
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
        let specs: Vec<checks::CheckSpec> =
            self.plan.goal().acceptance.iter().filter_map(checks::CheckSpec::of_acceptance).collect();
        if self.stopping().await? {
            self.acceptance_stopped = specs.into_iter().map(|c| c.id).collect();
            return Ok(None);
        }
        // The checks may read what the tasks made, on whichever worker
        // judges the goal.
        self.materialize_for_acceptance()?;
        self.progress.update(&Update::Accepting { checks: specs.len() });
        let place = |operation_id: String| checks::Place {
            workspace: self.plan.workspace.clone(),
            operation_id,
            secrets: self.secrets.clone(),
            groups: self.stop.groups.clone(),
            sandbox: self.sandboxes.checks(),
        };
        let (at_constraints, at) =
            (place(format!("constraints:{}", self.goal_id)), place(format!("acceptance:{}", self.goal_id)));
        let constraint_specs = self.guard.checks.clone();
        let ids: Vec<String> = specs.iter().map(|c| c.id.clone()).collect();
        let mut work = tokio::spawn(async move {
            let constraint_runs = checks::run_checks(constraint_specs, &at_constraints, OUTPUT_BYTES_MAX).await;
            (constraint_runs, checks::run_checks(specs, &at, OUTPUT_BYTES_MAX).await)
        });
        let runs = loop {
            let wake = tokio::select! {
                runs = &mut work => Ok(runs),
                event = self.stop.next() => Err(event),
            };
            match wake {
                Ok(runs) => break runs.ok(),
                Err(StopEvent::GiveUp) => {
                    work.abort();
                    self.on_stop(StopEvent::GiveUp).await?;
                    break None;
                }
                Err(event) => self.on_stop(event).await?,
            }
        };
        let Some((constraint_runs, runs)) = runs.filter(|(c, _)| c.iter().all(|r| r.stopped.is_none())) else {
            // A stop ended a constraint check: nothing of the goal's end is judged.
            self.acceptance_stopped = ids;
            return Ok(None);
        };
        if !constraint_runs.is_empty() {
            self.record_goal_constraints(constraint_runs)?;
        }
        let (done, stopped): (Vec<CheckRun>, Vec<CheckRun>) = runs.into_iter().partition(|r| r.stopped.is_none());
        let lines = self.record_acceptance(done)?;
        if stopped.is_empty() {
            return Ok(Some(lines));
        }
        self.acceptance_stopped = stopped.into_iter().map(|r| r.id).collect();
        Ok(None)
    }

    /// The call as the provider receives it. An agent gets, on stdin, the
    /// goal, the task, its identity, and on a repair the classified failure
    /// evidence and the person's instruction.
    fn call_for(&self, task: &Task, operation_id: &OperationId, try_no: u32, repair: Option<&Repair>) -> Call {
        let stdin = match self.plan.provider_of(task) {
            ProviderSpec::Command { protocol: Some(_), .. } => {
                let doc = provider::agent_request(self.plan.goal(), task, operation_id, try_no, repair);
                serde_json::to_vec(&doc).ok()
            }
            _ => None,
        };
        Call {
            operation_id: operation_id.to_string(),
            try_no,
            request: task.action.clone(),
            workspace: self.plan.workspace.clone(),
            timeout: task.timeout_seconds.map(Duration::from_secs),
            output_bytes_max: OUTPUT_BYTES_MAX,
            stdin,
            env: Vec::new(),
            secrets: self.secrets.clone(),
            sandbox: self.sandboxes.task(task),
        }
    }
}

/// A task's state and the event that says so, inside the caller's
/// transaction.
fn set_task_in(tx: &mut dyn LedgerTx, key: TaskKey, state: TaskState, detail: Value) -> Result<()> {
    tx.set_task_state(key, state, &detail)?;
    let e = Event::goal(EventKind::TaskState, key.goal_id, key.revision, json!({"state": state, "detail": detail}));
    tx.append_event(&e.task(key.task_ref)).map(|_| ())
}
