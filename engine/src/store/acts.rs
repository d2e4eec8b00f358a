//! A person's acts: approvals and settlements (and the requests the engine
//! asks a person to approve). Nothing a provider returns reaches these
//! writes: `insert_approval` is called only by `engine approve`,
//! `insert_settlement` only by `engine settle` (`tests/e2e/architecture.rs`
//! reads the source to check it). One aggregate, so the integrity of a
//! person's acts (who, when, a chain of them) has one place to live.

use serde::Serialize;

use crate::error::Result;
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::state::SettlementOutcome;

/// An approval still waiting for its call: neither consumed nor voided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApproval {
    pub id: ApprovalId,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
}

pub struct NewApproval<'a> {
    pub operation_id: &'a OperationId,
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub task_ref: &'a str,
    pub request_digest: &'a RequestDigest,
    pub plan_digest: &'a str,
    pub actor: &'a str,
    pub note: &'a str,
}

pub struct NewSettlement<'a> {
    pub attempt_id: AttemptId,
    pub operation_id: &'a OperationId,
    pub outcome: SettlementOutcome,
    pub actor: &'a str,
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

/// A person's approval as recorded, with what became of it.
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
    pub note: String,
    pub at_ms: i64,
    pub consumed_by: Option<AttemptId>,
    pub voided_by: Option<AttemptId>,
}

/// A person's settlement of an unknown outcome, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct SettlementRecord {
    pub id: i64,
    pub attempt_id: AttemptId,
    pub operation_id: OperationId,
    pub outcome: SettlementOutcome,
    pub actor: String,
    pub note: String,
    pub evidence_blob: Option<String>,
    pub at_ms: i64,
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
}

pub trait ActsWrite {
    /// A person's approval (`engine approve` only).
    fn insert_approval(&mut self, a: &NewApproval) -> Result<ApprovalId>;
    /// Spent by the call whose intent this transaction writes.
    fn consume_approval(&mut self, id: ApprovalId, by: AttemptId) -> Result<()>;
    /// Voided by a call that did not need them.
    fn void_approvals(&mut self, ids: &[ApprovalId], by: AttemptId) -> Result<()>;
    /// A person's settlement (`engine settle` only).
    fn insert_settlement(&mut self, s: &NewSettlement) -> Result<()>;
    /// The engine asks a person to approve this request.
    fn insert_pending_request(&mut self, p: &PendingRequest) -> Result<()>;
}
