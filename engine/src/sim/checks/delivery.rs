//! The checks made at each delivery (`Checker::delivered`), against the
//! ledger as committed at that moment: the call's intent, the answers it
//! carries, the approvals it spends, and whether a repeat was allowed.

use super::super::plan::Traits;
use super::super::world::Delivery;
use super::{finding, Finding};
use super::{
    EXPIRED_NEVER_SPENT, NO_ANSWER_WITHOUT_PERSON, NO_BLIND_RESEND, NO_SEND_WITHOUT_INTENT, REPEAT_NEEDS_APPROVAL,
};
use crate::ids::GoalId;
use crate::state::AttemptState;
use crate::store::Store;

/// The call's attempt is in the ledger, committed, with the same
/// operation and try.
pub fn intent_committed(store: &Store, d: &Delivery, out: &mut Vec<Finding>) {
    let read = store.read();
    match read.attempt(d.attempt) {
        Ok(a) if a.operation_id.as_str() == d.op && a.try_no == d.try_no => {}
        Ok(a) => out.push(finding(
            NO_SEND_WITHOUT_INTENT,
            format!(
                "attempt {} is {} try {}, but {} try {} was sent",
                d.attempt, a.operation_id, a.try_no, d.op, d.try_no
            ),
        )),
        Err(_) => out.push(finding(
            NO_SEND_WITHOUT_INTENT,
            format!("{} try {} (attempt {}) was sent with no committed intent", d.op, d.try_no, d.attempt),
        )),
    }
}

/// The answers a call carries are exactly what a person recorded for its
/// operation (`engine answer`), never anything else.
pub fn answers_recorded(
    store: &Store,
    goal: &GoalId,
    d: &Delivery,
    answers: &serde_json::Value,
    out: &mut Vec<Finding>,
) {
    let read = store.read();
    let recorded = read.asks_of_goal(goal).map(|asks| {
        asks.iter().any(|a| {
            a.kind == crate::store::acts::AskKind::Answer
                && a.operation_id.as_ref().is_some_and(|o| o.as_str() == d.op)
                && a.data.get("answers") == Some(answers)
        })
    });
    if !matches!(recorded, Ok(true)) {
        out.push(finding(
            NO_ANSWER_WITHOUT_PERSON,
            format!("{} try {} of {} carried answers no person recorded", d.op, d.try_no, d.task_ref),
        ));
    }
}

/// No approval this call spends had expired at its intent.
pub fn expired_not_spent(store: &Store, d: &Delivery, out: &mut Vec<Finding>) {
    let read = store.read();
    let intent_at = read.attempt(d.attempt).map(|a| a.intent_at_ms).unwrap_or(i64::MAX);
    let approvals = store.inspect().approvals().unwrap_or_default();
    let spent = approvals.iter().filter(|a| a.consumed_by == Some(d.attempt));
    for a in spent.filter(|a| a.expires_at_ms.is_some_and(|at| at <= intent_at)) {
        out.push(finding(
            EXPIRED_NEVER_SPENT,
            format!(
                "approval {} (expired at {} ms) paid for {} try {} of {}, whose intent is at {} ms",
                a.id,
                a.expires_at_ms.unwrap_or_default() - super::super::EPOCH_MS,
                d.op,
                d.try_no,
                d.task_ref,
                intent_at - super::super::EPOCH_MS
            ),
        ));
    }
}

/// A repeat of paid or external work spends an approval of its own.
pub fn repeat_approved(store: &Store, d: &Delivery, out: &mut Vec<Finding>) {
    let approved =
        store.inspect().approvals().map(|list| list.iter().any(|a| a.consumed_by == Some(d.attempt))).unwrap_or(false);
    if !approved {
        out.push(finding(
            REPEAT_NEEDS_APPROVAL,
            format!(
                "{} try {} of {} was sent after an earlier call of it, with no approval consumed",
                d.op, d.try_no, d.task_ref
            ),
        ));
    }
}

/// A call of unsafe work sent again after `prev` only once the ledger holds
/// `prev`'s outcome, or a person acted since (`acted`).
pub fn not_blind(
    store: &Store,
    (d, prev): (&Delivery, &Delivery),
    traits: &Traits,
    acted: bool,
    out: &mut Vec<Finding>,
) {
    let read = store.read();
    let held = matches!(
        read.attempt(prev.attempt).map(|a| a.state),
        Ok(AttemptState::ReceiptRecorded
            | AttemptState::Succeeded
            | AttemptState::Failed
            | AttemptState::SettledOk
            | AttemptState::SettledNotRun
            | AttemptState::Cancelled
            | AttemptState::InputAsked)
    );
    if !held && !acted {
        out.push(finding(
                NO_BLIND_RESEND,
                format!(
                    "{} ({} effect) was sent again (attempt {}) after attempt {} whose outcome the ledger does not hold, with no person's act between",
                    d.task_ref, traits.effect, d.attempt, prev.attempt
                ),
            ));
    }
}
