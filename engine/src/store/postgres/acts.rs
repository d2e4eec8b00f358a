//! A person's acts in PostgreSQL: approvals, settlements, and the
//! requests a person is asked to approve. An approval a call may spend is
//! read with a row lock in the intent's transaction, so of two workers
//! racing for it, one spends it and the other finds none.

use tokio_postgres::Row;

use super::client::p;
use super::sql::{get, PgSql};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId};
use crate::store::acts::{
    ActsRead, ActsWrite, ApprovalRecord, NewApproval, NewSettlement, OpenApproval, PendingRequest, SettlementRecord,
};

pub(super) const APPROVAL_COLUMNS: &str =
    "id, operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, consumed_by, voided_by";

pub(super) fn approval_from_row(r: &Row) -> Result<ApprovalRecord> {
    Ok(ApprovalRecord {
        id: get(r, 0)?,
        operation_id: get(r, 1)?,
        goal_id: get(r, 2)?,
        revision: get(r, 3)?,
        task_ref: get(r, 4)?,
        request_digest: get(r, 5)?,
        plan_digest: get(r, 6)?,
        actor: get(r, 7)?,
        note: get(r, 8)?,
        at_ms: get(r, 9)?,
        consumed_by: get(r, 10)?,
        voided_by: get(r, 11)?,
    })
}

pub(super) const SETTLEMENT_COLUMNS: &str =
    "s.id, s.attempt_id, s.operation_id, s.outcome, s.actor, s.note, s.evidence_blob, s.at_ms";

pub(super) fn settlement_from_row(r: &Row) -> Result<SettlementRecord> {
    Ok(SettlementRecord {
        id: get(r, 0)?,
        attempt_id: get(r, 1)?,
        operation_id: get(r, 2)?,
        outcome: get(r, 3)?,
        actor: get(r, 4)?,
        note: get(r, 5)?,
        evidence_blob: get(r, 6)?,
        at_ms: get(r, 7)?,
    })
}

impl ActsRead for PgSql<'_> {
    fn open_approvals(&self, op: &OperationId) -> Result<Vec<OpenApproval>> {
        let lock = if self.writing() { " FOR UPDATE" } else { "" };
        let rows = self.q(
            &format!(
                "SELECT id, request_digest, plan_digest FROM approvals
                 WHERE operation_id = $1 AND consumed_by IS NULL AND voided_by IS NULL ORDER BY id DESC{lock}"
            ),
            p![op.clone()],
        )?;
        rows.iter()
            .map(|r| Ok(OpenApproval { id: get(r, 0)?, request_digest: get(r, 1)?, plan_digest: get(r, 2)? }))
            .collect()
    }

    fn pending_request(&self, op: &OperationId) -> Result<Option<PendingRequest>> {
        let row = self.q1(
            "SELECT p.goal_id, p.revision, p.task_ref, p.request_digest FROM pending_requests p JOIN goals g
               ON g.id = p.goal_id AND g.active_revision = p.revision
             WHERE p.operation_id = $1 ORDER BY p.id DESC LIMIT 1",
            p![op.clone()],
        )?;
        row.map(|r| {
            Ok(PendingRequest {
                operation_id: op.clone(),
                goal_id: get(&r, 0)?,
                revision: get(&r, 1)?,
                task_ref: get(&r, 2)?,
                request_digest: get(&r, 3)?,
            })
        })
        .transpose()
    }

    fn approvals_of_goal(&self, goal: &GoalId) -> Result<Vec<ApprovalRecord>> {
        let rows = self
            .q(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE goal_id = $1 ORDER BY id"), p![goal.clone()])?;
        rows.iter().map(approval_from_row).collect()
    }

    fn settlements_of_goal(&self, goal: &GoalId) -> Result<Vec<SettlementRecord>> {
        let rows = self.q(
            &format!(
                "SELECT {SETTLEMENT_COLUMNS} FROM settlements s JOIN attempts a ON a.id = s.attempt_id
                 WHERE a.goal_id = $1 ORDER BY s.id"
            ),
            p![goal.clone()],
        )?;
        rows.iter().map(settlement_from_row).collect()
    }
}

impl ActsWrite for PgSql<'_> {
    fn insert_approval(&mut self, a: &NewApproval) -> Result<ApprovalId> {
        self.v(
            "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            p![
                a.operation_id.clone(),
                a.goal_id.clone(),
                a.revision,
                a.task_ref.to_string(),
                a.request_digest.clone(),
                a.plan_digest.to_string(),
                a.actor.to_string(),
                a.note.to_string(),
                now_ms()
            ],
        )?
        .ok_or_else(|| Error::internal("an insert returned no id"))
    }

    fn consume_approval(&mut self, id: ApprovalId, by: AttemptId) -> Result<()> {
        self.fence_attempt(by)?;
        let done = self.q(
            "UPDATE approvals SET consumed_by = $2 WHERE id = $1 AND consumed_by IS NULL AND voided_by IS NULL RETURNING 1",
            p![id, by],
        )?;
        if done.len() != 1 {
            return Err(Error::internal(format!("approval {id} was already consumed")));
        }
        Ok(())
    }

    fn void_approvals(&mut self, ids: &[ApprovalId], by: AttemptId) -> Result<()> {
        self.fence_attempt(by)?;
        for id in ids {
            self.q("UPDATE approvals SET voided_by = $2 WHERE id = $1", p![*id, by])?;
        }
        Ok(())
    }

    fn insert_settlement(&mut self, s: &NewSettlement) -> Result<()> {
        self.fence_attempt(s.attempt_id)?;
        self.q(
            "INSERT INTO settlements (attempt_id, operation_id, outcome, actor, note, evidence_blob, at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            p![
                s.attempt_id,
                s.operation_id.clone(),
                s.outcome,
                s.actor.to_string(),
                s.note.to_string(),
                s.evidence_blob.map(str::to_string),
                now_ms()
            ],
        )?;
        Ok(())
    }

    fn insert_pending_request(&mut self, r: &PendingRequest) -> Result<()> {
        self.fence_task(&r.goal_id, &r.task_ref)?;
        self.q(
            "INSERT INTO pending_requests (operation_id, goal_id, revision, task_ref, request_digest, asked_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
            p![
                r.operation_id.clone(),
                r.goal_id.clone(),
                r.revision,
                r.task_ref.clone(),
                r.request_digest.clone(),
                now_ms()
            ],
        )?;
        Ok(())
    }
}
