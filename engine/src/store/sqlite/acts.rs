//! A person's acts in SQLite: approvals, settlements, the retries, repairs
//! and revisions a person asks for, the requests a person is asked to
//! approve, and `--request-id`s. Every act is appended to the act chain
//! (`chain.rs`) in the transaction that records it.

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use super::chain;
use super::sql::{exec, qrow, rows, Sql};
use crate::clock::now_ms;
use crate::cost::Cost;
use crate::error::{Code, Error, Result};
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId};
use crate::store::acts::{
    ActRef, ActsRead, ActsWrite, ApprovalRecord, AskKind, AskRecord, FirstResult, NewApproval, NewAsk, NewRequestId,
    NewSettlement, OpenApproval, PendingRequest, RequestIdRecord, SettlementRecord, Tampered,
};
use crate::store::chain::{self as links, ChainRows, EntryKind};

/// A person's act row, read by `fields`; one that does not read as the
/// engine wrote it (a value its column cannot hold) was written outside
/// the engine: `STORE_TAMPERED` naming the row, as the act chain names it,
/// wherever it is read.
fn as_written<T>(
    table: &'static str,
    r: &rusqlite::Row,
    fields: fn(&rusqlite::Row) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let carried = |e: Error| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Null, Box::new(e));
    fields(r).map_err(|e| match (r.get::<_, i64>(0), Error::from(e)) {
        (Ok(id), e) if e.code == Code::StoreCorrupt => carried(crate::store::chain::tampered(
            table,
            id,
            &format!("does not read as the engine wrote it ({})", e.message),
        )),
        (_, e) => carried(e),
    })
}

pub(super) const APPROVAL_COLUMNS: &str =
    "id, operation_id, goal_id, revision, task_ref, request_digest, plan_digest, \
     actor, note, at_ms, consumed_by, voided_by, os_uid, os_user, cost_micros, expires_at_ms";

/// The same, read while migrating from before schema 13 (no cost yet):
/// the acts chained at schema 6 bind no cost.
pub(super) const APPROVAL_COLUMNS_BEFORE_COST: &str =
    "id, operation_id, goal_id, revision, task_ref, request_digest, plan_digest, \
     actor, note, at_ms, consumed_by, voided_by, os_uid, os_user, NULL, NULL";

pub(super) fn approval_from_row(r: &rusqlite::Row) -> rusqlite::Result<ApprovalRecord> {
    as_written("approvals", r, approval_fields)
}

fn approval_fields(r: &rusqlite::Row) -> rusqlite::Result<ApprovalRecord> {
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
        uid: r.get(12)?,
        user: r.get(13)?,
        cost: r.get::<_, Option<i64>>(14)?.map(Cost::from_micros),
        expires_at_ms: r.get(15)?,
    })
}

/// The columns of a settlement, read from `settlements s`.
pub(super) const SETTLEMENT_COLUMNS: &str =
    "s.id, s.attempt_id, s.operation_id, s.outcome, s.actor, s.note, s.evidence_blob, s.at_ms, s.os_uid, s.os_user";

pub(super) fn settlement_from_row(r: &rusqlite::Row) -> rusqlite::Result<SettlementRecord> {
    as_written("settlements", r, settlement_fields)
}

fn settlement_fields(r: &rusqlite::Row) -> rusqlite::Result<SettlementRecord> {
    Ok(SettlementRecord {
        id: r.get(0)?,
        attempt_id: r.get(1)?,
        operation_id: r.get(2)?,
        outcome: r.get(3)?,
        actor: r.get(4)?,
        note: r.get(5)?,
        evidence_blob: r.get(6)?,
        at_ms: r.get(7)?,
        uid: r.get(8)?,
        user: r.get(9)?,
    })
}

pub(super) const ASK_COLUMNS: &str =
    "id, kind, goal_id, revision, task_ref, operation_id, actor, os_uid, os_user, data, at_ms";

pub(super) fn ask_from_row(r: &rusqlite::Row) -> rusqlite::Result<AskRecord> {
    as_written("person_requests", r, ask_fields)
}

fn ask_fields(r: &rusqlite::Row) -> rusqlite::Result<AskRecord> {
    let kind: String = r.get(1)?;
    let kind = AskKind::parse(&kind).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            1,
            rusqlite::types::Type::Text,
            format!("unknown ask `{kind}`").into(),
        )
    })?;
    let data: String = r.get(9)?;
    let data: Value = serde_json::from_str(&data)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(9, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(AskRecord {
        id: r.get(0)?,
        kind,
        goal_id: r.get(2)?,
        revision: r.get(3)?,
        task_ref: r.get(4)?,
        operation_id: r.get(5)?,
        actor: r.get(6)?,
        uid: r.get(7)?,
        user: r.get(8)?,
        data,
        at_ms: r.get(10)?,
    })
}

