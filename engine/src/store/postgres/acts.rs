//! A person's acts in PostgreSQL: approvals, settlements, the retries,
//! repairs and revisions a person asks for, the requests a person is asked
//! to approve, and `--request-id`s. Every act is appended to the act chain
//! (`chain.rs`) in the transaction that records it. An approval a call may spend is
//! read with a row lock in the intent's transaction, so of two workers
//! racing for it, one spends it and the other finds none.

use serde_json::Value;
use tokio_postgres::Row;

use super::chain;
use super::client::p;
use super::sql::{get, PgSql};
use crate::clock::now_ms;
use crate::cost::Cost;
use crate::error::{Code, Error, Result};
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId};
use crate::store::acts::{
    ActRef, ActsRead, ActsWrite, ApprovalRecord, AskKind, AskRecord, FirstResult, NewApproval, NewAsk, NewRequestId,
    NewSettlement, OpenApproval, PendingRequest, RequestIdRecord, SettlementRecord, Tampered,
};
use crate::store::chain::{self as links, ChainRows, EntryKind};

pub(super) const APPROVAL_COLUMNS: &str =
    "id, operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, consumed_by, voided_by, os_uid, os_user, cost_micros, expires_at_ms";

/// The same, read while migrating from before schema 5 (no cost yet): the
/// acts chained at schema 3 bind no cost.
pub(super) const APPROVAL_COLUMNS_BEFORE_COST: &str =
    "id, operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, consumed_by, voided_by, os_uid, os_user, NULL::BIGINT, NULL::BIGINT";

/// An operating-system uid column (BIGINT here, `u32` in the ledger).
fn uid(r: &Row, i: usize) -> Result<Option<u32>> {
    get::<Option<i64>>(r, i)?
        .map(|v| u32::try_from(v).map_err(|_| Error::new(Code::StoreCorrupt, format!("a uid column holds {v}"))))
        .transpose()
}

fn required_uid(r: &Row, i: usize) -> Result<u32> {
    uid(r, i)?.ok_or_else(|| Error::new(Code::StoreCorrupt, "a person's act has no uid"))
}

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
        uid: uid(r, 12)?,
        user: get(r, 13)?,
        cost: get::<Option<i64>>(r, 14)?.map(Cost::from_micros),
        expires_at_ms: get(r, 15)?,
    })
}

pub(super) const SETTLEMENT_COLUMNS: &str =
    "s.id, s.attempt_id, s.operation_id, s.outcome, s.actor, s.note, s.evidence_blob, s.at_ms, s.os_uid, s.os_user";

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
        uid: uid(r, 8)?,
        user: get(r, 9)?,
    })
}

pub(super) const ASK_COLUMNS: &str =
    "id, kind, goal_id, revision, task_ref, operation_id, actor, os_uid, os_user, data, at_ms";

pub(super) fn ask_from_row(r: &Row) -> Result<AskRecord> {
    let kind: String = get(r, 1)?;
    let kind = AskKind::parse(&kind)
        .ok_or_else(|| Error::new(Code::StoreCorrupt, format!("a person's ask has an unknown kind `{kind}`")))?;
    let data: String = get(r, 9)?;
    let data: Value = serde_json::from_str(&data)
        .map_err(|e| Error::new(Code::StoreCorrupt, format!("a person's ask's data does not parse: {e}")))?;
    Ok(AskRecord {
        id: get(r, 0)?,
        kind,
        goal_id: get(r, 2)?,
        revision: get(r, 3)?,
        task_ref: get(r, 4)?,
        operation_id: get(r, 5)?,
        actor: get(r, 6)?,
        uid: required_uid(r, 7)?,
        user: get(r, 8)?,
        data,
        at_ms: get(r, 10)?,
    })
}

impl ActsRead for PgSql<'_> {
    fn open_approvals(&self, op: &OperationId) -> Result<Vec<OpenApproval>> {
        let lock = if self.writing() { " FOR UPDATE" } else { "" };
        let rows = self.q(
            &format!(
                "SELECT id, request_digest, plan_digest, revision, cost_micros, expires_at_ms FROM approvals
                 WHERE operation_id = $1 AND consumed_by IS NULL AND voided_by IS NULL ORDER BY id DESC{lock}"
            ),
            p![op.clone()],
        )?;
        rows.iter()
            .map(|r| {
                Ok(OpenApproval {
                    id: get(r, 0)?,
                    request_digest: get(r, 1)?,
                    plan_digest: get(r, 2)?,
                    revision: get(r, 3)?,
                    cost: get::<Option<i64>>(r, 4)?.map(Cost::from_micros),
                    expires_at_ms: get(r, 5)?,
                })
            })
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

    fn settlements_of_attempt(&self, attempt: AttemptId) -> Result<Vec<SettlementRecord>> {
        let rows = self.q(
            &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.attempt_id = $1 ORDER BY s.id"),
            p![attempt],
        )?;
        rows.iter().map(settlement_from_row).collect()
    }

    fn asks_of_goal(&self, goal: &GoalId) -> Result<Vec<AskRecord>> {
        let rows = self.q(
            &format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE goal_id = $1 ORDER BY id"),
            p![goal.clone()],
        )?;
        rows.iter().map(ask_from_row).collect()
    }

    fn check_on_chain(&self, act: ActRef) -> Result<()> {
        chain::check(self, act)
    }

    fn unvouched(&self, acts: &[ActRef]) -> Result<Vec<Tampered>> {
        links::unvouched(self, acts)
    }

    fn every_act(&self) -> Result<Vec<ActRef>> {
        links::ChainRows::acts(self)
    }

    fn request_id(&self, id: &str) -> Result<Option<RequestIdRecord>> {
        let Some(r) = self.q1(
            "SELECT request_id, fingerprint, command, at_ms, exit_code, output_text, output_json
             FROM request_ids WHERE request_id = $1",
            p![id.to_string()],
        )?
        else {
            return Ok(None);
        };
        let request_id: String = get(&r, 0)?;
        let parse = |s: &str| {
            serde_json::from_str::<Value>(s)
                .map_err(|e| Error::internal(format!("request id {request_id}: a stored document does not parse: {e}")))
        };
        let (exit_code, text, json): (Option<i32>, Option<String>, Option<String>) =
            (get(&r, 4)?, get(&r, 5)?, get(&r, 6)?);
        let result = match (exit_code, text, json) {
            (Some(exit_code), Some(text), Some(json)) => Some(FirstResult { exit_code, text, json: parse(&json)? }),
            _ => None,
        };
        let command = parse(&get::<String>(&r, 2)?)?;
        Ok(Some(RequestIdRecord { command, fingerprint: get(&r, 1)?, at_ms: get(&r, 3)?, result, request_id }))
    }
}

