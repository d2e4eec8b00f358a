//! Typed reads and writes of the ledger's records. Writers take a
//! `Transaction` (so the caller decides what is one commit); readers take a
//! `Connection`.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::Serialize;
use serde_json::Value;

use super::now_ms;
use crate::error::{Error, Result};
use crate::evidence::{Evidence, Recorded};
use crate::state::{AttemptState, GoalState, TaskState};

#[derive(Debug, Clone, Serialize)]
pub struct GoalRow {
    pub id: String,
    pub active_revision: i64,
    pub state: GoalState,
    pub first_run_at_ms: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RevisionRow {
    pub goal_id: String,
    pub revision: i64,
    pub parent: Option<i64>,
    pub plan_digest: String,
    pub goal_contract: String,
    pub plan_json: String,
    pub plan_path: String,
    pub workspace: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    pub task_ref: String,
    pub state: TaskState,
    pub operation_id: String,
    pub request_digest: String,
    pub meaning: String,
    pub dependencies: String,
    pub detail: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub id: i64,
    pub goal_id: String,
    pub revision: i64,
    pub task_ref: String,
    pub operation_id: String,
    pub try_no: i64,
    pub kind: String,
    pub request_digest: String,
    pub effect: String,
    pub cost: f64,
    pub state: AttemptState,
    pub generation: i64,
    pub intent_at_ms: i64,
    pub dispatched_at_ms: Option<i64>,
    pub dispatch_detail: Option<String>,
    pub finished_at_ms: Option<i64>,
    pub classification: Option<Value>,
    pub unknown_reason: Option<String>,
    pub reusable: Option<bool>,
    pub checkpoint: Option<String>,
    pub inputs_at_intent: Option<String>,
    pub instruction: Option<String>,
}

/// Proof that an attempt's intent is committed: only `insert_intent` (a new
/// intent) and `AttemptRow::intent` (one read back from the ledger) build
/// one, and dispatch and receipt records take one — so a receipt cannot be
/// written for an attempt without its intent (the schema's foreign key says
/// so again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intent(i64);

impl Intent {
    pub fn attempt_id(self) -> i64 {
        self.0
    }
}

impl AttemptRow {
    pub fn intent(&self) -> Intent {
        Intent(self.id)
    }
}

const ATTEMPT_COLUMNS: &str = "id, goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, effect, cost, state, generation, intent_at_ms, dispatched_at_ms, dispatch_detail, finished_at_ms, classification, unknown_reason, reusable, checkpoint, inputs_at_intent, instruction";

fn attempt_from_row(r: &rusqlite::Row) -> rusqlite::Result<AttemptRow> {
    let classification: Option<String> = r.get(16)?;
    Ok(AttemptRow {
        id: r.get(0)?,
        goal_id: r.get(1)?,
        revision: r.get(2)?,
        task_ref: r.get(3)?,
        operation_id: r.get(4)?,
        try_no: r.get(5)?,
        kind: r.get(6)?,
        request_digest: r.get(7)?,
        effect: r.get(8)?,
        cost: r.get(9)?,
        state: r.get(10)?,
        generation: r.get(11)?,
        intent_at_ms: r.get(12)?,
        dispatched_at_ms: r.get(13)?,
        dispatch_detail: r.get(14)?,
        finished_at_ms: r.get(15)?,
        classification: classification.and_then(|c| serde_json::from_str(&c).ok()),
        unknown_reason: r.get(17)?,
        reusable: r.get(18)?,
        checkpoint: r.get(19)?,
        inputs_at_intent: r.get(20)?,
        instruction: r.get(21)?,
    })
}

pub fn goal(conn: &Connection, id: &str) -> Result<Option<GoalRow>> {
    Ok(crate::store::qrow(
        conn,
        "SELECT id, active_revision, state, first_run_at_ms FROM goals WHERE id = ?1",
        [id],
        |r| Ok(GoalRow { id: r.get(0)?, active_revision: r.get(1)?, state: r.get(2)?, first_run_at_ms: r.get(3)? }),
    )
    .optional()?)
}

/// The goal most recently touched (for commands run without `--goal`).
pub fn latest_goal(conn: &Connection) -> Result<Option<GoalRow>> {
    let id: Option<String> =
        crate::store::qrow(conn, "SELECT id FROM goals ORDER BY updated_seq DESC, rowid DESC LIMIT 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    match id {
        Some(id) => goal(conn, &id),
        None => Ok(None),
    }
}

pub fn revision(conn: &Connection, goal_id: &str, revision: i64) -> Result<RevisionRow> {
    crate::store::qrow(
        conn,
        "SELECT goal_id, revision, parent, plan_digest, goal_contract, plan_json, plan_path, workspace, reason
         FROM revisions WHERE goal_id = ?1 AND revision = ?2",
        params![goal_id, revision],
        |r| {
            Ok(RevisionRow {
                goal_id: r.get(0)?,
                revision: r.get(1)?,
                parent: r.get(2)?,
                plan_digest: r.get(3)?,
                goal_contract: r.get(4)?,
                plan_json: r.get(5)?,
                plan_path: r.get(6)?,
                workspace: r.get(7)?,
                reason: r.get(8)?,
            })
        },
    )
    .optional()?
    .ok_or_else(|| Error::internal(format!("goal {goal_id} has no revision {revision}")))
}

/// The plan digest of one revision, without reading its plan JSON.
pub fn revision_plan_digest(conn: &Connection, goal_id: &str, revision: i64) -> Result<String> {
    conn.prepare_cached("SELECT plan_digest FROM revisions WHERE goal_id = ?1 AND revision = ?2")?
        .query_row(params![goal_id, revision], |r| r.get(0))
        .optional()?
        .ok_or_else(|| Error::internal(format!("goal {goal_id} has no revision {revision}")))
}

pub fn insert_goal(tx: &Transaction, id: &str, revision: i64, seq: i64) -> Result<()> {
    crate::store::exec(
        tx,
        "INSERT INTO goals (id, active_revision, state, first_run_at_ms, updated_seq) VALUES (?1, ?2, 'open', ?3, ?4)",
        params![id, revision, now_ms(), seq],
    )?;
    Ok(())
}

pub fn set_goal_state(tx: &Transaction, id: &str, state: GoalState, seq: i64) -> Result<()> {
    crate::store::exec(tx, "UPDATE goals SET state = ?2, updated_seq = ?3 WHERE id = ?1", params![id, state, seq])?;
    Ok(())
}

pub fn touch_goal(tx: &Transaction, id: &str, seq: i64) -> Result<()> {
    crate::store::exec(tx, "UPDATE goals SET updated_seq = ?2 WHERE id = ?1", params![id, seq])?;
    Ok(())
}

pub struct NewRevision<'a> {
    pub goal_id: &'a str,
    pub revision: i64,
    pub parent: Option<i64>,
    pub plan_digest: &'a str,
    pub goal_contract: &'a str,
    pub plan_json: &'a str,
    pub plan_path: &'a str,
    pub workspace: &'a str,
    pub reason: Option<&'a str>,
}

