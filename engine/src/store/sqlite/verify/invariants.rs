//! The ledger's invariants, restated as queries over what the store holds
//! now: what the code that writes the ledger guarantees in one transaction.

use std::collections::HashMap;

use rusqlite::Connection;

use super::ctx::{first_row, found, Ctx, Finding, ATTEMPT};
use crate::error::Result;
use crate::plan::PlanFile;

// ------------------------------------------------------------ the ledger

pub(super) fn lease_generation(ctx: &mut Ctx) -> Result<Option<Finding>> {
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

pub(super) fn budget_counters(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let goals: Vec<String> = {
        let mut stmt = ctx.conn.prepare("SELECT id FROM goals ORDER BY id")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let recount = format!(
        "SELECT COUNT(*), COALESCE(SUM(cost_micros), 0) FROM attempts a WHERE goal_id = ?1 AND {}",
        crate::store::sqlite::sql::DISPATCHED_OR_MAYBE
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

pub(super) fn tries_contiguous(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT 'operation ' || operation_id, 'has tries ' || group_concat(try_no, ', ') || ', not 1 to ' || MAX(try_no) || ' once each'
         FROM attempts GROUP BY operation_id
         HAVING MIN(try_no) != 1 OR COUNT(*) != MAX(try_no) OR COUNT(DISTINCT try_no) != COUNT(*)
         ORDER BY operation_id LIMIT 1",
    )
}

pub(super) fn one_request_per_operation(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT 'operation ' || operation_id, 'was recorded with ' || COUNT(DISTINCT request_digest) || ' request digests'
         FROM attempts GROUP BY operation_id HAVING COUNT(DISTINCT request_digest) > 1
         ORDER BY operation_id LIMIT 1",
    )
}

pub(super) fn attempt_traces(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        &format!(
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
               FROM attempts a LEFT JOIN receipts r ON r.attempt_id = a.id)
             WHERE problem IS NOT NULL ORDER BY id LIMIT 1"
        ),
    )
}

pub(super) fn settlements(ctx: &mut Ctx) -> Result<Option<Finding>> {
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

pub(super) fn succeeded_validated(ctx: &mut Ctx) -> Result<Option<Finding>> {
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

pub(super) fn approvals(ctx: &mut Ctx) -> Result<Option<Finding>> {
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

/// The gate's approval rule (`decide::gate`) restated over the ledger: paid or external work
/// repeated (a person's retry or repair, or after an earlier try of the
/// task that was or may have been sent) must have consumed an approval;
/// so must every call of a task with `requires_approval`.
pub(super) fn repeats_approved(ctx: &mut Ctx) -> Result<Option<Finding>> {
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

pub(super) fn task_follows_attempt(ctx: &mut Ctx) -> Result<Option<Finding>> {
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

pub(super) fn goal_verdicts(ctx: &mut Ctx) -> Result<Option<Finding>> {
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
