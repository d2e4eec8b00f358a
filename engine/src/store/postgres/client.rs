//! One PostgreSQL connection on a thread of its own.
//!
//! The ledger's interface is synchronous and the run loop's coordinator
//! runs on a current-thread tokio runtime, where blocking on another
//! runtime would panic. So each connection lives on a dedicated thread
//! with its own runtime (`tokio-postgres` driven there); the caller sends
//! a statement over a channel and waits for the answer, exactly as it
//! waits for SQLite's. A connection never reconnects inside a
//! transaction: a statement after a lost connection in a transaction is
//! `Lost`, and only the next `BEGIN` (or a read outside a transaction)
//! connects again, with backoff.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Socket};

use super::tls::Tls;

use crate::error::{Error, Result};
use crate::limits::{PG_CONNECT_TIMEOUT, PG_RECONNECT_WAIT_MAX, PG_STATEMENT_TIMEOUT};

/// A statement's parameter, owned so it can cross to the connection's thread.
pub(super) type Param = Box<dyn ToSql + Send + Sync>;

/// `p![a, b]`: owned parameters for a statement.
macro_rules! p {
    ($($x:expr),* $(,)?) => {
        vec![$(Box::new($x) as $crate::store::postgres::client::Param),*]
    };
}
pub(super) use p;

/// What went wrong with a statement.
#[derive(Debug)]
pub(super) enum Failure {
    /// The connection is gone (or could not be made): whatever was not
    /// committed is not, and a `COMMIT` sent is in doubt.
    Lost(String),
    /// The server answered with an error.
    Db(tokio_postgres::Error),
}

impl Failure {
    /// The server's SQLSTATE, if it answered.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Failure::Db(e) => e.code().map(|c| c.code()),
            Failure::Lost(_) => None,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Lost(why) => write!(f, "the connection to PostgreSQL was lost: {why}"),
            Failure::Db(e) => match e.as_db_error() {
                Some(db) => write!(f, "PostgreSQL: {} ({})", db.message(), db.code().code()),
                None => write!(f, "PostgreSQL: {e}"),
            },
        }
    }
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        // What a writer needs to know to run a transaction again rides along.
        let details = match &f {
            Failure::Lost(_) => serde_json::json!({"pg_lost": true}),
            Failure::Db(_) => serde_json::json!({"sqlstate": f.sqlstate()}),
        };
        Error::internal(format!("store error: {f}")).with_details(details)
    }
}

pub(super) type Answer = std::result::Result<Vec<Row>, Failure>;

enum Kind {
    Begin(String),
    Commit,
    Rollback,
    Query,
}

struct Request {
    kind: Kind,
    sql: String,
    params: Vec<Param>,
    reply: mpsc::Sender<Answer>,
}

/// Where to connect, and how (plain or TLS): what every connection of a
/// store is opened with, the heartbeat's included.
#[derive(Clone)]
pub(super) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
}

/// A handle to the connection's thread. Dropping it ends the thread.
pub(super) struct Conn {
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Conn {
    /// Start the thread and connect once (an unreachable server is an
    /// error now, not at the first statement).
    pub fn open(config: Target) -> Result<Conn> {
        let (tx, rx) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel::<std::result::Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name("engine-postgres".into())
            .spawn(move || serve(config, rx, ready_tx))
            .map_err(|e| Error::internal(format!("cannot start the PostgreSQL thread: {e}")))?;
        let conn = Conn { tx: Some(tx), thread: Some(thread) };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(conn),
            Ok(Err(why)) => Err(Error::usage(format!("cannot connect to PostgreSQL: {why}"))),
            Err(_) => Err(Error::internal("the PostgreSQL thread ended before connecting")),
        }
    }

    fn send(&self, kind: Kind, sql: &str, params: Vec<Param>) -> Answer {
        let (reply, answer) = mpsc::channel();
        let tx = self.tx.as_ref().ok_or_else(|| Failure::Lost("the connection is closed".into()))?;
        tx.send(Request { kind, sql: sql.to_string(), params, reply })
            .map_err(|_| Failure::Lost("the connection's thread ended".into()))?;
        answer.recv().map_err(|_| Failure::Lost("the connection's thread ended".into()))?
    }

    /// A statement; outside a transaction it may connect again first.
    pub fn query(&self, sql: &str, params: Vec<Param>) -> Answer {
        self.send(Kind::Query, sql, params)
    }

    /// `BEGIN …` (connecting again first if the connection was lost).
    pub fn begin(&self, sql: &str) -> Answer {
        self.send(Kind::Begin(sql.to_string()), "", Vec::new())
    }

    pub fn commit(&self) -> Answer {
        self.send(Kind::Commit, "COMMIT", Vec::new())
    }

