//! `engine approve`: a person's approval, bound to the exact request and
//! plan, consumed by the one call it allows (`decide::gate` weighs it).
//!
//! Architecture invariant: `record`, reached only from `engine approve`
//! (the CLI), is the only caller of the ledger's `insert_approval`. Nothing
//! a provider or model returns flows here: `record` takes the operation id,
//! note and person a person typed, and reads the request it binds to from
//! the ledger itself.
//!
//! One approval pays for one call: approving a request that already holds
//! an unspent approval records nothing new ("already approved; waiting for
//! the call"), whatever the person typed.

use serde::Serialize;
use serde_json::json;

use crate::decide::people::Act;
use crate::error::{Error, Result};
use crate::ids::{ApprovalId, GoalId, OperationId, RequestDigest, Revision};
use crate::store::acts::{ActRef, NewApproval, NewRequestId, Person};
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard, LedgerRead};

#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub approval_id: ApprovalId,
    pub operation_id: OperationId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
    pub person: Person,
    /// The request already held this unspent approval: nothing new was
    /// recorded.
    pub already_approved: bool,
    /// The command whose call spends it.
    pub spent_by: String,
}

/// What an approval of `operation_id` binds to.
struct Target {
    goal_id: GoalId,
    revision: Revision,
    task_ref: String,
    request_digest: RequestDigest,
}

fn target(read: &dyn LedgerRead, operation_id: &OperationId) -> Result<Target> {
    let found = match read.active_task_of_operation(operation_id)? {
        Some(t) => Some(Target {
            goal_id: t.goal_id,
            revision: t.revision,
            task_ref: t.task_ref,
            request_digest: t.request_digest,
        }),
        // A repair with an instruction is its own operation (the
        // instruction is part of the request), so no task row carries its
        // id: the request the engine asked a person to approve does.
        None => read.pending_request(operation_id)?.map(|p| Target {
            goal_id: p.goal_id,
            revision: p.revision,
            task_ref: p.task_ref,
            request_digest: p.request_digest,
        }),
    };
    found.ok_or_else(|| {
        Error::usage(format!("no task of an active plan revision has operation {operation_id}"))
            .at(operation_id.to_string())
    })
}

/// May `person` approve `operation_id` (`NOT_PERMITTED` otherwise)?
pub fn permitted(read: &dyn LedgerRead, operation_id: &OperationId, person: &Person) -> Result<()> {
    let t = target(read, operation_id)?;
    super::permitted(read, &t.goal_id, Act::Approve, person)
}

/// `engine approve`: record a person's approval of the pending request of
/// `operation_id` in the goal's active revision (and `request_id`, in the
/// same transaction) — unless an unspent approval already waits for it.
pub fn record(
    ledger: &mut LeaseGuard,
    operation_id: &OperationId,
    note: &str,
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<Recorded> {
    if note.trim().is_empty() {
        return Err(Error::usage("an approval needs a note (--note TEXT): say why this call may be made"));
    }
    let read = ledger.read();
    let t = target(&*read, operation_id)?;
    let row = read.revision(&t.goal_id, t.revision)?;
    let asked_by = read.task(&t.goal_id, t.revision, &t.task_ref)?.and_then(|task| task.asked_by());
    let spent_by = crate::decide::spend::spending_command(asked_by, operation_id.as_str(), &t.task_ref, &row.plan_path);
    let plan_digest = row.plan_digest;
    let mut waiting = None;
    for a in read.open_approvals(operation_id)? {
        read.check_on_chain(ActRef::Approval(a.id))?;
        if a.request_digest == t.request_digest && a.plan_digest == plan_digest {
            waiting = Some(a.id);
        }
    }
    let recorded = |approval_id, already_approved| Recorded {
        approval_id,
        operation_id: operation_id.clone(),
        goal_id: t.goal_id.clone(),
        revision: t.revision,
        task_ref: t.task_ref.clone(),
        request_digest: t.request_digest.clone(),
        plan_digest: plan_digest.clone(),
        person: person.clone(),
        already_approved,
        spent_by: spent_by.clone(),
    };
    if let Some(id) = waiting {
        if let Some(r) = request_id {
            ledger.write(Durability::Full, |tx| tx.insert_request_id(r))?;
        }
        return Ok(recorded(id, true));
    }
    let approval_id = ledger.write(Durability::Full, |tx| {
        let id = tx.insert_approval(&NewApproval {
            operation_id,
            goal_id: &t.goal_id,
            revision: t.revision,
            task_ref: &t.task_ref,
            request_digest: &t.request_digest,
            plan_digest: &plan_digest,
            person,
            note,
        })?;
        let data = json!({
            "approval_id": id, "operation_id": operation_id, "request_digest": t.request_digest,
            "plan_digest": plan_digest, "actor": person.actor, "uid": person.uid, "user": person.user, "note": note,
        });
        tx.append_event(&Event::goal(EventKind::ApprovalRecorded, &t.goal_id, t.revision, data).task(&t.task_ref))?;
        if let Some(r) = request_id {
            tx.insert_request_id(r)?;
        }
        Ok(id)
    })?;
    Ok(recorded(approval_id, false))
}
