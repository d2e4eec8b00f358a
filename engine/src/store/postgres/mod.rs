//! The PostgreSQL ledger: the same traits as SQLite's, for a ledger that
//! several workers on several machines share (`--store postgres://…`).
//!
//! `Pg` (here) opens, migrates and runs transactions; `client` is one
//! connection on a thread of its own (the interface is synchronous, the
//! coordinator's runtime must never block on another); `sql` is a
//! connection or a transaction seen through the traits, implemented by
//! aggregate beside it; `schema` the tables and migrations; `claims` the
//! per-task leases, their fence and the heartbeat.
//!
//! Every write is one transaction. It writes a commit token inside
//! itself; when the connection is lost before the answer to `COMMIT`
//! arrives, the token is looked for on a new connection: found, the
//! commit happened; absent, it did not and the transaction is run again
//! (the closure is run again from the start, on fresh reads). A commit
//! whose fate cannot be learnt is an error, never success.

mod acts;
mod attempts;
mod chain;
pub(super) mod claims;
pub(super) mod client;
mod columns;
mod events;
mod evidence;
mod goals;
mod inspect;
mod outputs;
mod schema;
mod sql;
mod tls;
pub(super) mod verify;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use claims::{ClaimBook, Claimed, Heartbeat};
use client::{p, Conn, Failure, Target};
pub(super) use sql::PgSql;
use sql::Writer;

use super::lease::{Acquired, Fence};
use super::{Durability, LedgerRead, LedgerTx};
use crate::error::{Error, Result};
use crate::ids::GoalId;
use crate::limits::PG_WRITE_TRIES_MAX;

pub use schema::SCHEMA_VERSION;

/// Is this store location a PostgreSQL URL?
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// The URL without its password (in the user part, or a `password=`
/// query parameter), for messages and `status`. The user part ends at the
/// last `@` before the query, so a password holding `@` or `/` is hidden
/// whole.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (before, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let place = match before.rsplit_once('@') {
        Some((auth, host)) => format!("{}@{host}", auth.split_once(':').map_or(auth, |(user, _)| user)),
        None => before.to_string(),
    };
    let kept: Vec<&str> =
        query.unwrap_or_default().split('&').filter(|p| !p.is_empty() && !p.starts_with("password=")).collect();
    if kept.is_empty() {
        format!("{scheme}://{place}")
    } else {
        format!("{scheme}://{place}?{}", kept.join("&"))
    }
}

pub(super) struct Pg {
    conn: Conn,
    target: Target,
    place: String,
    book: Arc<ClaimBook>,
    lease: Duration,
    heartbeat: Option<Heartbeat>,
}

impl Pg {
    fn connect(url: &str) -> Result<(Conn, Target, String)> {
        let place = redact(url);
        let asked = tls::asked(url).map_err(|e| e.at(place.clone()))?;
        let mut config: tokio_postgres::Config =
            asked.rest.parse().map_err(|e| Error::usage(format!("not a PostgreSQL URL: {e}")).at(place.clone()))?;
        config.ssl_mode(asked.mode.ssl_mode());
        let tls = tls::connector(&asked.mode, asked.rootcert.as_deref()).map_err(|e| e.at(place.clone()))?;
        // A worker stopped (SIGSTOP, a frozen VM) inside a transaction would
        // hold its row locks, the claim's among them, for ever: the server
        // ends such a session once it has been idle in its transaction for a
        // lease, so a takeover can go on; the stopped worker then finds its
        // commit lost (in doubt, checked by its commit token) and its claim
        // taken over.
        let idle = format!("-c idle_in_transaction_session_timeout={}", claims::lease_duration().as_millis());
        let options = match config.get_options() {
            Some(given) => format!("{given} {idle}"),
            None => idle,
        };
        config.options(&options);
        let target = Target { config, tls };
        let conn = Conn::open(target.clone()).map_err(|e| e.at(place.clone()))?;
        Ok((conn, target, place))
    }

    fn new(conn: Conn, target: Target, place: String) -> Pg {
        let book = Arc::new(ClaimBook::new(worker_id()));
        Pg { conn, target, place, book, lease: claims::lease_duration(), heartbeat: None }
    }

    /// Open for writing: the schema is created or migrated first (a newer
    /// one is refused: `SCHEMA_TOO_NEW`).
    pub fn open_rw(url: &str) -> Result<Pg> {
        let (conn, config, place) = Self::connect(url)?;
        schema::migrate(&conn, &place)?;
        Ok(Pg::new(conn, config, place))
    }

