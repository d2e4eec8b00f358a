//! The core's state: what the run knows between two events — each task's
//! state, the attempts in flight, what waits for the open group's commit,
//! what the run will end on, and where a person's stop stands — and the
//! few steps every other part of the core takes (a task's state, an event,
//! a claim, a look).

use std::collections::{BTreeMap, HashMap, HashSet};

use providers::process::ProcessId;
use providers::Handle;
use serde_json::{json, Value};

use super::action::{Deadline, Sending, StopWait, Write};
use super::io::Io;
use crate::checkpoint::Checkpoint;
use crate::decide::budget::Exhausted;
use crate::decide::scheduler;
use crate::decide::tools::{self, Inventory};
use crate::error::{Error, Result};
use crate::ids::{AttemptId, Revision, Seq};
use crate::plan::{Budgets, Plan, Task};
use crate::run::asked::Asked;
use crate::run::constraints::{Guard, Tally};
use crate::run::looked::Looked;
use crate::run::report::{Awaiting, UnknownOp};
use crate::state::{AttemptState, StopSignal, TaskState};
use crate::store::attempts::{AttemptRecord, Intent};
use crate::store::events::EventKind;
use crate::store::{Claimed, Durability, GOAL_CLAIM};

/// An attempt this run works on: its call out, or its validations.
pub(super) struct Flight {
    /// The committed intent this work belongs to.
    pub intent: Intent,
    pub task_ref: String,
    /// The checkpoint observed when its validations started.
    pub before: Option<Checkpoint>,
    /// The provider process, once started: recorded with the dispatch, so
    /// an engine taking over after a crash can end its process group.
    pub process: Option<ProcessId>,
    /// The provider's name for the request once it accepted it (an MCP
    /// task id): what a person's interrupt asks it to cancel.
    pub handle: Option<Handle>,
    /// The protected paths it is judged against (also in the ledger, by
    /// its intent's `protected_at_intent`).
    pub protected: Option<Checkpoint>,
    /// Its undeclared writes as judged at its receipt, before its
    /// validations ran (`None`: not judged then): what its validations
    /// and checks write is not the task's change.
    pub writes: Option<Vec<crate::evidence::Evidence>>,
    /// A person's stop asked the provider to cancel the request: whatever
    /// answer comes after is the stop's doing, not the provider's own.
    pub cancel_asked: bool,
    /// The call runs in no process group of its own (HTTP, MCP): a stop
    /// past its grace stops waiting for it.
    pub processless: bool,
    /// The provider answered; its validations run.
    pub validating: bool,
    /// The provider's progress notes seen so far (`messages::note`).
    pub notes_seen: u64,
    /// Who did the work, as its answer said (`decide::reuse::tool::reported`):
    /// carried by the checkpoints observed after it.
    pub reported: Option<(String, String)>,
}

impl Flight {
    pub fn new(intent: Intent, task_ref: &str) -> Flight {
        Flight {
            intent,
            task_ref: task_ref.to_string(),
            before: None,
            process: None,
            handle: None,
            protected: None,
            writes: None,
            cancel_asked: false,
            processless: false,
            validating: false,
            reported: None,
            notes_seen: 0,
        }
    }
}

/// What waits for the open group's commit (`group.rs`).
#[derive(Default)]
pub(super) struct Waiting {
    /// A group is open: the ledger gathers the writes.
    pub open: bool,
    /// Calls whose intents are in the group.
    pub calls: Vec<Sending>,
    /// Crash points named for a commit that is in the group.
    pub points: Vec<&'static str>,
    /// Tasks that ended, for their progress line.
    pub ended: Vec<String>,
}

/// What the run ends waiting on, besides failed tasks.
#[derive(Default)]
pub(super) struct Stops {
    pub unknown: Vec<UnknownOp>,
    pub same_request: Vec<crate::run::report::SameRequestWait>,
    pub awaiting: Vec<Awaiting>,
    pub budget: Option<Exhausted>,
    /// A server refused a call for want of scope: the run stops with this
    /// `AUTHORIZATION_REQUIRED` once what is in flight is drained.
    pub login: Option<crate::error::Error>,
}

/// Where a person's stop stands. The first signal stops new dispatches
/// and sends SIGTERM to every process group in flight; after the grace (or
/// at a second signal) what is left gets SIGKILL, and calls without a
/// process of their own are no longer waited for; after the drain, what
/// has not reported is recorded as stopped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Phase {
    #[default]
    Running,
    /// SIGTERM sent; SIGKILL at the timer, or at the next signal.
    Grace,
    /// SIGKILL sent; what has not reported by the timer is given up.
    Draining,
    Over,
}

