//! `engine revise PLAN --reason TEXT`: a new plan revision of the same
//! goal, linked to the one before, within `max_revisions`. Every task is
//! decided `reuse` or `run` (with the first refusing reason) before anything
//! runs, and the table is shown. Also home of `load_completion`, which
//! reads a completed task back from the ledger for a reuse decision.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{json, Value};

use crate::checkpoint::{self, FileCache};
use crate::error::{Code, Error, Result};
use crate::plan::{Plan, PlanFile, Task};
use crate::reuse::{self, Candidate, Completion, Decision, ValidationResult};
use crate::run::{self, RunReport};
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::events::{self, Event};
use crate::store::{ledger, Durability, Store};

pub struct ReviseRequest {
    pub plan_path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
    pub reason: String,
    pub no_run: bool,
    pub jobs: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskDecision {
    pub task_ref: String,
    #[serde(flatten)]
    pub decision: Decision,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReviseReport {
    pub goal_id: String,
    pub from_revision: i64,
    pub revision: i64,
    pub reason: String,
    pub goal_contract_changed: bool,
    pub goal_contract_digest: String,
    pub decisions: Vec<TaskDecision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunReport>,
}

pub fn revise(req: ReviseRequest) -> Result<ReviseReport> {
    if req.reason.trim().is_empty() {
        return Err(Error::usage("a revision needs a reason (--reason TEXT)"));
    }
    let plan = Plan::load(&req.plan_path, req.workspace.as_deref())?;
    let store_path = crate::store::resolve_path(req.store.as_deref(), &plan.workspace);
    if std::fs::symlink_metadata(&store_path).is_err() {
        return Err(Error::usage(format!(
            "no store at {}: `engine run` registers the goal first",
            store_path.display()
        )));
    }
    let mut store = Store::open_rw(&store_path)?;
    crate::run::orphans::take_lease(&mut store)?;
    let result = revise_locked(&mut store, plan, &req);
    let _ = store.release_lease();
    result
}

fn revise_locked(store: &mut Store, plan: Plan, req: &ReviseRequest) -> Result<ReviseReport> {
    let goal_id = plan.goal().id.clone();
    let conn = store.conn();
    let g = ledger::goal(conn, &goal_id)?
        .ok_or_else(|| Error::usage(format!("goal `{goal_id}` is not in this store: `engine run` registers it")))?;
    let prev = ledger::revision(conn, &goal_id, g.active_revision)?;
    if prev.plan_digest == plan.digests.plan {
        return Err(Error::usage(format!(
            "the plan is the same as goal `{goal_id}`'s active revision {}: nothing to revise",
            g.active_revision
        )));
    }
    let prev_file: PlanFile = serde_json::from_str(&prev.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of revision {} does not parse: {e}", g.active_revision))
    })?;
    // The lowest limit any recorded revision set bounds revisions: a plan
    // cannot raise its own limit by revising itself, not even in steps.
    let used = (g.active_revision - 1) as u64;
    let limit = lowest_max_revisions(conn, &goal_id, g.active_revision)?;
    if used >= limit {
        return Err(Error::new(
            Code::BudgetExhausted,
            format!("max_revisions: used {used} of {limit}; no new revision is recorded"),
        )
        .with_details(json!({"budget": "max_revisions", "used": used, "limit": limit})));
    }

    let goal_changed = prev.goal_contract != plan.digests.goal_contract;
    let mut cache = FileCache::load(conn)?;
    let decisions = decide_all(conn, &plan, &goal_id, g.active_revision, &prev_file, goal_changed, &mut cache)?;

    let revision = g.active_revision + 1;
    let plan_json = serde_json::to_string(&plan.file).expect("a plan serializes");
    store.write(Durability::Full, |tx| {
        ledger::insert_revision(
            tx,
            &ledger::NewRevision {
                goal_id: &goal_id,
                revision,
                parent: Some(g.active_revision),
                plan_digest: &plan.digests.plan,
                goal_contract: &plan.digests.goal_contract,
                plan_json: &plan_json,
                plan_path: &req.plan_path.display().to_string(),
                workspace: &plan.workspace.display().to_string(),
                reason: Some(&req.reason),
            },
        )?;
        run::insert_tasks(tx, &plan, revision)?;
        for d in &decisions {
            let (state, detail) = match &d.decision {
                Decision::Reuse { provenance } => (TaskState::Reused, json!({"reused_from": provenance})),
                Decision::Run { refusal } => {
                    (TaskState::Pending, json!({"reuse_refused": refusal.code(), "detail": refusal.detail()}))
                }
            };
            ledger::set_task_state(tx, &goal_id, revision, &d.task_ref, state, &detail)?;
        }
        let seq = events::append(
            tx,
            &Event::goal(
                "revision_recorded",
                &goal_id,
                revision,
                json!({
                    "parent": g.active_revision, "reason": req.reason, "plan_digest": plan.digests.plan,
                    "goal_contract_digest": plan.digests.goal_contract, "goal_contract_changed": goal_changed,
                    "decisions": decisions,
                }),
            ),
        )?;
        cache.flush(tx)?;
        tx.execute("UPDATE goals SET active_revision = ?2 WHERE id = ?1", rusqlite::params![goal_id, revision])?;
        // A new plan settles nothing: an unknown outcome still waits on a person.
        let unknown: i64 = tx.query_row(
            "SELECT COUNT(*) FROM attempts WHERE goal_id = ?1 AND state = 'effect_unknown'",
            [&goal_id],
            |r| r.get(0),
        )?;
        ledger::set_goal_state(
            tx,
            &goal_id,
            if unknown > 0 { GoalState::NeedsSettlement } else { GoalState::Open },
            seq,
        )
    })?;
    let mut report = ReviseReport {
        goal_id: goal_id.clone(),
        from_revision: g.active_revision,
        revision,
        reason: req.reason.clone(),
        goal_contract_changed: goal_changed,
        goal_contract_digest: plan.digests.goal_contract.clone(),
        decisions,
        run: None,
    };
    if !req.no_run {
        report.run = Some(run::execute(store, plan, revision, req.jobs, HashSet::new())?);
    }
    Ok(report)
}

/// The smallest `max_revisions` of revisions 1..=`active` of a goal.
fn lowest_max_revisions(conn: &rusqlite::Connection, goal_id: &str, active: i64) -> Result<u64> {
    let mut lowest = u64::MAX;
    for revision in 1..=active {
        let row = ledger::revision(conn, goal_id, revision)?;
        let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
            Error::new(Code::StoreCorrupt, format!("stored plan of revision {revision} does not parse: {e}"))
        })?;
        lowest = lowest.min(file.budgets.max_revisions as u64);
    }
    Ok(lowest)
}

