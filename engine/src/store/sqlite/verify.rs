//! `engine verify`: check a store and name the first bad thing.
//!
//! The checks are a list of named entries (`CHECKS`), run in order, each
//! returning the first entry it finds wrong; the first failure stops the
//! list (later checks may only restate it). SQLite's own checks come first
//! (a damaged file makes every later answer doubtful), then the ledger's
//! invariants: what the code that writes the ledger guarantees in one
//! transaction, restated as a query over what is there now.
//!
//! Read-only: the file is opened with `SQLITE_OPEN_READ_ONLY`, never
//! migrated, never checkpointed, and no lease is taken, so it can run
//! beside a live engine and on a store that is damaged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::Serialize;
use serde_json::{json, Value};

use super::schema;
use crate::error::{Code, Error, Result};
use crate::plan::PlanFile;

/// One named check: `run` returns the first bad entry it finds.
pub struct Check {
    pub name: &'static str,
    /// What it asserts, in a line (printed by `engine verify`).
    pub asserts: &'static str,
    run: fn(&mut Ctx) -> Result<Option<Finding>>,
}

/// What a failed check names.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The bad entry: `attempt 12 (op_…, try 2, task T1)`, `goal g1`, …
    pub entry: String,
    pub problem: String,
}

fn found(entry: impl Into<String>, problem: impl Into<String>) -> Option<Finding> {
    Some(Finding { entry: entry.into(), problem: problem.into() })
}

/// The checks, in the order they run. A new invariant is one more entry.
pub const CHECKS: &[Check] = &[
    // First: `verify` runs it before anything reads the file.
    Check {
        name: "no_hot_journal",
        asserts: "no interrupted transaction's rollback journal waits beside the store",
        run: no_hot_journal,
    },
    Check { name: "sqlite_integrity", asserts: "PRAGMA integrity_check says ok", run: sqlite_integrity },
    Check {
        name: "schema",
        asserts: "the schema version is this engine's, with every table and the append-only triggers",
        run: schema_present,
    },
    Check { name: "foreign_keys", asserts: "PRAGMA foreign_key_check finds nothing", run: foreign_keys },
    Check { name: "json_columns", asserts: "every JSON column parses (evidence as evidence)", run: json_columns },
    Check { name: "blobs", asserts: "every blob's BLAKE3 digest and size match its bytes", run: blobs_addressed },
    Check {
        name: "plan_digests",
        asserts: "every revision's stored plan is valid and reproduces its plan and goal contract digests",
        run: plan_digests,
    },
    Check {
        name: "lease_generation",
        asserts: "no attempt was written by a generation newer than the lease's",
        run: lease_generation,
    },
    Check {
        name: "budget_counters",
        asserts: "each goal's calls and cost counters equal a recount of its attempts",
        run: budget_counters,
    },
    Check {
        name: "tries_contiguous",
        asserts: "an operation's tries are 1, 2, … n, each once",
        run: tries_contiguous,
    },
    Check {
        name: "one_request_per_operation",
        asserts: "all tries of an operation carry the same request digest",
        run: one_request_per_operation,
    },
    Check {
        name: "attempt_traces",
        asserts: "an attempt's state matches its traces (dispatch time, receipt)",
        run: attempt_traces,
    },
    Check {
        name: "settlements",
        asserts: "settled attempts have exactly one settlement, with their outcome and operation",
        run: settlements,
    },
    Check {
        name: "succeeded_validated",
        asserts: "a succeeded attempt (or task) has a passing result of every validation bound to its checkpoint",
        run: succeeded_validated,
    },
    Check {
        name: "approvals",
        asserts: "an approval is consumed or voided at most once, by one attempt of its own operation and request",
        run: approvals,
    },
    Check {
        name: "repeats_approved",
        asserts: "every repeat of paid or external work, and every call of a task that requires approval, consumed an approval",
        run: repeats_approved,
    },
    Check {
        name: "task_follows_attempt",
        asserts: "a task's state agrees with its latest attempt (in doubt: running; unknown: effect_unknown)",
        run: task_follows_attempt,
    },
    Check {
        name: "goal_verdicts",
        asserts: "a satisfied goal has no unknown or unsettled outcome, every task complete, every acceptance check passed",
        run: goal_verdicts,
    },
];

/// What `engine verify` reports when every check passed.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub store: PathBuf,
    pub checks: Vec<&'static str>,
}

