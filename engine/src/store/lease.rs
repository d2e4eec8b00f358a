//! The single-writer lease: pid, host, the holder's process start time and a
//! generation number. A live holder means `STORE_LOCKED`; a holder whose
//! process is gone from this host is taken over (generation + 1), and the
//! takeover is logged as an event.

use rusqlite::{OptionalExtension, TransactionBehavior};
use serde_json::json;

use super::{events, now_ms, Store};
use crate::error::{Code, Error, Result};

/// The lease row as read: pid, host, process start time, generation.
type LeaseRow = (Option<i64>, Option<String>, Option<String>, i64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i64,
    pub host: String,
    pub proc_start: Option<String>,
    pub generation: i64,
}

/// What acquiring found.
#[derive(Debug, Clone)]
pub struct Acquired {
    pub generation: i64,
    /// The dead holder whose lease was taken over, if any.
    pub took_over: Option<Holder>,
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // on success when the name fits, and we bound the read by the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The start time of a process (field 22 of /proc/PID/stat), so a pid that
/// was reused by an unrelated process is not mistaken for the holder.
pub fn proc_start(pid: i64) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after it follow ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19).map(str::to_string)
}

/// The state letter of a process (field 3 of /proc/PID/stat).
fn proc_state(pid: i64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Is `holder` a live process on this host?
pub fn is_alive(holder: &Holder) -> bool {
    if holder.host != hostname() {
        // Another host's process cannot be checked from here: treat it as
        // live; a person must remove the lease by hand.
        return true;
    }
    if holder.pid == std::process::id() as i64 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let exists = unsafe { libc::kill(holder.pid as libc::pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    if proc_state(holder.pid) == Some('Z') {
        // Dead, only not yet reaped by its parent.
        return false;
    }
    match (&holder.proc_start, proc_start(holder.pid)) {
        (Some(recorded), Some(now)) => *recorded == now,
        _ => true,
    }
}

impl Store {
    pub fn acquire_lease(&mut self) -> Result<Acquired> {
        let pid = std::process::id() as i64;
        let host = hostname();
        let start = proc_start(pid);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row: Option<LeaseRow> = tx
            .query_row("SELECT pid, host, proc_start, generation FROM lease WHERE id = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?;
        let (prev_generation, took_over) = match row {
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
                    .at(self.path.display().to_string())
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
            events::append(
                &tx,
                &events::Event::store(
                    "lease_taken_over",
                    json!({
                        "previous_pid": h.pid, "previous_host": h.host, "previous_generation": h.generation,
                        "generation": generation, "why": "the previous holder's process is gone from this host",
                    }),
                ),
            )?;
        }
        tx.commit()?;
        self.generation = Some(generation);
        Ok(Acquired { generation, took_over })
    }

    /// Give the lease up (clean exit). Only if we still hold it.
    pub fn release_lease(&mut self) -> Result<()> {
        if let Some(g) = self.generation.take() {
            self.conn.execute(
                "UPDATE lease SET pid = NULL, host = NULL, proc_start = NULL WHERE id = 1 AND generation = ?1",
                [g],
            )?;
        }
        Ok(())
    }
}

/// The live holder of the lease, if any (for read-only commands to say
/// whether an in-doubt attempt is still in flight).
pub fn live_holder(conn: &rusqlite::Connection) -> Result<Option<Holder>> {
    let row: Option<LeaseRow> = conn
        .query_row("SELECT pid, host, proc_start, generation FROM lease WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    Ok(match row {
        Some((Some(pid), host, proc_start, generation)) => {
            let h = Holder { pid, host: host.unwrap_or_default(), proc_start, generation };
            is_alive(&h).then_some(h)
        }
        _ => None,
    })
}