    /// Open for reading: `None` when the engine never made its tables
    /// there. A reader never migrates.
    pub fn open_ro(url: &str) -> Result<Option<Pg>> {
        let (conn, config, place) = Self::connect(url)?;
        let Some(version) = schema::version(&conn)? else { return Ok(None) };
        schema::refuse_newer(Some(version), &place)?;
        if version < SCHEMA_VERSION {
            return Err(Error::usage(format!(
                "the store has schema version {version}, older than this engine's {SCHEMA_VERSION}; a writing command (`engine run`) migrates it"
            ))
            .at(place));
        }
        Ok(Some(Pg::new(conn, config, place)))
    }

    pub fn schema_version(url: &str) -> Result<Option<i64>> {
        let (conn, _, _) = Self::connect(url)?;
        schema::version(&conn)
    }

    pub fn place(&self) -> &str {
        &self.place
    }

    pub fn reader(&self) -> PgSql<'_> {
        PgSql::reader(&self.conn)
    }

    /// A read transaction, run again from the start when the connection
    /// was lost in the middle of it.
    pub fn snapshot<T>(&self, mut f: impl FnMut(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        self.again(|| {
            self.conn.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let value = f(&self.reader());
            match &value {
                Ok(_) => {
                    self.conn.commit()?;
                }
                Err(_) => {
                    let _ = self.conn.rollback();
                }
            }
            value
        })
    }

    /// Run `f` (a read, a claim: its own transaction) again while it fails
    /// on a lost connection or a serialization failure, with backoff, up
    /// to `PG_WRITE_TRIES_MAX` times.
    fn again<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let mut tries = 0;
        loop {
            tries += 1;
            match f() {
                Err(e) if retryable(&e) && tries < PG_WRITE_TRIES_MAX => {
                    std::thread::sleep(Duration::from_millis(20 * u64::from(tries)));
                }
                other => return other,
            }
        }
    }

    /// One transaction (see the module's comment for a lost commit).
    pub fn write<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        mut f: impl FnMut(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.write_once(fence, durability, &mut f)? {
                Attempted::Committed(value) => {
                    crate::failpoint::committed();
                    return Ok(value);
                }
                Attempted::Again(why) if tries < PG_WRITE_TRIES_MAX => {
                    let _ = why;
                    std::thread::sleep(Duration::from_millis(20 * u64::from(tries)));
                }
                Attempted::Again(why) => {
                    return Err(Error::internal(format!(
                        "a write to the store did not commit after {tries} tries: {why}"
                    ))
                    .at(self.place.clone()))
                }
            }
        }
    }

    fn write_once<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        f: &mut impl FnMut(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<Attempted<T>> {
        if let Err(e) = self.conn.begin("BEGIN") {
            return again_or(e);
        }
        let token = token();
        // Every commit waits for its WAL flush, `Normal` ones too: a
        // database server that crashes (not only the machine) loses an
        // asynchronous commit, and workers act on each other's commits.
        let _ = durability;
        let body = (|| -> std::result::Result<T, Error> {
            let value = f(&mut PgSql { conn: &self.conn, writer: Some(Writer::new(fence, &self.book)) })?;
            self.conn.query("INSERT INTO commit_tokens (token) VALUES ($1)", p![token.clone()])?;
            Ok(value)
        })();
        let value = match body {
            Ok(v) => v,
            Err(e) => {
                let _ = self.conn.rollback();
                return if retryable(&e) { Ok(Attempted::Again(e.message)) } else { Err(e) };
            }
        };
        match self.conn.commit() {
            Ok(_) => Ok(Attempted::Committed(value)),
            Err(Failure::Lost(why)) => self.in_doubt(&token, value, why),
            Err(f) if matches!(f.sqlstate(), Some("40001" | "40P01")) => Ok(Attempted::Again(f.to_string())),
            Err(f) => Err(Error::from(f).at(self.place.clone())),
        }
    }

    /// The answer to `COMMIT` was lost: did it commit? Asked on a new
    /// connection (the client reconnects with backoff outside a transaction).
    fn in_doubt<T>(&self, token: &str, value: T, why: String) -> Result<Attempted<T>> {
        let found =
            self.conn.query("SELECT EXISTS(SELECT 1 FROM commit_tokens WHERE token = $1)", p![token.to_string()]);
        match found.as_deref().map(|rows| rows.first().map(|r| sql::get::<bool>(r, 0))) {
            Ok(Some(Ok(true))) => Ok(Attempted::Committed(value)),
            Ok(Some(Ok(false))) => Ok(Attempted::Again(format!("the commit was lost ({why}) and did not happen"))),
            _ => Err(Error::internal(format!(
                "the connection was lost during a commit ({why}) and PostgreSQL could not be asked whether it happened; nothing was acted on"
            ))
            .at(self.place.clone())),
        }
    }

    /// Become a worker: registered, with a heartbeat for its claims.
    pub fn acquire_lease(&mut self) -> Result<Acquired> {
        claims::register(&self.conn, &self.book)?;
        self.heartbeat = Some(Heartbeat::start(self.target.clone(), self.book.clone(), self.lease)?);
        Ok(Acquired { fence: Fence::new(0), took_over: None })
    }

    pub fn release_lease(&mut self) -> Result<()> {
        self.heartbeat = None;
        claims::retire(&self.conn, &self.book)
    }

    /// Claim a task (again after a lost connection: a claim whose commit
    /// was lost but happened is found as this worker's own).
    pub fn claim(&mut self, goal: &GoalId, task_ref: &str) -> Result<Claimed> {
        self.again(|| claims::claim(&self.conn, &self.book, goal, task_ref, self.lease))
    }

    pub fn release_claim(&mut self, goal: &GoalId, task_ref: &str) -> Result<()> {
        self.again(|| claims::release(&self.conn, &self.book, goal, task_ref))
    }

    pub fn held_elsewhere(&self, goal: &GoalId) -> Result<HashSet<String>> {
        self.again(|| claims::held_elsewhere(&self.conn, &self.book, goal))
    }

    pub fn worker_id(&self) -> &str {
        self.book.worker_id()
    }

    /// The goals a worker may find work in: open ones, oldest first, but
    /// not one whose last event is a verdict (nothing happened since it
    /// was judged: a person's act or a new submission comes first).
    pub fn open_goals(&self) -> Result<Vec<GoalId>> {
        let rows = self.conn.query(
            "SELECT g.id FROM goals g WHERE g.state = 'open'
               AND (SELECT e.kind FROM events e WHERE e.goal_id = g.id ORDER BY e.seq DESC LIMIT 1)
                   IS DISTINCT FROM 'run_finished'
             ORDER BY g.created",
            p![],
        )?;
        rows.iter().map(|r| sql::get(r, 0)).collect()
    }
}