/// What the core must do next about a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopEvent {
    /// The first signal: stop dispatching, SIGTERM every group.
    Begin(StopSignal),
    /// SIGKILL every group; stop waiting for calls without a process.
    /// `by_signal`: a second signal cut the grace short.
    Kill { by_signal: bool },
    /// Record whatever has not reported as stopped without an answer.
    GiveUp,
}

#[derive(Default)]
pub(super) struct Stop {
    /// The signal that stopped this run, once it is acted on.
    pub signal: Option<StopSignal>,
    pub phase: Phase,
    /// A second signal cut the grace short.
    pub grace_cut: bool,
}

impl Stop {
    pub fn active(&self) -> bool {
        self.signal.is_some()
    }

    /// What a wait listens for of the stop, by its phase.
    pub fn wait(&self) -> StopWait {
        match self.phase {
            Phase::Running => StopWait::Signal,
            Phase::Grace => StopWait::SignalOrTimer,
            Phase::Draining => StopWait::Timer,
            Phase::Over => StopWait::Nothing,
        }
    }

    /// What a signal or the timer means in this phase.
    pub fn event(&self, signal: Option<StopSignal>) -> Option<StopEvent> {
        match (self.phase, signal) {
            (Phase::Running, Some(s)) => Some(StopEvent::Begin(s)),
            (Phase::Grace, Some(_)) => Some(StopEvent::Kill { by_signal: true }),
            (Phase::Grace, None) => Some(StopEvent::Kill { by_signal: false }),
            (Phase::Draining, None) => Some(StopEvent::GiveUp),
            _ => None,
        }
    }
}

/// The run as the core keeps it.
pub(super) struct Run<'p> {
    pub io: Io,
    pub plan: &'p Plan,
    pub revision: Revision,
    pub jobs: usize,
    pub asked: Asked,
    /// A shared store: claims per task, other workers beside this one.
    pub shared: bool,
    /// Tasks this run took to the call site (never again in this run).
    pub tried: HashSet<String>,
    /// A claim met another worker's since the last look at the ledger.
    pub met_claim: bool,
    /// The ledger position of this run's `run_started` event.
    pub started_seq: Seq,
    pub states: HashMap<String, TaskState>,
    /// Each task's state when this run began, and the tasks it sent a
    /// call for: the summary tells what this run did from what it kept.
    pub states_at_start: HashMap<String, TaskState>,
    pub dispatched: HashSet<String>,
    /// Completions the reuse pass put off because an upstream runs again
    /// (early cutoff, `cutoff.rs`), with the state each stood in; and
    /// those kept once their upstream was complete again.
    pub deferred: BTreeMap<String, TaskState>,
    pub cut: HashSet<String>,
    /// What the report says of each completion the reuse pass judged
    /// (`Closing::rechecked`).
    pub rechecked: BTreeMap<String, String>,
    /// By attempt id, so that whatever walks them walks in one order.
    pub in_flight: BTreeMap<AttemptId, Flight>,
    pub held: Waiting,
    /// The tasks a person holds (`engine hold`): never started or retried.
    pub person_held: HashSet<String>,
    pub stops: Stops,
    /// The goal's checkable constraints, and what this run saw of them.
    pub guard: Guard,
    pub tally: Tally,
    /// Each MCP provider's tools as its server listed them before the first
    /// intent (a provider whose server could not be asked is absent).
    pub tools: BTreeMap<String, Inventory>,
    /// The budgets in force: the plan's, raised by a person's raises.
    pub budgets: Budgets,
    /// When this run of work began: `deadline_seconds` counts from here.
    pub began_ms: i64,
    pub stop: Stop,
    /// Acceptance checks a person's stop ended before they finished.
    pub acceptance_stopped: Vec<String>,
}

