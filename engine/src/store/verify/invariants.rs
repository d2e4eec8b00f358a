//! The ledger's invariants, restated as queries over what the store holds
//! now: what the code that writes the ledger guarantees in one transaction.
//! The SQL is read alike by SQLite and PostgreSQL: `||` joins text to
//! numbers, a subquery in `FROM` has a name, a flag is tested as
//! `passed` / `NOT passed` (an integer on SQLite, a boolean on
//! PostgreSQL), and nothing takes parameters.

use std::collections::{HashMap, HashSet};

use super::ctx::{col, found, Ctx, Finding, ATTEMPT};
use crate::error::Result;
use crate::plan::PlanFile;

/// An attempt that was, or may have been, dispatched (no `engine_error`
/// evidence says it was not): the same words as both backends' writers.
const DISPATCHED_OR_MAYBE: &str =
    "NOT EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'engine_error')";

pub(super) fn budget_counters(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let sql = format!(
        "SELECT g.id, g.calls_used, g.cost_used_micros,
                (SELECT COUNT(*) FROM attempts a WHERE a.goal_id = g.id AND {DISPATCHED_OR_MAYBE}),
                (SELECT CAST(COALESCE(SUM(a.cost_micros + a.spent_micros), 0) AS BIGINT) FROM attempts a
                  WHERE a.goal_id = g.id AND {DISPATCHED_OR_MAYBE})
         FROM goals g ORDER BY g.id"
    );
    for r in ctx.rows(&sql)? {
        let goal = col(&r, 0).text();
        let (kept_calls, kept_cost, calls, cost) =
            (col(&r, 1).int()?, col(&r, 2).int()?, col(&r, 3).int()?, col(&r, 4).int()?);
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

pub(super) fn tries_contiguous(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let tries = ctx.rows(
        "SELECT a.operation_id, a.try_no FROM attempts a WHERE a.operation_id = (
           SELECT operation_id FROM attempts GROUP BY operation_id
           HAVING MIN(try_no) != 1 OR COUNT(*) != MAX(try_no) OR COUNT(DISTINCT try_no) != COUNT(*)
           ORDER BY operation_id LIMIT 1)
         ORDER BY a.try_no",
    )?;
    let Some(first) = tries.first() else { return Ok(None) };
    let listed: Vec<String> = tries.iter().map(|r| col(r, 1).text()).collect();
    Ok(found(
        format!("operation {}", col(first, 0).text()),
        format!("has tries {}, not 1 to {} once each", listed.join(", "), listed.last().cloned().unwrap_or_default()),
    ))
}

pub(super) fn one_request_per_operation(ctx: &mut Ctx) -> Result<Option<Finding>> {
    ctx.first_row(
        "SELECT 'operation ' || operation_id, 'was recorded with ' || COUNT(DISTINCT request_digest) || ' request digests'
         FROM attempts GROUP BY operation_id HAVING COUNT(DISTINCT request_digest) > 1
         ORDER BY operation_id LIMIT 1",
    )
}

pub(super) fn attempt_traces(ctx: &mut Ctx) -> Result<Option<Finding>> {
    ctx.first_row(&format!(
        "SELECT entry, problem FROM (
           SELECT a.id AS id, {ATTEMPT} AS entry, CASE
             WHEN a.state = 'dispatched' AND a.dispatched_at_ms IS NULL THEN 'is dispatched without a dispatch time'
             WHEN a.state = 'intent_recorded' AND a.dispatched_at_ms IS NOT NULL THEN 'has a dispatch time but is still intent_recorded'
             WHEN a.handle IS NOT NULL AND (a.dispatched_at_ms IS NULL OR a.handle_at_ms IS NULL)
               THEN 'holds a provider handle but was never dispatched'
             WHEN a.state = 'receipt_recorded' AND r.attempt_id IS NULL THEN 'is receipt_recorded without a receipt'
             WHEN a.state = 'succeeded' AND r.attempt_id IS NULL THEN 'succeeded without a receipt'
             WHEN r.attempt_id IS NOT NULL AND a.state IN ('intent_recorded', 'dispatched', 'abandoned')
               THEN 'has a receipt but is ' || a.state
           END AS problem
           FROM attempts a LEFT JOIN receipts r ON r.attempt_id = a.id) x
         WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
    ))
}

