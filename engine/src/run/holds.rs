//! The holds in force on a goal, read from a person's acts in the ledger
//! (`decide::hold` weighs them). A release only counts when the act chain
//! vouches for it: a row slipped into the ledger cannot let held work go.

use crate::decide::hold::{self, Holds, Target};
use crate::error::Result;
use crate::ids::GoalId;
use crate::store::acts::{ActRef, AskKind};
use crate::store::LedgerRead;

/// The holds in force on `goal` (`STORE_TAMPERED` for a release the act
/// chain does not vouch for).
pub fn holds(read: &dyn LedgerRead, goal: &GoalId) -> Result<Holds> {
    let mut acts = Vec::new();
    for a in read.asks_of_goal(goal)? {
        let hold = match a.kind {
            AskKind::Hold => true,
            AskKind::Release => false,
            _ => continue,
        };
        if !hold {
            read.check_on_chain(ActRef::Ask(a.id))?;
        }
        let reason = a.data.get("reason").and_then(|r| r.as_str()).unwrap_or_default().to_string();
        acts.push(hold::Act { target: Target::of(a.task_ref.as_deref()), hold, by: a.actor, reason, at_ms: a.at_ms });
    }
    Ok(hold::holds(&acts))
}