pub fn insert_revision(tx: &Transaction, r: &NewRevision) -> Result<()> {
    crate::store::exec(tx,
        "INSERT INTO revisions (goal_id, revision, parent, plan_digest, goal_contract, plan_json, plan_path, workspace, reason, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![r.goal_id, r.revision, r.parent, r.plan_digest, r.goal_contract, r.plan_json, r.plan_path, r.workspace, r.reason, now_ms()],
    )?;
    Ok(())
}

#[allow(clippy::too_many_arguments)] // one column each; a struct would only rename them
pub fn insert_task(
    tx: &Transaction,
    goal_id: &str,
    revision: i64,
    task_ref: &str,
    meaning: &str,
    dependencies: &str,
    operation_id: &str,
    request_digest: &str,
) -> Result<()> {
    crate::store::exec(
        tx,
        "INSERT INTO tasks (goal_id, revision, task_ref, state, meaning, dependencies, operation_id, request_digest)
         VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7)",
        params![goal_id, revision, task_ref, meaning, dependencies, operation_id, request_digest],
    )?;
    Ok(())
}

pub fn tasks(conn: &Connection, goal_id: &str, revision: i64) -> Result<Vec<TaskRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT task_ref, state, operation_id, request_digest, meaning, dependencies, detail FROM tasks WHERE goal_id = ?1 AND revision = ?2",
    )?;
    let rows = stmt.query_map(params![goal_id, revision], task_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn task_from_row(r: &rusqlite::Row) -> rusqlite::Result<TaskRow> {
    let detail: String = r.get(6)?;
    Ok(TaskRow {
        task_ref: r.get(0)?,
        state: r.get(1)?,
        operation_id: r.get(2)?,
        request_digest: r.get(3)?,
        meaning: r.get(4)?,
        dependencies: r.get(5)?,
        detail: serde_json::from_str(&detail).unwrap_or(Value::Null),
    })
}

pub fn tasks_one(conn: &Connection, goal_id: &str, revision: i64, task_ref: &str) -> Result<Option<TaskRow>> {
    Ok(crate::store::qrow(
        conn,
        "SELECT task_ref, state, operation_id, request_digest, meaning, dependencies, detail FROM tasks
             WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3",
        params![goal_id, revision, task_ref],
        task_from_row,
    )
    .optional()?)
}

pub fn set_task_state(
    tx: &Transaction,
    goal_id: &str,
    revision: i64,
    task_ref: &str,
    state: TaskState,
    detail: &Value,
) -> Result<()> {
    let n = crate::store::exec(
        tx,
        "UPDATE tasks SET state = ?4, detail = ?5 WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3",
        params![goal_id, revision, task_ref, state, detail.to_string()],
    )?;
    if n != 1 {
        return Err(Error::internal(format!("task {task_ref} of {goal_id} r{revision} is not in the ledger")));
    }
    Ok(())
}

pub struct NewIntent<'a> {
    pub goal_id: &'a str,
    pub revision: i64,
    pub task_ref: &'a str,
    pub operation_id: &'a str,
    pub try_no: i64,
    pub kind: &'a str,
    pub request_digest: &'a str,
    pub request_json: &'a Value,
    pub effect: &'a str,
    pub cost: f64,
    pub generation: i64,
    pub inputs_at_intent: Option<&'a str>,
    pub instruction: Option<&'a str>,
}

