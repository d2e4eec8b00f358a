//! The budgets in force for a goal, read from the ledger: the active
//! plan's, `max_revisions` the lowest any recorded revision set (a plan
//! cannot raise its own limit by revising itself, not even in steps), each
//! raised by a person's recorded raises (`decide::raise`).

use crate::decide::raise::{self, Raise};
use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::model::Budgets;
use crate::plan::PlanFile;
use crate::store::events::EventKind;
use crate::store::LedgerRead;

/// The raises a person recorded for a goal, oldest first.
pub fn raises(read: &dyn LedgerRead, goal: &GoalId) -> Result<Vec<Raise>> {
    read.events_of_goal(goal, EventKind::BudgetRaised)?
        .into_iter()
        .map(|e| {
            serde_json::from_value::<Raise>(e.data.clone()).map_err(|err| {
                Error::new(Code::StoreCorrupt, format!("budget_raised event {} does not read back: {err}", e.seq))
            })
        })
        .collect()
}

/// The budgets in force with `plan`'s and the revisions 1..=`active`
/// recorded for `goal`: `max_revisions` is theirs alone (a plan not yet
/// recorded cannot set it either way).
pub fn in_force(read: &dyn LedgerRead, goal: &GoalId, active: Revision, plan: &Budgets) -> Result<Budgets> {
    let lowest = lowest_max_revisions(read, goal, active)?;
    let floor = Budgets { max_revisions: lowest, ..plan.clone() };
    Ok(raise::in_force(&floor, &raises(read, goal)?))
}

/// The smallest `max_revisions` of revisions 1..=`active` of a goal.
fn lowest_max_revisions(read: &dyn LedgerRead, goal: &GoalId, active: Revision) -> Result<u32> {
    let mut lowest = u32::MAX;
    for revision in 1..=active.get() {
        let row = read.revision(goal, Revision(revision))?;
        let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
            Error::new(Code::StoreCorrupt, format!("stored plan of revision {revision} does not parse: {e}"))
        })?;
        lowest = lowest.min(file.budgets.max_revisions);
    }
    Ok(lowest)
}
