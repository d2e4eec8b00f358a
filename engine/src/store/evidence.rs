//! What the engine observed and what it was told: evidence (with the blobs
//! that hold captured output), claims kept apart from it, check results,
//! observed checkpoints, and the file-state cache.

use serde::Serialize;
use serde_json::Value;

use crate::checkpoint::{Checkpoint, FileState, RecordedCheckpoint};
use crate::error::{Code, Error, Result};
use crate::evidence::{Evidence, Recorded};
use crate::ids::{AttemptId, EvidenceId, GoalId, Revision};

/// Whose check: a task's validation, or the goal's acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckScope {
    Validation,
    Acceptance,
}

impl CheckScope {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckScope::Validation => "validation",
            CheckScope::Acceptance => "acceptance",
        }
    }
}

pub struct NewCheckResult<'a> {
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub scope: CheckScope,
    pub task_ref: Option<&'a str>,
    pub attempt_id: Option<AttemptId>,
    pub check_id: &'a str,
    pub passed: bool,
    pub checkpoint: Option<&'a str>,
    pub evidence_id: EvidenceId,
}

/// The columns of a check result as either store selects them, in order:
/// id, check_id, passed, attempt_id, checkpoint, evidence_id.
pub type CheckResultRow = (i64, String, bool, Option<AttemptId>, Option<String>, EvidenceId);

impl From<CheckResultRow> for CheckResultRecord {
    fn from((id, check_id, passed, attempt_id, checkpoint, evidence_id): CheckResultRow) -> CheckResultRecord {
        CheckResultRecord { id, check_id, passed, attempt_id, checkpoint, evidence_id }
    }
}

/// Whose checks: one task's validations, or the goal's acceptance, of a
/// goal's revision.
#[derive(Debug, Clone, Copy)]
pub struct ChecksOf<'a> {
    pub goal: &'a GoalId,
    pub revision: Revision,
    pub scope: CheckScope,
    pub task_ref: Option<&'a str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckResultRecord {
    pub id: i64,
    pub check_id: String,
    pub passed: bool,
    pub attempt_id: Option<AttemptId>,
    pub checkpoint: Option<String>,
    pub evidence_id: EvidenceId,
}

/// What a model or provider *said*, kept apart from evidence.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimRecord {
    pub id: i64,
    pub authority: String,
    pub data: Value,
}

/// A completed task as the ledger holds it (see `LedgerRead::completion`).
#[derive(Debug, Clone)]
pub struct CompletionRecord {
    pub revision: Revision,
    pub attempt_id: AttemptId,
    pub meaning: String,
    pub dependencies: String,
    /// The checkpoint its validations judged, if it was recorded (and
    /// parses as one).
    pub checkpoint: Option<RecordedCheckpoint>,
    /// Its inputs did not change while its validations ran.
    pub reusable: bool,
    /// The latest result of each of its validations.
    pub validations: Vec<CheckResultRecord>,
}

/// Evidence with the time it was recorded (a report marks validations on
/// its timeline by it).
#[derive(Debug, Clone)]
pub struct TimedEvidence {
    pub id: EvidenceId,
    pub at_ms: i64,
    pub evidence: Evidence,
}

impl TimedEvidence {
    /// A row of `evidence` as either store reads it: its `data` that does
    /// not parse is `STORE_CORRUPT`, naming the row.
    pub(crate) fn from_row(id: EvidenceId, at_ms: i64, data: &str) -> Result<TimedEvidence> {
        let evidence: Evidence = serde_json::from_str(data)
            .map_err(|e| Error::new(Code::StoreCorrupt, format!("evidence {id} does not parse: {e}")))?;
        Ok(TimedEvidence { id, at_ms, evidence })
    }
}

pub trait EvidenceRead {
    fn evidence_of_attempt(&self, attempt: AttemptId) -> Result<Vec<Recorded>> {
        let list = self.timed_evidence_of_attempt(attempt)?;
        Ok(list.into_iter().map(|t| Recorded { id: t.id, evidence: t.evidence }).collect())
    }
    /// A blob's bytes, by its digest.
    fn blob(&self, digest: &str) -> Result<Option<Vec<u8>>>;
    /// Every piece of evidence of one attempt, in ledger order, with its time.
    fn timed_evidence_of_attempt(&self, attempt: AttemptId) -> Result<Vec<TimedEvidence>>;
    /// One piece of evidence by id (an acceptance check's has no attempt).
    fn evidence_by_id(&self, id: EvidenceId) -> Result<Option<TimedEvidence>>;
    fn claims_of_attempt(&self, attempt: AttemptId) -> Result<Vec<ClaimRecord>>;
    fn claim_ids(&self, attempt: AttemptId) -> Result<Vec<i64>>;
    /// The latest result of each check of a scope (one task's validations,
    /// or the goal's acceptance), by ledger order — never by wall time.
    fn latest_check_results(&self, of: ChecksOf<'_>) -> Result<Vec<CheckResultRecord>>;
    /// Has any check judged this attempt?
    fn is_judged(&self, attempt: AttemptId) -> Result<bool>;
    fn checkpoint(&self, digest: &str) -> Result<Option<Checkpoint>>;
    fn file_states(&self) -> Result<Vec<FileState>>;
}

/// One piece of evidence as its row holds it (`queries::INSERT_EVIDENCE`,
/// in its order): its kind, its JSON, when it was recorded.
#[derive(Debug)]
pub struct EvidenceRow<'a> {
    pub goal: &'a GoalId,
    pub revision: Revision,
    pub attempt: Option<AttemptId>,
    pub kind: &'static str,
    pub data: String,
    pub at_ms: i64,
}

pub trait EvidenceWrite {
    fn insert_evidence(
        &mut self,
        goal: &GoalId,
        revision: Revision,
        attempt: Option<AttemptId>,
        e: &Evidence,
    ) -> Result<EvidenceId> {
        let data =
            serde_json::to_string(e).map_err(|e| Error::internal(format!("evidence does not serialize: {e}")))?;
        let row = EvidenceRow { goal, revision, attempt, kind: e.kind(), data, at_ms: crate::clock::now_ms() };
        self.insert_evidence_row(&row)
    }
    /// The store's write of `insert_evidence`: the row, its id.
    fn insert_evidence_row(&mut self, row: &EvidenceRow<'_>) -> Result<EvidenceId>;
    /// Store bytes content-addressed (idempotent); returns their digest.
    fn put_blob(&mut self, bytes: &[u8]) -> Result<String>;
    fn insert_claim(&mut self, attempt: AttemptId, authority: &str, data: &Value) -> Result<i64>;
    fn insert_check_result(&mut self, c: &NewCheckResult) -> Result<i64>;
    fn put_checkpoint(&mut self, cp: &Checkpoint) -> Result<()>;
    fn put_file_states(&mut self, states: &[FileState]) -> Result<()>;
}
