//! Attempts and receipts in PostgreSQL. Every write about an attempt
//! checks its task's claim first (`fence_attempt`).

use serde_json::Value;
use tokio_postgres::Row;

use super::client::{p, Param};
use super::sql::{get, json_text, param, refusal, words, PgSql};
use crate::clock::now_ms;
use crate::cost::Cost;
use crate::error::{Code, Error, Result};
use crate::evidence::Classification;
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::state::{AttemptState, Lifecycle};
use crate::store::attempts::{
    AttemptRecord, AttemptsRead, AttemptsWhere, AttemptsWrite, Finish, Intent, LeftProcess, NewIntent, SameRequest,
    Unsettled,
};
use crate::store::queries;
use crate::store::LedgerTx;
use providers::process::ProcessId;
use providers::Handle;

pub(super) const ATTEMPT_COLUMNS: &str = "id, goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, effect, cost_micros, state, generation, intent_at_ms, dispatched_at_ms, dispatch_detail, finished_at_ms, class, class_rule, class_evidence_ids, class_claim_ids, class_next, unknown_reason, reusable, checkpoint, inputs_at_intent, instruction, protected_at_intent, sandbox, handle, handle_at_ms";

/// The operations with an `effect_unknown` attempt, and those with an
/// attempt between intent and receipt (`engine stores`).
const UNKNOWN_OPERATIONS: &str = "SELECT COUNT(DISTINCT operation_id) FROM attempts WHERE state = 'effect_unknown'";
const IN_DOUBT_OPERATIONS: &str =
    "SELECT COUNT(DISTINCT operation_id) FROM attempts WHERE state IN ('intent_recorded', 'dispatched')";

/// A JSON array of ids (a column of the classification).
fn ids<T: serde::de::DeserializeOwned>(r: &Row, i: usize) -> Result<Vec<T>> {
    let text: Option<String> = get(r, i)?;
    serde_json::from_str(text.as_deref().unwrap_or("[]"))
        .map_err(|e| Error::internal(format!("an attempt's id list does not parse: {e}")))
}

fn classification_from_row(r: &Row) -> Result<Option<Classification>> {
    let Some(class) = get(r, 16)? else { return Ok(None) };
    Ok(Some(Classification {
        class,
        rule: get::<Option<String>>(r, 17)?.unwrap_or_default(),
        evidence_ids: ids(r, 18)?,
        claims: ids(r, 19)?,
        next: get::<Option<String>>(r, 20)?.unwrap_or_default(),
    }))
}

pub(super) fn attempt_from_row(r: &Row) -> Result<AttemptRecord> {
    Ok(AttemptRecord {
        id: get(r, 0)?,
        goal_id: get(r, 1)?,
        revision: get(r, 2)?,
        task_ref: get(r, 3)?,
        operation_id: get(r, 4)?,
        try_no: get(r, 5)?,
        kind: get(r, 6)?,
        request_digest: get(r, 7)?,
        effect: get(r, 8)?,
        cost: Cost::from_micros(get(r, 9)?),
        state: get(r, 10)?,
        generation: get(r, 11)?,
        intent_at_ms: get(r, 12)?,
        dispatched_at_ms: get(r, 13)?,
        dispatch_detail: get(r, 14)?,
        finished_at_ms: get(r, 15)?,
        classification: classification_from_row(r)?,
        unknown_reason: get(r, 21)?,
        reusable: get(r, 22)?,
        checkpoint: get(r, 23)?,
        inputs_at_intent: get(r, 24)?,
        instruction: get(r, 25)?,
        protected_at_intent: get(r, 26)?,
        sandbox: json_column(r, 27)?,
        handle: json_column(r, 28)?,
        handle_at_ms: get(r, 29)?,
    })
}

/// A nullable column holding JSON (the sandbox status, the handle).
fn json_column<T: serde::de::DeserializeOwned>(r: &Row, i: usize) -> Result<Option<T>> {
    let Some(text) = get::<Option<String>>(r, i)? else { return Ok(None) };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| Error::new(Code::StoreCorrupt, format!("an attempt's JSON column does not parse: {e}")))
}

