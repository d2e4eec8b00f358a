//! Attempts and receipts in SQLite.

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use super::sql::{exec, json_text, one_of, qrow, refusal, rows, Guarded, Sql};
use crate::clock::now_ms;
use crate::cost::Cost;
use crate::error::{Code, Error, Result};
use crate::evidence::Classification;
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::state::{AttemptState, Lifecycle};
use crate::store::attempts::{
    AttemptRecord, AttemptsRead, AttemptsWhere, AttemptsWrite, Finish, GateAsk, GateAttempts, Intent, LeftProcess,
    NewIntent, SameRequest, Unsettled,
};
use crate::store::queries;
use crate::store::LedgerTx;
use providers::process::ProcessId;
use providers::sandbox::Record;
use providers::Handle;

const ATTEMPT_COLUMNS: &str = "id, goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, effect, cost_micros, state, generation, intent_at_ms, dispatched_at_ms, dispatch_detail, finished_at_ms, class, class_rule, class_evidence_ids, class_claim_ids, class_next, unknown_reason, reusable, checkpoint, inputs_at_intent, instruction, sandbox, protected_at_intent, handle, handle_at_ms";

/// The operations with an `effect_unknown` attempt, and those with an
/// attempt between intent and receipt (`engine stores`).
const UNKNOWN_OPERATIONS: &str = "SELECT COUNT(DISTINCT operation_id) FROM attempts WHERE state = 'effect_unknown'";
const IN_DOUBT_OPERATIONS: &str =
    "SELECT COUNT(DISTINCT operation_id) FROM attempts WHERE state IN ('intent_recorded', 'dispatched')";

/// A JSON array of ids (a column of the classification).
fn ids<T: serde::de::DeserializeOwned>(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Vec<T>> {
    let text: Option<String> = r.get(i)?;
    serde_json::from_str(text.as_deref().unwrap_or("[]"))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

/// A value as the JSON its column holds.
fn json_column<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::new(Code::Internal, format!("a column does not serialize: {e}")))
}

/// The classification columns (16..=20), when the attempt has one.
fn classification_from_row(r: &rusqlite::Row) -> rusqlite::Result<Option<Classification>> {
    let Some(class) = r.get(16)? else { return Ok(None) };
    Ok(Some(Classification {
        class,
        rule: r.get::<_, Option<String>>(17)?.unwrap_or_default(),
        evidence_ids: ids(r, 18)?,
        claims: ids(r, 19)?,
        next: r.get::<_, Option<String>>(20)?.unwrap_or_default(),
    }))
}