pub(super) fn settlements(ctx: &mut Ctx) -> Result<Option<Finding>> {
    ctx.first_row(&format!(
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
                            FROM settlements GROUP BY attempt_id) s ON s.attempt_id = a.id) x) y
         WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
    ))
}

/// The validations and approval gate of each task, by (goal, revision, ref).
type TaskFacts<'p> = HashMap<(&'p str, i64, &'p str), (Vec<&'p str>, bool)>;

fn task_facts(plans: &HashMap<(String, i64), PlanFile>) -> TaskFacts<'_> {
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

fn attempt_keys(ctx: &mut Ctx, filter: &str) -> Result<Vec<AttemptKey>> {
    let rows = ctx.rows(&format!(
        "SELECT a.id, a.goal_id, a.revision, a.task_ref, a.operation_id, a.try_no, a.checkpoint FROM attempts a
         WHERE {filter} ORDER BY a.id"
    ))?;
    rows.iter()
        .map(|r| {
            Ok(AttemptKey {
                id: col(r, 0).int()?,
                goal: col(r, 1).text(),
                revision: col(r, 2).int()?,
                task_ref: col(r, 3).text(),
                operation_id: col(r, 4).text(),
                try_no: col(r, 5).int()?,
                checkpoint: col(r, 6).opt_text(),
            })
        })
        .collect()
}

pub(super) fn succeeded_validated(ctx: &mut Ctx) -> Result<Option<Finding>> {
    // A succeeded task stands on its latest attempt of that revision.
    let task_rule = ctx.first_row(
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
        ctx,
        "a.state = 'succeeded' OR (a.state = 'settled_ok' AND EXISTS (SELECT 1 FROM tasks t
           WHERE t.goal_id = a.goal_id AND t.revision = a.revision AND t.task_ref = a.task_ref AND t.state = 'succeeded'
             AND a.id = (SELECT MAX(b.id) FROM attempts b
                         WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref)))",
    )?;
    // Every passing validation result: (attempt, check, checkpoint).
    let passed: HashSet<(i64, String, Option<String>)> = ctx
        .rows("SELECT attempt_id, check_id, checkpoint FROM check_results WHERE scope = 'validation' AND passed AND attempt_id IS NOT NULL")?
        .iter()
        .map(|r| Ok((col(r, 0).int()?, col(r, 1).text(), col(r, 2).opt_text())))
        .collect::<Result<_>>()?;
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let facts = task_facts(&ctx.plans);
    for a in judged {
        let Some((validations, _)) = facts.get(&(a.goal.as_str(), a.revision, a.task_ref.as_str())) else {
            return Ok(found(a.entry(), "its task is not in its revision's plan"));
        };
        for v in validations {
            if !passed.contains(&(a.id, v.to_string(), a.checkpoint.clone())) {
                return Ok(found(
                    a.entry(),
                    format!("counts as succeeded without a passing result of validation {v} bound to its checkpoint"),
                ));
            }
        }
    }
    Ok(None)
}

pub(super) fn approvals(ctx: &mut Ctx) -> Result<Option<Finding>> {
    ctx.first_row(
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
             -- An expired approval is never spent. The gate weighs it at
             -- its own instant, a moment before the intent's row is
             -- stamped: a second of slack for that moment, no more.
             WHEN c.id IS NOT NULL AND p.expires_at_ms IS NOT NULL AND c.intent_at_ms > p.expires_at_ms + 1000
               THEN 'was spent by attempt ' || c.id || ' after it expired'
           END AS problem
           FROM approvals p LEFT JOIN attempts c ON c.id = p.consumed_by LEFT JOIN attempts v ON v.id = p.voided_by) x
         WHERE problem IS NOT NULL ORDER BY id LIMIT 1",
    )
}