impl PgSql<'_> {
    fn attempts_where(&self, condition: &str, params: Vec<Param>) -> Result<Vec<AttemptRecord>> {
        let rows =
            self.q(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE {condition} ORDER BY id"), params)?;
        rows.iter().map(attempt_from_row).collect()
    }

    /// Move an attempt through the transition table, setting `extra`
    /// columns (`$3`...) in the same statement.
    fn move_attempt(&mut self, id: AttemptId, to: AttemptState, extra: &str, params: Vec<Param>) -> Result<()> {
        self.fence_attempt(id)?;
        let sql = format!(
            "UPDATE attempts SET state = $2{extra} WHERE id = $1 AND state IN ({}) RETURNING 1",
            words(&AttemptState::sources(to), AttemptState::as_str)
        );
        let mut all: Vec<Param> = p![id, to];
        all.extend(params);
        if !self.q(&sql, all)?.is_empty() {
            return Ok(());
        }
        let now: Option<AttemptState> = self.v("SELECT state FROM attempts WHERE id = $1", p![id])?;
        Err(refusal(&format!("attempt {id}"), now, to))
    }
}

impl AttemptsRead for PgSql<'_> {
    fn attempt(&self, id: AttemptId) -> Result<AttemptRecord> {
        let r = self
            .q1(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = $1"), p![id])?
            .ok_or_else(|| Error::internal(format!("attempt {id} is not in the ledger")))?;
        attempt_from_row(&r)
    }

    fn attempt_state(&self, id: AttemptId) -> Result<AttemptState> {
        let state: Option<AttemptState> = self.v("SELECT state FROM attempts WHERE id = $1", p![id])?;
        state.ok_or_else(|| Error::internal(format!("attempt {id} is not in the ledger")))
    }

    fn attempts_matching(&self, which: AttemptsWhere<'_>) -> Result<Vec<AttemptRecord>> {
        let params = which.args().into_iter().map(param).collect();
        self.attempts_where(&queries::postgres(which.condition()), params)
    }

    fn receipt(&self, id: AttemptId) -> Result<Option<Value>> {
        let data: Option<String> = self.v("SELECT data FROM receipts WHERE attempt_id = $1", p![id])?;
        Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
    }

    fn receipt_at(&self, id: AttemptId) -> Result<Option<i64>> {
        self.v("SELECT at_ms FROM receipts WHERE attempt_id = $1", p![id])
    }

    fn last_try(&self, op: &OperationId) -> Result<i64> {
        Ok(self
            .v("SELECT COALESCE(MAX(try_no), 0)::BIGINT FROM attempts WHERE operation_id = $1", p![op.clone()])?
            .unwrap_or(0))
    }

    fn first_unsettled_attempt(&self, goal: &GoalId, task_ref: &str) -> Result<Option<(AttemptId, AttemptState)>> {
        let row = self.q1(
            "SELECT id, state FROM attempts WHERE goal_id = $1 AND task_ref = $2
               AND state IN ('effect_unknown','intent_recorded','dispatched') ORDER BY id LIMIT 1",
            p![goal.clone(), task_ref.to_string()],
        )?;
        row.map(|r| Ok((get(&r, 0)?, get(&r, 1)?))).transpose()
    }

    fn same_request_unsettled_id(&self, same: SameRequest<'_>) -> Result<Option<AttemptId>> {
        self.v(
            "SELECT id FROM attempts WHERE state IN ('effect_unknown','intent_recorded','dispatched')
               AND (state = 'effect_unknown' OR goal_id != $3) AND operation_id != $2
               AND (request_json::jsonb ->> 'fingerprint') = $1 ORDER BY id LIMIT 1",
            p![same.fingerprint.as_str().to_string(), same.except.clone(), same.goal.clone()],
        )
    }

    fn conflicting_request(&self, op: &OperationId, request: &RequestDigest) -> Result<Option<RequestDigest>> {
        self.v(
            "SELECT request_digest FROM attempts WHERE operation_id = $1 AND request_digest != $2 LIMIT 1",
            p![op.clone(), request.clone()],
        )
    }

    fn attempt_count(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<u64> {
        let n: i64 = self
            .v(
                // A person's stop (`cancelled`) consumes no attempt.
                "SELECT COUNT(*) FROM attempts WHERE goal_id = $1 AND revision = $2 AND task_ref = $3 AND state <> 'cancelled'",
                p![goal.clone(), revision, task_ref.to_string()],
            )?
            .unwrap_or(0);
        Ok(n.max(0) as u64)
    }

    fn prior_dispatch(&self, goal: &GoalId, task_ref: &str) -> Result<bool> {
        Ok(self
            .v(
                "SELECT EXISTS(SELECT 1 FROM attempts a WHERE goal_id = $1 AND task_ref = $2
                   AND (dispatched_at_ms IS NOT NULL
                        OR state IN ('abandoned','effect_unknown','settled_ok','settled_not_run','receipt_recorded','succeeded')
                        OR EXISTS (SELECT 1 FROM settlements s WHERE s.attempt_id = a.id)
                        OR EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'observation')))",
                p![goal.clone(), task_ref.to_string()],
            )?
            .unwrap_or(false))
    }

    fn settlement_target(&self, op: &OperationId) -> Result<Option<AttemptRecord>> {
        let id: Option<AttemptId> = self.v(
            "SELECT id FROM attempts WHERE operation_id = $1 ORDER BY (state = 'effect_unknown') DESC, id DESC LIMIT 1",
            p![op.clone()],
        )?;
        id.map(|id| self.attempt(id)).transpose()
    }

    fn unknown_count(&self, goal: &GoalId) -> Result<u64> {
        let n: i64 = self
            .v("SELECT COUNT(*) FROM attempts WHERE goal_id = $1 AND state = 'effect_unknown'", p![goal.clone()])?
            .unwrap_or(0);
        Ok(n.max(0) as u64)
    }

    fn unsettled_operations(&self) -> Result<Unsettled> {
        let count = |sql: &str| -> Result<u64> { Ok(self.v::<i64>(sql, p![])?.unwrap_or(0).max(0) as u64) };
        Ok(Unsettled { unknown: count(UNKNOWN_OPERATIONS)?, in_doubt: count(IN_DOUBT_OPERATIONS)? })
    }

    fn left_processes(&self) -> Result<Vec<LeftProcess>> {
        // On a shared store a process is ended by the worker that takes
        // its task over (on the host that ran it), not by whoever starts.
        Ok(Vec::new())
    }

    fn completed_attempt(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<AttemptId>> {
        self.v(
            "SELECT id FROM attempts WHERE goal_id = $1 AND revision = $2 AND task_ref = $3 AND state IN ('succeeded','settled_ok')
             ORDER BY id DESC LIMIT 1",
            p![goal.clone(), revision, task_ref.to_string()],
        )
    }
}