/// The durable decision to send this exact request. The UNIQUE constraint
/// on (operation_id, try_no) makes a second dispatch of one try impossible.
pub fn insert_intent(tx: &Transaction, i: &NewIntent) -> Result<Intent> {
    crate::store::exec(tx,
        "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, cost, state, generation, intent_at_ms, inputs_at_intent, instruction)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'intent_recorded', ?11, ?12, ?13, ?14)",
        params![i.goal_id, i.revision, i.task_ref, i.operation_id, i.try_no, i.kind, i.request_digest, i.request_json.to_string(), i.effect, i.cost, i.generation, now_ms(), i.inputs_at_intent, i.instruction],
    )?;
    let id = tx.last_insert_rowid();
    crate::store::exec(
        tx,
        "UPDATE goals SET calls_used = calls_used + 1, cost_used = cost_used + ?2 WHERE id = ?1",
        params![i.goal_id, i.cost],
    )?;
    Ok(Intent(id))
}

/// The highest try number of an operation so far (0 if none).
pub fn last_try(conn: &Connection, operation_id: &str) -> Result<i64> {
    Ok(crate::store::qrow(
        conn,
        "SELECT COALESCE(MAX(try_no), 0) FROM attempts WHERE operation_id = ?1",
        [operation_id],
        |r| r.get(0),
    )?)
}

