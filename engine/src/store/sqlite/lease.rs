//! The lease row in SQLite (id = 1): pid, host, process start time and the
//! generation that fences every write. Taking and giving back the lease
//! also keeps the store's mark (`mark.rs`): "open" while held, "closed"
//! with the store file's fingerprint after a clean release; a store whose
//! last writer died holding it is checked before it is trusted again.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::json;

use super::checked::Checked;
use super::files::StoreFiles;
use super::identity::{self, Verdict};
use super::mark::{Fingerprint, Mark, MarkFile, WalPrint};
use super::open::{count_commit, doubt};
use super::sql::{exec, qrow};
use super::verify::{examine, Opened};
use crate::clock::now_ms;
use crate::error::{Code, Error, Result};
use crate::limits::{RELEASE_CHECKPOINT_WAIT, STORE_BUSY_TIMEOUT};
use crate::store::events::{Event, EventKind};
use crate::store::lease::{hostname, is_alive, proc_start, Acquired, Fence, Holder};

/// The lease row as read: pid, host, process start time, generation.
type LeaseRow = (Option<i64>, Option<String>, Option<String>, i64);

fn read(conn: &Connection) -> Result<Option<LeaseRow>> {
    Ok(qrow(conn, "SELECT pid, host, proc_start, generation FROM lease WHERE id = 1", [], |r| {
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

/// Inside a write transaction beside the lease's holder (`Db::write_beside`):
/// does `holder` — its process, host and generation — still hold it? A
/// holder that gave it back or lost it refuses the write (`STALE_GENERATION`).
pub(super) fn check_holder(conn: &Connection, holder: &Holder) -> Result<()> {
    match read(conn)? {
        Some((Some(pid), host, _, generation))
            if pid == holder.pid
                && host.as_deref() == Some(holder.host.as_str())
                && generation == holder.generation =>
        {
            Ok(())
        }
        _ => Err(Error::new(
            Code::StaleGeneration,
            format!(
                "the engine (pid {}, generation {}) no longer holds the store: nothing was written beside it",
                holder.pid, holder.generation
            ),
        )),
    }
}

/// WAL pages after which a commit folds the WAL into the store file (an
/// automatic checkpoint, on the committing thread). Each checkpoint waits
/// for three flushes (the WAL, the store file, the WAL's restart) whatever
/// the commit's own durability: at SQLite's default of 1,000 pages a chain
/// of `none` tasks, whose commits wait for no disk, waited for one every
/// fifty tasks, most of its time on a busy disk (bench/README.md, issue
/// 38's fourth round). At 10,000 (about 40 MiB of WAL) one every five
/// hundred; a crash's recovery reads at most that much WAL. One constant
/// text, so the connection's statement cache keeps it. Outside the
/// simulator the writer's checkpointer (`fold.rs`) replaces it once the
/// lease is taken, with the same backstop, and folds the WAL in beside
/// the writer long before it.
const AUTOCHECKPOINT_ON: &str = "PRAGMA wal_autocheckpoint = 10000";

/// Take the lease: refused (`STORE_LOCKED`) while a live engine holds it;
/// a dead holder's lease is taken over and logged. Under the write lock,
/// before anything is written, the store is judged against its mark, and
/// checked (`integrity_check`) unless it is known to be whole — or this
/// connection's check on open (`checked`) found it whole and it is still
/// that store (`checked.rs`). Committed with `synchronous=FULL` (the
/// caller sets it), then the mark says "open".
pub(super) fn acquire(
    conn: &mut Connection,
    files: &StoreFiles,
    mark: &mut Option<MarkFile>,
    checked: Option<Checked>,
) -> Result<Acquired> {
    let pid = std::process::id() as i64;
    let host = hostname();
    let start = proc_start(pid);
    // A release earlier in this process turned automatic checkpoints off.
    qrow(conn, AUTOCHECKPOINT_ON, [], |_| Ok(()))?;
    let place = files.place();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| busy(e, &place))?;
    let (prev_generation, took_over) = match read(&tx)? {
        None => (0, None),
        Some((None, _, _, g)) => (g, None),
        Some((Some(hpid), hhost, hstart, g)) => {
            let holder = Holder { pid: hpid, host: hhost.unwrap_or_default(), proc_start: hstart, generation: g };
            if is_alive(&holder) {
                return Err(locked(&holder, &place));
            }
            (g, Some(holder))
        }
    };
    let (verdict, _, facts) = identity::verify(&tx, files)?;
    let (unclean, changed) = match verdict {
        Verdict::Marked { unclean, changed } => (unclean, changed),
        Verdict::Unmarked => (false, false),
    };
    let whole = checked.is_some_and(|c| c.still(&tx, files));
    if let Some(why) = doubt(took_over.is_some(), unclean, changed).filter(|_| !whole) {
        examine(&tx, files, why, Opened::Writing)?;
    }
    let generation = prev_generation + 1;
    exec(
        &tx,
        "INSERT INTO lease (id, pid, host, proc_start, generation, acquired_at) VALUES (1, ?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(id) DO UPDATE SET pid = ?1, host = ?2, proc_start = ?3, generation = ?4, acquired_at = ?5",
        rusqlite::params![pid, host, start, generation, now_ms()],
    )?;
    if let Some(h) = &took_over {
        super::events::append(&tx, &takeover_event(h, generation))?;
    }
    let commits = count_commit(&tx)?;
    tx.commit()?;
    *mark = Some(open_mark(files, facts.store_id.as_deref(), commits, generation, schema_version(conn)?)?);
    Ok(Acquired { fence: Fence::new(generation), took_over })
}

fn takeover_event(h: &Holder, generation: i64) -> Event<'static> {
    Event::store(
        EventKind::LeaseTakenOver,
        json!({
            "previous_pid": h.pid, "previous_host": h.host, "previous_generation": h.generation,
            "generation": generation, "why": "the previous holder's process is gone from this host",
        }),
    )
}

/// The mark says "open" (and counts the lease's commit) before this
/// process commits anything else.
fn open_mark(
    files: &StoreFiles,
    store_id: Option<&str>,
    commits: i64,
    generation: i64,
    schema: i64,
) -> Result<MarkFile> {
    let store_id = store_id.ok_or_else(|| Error::internal("a store without its identity"))?;
    if Mark::read(&files.mark)?.is_none() {
        MarkFile::create(&files.mark, &Mark { owner: Some(files.owner()?), ..Mark::new(store_id) })?;
    }
    let mut mark = MarkFile::open(&files.mark)?;
    // The files were judged when the store was opened: as the mark
    // recorded them, or handed over whole to this user, or (a mark from
    // before the record) as the engine makes them. Recorded as they are;
    // a shared store's record stays (its files are any member's).
    let owner = match mark.last().owner {
        Some(shared) if shared.shared().is_some() => Some(shared),
        _ => Some(files.owner()?),
    };
    let next = Mark {
        commits,
        generation,
        open: true,
        closed_file: None,
        closed_wal: None,
        schema: Some(schema),
        owner,
        ..mark.last().clone()
    };
    mark.record(next, true)?;
    Ok(mark)
}

fn schema_version(conn: &Connection) -> Result<i64> {
    Ok(qrow(conn, "PRAGMA user_version", [], |r| r.get(0))?)
}

/// Give the lease up (clean exit), only if this fence still holds it:
/// the lease row released in one commit (`synchronous=FULL`: the caller
/// sets it); then the WAL folded into the store file and truncated, so
/// nothing a clean close leaves depends on it; then, under the write lock
/// and only while no other writer has taken the store since, the mark
/// records the closed store as the next open will find it — the final
/// count, the file's fingerprint and what the WAL still holds (nothing,
/// unless a reader held it back). A commit added to the WAL later is a
/// change the next open checks. A crash before that record leaves the
/// mark "open": the next open checks the store, as after any crash.
pub(super) fn release(
    conn: &mut Connection,
    files: &StoreFiles,
    mark: &mut Option<MarkFile>,
    fence: Fence,
) -> Result<()> {
    let g = fence.generation();
    // Only the explicit checkpoint below folds the WAL in.
    qrow(conn, "PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let holder: Option<i64> = qrow(&tx, "SELECT generation FROM lease WHERE id = 1", [], |r| r.get(0)).optional()?;
    if holder != Some(g) {
        *mark = None;
        return Ok(());
    }
    exec(&tx, "UPDATE lease SET pid = NULL, host = NULL, proc_start = NULL WHERE id = 1 AND generation = ?1", [g])?;
    let commits = count_commit(&tx)?;
    tx.commit()?;
    // A reader (`engine log --follow`) may hold the WAL back, and a new
    // writer the write lock: do not wait long for either (what the WAL
    // keeps is then recorded by its digest).
    conn.busy_timeout(RELEASE_CHECKPOINT_WAIT)?;
    let _ = qrow(conn, "PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    if let Some(mut m) = mark.take() {
        // Not recorded (another writer took the store, or kept the write
        // lock past the wait): the mark stays "open", and the next open
        // checks the store.
        let _ = record_closed(conn, files, &mut m, g, commits);
    }
    conn.busy_timeout(STORE_BUSY_TIMEOUT)?;
    Ok(())
}

/// The mark records the closed store, under the write lock, if the lease
/// is still free at generation `g` (no writer took the store since).
fn record_closed(conn: &mut Connection, files: &StoreFiles, mark: &mut MarkFile, g: i64, commits: i64) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let lease: Option<(Option<i64>, i64)> =
        qrow(&tx, "SELECT pid, generation FROM lease WHERE id = 1", [], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    if lease != Some((None, g)) {
        return Ok(());
    }
    let schema: i64 = qrow(&tx, "PRAGMA user_version", [], |r| r.get(0))?;
    let next = Mark {
        commits,
        generation: g,
        open: false,
        closed_file: Some(Fingerprint::of(&files.db)?),
        closed_wal: Some(WalPrint::of(&files.side("-wal"), None)?),
        schema: Some(schema),
        ..mark.last().clone()
    };
    mark.record(next, true)
    // The transaction ends here, unchanged (rolled back): it only held the
    // write lock while the mark was recorded.
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
