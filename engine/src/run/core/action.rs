//! What the core asks of its driver: the requests. Each is data and
//! carries the one reply its answer goes back through (`io::Reply<T>`):
//! the answer's type is the variant's, so a driver that answers a request
//! with anything else does not compile, and nothing on either side turns
//! an unexpected answer into a plausible one. The driver performs each
//! request (on the ledger, the workspace or the world) and answers it; read
//! in order, they are the run's whole conversation with everything outside
//! it. The answers' own types are in `event.rs`.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use providers::process::ProcessId;
use providers::{CommandReceipt, Handle, Receipt};
use serde_json::Value;

use super::event::{Applied, Level, Msg, Opened, Spent, Verdict, Wake};
use super::io::Reply;
use crate::checkpoint::Checkpoint;
use crate::decide::budget::Exhausted;
use crate::decide::raise::Raise;
use crate::decide::tools::Inventory;
use crate::error::Result;
use crate::evidence::{Evidence, StopEnd, UnknownReason};
use crate::ids::{AttemptId, OperationId, RequestDigest, Seq};
use crate::plan::{Budgets, Effect};
use crate::run::asked::Repair;
use crate::run::check::{CheckRun, CheckSpec};
use crate::run::constraints::Tally;
use crate::run::looked::Looked;
use crate::run::outputs::Kept;
use crate::run::report::{AcceptanceLine, Awaiting, RunReport, UnknownOp};
use crate::state::StopSignal;
use crate::state::{AttemptKind, TaskState};
use crate::store::attempts::{AttemptRecord, Intent};
use crate::store::events::EventKind;
use crate::store::{Claimed, Durability};

/// A task's checkpoint, or why none could be taken.
pub type Observed = std::result::Result<Checkpoint, String>;
/// The early cutoff's answer: `Ok`, the completion stands (what the
/// `completion_kept` event says); `Err`, why it runs again (what the
/// `completion_stale` event says).
pub type CutoffAnswer = std::result::Result<Value, Value>;
/// An earlier revision's attempt, looked at: its task's effect and
/// idempotence then, and what was found.
pub type SupersededLook = (Effect, bool, Box<Looked>);
/// The tools each MCP provider listed, or why it could not.
pub type Listed = BTreeMap<String, std::result::Result<Inventory, String>>;