/// The sandbox status column (JSON), if recorded.
fn sandbox_column(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Option<Record>> {
    json_from_column(r, i)
}

/// The handle column: the provider's JSON for it.
fn handle_from_row(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Option<Handle>> {
    json_from_column(r, i)
}

/// A nullable column holding JSON.
fn json_from_column<T: serde::de::DeserializeOwned>(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Option<T>> {
    let Some(text) = r.get::<_, Option<String>>(i)? else { return Ok(None) };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

fn attempt_from_row(r: &rusqlite::Row) -> rusqlite::Result<AttemptRecord> {
    let classification = classification_from_row(r)?;
    Ok(AttemptRecord {
        id: r.get(0)?,
        goal_id: r.get(1)?,
        revision: r.get(2)?,
        task_ref: r.get(3)?,
        operation_id: r.get(4)?,
        try_no: r.get(5)?,
        kind: r.get(6)?,
        request_digest: r.get(7)?,
        effect: r.get(8)?,
        cost: Cost::from_micros(r.get(9)?),
        state: r.get(10)?,
        generation: r.get(11)?,
        intent_at_ms: r.get(12)?,
        dispatched_at_ms: r.get(13)?,
        dispatch_detail: r.get(14)?,
        finished_at_ms: r.get(15)?,
        classification,
        unknown_reason: r.get(21)?,
        reusable: r.get(22)?,
        checkpoint: r.get(23)?,
        inputs_at_intent: r.get(24)?,
        instruction: r.get(25)?,
        sandbox: sandbox_column(r, 26)?,
        protected_at_intent: r.get(27)?,
        handle: handle_from_row(r, 28)?,
        handle_at_ms: r.get(29)?,
    })
}

impl Sql<'_> {
    /// The attempts matching `condition`, in id order.
    fn attempts_where(&self, condition: &str, params: impl rusqlite::Params) -> Result<Vec<AttemptRecord>> {
        rows(
            self.conn,
            &format!("SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE {condition} ORDER BY id"),
            params,
            attempt_from_row,
        )
    }

    /// Move an attempt through the transition table by `moves` (its
    /// statement for each target state), setting its `extra` columns
    /// (`?3`...) in the same statement.
    fn move_attempt(
        &self,
        id: AttemptId,
        to: AttemptState,
        moves: &Guarded<AttemptState>,
        params: &[&dyn rusqlite::ToSql],
    ) -> Result<()> {
        let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id, &to];
        all.extend_from_slice(params);
        if exec(self.conn, moves.sql(to)?, all.as_slice())? == 1 {
            return Ok(());
        }
        let now: Option<AttemptState> =
            qrow(self.conn, "SELECT state FROM attempts WHERE id = ?1", [id], |r| r.get(0)).optional()?;
        Err(refusal(&format!("attempt {id}"), now, to))
    }
}

/// `UPDATE attempts SET state = ?2{extra} WHERE id = ?1` from a state the
/// transition table allows.
fn move_sql(to: AttemptState, extra: &str) -> String {
    format!(
        "UPDATE attempts SET state = ?2{extra} WHERE id = ?1 AND {}",
        one_of("state", &AttemptState::sources(to), AttemptState::as_str)
    )
}

/// A move setting the state alone (a receipt, a settlement).
static MOVE: Guarded<AttemptState> = Guarded::new(|to| move_sql(to, ""));
/// The move to `dispatched`, with the dispatch's columns.
static DISPATCH: Guarded<AttemptState> =
    Guarded::new(|to| move_sql(to, ", dispatched_at_ms = ?3, dispatch_detail = ?4, process = ?5"));
/// A final move, with the classification's columns.
static FINISH: Guarded<AttemptState> = Guarded::new(|to| move_sql(to, queries::FINISH_COLUMNS));

/// The move to `succeeded`: FINISH's columns with no classification, and
/// the checkpoint the success judged (one statement where there were two).
static SUCCEED: Guarded<AttemptState> = Guarded::new(|to| {
    move_sql(
        to,
        ", finished_at_ms = ?3, class = NULL, class_rule = NULL, class_evidence_ids = NULL, class_claim_ids = NULL,
               class_next = NULL, checkpoint = ?4, reusable = ?5",
    )
});

/// A task's first attempt that may still be unsettled, in any revision.
/// `MIN(id)`, not `ORDER BY id LIMIT 1`: `attempts_by_task` holds a task's
/// attempts in revision order, so an `ORDER BY id` would sort them in a
/// temporary b-tree at every intent; the states as comparisons joined by
/// `OR`, not an `IN` list, which SQLite builds as a temporary table (see
/// `one_of`).
pub(super) const FIRST_UNSETTLED: &str = "SELECT id, state FROM attempts WHERE id = (
   SELECT MIN(id) FROM attempts WHERE goal_id = ?1 AND task_ref = ?2
      AND (state = 'effect_unknown' OR state = 'intent_recorded' OR state = 'dispatched'))";

/// The first attempt of another operation with the same request
/// fingerprint (kept in its request JSON) whose outcome nobody knows: the
/// states read through `attempts_by_state`, few rows, before any JSON.
/// The smallest of one `MIN(id)` a state, not the states `OR`ed with an
/// `ORDER BY id LIMIT 1`: SQLite read that through a multi-index `OR` and
/// sorted it in a temporary b-tree at every intent (the read about 56,000
/// instructions a gate, callgrind; the `OR` and the sort about 11,000 of
/// them); each state's entries
/// of the index are already in id order. NULL when there is none.
pub(super) const SAME_REQUEST_UNSETTLED: &str = "SELECT MIN(id) FROM (
  SELECT MIN(id) AS id FROM attempts WHERE state = 'effect_unknown'
     AND operation_id != ?2 AND json_extract(request_json, '$.fingerprint') = ?1
  UNION ALL SELECT MIN(id) FROM attempts WHERE state = 'intent_recorded' AND goal_id != ?3
     AND operation_id != ?2 AND json_extract(request_json, '$.fingerprint') = ?1
  UNION ALL SELECT MIN(id) FROM attempts WHERE state = 'dispatched' AND goal_id != ?3
     AND operation_id != ?2 AND json_extract(request_json, '$.fingerprint') = ?1)";

