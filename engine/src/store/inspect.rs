//! The whole ledger, listed: every record of every aggregate, for tools
//! that check the store as a whole (the tests' read view of the ledger; a
//! store verifier) rather than answer one question of it. Read-only.

use serde::Serialize;
use serde_json::Value;

pub use super::acts::{ApprovalRecord, SettlementRecord};
use super::attempts::AttemptRecord;
use super::events::EventRecord;
use super::goals::{GoalRecord, RevisionRecord, TaskRecord};
use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::ids::{AttemptId, EvidenceId, GoalId, Revision};

#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    pub goal_id: GoalId,
    pub revision: Revision,
    #[serde(flatten)]
    pub task: TaskRecord,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReceiptRow {
    pub attempt_id: AttemptId,
    pub data: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvidenceRow {
    pub id: EvidenceId,
    pub goal_id: GoalId,
    pub revision: Option<Revision>,
    pub attempt_id: Option<AttemptId>,
    pub kind: String,
    pub data: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClaimRow {
    pub id: i64,
    pub attempt_id: AttemptId,
    pub authority: String,
    pub data: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckResultRow {
    pub id: i64,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub scope: String,
    pub task_ref: Option<String>,
    pub attempt_id: Option<AttemptId>,
    pub check_id: String,
    pub passed: bool,
    pub checkpoint: Option<String>,
    pub evidence_id: EvidenceId,
}

#[derive(Debug, Clone, Serialize)]
pub struct BlobRow {
    pub digest: String,
    pub size: i64,
    pub data: Vec<u8>,
}

/// The lease row: who holds (or last held) the store, and its generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseRow {
    pub pid: Option<i64>,
    pub host: Option<String>,
    pub generation: i64,
}

/// Every record, in ledger order (ids, sequence numbers).
pub trait Inspect {
    fn goals(&self) -> Result<Vec<GoalRecord>>;
    fn revisions(&self) -> Result<Vec<RevisionRecord>>;
    fn all_tasks(&self) -> Result<Vec<TaskRow>>;
    fn all_attempts(&self) -> Result<Vec<AttemptRecord>>;
    fn receipts(&self) -> Result<Vec<ReceiptRow>>;
    fn all_evidence(&self) -> Result<Vec<EvidenceRow>>;
    fn claims(&self) -> Result<Vec<ClaimRow>>;
    fn check_results(&self) -> Result<Vec<CheckResultRow>>;
    fn checkpoints(&self) -> Result<Vec<Checkpoint>>;
    fn blobs(&self) -> Result<Vec<BlobRow>>;
    fn approvals(&self) -> Result<Vec<ApprovalRecord>>;
    fn settlements(&self) -> Result<Vec<SettlementRecord>>;
    fn all_events(&self) -> Result<Vec<EventRecord>>;
    fn lease(&self) -> Result<Option<LeaseRow>>;
}