/// One thing the core asks of its driver, with the reply its answer goes in.
#[derive(Debug)]
pub enum Action {
    // The ledger.
    /// The run's first look: each task's state (every task of the plan has
    /// its row), the inputs the load left to the run checked, the caches
    /// read.
    Open(Reply<Result<Opened>>),
    /// One transaction whose answer is only that it committed.
    Write(Write, Reply<Result<()>>),
    /// One transaction with more to say than that it committed.
    Record(Record),
    /// A dispatch record that may wait for the open group's commit.
    WriteLater(Dispatch, Reply<Result<()>>),
    /// Gather the writes from here on into one commit.
    BeginGroup(Reply<()>),
    /// Commit the open group.
    CommitGroup(Reply<Result<()>>),
    /// Facts for a decision (each read carries its own reply).
    Read(Read),
    /// Claim a task (a shared store; always granted on SQLite).
    Claim(String, Reply<Result<Claimed>>),
    /// Give a task's claim back.
    Release(String, Reply<Result<()>>),
    // The workspace.
    /// Upstream tasks' outputs into the workspace, before `task_ref` runs
    /// (`None`: before the goal's acceptance checks).
    Materialize(Option<String>, Reply<Result<()>>),
    /// A task's checkpoint now, with the context its tools add; with
    /// `identity`, also what the ledger and the machine add (its
    /// dependencies' recorded outputs: `run::identity`).
    Observe { task_ref: String, context: BTreeMap<String, String>, identity: bool, reply: Reply<Observed> },
    /// May a completion this run's reuse pass put off (an upstream ran
    /// again) stand now that its upstream is complete (early cutoff)?
    /// `context`: its tools' entries.
    Cutoff { task_ref: String, context: BTreeMap<String, String>, reply: Reply<Result<CutoffAnswer>> },
    /// The protected paths a new attempt of the task is judged against,
    /// with the attempts of this run in flight now whose calls may write
    /// (`None`: checks run, and no look stands or is kept): the driver may
    /// answer with its last look when every process that may have written
    /// since it is one of theirs (`decide::looks::stands`; one look a task).
    Baseline(String, Option<Vec<AttemptId>>, Reply<Result<Option<Checkpoint>>>),
    /// The protected paths after an attempt, against its baseline, and its
    /// undeclared writes unless judged already (`writes: false`: at its
    /// receipt, so the workspace is not looked at whole again).
    JudgeProtected {
        attempt_id: AttemptId,
        task_ref: String,
        before: Option<Checkpoint>,
        writes: bool,
        /// The other attempts of this run in flight whose calls may
        /// write: the look after it may stand as a later baseline while
        /// they all still are (`None`: checks run, and it may not).
        others: Option<Vec<AttemptId>>,
        reply: Reply<Result<Vec<Evidence>>>,
    },
    /// A passed attempt's declared outputs (`None`: none kept).
    CollectOutputs(String, Reply<Option<Kept>>),
    /// The reuse pass: which complete tasks went stale (`across_tool_change`:
    /// a person's `--reuse-across-tool-change` keeps those stale by their
    /// tool alone; `alone`: tasks a person reruns without their
    /// dependants, whose completions stand on theirs).
    Refresh {
        states: Vec<(String, TaskState)>,
        tools: BTreeMap<String, Inventory>,
        across_tool_change: bool,
        alone: BTreeSet<String>,
        reply: Reply<Result<Vec<(String, Value)>>>,
    },
    /// What the first look read may be stale now: drop it.
    Forget(Reply<()>),
    /// The world: providers, processes, signals, the person watching.
    World(WorldAction),
    // The end.
    /// The verdict over what the ledger holds, recorded; the report.
    Finish(Box<Closing>, Reply<Result<RunReport>>),
    /// Another worker judged the goal: its verdict, nothing written.
    ReportJudged(Box<Closing>, Reply<Result<RunReport>>),
}

impl Action {
    /// Does this request leave the workspace as it is and start nothing
    /// that could change it, so that the driver's last look still stands
    /// after it (`Workspace::disturbed`)? Listed: what cannot; everything
    /// else may (default deny). `starts_nothing`: does observing a task
    /// run no context command (a process)? Materializing upstream outputs
    /// says so itself, when it writes a file.
    pub fn leaves_workspace(&self, starts_nothing: impl Fn(&str) -> bool) -> bool {
        match self {
            Action::Open(_)
            | Action::Write(..)
            | Action::Record(_)
            | Action::WriteLater(..)
            | Action::BeginGroup(_)
            | Action::CommitGroup(_)
            | Action::Read(_)
            | Action::Claim(..)
            | Action::Release(..)
            | Action::Materialize(..)
            | Action::Baseline(..)
            | Action::JudgeProtected { .. }
            | Action::CollectOutputs(..)
            | Action::Forget(_)
            | Action::ReportJudged(..) => true,
            Action::Observe { task_ref, .. } => starts_nothing(task_ref),
            // Validations of none to run start nothing (a task judged after
            // its receipt for its declared outputs alone).
            Action::World(WorldAction::Validate(v, _)) => v.checks.is_empty() && v.constraint_checks.is_empty(),
            Action::World(w) => matches!(
                w,
                WorldAction::Wait(..)
                    | WorldAction::TryMessage(_)
                    | WorldAction::SignalPending(_)
                    | WorldAction::Say(..)
                    | WorldAction::Ended { .. }
                    | WorldAction::Crashpoint(..)
            ),
            Action::Cutoff { .. } | Action::Refresh { .. } | Action::Finish(..) => false,
        }
    }
}

