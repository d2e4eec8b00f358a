//! The single-writer lease: pid, host, the holder's process start time and a
//! generation number. A live holder means `STORE_LOCKED`; a holder whose
//! process is gone from this host is taken over (generation + 1), and the
//! takeover is logged as an event. Acquiring and releasing also keep the
//! store's mark (`mark.rs`): "open" while held, "closed" with the store
//! file's fingerprint after a clean release; a store whose last writer died
//! holding it is checked before it is trusted again.

use std::time::Duration;

use rusqlite::{OptionalExtension, TransactionBehavior};
use serde_json::json;

use super::identity::{self, Verdict};
use super::mark::{Fingerprint, Mark, MarkFile};
use super::{count_commit, doubt, events, now_ms, Durability, Store};
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
    /// Take the lease: refused (`STORE_LOCKED`) while a live engine holds
    /// it; a dead holder's lease is taken over and logged. Under the write
    /// lock, before anything is written, the store is judged against its
    /// mark, and checked (`integrity_check`) unless it is known to be whole.
    /// Committed with `synchronous=FULL`, then the mark says "open".
    pub fn acquire_lease(&mut self) -> Result<Acquired> {
        let pid = std::process::id() as i64;
        let host = hostname();
        let start = proc_start(pid);
        self.set_durability(Durability::Full)?;
        // A release earlier in this process turned automatic checkpoints off.
        self.conn.execute_batch("PRAGMA wal_autocheckpoint = 1000")?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| busy(e, &self.files.place()))?;
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
                    return Err(locked(&holder, &self.files.place()));
                }
                (g, Some(holder))
            }
        };
        let (verdict, _, facts) = identity::verify(&tx, &self.files)?;
        let (unclean, changed) = match verdict {
            Verdict::Marked { unclean, changed } => (unclean, changed),
            Verdict::Unmarked => (false, false),
        };
        if let Some(why) = doubt(took_over.is_some(), unclean, changed) {
            identity::integrity(&tx, &self.files.db, why)?;
        }
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
        let commits = count_commit(&tx)?;
        tx.commit()?;
        self.generation = Some(generation);
        self.open_mark(facts.store_id.as_deref(), commits, generation)?;
        Ok(Acquired { generation, took_over })
    }

    /// The mark says "open" (and counts the lease's commit) before this
    /// process commits anything else.
    fn open_mark(&mut self, store_id: Option<&str>, commits: i64, generation: i64) -> Result<()> {
        let store_id = store_id.ok_or_else(|| Error::internal("a store without its identity"))?;
        if Mark::read(&self.files.mark)?.is_none() {
            MarkFile::create(&self.files.mark, &Mark::new(store_id))?;
        }
        let mut mark = MarkFile::open(&self.files.mark)?;
        mark.record(Mark { commits, generation, open: true, closed_file: None, ..mark.last().clone() }, true)?;
        self.mark = Some(mark);
        Ok(())
    }

    /// Give the lease up (clean exit), only if we still hold it. The WAL is
    /// folded into the store file first, so losing it afterwards costs
    /// nothing; then the mark records the closed file and the final count
    /// — while the lease is still ours, so no later writer's mark is
    /// overwritten — and only then is the lease row released.
    pub fn release_lease(&mut self) -> Result<()> {
        let Some(g) = self.generation.take() else { return Ok(()) };
        self.set_durability(Durability::Full)?;
        // A reader (`engine log --follow`) may hold the WAL back: do not wait
        // long for it; a checkpoint that could not finish loses nothing.
        self.conn.busy_timeout(Duration::from_millis(200))?;
        let _ = self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        self.conn.busy_timeout(Duration::from_secs(10))?;
        // From here on only this process's final commit reaches the WAL,
        // and nothing folds it into the store file the mark describes.
        self.conn.execute_batch("PRAGMA wal_autocheckpoint = 0")?;
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let holder: Option<i64> =
            tx.query_row("SELECT generation FROM lease WHERE id = 1", [], |r| r.get(0)).optional()?;
        if holder != Some(g) {
            self.mark = None;
            return Ok(());
        }
        let commits: i64 = tx.query_row("SELECT commits FROM store_meta WHERE id = 1", [], |r| r.get(0))?;
        let closed_file = Fingerprint::of(&self.files.db)?;
        if let Some(mark) = self.mark.as_mut() {
            let next =
                Mark { commits, generation: g, open: false, closed_file: Some(closed_file), ..mark.last().clone() };
            mark.record(next, true)?;
        }
        self.mark = None;
        tx.execute(
            "UPDATE lease SET pid = NULL, host = NULL, proc_start = NULL WHERE id = 1 AND generation = ?1",
            [g],
        )?;
        count_commit(&tx)?;
        tx.commit()?;
        Ok(())
    }
}

/// Still waiting for the write lock after the busy timeout: another engine
/// is taking the store (checking a large one, say) — `STORE_LOCKED`, like
/// a live lease, not an internal error.
fn busy(e: rusqlite::Error, store: &str) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => Error::new(
            Code::StoreLocked,
            "another engine is taking the store (it held the store's write lock past the wait); try again",
        )
        .at(store.to_string()),
        _ => e.into(),
    }
}

fn locked(holder: &Holder, store: &str) -> Error {
    Error::new(
        Code::StoreLocked,
        format!(
            "another engine (pid {} on {}, generation {}) holds the store",
            holder.pid, holder.host, holder.generation
        ),
    )
    .at(store.to_string())
    .with_details(json!({"pid": holder.pid, "host": holder.host, "generation": holder.generation}))
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