/// Run every check on the store at `path`; `STORE_CORRUPT` naming the
/// first check that failed and its first bad entry.
pub fn verify(path: &Path) -> Result<Verified> {
    let conn = super::open_existing(&super::files::StoreFiles::new(path), OpenFlags::SQLITE_OPEN_READ_ONLY)?
        .ok_or_else(|| Error::usage(format!("no store at {}", path.display())).at(path.display().to_string()))?;
    let mut ctx = Ctx { path: path.to_path_buf(), conn, plans: HashMap::new(), plans_loaded: false };
    // A read-only connection cannot roll a hot journal back, so it must be
    // named before anything reads the file (the schema version included).
    if let Some(f) = no_hot_journal(&mut ctx)? {
        return Err(corrupt(path, &CHECKS[0], &f, &[]));
    }
    let version = super::refuse_newer_schema(&ctx.conn, path)?;
    if version > 0 && version < schema::SCHEMA_VERSION {
        // Not damage: a writing command migrates it; verify never does.
        return Err(Error::usage(format!(
            "the store has schema version {version}, older than this engine's {}: `engine run` migrates it, then verify checks it",
            schema::SCHEMA_VERSION
        ))
        .at(path.display().to_string()));
    }
    ctx.conn.busy_timeout(std::time::Duration::from_secs(10))?;
    let mut passed = Vec::new();
    for check in CHECKS {
        // A check that cannot even read what it checks has found damage.
        let finding =
            (check.run)(&mut ctx).unwrap_or_else(|e| found("the store", format!("cannot be read: {}", e.message)));
        if let Some(f) = finding {
            return Err(corrupt(path, check, &f, &passed));
        }
        passed.push(check.name);
    }
    Ok(Verified { store: path.to_path_buf(), checks: passed })
}

fn corrupt(path: &Path, check: &Check, f: &Finding, passed: &[&str]) -> Error {
    Error::new(Code::StoreCorrupt, format!("check `{}` failed: {}: {}", check.name, f.entry, f.problem))
        .at(path.display().to_string())
        .with_details(json!({"check": check.name, "entry": f.entry, "problem": f.problem, "passed": passed}))
}

/// What the checks share: the connection, and each revision's plan parsed
/// once (by the first check that needs them).
struct Ctx {
    path: PathBuf,
    conn: Connection,
    plans: HashMap<(String, i64), PlanFile>,
    plans_loaded: bool,
}

impl Ctx {
    /// Parse the stored plans by (goal, revision), once; a finding names
    /// the first that does not parse.
    fn load_plans(&mut self) -> Result<Option<Finding>> {
        if self.plans_loaded {
            return Ok(None);
        }
        let mut stmt =
            self.conn.prepare("SELECT goal_id, revision, plan_json FROM revisions ORDER BY goal_id, revision")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let (goal, revision, text): (String, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            match serde_json::from_str::<PlanFile>(&text) {
                Ok(p) => {
                    self.plans.insert((goal, revision), p);
                }
                Err(e) => {
                    return Ok(found(
                        format!("goal {goal} revision {revision}"),
                        format!("stored plan does not parse: {e}"),
                    ))
                }
            }
        }
        self.plans_loaded = true;
        Ok(None)
    }
}

/// The first row of a query that returns (entry, problem), if any.
fn first_row(conn: &Connection, sql: &str) -> Result<Option<Finding>> {
    Ok(conn.query_row(sql, [], |r| Ok(Finding { entry: r.get(0)?, problem: r.get(1)? })).optional()?)
}

/// How the SQL checks name an attempt `a`.
const ATTEMPT: &str =
    "'attempt ' || a.id || ' (' || a.operation_id || ', try ' || a.try_no || ', task ' || a.task_ref || ')'";

// ------------------------------------------------------------ SQLite

/// A non-empty `-journal` beside the store: a transaction in rollback mode
/// (the store's creation, before it turns to WAL) was interrupted, and
/// only a writer that opens the store can roll it back.
fn no_hot_journal(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let journal = PathBuf::from(format!("{}-journal", ctx.path.display()));
    Ok(match std::fs::symlink_metadata(&journal) {
        Ok(meta) if meta.len() > 0 => found(
            journal.display().to_string(),
            format!(
                "an interrupted transaction's rollback journal ({} bytes): the store is not as any commit left it until a writer rolls it back (verify does not write)",
                meta.len()
            ),
        ),
        _ => None,
    })
}

