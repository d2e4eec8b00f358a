//! Goals, revisions and tasks in PostgreSQL.

use serde_json::Value;
use tokio_postgres::Row;

use super::client::p;
use super::sql::{get, refusal, words, PgSql, DISPATCHED_OR_MAYBE};
use crate::clock::now_ms;
use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::ids::{GoalId, OperationId, Revision, Seq};
use crate::state::{GoalState, Lifecycle, TaskState};
use crate::store::goals::{
    ActiveTask, BudgetUse, GoalRecord, GoalSummary, GoalsRead, GoalsWrite, NewRevision, NewTask, RevisionRecord,
    TaskKey, TaskRecord,
};

const TASK_COLUMNS: &str = "task_ref, state, operation_id, request_digest, meaning, dependencies, detail";

fn task_from_row(r: &Row) -> Result<TaskRecord> {
    let detail: String = get(r, 6)?;
    Ok(TaskRecord {
        task_ref: get(r, 0)?,
        state: get(r, 1)?,
        operation_id: get(r, 2)?,
        request_digest: get(r, 3)?,
        meaning: get(r, 4)?,
        dependencies: get(r, 5)?,
        detail: serde_json::from_str(&detail).unwrap_or(Value::Null),
    })
}

fn goal_from_row(r: &Row) -> Result<GoalRecord> {
    Ok(GoalRecord { id: get(r, 0)?, active_revision: get(r, 1)?, state: get(r, 2)?, first_run_at_ms: get(r, 3)? })
}

fn budget_from_row(r: &Row) -> Result<BudgetUse> {
    Ok(BudgetUse { calls: get::<i64>(r, 0)?.max(0) as u64, cost: Cost::from_micros(get(r, 1)?) })
}

impl GoalsRead for PgSql<'_> {
    fn goal(&self, id: &GoalId) -> Result<Option<GoalRecord>> {
        self.q1("SELECT id, active_revision, state, first_run_at_ms FROM goals WHERE id = $1", p![id.clone()])?
            .map(|r| goal_from_row(&r))
            .transpose()
    }

    fn latest_goal(&self) -> Result<Option<GoalRecord>> {
        self.q1(
            "SELECT id, active_revision, state, first_run_at_ms FROM goals ORDER BY updated_seq DESC, created DESC LIMIT 1",
            p![],
        )?
        .map(|r| goal_from_row(&r))
        .transpose()
    }

    fn goal_summaries(&self, limit: i64) -> Result<Vec<GoalSummary>> {
        let rows = self.q(
            "SELECT g.id, g.state, g.active_revision,
                    COALESCE(r.plan_json::json -> 'goal' ->> 'statement', ''), g.first_run_at_ms,
                    COALESCE((SELECT e.at_ms FROM events e WHERE e.seq = g.updated_seq), g.first_run_at_ms)
             FROM goals g LEFT JOIN revisions r ON r.goal_id = g.id AND r.revision = g.active_revision
             ORDER BY g.updated_seq DESC, g.created DESC LIMIT $1",
            p![limit],
        )?;
        rows.iter()
            .map(|r| {
                Ok(GoalSummary {
                    id: get(r, 0)?,
                    state: get(r, 1)?,
                    active_revision: get(r, 2)?,
                    statement: get(r, 3)?,
                    first_run_at_ms: get(r, 4)?,
                    updated_at_ms: get(r, 5)?,
                })
            })
            .collect()
    }

    fn goal_count(&self) -> Result<i64> {
        self.v("SELECT count(*) FROM goals", p![])?.ok_or_else(|| Error::internal("count(*) returned no row"))
    }

    fn revision(&self, goal: &GoalId, revision: Revision) -> Result<RevisionRecord> {
        let r = self
            .q1(
                "SELECT goal_id, revision, parent, plan_digest, goal_contract, plan_json, plan_path, workspace, reason
                 FROM revisions WHERE goal_id = $1 AND revision = $2",
                p![goal.clone(), revision],
            )?
            .ok_or_else(|| Error::internal(format!("goal {goal} has no revision {revision}")))?;
        Ok(RevisionRecord {
            goal_id: get(&r, 0)?,
            revision: get(&r, 1)?,
            parent: get::<Option<i64>>(&r, 2)?.map(Revision),
            plan_digest: get(&r, 3)?,
            goal_contract: get(&r, 4)?,
            plan_json: get(&r, 5)?,
            plan_path: get(&r, 6)?,
            workspace: get(&r, 7)?,
            reason: get(&r, 8)?,
        })
    }

    fn revision_plan_digest(&self, goal: &GoalId, revision: Revision) -> Result<String> {
        self.v("SELECT plan_digest FROM revisions WHERE goal_id = $1 AND revision = $2", p![goal.clone(), revision])?
            .ok_or_else(|| Error::internal(format!("goal {goal} has no revision {revision}")))
    }

    fn tasks(&self, goal: &GoalId, revision: Revision) -> Result<Vec<TaskRecord>> {
        let rows = self.q(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE goal_id = $1 AND revision = $2 ORDER BY task_ref"),
            p![goal.clone(), revision],
        )?;
        rows.iter().map(task_from_row).collect()
    }

    fn task(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<TaskRecord>> {
        self.q1(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE goal_id = $1 AND revision = $2 AND task_ref = $3"),
            p![goal.clone(), revision, task_ref.to_string()],
        )?
        .map(|r| task_from_row(&r))
        .transpose()
    }

    fn active_task_of_operation(&self, op: &OperationId) -> Result<Option<ActiveTask>> {
        let row = self.q1(
            "SELECT t.goal_id, t.revision, t.task_ref, t.state, t.request_digest FROM tasks t JOIN goals g
               ON g.id = t.goal_id AND g.active_revision = t.revision WHERE t.operation_id = $1 LIMIT 1",
            p![op.clone()],
        )?;
        row.map(|r| {
            Ok(ActiveTask {
                goal_id: get(&r, 0)?,
                revision: get(&r, 1)?,
                task_ref: get(&r, 2)?,
                state: get(&r, 3)?,
                request_digest: get(&r, 4)?,
            })
        })
        .transpose()
    }

    fn budget_use(&self, goal: &GoalId) -> Result<BudgetUse> {
        // In a write, the goal's row is locked: the budget is checked and
        // spent in the same transaction by one worker at a time.
        let lock = if self.writing() { " FOR UPDATE" } else { "" };
        let r = self
            .q1(&format!("SELECT calls_used, cost_used_micros FROM goals WHERE id = $1{lock}"), p![goal.clone()])?
            .ok_or_else(|| Error::internal(format!("goal {goal} is not in the ledger")))?;
        budget_from_row(&r)
    }

    fn goal_and_use(&self, id: &GoalId) -> Result<Option<(GoalRecord, BudgetUse)>> {
        // Locked in a write, as `budget_use` locks it.
        let lock = if self.writing() { " FOR UPDATE" } else { "" };
        let sql = format!(
            "SELECT id, active_revision, state, first_run_at_ms, calls_used, cost_used_micros FROM goals WHERE id = $1{lock}"
        );
        let Some(r) = self.q1(&sql, p![id.clone()])? else { return Ok(None) };
        let used = BudgetUse { calls: get::<i64>(&r, 4)?.max(0) as u64, cost: Cost::from_micros(get(&r, 5)?) };
        Ok(Some((goal_from_row(&r)?, used)))
    }

    fn recount_budget_use(&self, goal: &GoalId) -> Result<BudgetUse> {
        let r = self
            .q1(
                &format!(
                    "SELECT COUNT(*), COALESCE(SUM(cost_micros + spent_micros), 0)::BIGINT FROM attempts a WHERE goal_id = $1 AND {DISPATCHED_OR_MAYBE}"
                ),
                p![goal.clone()],
            )?
            .ok_or_else(|| Error::internal("a count returned no row"))?;
        budget_from_row(&r)
    }
}

