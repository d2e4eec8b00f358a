//! The whole ledger, listed, in SQLite.

use rusqlite::OptionalExtension;
use serde_json::Value;

use super::acts::{approval_from_row, settlement_from_row, APPROVAL_COLUMNS, SETTLEMENT_COLUMNS};
use super::sql::{rows, Sql};
use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventRecord;
use crate::store::goals::{GoalRecord, RevisionRecord};
use crate::store::inspect::{
    ApprovalRecord, BlobRow, CheckResultRow, ClaimRow, EvidenceRow, Inspect, LeaseRow, ReceiptRow, SettlementRecord,
    TaskRow,
};
use crate::store::{AttemptsRead, GoalsRead};

fn json(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

impl Inspect for Sql<'_> {
    fn goals(&self) -> Result<Vec<GoalRecord>> {
        let ids: Vec<crate::ids::GoalId> = rows(self.conn, "SELECT id FROM goals ORDER BY rowid", [], |r| r.get(0))?;
        ids.iter().filter_map(|id| self.goal(id).transpose()).collect()
    }

    fn revisions(&self) -> Result<Vec<RevisionRecord>> {
        let keys: Vec<(crate::ids::GoalId, crate::ids::Revision)> =
            rows(self.conn, "SELECT goal_id, revision FROM revisions ORDER BY goal_id, revision", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        keys.iter().map(|(g, r)| self.revision(g, *r)).collect()
    }

    fn all_tasks(&self) -> Result<Vec<TaskRow>> {
        let keys: Vec<(crate::ids::GoalId, crate::ids::Revision, String)> = rows(
            self.conn,
            "SELECT goal_id, revision, task_ref FROM tasks ORDER BY goal_id, revision, task_ref",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let mut out = Vec::with_capacity(keys.len());
        for (goal_id, revision, task_ref) in keys {
            if let Some(task) = self.task(&goal_id, revision, &task_ref)? {
                out.push(TaskRow { goal_id, revision, task });
            }
        }
        Ok(out)
    }

    fn all_attempts(&self) -> Result<Vec<AttemptRecord>> {
        let ids: Vec<crate::ids::AttemptId> = rows(self.conn, "SELECT id FROM attempts ORDER BY id", [], |r| r.get(0))?;
        ids.into_iter().map(|id| self.attempt(id)).collect()
    }

    fn receipts(&self) -> Result<Vec<ReceiptRow>> {
        rows(self.conn, "SELECT attempt_id, data FROM receipts ORDER BY attempt_id", [], |r| {
            Ok(ReceiptRow { attempt_id: r.get(0)?, data: json(r.get(1)?) })
        })
    }

    fn all_evidence(&self) -> Result<Vec<EvidenceRow>> {
        rows(self.conn, "SELECT id, goal_id, revision, attempt_id, kind, data FROM evidence ORDER BY id", [], |r| {
            Ok(EvidenceRow {
                id: r.get(0)?,
                goal_id: r.get(1)?,
                revision: r.get(2)?,
                attempt_id: r.get(3)?,
                kind: r.get(4)?,
                data: json(r.get(5)?),
            })
        })
    }

    fn claims(&self) -> Result<Vec<ClaimRow>> {
        rows(self.conn, "SELECT id, attempt_id, authority, data FROM claims ORDER BY id", [], |r| {
            Ok(ClaimRow { id: r.get(0)?, attempt_id: r.get(1)?, authority: r.get(2)?, data: json(r.get(3)?) })
        })
    }

    fn check_results(&self) -> Result<Vec<CheckResultRow>> {
        rows(
            self.conn,
            "SELECT id, goal_id, revision, scope, task_ref, attempt_id, check_id, passed, checkpoint, evidence_id
             FROM check_results ORDER BY id",
            [],
            |r| {
                Ok(CheckResultRow {
                    id: r.get(0)?,
                    goal_id: r.get(1)?,
                    revision: r.get(2)?,
                    scope: r.get(3)?,
                    task_ref: r.get(4)?,
                    attempt_id: r.get(5)?,
                    check_id: r.get(6)?,
                    passed: r.get(7)?,
                    checkpoint: r.get(8)?,
                    evidence_id: r.get(9)?,
                })
            },
        )
    }

    fn checkpoints(&self) -> Result<Vec<Checkpoint>> {
        let list: Vec<String> = rows(self.conn, "SELECT data FROM checkpoints ORDER BY digest", [], |r| r.get(0))?;
        Ok(list.into_iter().filter_map(|d| serde_json::from_str(&d).ok()).collect())
    }

    fn blobs(&self) -> Result<Vec<BlobRow>> {
        rows(self.conn, "SELECT digest, size, data FROM blobs ORDER BY digest", [], |r| {
            Ok(BlobRow { digest: r.get(0)?, size: r.get(1)?, data: r.get(2)? })
        })
    }

    fn approvals(&self) -> Result<Vec<ApprovalRecord>> {
        rows(self.conn, &format!("SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY id"), [], approval_from_row)
    }

    fn settlements(&self) -> Result<Vec<SettlementRecord>> {
        rows(
            self.conn,
            &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s ORDER BY s.id"),
            [],
            settlement_from_row,
        )
    }

    fn all_events(&self) -> Result<Vec<EventRecord>> {
        crate::store::events::every_event(self)
    }

    fn lease(&self) -> Result<Option<LeaseRow>> {
        Ok(self
            .conn
            .query_row("SELECT pid, host, generation FROM lease WHERE id = 1", [], |r| {
                Ok(LeaseRow { pid: r.get(0)?, host: r.get(1)?, generation: r.get(2)? })
            })
            .optional()?)
    }
}