fn sqlite_integrity(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let mut stmt = ctx.conn.prepare("PRAGMA integrity_check(20)")?;
    let lines: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    if lines == ["ok"] {
        return Ok(None);
    }
    Ok(found("the database file", lines.join("; ")))
}

const TABLES: &[&str] = &[
    "lease",
    "events",
    "blobs",
    "goals",
    "revisions",
    "tasks",
    "attempts",
    "receipts",
    "evidence",
    "claims",
    "check_results",
    "checkpoints",
    "file_cache",
    "settlements",
    "approvals",
    "store_meta",
    "pending_requests",
];
const TRIGGERS: &[&str] = &["events_append_only_update", "events_append_only_delete"];

fn schema_present(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let version: i64 = ctx.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Ok(found(
            "the schema",
            "version 0: the file holds no ledger (a creation that never finished, or a ledger that lost its write-ahead log)",
        ));
    }
    let present = |kind: &str, name: &str| -> Result<bool> {
        Ok(ctx.conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = ?1 AND name = ?2)",
            [kind, name],
            |r| r.get(0),
        )?)
    };
    for t in TABLES {
        if !present("table", t)? {
            return Ok(found(format!("table {t}"), "is missing"));
        }
    }
    for t in TRIGGERS {
        if !present("trigger", t)? {
            return Ok(found(format!("trigger {t}"), "is missing: the event log is no longer append-only"));
        }
    }
    Ok(None)
}

fn foreign_keys(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT \"table\" || ' row ' || COALESCE(rowid, '?'), 'refers to a missing ' || parent || ' row'
         FROM pragma_foreign_key_check LIMIT 1",
    )
}

// ------------------------------------------------------------ content

/// (table, key column, JSON column, may be NULL)
const JSON_COLUMNS: &[(&str, &str, &str)] = &[
    ("revisions", "goal_id || ' r' || revision", "plan_json"),
    ("tasks", "goal_id || ' r' || revision || ' ' || task_ref", "detail"),
    ("attempts", "id", "request_json"),
    ("attempts", "id", "class_evidence_ids"),
    ("attempts", "id", "class_claim_ids"),
    ("attempts", "id", "process"),
    ("receipts", "attempt_id", "data"),
    ("claims", "id", "data"),
    ("events", "seq", "data"),
    ("checkpoints", "digest", "data"),
];

fn json_columns(ctx: &mut Ctx) -> Result<Option<Finding>> {
    for (table, key, column) in JSON_COLUMNS {
        let sql = format!("SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL");
        let mut stmt = ctx.conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get::<_, rusqlite::types::Value>(0).map(|v| sql_text(&v))?;
            let text: String = r.get(1)?;
            if let Err(e) = serde_json::from_str::<Value>(&text) {
                return Ok(found(format!("{table} {key}"), format!("`{column}` is not JSON: {e}")));
            }
        }
    }
    let mut stmt = ctx.conn.prepare("SELECT id, data FROM evidence ORDER BY id")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (id, text): (i64, String) = (r.get(0)?, r.get(1)?);
        if let Err(e) = serde_json::from_str::<crate::evidence::Evidence>(&text) {
            return Ok(found(format!("evidence {id}"), format!("does not parse as evidence: {e}")));
        }
    }
    Ok(None)
}

fn sql_text(v: &rusqlite::types::Value) -> String {
    use rusqlite::types::Value as V;
    match v {
        V::Null => "NULL".into(),
        V::Integer(i) => i.to_string(),
        V::Real(f) => f.to_string(),
        V::Text(t) => t.clone(),
        V::Blob(b) => format!("<{} bytes>", b.len()),
    }
}

fn blobs_addressed(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let mut stmt = ctx.conn.prepare("SELECT digest, size, data FROM blobs ORDER BY digest")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (digest, size, data): (String, i64, Vec<u8>) = (r.get(0)?, r.get(1)?, r.get(2)?);
        if size != data.len() as i64 {
            return Ok(found(format!("blob {digest}"), format!("records {size} bytes but holds {}", data.len())));
        }
        let actual = crate::digest::content(&data);
        if actual != digest {
            return Ok(found(format!("blob {digest}"), format!("its bytes hash to {actual}")));
        }
    }
    Ok(None)
}

