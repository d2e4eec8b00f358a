//! Goals, revisions and tasks in SQLite.

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use super::sql::{exec, json_text, one_of, qrow, refusal, rows, Guarded, Sql};
use crate::clock::now_ms;
use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::ids::{GoalId, OperationId, Revision, Seq};
use crate::plan::cache::CachedPlan;
use crate::state::{GoalState, Lifecycle, TaskState};
use crate::store::goals::{
    ActiveTask, BudgetUse, GoalRecord, GoalSummary, GoalsRead, GoalsWrite, NewRevision, NewTask, RevisionRecord,
    TaskKey, TaskRecord, TaskSummary,
};

const TASK_COLUMNS: &str = "task_ref, state, operation_id, request_digest, meaning, dependencies, detail";

fn task_from_row(r: &rusqlite::Row) -> rusqlite::Result<TaskRecord> {
    let detail: String = r.get(6)?;
    Ok(TaskRecord {
        task_ref: r.get(0)?,
        state: r.get(1)?,
        operation_id: r.get(2)?,
        request_digest: r.get(3)?,
        meaning: r.get(4)?,
        dependencies: r.get(5)?,
        detail: serde_json::from_str(&detail).unwrap_or(Value::Null),
    })
}

impl GoalsRead for Sql<'_> {
    fn goal(&self, id: &GoalId) -> Result<Option<GoalRecord>> {
        Ok(qrow(self.conn, "SELECT id, active_revision, state, first_run_at_ms FROM goals WHERE id = ?1", [id], |r| {
            Ok(GoalRecord { id: r.get(0)?, active_revision: r.get(1)?, state: r.get(2)?, first_run_at_ms: r.get(3)? })
        })
        .optional()?)
    }

    fn latest_goal(&self) -> Result<Option<GoalRecord>> {
        let id: Option<GoalId> =
            qrow(self.conn, "SELECT id FROM goals ORDER BY updated_seq DESC, rowid DESC LIMIT 1", [], |r| r.get(0))
                .optional()?;
        match id {
            Some(id) => self.goal(&id),
            None => Ok(None),
        }
    }

    fn goal_summaries(&self, limit: i64) -> Result<Vec<GoalSummary>> {
        rows(
            self.conn,
            "SELECT g.id, g.state, g.active_revision,
                    COALESCE(json_extract(r.plan_json, '$.goal.statement'), ''), g.first_run_at_ms,
                    COALESCE((SELECT e.at_ms FROM events e WHERE e.seq = g.updated_seq), g.first_run_at_ms)
             FROM goals g LEFT JOIN revisions r ON r.goal_id = g.id AND r.revision = g.active_revision
             ORDER BY g.updated_seq DESC, g.rowid DESC LIMIT ?1",
            [limit],
            |r| {
                Ok(GoalSummary {
                    id: r.get(0)?,
                    state: r.get(1)?,
                    active_revision: r.get(2)?,
                    statement: r.get(3)?,
                    first_run_at_ms: r.get(4)?,
                    updated_at_ms: r.get(5)?,
                })
            },
        )
    }

    fn goal_count(&self) -> Result<i64> {
        qrow(self.conn, "SELECT count(*) FROM goals", [], |r| r.get(0)).map_err(Into::into)
    }

    fn revision(&self, goal: &GoalId, revision: Revision) -> Result<RevisionRecord> {
        qrow(
            self.conn,
            "SELECT goal_id, revision, parent, plan_digest, goal_contract, plan_json, plan_path, workspace, reason
             FROM revisions WHERE goal_id = ?1 AND revision = ?2",
            params![goal, revision],
            |r| {
                Ok(RevisionRecord {
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
        .ok_or_else(|| Error::internal(format!("goal {goal} has no revision {revision}")))
    }

    fn revision_plan_digest(&self, goal: &GoalId, revision: Revision) -> Result<String> {
        qrow(
            self.conn,
            "SELECT plan_digest FROM revisions WHERE goal_id = ?1 AND revision = ?2",
            params![goal, revision],
            |r| r.get(0),
        )
        .optional()?
        .ok_or_else(|| Error::internal(format!("goal {goal} has no revision {revision}")))
    }

    fn cached_plan(&self, key: &str) -> Result<Option<CachedPlan>> {
        Ok(qrow(
            self.conn,
            "SELECT file_key, goal_id, revision, body, seal FROM plan_cache WHERE file_key = ?1",
            [key],
            |r| {
                Ok(CachedPlan {
                    key: r.get(0)?,
                    goal_id: GoalId::new(r.get::<_, String>(1)?),
                    revision: r.get(2)?,
                    body: r.get(3)?,
                    seal: r.get(4)?,
                })
            },
        )
        .optional()?)
    }

    fn tasks(&self, goal: &GoalId, revision: Revision) -> Result<Vec<TaskRecord>> {
        rows(
            self.conn,
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE goal_id = ?1 AND revision = ?2"),
            params![goal, revision],
            task_from_row,
        )
    }

    fn task_states(&self, goal: &GoalId, revision: Revision) -> Result<Vec<(String, TaskState)>> {
        rows(
            self.conn,
            "SELECT task_ref, state FROM tasks WHERE goal_id = ?1 AND revision = ?2",
            params![goal, revision],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    fn task_summaries(&self, goal: &GoalId, revision: Revision) -> Result<Vec<TaskSummary>> {
        rows(
            self.conn,
            "SELECT task_ref, state, operation_id, detail FROM tasks WHERE goal_id = ?1 AND revision = ?2",
            params![goal, revision],
            |r| {
                let detail = r.get_ref(3)?.as_str()?;
                Ok(TaskSummary::from_row(r.get(0)?, r.get(1)?, r.get(2)?, detail))
            },
        )
    }

    fn task(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<TaskRecord>> {
        Ok(qrow(
            self.conn,
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3"),
            params![goal, revision, task_ref],
            task_from_row,
        )
        .optional()?)
    }

    fn active_task_of_operation(&self, op: &OperationId) -> Result<Option<ActiveTask>> {
        Ok(qrow(
            self.conn,
            "SELECT t.goal_id, t.revision, t.task_ref, t.state, t.request_digest FROM tasks t JOIN goals g
               ON g.id = t.goal_id AND g.active_revision = t.revision WHERE t.operation_id = ?1",
            [op],
            |r| {
                Ok(ActiveTask {
                    goal_id: r.get(0)?,
                    revision: r.get(1)?,
                    task_ref: r.get(2)?,
                    state: r.get(3)?,
                    request_digest: r.get(4)?,
                })
            },
        )
        .optional()?)
    }

    fn budget_use(&self, goal: &GoalId) -> Result<BudgetUse> {
        Ok(qrow(self.conn, "SELECT calls_used, cost_used_micros FROM goals WHERE id = ?1", [goal], |r| {
            Ok(BudgetUse { calls: r.get::<_, i64>(0)?.max(0) as u64, cost: Cost::from_micros(r.get(1)?) })
        })?)
    }

    fn goal_and_use(&self, id: &GoalId) -> Result<Option<(GoalRecord, BudgetUse)>> {
        let sql =
            "SELECT id, active_revision, state, first_run_at_ms, calls_used, cost_used_micros FROM goals WHERE id = ?1";
        Ok(qrow(self.conn, sql, [id], |r| {
            let goal =
                GoalRecord { id: r.get(0)?, active_revision: r.get(1)?, state: r.get(2)?, first_run_at_ms: r.get(3)? };
            Ok((goal, BudgetUse { calls: r.get::<_, i64>(4)?.max(0) as u64, cost: Cost::from_micros(r.get(5)?) }))
        })
        .optional()?)
    }

    fn recount_budget_use(&self, goal: &GoalId) -> Result<BudgetUse> {
        Ok(qrow(
            self.conn,
            &format!(
                "SELECT COUNT(*), COALESCE(SUM(cost_micros + spent_micros), 0) FROM attempts a WHERE goal_id = ?1 AND {}",
                super::sql::DISPATCHED_OR_MAYBE
            ),
            [goal],
            |r| Ok(BudgetUse { calls: r.get::<_, i64>(0)?.max(0) as u64, cost: Cost::from_micros(r.get(1)?) }),
        )?)
    }
}

impl GoalsWrite for Sql<'_> {
    fn put_cached_plan(&mut self, row: &CachedPlan) -> Result<()> {
        exec(
            self.conn,
            "INSERT OR REPLACE INTO plan_cache (file_key, goal_id, revision, body, seal) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![row.key, row.goal_id, row.revision, row.body, row.seal],
        )?;
        Ok(())
    }

    fn insert_goal(&mut self, id: &GoalId, revision: Revision, seq: Seq) -> Result<()> {
        exec(
            self.conn,
            "INSERT INTO goals (id, active_revision, state, first_run_at_ms, updated_seq) VALUES (?1, ?2, 'open', ?3, ?4)",
            params![id, revision, now_ms(), seq],
        )?;
        Ok(())
    }

    fn set_goal_state(&mut self, id: &GoalId, state: GoalState, seq: Seq) -> Result<()> {
        static MOVE: Guarded<GoalState> = Guarded::new(|to| {
            format!(
                "UPDATE goals SET state = ?2, updated_seq = ?3 WHERE id = ?1 AND {}",
                one_of("state", &GoalState::sources(to), GoalState::as_str)
            )
        });
        if exec(self.conn, MOVE.sql(state)?, params![id, state, seq])? == 1 {
            return Ok(());
        }
        let now: Option<GoalState> =
            qrow(self.conn, "SELECT state FROM goals WHERE id = ?1", [id], |r| r.get(0)).optional()?;
        Err(refusal(&format!("goal {id}"), now, state))
    }

    fn set_active_revision(&mut self, id: &GoalId, revision: Revision) -> Result<()> {
        exec(self.conn, "UPDATE goals SET active_revision = ?2 WHERE id = ?1", params![id, revision])?;
        Ok(())
    }

    fn insert_revision(&mut self, r: &NewRevision) -> Result<()> {
        exec(self.conn,
            "INSERT INTO revisions (goal_id, revision, parent, plan_digest, goal_contract, plan_json, plan_path, workspace, reason, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![r.goal_id, r.revision, r.parent, r.plan_digest, r.goal_contract, r.plan_json, r.plan_path, r.workspace, r.reason, now_ms()],
        )?;
        Ok(())
    }

    fn insert_task(&mut self, t: &NewTask) -> Result<()> {
        let d = t.digests;
        exec(
            self.conn,
            "INSERT INTO tasks (goal_id, revision, task_ref, state, meaning, dependencies, operation_id, request_digest)
             VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7)",
            params![t.goal_id, t.revision, t.task_ref, d.meaning, d.dependencies, d.operation_id, d.request],
        )?;
        Ok(())
    }

    fn set_task_state(&mut self, key: TaskKey, state: TaskState, detail: &Value) -> Result<()> {
        static MOVE: Guarded<TaskState> = Guarded::new(|to| {
            format!(
                "UPDATE tasks SET state = ?4, detail = ?5 WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3
               AND {}",
                one_of("state", &TaskState::sources(to), TaskState::as_str)
            )
        });
        let (goal, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
        if exec(
            self.conn,
            MOVE.sql(state)?,
            params![goal, revision, task_ref, state, json_text("task detail", detail)?],
        )? == 1
        {
            return Ok(());
        }
        let now: Option<TaskState> = qrow(
            self.conn,
            "SELECT state FROM tasks WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3",
            params![goal, revision, task_ref],
            |r| r.get(0),
        )
        .optional()?;
        Err(refusal(&format!("task {task_ref} of {goal} r{revision}"), now, state))
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::super::sql::Sql;
    use crate::ids::GoalId;
    use crate::store::goals::GoalsRead;

    /// The gate's one read of the goal's row answers as its two reads did
    /// (`goal`, `budget_use`), for each goal, and none for a missing one.
    #[test]
    fn the_goal_and_its_use_read_once_answer_as_the_two_reads() {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        conn.execute_batch(
            "INSERT INTO goals (id, active_revision, state, first_run_at_ms, updated_seq, calls_used, cost_used_micros)
             VALUES ('g1', 3, 'open', 11, 1, 7, 250000), ('g2', 1, 'failed', 22, 2, 0, 0)",
        )
        .unwrap();
        let read = Sql::reader(&conn);
        for id in ["g1", "g2"] {
            let id = GoalId::new(id);
            let (goal, used) = read.goal_and_use(&id).unwrap().unwrap();
            let two = (read.goal(&id).unwrap().unwrap(), read.budget_use(&id).unwrap());
            assert_eq!((goal.id.clone(), goal.active_revision, goal.state, goal.first_run_at_ms), {
                let g = &two.0;
                (g.id.clone(), g.active_revision, g.state, g.first_run_at_ms)
            });
            assert_eq!(used, two.1);
        }
        let used = read.goal_and_use(&GoalId::new("g1")).unwrap().unwrap().1;
        assert_eq!((used.calls, used.cost.micros()), (7, 250_000));
        assert!(read.goal_and_use(&GoalId::new("g3")).unwrap().is_none());
    }
}
