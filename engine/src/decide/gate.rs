//! The call-site gate: may this call be sent now? Facts in (read inside the
//! transaction that would commit the intent), one decision out. The rules
//! apply in SPEC's precedence, the first that stops the call wins:
//!
//! 1. the plan revision is no longer the goal's active one → `PLAN_CHANGED`
//!    (nothing is dispatched; the run stops);
//! 2. an earlier attempt of the task is unknown or in doubt → the task waits
//!    until a person settles it;
//! 3. another operation with the same request (by content: its
//!    fingerprint, whatever task or goal sent it) is unknown or in doubt →
//!    the call waits until a person settles that one (`SAME_REQUEST_UNSETTLED`);
//! 4. the operation id was recorded with another request → `OPERATION_CONFLICT`;
//! 5. a budget would be passed → `BUDGET_EXHAUSTED`;
//! 6. the call needs a person's approval and has none for this exact
//!    request, plan revision and cost → `APPROVAL_REQUIRED` (or
//!    `APPROVAL_STALE`, naming what changed since the person approved);
//! 7. otherwise: go — consuming the approval it needed (and voiding the
//!    operation's other open ones), or voiding any it did not need: an
//!    approval never waits for a later repeat, and one call spends one.

use crate::cost::Cost;
use crate::decide::budget::{self, Exhausted, Usage};
use crate::ids::{ApprovalId, AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::plan::model::{Budgets, Effect, Task};
use crate::state::AttemptState;

/// An approval not yet consumed or voided, as the gate weighs it: what
/// the person saw when they approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApproval {
    pub id: ApprovalId,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
    pub revision: Revision,
    /// `None`: recorded before approvals bound the cost (the plan digest
    /// still covers it).
    pub cost: Option<Cost>,
    /// When it expires (`None`: never): from then on it pays for nothing.
    pub expires_at_ms: Option<i64>,
}

impl OpenApproval {
    /// Past its time at `now_ms`?
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms >= at)
    }
}

/// Another operation's attempt whose request is this call's, by content,
/// and whose outcome nobody knows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SameRequest {
    #[serde(rename = "attempt_id")]
    pub attempt: AttemptId,
    pub operation_id: OperationId,
    pub goal_id: GoalId,
    pub task_ref: String,
    pub state: AttemptState,
}

impl SameRequest {
    /// The command that settles it, when a person can now: an unknown
    /// outcome is settled; an attempt still in doubt is first reconciled
    /// by a run of its own goal.
    pub fn settle(&self) -> Option<String> {
        (self.state == AttemptState::EffectUnknown)
            .then(|| format!("engine settle {} --outcome ok|not_run --note TEXT", self.operation_id))
    }

    /// Why the call waits, and on whom, in words.
    pub fn why(&self) -> String {
        let way = match self.settle() {
            Some(command) => format!("settle it first: `{command}`"),
            None => {
                format!("a run of goal {} reconciles it first, then a person settles it if it is unknown", self.goal_id)
            }
        };
        format!(
            "its request is the same as operation {} (task {} of goal {}), whose outcome is {}: not sent; {way}",
            self.operation_id, self.task_ref, self.goal_id, self.state
        )
    }
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
    /// The first unknown or unsettled attempt of another operation with
    /// this call's request fingerprint, in any goal of the store.
    pub same_request: Option<SameRequest>,
    /// Another request digest the operation id was recorded with.
    pub conflict: Option<RequestDigest>,
    pub request_digest: &'a RequestDigest,
    pub budgets: &'a Budgets,
    pub usage: Usage,
    pub call_cost: Cost,
    /// The task may spend more than its cost (`may_spend`).
    pub may_spend: bool,
    pub approval: ApprovalFacts<'a>,
    /// Now, on the run's clock: an approval past its time is expired.
    pub now_ms: i64,
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

/// Why a call needs a person's approval, the first that applies: a repeat
/// of a call that was sent before, a person's retry or repair, or the
/// task's own `requires_approval` (its first call included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// An earlier call of the task was sent, in `revision` (`now`: the
    /// revision this call is made in), and whether it succeeded (its
    /// effect took place) or only may have; `work`: what kind of work.
    Repeat { revision: Option<Revision>, now: Revision, succeeded: bool, work: Work },
    /// A person's retry or repair of paid or external work.
    PersonsRepeat,
    /// The task declares `requires_approval`.
    Declared,
}

/// What makes a task's repeat need a person: its effect, its cost, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    External,
    Paid,
    ExternalPaid,
}

impl Work {
    pub fn of_task(task: &Task) -> Work {
        match (task.effect == Effect::External, !task.cost().is_zero()) {
            (true, true) => Work::ExternalPaid,
            (false, true) => Work::Paid,
            _ => Work::External,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Work::External => "external work",
            Work::Paid => "paid work",
            Work::ExternalPaid => "external, paid work",
        }
    }
}

impl ApprovalFacts<'_> {
    /// Why `needed()` holds; `earlier`: the revision of the task's latest
    /// sent call, and whether one succeeded (read only for this); `now`:
    /// the revision of this call.
    pub fn needed_because(&self, earlier: Option<(Revision, bool)>, now: Revision, work: Work) -> Needed {
        match (self.paid_or_external, self.prior_dispatch, self.asked_repeat) {
            (true, true, _) => {
                Needed::Repeat { revision: earlier.map(|e| e.0), now, succeeded: earlier.is_some_and(|e| e.1), work }
            }
            (true, false, true) => Needed::PersonsRepeat,
            _ => Needed::Declared,
        }
    }
}

