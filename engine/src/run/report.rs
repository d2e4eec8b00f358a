//! The report of a run, as the CLI renders it: the goal's state and exit
//! code, every task's line, what the run ends waiting on. Data only; the
//! driver reads the ledger and decides the verdict (`driver::finish`).

use serde::Serialize;

use crate::decide::budget::Exhausted;
use crate::error::Code;
use crate::evidence::UnknownReason;
use crate::ids::{GoalId, OperationId, RequestDigest, Revision};
use crate::state::{AttemptState, GoalState, StopSignal, TaskState};
use crate::store::attempts::AttemptRecord;

/// An operation whose outcome a person must settle.
#[derive(Debug, Clone, Serialize)]
pub struct UnknownOp {
    pub operation_id: OperationId,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    pub try_no: i64,
    pub state: AttemptState,
    /// The last state the engine knew before the outcome became unknown
    /// (`intent_recorded`: no dispatch recorded; `dispatched`: no receipt;
    /// `receipt_recorded`: a receipt not yet judged). A call the engine
    /// ended at its deadline is `dispatched`: the engine's record of that
    /// end is no receipt of the provider's.
    pub last_state: AttemptState,
    /// Why nobody can tell (`""` if the ledger does not say).
    #[serde(serialize_with = "reason_word")]
    pub reason: Option<UnknownReason>,
}

fn reason_word<S: serde::Serializer>(r: &Option<UnknownReason>, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(r.map_or("", UnknownReason::as_str))
}

impl UnknownOp {
    pub fn of(a: &AttemptRecord, last_state: AttemptState, reason: Option<UnknownReason>) -> UnknownOp {
        let last_state = match (reason, last_state) {
            (Some(UnknownReason::DeadlineAfterDispatch), AttemptState::ReceiptRecorded) => AttemptState::Dispatched,
            _ => last_state,
        };
        UnknownOp {
            operation_id: a.operation_id.clone(),
            task_ref: a.task_ref.clone(),
            request_digest: a.request_digest.clone(),
            try_no: a.try_no,
            state: AttemptState::EffectUnknown,
            last_state,
            reason,
        }
    }

    /// What the ledger knows of the call, in words that claim no more.
    pub fn known(&self) -> &'static str {
        match (self.reason, self.last_state) {
            (Some(UnknownReason::DeadlineAfterDispatch), _) => "timed out after dispatch, no receipt",
            (_, AttemptState::IntentRecorded) => {
                "not sent, as far as the ledger shows: the engine stopped before it recorded a dispatch"
            }
            (_, AttemptState::ReceiptRecorded) => "a receipt, not yet judged",
            _ => "dispatched, no receipt",
        }
    }

    pub fn reason_text(&self) -> &'static str {
        self.reason.map_or("", UnknownReason::as_str)
    }
}

/// An operation waiting on a person's approval.
#[derive(Debug, Clone, Serialize)]
pub struct Awaiting {
    pub operation_id: OperationId,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    /// An approval exists but was for another request or plan.
    pub stale: bool,
    /// What the waiting call costs (what a person approves).
    pub cost: crate::cost::Cost,
}

/// A call not sent: its request is the same, by content, as another
/// operation's whose outcome nobody knows (`SAME_REQUEST_UNSETTLED`).
#[derive(Debug, Clone, Serialize)]
pub struct SameRequestWait {
    pub task_ref: String,
    /// The operation this call would have been.
    pub operation_id: OperationId,
    /// The first operation with this request, unknown or in doubt.
    pub first: crate::decide::gate::SameRequest,
    /// The command that settles it (`null` while it is still in doubt).
    pub settle: Option<String>,
    pub why: String,
}

impl SameRequestWait {
    pub fn of(task_ref: &str, operation_id: &OperationId, first: crate::decide::gate::SameRequest) -> SameRequestWait {
        SameRequestWait {
            task_ref: task_ref.to_string(),
            operation_id: operation_id.clone(),
            settle: first.settle(),
            why: first.why(),
            first,
        }
    }
}

/// A task waiting on a person's answer to what its MCP server asked.
#[derive(Debug, Clone, Serialize)]
pub struct AwaitingInput {
    pub task_ref: String,
    /// The operation whose call the server answered with the question.
    pub operation_id: OperationId,
    /// The questions as the server put them (shown escaped): `mode`,
    /// `message`, and its `requestedSchema` or `url`.
    pub questions: Vec<serde_json::Value>,
    /// The command that answers: `engine answer REF --field NAME=VALUE`.
    pub answer_with: String,
    /// The call that will carry the answer repeats paid or external work:
    /// the run after the answer stops `APPROVAL_REQUIRED` first (`None`:
    /// read without the plan, not said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_first: Option<bool>,
}

impl AwaitingInput {
    /// The same, knowing the task (`approval_first`).
    pub fn of_task(task: &crate::plan::Task, detail: &serde_json::Value) -> Option<AwaitingInput> {
        let mut a = AwaitingInput::of(&task.task_ref, detail)?;
        a.approval_first = Some(crate::decide::answer::approval_first(task));
        Some(a)
    }