fn plan_digests(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let recorded: Vec<(String, i64, String, String)> = {
        let mut stmt = ctx.conn.prepare("SELECT goal_id, revision, plan_digest, goal_contract FROM revisions")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let plans = &ctx.plans;
    for (goal, revision, plan_digest, goal_contract) in recorded {
        let entry = format!("goal {goal} revision {revision}");
        let Some(file) = plans.get(&(goal.clone(), revision)) else { continue };
        let mut file = file.clone();
        if let Err(e) = crate::plan::validate::validate_structure(&file) {
            return Ok(found(entry, format!("stored plan is not a valid plan: {e}")));
        }
        for task in &mut file.tasks {
            crate::digest::sort_keys(&mut task.action);
        }
        let digests = crate::plan::PlanDigests::compute(&file);
        if digests.plan != plan_digest {
            return Ok(found(entry, format!("stored plan digests to {}, recorded {plan_digest}", digests.plan)));
        }
        if digests.goal_contract != goal_contract {
            return Ok(found(entry, "stored plan's goal contract digest differs from the recorded one"));
        }
        if file.goal.as_ref().is_some_and(|g| g.id != goal) {
            return Ok(found(entry, "stored plan names another goal"));
        }
    }
    Ok(None)
}

// ------------------------------------------------------------ the ledger

fn lease_generation(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        &format!(
            "SELECT {ATTEMPT}, 'was written by generation ' || a.generation || ', newer than the lease''s '
                    || COALESCE((SELECT generation FROM lease WHERE id = 1), 'none')
             FROM attempts a
             WHERE a.generation > COALESCE((SELECT generation FROM lease WHERE id = 1), 0)
             ORDER BY a.id LIMIT 1"
        ),
    )
}

fn budget_counters(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let goals: Vec<String> = {
        let mut stmt = ctx.conn.prepare("SELECT id FROM goals ORDER BY id")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let recount = format!(
        "SELECT COUNT(*), COALESCE(SUM(cost_micros), 0) FROM attempts a WHERE goal_id = ?1 AND {}",
        super::DISPATCHED_OR_MAYBE
    );
    for goal in goals {
        let (calls, cost): (i64, i64) = ctx.conn.query_row(&recount, [&goal], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let (kept_calls, kept_cost): (i64, i64) =
            ctx.conn.query_row("SELECT calls_used, cost_used_micros FROM goals WHERE id = ?1", [&goal], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        if kept_calls != calls || kept_cost != cost {
            let units = |micros: i64| crate::cost::Cost::from_micros(micros).to_string();
            return Ok(found(
                format!("goal {goal}"),
                format!(
                    "counts {kept_calls} calls and cost {}; its attempts recount to {calls} and {}",
                    units(kept_cost),
                    units(cost)
                ),
            ));
        }
    }
    Ok(None)
}

fn tries_contiguous(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT 'operation ' || operation_id, 'has tries ' || group_concat(try_no, ', ') || ', not 1 to ' || MAX(try_no) || ' once each'
         FROM attempts GROUP BY operation_id
         HAVING MIN(try_no) != 1 OR COUNT(*) != MAX(try_no) OR COUNT(DISTINCT try_no) != COUNT(*)
         ORDER BY operation_id LIMIT 1",
    )
}

fn one_request_per_operation(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT 'operation ' || operation_id, 'was recorded with ' || COUNT(DISTINCT request_digest) || ' request digests'
         FROM attempts GROUP BY operation_id HAVING COUNT(DISTINCT request_digest) > 1
         ORDER BY operation_id LIMIT 1",
    )
}

fn attempt_traces(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        &format!(
            "SELECT entry, problem FROM (
               SELECT a.id AS id, {ATTEMPT} AS entry, CASE
                 WHEN a.state = 'dispatched' AND a.dispatched_at_ms IS NULL THEN 'is dispatched without a dispatch time'
                 WHEN a.state = 'intent_recorded' AND a.dispatched_at_ms IS NOT NULL THEN 'has a dispatch time but is still intent_recorded'
                 WHEN a.state = 'receipt_recorded' AND r.attempt_id IS NULL THEN 'is receipt_recorded without a receipt'
                 WHEN a.state = 'succeeded' AND r.attempt_id IS NULL THEN 'succeeded without a receipt'
                 WHEN r.attempt_id IS NOT NULL AND a.state IN ('intent_recorded', 'dispatched', 'abandoned')
                   THEN 'has a receipt but is ' || a.state
               END AS problem
               FROM attempts a LEFT JOIN receipts r ON r.attempt_id = a.id)
             WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
        ),
    )
}

