//! The lease row in SQLite (id = 1): pid, host, process start time and the
//! generation that fences every write.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::json;

use super::qrow;
use crate::clock::now_ms;
use crate::error::{Code, Error, Result};
use crate::store::events::{Event, EventKind};
use crate::store::lease::{hostname, is_alive, proc_start, Acquired, Fence, Holder};

/// The lease row as read: pid, host, process start time, generation.
type LeaseRow = (Option<i64>, Option<String>, Option<String>, i64);

fn read(conn: &Connection) -> Result<Option<LeaseRow>> {
    Ok(conn
        .query_row("SELECT pid, host, proc_start, generation FROM lease WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?)
}

/// Inside a write transaction: is `fence` still the lease's generation?
pub(super) fn check_fence(conn: &Connection, fence: Fence) -> Result<()> {
    let generation = fence.generation();
    let current: Option<i64> = qrow(conn, "SELECT generation FROM lease WHERE id = 1", [], |r| r.get(0)).ok();
    if current != Some(generation) {
        return Err(Error::new(
            Code::StaleGeneration,
            format!(
                "this engine's lease (generation {generation}) was taken over (now {}); it writes nothing more",
                current.map_or("none".to_string(), |g| g.to_string())
            ),
        ));
    }
    Ok(())
}

pub(super) fn acquire(conn: &mut Connection, path: &Path) -> Result<Acquired> {
    let pid = std::process::id() as i64;
    let host = hostname();
    let start = proc_start(pid);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (prev_generation, took_over) = match read(&tx)? {
        None => (0, None),
        Some((None, _, _, g)) => (g, None),
        Some((Some(hpid), hhost, hstart, g)) => {
            let holder = Holder { pid: hpid, host: hhost.unwrap_or_default(), proc_start: hstart, generation: g };
            if is_alive(&holder) {
                return Err(Error::new(
                    Code::StoreLocked,
                    format!(
                        "another engine (pid {} on {}, generation {}) holds the store",
                        holder.pid, holder.host, holder.generation
                    ),
                )
                .at(path.display().to_string())
                .with_details(json!({"pid": holder.pid, "host": holder.host, "generation": holder.generation})));
            }
            (g, Some(holder))
        }
    };
    let generation = prev_generation + 1;
    tx.execute(
        "INSERT INTO lease (id, pid, host, proc_start, generation, acquired_at) VALUES (1, ?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(id) DO UPDATE SET pid = ?1, host = ?2, proc_start = ?3, generation = ?4, acquired_at = ?5",
        rusqlite::params![pid, host, start, generation, now_ms()],
    )?;
    if let Some(h) = &took_over {
        super::events::append(
            &tx,
            &Event::store(
                EventKind::LeaseTakenOver,
                json!({
                    "previous_pid": h.pid, "previous_host": h.host, "previous_generation": h.generation,
                    "generation": generation, "why": "the previous holder's process is gone from this host",
                }),
            ),
        )?;
    }
    tx.commit()?;
    Ok(Acquired { fence: Fence::new(generation), took_over })
}

/// Give the lease up (clean exit), only if this fence still holds it.
pub(super) fn release(conn: &Connection, fence: Fence) -> Result<()> {
    conn.execute(
        "UPDATE lease SET pid = NULL, host = NULL, proc_start = NULL WHERE id = 1 AND generation = ?1",
        [fence.generation()],
    )?;
    Ok(())
}

/// The live holder of the lease, if any.
pub(super) fn live_holder(conn: &Connection) -> Result<Option<Holder>> {
    Ok(match read(conn)? {
        Some((Some(pid), host, proc_start, generation)) => {
            let h = Holder { pid, host: host.unwrap_or_default(), proc_start, generation };
            is_alive(&h).then_some(h)
        }
        _ => None,
    })
}