    /// From a task's detail (`run::driver::question`), if it holds a question.
    pub fn of(task_ref: &str, detail: &serde_json::Value) -> Option<AwaitingInput> {
        let input = detail.get("input")?;
        let questions = input.get("questions")?.as_array()?;
        let asked: Vec<crate::decide::answer::Asked> = questions
            .iter()
            .filter_map(|q| {
                Some(crate::decide::answer::Asked { key: q.get("key")?.as_str()?, question: q.get("question")? })
            })
            .collect();
        Some(AwaitingInput {
            task_ref: task_ref.to_string(),
            operation_id: OperationId::new(detail.get("operation_id")?.as_str()?),
            questions: asked.iter().map(|a| serde_json::json!({"key": a.key, "question": a.question})).collect(),
            answer_with: crate::decide::answer::command(task_ref, &asked),
            approval_first: None,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskLine {
    pub task_ref: String,
    pub state: TaskState,
    /// The operation the task's latest call is (a repair's own, if any).
    pub operation_id: OperationId,
    /// This run sent a call for it or changed its state; false: the state
    /// is what an earlier run left (a completion kept, a failure not
    /// repaired yet).
    pub this_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Succeeded on an attempt a person settled `ok`: its effect rests on
    /// that settlement, not on the engine's observation.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub settled_by_person: bool,
    /// What this run's reuse pass said of its completion (issue 43):
    /// `ran again: TOOL_CHANGED: …`, `kept: UPSTREAM_OUTPUT_UNCHANGED: …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rechecked: Option<String>,
    /// A completion under a dependency that failed since, or that runs
    /// again (`decide::upstream`): never said as a plain `succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<crate::decide::upstream::Upstream>,
    /// Completed this run from a read-back: the answer was lost (why),
    /// and the target read back as present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_back: Option<crate::evidence::UnknownReason>,
}

/// One of the goal's constraints, and what this run verified of it.
#[derive(Debug, Clone, Serialize)]
pub struct ConstraintLine {
    /// `None`: a plain statement, not checked by the engine.
    pub id: Option<String>,
    pub statement: String,
    /// It has protected paths (compared for `attempts_judged` attempts of
    /// this run).
    pub protects: bool,
    pub attempts_judged: usize,
    /// Its check's result before the acceptance checks (`None`: it has no
    /// check, or the goal's end was not reached).
    pub check_passed: Option<bool>,
    pub has_check: bool,
    /// The attempts of this run that broke it.
    pub violated_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AcceptanceLine {
    pub id: String,
    pub passed: bool,
}

/// A run a person stopped (SIGINT, SIGTERM, SIGHUP): what the stop did,
/// and the command that goes on from here.
#[derive(Debug, Clone, Serialize)]
pub struct StopReport {
    pub signal: StopSignal,
    /// A second signal cut the grace short (SIGKILL at once).
    pub grace_cut: bool,
    /// Tasks left `cancelled`: not failures; a plain run looks at them afresh.
    pub cancelled: Vec<String>,
    /// Acceptance checks the stop ended or kept from starting.
    pub acceptance_stopped: Vec<String>,
    /// The command that goes on: `engine run PLAN`.
    pub next: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub goal_id: GoalId,
    pub revision: Revision,
    /// The plan file the revision was recorded from (for the commands the
    /// summary names).
    pub plan_path: String,
    pub goal_state: GoalState,
    pub exit_code: i32,
    /// The stable code of the stop, when the run did not satisfy the goal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Code>,
    pub tasks: Vec<TaskLine>,
    pub acceptance: Vec<AcceptanceLine>,
    pub unknown: Vec<UnknownOp>,
    /// Calls not sent: the same request as an operation nobody knows the
    /// outcome of (`SAME_REQUEST_UNSETTLED`).
    pub same_request_unsettled: Vec<SameRequestWait>,
    pub failed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Exhausted>,
    /// The way out of the exhausted budget: the exact command to type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub way_out: Option<String>,
    pub awaiting_approval: Vec<Awaiting>,
    /// Tasks waiting on a person's answer (`engine answer`).
    pub awaiting_input: Vec<AwaitingInput>,
    /// Operations a person settled as not run and nobody has re-sent.
    pub settled_not_run: Vec<OperationId>,
    /// Acceptance criteria with no `check`: stated, never verified.
    pub acceptance_unchecked: Vec<String>,
    /// Acceptance criteria with a `check` (0: nothing checks the goal itself).
    pub acceptance_checks: usize,
    /// The goal's constraints, in the plan's order.
    pub constraints: Vec<ConstraintLine>,
    /// A person stopped the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopReport>,
    /// The goal's word (`decide::verdict::word`): `completed` for a
    /// satisfied goal with constraints nothing checks.
    pub verdict: &'static str,
    /// The goal's constraints that are plain statements (not checked).
    pub constraints_not_checked: usize,
    /// The plan file changed while this run was going (not by `engine
    /// revise`); the run executed the revision as recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_file_changed: Option<PlanFileChanged>,
    /// The incomplete tasks a person holds (`engine hold`): not started.
    pub held: Vec<HeldTask>,
}

/// A task a person holds, as the run's end names it.
#[derive(Debug, Clone, Serialize)]
pub struct HeldTask {
    pub task_ref: String,
    /// Who held it, and why (the goal's hold when `goal` is true).
    pub by: String,
    pub reason: String,
    pub goal: bool,
    /// The command that ends the hold.
    pub release: String,
}

/// The plan file changed during a run.
#[derive(Debug, Clone, Serialize)]
pub struct PlanFileChanged {
    /// The goal's run it changed during (1: its first run).
    pub run: u64,
    pub path: String,
}
