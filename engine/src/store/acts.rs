//! A person's acts: approvals, settlements, the retries, repairs and
//! revisions a person asks for (and the requests the engine asks a person
//! to approve). Nothing a provider returns reaches these writes:
//! `insert_approval` is called only by `engine approve`,
//! `insert_settlement` only by `engine settle` (`tests/e2e/architecture.rs`
//! reads the source to check it).
//!
//! Every act is bound to an entry of the act chain (`chain`): the writes
//! here append the entry in the act's own transaction, so no caller can
//! forget it, and `check_on_chain` is what the engine asks before it spends
//! an approval or acts on a settlement. `--request-id`s live here too: a
//! repeated command finds its first result beside the act it recorded.

use serde::Serialize;
use serde_json::Value;

use crate::cost::Cost;
use crate::error::Result;
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::state::SettlementOutcome;

/// Who did a person's act: the label they gave (`--actor`, free text) and
/// the operating-system user the engine ran as (read from the system, not
/// from the environment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Person {
    pub actor: String,
    pub uid: u32,
    pub user: String,
}

/// An approval still waiting for its call: neither consumed nor voided,
/// with what it binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApproval {
    pub id: ApprovalId,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
    pub revision: Revision,
    /// The call's cost the person approved (`None`: recorded before
    /// approvals bound it).
    pub cost: Option<Cost>,
    /// When it expires (`--for`, `approvals.expire_after`); `None`: never.
    pub expires_at_ms: Option<i64>,
}

pub struct NewApproval<'a> {
    pub operation_id: &'a OperationId,
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub task_ref: &'a str,
    pub request_digest: &'a RequestDigest,
    pub plan_digest: &'a str,
    /// The cost of the call the person approved.
    pub cost: Cost,
    pub person: &'a Person,
    pub note: &'a str,
    /// When it expires; `None`: never.
    pub expires_at_ms: Option<i64>,
}

pub struct NewSettlement<'a> {
    pub attempt_id: AttemptId,
    pub operation_id: &'a OperationId,
    pub outcome: SettlementOutcome,
    pub person: &'a Person,
    pub note: &'a str,
    pub evidence_blob: Option<&'a str>,
}

/// A request the engine asked a person to approve: the binding an
/// approval of its operation id takes.
#[derive(Debug, Clone, Serialize)]
pub struct PendingRequest {
    pub operation_id: OperationId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub request_digest: RequestDigest,
}

/// A person's approval as recorded, with what became of it. `uid` and
/// `user` are `None` on approvals recorded before the engine kept them.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRecord {
    pub id: ApprovalId,
    pub operation_id: OperationId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
    pub actor: String,
    pub uid: Option<u32>,
    pub user: Option<String>,
    pub note: String,
    pub at_ms: i64,
    pub consumed_by: Option<AttemptId>,
    pub voided_by: Option<AttemptId>,
    /// The cost of the call approved; `None` on approvals recorded before
    /// the engine bound it.
    pub cost: Option<Cost>,
    /// When it expires (`None`: never): past it, it is `expired` and never
    /// spent.
    pub expires_at_ms: Option<i64>,
}

/// A person's settlement of an unknown outcome, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct SettlementRecord {
    pub id: i64,
    pub attempt_id: AttemptId,
    pub operation_id: OperationId,
    pub outcome: SettlementOutcome,
    pub actor: String,
    pub uid: Option<u32>,
    pub user: Option<String>,
    pub note: String,
    pub evidence_blob: Option<String>,
    pub at_ms: i64,
}

/// What a person asked the engine to do (besides approving and settling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskKind {
    Retry,
    Repair,
    Revise,
    /// A person's answer to what an MCP server asked (`engine answer`).
    Answer,
    /// `engine hold`: a task (or, with no task ref, the goal) is not
    /// started or retried until a person releases it.
    Hold,
    /// `engine release`: a hold ends.
    Release,
    /// `engine rerun`: a succeeded task (and with `--downstream` its
    /// dependants) runs again in a new attempt.
    Rerun,
    /// `engine run --reuse-across-tool-change`: completions stale by their
    /// tool alone (`TOOL_CHANGED`) are kept for that run.
    ReuseAcrossToolChange,
}

impl AskKind {
    pub const ALL: &'static [AskKind] = &[
        AskKind::Retry,
        AskKind::Repair,
        AskKind::Revise,
        AskKind::Answer,
        AskKind::Hold,
        AskKind::Release,
        AskKind::Rerun,
        AskKind::ReuseAcrossToolChange,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AskKind::Retry => "retry",
            AskKind::Repair => "repair",
            AskKind::Revise => "revise",
            AskKind::Answer => "answer",
            AskKind::Hold => "hold",
            AskKind::Release => "release",
            AskKind::Rerun => "rerun",
            AskKind::ReuseAcrossToolChange => "reuse_across_tool_change",
        }
    }

    pub fn parse(s: &str) -> Option<AskKind> {
        AskKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

/// A retry, repair or revision a person asked for.
pub struct NewAsk<'a> {
    pub kind: AskKind,
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub task_ref: Option<&'a str>,
    pub operation_id: Option<&'a OperationId>,
    pub person: &'a Person,
    /// What else the person said (an instruction, a reason, a forced note).
    pub data: &'a Value,
}