    pub fn rollback(&self) -> Answer {
        self.send(Kind::Rollback, "ROLLBACK", Vec::new())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The connection's thread: one runtime, one client, one statement at a time.
fn serve(config: Target, rx: mpsc::Receiver<Request>, ready: mpsc::Sender<std::result::Result<(), String>>) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("no runtime: {e}")));
            return;
        }
    };
    let mut client = match rt.block_on(connect(&config)) {
        Ok(c) => Some(c),
        Err(why) => {
            let _ = ready.send(Err(why));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut in_tx = false;
    for req in rx {
        let answer = match req.kind {
            Kind::Begin(sql) => {
                let a = fresh(&rt, &config, &mut client, &sql, &[]);
                in_tx = a.is_ok();
                a
            }
            Kind::Query => {
                let params: Vec<&(dyn ToSql + Sync)> = req.params.iter().map(|p| p.as_ref() as _).collect();
                if in_tx {
                    run(&rt, &client, &req.sql, &params)
                } else {
                    fresh(&rt, &config, &mut client, &req.sql, &params)
                }
            }
            Kind::Commit | Kind::Rollback => {
                in_tx = false;
                run(&rt, &client, &req.sql, &[])
            }
        };
        if matches!(answer, Err(Failure::Lost(_))) {
            client = None;
        }
        let _ = req.reply.send(answer);
    }
}

fn connected(client: &Option<Client>) -> bool {
    client.as_ref().is_some_and(|c| !c.is_closed())
}

/// A statement outside a transaction (or a `BEGIN`): nothing is in doubt
/// if the connection turns out lost, so connect again and send it once more.
fn fresh(
    rt: &tokio::runtime::Runtime,
    config: &Target,
    client: &mut Option<Client>,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Answer {
    if !connected(client) {
        *client = rt.block_on(reconnect(config));
    }
    match run(rt, client, sql, params) {
        Err(Failure::Lost(_)) => {
            *client = rt.block_on(reconnect(config));
            run(rt, client, sql, params)
        }
        other => other,
    }
}

/// One statement, bounded in time: past the bound the connection is
/// dropped (a hung server is a lost one).
fn run(rt: &tokio::runtime::Runtime, client: &Option<Client>, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Answer {
    let Some(c) = client.as_ref().filter(|c| !c.is_closed()) else {
        return Err(Failure::Lost("not connected".into()));
    };
    let result = rt.block_on(async { tokio::time::timeout(PG_STATEMENT_TIMEOUT, c.query(sql, params)).await });
    match result {
        Err(_) => Err(Failure::Lost(format!("no answer within {} s", PG_STATEMENT_TIMEOUT.as_secs()))),
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(e)) if e.is_closed() || c.is_closed() || e.as_db_error().is_none() && e.code().is_none() => {
            Err(Failure::Lost(e.to_string()))
        }
        Ok(Err(e)) if is_shutdown(&e) => Err(Failure::Lost(e.to_string())),
        Ok(Err(e)) => Err(Failure::Db(e)),
    }
}

/// The server is going away (admin shutdown, crash shutdown) or ended the
/// session (idle in a transaction past its timeout, 25P03): the
/// connection is as good as lost.
fn is_shutdown(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08") || c.code() == "25P03")
}

async fn connect(target: &Target) -> std::result::Result<Client, String> {
    match &target.tls {
        Tls::Off => connect_with(&target.config, NoTls).await,
        Tls::On(tls) => connect_with(&target.config, tls.clone()).await,
    }
}

/// Connect through `tls` (plaintext or rustls), bounded by the connect
/// timeout. The connection's task ends when the connection does; the
/// client then reports closed.
async fn connect_with<T>(config: &tokio_postgres::Config, tls: T) -> std::result::Result<Client, String>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) = tokio::time::timeout(PG_CONNECT_TIMEOUT, config.connect(tls))
        .await
        .map_err(|_| format!("no answer within {} s", PG_CONNECT_TIMEOUT.as_secs()))?
        .map_err(|e| said(&e))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A connection error with its cause (a TLS handshake's reason is in the
/// source: `invalid peer certificate: UnknownIssuer`).
fn said(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) if !e.to_string().contains(&cause.to_string()) => format!("{e}: {cause}"),
        _ => e.to_string(),
    }
}

/// Connect again with exponential backoff (50 ms doubling to 2 s), for
/// at most `PG_RECONNECT_WAIT_MAX`; `None` if the server stayed away.
async fn reconnect(config: &Target) -> Option<Client> {
    let deadline = Instant::now() + PG_RECONNECT_WAIT_MAX;
    let mut delay = Duration::from_millis(50);
    loop {
        if let Ok(c) = connect(config).await {
            return Some(c);
        }
        if Instant::now() + delay > deadline {
            return None;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}
