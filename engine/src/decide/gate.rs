//! The call-site gate: may this call be sent now? Facts in (read inside the
//! transaction that would commit the intent), one decision out. The rules
//! apply in SPEC's precedence, the first that stops the call wins:
//!
//! 1. the plan revision is no longer the goal's active one → `PLAN_CHANGED`
//!    (nothing is dispatched; the run stops);
//! 2. an earlier attempt of the task is unknown or in doubt → the task waits
//!    until a person settles it;
//! 3. the operation id was recorded with another request → `OPERATION_CONFLICT`;
//! 4. a budget would be passed → `BUDGET_EXHAUSTED`;
//! 5. the call needs a person's approval and has none for this exact
//!    request and plan → `APPROVAL_REQUIRED` (or `APPROVAL_STALE`);
//! 6. otherwise: go — consuming the approval it needed (and voiding the
//!    operation's other open ones), or voiding any it did not need: an
//!    approval never waits for a later repeat, and one call spends one.

use crate::cost::Cost;
use crate::decide::budget::{self, Exhausted, Usage};
use crate::ids::{ApprovalId, AttemptId, RequestDigest, Revision};
use crate::plan::model::{Budgets, Effect, Task};
use crate::state::AttemptState;

/// An approval not yet consumed or voided, as the gate weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApproval {
    pub id: ApprovalId,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
}

/// What the gate needs to know about one call.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    /// The revision this run is on, and the goal's active revision now.
    pub revision: Revision,
    pub active_revision: Revision,
    /// The plan digest this run is on, and the active revision's.
    pub plan_digest: &'a str,
    pub active_plan_digest: &'a str,
    /// The task's earliest attempt that is unknown or in doubt.
    pub unsettled: Option<(AttemptId, AttemptState)>,
    /// Another request digest the operation id was recorded with.
    pub conflict: Option<RequestDigest>,
    pub request_digest: &'a RequestDigest,
    pub budgets: &'a Budgets,
    pub usage: Usage,
    pub call_cost: Cost,
    pub approval: ApprovalFacts<'a>,
}

/// What decides whether a call needs a person's approval, and which it has.
#[derive(Debug, Clone)]
pub struct ApprovalFacts<'a> {
    /// `requires_approval: true` gates every call.
    pub always: bool,
    /// Paid (`cost > 0`) or external work needs one for every repeat.
    pub paid_or_external: bool,
    /// A person asked for this call (a retry or a repair): a repeat.
    pub asked_repeat: bool,
    /// An earlier attempt of the task was (or may have been) dispatched.
    pub prior_dispatch: bool,
    /// The operation's open approvals, newest first.
    pub open: &'a [OpenApproval],
}

impl ApprovalFacts<'_> {
    /// The task's part of the facts: whether it always needs one, and
    /// whether a repeat of it does.
    pub fn of_task(task: &Task) -> (bool, bool) {
        (task.requires_approval, !task.cost().is_zero() || task.effect == Effect::External)
    }

    pub fn needed(&self) -> bool {
        self.always || (self.paid_or_external && (self.asked_repeat || self.prior_dispatch))
    }
}

/// Why an approval did not let the call through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// No open approval for this operation.
    None,
    /// The newest open approval was for another request or plan.
    Stale { approval_id: ApprovalId, why: String },
}

impl Missing {
    pub fn why(&self) -> String {
        match self {
            Missing::None => "no approval for this exact request".to_string(),
            Missing::Stale { approval_id, why } => format!("approval {approval_id} is stale: {why}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The goal moved to another revision (or plan) while this run was on
    /// this one: refused, nothing written.
    PlanMoved {
        active: Revision,
    },
    /// An earlier attempt of the task waits on a person's settlement.
    Unsettled {
        attempt: AttemptId,
        state: AttemptState,
    },
    /// The operation id was recorded with another request: refused.
    Conflict {
        recorded: RequestDigest,
    },
    Budget(Exhausted),
    AwaitApproval(Missing),
    /// Commit the intent; consume the approval it needed, or void those it
    /// did not need.
    Go {
        consume: Option<ApprovalId>,
        void: Vec<ApprovalId>,
    },
}

/// The gate, in SPEC's precedence (see the module's head).
pub fn decide(f: &Facts) -> Decision {
    if f.active_revision != f.revision || f.active_plan_digest != f.plan_digest {
        return Decision::PlanMoved { active: f.active_revision };
    }
    if let Some((attempt, state)) = f.unsettled {
        return Decision::Unsettled { attempt, state };
    }
    if let Some(recorded) = &f.conflict {
        return Decision::Conflict { recorded: recorded.clone() };
    }
    if let Err(exhausted) = budget::check_call(f.budgets, &f.usage, f.call_cost) {
        return Decision::Budget(exhausted);
    }
    if !f.approval.needed() {
        return Decision::Go { consume: None, void: f.approval.open.iter().map(|a| a.id).collect() };
    }
    match find(f.approval.open, f.request_digest, f.plan_digest) {
        // One call spends one approval; any other open one of the operation
        // goes with it, so no second approval waits to pay for a later try.
        Ok(id) => Decision::Go {
            consume: Some(id),
            void: f.approval.open.iter().map(|a| a.id).filter(|other| *other != id).collect(),
        },
        Err(missing) => Decision::AwaitApproval(missing),
    }
}

/// The newest open approval bound to exactly this request and plan wins;
/// an older stale one does not hide it.
fn find(open: &[OpenApproval], request_digest: &RequestDigest, plan_digest: &str) -> Result<ApprovalId, Missing> {
    if let Some(a) = open.iter().find(|a| a.request_digest == *request_digest && a.plan_digest == plan_digest) {
        return Ok(a.id);
    }
    let Some(newest) = open.first() else { return Err(Missing::None) };
    let why = if newest.request_digest != *request_digest {
        format!("approved request digest {} differs from this request's {request_digest}", newest.request_digest)
    } else {
        "the plan changed since the approval was given".into()
    };
    Err(Missing::Stale { approval_id: newest.id, why })
}

#[cfg(test)]
mod tests;
