//! Goals, their plan revisions, and each revision's tasks; the goal's
//! budget counters live with it.

use serde::Serialize;
use serde_json::Value;

use crate::cost::Cost;
use crate::error::Result;
use crate::ids::{GoalId, OperationId, RequestDigest, Revision, Seq};
use crate::plan::cache::CachedPlan;
use crate::plan::digests::TaskDigests;
use crate::state::{GoalState, TaskState};

mod summary;
pub use summary::TaskSummary;

#[derive(Debug, Clone, Serialize)]
pub struct GoalRecord {
    pub id: GoalId,
    pub active_revision: Revision,
    pub state: GoalState,
    pub first_run_at_ms: i64,
}

/// A goal as `engine goals` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct GoalSummary {
    pub id: GoalId,
    pub state: GoalState,
    pub active_revision: Revision,
    /// The active revision's goal statement.
    pub statement: String,
    pub first_run_at_ms: i64,
    /// When the goal last changed (its latest event that moved it).
    pub updated_at_ms: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RevisionRecord {
    pub goal_id: GoalId,
    pub revision: Revision,
    pub parent: Option<Revision>,
    pub plan_digest: String,
    pub goal_contract: String,
    /// The plan file as recorded (canonical JSON).
    pub plan_json: String,
    pub plan_path: String,
    pub workspace: String,
    pub reason: Option<String>,
}

pub struct NewRevision<'a> {
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub parent: Option<Revision>,
    pub plan_digest: &'a str,
    pub goal_contract: &'a str,
    pub plan_json: &'a str,
    pub plan_path: &'a str,
    pub workspace: &'a str,
    pub reason: Option<&'a str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskRecord {
    pub task_ref: String,
    pub state: TaskState,
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    pub meaning: String,
    pub dependencies: String,
    /// Why the task is in its state: a free-form note for people and
    /// `explain` (which attempt, which class, what it waits on).
    pub detail: Value,
}

/// The attempt a reused task's `detail` names as its result's.
pub(crate) fn reused_from_attempt(detail: &Value) -> Option<i64> {
    detail.get("reused_from").and_then(|p| p.get("attempt_id")).and_then(Value::as_i64)
}

impl TaskRecord {
    fn detail_str(&self, key: &str) -> Option<&str> {
        self.detail.get(key).and_then(Value::as_str)
    }

    /// The failure class its detail names, if any.
    pub fn class(&self) -> Option<&str> {
        self.detail_str("class")
    }

    pub fn why(&self) -> Option<&str> {
        self.detail_str("why")
    }

    /// The attempt an earlier unknown try left this task waiting on.
    pub fn waits_on_attempt(&self) -> Option<i64> {
        self.detail.get("waits_on_attempt").and_then(Value::as_i64)
    }

    /// The attempt a reused task's result comes from.
    pub fn reused_from_attempt(&self) -> Option<i64> {
        reused_from_attempt(&self.detail)
    }

    /// The kind of call that waits on an approval (recorded with it).
    pub fn asked_by(&self) -> Option<crate::state::AttemptKind> {
        self.detail_str("asked_by").and_then(crate::state::AttemptKind::parse)
    }

    /// The operation it waits on (a repair's own, when it has one).
    pub fn pending_operation(&self) -> Option<&str> {
        self.detail_str("operation_id")
    }

    /// The reuse refusal a stale completion recorded.
    pub fn stale(&self) -> Option<(&str, &str)> {
        Some((self.detail_str("stale")?, self.detail_str("detail").unwrap_or("")))
    }
}

/// A task of a revision, as it is registered.
pub struct NewTask<'a> {
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub task_ref: &'a str,
    pub digests: &'a TaskDigests,
}

/// Which task of which revision.
#[derive(Debug, Clone, Copy)]
pub struct TaskKey<'a> {
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub task_ref: &'a str,
}

/// The task of a goal's active revision that carries an operation id.
#[derive(Debug, Clone)]
pub struct ActiveTask {
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub state: TaskState,
    pub request_digest: RequestDigest,
}

