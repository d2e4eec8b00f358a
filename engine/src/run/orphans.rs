//! Provider processes a stopped engine left running. An engine killed
//! mid-call takes its direct children with it (`PR_SET_PDEATHSIG`), but not
//! what they started; an engine that stopped on an error leaves them all.
//! Left alone they could finish an effect outside the ledger, or run beside
//! a new try of the same task. So the writer that takes the lease first ends
//! the process groups its in-flight attempts recorded at dispatch — checked
//! against the recorded start time, so a reused pid is never signalled —
//! and only then does anything reconcile those attempts.

use std::time::Duration;

use providers::process::{self, GroupEnd, ProcessId};
use serde_json::{json, Value};

use crate::error::Result;
use crate::store::events::{self, Event};
use crate::store::lease::Acquired;
use crate::store::{Durability, Store};

/// How long a left process gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// Take the store's lease; then end what earlier holders left running.
/// On an error after the lease was taken, the lease is given back.
pub fn take_lease(store: &mut Store) -> Result<Acquired> {
    let acquired = store.acquire_lease()?;
    if let Err(e) = end_left_processes(store) {
        let _ = store.release_lease();
        return Err(e);
    }
    Ok(acquired)
}

/// An in-flight attempt with the provider process its dispatch recorded.
struct Left {
    attempt_id: i64,
    goal_id: String,
    revision: i64,
    task_ref: String,
    process: ProcessId,
}

fn end_left_processes(store: &mut Store) -> Result<()> {
    let left = recorded(store)?;
    if left.is_empty() {
        return Ok(());
    }
    let ids: Vec<ProcessId> = left.iter().map(|l| l.process).collect();
    let ends = process::end_groups(&ids, GRACE);
    store.write(Durability::Normal, |tx| {
        for (l, end) in left.iter().zip(&ends) {
            let data = json!({
                "process": l.process, "result": end,
                "why": match end {
                    GroupEnd::Reused { .. } => "the recorded pid now belongs to another process: not signalled",
                    _ => "left running by an engine that stopped before its receipt; ended before reconciling",
                },
            });
            let e = Event::goal("provider_processes_ended", &l.goal_id, l.revision, data);
            events::append(tx, &e.task(&l.task_ref).attempt(l.attempt_id))?;
        }
        Ok(())
    })
}

/// Every attempt still between intent and receipt (any goal) whose
/// `dispatched` event names a provider process.
fn recorded(store: &Store) -> Result<Vec<Left>> {
    let conn = store.conn();
    let mut stmt = conn.prepare(
        "SELECT a.id, a.goal_id, a.revision, a.task_ref,
                (SELECT e.data FROM events e WHERE e.attempt_id = a.id AND e.kind = 'dispatched'
                  ORDER BY e.seq DESC LIMIT 1)
           FROM attempts a
          WHERE a.state IN ('intent_recorded', 'dispatched') AND a.dispatched_at_ms IS NOT NULL
          ORDER BY a.id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?, r.get(4)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (attempt_id, goal_id, revision, task_ref, data): (i64, String, i64, String, Option<String>) = row?;
        let process = data
            .and_then(|d| serde_json::from_str::<Value>(&d).ok())
            .and_then(|d| serde_json::from_value::<ProcessId>(d.get("process")?.clone()).ok());
        if let Some(process) = process {
            out.push(Left { attempt_id, goal_id, revision, task_ref, process });
        }
    }
    Ok(out)
}
