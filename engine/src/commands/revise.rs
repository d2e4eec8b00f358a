//! `engine revise PLAN --reason TEXT`: a new plan revision of the same
//! goal, linked to the one before, within `max_revisions`. Every task is
//! decided `reuse` or `run` (`decide::reuse`, with the first refusing
//! reason) before anything runs, and the table is shown.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::json;

use super::register;
use crate::checkpoint::{self, FileCache, FileState};
use crate::decide::budget::BudgetName;
use crate::decide::reuse::{self, Candidate, Decision};
use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::{Plan, PlanFile, Task};
use crate::run::{self, Asked, RunReport};
use crate::state::{GoalState, TaskState};
use crate::store::events::{Event, EventKind};
use crate::store::goals::GoalRecord;
use crate::store::goals::{NewRevision, TaskKey};
use crate::store::{Durability, LedgerRead, LedgerTx, Store};

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
    pub goal_id: GoalId,
    pub from_revision: Revision,
    pub revision: Revision,
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
    if !crate::store::is_shared(&store_path) && std::fs::symlink_metadata(&store_path).is_err() {
        return Err(Error::usage(format!(
            "no store at {}: `engine run` registers the goal first",
            store_path.display()
        )));
    }
    let mut ledger = run::orphans::take_lease(Store::open_rw(&store_path)?)?;
    let goal_id = GoalId::new(&plan.goal().id);
    let read = ledger.read();
    let (g, prev_file, prev_contract) = revisable(&*read, &plan, &goal_id)?;
    let goal_changed = prev_contract != plan.digests.goal_contract;
    let mut cache = FileCache::from_states(read.file_states()?);
    let decisions = decide_all(&*read, &plan, &goal_id, g.active_revision, &prev_file, goal_changed, &mut cache)?;

    let revision = g.active_revision.next();
    let new = NewRevision {
        goal_id: &goal_id,
        revision,
        parent: Some(g.active_revision),
        plan_digest: &plan.digests.plan,
        goal_contract: &plan.digests.goal_contract,
        plan_json: &register::plan_json(&plan)?,
        plan_path: &req.plan_path.display().to_string(),
        workspace: &plan.workspace.display().to_string(),
        reason: Some(&req.reason),
    };
    let dirty = cache.take_dirty();
    ledger.write(Durability::Full, |tx| record(tx, &plan, &new, goal_changed, &decisions, &dirty))?;
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
        report.run = Some(run::execute(&mut ledger, plan, revision, req.jobs, Asked::default())?);
    }
    Ok(report)
}

/// The goal's active revision, if a new one may follow it: the plan
/// differs and `max_revisions` is not used up. With it, its plan file and
/// goal contract digest.
fn revisable(read: &dyn LedgerRead, plan: &Plan, goal_id: &GoalId) -> Result<(GoalRecord, PlanFile, String)> {
    let g = read
        .goal(goal_id)?
        .ok_or_else(|| Error::usage(format!("goal `{goal_id}` is not in this store: `engine run` registers it")))?;
    let prev = read.revision(goal_id, g.active_revision)?;
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
    let used = (g.active_revision.get() - 1).max(0) as u64;
    let limit = lowest_max_revisions(read, goal_id, g.active_revision)?;
    if used >= limit {
        let budget = BudgetName::MaxRevisions;
        return Err(Error::new(
            Code::BudgetExhausted,
            format!("{budget}: used {used} of {limit}; no new revision is recorded"),
        )
        .with_details(json!({"budget": budget, "used": used, "limit": limit})));
    }
    Ok((g, prev_file, prev.goal_contract))
}

/// The new revision, its tasks as decided, the event with the decisions,
/// and the goal moved onto it, in one transaction.
fn record(
    tx: &mut dyn LedgerTx,
    plan: &Plan,
    new: &NewRevision,
    goal_changed: bool,
    decisions: &[TaskDecision],
    dirty: &[FileState],
) -> Result<()> {
    let (goal_id, revision) = (new.goal_id, new.revision);
    tx.insert_revision(new)?;
    register::insert_tasks(tx, plan, revision)?;
    for d in decisions {
        let (state, detail) = match &d.decision {
            Decision::Reuse { provenance } => (TaskState::Reused, json!({"reused_from": provenance})),
            Decision::Run { refusal } => {
                (TaskState::Pending, json!({"reuse_refused": refusal.code(), "detail": refusal.detail()}))
            }
        };
        tx.set_task_state(TaskKey { goal_id, revision, task_ref: &d.task_ref }, state, &detail)?;
    }
    let data = json!({
        "parent": new.parent, "reason": new.reason, "plan_digest": plan.digests.plan,
        "goal_contract_digest": plan.digests.goal_contract, "goal_contract_changed": goal_changed,
        "decisions": decisions,
    });
    let seq = tx.append_event(&Event::goal(EventKind::RevisionRecorded, goal_id, revision, data))?;
    tx.put_file_states(dirty)?;
    tx.set_active_revision(goal_id, revision)?;
    // A new plan settles nothing: an unknown outcome still waits on a person.
    let state = if tx.unknown_count(goal_id)? > 0 { GoalState::NeedsSettlement } else { GoalState::Open };
    tx.set_goal_state(goal_id, state, seq)
}

/// The smallest `max_revisions` of revisions 1..=`active` of a goal.
fn lowest_max_revisions(ledger: &dyn LedgerRead, goal_id: &GoalId, active: Revision) -> Result<u64> {
    let mut lowest = u64::MAX;
    for revision in 1..=active.get() {
        let row = ledger.revision(goal_id, Revision(revision))?;
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
    ledger: &dyn LedgerRead,
    plan: &Plan,
    goal_id: &GoalId,
    prev_revision: Revision,
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
        let Some(d) = plan.digests.tasks.get(&task.task_ref) else { continue };
        let completion = if goal_changed {
            None
        } else {
            run::completion(ledger, goal_id, prev_revision, then.get(task.task_ref.as_str()).copied(), &task.task_ref)?
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