fn settlements(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        &format!(
            "SELECT entry, problem FROM (
               SELECT id, entry, CASE
                 WHEN n = 0 AND state IN ('settled_ok', 'settled_not_run') THEN 'is ' || state || ' without a settlement'
                 WHEN n > 1 THEN 'was settled ' || n || ' times'
                 WHEN n = 1 AND settled_op != op THEN 'its settlement names operation ' || settled_op
                 WHEN n = 1 AND outcome = 'ok' AND state NOT IN ('settled_ok', 'failed') THEN 'was settled ok but is ' || state
                 WHEN n = 1 AND outcome = 'not_run' AND state != 'settled_not_run' THEN 'was settled not_run but is ' || state
               END AS problem
               FROM (SELECT a.id AS id, {ATTEMPT} AS entry, a.state AS state, a.operation_id AS op,
                            COALESCE(s.n, 0) AS n, s.operation_id AS settled_op, s.outcome AS outcome
                     FROM attempts a
                     LEFT JOIN (SELECT attempt_id, COUNT(*) AS n, MAX(operation_id) AS operation_id, MAX(outcome) AS outcome
                                FROM settlements GROUP BY attempt_id) s ON s.attempt_id = a.id))
             WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
        ),
    )
}

/// The validations and approval gate of each task, by (goal, revision, ref).
fn task_facts(plans: &HashMap<(String, i64), PlanFile>) -> HashMap<(&str, i64, &str), (Vec<&str>, bool)> {
    let mut facts = HashMap::new();
    for ((goal, revision), plan) in plans {
        for t in &plan.tasks {
            let validations = t.validations.iter().map(|v| v.id.as_str()).collect();
            facts.insert((goal.as_str(), *revision, t.task_ref.as_str()), (validations, t.requires_approval));
        }
    }
    facts
}

/// An attempt as the Rust-side checks read it.
struct AttemptKey {
    id: i64,
    goal: String,
    revision: i64,
    task_ref: String,
    operation_id: String,
    try_no: i64,
    checkpoint: Option<String>,
}

impl AttemptKey {
    fn entry(&self) -> String {
        format!("attempt {} ({}, try {}, task {})", self.id, self.operation_id, self.try_no, self.task_ref)
    }
}

