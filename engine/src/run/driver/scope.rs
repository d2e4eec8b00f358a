//! What every part of the driver works within: the plan, its goal and
//! the revision this run is on.

use crate::error::{Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::{Plan, Task};
use crate::store::goals::TaskKey;

pub struct Scope<'p> {
    pub plan: &'p Plan,
    pub goal_id: GoalId,
    pub revision: Revision,
}

impl<'p> Scope<'p> {
    pub fn new(plan: &'p Plan, revision: Revision) -> Scope<'p> {
        Scope { plan, goal_id: GoalId::new(&plan.goal().id), revision }
    }

    pub fn task(&self, task_ref: &str) -> Result<&'p Task> {
        self.plan.task(task_ref).ok_or_else(|| Error::internal(format!("task {task_ref} is not in the plan")))
    }

    pub fn key<'a>(&'a self, task_ref: &'a str) -> TaskKey<'a> {
        TaskKey { goal_id: &self.goal_id, revision: self.revision, task_ref }
    }
}