/// A person's answer given `--for` a time (`engine answer`) is never
/// sent after its end: the first call of its operation was recorded
/// within it (the second of slack the approvals check allows). The answer
/// weighed is the latest given for that operation before that call (the
/// same answer given again after one expired is its own act).
pub(super) fn answers_in_time(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let rows = ctx.rows(
        "SELECT p.id, p.operation_id, p.at_ms, p.data, MIN(a.intent_at_ms), MIN(a.id)
           FROM person_requests p JOIN attempts a ON a.operation_id = p.operation_id
          WHERE p.kind = 'answer' GROUP BY p.id, p.operation_id, p.at_ms, p.data ORDER BY p.id",
    )?;
    // The latest answer of each operation given before its first call.
    let mut latest: HashMap<String, (i64, Option<i64>, i64, i64)> = HashMap::new();
    for r in &rows {
        let (op, at_ms, sent_at, attempt) = (col(r, 1).text(), col(r, 2).int()?, col(r, 4).int()?, col(r, 5).int()?);
        if at_ms > sent_at {
            continue;
        }
        let data: serde_json::Value = serde_json::from_str(&col(r, 3).text()).unwrap_or_default();
        let ends = data.get("expires_at_ms").and_then(serde_json::Value::as_i64);
        latest.insert(op, (col(r, 0).int()?, ends, sent_at, attempt));
    }
    let mut late: Vec<_> = latest
        .into_iter()
        .filter_map(|(op, (id, ends, sent_at, attempt))| ends.filter(|e| sent_at > e + 1000).map(|_| (id, op, attempt)))
        .collect();
    late.sort();
    Ok(late.into_iter().next().and_then(|(id, op, attempt)| {
        found(format!("answer {id} ({op})"), format!("was sent by attempt {attempt} after it expired"))
    }))
}

/// An attempt `a` completed by reading back an earlier try's effect and
/// never dispatched: it sent nothing, so it spends no approval.
const READ_BACK_NEVER_SENT: &str = "(a.dispatched_at_ms IS NULL AND EXISTS (SELECT 1 FROM events e
     WHERE e.attempt_id = a.id AND e.kind = 'completed_from_read_back'))";

/// The gate's approval rule (`decide::gate`) restated over the ledger: paid or external work
/// repeated (a person's retry or repair, or after an earlier try of the
/// task that was or may have been sent — one read back for its effect
/// included) must have consumed an approval;
/// so must every call of a task with `requires_approval`.
pub(super) fn repeats_approved(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let repeat = ctx.first_row(&format!(
        "SELECT {ATTEMPT}, 'repeats ' || CASE WHEN a.cost_micros > 0 THEN 'paid' ELSE 'external' END || ' work ('
                || CASE WHEN a.kind IN ('retry', 'repair') THEN 'a person''s ' || a.kind
                        ELSE 'after an earlier try that was or may have been sent' END
                || ') without consuming an approval'
         FROM attempts a
         WHERE (a.effect = 'external' OR a.cost_micros > 0)
           AND NOT EXISTS (SELECT 1 FROM approvals p WHERE p.consumed_by = a.id)
           AND NOT {READ_BACK_NEVER_SENT}
           AND (a.kind IN ('retry', 'repair') OR EXISTS (
                SELECT 1 FROM attempts b WHERE b.goal_id = a.goal_id AND b.task_ref = a.task_ref AND b.id < a.id
                  AND (b.dispatched_at_ms IS NOT NULL
                       OR b.state IN ('abandoned', 'effect_unknown', 'settled_ok', 'settled_not_run',
                                      'receipt_recorded', 'succeeded')
                       OR EXISTS (SELECT 1 FROM settlements s WHERE s.attempt_id = b.id)
                       OR EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = b.id AND e.kind = 'observation'))))
         ORDER BY a.id LIMIT 1"
    ))?;
    if repeat.is_some() {
        return Ok(repeat);
    }
    let unapproved = attempt_keys(
        ctx,
        &format!("NOT EXISTS (SELECT 1 FROM approvals p WHERE p.consumed_by = a.id) AND NOT {READ_BACK_NEVER_SENT}"),
    )?;
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let facts = task_facts(&ctx.plans);
    for a in unapproved {
        if facts.get(&(a.goal.as_str(), a.revision, a.task_ref.as_str())).is_some_and(|(_, gated)| *gated) {
            return Ok(found(a.entry(), "was sent without the approval its task requires (`requires_approval`)"));
        }
    }
    Ok(None)
}