/// A person's ask, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct AskRecord {
    pub id: i64,
    pub kind: AskKind,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: Option<String>,
    pub operation_id: Option<OperationId>,
    pub actor: String,
    pub uid: u32,
    pub user: String,
    pub data: Value,
    pub at_ms: i64,
}

/// An act, by its row: what `check_on_chain` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActRef {
    Approval(ApprovalId),
    Settlement(i64),
    Ask(i64),
}

/// An act row the act chain does not vouch for (inserted or edited by
/// something other than the engine), as every view shows it: never as a
/// person's act, always as `STORE_TAMPERED` naming the row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tampered {
    #[serde(skip)]
    pub act: ActRef,
    /// Always `STORE_TAMPERED`.
    pub code: crate::error::Code,
    /// `approvals row 7`.
    pub row: String,
    /// What is wrong with it (`is not on the act chain`, ...).
    pub problem: String,
    /// The sentence a person reads.
    pub message: String,
}

impl Tampered {
    /// From the `STORE_TAMPERED` error the chain's walk gives.
    pub fn of(act: ActRef, e: &crate::error::Error) -> Tampered {
        Tampered {
            act,
            code: e.code,
            row: e.place.clone().unwrap_or_default(),
            problem: e.details["problem"].as_str().unwrap_or(&e.message).to_string(),
            message: e.message.clone(),
        }
    }

    /// `STORE_TAMPERED: approvals row 7 is not on the act chain: ...`.
    pub fn words(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

/// A `--request-id` as first given: the command it names, and what the
/// command answered once it finished (`None`: it did not finish).
#[derive(Debug, Clone, Serialize)]
pub struct RequestIdRecord {
    pub request_id: String,
    pub fingerprint: String,
    /// The command and its arguments, as the first caller gave them.
    pub command: Value,
    pub at_ms: i64,
    pub result: Option<FirstResult>,
}

/// A command's answer, kept so a repeat gives it back unchanged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstResult {
    pub exit_code: i32,
    pub text: String,
    pub json: Value,
}

pub struct NewRequestId<'a> {
    pub request_id: &'a str,
    pub fingerprint: &'a str,
    pub command: &'a Value,
}

pub trait ActsRead {
    /// The approvals of `op` not yet consumed or voided, newest first.
    fn open_approvals(&self, op: &OperationId) -> Result<Vec<OpenApproval>>;
    /// The newest request for `op` that the engine asked a person to
    /// approve in a goal's active revision.
    fn pending_request(&self, op: &OperationId) -> Result<Option<PendingRequest>>;
    /// Every approval given for a goal, in ledger order.
    fn approvals_of_goal(&self, goal: &GoalId) -> Result<Vec<ApprovalRecord>>;
    /// Every settlement of an attempt of a goal, in ledger order.
    fn settlements_of_goal(&self, goal: &GoalId) -> Result<Vec<SettlementRecord>>;
    /// The settlements of one attempt, in ledger order.
    fn settlements_of_attempt(&self, attempt: AttemptId) -> Result<Vec<SettlementRecord>>;
    /// Every retry, repair and revision a person asked for in a goal.
    fn asks_of_goal(&self, goal: &GoalId) -> Result<Vec<AskRecord>>;
    /// `STORE_TAMPERED`, naming the row, unless the act is on the chain as
    /// recorded, the chain is whole up to its entry, and (for an approval)
    /// the chain agrees with the row on whether it was spent.
    fn check_on_chain(&self, act: ActRef) -> Result<()>;
    /// The acts among `acts` the chain does not vouch for (what
    /// `check_on_chain` refuses), found in one walk of the chain.
    fn unvouched(&self, acts: &[ActRef]) -> Result<Vec<Tampered>>;
    /// Every act row of the store, whatever its goal.
    fn every_act(&self) -> Result<Vec<ActRef>>;
    /// A `--request-id`, if it was given before.
    fn request_id(&self, id: &str) -> Result<Option<RequestIdRecord>>;
}

pub trait ActsWrite {
    /// A person's approval (`engine approve` only), chained.
    fn insert_approval(&mut self, a: &NewApproval) -> Result<ApprovalId>;
    /// Spent by the call whose intent this transaction writes (chained).
    fn consume_approval(&mut self, id: ApprovalId, by: AttemptId) -> Result<()>;
    /// Voided by a call that did not need them (each chained).
    fn void_approvals(&mut self, ids: &[ApprovalId], by: AttemptId) -> Result<()>;
    /// A person's settlement (`engine settle` only), chained.
    fn insert_settlement(&mut self, s: &NewSettlement) -> Result<()>;
    /// A retry, repair or revision a person asked for, chained.
    fn insert_ask(&mut self, a: &NewAsk) -> Result<i64>;
    /// The engine asks a person to approve this request.
    fn insert_pending_request(&mut self, p: &PendingRequest) -> Result<()>;
    /// A `--request-id`, in the transaction of the act it names.
    fn insert_request_id(&mut self, r: &NewRequestId) -> Result<()>;
    /// What the command of a request id answered; `false` when no such
    /// request id was recorded (the command stopped before its act).
    fn finish_request_id(&mut self, request_id: &str, result: &FirstResult) -> Result<bool>;
}