impl ActsRead for Sql<'_> {
    fn open_approvals(&self, op: &OperationId) -> Result<Vec<OpenApproval>> {
        rows(
            self.conn,
            "SELECT id, request_digest, plan_digest, revision, cost_micros, expires_at_ms FROM approvals
             WHERE operation_id = ?1 AND consumed_by IS NULL AND voided_by IS NULL ORDER BY id DESC",
            [op],
            |r| {
                Ok(OpenApproval {
                    id: r.get(0)?,
                    request_digest: r.get(1)?,
                    plan_digest: r.get(2)?,
                    revision: r.get(3)?,
                    cost: r.get::<_, Option<i64>>(4)?.map(Cost::from_micros),
                    expires_at_ms: r.get(5)?,
                })
            },
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

    fn settlements_of_attempt(&self, attempt: AttemptId) -> Result<Vec<SettlementRecord>> {
        rows(
            self.conn,
            &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.attempt_id = ?1 ORDER BY s.id"),
            [attempt],
            settlement_from_row,
        )
    }

    fn asks_of_goal(&self, goal: &GoalId) -> Result<Vec<AskRecord>> {
        rows(
            self.conn,
            &format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE goal_id = ?1 ORDER BY id"),
            [goal],
            ask_from_row,
        )
    }

    fn check_on_chain(&self, act: ActRef) -> Result<()> {
        chain::check(self.conn, act)
    }

    fn unvouched(&self, acts: &[ActRef]) -> Result<Vec<Tampered>> {
        links::unvouched(self.conn, acts)
    }

    fn every_act(&self) -> Result<Vec<ActRef>> {
        links::ChainRows::acts(self.conn)
    }

    fn request_id(&self, id: &str) -> Result<Option<RequestIdRecord>> {
        let row = qrow(
            self.conn,
            "SELECT request_id, fingerprint, command, at_ms, exit_code, output_text, output_json
             FROM request_ids WHERE request_id = ?1",
            [id],
            |r| {
                let texts: (String, String, String, i64, Option<i32>, Option<String>, Option<String>) =
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?);
                Ok(texts)
            },
        )
        .optional()?;
        let Some((request_id, fingerprint, command, at_ms, exit_code, text, json)) = row else { return Ok(None) };
        let parse = |s: &str| {
            serde_json::from_str::<Value>(s).map_err(|e| {
                // A value its column cannot hold: damage, never a bug.
                Error::new(
                    Code::StoreCorrupt,
                    format!("request id {request_id}: a stored document does not parse: {e}"),
                )
            })
        };
        let result = match (exit_code, text, json) {
            (Some(exit_code), Some(text), Some(json)) => Some(FirstResult { exit_code, text, json: parse(&json)? }),
            _ => None,
        };
        Ok(Some(RequestIdRecord { command: parse(&command)?, request_id, fingerprint, at_ms, result }))
    }
}

impl ActsWrite for Sql<'_> {
    fn insert_approval(&mut self, a: &NewApproval) -> Result<ApprovalId> {
        exec(self.conn,
            "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, os_uid, os_user, cost_micros, expires_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![a.operation_id, a.goal_id, a.revision, a.task_ref, a.request_digest, a.plan_digest, a.person.actor, a.note, now_ms(), a.person.uid, a.person.user, a.cost.micros(), a.expires_at_ms],
        )?;
        let id = ApprovalId(self.conn.last_insert_rowid());
        let row = ChainRows::written_approval(self.conn, id)?;
        chain::append(self.conn, EntryKind::Approval, id.get(), links::approval_content(&row))?;
        Ok(id)
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
        chain::append(self.conn, EntryKind::ApprovalSpent, id.get(), links::spent_content(id, by))?;
        Ok(())
    }

    fn void_approvals(&mut self, ids: &[ApprovalId], by: AttemptId) -> Result<()> {
        for id in ids {
            let n = exec(
                self.conn,
                "UPDATE approvals SET voided_by = ?2 WHERE id = ?1 AND consumed_by IS NULL AND voided_by IS NULL",
                params![id, by],
            )?;
            if n == 1 {
                chain::append(self.conn, EntryKind::ApprovalVoided, id.get(), links::spent_content(*id, by))?;
            }
        }
        Ok(())
    }

    fn insert_settlement(&mut self, s: &NewSettlement) -> Result<()> {
        exec(self.conn,
            "INSERT INTO settlements (attempt_id, operation_id, outcome, actor, note, evidence_blob, at_ms, os_uid, os_user) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![s.attempt_id, s.operation_id, s.outcome, s.person.actor, s.note, s.evidence_blob, now_ms(), s.person.uid, s.person.user],
        )?;
        let id = self.conn.last_insert_rowid();
        let row = ChainRows::written_settlement(self.conn, id)?;
        chain::append(self.conn, EntryKind::Settlement, id, links::settlement_content(&row))?;
        Ok(())
    }

    fn insert_ask(&mut self, a: &NewAsk) -> Result<i64> {
        exec(
            self.conn,
            "INSERT INTO person_requests (kind, goal_id, revision, task_ref, operation_id, actor, os_uid, os_user, data, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                a.kind.as_str(),
                a.goal_id,
                a.revision,
                a.task_ref,
                a.operation_id,
                a.person.actor,
                a.person.uid,
                a.person.user,
                a.data.to_string(),
                now_ms()
            ],
        )?;
        let id = self.conn.last_insert_rowid();
        let row = ChainRows::written_ask(self.conn, id)?;
        chain::append(self.conn, links::ask_kind(a.kind), id, links::ask_content(&row))?;
        Ok(id)
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

    fn insert_request_id(&mut self, r: &NewRequestId) -> Result<()> {
        exec(
            self.conn,
            "INSERT INTO request_ids (request_id, fingerprint, command, at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![r.request_id, r.fingerprint, r.command.to_string(), now_ms()],
        )?;
        Ok(())
    }

    fn finish_request_id(&mut self, request_id: &str, result: &FirstResult) -> Result<bool> {
        let n = exec(
            self.conn,
            "UPDATE request_ids SET exit_code = ?2, output_text = ?3, output_json = ?4
             WHERE request_id = ?1 AND exit_code IS NULL",
            params![request_id, result.exit_code, result.text, result.json.to_string()],
        )?;
        Ok(n == 1)
    }
}