pub fn mark_dispatched(tx: &Transaction, intent: Intent, detail: &str) -> Result<()> {
    let attempt_id = intent.attempt_id();
    transition(tx, attempt_id, &[AttemptState::IntentRecorded], AttemptState::Dispatched)?;
    crate::store::exec(
        tx,
        "UPDATE attempts SET dispatched_at_ms = ?2, dispatch_detail = ?3 WHERE id = ?1",
        params![attempt_id, now_ms(), detail],
    )?;
    Ok(())
}

/// Record the provider's answer. Only an attempt that has an intent (a row)
/// can get a receipt; the foreign key says so again in the schema.
pub fn insert_receipt(tx: &Transaction, intent: Intent, data: &Value) -> Result<()> {
    let attempt_id = intent.attempt_id();
    transition(
        tx,
        attempt_id,
        &[AttemptState::IntentRecorded, AttemptState::Dispatched],
        AttemptState::ReceiptRecorded,
    )?;
    crate::store::exec(
        tx,
        "INSERT INTO receipts (attempt_id, at_ms, data) VALUES (?1, ?2, ?3)",
        params![attempt_id, now_ms(), data.to_string()],
    )?;
    Ok(())
}

/// Move an attempt between states, refusing any move from a state not in
/// `from` (asserting the transition where the data is written).
pub fn transition(tx: &Transaction, attempt_id: i64, from: &[AttemptState], to: AttemptState) -> Result<()> {
    let current: AttemptState =
        crate::store::qrow(tx, "SELECT state FROM attempts WHERE id = ?1", [attempt_id], |r| r.get(0))?;
    if !from.contains(&current) {
        return Err(Error::internal(format!("attempt {attempt_id}: refusing {current} -> {to}")));
    }
    crate::store::exec(tx, "UPDATE attempts SET state = ?2 WHERE id = ?1", params![attempt_id, to])?;
    Ok(())
}

pub fn finish_attempt(
    tx: &Transaction,
    attempt_id: i64,
    from: &[AttemptState],
    to: AttemptState,
    classification: Option<&Value>,
    unknown_reason: Option<&str>,
) -> Result<()> {
    transition(tx, attempt_id, from, to)?;
    // An abandoned attempt keeps counting: it may have gone out before the
    // engine stopped (only a call refused before dispatch is uncounted).
    crate::store::exec(tx,
        "UPDATE attempts SET finished_at_ms = ?2, classification = ?3, unknown_reason = COALESCE(?4, unknown_reason) WHERE id = ?1",
        params![attempt_id, now_ms(), classification.map(|c| c.to_string()), unknown_reason],
    )?;
    Ok(())
}

/// Take a call back out of the budget counters: the provider refused it
/// before anything was handed over.
pub fn uncount_call(tx: &Transaction, attempt_id: i64) -> Result<()> {
    crate::store::exec(tx,
        "UPDATE goals SET calls_used = calls_used - 1, cost_used = cost_used - (SELECT cost FROM attempts WHERE id = ?1)
         WHERE id = (SELECT goal_id FROM attempts WHERE id = ?1)",
        [attempt_id],
    )?;
    Ok(())
}

pub fn set_attempt_checkpoint(
    tx: &Transaction,
    attempt_id: i64,
    checkpoint: Option<&str>,
    reusable: bool,
) -> Result<()> {
    crate::store::exec(
        tx,
        "UPDATE attempts SET checkpoint = ?2, reusable = ?3 WHERE id = ?1",
        params![attempt_id, checkpoint, reusable],
    )?;
    Ok(())
}

pub fn attempt(conn: &Connection, id: i64) -> Result<AttemptRow> {
    Ok(crate::store::qrow(
        conn,
        &format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = ?1"),
        [id],
        attempt_from_row,
    )?)
}