enum Attempted<T> {
    Committed(T),
    /// Not committed, and safe to run again: why.
    Again(String),
}

fn again_or<T>(f: Failure) -> Result<Attempted<T>> {
    match f {
        Failure::Lost(why) => Ok(Attempted::Again(why)),
        f => Err(f.into()),
    }
}

/// A lost connection, a serialization failure or a deadlock inside a
/// transaction: nothing of it committed, so it may run again.
fn retryable(e: &Error) -> bool {
    e.details.get("pg_lost").is_some()
        || matches!(e.details.get("sqlstate").and_then(|s| s.as_str()), Some("40001" | "40P01"))
}

/// A worker's name: host, pid and a random part (two processes never share one).
fn worker_id() -> String {
    let host = super::lease::hostname();
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut random = [0u8; 8];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random));
    let digest = blake3::hash(format!("{host}/{pid}/{nanos}/{random:?}").as_bytes()).to_hex();
    format!("{host}:{pid}:{}", &digest.as_str()[..8])
}

/// A commit token: random enough that two transactions never share one.
fn token() -> String {
    let mut random = [0u8; 16];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    blake3::hash(format!("{random:?}/{nanos}/{}", std::process::id()).as_bytes()).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_password_is_never_in_the_place() {
        for (url, place) in [
            ("postgres://u:pw@h:5/db", "postgres://u@h:5/db"),
            ("postgres://u:p@ss/w@h/db?sslmode=verify-full", "postgres://u@h/db?sslmode=verify-full"),
            ("postgres://u@h/db?password=pw&sslmode=require", "postgres://u@h/db?sslmode=require"),
            ("postgres://u:pw@h/db?sslrootcert=/a@b/ca.pem", "postgres://u@h/db?sslrootcert=/a@b/ca.pem"),
            ("postgresql://h/db?password=pw", "postgresql://h/db"),
        ] {
            assert_eq!(redact(url), place, "{url}");
        }
    }
}
