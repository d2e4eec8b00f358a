//! What the core asks of its driver: the actions. Each is data; the
//! driver performs it (on the ledger, the workspace or the world) and
//! answers with one event (`event.rs`). Read in order, they are the
//! run's whole conversation with everything outside it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use providers::process::ProcessId;
use providers::{CommandReceipt, Handle, Receipt};
use serde_json::Value;

use super::event::Level;
use crate::checkpoint::Checkpoint;
use crate::evidence::{Evidence, StopEnd, UnknownReason};
use crate::ids::{AttemptId, OperationId, RequestDigest, Seq};
use crate::plan::Budgets;
use crate::run::asked::Repair;
use crate::run::check::{CheckRun, CheckSpec};
use crate::run::constraints::Tally;
use crate::run::looked::Looked;
use crate::run::outputs::Kept;
use crate::run::report::{AcceptanceLine, Awaiting, UnknownOp};
use crate::state::StopSignal;
use crate::state::{AttemptKind, TaskState};
use crate::store::attempts::{AttemptRecord, Intent};
use crate::store::events::EventKind;
use crate::store::Durability;

/// One thing the core asks of its driver.
#[derive(Debug)]
pub enum Action {
    // The ledger.
    /// The run's first look: each task's state (every task of the plan has
    /// its row), the inputs the load left to the run checked, the caches
    /// read. → `Opened`
    Open,
    /// One transaction. → `Written`
    Write(Write),
    /// A dispatch record that may wait for the open group's commit. → `Done`
    WriteLater(Dispatch),
    /// Gather the writes from here on into one commit. → `Done`
    BeginGroup,
    /// Commit the open group. → `Written`
    CommitGroup,
    /// Facts for a decision. → `Read`
    Read(Read),
    /// Claim a task (a shared store; always granted on SQLite). → `Claimed`
    Claim(String),
    /// Give a task's claim back. → `Written`
    Release(String),
    // The workspace.
    /// Upstream tasks' outputs into the workspace, before `task_ref` runs
    /// (`None`: before the goal's acceptance checks). → `Written`
    Materialize(Option<String>),
    /// A task's checkpoint now, with the context its tools add; with
    /// `identity`, also what the ledger and the machine add (its
    /// dependencies' recorded outputs: `run::identity`). → `Observed`
    Observe { task_ref: String, context: BTreeMap<String, String>, identity: bool },
    /// May a completion this run's reuse pass put off (an upstream ran
    /// again) stand now that its upstream is complete (early cutoff)?
    /// `context`: its tools' entries. → `Cutoff`
    Cutoff { task_ref: String, context: BTreeMap<String, String> },
    /// The protected paths a new attempt of the task is judged against. → `Baseline`
    Baseline(String),
    /// The protected paths after an attempt, against its baseline, and its
    /// undeclared writes unless judged already (`writes: false`: at its
    /// receipt, so the workspace is not looked at whole again). → `Protected`
    JudgeProtected { attempt_id: AttemptId, task_ref: String, before: Option<Checkpoint>, writes: bool },
    /// A passed attempt's declared outputs. → `Outputs`
    CollectOutputs(String),
    /// The reuse pass: which complete tasks went stale (`across_tool_change`:
    /// a person's `--reuse-across-tool-change` keeps those stale by their
    /// tool alone; `alone`: tasks a person reruns without their
    /// dependants, whose completions stand on theirs). → `Stale`
    Refresh {
        states: Vec<(String, TaskState)>,
        tools: BTreeMap<String, crate::decide::tools::Inventory>,
        across_tool_change: bool,
        alone: BTreeSet<String>,
    },
    /// What the first look read may be stale now: drop it. → `Done`
    Forget,
    // The world.
    /// List the tools of these MCP providers. → `Tools`
    ListTools(BTreeSet<String>),
    /// Hand a call whose intent is committed to its provider. → `Done`
    Send(Sending),
    /// Look at an attempt without sending it again. → `Looked`
    Look { attempt: Box<AttemptRecord>, ask_handle: bool, deadline: Deadline },
    /// Look at an earlier revision's attempt with that revision's
    /// provider and rule. → `Superseded`
    LookSuperseded { attempt: Box<AttemptRecord>, deadline: Deadline },
    /// Ask a provider to cancel a request it accepted. → `Done`
    Cancel(Box<AttemptRecord>),
    /// Stop waiting for an attempt's call or validations. → `Done`
    Abort(AttemptId),
    /// Run an attempt's validations, then the goal's constraint checks. → `Done`
    Validate(Validating),
    /// Run the goal's constraint checks, then its acceptance checks. → `Done`
    Accept { constraint_checks: Vec<CheckSpec>, checks: Vec<CheckSpec> },
    /// Stop waiting for the acceptance checks. → `Done`
    AbortAccept,
    /// Wait for what comes next. → `Woke`
    Wait(Wait),
    /// A message already waiting, if any. → `Woke` (`Nothing` when none)
    TryMessage,
    /// Has a stop signal come that the run has not acted on? → `Signal`
    SignalPending,
    /// Send `level`'s signal to every process group in flight; arm the
    /// stop's timer. → `Reached`
    SignalGroups { level: Level, timer: Option<Duration> },
    /// Tell the person watching. → `Done`
    Say(Say),
    /// A task this run started came to rest. → `Written`
    Ended { task_ref: String, state: TaskState },
    /// A named crash point (testing aid). → `Done`
    Crashpoint(&'static str),
    // The end.
    /// The verdict over what the ledger holds, recorded; the report. → `Report`
    Finish(Box<Closing>),
    /// Another worker judged the goal: its verdict, nothing written. → `Report`
    ReportJudged(Box<Closing>),
}

/// One transaction of the run.
#[derive(Debug)]
pub enum Write {
    /// `run_started`. → `Written::Seq`
    RunStarted { jobs: usize },
    /// An event on its own.
    Event { durability: Durability, kind: EventKind, task_ref: Option<String>, attempt: Option<AttemptId>, data: Value },
    /// A task's state and the event that says so.
    TaskState { task_ref: String, state: TaskState, detail: Value },
    /// The call-site gate: facts, decision and its records. → `Written::Gated`
    Gate(Box<GateCall>),
    /// The provider named the request: committed durably, on its own.
    Handle { attempt_id: AttemptId, intent: Intent, task_ref: String, handle: Handle, detail: String },
    /// The provider has the call.
    Dispatched(Dispatch),
    /// A provider's answer. → `Written::Verdict`
    Receipt(Box<Receiving>),
    /// Nobody can tell: `effect_unknown`. → `Written::Attempt` (as it was)
    Unknown { attempt_id: AttemptId, looked: Option<Box<Looked>>, evidence: Vec<Evidence>, reason: UnknownReason },
    /// Failed, classified from all of the attempt's evidence.
    Failed {
        attempt_id: AttemptId,
        task_ref: String,
        looked: Option<Box<Looked>>,
        evidence: Vec<Evidence>,
        durability: Durability,
        never_dispatched: bool,
    },
    /// An attempt's validations, judged.
    Validations(Box<Validations>),
    /// The goal's constraint checks before its acceptance checks.
    GoalConstraints(Vec<CheckRun>),
    /// The goal's acceptance checks. → `Written::Lines`
    Acceptance(Vec<CheckRun>),
    /// The target shows the effect: that is the receipt.
    ObservedReceipt { attempt: Box<AttemptRecord>, reason: UnknownReason, detail: String, looked: Box<Looked> },
    /// An earlier revision's in-doubt attempt, resolved.
    Superseded { attempt: Box<AttemptRecord>, resolution: crate::decide::in_doubt::Resolution, looked: Box<Looked> },
    /// Given up for a new try (safe: effect `none` or idempotent).
    Abandon { attempt: Box<AttemptRecord>, looked: Box<Looked> },
    /// A call a person's stop ended.
    CallStopped(Box<CallStopped>),
    /// Validations a person's stop ended.
    ValidationsStopped {
        attempt: Box<AttemptRecord>,
        stopped: Vec<(String, StopEnd)>,
        signal: StopSignal,
        detail: Value,
    },
    /// A person's retry completed from the read-back before it, never
    /// sent, within the budgets. → `Written::Gated` (`Go`, or `Stopped` on a budget)
    CompletedFromReadBack(Box<FromReadBack>),
    /// A person's retry whose read-back could not tell: nothing sent, the
    /// task unknown.
    RetryStaysUnknown { task_ref: String, operation_id: OperationId, looked: Box<Looked> },
    /// A claim taken over from a worker whose claim expired.
    ClaimTakenOver { task_ref: Option<String>, previous_worker: String, previous_generation: i64, generation: i64 },
}

/// Facts the core needs for a decision.
#[derive(Debug)]
pub enum Read {
    /// The budget raises a person recorded. → `Facts::Raises`
    Raises,
    /// Every attempt left between intent and receipt, and the tasks other
    /// live workers hold. → `Facts::InDoubt`
    InDoubt,
    /// Receipts not judged yet (and settled-`ok` attempts of `waiting`
    /// tasks, checked on the act chain). → `Facts::Attempts`
    Unjudged { waiting: HashSet<String> },
    /// One attempt. → `Facts::Attempt`
    Attempt(AttemptId),
    /// A task's attempts, oldest first. → `Facts::Attempts`
    AttemptsOf(String),
    /// Is the earlier try a task waits on settled since? → `Facts::Flag`
    WaitedTrySettled(String),
    /// The latest attempts a person settled as not run. → `Facts::Attempts`
    SettledNotRun,
    /// Every task's state now. → `Facts::Tasks`
    Tasks,
    /// The tasks other live workers hold. → `Facts::Refs`
    HeldElsewhere,
    /// One task's state now. → `Facts::State`
    TaskNow(String),
    /// Did another worker finish the run since `started`? → `Facts::Flag`
    FinishedSince(Seq),
}

/// The call as the core means to send it, for the gate.
#[derive(Debug)]
pub struct GateCall {
    pub task_ref: String,
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    /// The request by its content (`plan::digests::request_fingerprint`),
    /// recorded in `request` too.
    pub fingerprint: Option<crate::ids::RequestFingerprint>,
    pub repair: Option<Repair>,
    /// A person asked for it (retry or repair): a repeat.
    pub asked_repeat: bool,
    pub kind: AttemptKind,
    pub request: Value,
    /// What the inputs looked like when the engine decided to send.
    pub inputs_at_intent: Option<Checkpoint>,
    /// The goal's protected paths the attempt will be judged against.
    pub protected: Option<Checkpoint>,
    pub budgets: Budgets,
    /// When this run of work began: the deadline counts from here.
    pub began_ms: i64,
}

/// A retry's try completed from the read-back before it: an intent (cost
/// 0: nothing paid was sent), the read-back as its receipt.
#[derive(Debug)]
pub struct FromReadBack {
    pub task_ref: String,
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    pub request: Value,
    pub try_no: i64,
    pub inputs_at_intent: Option<Checkpoint>,
    pub protected: Option<Checkpoint>,
    pub looked: Looked,
    /// The budgets in force, and when this run of work began: the try is
    /// an intent like any, within the budgets like any.
    pub budgets: Budgets,
    pub began_ms: i64,
}

/// A dispatch record.
#[derive(Debug)]
pub struct Dispatch {
    pub attempt_id: AttemptId,
    pub intent: Intent,
    pub task_ref: String,
    pub detail: String,
    pub process: Option<ProcessId>,
}

/// A provider's answer, to record.
#[derive(Debug)]
pub struct Receiving {
    pub attempt_id: AttemptId,
    pub intent: Intent,
    pub task_ref: String,
    pub receipt: Receipt,
    /// Fetched by the request's handle after the answer was lost.
    pub via: Option<Via>,
    /// The evidence of its protected paths.
    pub protected: Vec<Evidence>,
    /// Judged by its receipt alone: the checkpoint observed now.
    pub unchecked: Option<std::result::Result<Checkpoint, String>>,
    /// An agent's report on top of a command's answer.
    pub agent_json: bool,
    /// The deadline killed an external-effect command part-way.
    pub timed_out_unsafe: bool,
}

/// An answer that came by the request's handle, after it was lost.
#[derive(Debug)]
pub struct Via {
    pub looked: Looked,
    pub why: UnknownReason,
}

/// An attempt's validation results, to record.
#[derive(Debug)]
pub struct Validations {
    pub attempt_id: AttemptId,
    pub task_ref: String,
    pub before: Option<Checkpoint>,
    pub after: std::result::Result<Checkpoint, String>,
    pub judged: Judged,
    pub kept: Option<Kept>,
}

/// What judged an attempt after its receipt: its validations, the goal's
/// constraint checks, and the evidence of its protected paths (empty when
/// nothing protected changed).
#[derive(Debug)]
pub struct Judged {
    pub runs: Vec<CheckRun>,
    pub constraint_runs: Vec<CheckRun>,
    pub protected: Vec<Evidence>,
}

impl Judged {
    pub fn passed(&self) -> bool {
        self.runs.iter().chain(&self.constraint_runs).all(CheckRun::passed) && self.protected.is_empty()
    }
}

/// A call a person's stop ended, resolved.
#[derive(Debug)]
pub struct CallStopped {
    pub attempt: AttemptRecord,
    /// What its process printed, when it ended with a command's answer.
    pub receipt: Option<CommandReceipt>,
    pub evidence: Vec<Evidence>,
    pub looked: Looked,
    pub signal: StopSignal,
    pub end: StopEnd,
    pub now: StoppedAs,
}

/// How a stopped call ends.
#[derive(Debug)]
pub enum StoppedAs {
    /// `effect_unknown`, for a person.
    Unknown(UnknownReason),
    /// Cancelled (`kept`: the observed effect kept as its receipt).
    Cancelled { kept: bool, task_state: TaskState, detail: Value },
}

/// A call whose intent is committed, for its provider.
#[derive(Debug, Clone)]
pub struct Sending {
    pub attempt_id: AttemptId,
    pub task_ref: String,
    pub operation_id: OperationId,
    pub try_no: i64,
    pub repair: Option<Repair>,
    /// A person's answers to what the task's server asked, carried by the call.
    pub answers: Option<Box<serde_json::Value>>,
}

/// An attempt's validations and the goal's constraint checks, to run.
#[derive(Debug)]
pub struct Validating {
    pub attempt_id: AttemptId,
    pub task_ref: String,
    pub checks: Vec<CheckSpec>,
    pub constraint_checks: Vec<CheckSpec>,
}

/// What this run of work may still take: `deadline_seconds` counted from
/// when it began.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub began_ms: i64,
    pub seconds: u64,
}