pub fn attempts_of_task(conn: &Connection, goal_id: &str, task_ref: &str) -> Result<Vec<AttemptRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE goal_id = ?1 AND task_ref = ?2 ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![goal_id, task_ref], attempt_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Attempts left between intent and receipt: the outcome is in doubt.
pub fn attempts_in_doubt(conn: &Connection, goal_id: &str) -> Result<Vec<AttemptRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE goal_id = ?1 AND state IN ('intent_recorded','dispatched') ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![goal_id], attempt_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn attempts_in_state(conn: &Connection, goal_id: &str, state: AttemptState) -> Result<Vec<AttemptRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE goal_id = ?1 AND state = ?2 ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![goal_id, state], attempt_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn receipt(conn: &Connection, attempt_id: i64) -> Result<Option<Value>> {
    let data: Option<String> =
        crate::store::qrow(conn, "SELECT data FROM receipts WHERE attempt_id = ?1", [attempt_id], |r| r.get(0))
            .optional()?;
    Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
}

pub fn insert_evidence(
    tx: &Transaction,
    goal_id: &str,
    revision: i64,
    attempt_id: Option<i64>,
    e: &Evidence,
) -> Result<i64> {
    crate::store::exec(
        tx,
        "INSERT INTO evidence (goal_id, revision, attempt_id, kind, data, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            goal_id,
            revision,
            attempt_id,
            e.kind(),
            serde_json::to_string(e).expect("evidence serializes"),
            now_ms()
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

pub fn evidence_of_attempt(conn: &Connection, attempt_id: i64) -> Result<Vec<Recorded>> {
    let mut stmt = conn.prepare_cached("SELECT id, data FROM evidence WHERE attempt_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([attempt_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for row in rows {
        let (id, data) = row?;
        let evidence: Evidence = serde_json::from_str(&data)
            .map_err(|e| Error::new(crate::error::Code::StoreCorrupt, format!("evidence {id} does not parse: {e}")))?;
        out.push(Recorded { id, evidence });
    }
    Ok(out)
}

pub fn insert_claim(tx: &Transaction, attempt_id: i64, authority: &str, data: &Value) -> Result<i64> {
    crate::store::exec(
        tx,
        "INSERT INTO claims (attempt_id, authority, data) VALUES (?1, ?2, ?3)",
        params![attempt_id, authority, data.to_string()],
    )?;
    Ok(tx.last_insert_rowid())
}

pub fn claims_of_attempt(conn: &Connection, attempt_id: i64) -> Result<Vec<(i64, String, Value)>> {
    let mut stmt = conn.prepare_cached("SELECT id, authority, data FROM claims WHERE attempt_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([attempt_id], |r| {
        let d: String = r.get(2)?;
        Ok((r.get(0)?, r.get(1)?, serde_json::from_str(&d).unwrap_or(Value::Null)))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub struct NewCheckResult<'a> {
    pub goal_id: &'a str,
    pub revision: i64,
    pub scope: &'a str,
    pub task_ref: Option<&'a str>,
    pub attempt_id: Option<i64>,
    pub check_id: &'a str,
    pub passed: bool,
    pub checkpoint: Option<&'a str>,
    pub evidence_id: i64,
}

pub fn insert_check_result(tx: &Transaction, c: &NewCheckResult) -> Result<i64> {
    crate::store::exec(tx,
        "INSERT INTO check_results (goal_id, revision, scope, task_ref, attempt_id, check_id, passed, checkpoint, evidence_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![c.goal_id, c.revision, c.scope, c.task_ref, c.attempt_id, c.check_id, c.passed, c.checkpoint, c.evidence_id],
    )?;
    Ok(tx.last_insert_rowid())
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckResultRow {
    pub id: i64,
    pub check_id: String,
    pub passed: bool,
    pub attempt_id: Option<i64>,
    pub checkpoint: Option<String>,
    pub evidence_id: i64,
}

/// The latest result of each check of a scope (validation of one task, or
/// the goal's acceptance), by ledger order — never by wall time.
pub fn latest_check_results(
    conn: &Connection,
    goal_id: &str,
    revision: i64,
    scope: &str,
    task_ref: Option<&str>,
) -> Result<Vec<CheckResultRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.id, c.check_id, c.passed, c.attempt_id, c.checkpoint, c.evidence_id FROM check_results c
         WHERE c.goal_id = ?1 AND c.revision = ?2 AND c.scope = ?3 AND c.task_ref IS ?4
           AND c.id = (SELECT MAX(id) FROM check_results d WHERE d.goal_id = c.goal_id AND d.revision = c.revision
                       AND d.scope = c.scope AND d.task_ref IS c.task_ref AND d.check_id = c.check_id)
         ORDER BY c.check_id",
    )?;
    let rows = stmt.query_map(params![goal_id, revision, scope, task_ref], |r| {
        Ok(CheckResultRow {
            id: r.get(0)?,
            check_id: r.get(1)?,
            passed: r.get(2)?,
            attempt_id: r.get(3)?,
            checkpoint: r.get(4)?,
            evidence_id: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// An attempt that was, or may have been, dispatched: every one but a call
/// the provider refused before anything was handed over (its engine-error
/// evidence says so). One that stopped between intent and receipt counts,
/// abandoned for a new try or not: it may have gone out.
const DISPATCHED_OR_MAYBE: &str =
    "NOT EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'engine_error')";

/// Provider calls that count against `max_provider_calls`: every attempt
/// that was (or may have been) dispatched, goal-wide.
/// Kept as a counter beside the attempts (O(1) at the call site); the
/// invariant `calls_used = COUNT(attempts dispatched or maybe)` is checked
/// by `recount_budget_use` in debug builds.
pub fn provider_calls_used(conn: &Connection, goal_id: &str) -> Result<i64> {
    Ok(crate::store::qrow(conn, "SELECT calls_used FROM goals WHERE id = ?1", [goal_id], |r| r.get(0))?)
}

/// The cost of the calls dispatched, unknown outcomes included (SPEC:
/// `max_cost`); a call that never started costs nothing.
pub fn cost_used(conn: &Connection, goal_id: &str) -> Result<f64> {
    Ok(crate::store::qrow(conn, "SELECT cost_used FROM goals WHERE id = ?1", [goal_id], |r| r.get(0))?)
}

/// Budget use recounted from the attempts themselves (calls, cost).
pub fn recount_budget_use(conn: &Connection, goal_id: &str) -> Result<(i64, f64)> {
    Ok(crate::store::qrow(
        conn,
        &format!(
            "SELECT COUNT(*), COALESCE(SUM(cost), 0) FROM attempts a WHERE goal_id = ?1 AND {DISPATCHED_OR_MAYBE}"
        ),
        [goal_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// Attempts in `state` that are the latest attempt of their task in this
/// revision (ledger order).
pub fn latest_attempts_in_state(
    conn: &Connection,
    goal_id: &str,
    revision: i64,
    state: AttemptState,
) -> Result<Vec<AttemptRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE goal_id = ?1 AND revision = ?2 AND state = ?3
           AND id = (SELECT MAX(id) FROM attempts b WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref)
         ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![goal_id, revision, state], attempt_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn put_checkpoint(tx: &Transaction, cp: &crate::checkpoint::Checkpoint) -> Result<()> {
    crate::store::exec(
        tx,
        "INSERT OR IGNORE INTO checkpoints (digest, data) VALUES (?1, ?2)",
        params![cp.digest, serde_json::to_string(cp).expect("a checkpoint serializes")],
    )?;
    Ok(())
}

pub fn checkpoint(conn: &Connection, digest: &str) -> Result<Option<crate::checkpoint::Checkpoint>> {
    let data: Option<String> =
        crate::store::qrow(conn, "SELECT data FROM checkpoints WHERE digest = ?1", [digest], |r| r.get(0))
            .optional()?;
    Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
}

// ---- reads for `engine report` (a whole goal at once, with times) ----

/// Evidence with the time it was recorded (a report marks validations on
/// its timeline by it).
#[derive(Debug, Clone)]
pub struct TimedEvidence {
    pub id: i64,
    pub at_ms: i64,
    pub evidence: Evidence,
}

fn timed_evidence_from_row(r: &rusqlite::Row) -> rusqlite::Result<(i64, i64, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

fn parse_timed((id, at_ms, data): (i64, i64, String)) -> Result<TimedEvidence> {
    let evidence: Evidence = serde_json::from_str(&data)
        .map_err(|e| Error::new(crate::error::Code::StoreCorrupt, format!("evidence {id} does not parse: {e}")))?;
    Ok(TimedEvidence { id, at_ms, evidence })
}

/// Every piece of evidence of one attempt, in ledger order, with its time.
pub fn timed_evidence_of_attempt(conn: &Connection, attempt_id: i64) -> Result<Vec<TimedEvidence>> {
    let mut stmt = conn.prepare_cached("SELECT id, at_ms, data FROM evidence WHERE attempt_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([attempt_id], timed_evidence_from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(parse_timed).collect()
}

/// One piece of evidence by id (an acceptance check's has no attempt).
pub fn timed_evidence(conn: &Connection, id: i64) -> Result<Option<TimedEvidence>> {
    let row =
        crate::store::qrow(conn, "SELECT id, at_ms, data FROM evidence WHERE id = ?1", [id], timed_evidence_from_row)
            .optional()?;
    row.map(parse_timed).transpose()
}

/// When an attempt's receipt was recorded, if it has one.
pub fn receipt_at(conn: &Connection, attempt_id: i64) -> Result<Option<i64>> {
    Ok(crate::store::qrow(conn, "SELECT at_ms FROM receipts WHERE attempt_id = ?1", [attempt_id], |r| r.get(0))
        .optional()?)
}

/// A person's approval as recorded, with what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRow {
    pub id: i64,
    pub operation_id: String,
    pub revision: i64,
    pub task_ref: String,
    pub request_digest: String,
    pub actor: String,
    pub note: String,
    pub at_ms: i64,
    pub consumed_by: Option<i64>,
    pub voided_by: Option<i64>,
}

/// Every approval given for a goal, in ledger order.
pub fn approvals_of_goal(conn: &Connection, goal_id: &str) -> Result<Vec<ApprovalRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, operation_id, revision, task_ref, request_digest, actor, note, at_ms, consumed_by, voided_by
         FROM approvals WHERE goal_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([goal_id], |r| {
        Ok(ApprovalRow {
            id: r.get(0)?,
            operation_id: r.get(1)?,
            revision: r.get(2)?,
            task_ref: r.get(3)?,
            request_digest: r.get(4)?,
            actor: r.get(5)?,
            note: r.get(6)?,
            at_ms: r.get(7)?,
            consumed_by: r.get(8)?,
            voided_by: r.get(9)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A person's settlement of an unknown outcome, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct SettlementRow {
    pub id: i64,
    pub attempt_id: i64,
    pub operation_id: String,
    pub outcome: String,
    pub actor: String,
    pub note: String,
    pub evidence_blob: Option<String>,
    pub at_ms: i64,
}

/// Every settlement of an attempt of a goal, in ledger order.
pub fn settlements_of_goal(conn: &Connection, goal_id: &str) -> Result<Vec<SettlementRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.id, s.attempt_id, s.operation_id, s.outcome, s.actor, s.note, s.evidence_blob, s.at_ms
         FROM settlements s JOIN attempts a ON a.id = s.attempt_id WHERE a.goal_id = ?1 ORDER BY s.id",
    )?;
    let rows = stmt.query_map([goal_id], |r| {
        Ok(SettlementRow {
            id: r.get(0)?,
            attempt_id: r.get(1)?,
            operation_id: r.get(2)?,
            outcome: r.get(3)?,
            actor: r.get(4)?,
            note: r.get(5)?,
            evidence_blob: r.get(6)?,
            at_ms: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