impl ActsWrite for PgSql<'_> {
    fn insert_approval(&mut self, a: &NewApproval) -> Result<ApprovalId> {
        let id: ApprovalId = self.v(
            "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, os_uid, os_user, cost_micros, expires_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
            p![
                a.operation_id.clone(),
                a.goal_id.clone(),
                a.revision,
                a.task_ref.to_string(),
                a.request_digest.clone(),
                a.plan_digest.to_string(),
                a.person.actor.clone(),
                a.note.to_string(),
                now_ms(),
                i64::from(a.person.uid),
                a.person.user.clone(),
                a.cost.micros(),
                a.expires_at_ms
            ],
        )?
        .ok_or_else(|| Error::internal("an insert returned no id"))?;
        let row = ChainRows::written_approval(self, id)?;
        chain::append(self, EntryKind::Approval, id.get(), links::approval_content(&row))?;
        Ok(id)
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
        chain::append(self, EntryKind::ApprovalSpent, id.get(), links::spent_content(id, by))?;
        Ok(())
    }

    fn void_approvals(&mut self, ids: &[ApprovalId], by: AttemptId) -> Result<()> {
        self.fence_attempt(by)?;
        for id in ids {
            let n = self.q(
                "UPDATE approvals SET voided_by = $2 WHERE id = $1 AND consumed_by IS NULL AND voided_by IS NULL RETURNING 1",
                p![*id, by],
            )?;
            if n.len() == 1 {
                chain::append(self, EntryKind::ApprovalVoided, id.get(), links::spent_content(*id, by))?;
            }
        }
        Ok(())
    }

    fn insert_settlement(&mut self, s: &NewSettlement) -> Result<()> {
        self.fence_attempt(s.attempt_id)?;
        let id: i64 = self.v(
            "INSERT INTO settlements (attempt_id, operation_id, outcome, actor, note, evidence_blob, at_ms, os_uid, os_user)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            p![
                s.attempt_id,
                s.operation_id.clone(),
                s.outcome,
                s.person.actor.clone(),
                s.note.to_string(),
                s.evidence_blob.map(str::to_string),
                now_ms(),
                i64::from(s.person.uid),
                s.person.user.clone()
            ],
        )?
        .ok_or_else(|| Error::internal("an insert returned no id"))?;
        let row = ChainRows::written_settlement(self, id)?;
        chain::append(self, EntryKind::Settlement, id, links::settlement_content(&row))?;
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

    fn insert_ask(&mut self, a: &NewAsk) -> Result<i64> {
        let id: i64 = self
            .v(
                "INSERT INTO person_requests (kind, goal_id, revision, task_ref, operation_id, actor, os_uid, os_user, data, at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                p![
                    a.kind.as_str().to_string(),
                    a.goal_id.clone(),
                    a.revision,
                    a.task_ref.map(str::to_string),
                    a.operation_id.cloned(),
                    a.person.actor.clone(),
                    i64::from(a.person.uid),
                    a.person.user.clone(),
                    a.data.to_string(),
                    now_ms()
                ],
            )?
            .ok_or_else(|| Error::internal("an insert returned no id"))?;
        let row = ChainRows::written_ask(self, id)?;
        chain::append(self, links::ask_kind(a.kind), id, links::ask_content(&row))?;
        Ok(id)
    }

    fn insert_request_id(&mut self, r: &NewRequestId) -> Result<()> {
        self.q(
            "INSERT INTO request_ids (request_id, fingerprint, command, at_ms) VALUES ($1, $2, $3, $4)",
            p![r.request_id.to_string(), r.fingerprint.to_string(), r.command.to_string(), now_ms()],
        )?;
        Ok(())
    }

    fn finish_request_id(&mut self, request_id: &str, result: &FirstResult) -> Result<bool> {
        let n = self.q(
            "UPDATE request_ids SET exit_code = $2, output_text = $3, output_json = $4
             WHERE request_id = $1 AND exit_code IS NULL RETURNING 1",
            p![request_id.to_string(), result.exit_code, result.text.clone(), result.json.to_string()],
        )?;
        Ok(n.len() == 1)
    }
}
