//! Approvals: a person's act, bound to the exact request and plan, consumed
//! by the one call it allows.
//!
//! Architecture invariant: this module is the only code that writes the
//! `approvals` table, and `record` is reached only from `engine approve`
//! (the CLI). Nothing a provider or model returns flows here: `record`
//! takes the operation id, note and actor a person typed, and reads the
//! request it binds to from the ledger itself.

use rusqlite::{params, OptionalExtension, Transaction};
use serde::Serialize;
use serde_json::json;

use crate::error::{Code, Error, Result};
use crate::plan::Task;
use crate::store::events::{self, Event};
use crate::store::{ledger, now_ms, Durability, Store};

/// Does this call need a person's approval first?
/// `requires_approval` gates every call; paid (`cost > 0`) or external work
/// needs one for every repeat: a person's retry or repair, or any call after
/// one that was (or may have been) dispatched for the same task of this goal.
pub fn needed(task: &Task, is_repeat: bool) -> bool {
    task.requires_approval || ((task.cost > 0.0 || task.effect == crate::plan::Effect::External) && is_repeat)
}

/// Was any earlier attempt of this task dispatched, or possibly so? An
/// abandoned one (left in doubt by a crash) may have been; so may one a
/// person settled, whatever became of it after.
pub fn prior_dispatch(conn: &rusqlite::Connection, goal_id: &str, task_ref: &str) -> Result<bool> {
    Ok(crate::store::qrow(
        conn,
        "SELECT EXISTS(SELECT 1 FROM attempts a WHERE goal_id = ?1 AND task_ref = ?2
           AND (dispatched_at_ms IS NOT NULL
                OR state IN ('abandoned','effect_unknown','settled_ok','settled_not_run','receipt_recorded','succeeded')
                OR EXISTS (SELECT 1 FROM settlements s WHERE s.attempt_id = a.id)))",
        params![goal_id, task_ref],
        |r| r.get(0),
    )?)
}

#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub approval_id: i64,
    pub operation_id: String,
    pub goal_id: String,
    pub revision: i64,
    pub task_ref: String,
    pub request_digest: String,
    pub plan_digest: String,
}

/// `engine approve`: record a person's approval of the pending request of
/// `operation_id` in the goal's active revision.
pub fn record(store: &mut Store, operation_id: &str, note: &str, actor: &str) -> Result<Recorded> {
    if note.trim().is_empty() {
        return Err(Error::usage("an approval needs a note (--note TEXT): say why this call may be made"));
    }
    let conn = store.conn();
    let found: Option<(String, i64, String, String)> = crate::store::qrow(
        conn,
        "SELECT t.goal_id, t.revision, t.task_ref, t.request_digest FROM tasks t JOIN goals g
               ON g.id = t.goal_id AND g.active_revision = t.revision WHERE t.operation_id = ?1",
        [operation_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()?;
    // A repair with an instruction is its own operation (the instruction is
    // part of the request), so no task row carries its id: the engine's own
    // `approval_required` record of it, in the active revision, does.
    let found = match found {
        Some(f) => Some(f),
        None => crate::store::qrow(conn,
                "SELECT e.goal_id, e.revision, e.task_ref, json_extract(e.data, '$.request_digest') FROM events e JOIN goals g
                   ON g.id = e.goal_id AND g.active_revision = e.revision
                 WHERE e.kind = 'approval_required' AND json_extract(e.data, '$.operation_id') = ?1
                 ORDER BY e.seq DESC LIMIT 1",
                [operation_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?,
    };
    let (goal_id, revision, task_ref, request_digest) = found.ok_or_else(|| {
        Error::usage(format!("no task of an active plan revision has operation {operation_id}"))
            .at(operation_id.to_string())
    })?;
    let plan_digest = ledger::revision(conn, &goal_id, revision)?.plan_digest;
    let approval_id = store.write(Durability::Full, |tx| {
        crate::store::exec(tx,
            "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, now_ms()],
        )?;
        let id = tx.last_insert_rowid();
        events::append(tx, &Event::goal("approval_recorded", &goal_id, revision, json!({
            "approval_id": id, "operation_id": operation_id, "request_digest": request_digest,
            "plan_digest": plan_digest, "actor": actor, "note": note,
        })).task(&task_ref))?;
        Ok(id)
    })?;
    Ok(Recorded {
        approval_id,
        operation_id: operation_id.into(),
        goal_id,
        revision,
        task_ref,
        request_digest,
        plan_digest,
    })
}

/// What the call site found.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// An unconsumed approval for exactly this request and plan.
    Found { approval_id: i64 },
    /// No unconsumed approval for this operation.
    Missing,
    /// The newest unconsumed approval was for another request or plan.
    Stale { approval_id: i64, why: String },
}

/// Inside the transaction that writes the intent: the newest unconsumed
/// approval for `operation_id` must be bound to this exact request digest
/// and plan digest.
pub fn find(tx: &Transaction, operation_id: &str, request_digest: &str, plan_digest: &str) -> Result<Gate> {
    let mut stmt = tx.prepare_cached(
        "SELECT id, request_digest, plan_digest FROM approvals WHERE operation_id = ?1 AND consumed_by IS NULL AND voided_by IS NULL
         ORDER BY id DESC",
    )?;
    let rows: Vec<(i64, String, String)> =
        stmt.query_map([operation_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<rusqlite::Result<_>>()?;
    // The newest approval bound to exactly this request and plan wins; an
    // older stale one does not hide it.
    if let Some((id, _, _)) = rows.iter().find(|(_, req, plan)| req == request_digest && plan == plan_digest) {
        return Ok(Gate::Found { approval_id: *id });
    }
    let Some((id, req, _)) = rows.first() else { return Ok(Gate::Missing) };
    let why = if req != request_digest {
        format!("approved request digest {req} differs from this request's {request_digest}")
    } else {
        "the plan changed since the approval was given".into()
    };
    Ok(Gate::Stale { approval_id: *id, why })
}

/// Consume approval `id` for `attempt_id`, in the intent's transaction.
pub fn consume(tx: &Transaction, approval_id: i64, attempt_id: i64) -> Result<()> {
    let n = crate::store::exec(
        tx,
        "UPDATE approvals SET consumed_by = ?2 WHERE id = ?1 AND consumed_by IS NULL AND voided_by IS NULL",
        params![approval_id, attempt_id],
    )?;
    if n != 1 {
        return Err(Error::new(Code::Internal, format!("approval {approval_id} was already consumed")));
    }
    Ok(())
}

/// A call that needed no approval voids any waiting for its operation, so
/// an approval is always fresh: given for a call a person was asked about,
/// never left over for some later repeat. Returns the voided ids.
pub fn void_unneeded(tx: &Transaction, operation_id: &str, attempt_id: i64) -> Result<Vec<i64>> {
    let mut stmt = tx.prepare_cached(
        "SELECT id FROM approvals WHERE operation_id = ?1 AND consumed_by IS NULL AND voided_by IS NULL",
    )?;
    let ids: Vec<i64> = stmt.query_map([operation_id], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    for id in &ids {
        tx.execute("UPDATE approvals SET voided_by = ?2 WHERE id = ?1", params![id, attempt_id])?;
    }
    Ok(ids)
}

/// The OS user, for `--actor`'s default.
pub fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| format!("uid:{}", unsafe { libc::getuid() }))
}