/// Decide every task of `plan` against revision `prev_revision`, in
/// dependency order.
pub fn decide_all(
    conn: &rusqlite::Connection,
    plan: &Plan,
    goal_id: &str,
    prev_revision: i64,
    prev_file: &PlanFile,
    goal_changed: bool,
    cache: &mut FileCache,
) -> Result<Vec<TaskDecision>> {
    let mut runs: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(plan.order.len());
    let then: std::collections::HashMap<&str, &Task> =
        prev_file.tasks.iter().map(|t| (t.task_ref.as_str(), t)).collect();
    for &i in &plan.order {
        let task = &plan.file.tasks[i];
        let d = &plan.digests.tasks[&task.task_ref];
        let completion = if goal_changed {
            None
        } else {
            load_completion(conn, goal_id, prev_revision, then.get(task.task_ref.as_str()).copied(), &task.task_ref)?
        };
        let upstream = task.depends_on.iter().find(|dep| runs.contains(*dep)).map(String::as_str);
        let decision = reuse::decide(
            goal_changed,
            completion.as_ref(),
            &Candidate { task, meaning: &d.meaning, dependencies: &d.dependencies },
            upstream,
            || checkpoint::observe(&plan.workspace, task, &plan.file.secrets, cache),
        );
        if !decision.is_reuse() {
            runs.insert(task.task_ref.clone());
        }
        out.push(TaskDecision { task_ref: task.task_ref.clone(), decision });
    }
    Ok(out)
}

/// The completion of `task_ref` in `revision` as the ledger holds it: its
/// succeeded attempt (following a reuse's provenance to the original), the
/// checkpoint its validations judged, and their latest results.
/// `task_then`: the task as revision `revision` defined it (`None`: it had
/// no such task).
pub fn load_completion(
    conn: &rusqlite::Connection,
    goal_id: &str,
    revision: i64,
    task_then: Option<&Task>,
    task_ref: &str,
) -> Result<Option<Completion>> {
    let Some(task) = task_then.cloned() else { return Ok(None) };
    let Some(row) = ledger::tasks_one(conn, goal_id, revision, task_ref)? else { return Ok(None) };
    let attempt_id = match row.state {
        TaskState::Succeeded => conn
            .query_row(
                "SELECT id FROM attempts WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3 AND state IN ('succeeded','settled_ok')
                 ORDER BY id DESC LIMIT 1",
                rusqlite::params![goal_id, revision, task_ref],
                |r| r.get::<_, i64>(0),
            )
            .ok(),
        TaskState::Reused => row.detail.get("reused_from").and_then(|p| p.get("attempt_id")).and_then(Value::as_i64),
        _ => None,
    };
    let Some(attempt_id) = attempt_id else { return Ok(None) };
    let a = ledger::attempt(conn, attempt_id)?;
    if !matches!(a.state, AttemptState::Succeeded | AttemptState::SettledOk) {
        return Ok(None);
    }
    let checkpoint = match &a.checkpoint {
        Some(digest) => ledger::checkpoint(conn, digest)?,
        None => None,
    };
    let validations = ledger::latest_check_results(conn, goal_id, a.revision, "validation", Some(task_ref))?
        .into_iter()
        .map(|c| ValidationResult {
            id: c.check_id,
            passed: c.passed,
            checkpoint: c.checkpoint,
            evidence_id: c.evidence_id,
        })
        .collect();
    Ok(Some(Completion {
        revision: a.revision,
        attempt_id,
        task,
        meaning: row.meaning,
        dependencies: row.dependencies,
        checkpoint,
        reusable: a.reusable.unwrap_or(false),
        validations,
    }))
}

/// Text table of decisions, for `revise` and `explain`.
pub fn decisions_table(decisions: &[TaskDecision]) -> String {
    let width = decisions.iter().map(|d| d.task_ref.len()).max().unwrap_or(4).max(4);
    let mut text = format!("  {:width$}  {:<6}  {:<24}  {}\n", "TASK", "DECIDE", "REASON", "DETAIL");
    for d in decisions {
        match &d.decision {
            Decision::Reuse { provenance } => text.push_str(&format!(
                "  {:width$}  {:<6}  {:<24}  from revision {} attempt {} (evidence {:?})\n",
                d.task_ref, "reuse", "-", provenance.revision, provenance.attempt_id, provenance.evidence_ids
            )),
            Decision::Run { refusal } => text.push_str(&format!(
                "  {:width$}  {:<6}  {:<24}  {}\n",
                d.task_ref,
                "run",
                refusal.code(),
                refusal.detail()
            )),
        }
    }
    text
}
