//! Provider processes a stopped engine left running. An engine killed
//! mid-call takes its direct children with it (`PR_SET_PDEATHSIG`), but not
//! what they started; an engine that stopped on an error leaves them all.
//! Left alone they could finish an effect outside the ledger, or run beside
//! a new try of the same task. So the writer that takes the lease first ends
//! the process groups its in-flight attempts recorded at dispatch — checked
//! against the recorded start time, so a reused pid is never signalled —
//! and only then does anything reconcile those attempts.

use providers::process::{self, GroupEnd, ProcessId};
use serde_json::json;

use crate::error::Result;
use crate::limits::PROCESS_END_GRACE;
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard, Store};

/// Take the store's lease; then end what earlier holders left running. On
/// an error after the lease was taken, the guard gives it back.
pub fn take_lease(store: Store) -> Result<LeaseGuard> {
    let mut ledger = store.lease()?;
    end_left_processes(&mut ledger)?;
    Ok(ledger)
}

fn end_left_processes(ledger: &mut LeaseGuard) -> Result<()> {
    let left = ledger.read().left_processes()?;
    if left.is_empty() {
        return Ok(());
    }
    let ids: Vec<ProcessId> = left.iter().map(|l| l.process.clone()).collect();
    let ends = process::end_groups(&ids, PROCESS_END_GRACE);
    ledger.write(Durability::Normal, |tx| {
        for (l, end) in left.iter().zip(&ends) {
            let data = json!({
                "process": l.process, "result": end,
                "why": match end {
                    GroupEnd::Reused { .. } => "the recorded pid now belongs to another process: not signalled",
                    _ => "left running by an engine that stopped before its receipt; ended before reconciling",
                },
            });
            let e = Event::goal(EventKind::ProviderProcessesEnded, &l.goal_id, l.revision, data);
            tx.append_event(&e.task(&l.task_ref).attempt(l.attempt_id))?;
        }
        Ok(())
    })
}