impl Needed {
    pub fn words(self) -> String {
        match self {
            Needed::Repeat { revision, now, succeeded, work } => {
                let what = work.words();
                // The first call of a revised task, or a repeat within one.
                let call = match revision {
                    Some(r) if r < now => format!("the first call in revision {now} of {what} that"),
                    _ => format!("a repeat of {what} that"),
                };
                let when = revision.map(|r| format!(" in revision {r}")).unwrap_or_default();
                let earlier = match succeeded {
                    true => format!("already took effect{when}"),
                    false => format!("was already sent{when} and may have taken effect"),
                };
                format!("{call} {earlier}; a new call of {what} needs a person's approval")
            }
            Needed::PersonsRepeat => {
                "a retry or repair of external or paid work: each new call needs a person's approval".to_string()
            }
            Needed::Declared => {
                "the task declares `requires_approval`: every call of it, the first included, needs a person's approval"
                    .to_string()
            }
        }
    }
}

/// Why an approval did not let the call through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// No open approval for this operation.
    None,
    /// The newest open approval was for another request or plan.
    Stale { approval_id: ApprovalId, why: String },
    /// The newest open approval is past its time: never spent.
    Expired { approval_id: ApprovalId, at_ms: i64 },
}

impl Missing {
    pub fn why(&self) -> String {
        match self {
            Missing::None => "no approval for this exact request".to_string(),
            Missing::Stale { approval_id, why } => format!("approval {approval_id} is stale: {why}"),
            Missing::Expired { approval_id, .. } => {
                format!("approval {approval_id} expired: it pays for nothing; a new approval is needed")
            }
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
    /// The same request, sent under another operation (another task ref or
    /// goal), is unknown or unsettled: nothing is sent until a person
    /// settles that one.
    SameRequest(SameRequest),
    /// The operation id was recorded with another request: refused.
    Conflict {
        recorded: RequestDigest,
    },
    Budget(Exhausted),
    AwaitApproval(Missing),
    /// The person's answer the call would carry is past its time
    /// (`engine answer --for`): never sent; the task asks again.
    AnswerExpired {
        ask_id: i64,
        at_ms: i64,
    },
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
    if let Some(first) = &f.same_request {
        return Decision::SameRequest(first.clone());
    }
    if let Some(recorded) = &f.conflict {
        return Decision::Conflict { recorded: recorded.clone() };
    }
    let call = budget::Call { cost: f.call_cost, may_spend: f.may_spend };
    if let Err(exhausted) = budget::check_call(f.budgets, &f.usage, call) {
        return Decision::Budget(exhausted);
    }
    if !f.approval.needed() {
        return Decision::Go { consume: None, void: f.approval.open.iter().map(|a| a.id).collect() };
    }
    match find(f) {
        // One call spends one approval; any other open one of the operation
        // goes with it, so no second approval waits to pay for a later try.
        Ok(id) => Decision::Go {
            consume: Some(id),
            void: f.approval.open.iter().map(|a| a.id).filter(|other| *other != id).collect(),
        },
        Err(missing) => Decision::AwaitApproval(missing),
    }
}

/// A call that carries a person's answer whose end (`at_ms`) is reached
/// at `now_ms` is never made: weighed before anything else of the gate,
/// in the intent's transaction.
pub fn answer_expired(answer: Option<(i64, i64)>, now_ms: i64) -> Option<Decision> {
    let (ask_id, at_ms) = answer?;
    (now_ms >= at_ms).then_some(Decision::AnswerExpired { ask_id, at_ms })
}

/// The newest open approval bound to exactly this request, plan revision
/// and cost wins; an older stale one does not hide it.
fn find(f: &Facts) -> Result<ApprovalId, Missing> {
    let open = f.approval.open;
    if let Some(a) = open.iter().find(|a| changed(a, f).is_empty() && !a.expired(f.now_ms)) {
        return Ok(a.id);
    }
    let Some(newest) = open.first() else { return Err(Missing::None) };
    match newest.expires_at_ms.filter(|_| newest.expired(f.now_ms)) {
        Some(at_ms) => Err(Missing::Expired { approval_id: newest.id, at_ms }),
        None => Err(Missing::Stale { approval_id: newest.id, why: changed(newest, f).join("; ") }),
    }
}

/// What differs between what an approval binds and this call, in words
/// (empty: nothing, it pays for this call).
fn changed(a: &OpenApproval, f: &Facts) -> Vec<String> {
    let now = Now {
        request_digest: Some(f.request_digest),
        revision: f.revision,
        plan_digest: f.plan_digest,
        call_cost: Some(f.call_cost),
    };
    stale_because(a, &now)
}

/// The call an open approval is weighed against, as it is now. Whoever
/// does not know the request or the cost (a printer reading the ledger)
/// leaves them out: the plan digest covers the cost already.
#[derive(Debug, Clone, Copy)]
pub struct Now<'a> {
    pub request_digest: Option<&'a RequestDigest>,
    pub revision: Revision,
    pub plan_digest: &'a str,
    pub call_cost: Option<Cost>,
}

/// Why an approval no longer pays for the call `now` (empty: it does):
/// the gate's own reasons, so every printer calls stale what the gate
/// will refuse.
pub fn stale_because(a: &OpenApproval, now: &Now) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(request) = now.request_digest.filter(|r| a.request_digest != **r) {
        why.push(format!("approved request digest {} differs from this request's {request}", a.request_digest));
    }
    if a.revision != now.revision {
        why.push(format!(
            "the plan revision changed: approved at revision {}, this call is of revision {}",
            a.revision, now.revision
        ));
    } else if a.plan_digest != now.plan_digest {
        why.push("the plan changed since the approval was given".into());
    }
    if let (Some(cost), Some(now_cost)) = (a.cost, now.call_cost) {
        if cost != now_cost {
            why.push(format!("the cost changed: approved {cost}, this call costs {now_cost}"));
        }
    }
    why
}

#[cfg(test)]
mod tests;