/// The transactions of the run whose answers say more than that they
/// committed, each with its own answer's reply.
#[derive(Debug)]
pub enum Record {
    /// `run_started`: its event's sequence number.
    RunStarted { jobs: usize, reply: Reply<Result<Seq>> },
    /// The call-site gate: facts, decision and its records.
    Gate(Box<GateCall>, Reply<Result<Applied>>),
    /// A provider's answer: the receipt's verdict, and what the provider
    /// reported spending.
    Receipt(Box<Receiving>, Reply<Result<(Verdict, Option<Spent>)>>),
    /// Nobody can tell: `effect_unknown`; the attempt as it was.
    Unknown {
        attempt_id: AttemptId,
        looked: Option<Box<Looked>>,
        evidence: Vec<Evidence>,
        reason: UnknownReason,
        reply: Reply<Result<Box<AttemptRecord>>>,
    },
    /// An attempt's validations, judged: the evidence of the goal's
    /// constraints the judgement recorded.
    Validations(Box<Validations>, Reply<Result<Vec<Evidence>>>),
    /// The goal's acceptance checks: the report's lines.
    Acceptance(Vec<CheckRun>, Reply<Result<Vec<AcceptanceLine>>>),
    /// A person's retry completed from the read-back before it, never
    /// sent, within the budgets: its intent, or the budget it would cross
    /// (nothing recorded).
    CompletedFromReadBack(Box<FromReadBack>, Reply<Result<std::result::Result<Intent, Exhausted>>>),
}

/// What the core asks of the world, each with its answer's reply.
#[derive(Debug)]
pub enum WorldAction {
    /// List the tools of these MCP providers.
    ListTools(BTreeSet<String>, Reply<Listed>),
    /// Hand a call whose intent is committed to its provider.
    Send(Sending, Reply<()>),
    /// Look at an attempt without sending it again.
    Look { attempt: Box<AttemptRecord>, ask_handle: bool, deadline: Deadline, reply: Reply<Looked> },
    /// Look at an earlier revision's attempt with that revision's
    /// provider and rule.
    LookSuperseded { attempt: Box<AttemptRecord>, deadline: Deadline, reply: Reply<Result<SupersededLook>> },
    /// Ask a provider to cancel a request it accepted.
    Cancel(Box<AttemptRecord>, Reply<()>),
    /// Stop waiting for an attempt's call or validations.
    Abort(AttemptId, Reply<()>),
    /// Run an attempt's validations, then the goal's constraint checks.
    Validate(Validating, Reply<()>),
    /// Run the goal's constraint checks, then its acceptance checks.
    Accept { constraint_checks: Vec<CheckSpec>, checks: Vec<CheckSpec>, reply: Reply<()> },
    /// Stop waiting for the acceptance checks.
    AbortAccept(Reply<()>),
    /// Wait for what comes next.
    Wait(Wait, Reply<Wake>),
    /// A message already waiting, if any.
    TryMessage(Reply<Option<Msg>>),
    /// Has a stop signal come that the run has not acted on?
    SignalPending(Reply<Option<StopSignal>>),
    /// Send `level`'s signal to every process group in flight; arm the
    /// stop's timer. How many groups it reached.
    SignalGroups { level: Level, timer: Option<Duration>, reply: Reply<usize> },
    /// Tell the person watching.
    Say(Say, Reply<()>),
    /// A task this run started came to rest.
    Ended { task_ref: String, state: TaskState, reply: Reply<Result<()>> },
    /// A named crash point (testing aid).
    Crashpoint(&'static str, Reply<()>),
}

/// One transaction of the run whose answer is only that it committed
/// (those with more to say are `Action`s of their own).
#[derive(Debug)]
pub enum Write {
    /// An event on its own.
    Event { durability: Durability, kind: EventKind, task_ref: Option<String>, attempt: Option<AttemptId>, data: Value },
    /// A task's state and the event that says so.
    TaskState { task_ref: String, state: TaskState, detail: Value },
    /// The provider named the request: committed durably, on its own.
    Handle { attempt_id: AttemptId, intent: Intent, task_ref: String, handle: Handle, detail: String },
    /// The provider has the call.
    Dispatched(Dispatch),
    /// Failed, classified from all of the attempt's evidence.
    Failed {
        attempt_id: AttemptId,
        task_ref: String,
        looked: Option<Box<Looked>>,
        evidence: Vec<Evidence>,
        durability: Durability,
        never_dispatched: bool,
    },
    /// The goal's constraint checks before its acceptance checks.
    GoalConstraints(Vec<CheckRun>),
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
    /// A person's retry whose read-back could not tell: nothing sent, the
    /// task unknown.
    RetryStaysUnknown { task_ref: String, operation_id: OperationId, looked: Box<Looked> },
    /// A claim taken over from a worker whose claim expired.
    ClaimTakenOver { task_ref: Option<String>, previous_worker: String, previous_generation: i64, generation: i64 },
}

/// Facts the core needs for a decision, each with its reply.
#[derive(Debug)]
pub enum Read {
    /// The budget raises a person recorded.
    Raises(Reply<Result<Vec<Raise>>>),
    /// Every attempt left between intent and receipt, and the tasks other
    /// live workers hold.
    InDoubt(Reply<Result<InDoubt>>),
    /// Receipts not judged yet (and settled-`ok` attempts of `waiting`
    /// tasks, checked on the act chain).
    Unjudged { waiting: HashSet<String>, reply: Reply<Result<Vec<AttemptRecord>>> },
    /// One attempt.
    Attempt(AttemptId, Reply<Result<AttemptRecord>>),
    /// A task's attempts, oldest first.
    AttemptsOf(String, Reply<Result<Vec<AttemptRecord>>>),
    /// Is the earlier try a task waits on settled since?
    WaitedTrySettled(String, Reply<Result<bool>>),
    /// The latest attempts a person settled as not run.
    SettledNotRun(Reply<Result<Vec<AttemptRecord>>>),
    /// Every task's state now.
    Tasks(Reply<Result<Vec<(String, TaskState)>>>),
    /// The tasks other live workers hold.
    HeldElsewhere(Reply<Result<HashSet<String>>>),
    /// One task's state now.
    TaskNow(String, Reply<Result<Option<TaskState>>>),
    /// Did another worker finish the run since `started`?
    FinishedSince(Seq, Reply<Result<bool>>),
}

/// The attempts left in doubt, and the tasks other live workers hold
/// (skipped: theirs to reconcile).
#[derive(Debug)]
pub struct InDoubt {
    pub skip: HashSet<String>,
    pub attempts: Vec<AttemptRecord>,
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
    /// The person's answer the call carries, if it expires.
    pub answer_expires: Option<crate::run::AnswerExpiry>,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{Action, Reply, WorldAction};
    use crate::ids::AttemptId;