impl GoalsWrite for PgSql<'_> {
    fn insert_goal(&mut self, id: &GoalId, revision: Revision, seq: Seq) -> Result<()> {
        self.q(
            "INSERT INTO goals (id, active_revision, state, first_run_at_ms, updated_seq) VALUES ($1, $2, 'open', $3, $4)",
            p![id.clone(), revision, now_ms(), seq],
        )?;
        Ok(())
    }

    fn set_goal_state(&mut self, id: &GoalId, state: GoalState, seq: Seq) -> Result<()> {
        let sql = format!(
            "UPDATE goals SET state = $2, updated_seq = $3 WHERE id = $1 AND state IN ({}) RETURNING 1",
            words(&GoalState::sources(state), GoalState::as_str)
        );
        if !self.q(&sql, p![id.clone(), state, seq])?.is_empty() {
            return Ok(());
        }
        let now: Option<GoalState> = self.v("SELECT state FROM goals WHERE id = $1", p![id.clone()])?;
        Err(refusal(&format!("goal {id}"), now, state))
    }

    fn set_active_revision(&mut self, id: &GoalId, revision: Revision) -> Result<()> {
        self.q("UPDATE goals SET active_revision = $2 WHERE id = $1", p![id.clone(), revision])?;
        Ok(())
    }

    fn insert_revision(&mut self, r: &NewRevision) -> Result<()> {
        self.q(
            "INSERT INTO revisions (goal_id, revision, parent, plan_digest, goal_contract, plan_json, plan_path, workspace, reason, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            p![
                r.goal_id.clone(),
                r.revision,
                r.parent.map(|p| p.0),
                r.plan_digest.to_string(),
                r.goal_contract.to_string(),
                r.plan_json.to_string(),
                r.plan_path.to_string(),
                r.workspace.to_string(),
                r.reason.map(str::to_string),
                now_ms()
            ],
        )?;
        Ok(())
    }

    fn insert_task(&mut self, t: &NewTask) -> Result<()> {
        let d = t.digests;
        self.q(
            "INSERT INTO tasks (goal_id, revision, task_ref, state, meaning, dependencies, operation_id, request_digest)
             VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7)",
            p![
                t.goal_id.clone(),
                t.revision,
                t.task_ref.to_string(),
                d.meaning.clone(),
                d.dependencies.clone(),
                d.operation_id.clone(),
                d.request.clone()
            ],
        )?;
        Ok(())
    }

    fn set_task_state(&mut self, key: TaskKey, state: TaskState, detail: &Value) -> Result<()> {
        self.fence_task(key.goal_id, key.task_ref)?;
        let sql = format!(
            "UPDATE tasks SET state = $4, detail = $5 WHERE goal_id = $1 AND revision = $2 AND task_ref = $3
               AND state IN ({}) RETURNING 1",
            words(&TaskState::sources(state), TaskState::as_str)
        );
        let (goal, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
        let done = self.q(&sql, p![goal.clone(), revision, task_ref.to_string(), state, detail.to_string()])?;
        if !done.is_empty() {
            return Ok(());
        }
        let now: Option<TaskState> = self.v(
            "SELECT state FROM tasks WHERE goal_id = $1 AND revision = $2 AND task_ref = $3",
            p![goal.clone(), revision, task_ref.to_string()],
        )?;
        Err(refusal(&format!("task {task_ref} of {goal} r{revision}"), now, state))
    }
}