/// How many attempts a task has in one revision.
/// The attempts `max_attempts_per_task` counts: a person's stop
/// (`cancelled`) is the person's, not the task's, and consumes none.
pub(super) const ATTEMPT_COUNT: &str =
    "SELECT COUNT(*) FROM attempts WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3 AND state <> 'cancelled'";

/// Whether any attempt of a task, in any revision, was or may have been
/// sent (the states as `OR`ed comparisons: see `FIRST_UNSETTLED`).
/// Was a try of the task sent, or may it have been? Dispatched, resolved
/// or settled — or looked at for its effect (`observation` evidence): only
/// a try that may have been sent is read back, and an effect read back
/// absent does not make it unsent (an engine that died after the intent,
/// before recording the dispatch, leaves such a try `failed` with no
/// dispatch time).
pub(super) const PRIOR_DISPATCH: &str = "SELECT EXISTS(SELECT 1 FROM attempts a WHERE goal_id = ?1 AND task_ref = ?2
   AND (dispatched_at_ms IS NOT NULL
        OR state = 'abandoned' OR state = 'effect_unknown' OR state = 'settled_ok' OR state = 'settled_not_run'
        OR state = 'receipt_recorded' OR state = 'succeeded'
        OR EXISTS (SELECT 1 FROM settlements s WHERE s.attempt_id = a.id)
        OR EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'observation')))";

/// The highest try of an operation so far (0 if none).
pub(super) const LAST_TRY: &str = "SELECT COALESCE(MAX(try_no), 0) FROM attempts WHERE operation_id = ?1";

/// A request digest other than ?2 that operation ?1 was recorded with.
pub(super) const CONFLICTING_REQUEST: &str =
    "SELECT request_digest FROM attempts WHERE operation_id = ?1 AND request_digest != ?2 LIMIT 1";

/// The gate's five reads of one call (`GateAttempts`) as one statement:
/// `ATTEMPT_COUNT`, `FIRST_UNSETTLED`, `PRIOR_DISPATCH`,
/// `CONFLICTING_REQUEST` and `LAST_TRY`, the same subqueries each on its
/// own index, with one bind, step and reset where there were five.
/// ?1 goal, ?2 task, ?3 revision, ?4 operation, ?5 request digest.
pub(super) const GATE_ATTEMPTS: &str = "SELECT
  (SELECT COUNT(*) FROM attempts WHERE goal_id = ?1 AND revision = ?3 AND task_ref = ?2 AND state <> 'cancelled'),
  u.id, u.state,
  (SELECT EXISTS(SELECT 1 FROM attempts a WHERE goal_id = ?1 AND task_ref = ?2
     AND (dispatched_at_ms IS NOT NULL
          OR state = 'abandoned' OR state = 'effect_unknown' OR state = 'settled_ok' OR state = 'settled_not_run'
          OR state = 'receipt_recorded' OR state = 'succeeded'
          OR EXISTS (SELECT 1 FROM settlements s WHERE s.attempt_id = a.id)
          OR EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'observation')))),
  (SELECT request_digest FROM attempts WHERE operation_id = ?4 AND request_digest != ?5 LIMIT 1),
  (SELECT COALESCE(MAX(try_no), 0) FROM attempts WHERE operation_id = ?4)