fn attempt_keys(conn: &Connection, filter: &str) -> Result<Vec<AttemptKey>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT a.id, a.goal_id, a.revision, a.task_ref, a.operation_id, a.try_no, a.checkpoint FROM attempts a
         WHERE {filter} ORDER BY a.id"
    ))?;
    let rows = stmt.query_map([], |r| {
        Ok(AttemptKey {
            id: r.get(0)?,
            goal: r.get(1)?,
            revision: r.get(2)?,
            task_ref: r.get(3)?,
            operation_id: r.get(4)?,
            try_no: r.get(5)?,
            checkpoint: r.get(6)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn succeeded_validated(ctx: &mut Ctx) -> Result<Option<Finding>> {
    // A succeeded task stands on its latest attempt of that revision.
    let task_rule = first_row(
        &ctx.conn,
        "SELECT 'task ' || t.task_ref || ' of ' || t.goal_id || ' r' || t.revision,
                CASE WHEN a.id IS NULL THEN 'is succeeded without an attempt in its revision'
                     ELSE 'is succeeded but its latest attempt ' || a.id || ' is ' || a.state END
         FROM tasks t LEFT JOIN attempts a ON a.id = (SELECT MAX(b.id) FROM attempts b
              WHERE b.goal_id = t.goal_id AND b.revision = t.revision AND b.task_ref = t.task_ref)
         WHERE t.state = 'succeeded' AND (a.id IS NULL OR a.state NOT IN ('succeeded', 'settled_ok'))
         ORDER BY t.goal_id, t.revision, t.task_ref LIMIT 1",
    )?;
    if task_rule.is_some() {
        return Ok(task_rule);
    }
    let judged = attempt_keys(
        &ctx.conn,
        "a.state = 'succeeded' OR (a.state = 'settled_ok' AND EXISTS (SELECT 1 FROM tasks t
           WHERE t.goal_id = a.goal_id AND t.revision = a.revision AND t.task_ref = a.task_ref AND t.state = 'succeeded'
             AND a.id = (SELECT MAX(b.id) FROM attempts b
                         WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref)))",
    )?;
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let plans = &ctx.plans;
    let facts = task_facts(plans);
    let mut passed = ctx.conn.prepare_cached(
        "SELECT EXISTS(SELECT 1 FROM check_results WHERE attempt_id = ?1 AND scope = 'validation'
           AND check_id = ?2 AND passed = 1 AND checkpoint IS ?3)",
    )?;
    for a in judged {
        let Some((validations, _)) = facts.get(&(a.goal.as_str(), a.revision, a.task_ref.as_str())) else {
            return Ok(found(a.entry(), "its task is not in its revision's plan"));
        };
        for v in validations {
            let ok: bool = passed.query_row(rusqlite::params![a.id, v, a.checkpoint], |r| r.get(0))?;
            if !ok {
                return Ok(found(
                    a.entry(),
                    format!("counts as succeeded without a passing result of validation {v} bound to its checkpoint"),
                ));
            }
        }
    }
    Ok(None)
}

fn approvals(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT entry, problem FROM (
           SELECT p.id AS id, 'approval ' || p.id || ' (' || p.operation_id || ')' AS entry, CASE
             WHEN p.consumed_by IS NOT NULL AND p.voided_by IS NOT NULL
               THEN 'is both consumed (by attempt ' || p.consumed_by || ') and voided (by attempt ' || p.voided_by || ')'
             WHEN c.operation_id != p.operation_id
               THEN 'was consumed by attempt ' || c.id || ' of operation ' || c.operation_id
             WHEN c.request_digest != p.request_digest
               THEN 'was consumed by attempt ' || c.id || ', whose request is not the one approved'
             WHEN c.id IS NOT NULL AND p.plan_digest != (SELECT r.plan_digest FROM revisions r
                    WHERE r.goal_id = c.goal_id AND r.revision = c.revision)
               THEN 'was consumed by attempt ' || c.id || ' of another plan than the one approved'
             WHEN v.operation_id != p.operation_id
               THEN 'was voided by attempt ' || v.id || ' of operation ' || v.operation_id
             WHEN c.id IS NOT NULL AND (SELECT COUNT(*) FROM approvals q WHERE q.consumed_by = c.id) > 1
               THEN 'attempt ' || c.id || ' consumed more than one approval'
           END AS problem
           FROM approvals p LEFT JOIN attempts c ON c.id = p.consumed_by LEFT JOIN attempts v ON v.id = p.voided_by)
         WHERE problem IS NOT NULL ORDER BY id LIMIT 1",
    )
}

/// `approval::needed` restated over the ledger: paid or external work
/// repeated (a person's retry or repair, or after an earlier try of the
/// task that was or may have been sent) must have consumed an approval;
/// so must every call of a task with `requires_approval`.
fn repeats_approved(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let repeat = first_row(
        &ctx.conn,
        &format!(
            "SELECT {ATTEMPT}, 'repeats ' || CASE WHEN a.cost_micros > 0 THEN 'paid' ELSE 'external' END || ' work ('
                    || CASE WHEN a.kind IN ('retry', 'repair') THEN 'a person''s ' || a.kind
                            ELSE 'after an earlier try that was or may have been sent' END
                    || ') without consuming an approval'
             FROM attempts a
             WHERE (a.effect = 'external' OR a.cost_micros > 0)
               AND NOT EXISTS (SELECT 1 FROM approvals p WHERE p.consumed_by = a.id)
               AND (a.kind IN ('retry', 'repair') OR EXISTS (
                    SELECT 1 FROM attempts b WHERE b.goal_id = a.goal_id AND b.task_ref = a.task_ref AND b.id < a.id
                      AND (b.dispatched_at_ms IS NOT NULL
                           OR b.state IN ('abandoned', 'effect_unknown', 'settled_ok', 'settled_not_run',
                                          'receipt_recorded', 'succeeded')
                           OR EXISTS (SELECT 1 FROM settlements s WHERE s.attempt_id = b.id))))
             ORDER BY a.id LIMIT 1"
        ),
    )?;
    if repeat.is_some() {
        return Ok(repeat);
    }
    let unapproved = attempt_keys(&ctx.conn, "NOT EXISTS (SELECT 1 FROM approvals p WHERE p.consumed_by = a.id)")?;
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let plans = &ctx.plans;
    let facts = task_facts(plans);
    for a in unapproved {
        if facts.get(&(a.goal.as_str(), a.revision, a.task_ref.as_str())).is_some_and(|(_, gated)| *gated) {
            return Ok(found(a.entry(), "was sent without the approval its task requires (`requires_approval`)"));
        }
    }
    Ok(None)
}

