//! `PgSql`: the connection, or a transaction on it, seen through the
//! ledger's traits (implemented by aggregate in the files beside it), the
//! helpers those share, and the fence every write about a task checks.

use std::collections::HashSet;

use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

use super::claims::ClaimBook;
use super::client::{p, Conn, Param};
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, GoalId};
use crate::state::Lifecycle;
use crate::store::lease::Fence;
use crate::store::queries::Arg;
use crate::store::{LedgerRead, LedgerTx};

/// What a writing transaction carries: its fence, the worker's claims, and
/// the tasks whose claim it already checked (and holds a row lock on).
pub(super) struct Writer<'c> {
    pub fence: Fence,
    pub book: &'c ClaimBook,
    checked: HashSet<(GoalId, String)>,
}

impl<'c> Writer<'c> {
    pub fn new(fence: Fence, book: &'c ClaimBook) -> Writer<'c> {
        Writer { fence, book, checked: HashSet::new() }
    }
}

pub(in crate::store) struct PgSql<'c> {
    pub(super) conn: &'c Conn,
    pub(super) writer: Option<Writer<'c>>,
}

impl LedgerRead for PgSql<'_> {}

impl LedgerTx for PgSql<'_> {
    fn fence(&self) -> Fence {
        self.writer.as_ref().map_or(Fence::new(-1), |w| w.fence)
    }
}

impl<'c> PgSql<'c> {
    pub(super) fn reader(conn: &'c Conn) -> PgSql<'c> {
        PgSql { conn, writer: None }
    }

    /// Every row of a statement.
    pub(super) fn q(&self, sql: &str, params: Vec<Param>) -> Result<Vec<Row>> {
        Ok(self.conn.query(sql, params)?)
    }

    /// The first row, if any.
    pub(super) fn q1(&self, sql: &str, params: Vec<Param>) -> Result<Option<Row>> {
        Ok(self.q(sql, params)?.into_iter().next())
    }

    /// One value of the first row, if there is a row.
    pub(super) fn v<T: for<'a> FromSql<'a>>(&self, sql: &str, params: Vec<Param>) -> Result<Option<T>> {
        self.q1(sql, params)?.map(|r| get(&r, 0)).transpose()
    }

    /// Is this a writing transaction? (Reads in one lock what they read
    /// for a decision: the goal's budget row, the approvals it may spend.)
    pub(super) fn writing(&self) -> bool {
        self.writer.is_some()
    }

    /// Inside a write: may this writer write about `task_ref`? Checked
    /// once per task per transaction, with a row lock on the claim held
    /// to the commit, so a takeover cannot come between the check and the
    /// commit (`claims::check`).
    pub(super) fn fence_task(&mut self, goal: &GoalId, task_ref: &str) -> Result<()> {
        let Some(w) = self.writer.as_mut() else {
            return Err(Error::internal("a write outside a write transaction"));
        };
        let key = (goal.clone(), task_ref.to_string());
        if w.checked.contains(&key) {
            return Ok(());
        }
        let book = w.book;
        super::claims::check(self.conn, book, goal, task_ref)?;
        if let Some(w) = self.writer.as_mut() {
            w.checked.insert(key);
        }
        Ok(())
    }

    /// The same, for the task an attempt belongs to.
    pub(super) fn fence_attempt(&mut self, id: AttemptId) -> Result<()> {
        let key = self.writer.as_ref().and_then(|w| w.book.attempt_key(id));
        let (goal, task_ref) = match key {
            Some(k) => k,
            None => {
                let row = self
                    .q1("SELECT goal_id, task_ref FROM attempts WHERE id = $1", p![id.0])?
                    .ok_or_else(|| Error::internal(format!("attempt {id} is not in the ledger")))?;
                let k: (GoalId, String) = (GoalId::new(get::<String>(&row, 0)?), get(&row, 1)?);
                if let Some(w) = self.writer.as_ref() {
                    w.book.remember_attempt(id, k.clone());
                }
                k
            }
        };
        self.fence_task(&goal, &task_ref)
    }
}

/// A column, or a clear error (never a panic) when it does not read.
pub(super) fn get<T: for<'a> FromSql<'a>>(r: &Row, i: usize) -> Result<T> {
    r.try_get(i).map_err(|e| Error::new(Code::StoreCorrupt, format!("a ledger column does not read: {e}")))
}

/// `'a','b'`: the stable words of `states`, for an SQL `IN (...)` list.
pub(super) fn words<S: Copy>(states: &[S], word: fn(S) -> &'static str) -> String {
    states.iter().map(|&s| format!("'{}'", word(s))).collect::<Vec<_>>().join(",")
}

/// Why a guarded state change changed no row.
pub(super) fn refusal<S: Lifecycle>(what: &str, now: Option<S>, to: S) -> Error {
    match now.map(|from| from.check(to)) {
        Some(Err(refused)) => Error::internal(format!("{what}: {refused}")),
        Some(Ok(())) => Error::internal(format!("{what}: the move to {to} changed nothing")),
        None => Error::internal(format!("{what} is not in the ledger")),
    }
}

/// A JSON text column as a value (a text that is not JSON stays a string).
pub(super) fn json(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

/// A value as the JSON text its column holds.
pub(super) fn json_text<T: serde::Serialize>(what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::internal(format!("{what} does not serialize: {e}")))
}

/// A shared query's parameter as PostgreSQL binds it.
pub(super) fn param(arg: Arg<'_>) -> Param {
    match arg {
        Arg::Text(text) => Box::new(text.to_string()),
        Arg::Int(n) => Box::new(n),
    }
}

/// An attempt that was, or may have been, dispatched (as on SQLite).
pub(super) const DISPATCHED_OR_MAYBE: &str =
    "NOT EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'engine_error')";