FROM (SELECT 1) LEFT JOIN (SELECT id, state FROM attempts WHERE id = (
   SELECT MIN(id) FROM attempts WHERE goal_id = ?1 AND task_ref = ?2
      AND (state = 'effect_unknown' OR state = 'intent_recorded' OR state = 'dispatched'))) u ON 1";

impl AttemptsRead for Sql<'_> {
    fn attempt(&self, id: AttemptId) -> Result<AttemptRecord> {
        Ok(qrow(self.conn, &format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = ?1"), [id], attempt_from_row)?)
    }

    fn attempt_state(&self, id: AttemptId) -> Result<AttemptState> {
        Ok(qrow(self.conn, "SELECT state FROM attempts WHERE id = ?1", [id], |r| r.get(0))?)
    }

    fn attempts_matching(&self, which: AttemptsWhere<'_>) -> Result<Vec<AttemptRecord>> {
        let AttemptsWhere::OfTask(..) = which else {
            return self.attempts_where(which.condition(), rusqlite::params_from_iter(which.args()));
        };
        // A task's attempts, read at every process task's baseline: sorted
        // here, not by `ORDER BY id`, which SQLite answered with a sorter
        // opened at every call (`attempts_by_task` holds them in revision
        // order). The other conditions keep their `ORDER BY`: without it
        // SQLite reads a goal's states through `attempts_by_task`, all of
        // the goal's attempts (a no-op re-run's instructions +6 %).
        let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE {}", which.condition());
        let mut found = rows(self.conn, &sql, rusqlite::params_from_iter(which.args()), attempt_from_row)?;
        found.sort_unstable_by_key(|a| a.id);
        Ok(found)
    }

    fn receipt(&self, id: AttemptId) -> Result<Option<Value>> {
        let data: Option<String> =
            qrow(self.conn, "SELECT data FROM receipts WHERE attempt_id = ?1", [id], |r| r.get(0)).optional()?;
        Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
    }

    fn receipt_at(&self, id: AttemptId) -> Result<Option<i64>> {
        Ok(qrow(self.conn, "SELECT at_ms FROM receipts WHERE attempt_id = ?1", [id], |r| r.get(0)).optional()?)
    }

    fn last_try(&self, op: &OperationId) -> Result<i64> {
        Ok(qrow(self.conn, LAST_TRY, [op], |r| r.get(0))?)
    }

    fn first_unsettled_attempt(&self, goal: &GoalId, task_ref: &str) -> Result<Option<(AttemptId, AttemptState)>> {
        Ok(qrow(self.conn, FIRST_UNSETTLED, params![goal, task_ref], |r| Ok((r.get(0)?, r.get(1)?))).optional()?)
    }

    fn same_request_unsettled_id(&self, same: SameRequest<'_>) -> Result<Option<AttemptId>> {
        let params = params![same.fingerprint.as_str(), same.except, same.goal];
        Ok(qrow(self.conn, SAME_REQUEST_UNSETTLED, params, |r| r.get(0))?)
    }

    fn conflicting_request(&self, op: &OperationId, request: &RequestDigest) -> Result<Option<RequestDigest>> {
        Ok(qrow(self.conn, CONFLICTING_REQUEST, params![op, request], |r| r.get(0)).optional()?)
    }

    fn attempt_count(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<u64> {
        let n: i64 = qrow(self.conn, ATTEMPT_COUNT, params![goal, revision, task_ref], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    }

    fn prior_dispatch(&self, goal: &GoalId, task_ref: &str) -> Result<bool> {
        Ok(qrow(self.conn, PRIOR_DISPATCH, params![goal, task_ref], |r| r.get(0))?)
    }

    fn gate_attempts(&self, ask: GateAsk<'_>) -> Result<GateAttempts> {
        let params = params![ask.goal, ask.task_ref, ask.revision, ask.operation, ask.request];
        Ok(qrow(self.conn, GATE_ATTEMPTS, params, |r| {
            let unsettled = match r.get::<_, Option<AttemptId>>(1)? {
                Some(id) => Some((id, r.get(2)?)),
                None => None,
            };
            let count: i64 = r.get(0)?;
            Ok(GateAttempts {
                count: count.max(0) as u64,
                unsettled,
                prior_dispatch: r.get(3)?,
                conflict: r.get(4)?,
                last_try: r.get(5)?,
            })
        })?)
    }

    fn settlement_target(&self, op: &OperationId) -> Result<Option<AttemptRecord>> {
        let id: Option<AttemptId> = qrow(
            self.conn,
            "SELECT id FROM attempts WHERE operation_id = ?1 ORDER BY state = 'effect_unknown' DESC, id DESC LIMIT 1",
            [op],
            |r| r.get(0),
        )
        .optional()?;
        id.map(|id| self.attempt(id)).transpose()
    }

    fn unknown_count(&self, goal: &GoalId) -> Result<u64> {
        let n: i64 = qrow(
            self.conn,
            "SELECT COUNT(*) FROM attempts WHERE goal_id = ?1 AND state = 'effect_unknown'",
            [goal],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }

    fn unsettled_operations(&self) -> Result<Unsettled> {
        let count = |sql: &str| -> Result<u64> {
            let n: i64 = qrow(self.conn, sql, [], |r| r.get(0))?;
            Ok(n.max(0) as u64)
        };
        Ok(Unsettled { unknown: count(UNKNOWN_OPERATIONS)?, in_doubt: count(IN_DOUBT_OPERATIONS)? })
    }

    fn left_processes(&self) -> Result<Vec<LeftProcess>> {
        let rows: Vec<(AttemptId, GoalId, Revision, String, String)> = rows(
            self.conn,
            "SELECT id, goal_id, revision, task_ref, process FROM attempts
              WHERE state IN ('intent_recorded', 'dispatched') AND process IS NOT NULL ORDER BY id",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|(attempt_id, goal_id, revision, task_ref, process)| {
                let process = serde_json::from_str(&process).ok()?;
                Some(LeftProcess { attempt_id, goal_id, revision, task_ref, process })
            })
            .collect())
    }

    fn completed_attempt(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<AttemptId>> {
        Ok(qrow(
            self.conn,
            "SELECT id FROM attempts WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3 AND state IN ('succeeded','settled_ok')
             ORDER BY id DESC LIMIT 1",
            params![goal, revision, task_ref],
            |r| r.get(0),
        )
        .optional()?)
    }
}

impl AttemptsWrite for Sql<'_> {
    fn insert_intent(&mut self, i: &NewIntent) -> Result<Intent> {
        let generation = self.fence().generation();
        exec(self.conn,
            "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, cost_micros, state, generation, intent_at_ms, inputs_at_intent, instruction, sandbox, protected_at_intent)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'intent_recorded', ?11, ?12, ?13, ?14, ?15, ?16)",
            params![i.goal_id, i.revision, i.task_ref, i.operation_id, i.try_no, i.kind, i.request_digest, json_text("request", &i.request_json)?, i.effect, i.cost.micros(), generation, now_ms(), i.inputs_at_intent, i.instruction, json_column(i.sandbox)?, i.protected_at_intent],
        )?;
        let id = AttemptId(self.conn.last_insert_rowid());
        exec(
            self.conn,
            "UPDATE goals SET calls_used = calls_used + 1, cost_used_micros = cost_used_micros + ?2 WHERE id = ?1",
            params![i.goal_id, i.cost.micros()],
        )?;
        Ok(Intent::committed(id))
    }

    fn mark_dispatched(&mut self, intent: Intent, detail: &str, process: Option<&ProcessId>) -> Result<()> {
        let process = process.map(json_column).transpose()?;
        self.move_attempt(intent.attempt_id(), AttemptState::Dispatched, &DISPATCH, &[&now_ms(), &detail, &process])
    }

    fn record_handle(&mut self, intent: Intent, handle: &Handle) -> Result<()> {
        let id = intent.attempt_id();
        let n = exec(
            self.conn,
            "UPDATE attempts SET handle = ?2, handle_at_ms = ?3 WHERE id = ?1 AND state = 'dispatched' AND handle IS NULL",
            params![id, json_column(handle)?, now_ms()],
        )?;
        if n == 1 {
            return Ok(());
        }
        let now: Option<AttemptState> =
            qrow(self.conn, "SELECT state FROM attempts WHERE id = ?1", [id], |r| r.get(0)).optional()?;
        Err(Error::internal(format!(
            "attempt {id}: a handle is recorded once, on a dispatched attempt; it is {}",
            now.map_or("missing".to_string(), |s| s.to_string())
        )))
    }

    fn insert_receipt(&mut self, intent: Intent, data: &Value) -> Result<()> {
        let id = intent.attempt_id();
        self.move_attempt(id, AttemptState::ReceiptRecorded, &MOVE, &[])?;
        exec(self.conn, queries::INSERT_RECEIPT, params![id, now_ms(), json_text("receipt", data)?])?;
        Ok(())
    }

    fn finish_with(&mut self, id: AttemptId, to: AttemptState, f: &Finish<'_>) -> Result<()> {
        // An abandoned attempt keeps counting: it may have gone out before
        // the engine stopped (only a call refused before dispatch is uncounted).
        let columns: [&dyn rusqlite::ToSql; 7] =
            [&now_ms(), &f.class, &f.rule, &f.evidence_ids, &f.claim_ids, &f.next, &f.unknown_reason];
        self.move_attempt(id, to, &FINISH, &columns)
    }

    fn succeed_attempt(&mut self, id: AttemptId, checkpoint: Option<&str>, reusable: bool) -> Result<()> {
        self.move_attempt(id, AttemptState::Succeeded, &SUCCEED, &[&now_ms(), &checkpoint, &reusable])
    }

    fn settle_attempt(&mut self, id: AttemptId, to: AttemptState) -> Result<()> {
        self.move_attempt(id, to, &MOVE, &[])
    }

    fn uncount_call(&mut self, id: AttemptId) -> Result<()> {
        exec(
            self.conn,
            "UPDATE goals SET calls_used = calls_used - 1,
               cost_used_micros = cost_used_micros - (SELECT cost_micros FROM attempts WHERE id = ?1)
             WHERE id = (SELECT goal_id FROM attempts WHERE id = ?1)",
            [id],
        )?;
        Ok(())
    }

    fn record_spending(&mut self, id: AttemptId, spent: Cost) -> Result<()> {
        let n = exec(
            self.conn,
            "UPDATE attempts SET spent_micros = ?2 WHERE id = ?1 AND spent_micros = 0",
            params![id, spent.micros()],
        )?;
        if n != 1 {
            return Err(Error::internal(format!("attempt {id}: its spending was recorded already, or it is gone")));
        }
        exec(
            self.conn,
            "UPDATE goals SET cost_used_micros = cost_used_micros + ?2 WHERE id = (SELECT goal_id FROM attempts WHERE id = ?1)",
            params![id, spent.micros()],
        )?;
        Ok(())
    }

    fn set_attempt_checkpoint(&mut self, id: AttemptId, checkpoint: Option<&str>, reusable: bool) -> Result<()> {
        exec(
            self.conn,
            "UPDATE attempts SET checkpoint = ?2, reusable = ?3 WHERE id = ?1",
            params![id, checkpoint, reusable],
        )?;
        Ok(())
    }
}