/// What to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// A message of the calls and checks in flight.
    pub messages: bool,
    /// The acceptance checks' end.
    pub accepted: bool,
    /// A look at a shared ledger is due after `WORKER_POLL`.
    pub poll: bool,
    /// What a person's stop may bring now.
    pub stop: StopWait,
}

/// What of a person's stop a wait listens for, by the stop's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWait {
    /// A signal.
    Signal,
    /// Another signal, or the stop's timer.
    SignalOrTimer,
    /// The stop's timer.
    Timer,
    Nothing,
}

/// What the person watching is told.
#[derive(Debug, Clone)]
pub enum Say {
    Began {
        total: usize,
        complete: usize,
    },
    Validating(String),
    Accepting {
        checks: usize,
    },
    Stopping {
        signal: StopSignal,
        in_flight: usize,
        groups: usize,
        grace: Duration,
    },
    Killing {
        groups: usize,
        by_signal: bool,
    },
    /// A provider's word on its progress (bounded by the provider; escaped
    /// when shown).
    Note {
        task_ref: String,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
}

/// What the run ends on, for its verdict and report.
#[derive(Debug, Default)]
pub struct Closing {
    pub acceptance: Option<Vec<AcceptanceLine>>,
    pub unknown: Vec<UnknownOp>,
    pub same_request: Vec<crate::run::report::SameRequestWait>,
    pub awaiting: Vec<Awaiting>,
    pub budget: Option<crate::decide::budget::Exhausted>,
    /// The budgets in force (the plan's, raised by a person).
    pub budgets: Budgets,
    pub tally: Tally,
    pub signal: Option<StopSignal>,
    pub grace_cut: bool,
    pub acceptance_stopped: Vec<String>,
    /// Tasks this run sent a call for, and each task's state when it began.
    pub dispatched: HashSet<String>,
    pub states_at_start: std::collections::HashMap<String, TaskState>,
    /// The repairs a person asked of this run (their task refs, and
    /// whether each needs `--force`).
    pub repairs: Vec<(String, bool)>,
    /// What the reuse pass (or the early cutoff) said of a completion this
    /// run judged: `TOOL_CHANGED: …` for one run again, `kept: …` for one
    /// kept although something ran or changed.
    pub rechecked: std::collections::BTreeMap<String, String>,
}
