//! The whole ledger, listed, in PostgreSQL.

use super::acts::{approval_from_row, settlement_from_row, APPROVAL_COLUMNS, SETTLEMENT_COLUMNS};
use super::attempts::{attempt_from_row, ATTEMPT_COLUMNS};
use super::client::p;
use super::sql::{get, json, PgSql};
use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::ids::{GoalId, Revision};
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventRecord;
use crate::store::goals::{GoalRecord, RevisionRecord};
use crate::store::inspect::{
    ApprovalRecord, BlobRow, CheckResultRow, ClaimRow, EvidenceRow, Inspect, LeaseRow, ReceiptRow, SettlementRecord,
    TaskRow,
};
use crate::store::GoalsRead;

impl Inspect for PgSql<'_> {
    fn goals(&self) -> Result<Vec<GoalRecord>> {
        let ids: Vec<GoalId> =
            self.q("SELECT id FROM goals ORDER BY created", p![])?.iter().map(|r| get(r, 0)).collect::<Result<_>>()?;
        ids.iter().filter_map(|id| self.goal(id).transpose()).collect()
    }

    fn revisions(&self) -> Result<Vec<RevisionRecord>> {
        let rows = self.q("SELECT goal_id, revision FROM revisions ORDER BY goal_id, revision", p![])?;
        let keys: Vec<(GoalId, Revision)> = rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect::<Result<_>>()?;
        keys.iter().map(|(g, r)| self.revision(g, *r)).collect()
    }

    fn all_tasks(&self) -> Result<Vec<TaskRow>> {
        let rows =
            self.q("SELECT goal_id, revision, task_ref FROM tasks ORDER BY goal_id, revision, task_ref", p![])?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let (goal_id, revision, task_ref): (GoalId, Revision, String) = (get(r, 0)?, get(r, 1)?, get(r, 2)?);
            if let Some(task) = self.task(&goal_id, revision, &task_ref)? {
                out.push(TaskRow { goal_id, revision, task });
            }
        }
        Ok(out)
    }

    fn all_attempts(&self) -> Result<Vec<AttemptRecord>> {
        let rows = self.q(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts ORDER BY id"), p![])?;
        rows.iter().map(attempt_from_row).collect()
    }

    fn receipts(&self) -> Result<Vec<ReceiptRow>> {
        let rows = self.q("SELECT attempt_id, data FROM receipts ORDER BY attempt_id", p![])?;
        rows.iter().map(|r| Ok(ReceiptRow { attempt_id: get(r, 0)?, data: json(get(r, 1)?) })).collect()
    }

    fn all_evidence(&self) -> Result<Vec<EvidenceRow>> {
        let rows = self.q("SELECT id, goal_id, revision, attempt_id, kind, data FROM evidence ORDER BY id", p![])?;
        rows.iter()
            .map(|r| {
                Ok(EvidenceRow {
                    id: get(r, 0)?,
                    goal_id: get(r, 1)?,
                    revision: get(r, 2)?,
                    attempt_id: get(r, 3)?,
                    kind: get(r, 4)?,
                    data: json(get(r, 5)?),
                })
            })
            .collect()
    }

    fn claims(&self) -> Result<Vec<ClaimRow>> {
        let rows = self.q("SELECT id, attempt_id, authority, data FROM claims ORDER BY id", p![])?;
        rows.iter()
            .map(|r| {
                Ok(ClaimRow { id: get(r, 0)?, attempt_id: get(r, 1)?, authority: get(r, 2)?, data: json(get(r, 3)?) })
            })
            .collect()
    }

    fn check_results(&self) -> Result<Vec<CheckResultRow>> {
        let rows = self.q(
            "SELECT id, goal_id, revision, scope, task_ref, attempt_id, check_id, passed, checkpoint, evidence_id
             FROM check_results ORDER BY id",
            p![],
        )?;
        rows.iter()
            .map(|r| {
                Ok(CheckResultRow {
                    id: get(r, 0)?,
                    goal_id: get(r, 1)?,
                    revision: get(r, 2)?,
                    scope: get(r, 3)?,
                    task_ref: get(r, 4)?,
                    attempt_id: get(r, 5)?,
                    check_id: get(r, 6)?,
                    passed: get(r, 7)?,
                    checkpoint: get(r, 8)?,
                    evidence_id: get(r, 9)?,
                })
            })
            .collect()
    }

    fn checkpoints(&self) -> Result<Vec<Checkpoint>> {
        let rows = self.q("SELECT data FROM checkpoints ORDER BY digest", p![])?;
        Ok(rows.iter().filter_map(|r| get::<String>(r, 0).ok()).filter_map(|d| serde_json::from_str(&d).ok()).collect())
    }

    fn blobs(&self) -> Result<Vec<BlobRow>> {
        let rows = self.q("SELECT digest, size, data FROM blobs ORDER BY digest", p![])?;
        rows.iter().map(|r| Ok(BlobRow { digest: get(r, 0)?, size: get(r, 1)?, data: get(r, 2)? })).collect()
    }

    fn approvals(&self) -> Result<Vec<ApprovalRecord>> {
        let rows = self.q(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY id"), p![])?;
        rows.iter().map(approval_from_row).collect()
    }

    fn settlements(&self) -> Result<Vec<SettlementRecord>> {
        let rows = self.q(&format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s ORDER BY s.id"), p![])?;
        rows.iter().map(settlement_from_row).collect()
    }

    fn all_events(&self) -> Result<Vec<EventRecord>> {
        crate::store::events::every_event(self)
    }

    fn lease(&self) -> Result<Option<LeaseRow>> {
        // No store-wide lease on a shared store: claims are per task.
        Ok(None)
    }
}
