//! A person's acts in SQLite: approvals, settlements, and the requests a
//! person is asked to approve.

use rusqlite::{params, OptionalExtension};

use super::sql::{exec, qrow, rows, Sql};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId};
use crate::store::acts::{
    ActsRead, ActsWrite, ApprovalRecord, NewApproval, NewSettlement, OpenApproval, PendingRequest, SettlementRecord,
};

pub(super) const APPROVAL_COLUMNS: &str =
    "id, operation_id, goal_id, revision, task_ref, request_digest, plan_digest, \
     actor, note, at_ms, consumed_by, voided_by";

pub(super) fn approval_from_row(r: &rusqlite::Row) -> rusqlite::Result<ApprovalRecord> {
    Ok(ApprovalRecord {
        id: r.get(0)?,
        operation_id: r.get(1)?,
        goal_id: r.get(2)?,
        revision: r.get(3)?,
        task_ref: r.get(4)?,
        request_digest: r.get(5)?,
        plan_digest: r.get(6)?,
        actor: r.get(7)?,
        note: r.get(8)?,
        at_ms: r.get(9)?,
        consumed_by: r.get(10)?,
        voided_by: r.get(11)?,
    })
}

/// The columns of a settlement, read from `settlements s`.
pub(super) const SETTLEMENT_COLUMNS: &str =
    "s.id, s.attempt_id, s.operation_id, s.outcome, s.actor, s.note, s.evidence_blob, s.at_ms";

pub(super) fn settlement_from_row(r: &rusqlite::Row) -> rusqlite::Result<SettlementRecord> {
    Ok(SettlementRecord {
        id: r.get(0)?,
        attempt_id: r.get(1)?,
        operation_id: r.get(2)?,
        outcome: r.get(3)?,
        actor: r.get(4)?,
        note: r.get(5)?,
        evidence_blob: r.get(6)?,
        at_ms: r.get(7)?,
    })
}

impl ActsRead for Sql<'_> {
    fn open_approvals(&self, op: &OperationId) -> Result<Vec<OpenApproval>> {
        rows(
            self.conn,
            "SELECT id, request_digest, plan_digest FROM approvals
             WHERE operation_id = ?1 AND consumed_by IS NULL AND voided_by IS NULL ORDER BY id DESC",
            [op],
            |r| Ok(OpenApproval { id: r.get(0)?, request_digest: r.get(1)?, plan_digest: r.get(2)? }),
        )
    }

    fn pending_request(&self, op: &OperationId) -> Result<Option<PendingRequest>> {
        Ok(qrow(
            self.conn,
            "SELECT p.goal_id, p.revision, p.task_ref, p.request_digest FROM pending_requests p JOIN goals g
               ON g.id = p.goal_id AND g.active_revision = p.revision
             WHERE p.operation_id = ?1 ORDER BY p.id DESC LIMIT 1",
            [op],
            |r| {
                Ok(PendingRequest {
                    operation_id: op.clone(),
                    goal_id: r.get(0)?,
                    revision: r.get(1)?,
                    task_ref: r.get(2)?,
                    request_digest: r.get(3)?,
                })
            },
        )
        .optional()?)
    }

    fn approvals_of_goal(&self, goal: &GoalId) -> Result<Vec<ApprovalRecord>> {
        rows(
            self.conn,
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE goal_id = ?1 ORDER BY id"),
            [goal],
            approval_from_row,
        )
    }

    fn settlements_of_goal(&self, goal: &GoalId) -> Result<Vec<SettlementRecord>> {
        rows(
            self.conn,
            &format!(
                "SELECT {SETTLEMENT_COLUMNS} FROM settlements s JOIN attempts a ON a.id = s.attempt_id
                 WHERE a.goal_id = ?1 ORDER BY s.id"
            ),
            [goal],
            settlement_from_row,
        )
    }
}

impl ActsWrite for Sql<'_> {
    fn insert_approval(&mut self, a: &NewApproval) -> Result<ApprovalId> {
        exec(self.conn,
            "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![a.operation_id, a.goal_id, a.revision, a.task_ref, a.request_digest, a.plan_digest, a.actor, a.note, now_ms()],
        )?;
        Ok(ApprovalId(self.conn.last_insert_rowid()))
    }

    fn consume_approval(&mut self, id: ApprovalId, by: AttemptId) -> Result<()> {
        let n = exec(
            self.conn,
            "UPDATE approvals SET consumed_by = ?2 WHERE id = ?1 AND consumed_by IS NULL AND voided_by IS NULL",
            params![id, by],
        )?;
        if n != 1 {
            return Err(Error::internal(format!("approval {id} was already consumed")));
        }
        Ok(())
    }

    fn void_approvals(&mut self, ids: &[ApprovalId], by: AttemptId) -> Result<()> {
        for id in ids {
            exec(self.conn, "UPDATE approvals SET voided_by = ?2 WHERE id = ?1", params![id, by])?;
        }
        Ok(())
    }

    fn insert_settlement(&mut self, s: &NewSettlement) -> Result<()> {
        exec(self.conn,
            "INSERT INTO settlements (attempt_id, operation_id, outcome, actor, note, evidence_blob, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![s.attempt_id, s.operation_id, s.outcome, s.actor, s.note, s.evidence_blob, now_ms()],
        )?;
        Ok(())
    }

    fn insert_pending_request(&mut self, p: &PendingRequest) -> Result<()> {
        exec(
            self.conn,
            "INSERT INTO pending_requests (operation_id, goal_id, revision, task_ref, request_digest, asked_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![p.operation_id, p.goal_id, p.revision, p.task_ref, p.request_digest, now_ms()],
        )?;
        Ok(())
    }
}