    fn observe(task_ref: &str) -> Action {
        let context = BTreeMap::new();
        Action::Observe { task_ref: task_ref.into(), context, identity: false, reply: Reply::detached() }
    }

    #[test]
    fn only_what_starts_nothing_leaves_the_workspace_as_it_is() {
        let quiet = |r: &str| r == "A";
        assert!(Action::Forget(Reply::detached()).leaves_workspace(quiet));
        assert!(Action::CommitGroup(Reply::detached()).leaves_workspace(quiet));
        assert!(Action::World(WorldAction::TryMessage(Reply::detached())).leaves_workspace(quiet));
        // A context command is a process.
        assert!(observe("A").leaves_workspace(quiet));
        assert!(!observe("B").leaves_workspace(quiet));
        // Default deny: a request not listed may change the workspace.
        assert!(!Action::World(WorldAction::Abort(AttemptId(1), Reply::detached())).leaves_workspace(quiet));
        assert!(!Action::World(WorldAction::AbortAccept(Reply::detached())).leaves_workspace(quiet));
        let cutoff = Action::Cutoff { task_ref: "A".into(), context: BTreeMap::new(), reply: Reply::detached() };
        assert!(!cutoff.leaves_workspace(quiet));
        // Validations: of none to run, nothing starts; of any, a process.
        let validate = |checks: Vec<crate::run::check::CheckSpec>, constraint_checks| {
            let v = super::Validating { attempt_id: AttemptId(1), task_ref: "A".into(), checks, constraint_checks };
            Action::World(WorldAction::Validate(v, Reply::detached()))
        };
        let check = crate::run::check::CheckSpec {
            id: "V1".into(),
            run: vec!["true".into()],
            expect_exit: 0,
            timeout: None,
            of_constraint: false,
        };
        assert!(validate(vec![], vec![]).leaves_workspace(quiet));
        assert!(!validate(vec![check.clone()], vec![]).leaves_workspace(quiet));
        assert!(!validate(vec![], vec![check]).leaves_workspace(quiet));
    }
}