fn task_follows_attempt(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        &format!(
            "SELECT entry, problem FROM (
               SELECT a.id AS id, {ATTEMPT} AS entry, CASE
                 WHEN a.state IN ('intent_recorded', 'dispatched') AND t.state != 'running'
                   THEN 'is in doubt (' || a.state || ') but its task is ' || t.state
                 WHEN a.state = 'effect_unknown' AND t.state != 'effect_unknown'
                   THEN 'is effect_unknown but its task is ' || t.state
               END AS problem
               FROM attempts a JOIN tasks t ON t.goal_id = a.goal_id AND t.revision = a.revision AND t.task_ref = a.task_ref
               WHERE a.id = (SELECT MAX(b.id) FROM attempts b
                             WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref))
             WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
        ),
    )
}

fn goal_verdicts(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let open_matter = first_row(
        &ctx.conn,
        "SELECT 'goal ' || g.id, 'is satisfied while ' || x.what FROM goals g JOIN (
           SELECT a.goal_id AS goal_id, 'attempt ' || a.id || ' (' || a.operation_id || ', try ' || a.try_no || ') is ' || a.state AS what
             FROM attempts a WHERE a.state IN ('effect_unknown', 'intent_recorded', 'dispatched', 'receipt_recorded')
           UNION ALL
           SELECT t.goal_id, 'task ' || t.task_ref || ' is ' || t.state
             FROM tasks t JOIN goals h ON h.id = t.goal_id AND h.active_revision = t.revision
             WHERE t.state NOT IN ('succeeded', 'reused')
           UNION ALL
           SELECT a.goal_id, 'operation ' || a.operation_id || ' was settled not_run and not re-sent'
             FROM attempts a JOIN goals h ON h.id = a.goal_id AND h.active_revision = a.revision
             WHERE a.state = 'settled_not_run' AND a.id = (SELECT MAX(b.id) FROM attempts b
                   WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref)
           UNION ALL
           SELECT c.goal_id, 'acceptance check ' || c.check_id || ' last failed'
             FROM check_results c JOIN goals h ON h.id = c.goal_id AND h.active_revision = c.revision
             WHERE c.scope = 'acceptance' AND c.passed = 0 AND c.id = (SELECT MAX(d.id) FROM check_results d
                   WHERE d.goal_id = c.goal_id AND d.revision = c.revision AND d.scope = 'acceptance' AND d.check_id = c.check_id)
         ) x ON x.goal_id = g.id
         WHERE g.state = 'satisfied' ORDER BY g.id LIMIT 1",
    )?;
    if open_matter.is_some() {
        return Ok(open_matter);
    }
    let satisfied: Vec<(String, i64)> = {
        let mut stmt =
            ctx.conn.prepare("SELECT id, active_revision FROM goals WHERE state = 'satisfied' ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let plans = &ctx.plans;
    let mut checked = ctx.conn.prepare_cached(
        "SELECT EXISTS(SELECT 1 FROM check_results WHERE goal_id = ?1 AND revision = ?2 AND scope = 'acceptance' AND check_id = ?3)",
    )?;
    for (goal, revision) in satisfied {
        let Some(plan) = plans.get(&(goal.clone(), revision)) else {
            return Ok(found(format!("goal {goal}"), format!("its active revision {revision} is not recorded")));
        };
        let criteria = plan.goal.as_ref().map(|g| g.acceptance.as_slice()).unwrap_or_default();
        for a in criteria.iter().filter(|a| a.check.is_some()) {
            let ran: bool = checked.query_row(rusqlite::params![goal, revision, a.id], |r| r.get(0))?;
            if !ran {
                return Ok(found(
                    format!("goal {goal}"),
                    format!("is satisfied but acceptance check {} never ran", a.id),
                ));
            }
        }
    }
    Ok(None)
}