/// What the goal's calls have used, goal-wide: kept as counters beside the
/// attempts they count (same transactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetUse {
    /// Attempts dispatched or possibly so (a call refused before dispatch
    /// is not counted).
    pub calls: u64,
    /// The cost of those calls, unknown outcomes included.
    pub cost: Cost,
}

pub trait GoalsRead {
    fn goal(&self, id: &GoalId) -> Result<Option<GoalRecord>>;
    /// The goal most recently touched (for commands run without `--goal`).
    fn latest_goal(&self) -> Result<Option<GoalRecord>>;
    /// Up to `limit` goals, the most recently changed first.
    fn goal_summaries(&self, limit: i64) -> Result<Vec<GoalSummary>>;
    /// How many goals the store holds.
    fn goal_count(&self) -> Result<i64>;
    fn revision(&self, goal: &GoalId, revision: Revision) -> Result<RevisionRecord>;
    /// One revision's plan digest, without reading its plan.
    fn revision_plan_digest(&self, goal: &GoalId, revision: Revision) -> Result<String>;
    fn tasks(&self, goal: &GoalId, revision: Revision) -> Result<Vec<TaskRecord>>;
    /// Each task's ref and state, nothing else (a run's start reads no
    /// more: the rows' other columns and their JSON detail stay unread).
    fn task_states(&self, goal: &GoalId, revision: Revision) -> Result<Vec<(String, TaskState)>> {
        Ok(self.tasks(goal, revision)?.into_iter().map(|t| (t.task_ref, t.state)).collect())
    }
    /// Each task as a run's report lists it (a backend reads only the
    /// columns and detail words it shows).
    fn task_summaries(&self, goal: &GoalId, revision: Revision) -> Result<Vec<TaskSummary>> {
        Ok(self.tasks(goal, revision)?.iter().map(TaskSummary::of).collect())
    }
    fn task(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<TaskRecord>>;
    fn active_task_of_operation(&self, op: &OperationId) -> Result<Option<ActiveTask>>;
    /// The plan cache's row for a plan file's key (`plan::cache`). A
    /// backend that keeps no plan cache (PostgreSQL) has none: every plan
    /// load there takes the full path.
    fn cached_plan(&self, _key: &str) -> Result<Option<CachedPlan>> {
        Ok(None)
    }
    /// The counters.
    fn budget_use(&self, goal: &GoalId) -> Result<BudgetUse>;
    /// The goal's row and its counters in one read (the gate reads both
    /// at every intent; a backend locks the row as `budget_use` does).
    fn goal_and_use(&self, id: &GoalId) -> Result<Option<(GoalRecord, BudgetUse)>> {
        let Some(goal) = self.goal(id)? else { return Ok(None) };
        Ok(Some((goal, self.budget_use(id)?)))
    }
    /// The same, recounted from the attempts themselves (the counters'
    /// invariant, checked in debug builds).
    fn recount_budget_use(&self, goal: &GoalId) -> Result<BudgetUse>;
}

pub trait GoalsWrite {
    fn insert_goal(&mut self, id: &GoalId, revision: Revision, seq: Seq) -> Result<()>;
    /// Through the goal's transition table.
    fn set_goal_state(&mut self, id: &GoalId, state: GoalState, seq: Seq) -> Result<()>;
    fn set_active_revision(&mut self, id: &GoalId, revision: Revision) -> Result<()>;
    fn insert_revision(&mut self, r: &NewRevision) -> Result<()>;
    /// Keep (or replace) the plan cache's row for its key; a backend that
    /// keeps no plan cache writes nothing.
    fn put_cached_plan(&mut self, _row: &CachedPlan) -> Result<()> {
        Ok(())
    }
    /// Born `pending`.
    fn insert_task(&mut self, t: &NewTask) -> Result<()>;
    /// Through the task's transition table; `detail` says why.
    fn set_task_state(&mut self, key: TaskKey, state: TaskState, detail: &Value) -> Result<()>;
}