pub(super) fn task_follows_attempt(ctx: &mut Ctx) -> Result<Option<Finding>> {
    ctx.first_row(&format!(
        "SELECT entry, problem FROM (
           SELECT a.id AS id, {ATTEMPT} AS entry, CASE
             WHEN a.state IN ('intent_recorded', 'dispatched') AND t.state != 'running'
               THEN 'is in doubt (' || a.state || ') but its task is ' || t.state
             WHEN a.state = 'effect_unknown' AND t.state != 'effect_unknown'
               THEN 'is effect_unknown but its task is ' || t.state
           END AS problem
           FROM attempts a JOIN tasks t ON t.goal_id = a.goal_id AND t.revision = a.revision AND t.task_ref = a.task_ref
           WHERE a.id = (SELECT MAX(b.id) FROM attempts b
                         WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref)) x
         WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
    ))
}

pub(super) fn goal_verdicts(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let open_matter = ctx.first_row(
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
             WHERE c.scope = 'acceptance' AND NOT c.passed AND c.id = (SELECT MAX(d.id) FROM check_results d
                   WHERE d.goal_id = c.goal_id AND d.revision = c.revision AND d.scope = 'acceptance' AND d.check_id = c.check_id)
         ) x ON x.goal_id = g.id
         WHERE g.state = 'satisfied' ORDER BY g.id LIMIT 1",
    )?;
    if open_matter.is_some() {
        return Ok(open_matter);
    }
    let satisfied = ctx.rows("SELECT id, active_revision FROM goals WHERE state = 'satisfied' ORDER BY id")?;
    // Every acceptance check that ran: (goal, revision, check).
    let ran: HashSet<(String, i64, String)> = ctx
        .rows("SELECT DISTINCT goal_id, revision, check_id FROM check_results WHERE scope = 'acceptance'")?
        .iter()
        .map(|r| Ok((col(r, 0).text(), col(r, 1).int()?, col(r, 2).text())))
        .collect::<Result<_>>()?;
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    for r in satisfied {
        let (goal, revision) = (col(&r, 0).text(), col(&r, 1).int()?);
        let Some(plan) = ctx.plans.get(&(goal.clone(), revision)) else {
            return Ok(found(format!("goal {goal}"), format!("its active revision {revision} is not recorded")));
        };
        let criteria = plan.goal.as_ref().map(|g| g.acceptance.as_slice()).unwrap_or_default();
        for a in criteria.iter().filter(|a| a.check.is_some()) {
            if !ran.contains(&(goal.clone(), revision, a.id.clone())) {
                return Ok(found(
                    format!("goal {goal}"),
                    format!("is satisfied but acceptance check {} never ran", a.id),
                ));
            }
        }
    }
    Ok(None)
}

/// A kept output names a blob of its size, and belongs to an attempt a
/// task stands on: succeeded, or settled ok by a person and then
/// validated (outputs are kept in the transaction of the success).
pub(super) fn outputs_kept(ctx: &mut Ctx) -> Result<Option<Finding>> {
    ctx.first_row(&format!(
        "SELECT entry, problem FROM (
           SELECT a.id AS id, o.path AS path, {ATTEMPT} || ' output ' || o.path AS entry, CASE
             WHEN b.digest IS NULL THEN 'names blob ' || o.digest || ', which the store does not hold'
             WHEN b.size <> o.size THEN 'records ' || o.size || ' bytes, its blob holds ' || b.size
             WHEN a.state NOT IN ('succeeded', 'settled_ok') THEN 'is kept for an attempt that is ' || a.state
           END AS problem
           FROM outputs o JOIN attempts a ON a.id = o.attempt_id LEFT JOIN blobs b ON b.digest = o.digest) x
         WHERE problem IS NOT NULL ORDER BY id, path LIMIT 1"
    ))
}
