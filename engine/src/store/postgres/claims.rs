//! Task claims: a lease per task, with a fencing token.
//!
//! A worker claims a task with `SELECT … FOR UPDATE SKIP LOCKED` on its
//! claim row: a row another worker is busy with is skipped, a row whose
//! lease expired (its worker died, or stopped past it) is taken over and
//! its `generation` goes up by one. The claim is kept alive by the
//! worker's heartbeat (a thread with its own connection). Every write
//! about a task checks, in its own transaction and under a row lock held
//! to its commit, that the claim is still this worker's, at the
//! generation it took (`check`): a worker whose claim was taken over
//! writes nothing more about that task (`STALE_CLAIM`), whatever it
//! believes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::client::{p, Conn};
use super::sql::get;
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, GoalId};
use crate::limits::{CLAIM_LEASE_DEFAULT, CLAIM_LEASE_MAX, CLAIM_LEASE_MIN, COMMIT_TOKEN_KEEP};

/// The task ref of a goal's own claim: its acceptance checks and verdict.
pub const GOAL_CLAIM: &str = "";

/// How long a claim lasts without a heartbeat: `ENGINE_CLAIM_LEASE_MS`
/// within its bounds, else the default.
pub fn lease_duration() -> Duration {
    std::env::var("ENGINE_CLAIM_LEASE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .map(|d| d.clamp(CLAIM_LEASE_MIN, CLAIM_LEASE_MAX))
        .unwrap_or(CLAIM_LEASE_DEFAULT)
}

type Key = (GoalId, String);

#[derive(Default)]
struct Book {
    held: HashMap<Key, i64>,
    attempts: HashMap<AttemptId, Key>,
}

/// What this process holds: its worker id, its claims and their
/// generations, and which task each attempt it wrote about belongs to.
pub(in crate::store) struct ClaimBook {
    worker_id: String,
    inner: Mutex<Book>,
}

impl ClaimBook {
    pub fn new(worker_id: String) -> ClaimBook {
        ClaimBook { worker_id, inner: Mutex::new(Book::default()) }
    }

    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A poisoned book is still the truth of what was claimed.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn generation(&self, goal: &GoalId, task_ref: &str) -> Option<i64> {
        self.book().held.get(&(goal.clone(), task_ref.to_string())).copied()
    }

    pub fn remember_attempt(&self, id: AttemptId, key: Key) {
        self.book().attempts.insert(id, key);
    }

    pub fn attempt_key(&self, id: AttemptId) -> Option<Key> {
        self.book().attempts.get(&id).cloned()
    }

    fn hold(&self, key: Key, generation: i64) {
        self.book().held.insert(key, generation);
    }

    fn forget(&self, key: &Key) -> Option<i64> {
        self.book().held.remove(key)
    }

    fn held(&self) -> Vec<(Key, i64)> {
        self.book().held.iter().map(|(k, g)| (k.clone(), *g)).collect()
    }
}

/// Who held a claim this worker took over.
#[derive(Debug, Clone, Serialize)]
pub struct TakenOver {
    pub worker_id: String,
    pub generation: i64,
}

/// What claiming a task found.
#[derive(Debug, Clone)]
pub enum Claimed {
    /// This worker holds it now, at `generation`.
    Mine { generation: i64, took_over: Option<TakenOver> },
    /// Another live worker holds it (or is in a transaction on it).
    Elsewhere,
}

/// Inside a write transaction: may this worker write about the task?
pub(super) fn check(conn: &Conn, book: &ClaimBook, goal: &GoalId, task_ref: &str) -> Result<()> {
    let row = conn
        .query(
            "SELECT worker_id, generation, released, expires_at > now() FROM task_claims
              WHERE goal_id = $1 AND task_ref = $2 FOR SHARE",
            p![goal.clone(), task_ref.to_string()],
        )?
        .into_iter()
        .next();
    let now: Option<(String, i64, bool, bool)> =
        row.map(|r| Ok::<_, Error>((get(&r, 0)?, get(&r, 1)?, get(&r, 2)?, get(&r, 3)?))).transpose()?;
    let me = book.worker_id();
    match (book.generation(goal, task_ref), now) {
        (Some(g), Some((w, rg, released, _))) if w == me && rg == g && !released => Ok(()),
        (Some(g), now) => Err(stale(goal, task_ref, g, now.map(|(w, rg, ..)| (w, rg)))),
        (None, Some((w, rg, false, true))) if w != me && !gone_here(&w) => Err(Error::new(
            Code::StaleClaim,
            format!("task `{task_ref}` of goal `{goal}` is claimed by worker {w} (generation {rg}); this process writes nothing about it"),
        )
        .at(task_ref.to_string())),
        (None, _) => Ok(()),
    }
}

fn stale(goal: &GoalId, task_ref: &str, generation: i64, now: Option<(String, i64)>) -> Error {
    let by = match &now {
        Some((w, g)) => format!("now held by worker {w} at generation {g}"),
        None => "no longer claimed".to_string(),
    };
    Error::new(
        Code::StaleClaim,
        format!(
            "this worker's claim on task `{task_ref}` of goal `{goal}` (generation {generation}) expired and was taken over ({by}); it writes nothing more about it"
        ),
    )
    .at(task_ref.to_string())
    .with_details(serde_json::json!({"goal_id": goal, "task_ref": task_ref, "generation": generation}))
}

/// Claim a task in one transaction (`SKIP LOCKED`: a row another worker is
/// writing under is skipped, never waited for).
pub(super) fn claim(conn: &Conn, book: &ClaimBook, goal: &GoalId, task_ref: &str, lease: Duration) -> Result<Claimed> {
    conn.begin("BEGIN")?;
    let result = claim_in(conn, book, goal, task_ref, lease);
    match result {
        Ok(c) => {
            conn.commit()?;
            if let Claimed::Mine { generation, .. } = &c {
                book.hold((goal.clone(), task_ref.to_string()), *generation);
            }
            Ok(c)
        }
        Err(e) => {
            let _ = conn.rollback();
            Err(e)
        }
    }
}

fn claim_in(conn: &Conn, book: &ClaimBook, goal: &GoalId, task_ref: &str, lease: Duration) -> Result<Claimed> {
    let me = book.worker_id().to_string();
    let ms = lease.as_millis() as i64;
    let row = conn
        .query(
            "SELECT worker_id, generation, released, expires_at > now() FROM task_claims
              WHERE goal_id = $1 AND task_ref = $2 FOR UPDATE SKIP LOCKED",
            p![goal.clone(), task_ref.to_string()],
        )?
        .into_iter()
        .next();
    let Some(row) = row else {
        let inserted = conn.query(
            "INSERT INTO task_claims (goal_id, task_ref, worker_id, generation, expires_at)
             VALUES ($1, $2, $3, 1, now() + $4::float8 * interval '1 millisecond')
             ON CONFLICT (goal_id, task_ref) DO NOTHING RETURNING generation",
            p![goal.clone(), task_ref.to_string(), me, ms as f64],
        )?;
        return Ok(match inserted.first() {
            Some(r) => Claimed::Mine { generation: get(r, 0)?, took_over: None },
            None => Claimed::Elsewhere,
        });
    };
    let (holder, generation, released, live): (String, i64, bool, bool) =
        (get(&row, 0)?, get(&row, 1)?, get(&row, 2)?, get(&row, 3)?);
    // This worker's own live claim (also one whose commit's answer was
    // lost: worker ids are never shared, so it can only be this process's).
    if holder == me && !released {
        conn.query(
            "UPDATE task_claims SET expires_at = now() + $3::float8 * interval '1 millisecond' WHERE goal_id = $1 AND task_ref = $2",
            p![goal.clone(), task_ref.to_string(), ms as f64],
        )?;
        return Ok(Claimed::Mine { generation, took_over: None });
    }
    if live && !released && holder != me && !gone_here(&holder) {
        return Ok(Claimed::Elsewhere);
    }
    let took_over = (!released).then_some(TakenOver { worker_id: holder, generation });
    let r = conn.query(
        "UPDATE task_claims SET worker_id = $3, generation = generation + 1, released = false,
           expires_at = now() + $4::float8 * interval '1 millisecond'
         WHERE goal_id = $1 AND task_ref = $2 RETURNING generation",
        p![goal.clone(), task_ref.to_string(), me, ms as f64],
    )?;
    let generation = r.first().map(|r| get(r, 0)).transpose()?.ok_or_else(|| Error::internal("a claim vanished"))?;
    Ok(Claimed::Mine { generation, took_over })
}

/// Give a claim back (the task needs nothing more from this worker now).
pub(super) fn release(conn: &Conn, book: &ClaimBook, goal: &GoalId, task_ref: &str) -> Result<()> {
    let key = (goal.clone(), task_ref.to_string());
    let Some(generation) = book.generation(goal, task_ref) else { return Ok(()) };
    conn.query(
        "UPDATE task_claims SET released = true WHERE goal_id = $1 AND task_ref = $2 AND worker_id = $3 AND generation = $4",
        p![goal.clone(), task_ref.to_string(), book.worker_id().to_string(), generation],
    )?;
    // Forgotten only once released: a release lost on the way is sent again.
    book.forget(&key);
    Ok(())
}

/// The tasks of a goal other live workers hold.
pub(super) fn held_elsewhere(conn: &Conn, book: &ClaimBook, goal: &GoalId) -> Result<HashSet<String>> {
    let rows = conn.query(
        "SELECT task_ref, worker_id FROM task_claims
          WHERE goal_id = $1 AND NOT released AND expires_at > now() AND worker_id <> $2",
        p![goal.clone(), book.worker_id().to_string()],
    )?;
    let mut held = HashSet::new();
    for r in &rows {
        let worker: String = get(r, 1)?;
        if !gone_here(&worker) {
            held.insert(get(r, 0)?);
        }
    }
    Ok(held)
}

/// Is worker `id` (`host:pid:random`) a process of this host that is gone?
/// Its claims are taken over at once, as SQLite's lease of a dead local
/// engine is; another host's worker is waited out to its lease's end.
fn gone_here(id: &str) -> bool {
    let mut parts = id.rsplitn(3, ':');
    let (_, pid, host) = (parts.next(), parts.next(), parts.next());
    let (Some(pid), Some(host)) = (pid.and_then(|p| p.parse::<i64>().ok()), host) else { return false };
    if pid == i64::from(std::process::id()) {
        // This process's pid under another worker id: an earlier
        // incarnation can only be gone (ids are never reused).
        return host == crate::store::lease::hostname();
    }
    !crate::store::lease::is_alive(&crate::store::lease::Holder {
        pid,
        host: host.to_string(),
        proc_start: None,
        generation: 0,
    })
}

/// Register this process as a worker.
pub(super) fn register(conn: &Conn, book: &ClaimBook) -> Result<()> {
    conn.query(
        "INSERT INTO workers (id, host, pid) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET seen_at = now()",
        p![book.worker_id().to_string(), crate::store::lease::hostname(), std::process::id() as i64],
    )?;
    Ok(())
}

/// Give every claim back and say goodbye (a clean exit).
pub(super) fn retire(conn: &Conn, book: &ClaimBook) -> Result<()> {
    for ((goal, task_ref), _) in book.held() {
        release(conn, book, &goal, &task_ref)?;
    }
    conn.query("DELETE FROM workers WHERE id = $1", p![book.worker_id().to_string()])?;
    Ok(())
}

/// A worker's heartbeat: renews the claims in its book every third of the
/// lease, on a connection of its own, until it is dropped.
pub(super) struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(config: super::client::Target, book: Arc<ClaimBook>, lease: Duration) -> Result<Heartbeat> {
        let conn = Conn::open(config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("engine-heartbeat".into())
            .spawn(move || beat(&conn, &book, lease, &flag))
            .map_err(|e| Error::internal(format!("cannot start the heartbeat: {e}")))?;
        Ok(Heartbeat { stop, thread: Some(thread) })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn beat(conn: &Conn, book: &ClaimBook, lease: Duration, stop: &AtomicBool) {
    let every = lease / 3;
    let mut pruned = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let _ = renew(conn, book, lease);
        if pruned.elapsed() > COMMIT_TOKEN_KEEP / 4 {
            let _ = conn.query(
                "DELETE FROM commit_tokens WHERE at < now() - $1::float8 * interval '1 second'",
                p![COMMIT_TOKEN_KEEP.as_secs() as f64],
            );
            pruned = Instant::now();
        }
        let start = Instant::now();
        while start.elapsed() < every && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Renew exactly the claims this worker holds at the generations it took
/// (one it took over and no longer knows of is left to expire).
fn renew(conn: &Conn, book: &ClaimBook, lease: Duration) -> Result<()> {
    let held = book.held();
    let (goals, refs, gens): (Vec<String>, Vec<String>, Vec<i64>) =
        held.into_iter().fold((Vec::new(), Vec::new(), Vec::new()), |(mut g, mut r, mut n), ((goal, t), gen)| {
            g.push(goal.to_string());
            r.push(t);
            n.push(gen);
            (g, r, n)
        });
    conn.query(
        "UPDATE task_claims c SET expires_at = now() + $2::float8 * interval '1 millisecond'
           FROM unnest($3::text[], $4::text[], $5::bigint[]) AS h(goal_id, task_ref, generation)
          WHERE c.worker_id = $1 AND NOT c.released AND c.goal_id = h.goal_id AND c.task_ref = h.task_ref
            AND c.generation = h.generation",
        p![book.worker_id().to_string(), lease.as_millis() as f64, goals, refs, gens],
    )?;
    conn.query("UPDATE workers SET seen_at = now() WHERE id = $1", p![book.worker_id().to_string()])?;
    Ok(())
}