impl<'p> Run<'p> {
    pub fn new(
        io: Io,
        plan: &'p Plan,
        revision: Revision,
        jobs: usize,
        asked: Asked,
        shared: bool,
        guard: Guard,
    ) -> Run<'p> {
        Run {
            io,
            plan,
            revision,
            jobs,
            asked,
            shared,
            tried: HashSet::new(),
            met_claim: false,
            started_seq: Seq(0),
            states: HashMap::new(),
            states_at_start: HashMap::new(),
            dispatched: HashSet::new(),
            deferred: BTreeMap::new(),
            cut: HashSet::new(),
            rechecked: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            held: Waiting::default(),
            person_held: HashSet::new(),
            stops: Stops::default(),
            guard,
            tally: Tally::default(),
            tools: BTreeMap::new(),
            budgets: Budgets::default(),
            began_ms: 0,
            stop: Stop::default(),
            acceptance_stopped: Vec::new(),
        }
    }

    pub fn task(&self, task_ref: &str) -> Result<&'p Task> {
        self.plan.task(task_ref).ok_or_else(|| Error::internal(format!("task {task_ref} is not in the plan")))
    }

    pub fn state(&self, task_ref: &str) -> TaskState {
        self.states.get(task_ref).copied().unwrap_or(TaskState::Pending)
    }

    pub fn flight(&self, attempt_id: AttemptId) -> Result<&Flight> {
        self.in_flight.get(&attempt_id).ok_or_else(|| Error::internal(format!("attempt {attempt_id} is not in flight")))
    }

    /// The inventory entries `task`'s checkpoint carries (see
    /// `decide::tools::context_of`).
    pub fn tool_context(&self, task: &Task) -> BTreeMap<String, String> {
        tools::context_of(&self.plan.file, task, &self.tools)
    }

    /// What this run of work may still take.
    pub fn deadline(&self) -> Deadline {
        Deadline { began_ms: self.began_ms, seconds: self.budgets.deadline_seconds }
    }

    pub async fn write_event(
        &self,
        durability: Durability,
        kind: EventKind,
        task_ref: Option<&str>,
        attempt: Option<AttemptId>,
        data: Value,
    ) -> Result<()> {
        let task_ref = task_ref.map(str::to_string);
        self.io.write_done(Write::Event { durability, kind, task_ref, attempt, data }).await
    }

    pub async fn set_task(&mut self, task_ref: &str, state: TaskState, detail: Value) -> Result<()> {
        self.io.write_done(Write::TaskState { task_ref: task_ref.to_string(), state, detail }).await?;
        self.states.insert(task_ref.to_string(), state);
        Ok(())
    }

    /// A task's checkpoint now (no tool context: what the inputs are).
    pub async fn observe_inputs(&self, task: &Task) -> std::result::Result<Checkpoint, String> {
        self.io.observe(&task.task_ref, BTreeMap::new(), false).await
    }

    /// A task's checkpoint now, with the inventory entries its tools add
    /// and its dependencies' recorded outputs (`run::identity`), and who
    /// did its work as the call's answer said (`reported`).
    pub async fn observe_checkpoint(
        &self,
        task: &Task,
        reported: Option<&(String, String)>,
    ) -> std::result::Result<Checkpoint, String> {
        let mut context = self.tool_context(task);
        context.extend(reported.cloned());
        self.io.observe(&task.task_ref, context, true).await
    }

    /// Look at an attempt's operation with this revision's provider.
    pub async fn look(&self, attempt: &AttemptRecord, ask_handle: bool) -> Looked {
        let attempt = Box::new(attempt.clone());
        self.io.look(attempt, ask_handle, self.deadline()).await
    }

    /// Claim `task_ref` for this run; `false`: another live worker has it.
    /// A takeover is logged (who held it, at which generation).
    pub async fn claim_for(&mut self, task_ref: &str) -> Result<bool> {
        if !self.shared {
            return Ok(true);
        }
        match self.io.claim(task_ref).await? {
            Claimed::Elsewhere => {
                self.met_claim = true;
                Ok(false)
            }
            Claimed::Mine { generation, took_over } => {
                if let Some(t) = took_over {
                    let task_ref = (task_ref != GOAL_CLAIM).then(|| task_ref.to_string());
                    let (previous_worker, previous_generation) = (t.worker_id, t.generation);
                    let taken = Write::ClaimTakenOver { task_ref, previous_worker, previous_generation, generation };
                    self.io.write_done(taken).await?;
                }
                Ok(true)
            }
        }
    }

    /// Give the claim back once this run has nothing of the task in flight.
    pub async fn release_if_idle(&self, task_ref: &str) -> Result<()> {
        if self.shared && !self.in_flight.values().any(|f| f.task_ref == task_ref) {
            self.io.release(task_ref).await?;
        }
        Ok(())
    }

    /// A task's state as this run takes it up (`scheduler::afresh`), with
    /// whether the earlier try it waits on was settled since.
    pub async fn afresh(&self, task_ref: &str, state: TaskState, busy: bool) -> Result<TaskState> {
        let mut waited_try_settled = false;
        if state == TaskState::EffectUnknown {
            waited_try_settled = self.io.waited_try_settled(task_ref).await?;
        }
        Ok(scheduler::afresh(state, busy, waited_try_settled))
    }

    /// The runner's side of an unknown outcome, once it is committed.
    pub fn note_unknown(
        &mut self,
        attempt: &AttemptRecord,
        reason: crate::evidence::UnknownReason,
        last_state: AttemptState,
    ) {
        self.states.insert(attempt.task_ref.clone(), TaskState::EffectUnknown);
        self.stops.unknown.push(UnknownOp::of(attempt, last_state, Some(reason)));
    }
}

/// The detail a blocked task's state carries.
pub(super) fn waits_on(waits: Vec<String>) -> Value {
    json!({ "waits_on": waits })
}
