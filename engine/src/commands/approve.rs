//! `engine approve`: a person's approval, bound to the exact request and
//! plan, consumed by the one call it allows (`decide::gate` weighs it).
//!
//! Architecture invariant: `record`, reached only from `engine approve`
//! (the CLI), is the only caller of the ledger's `insert_approval`. Nothing
//! a provider or model returns flows here: `record` takes the operation id,
//! note and actor a person typed, and reads the request it binds to from
//! the ledger itself.

use serde::Serialize;
use serde_json::json;

use crate::error::{Error, Result};
use crate::ids::{ApprovalId, GoalId, OperationId, RequestDigest, Revision};
use crate::store::acts::NewApproval;
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard};

#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub approval_id: ApprovalId,
    pub operation_id: OperationId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    pub plan_digest: String,
    /// The command whose call spends it.
    pub spent_by: String,
}

/// `engine approve`: record a person's approval of the pending request of
/// `operation_id` in the goal's active revision.
pub fn record(ledger: &mut LeaseGuard, operation_id: &OperationId, note: &str, actor: &str) -> Result<Recorded> {
    if note.trim().is_empty() {
        return Err(Error::usage("an approval needs a note (--note TEXT): say why this call may be made"));
    }
    let read = ledger.read();
    let found = match read.active_task_of_operation(operation_id)? {
        Some(t) => Some((t.goal_id, t.revision, t.task_ref, t.request_digest)),
        // A repair with an instruction is its own operation (the
        // instruction is part of the request), so no task row carries its
        // id: the request the engine asked a person to approve does.
        None => read.pending_request(operation_id)?.map(|p| (p.goal_id, p.revision, p.task_ref, p.request_digest)),
    };
    let (goal_id, revision, task_ref, request_digest) = found.ok_or_else(|| {
        Error::usage(format!("no task of an active plan revision has operation {operation_id}"))
            .at(operation_id.to_string())
    })?;
    let row = read.revision(&goal_id, revision)?;
    let asked_by = read.task(&goal_id, revision, &task_ref)?.and_then(|t| t.asked_by());
    let spent_by = crate::decide::spend::spending_command(asked_by, operation_id.as_str(), &task_ref, &row.plan_path);
    let plan_digest = row.plan_digest;
    let approval_id = ledger.write(Durability::Full, |tx| {
        let id = tx.insert_approval(&NewApproval {
            operation_id,
            goal_id: &goal_id,
            revision,
            task_ref: &task_ref,
            request_digest: &request_digest,
            plan_digest: &plan_digest,
            actor,
            note,
        })?;
        tx.append_event(
            &Event::goal(
                EventKind::ApprovalRecorded,
                &goal_id,
                revision,
                json!({
                    "approval_id": id, "operation_id": operation_id, "request_digest": request_digest,
                    "plan_digest": plan_digest, "actor": actor, "note": note,
                }),
            )
            .task(&task_ref),
        )?;
        Ok(id)
    })?;
    Ok(Recorded {
        approval_id,
        operation_id: operation_id.clone(),
        goal_id,
        revision,
        task_ref,
        request_digest,
        plan_digest,
        spent_by,
    })
}