impl AttemptsWrite for PgSql<'_> {
    fn insert_intent(&mut self, i: &NewIntent) -> Result<Intent> {
        self.fence_task(i.goal_id, i.task_ref)?;
        // Stamped with the task's claim generation (the fence it was sent under).
        let generation = self
            .writer
            .as_ref()
            .and_then(|w| w.book.generation(i.goal_id, i.task_ref))
            .unwrap_or(self.fence().generation());
        let id: AttemptId = self
            .v(
                "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, cost_micros, state, generation, intent_at_ms, inputs_at_intent, instruction, protected_at_intent, sandbox)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'intent_recorded', $11, $12, $13, $14, $15, $16) RETURNING id",
                p![
                    i.goal_id.clone(),
                    i.revision,
                    i.task_ref.to_string(),
                    i.operation_id.clone(),
                    i.try_no,
                    i.kind,
                    i.request_digest.clone(),
                    i.request_json.to_string(),
                    i.effect,
                    i.cost.micros(),
                    generation,
                    now_ms(),
                    i.inputs_at_intent.map(str::to_string),
                    i.instruction.map(str::to_string),
                    i.protected_at_intent.map(str::to_string),
                    json_text("a sandbox status", i.sandbox)?
                ],
            )?
            .ok_or_else(|| Error::internal("an insert returned no id"))?;
        if let Some(w) = self.writer.as_ref() {
            w.book.remember_attempt(id, (i.goal_id.clone(), i.task_ref.to_string()));
        }
        self.q(
            "UPDATE goals SET calls_used = calls_used + 1, cost_used_micros = cost_used_micros + $2 WHERE id = $1",
            p![i.goal_id.clone(), i.cost.micros()],
        )?;
        Ok(Intent::committed(id))
    }

    fn mark_dispatched(&mut self, intent: Intent, detail: &str, process: Option<&ProcessId>) -> Result<()> {
        let process = process.map(|p| json_text("a process", p)).transpose()?;
        self.move_attempt(
            intent.attempt_id(),
            AttemptState::Dispatched,
            ", dispatched_at_ms = $3, dispatch_detail = $4, process = $5",
            p![now_ms(), detail.to_string(), process],
        )
    }

    fn record_handle(&mut self, intent: Intent, handle: &Handle) -> Result<()> {
        let id = intent.attempt_id();
        self.fence_attempt(id)?;
        let done = self.q(
            "UPDATE attempts SET handle = $2, handle_at_ms = $3
             WHERE id = $1 AND state = 'dispatched' AND handle IS NULL RETURNING 1",
            p![id, json_text("a handle", handle)?, now_ms()],
        )?;
        if done.len() == 1 {
            return Ok(());
        }
        let now: Option<String> = self.v("SELECT state FROM attempts WHERE id = $1", p![id])?;
        Err(Error::internal(format!(
            "attempt {id}: a handle is recorded once, on a dispatched attempt; it is {}",
            now.as_deref().unwrap_or("missing")
        )))
    }

    fn insert_receipt(&mut self, intent: Intent, data: &Value) -> Result<()> {
        let id = intent.attempt_id();
        self.move_attempt(id, AttemptState::ReceiptRecorded, "", p![])?;
        self.q(&queries::postgres(queries::INSERT_RECEIPT), p![id, now_ms(), data.to_string()])?;
        Ok(())
    }

    fn finish_with(&mut self, id: AttemptId, to: AttemptState, f: &Finish<'_>) -> Result<()> {
        let (rule, next) = (f.rule.map(str::to_string), f.next.map(str::to_string));
        let (evidence, claims) = (f.evidence_ids.clone(), f.claim_ids.clone());
        let columns = p![now_ms(), f.class, rule, evidence, claims, next, f.unknown_reason];
        self.move_attempt(id, to, &queries::postgres(queries::FINISH_COLUMNS), columns)
    }

    fn settle_attempt(&mut self, id: AttemptId, to: AttemptState) -> Result<()> {
        self.move_attempt(id, to, "", p![])
    }

    fn uncount_call(&mut self, id: AttemptId) -> Result<()> {
        self.fence_attempt(id)?;
        self.q(
            "UPDATE goals SET calls_used = calls_used - 1,
               cost_used_micros = cost_used_micros - (SELECT cost_micros FROM attempts WHERE id = $1)
             WHERE id = (SELECT goal_id FROM attempts WHERE id = $1)",
            p![id],
        )?;
        Ok(())
    }

    fn record_spending(&mut self, id: AttemptId, spent: Cost) -> Result<()> {
        self.fence_attempt(id)?;
        let rows = self.q(
            "UPDATE attempts SET spent_micros = $2 WHERE id = $1 AND spent_micros = 0 RETURNING goal_id",
            p![id, spent.micros()],
        )?;
        if rows.len() != 1 {
            return Err(Error::internal(format!("attempt {id}: its spending was recorded already, or it is gone")));
        }
        self.q(
            "UPDATE goals SET cost_used_micros = cost_used_micros + $2 WHERE id = (SELECT goal_id FROM attempts WHERE id = $1)",
            p![id, spent.micros()],
        )?;
        Ok(())
    }

    fn set_attempt_checkpoint(&mut self, id: AttemptId, checkpoint: Option<&str>, reusable: bool) -> Result<()> {
        self.fence_attempt(id)?;
        self.q(
            "UPDATE attempts SET checkpoint = $2, reusable = $3 WHERE id = $1",
            p![id, checkpoint.map(str::to_string), reusable],
        )?;
        Ok(())
    }
}
