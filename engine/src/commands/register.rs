//! Registering a goal: its first revision and tasks, or a check that the
//! plan is the goal's active revision (`PLAN_CHANGED` otherwise: a changed
//! plan is recorded with `engine revise`, never run over the old one).

use std::path::Path;

use serde_json::json;

use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::cache::CachedPlan;
use crate::plan::Plan;
use crate::store::events::{Event, EventKind};
use crate::store::goals::{NewRevision, NewTask};
use crate::store::{Durability, LeaseGuard};
use crate::store::{LedgerRead, LedgerTx};

/// `Some(revision)` when the goal is registered with exactly this plan as
/// its active revision; `PLAN_CHANGED` when it is registered with another;
/// `None` when the goal is new. Reads only.
pub fn check_unchanged(ledger: &dyn LedgerRead, plan: &Plan, plan_path: &Path) -> Result<Option<Revision>> {
    let goal = plan.goal();
    let goal_id = GoalId::new(&goal.id);
    let Some(row) = ledger.goal(&goal_id)? else { return Ok(None) };
    let active_digest = ledger.revision_plan_digest(&goal_id, row.active_revision)?;
    if active_digest != plan.digests().plan {
        let during = super::plan_watch::changed_during(ledger, &goal_id, row.active_revision)?;
        let how = match during {
            Some(run) => format!(
                "; the plan file changed during run {run}, not by `engine revise` (a provider may have written it): \
                 read the change before you record it"
            ),
            None => String::new(),
        };
        return Err(Error::new(
            Code::PlanChanged,
            format!(
                "this plan differs from goal `{}`'s active revision {}{how}; record the change with `engine revise {} --reason TEXT` (it shows what the change loosens)",
                goal.id,
                row.active_revision,
                plan_path.display()
            ),
        )
        .at(plan_path.display().to_string())
        .with_details(json!({
            "goal_id": goal.id, "active_revision": row.active_revision,
            "active_plan_digest": active_digest, "plan_digest": plan.digests().plan,
            "changed_during_run": during,
        })));
    }
    Ok(Some(row.active_revision))
}

/// Register the goal and its first revision, or check that the plan is the
/// goal's active revision (`PLAN_CHANGED` otherwise). `key`: the plan
/// file's cache key (`plan::cache`) when the plan was loaded in full — its
/// plan cache row is kept with the registration (or, for a goal registered
/// already, in a commit of its own).
pub fn register(ledger: &mut LeaseGuard, plan: &Plan, plan_path: &Path, key: Option<&str>) -> Result<Revision> {
    // A shared store keeps no plan cache.
    let key = key.filter(|_| !ledger.shared());
    let revision = match check_unchanged(&*ledger.read(), plan, plan_path)? {
        Some(revision) => {
            if let Some(row) = key.map(|k| cache_row(k, plan, revision)) {
                ledger.write(Durability::Normal, |tx| tx.put_cached_plan(&row))?;
            }
            revision
        }
        None => register_new(ledger, plan, plan_path, key.map(|k| cache_row(k, plan, Revision::FIRST)))?,
    };
    if ledger.shared() {
        submitted(ledger, plan, revision)?;
    }
    Ok(revision)
}

/// On a shared store: the goal is open for workers again (a verdict an
/// earlier round recorded is not this round's).
fn submitted(ledger: &mut LeaseGuard, plan: &Plan, revision: Revision) -> Result<()> {
    let goal_id = GoalId::new(&plan.goal().id);
    let worker = ledger.worker_id().unwrap_or_default().to_string();
    ledger.write(Durability::Full, |tx| {
        let data = json!({"plan_digest": plan.digests().plan, "by": worker});
        let seq = tx.append_event(&Event::goal(EventKind::GoalSubmitted, &goal_id, revision, data))?;
        tx.set_goal_state(&goal_id, crate::state::GoalState::Open, seq)
    })
}

fn cache_row(key: &str, plan: &Plan, revision: Revision) -> CachedPlan {
    CachedPlan::new(key, revision, &plan.file, &plan.order, plan.digests())
}

fn register_new(
    ledger: &mut LeaseGuard,
    plan: &Plan,
    plan_path: &Path,
    cached: Option<CachedPlan>,
) -> Result<Revision> {
    let goal = plan.goal();
    let goal_id = GoalId::new(&goal.id);
    let plan_json = plan_json(plan)?;
    ledger.write(Durability::Full, |tx| {
        let data = json!({
            "plan_digest": plan.digests().plan, "goal_contract_digest": plan.digests().goal_contract,
            "plan_path": plan_path.display().to_string(), "tasks": plan.file.tasks.len(),
        });
        let seq = tx.append_event(&Event::goal(EventKind::GoalRegistered, &goal_id, Revision::FIRST, data))?;
        tx.insert_goal(&goal_id, Revision::FIRST, seq)?;
        tx.insert_revision(&NewRevision {
            goal_id: &goal_id,
            revision: Revision::FIRST,
            parent: None,
            plan_digest: &plan.digests().plan,
            goal_contract: &plan.digests().goal_contract,
            plan_json: &plan_json,
            plan_path: &plan_path.display().to_string(),
            workspace: &plan.workspace.display().to_string(),
            reason: None,
        })?;
        insert_tasks(tx, plan, Revision::FIRST)?;
        match &cached {
            Some(row) => tx.put_cached_plan(row),
            None => Ok(()),
        }
    })?;
    Ok(Revision::FIRST)
}

/// The plan as the ledger records it.
pub fn plan_json(plan: &Plan) -> Result<String> {
    serde_json::to_string(&plan.file).map_err(|e| Error::internal(format!("the plan does not serialize: {e}")))
}

/// Every task of `plan` as a task of `revision`, in dependency order.
pub fn insert_tasks(tx: &mut dyn LedgerTx, plan: &Plan, revision: Revision) -> Result<()> {
    let goal_id = GoalId::new(&plan.goal().id);
    for &i in &plan.order {
        let t = &plan.file.tasks[i];
        let digests = plan
            .digests()
            .tasks
            .get(&t.task_ref)
            .ok_or_else(|| Error::internal(format!("task {} has no digests", t.task_ref)))?;
        tx.insert_task(&NewTask { goal_id: &goal_id, revision, task_ref: &t.task_ref, digests })?;
    }
    Ok(())
}
