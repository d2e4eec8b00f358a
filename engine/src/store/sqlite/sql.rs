//! `Sql`: a connection, or a transaction on it, seen through the ledger's
//! traits (implemented by aggregate in `goals.rs`, `attempts.rs`,
//! `evidence.rs`, `acts.rs`, `events.rs`, `inspect.rs`), and the helpers
//! those implementations share.

use std::sync::OnceLock;

use rusqlite::Connection;

use crate::error::{Code, Error, Result};
use crate::state::Lifecycle;
use crate::store::lease::Fence;
use crate::store::queries::Arg;
use crate::store::LedgerTx;

/// A connection, or a transaction on it, seen through the ledger's traits.
/// Writes are reachable only as `&mut dyn LedgerTx`, which `Db::write`
/// hands out inside a transaction begun under a checked fence.
pub(in crate::store) struct Sql<'c> {
    pub(super) conn: &'c Connection,
    fence: Option<Fence>,
}

impl LedgerTx for Sql<'_> {
    fn fence(&self) -> Fence {
        // Only `Db::write` builds a writing `Sql`, always with its fence.
        self.fence.unwrap_or(Fence::new(-1))
    }
}

impl<'c> Sql<'c> {
    /// Reads only: no fence, so no write can be made through it.
    pub(super) fn reader(conn: &'c Connection) -> Sql<'c> {
        Sql { conn, fence: None }
    }

    /// Inside a write transaction begun under `fence`.
    pub(super) fn writer(conn: &'c Connection, fence: Fence) -> Sql<'c> {
        Sql { conn, fence: Some(fence) }
    }
}

/// An attempt that was, or may have been, dispatched: every one but a call
/// the provider refused before anything was handed over (its engine-error
/// evidence says so). One that stopped between intent and receipt counts,
/// abandoned for a new try or not: it may have gone out.
pub(super) const DISPATCHED_OR_MAYBE: &str =
    "NOT EXISTS (SELECT 1 FROM evidence e WHERE e.attempt_id = a.id AND e.kind = 'engine_error')";

/// `(state = 'a' OR state = 'b')`: `column` holds one of the stable words
/// of `states` (`0`, false, for none). Not `state IN ('a','b','c')`: SQLite
/// builds a temporary b-tree for a constant list of more than two values
/// each time the statement runs (a page allocated and zeroed), which was
/// about a tenth of a builtin step's instructions (callgrind); a chain of
/// comparisons on the one row a guarded move touches costs next to nothing.
pub(super) fn one_of<S: Copy>(column: &str, states: &[S], word: fn(S) -> &'static str) -> String {
    if states.is_empty() {
        return "0".to_string();
    }
    let terms: Vec<String> = states.iter().map(|&s| format!("{column} = '{}'", word(s))).collect();
    format!("({})", terms.join(" OR "))
}

/// The text of one guarded state change for every target state, built
/// once: `build(to)` is the statement moving a row to `to` from the
/// states the transition table allows (`one_of`). Building it at every
/// move (a `format!`, the sources, an `OR` chain) cost about 5% of a
/// `builtin` step's instructions (callgrind).
pub(super) struct Guarded<S: 'static> {
    build: fn(S) -> String,
    built: OnceLock<Vec<String>>,
}

impl<S: Lifecycle> Guarded<S> {
    pub(super) const fn new(build: fn(S) -> String) -> Self {
        Guarded { build, built: OnceLock::new() }
    }

    /// The statement moving a row to `to`.
    pub(super) fn sql(&self, to: S) -> Result<&str> {
        let built = self.built.get_or_init(|| S::ALL.iter().map(|&s| (self.build)(s)).collect());
        S::ALL
            .iter()
            .position(|&s| s == to)
            .and_then(|i| built.get(i))
            .map(String::as_str)
            .ok_or_else(|| Error::internal(format!("no guarded statement moves a row to {to}")))
    }
}

/// Why a guarded state change changed no row: the table refused the move
/// from the state the row is in, or there is no such row.
pub(super) fn refusal<S: Lifecycle>(what: &str, now: Option<S>, to: S) -> Error {
    match now.map(|from| from.check(to)) {
        Some(Err(refused)) => Error::internal(format!("{what}: {refused}")),
        Some(Ok(())) => Error::internal(format!("{what}: the move to {to} changed nothing")),
        None => Error::internal(format!("{what} is not in the ledger")),
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        // The engine's own error, carried through a row's mapping.
        if let rusqlite::Error::FromSqlConversionFailure(_, _, inner) = &e {
            if let Some(own) = inner.downcast_ref::<Error>() {
                return own.clone();
            }
        }
        match &e {
            // SQLite could not read the schema's text (`sqlite_master`'s
            // SQL): the check `schema` failed, named as verify names it.
            rusqlite::Error::SqliteFailure(f, Some(m))
                if f.code == rusqlite::ErrorCode::DatabaseCorrupt && m.starts_with("malformed database schema") =>
            {
                schema_failed(m)
            }
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) =>
            {
                Error::new(Code::StoreCorrupt, format!("store is corrupt: {e}"))
            }
            // The engine's own SQL, on a schema whose version it checked,
            // names a column or table the store lacks: the schema's text
            // was damaged or edited outside the engine.
            rusqlite::Error::SqlInputError { .. } => schema_failed(&format!("does not match its version: {e}")),
            // The engine's own query read a value its column cannot hold
            // (text that is not UTF-8, bytes where text belongs, a word or
            // JSON it never writes): a row damaged or edited outside the
            // engine, which `engine verify` names.
            rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::Utf8Error(..) => Error::new(
                Code::StoreCorrupt,
                format!("a row of the store does not hold what its column should ({e}); `engine verify` names it"),
            ),
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull => Error::new(
                Code::StoreFull,
                format!("the store's disk is full ({e}); the transaction that did not fit was rolled back whole"),
            ),
            // SQLite's extended code rides along, so the store can tell a
            // failed write() (SQLITE_IOERR_*) apart and ask why (errno).
            rusqlite::Error::SqliteFailure(f, _) => Error::internal(format!("store error: {e}"))
                .with_details(serde_json::json!({"sqlite_code": f.extended_code})),
            _ => Error::internal(format!("store error: {e}")),
        }
    }
}

/// The check `schema` failed (`store::verify`'s words and details: the
/// check, its entry, the problem), met by any command's statement, not
/// only by verify's: SQLite parses the schema's text before any query.
fn schema_failed(problem: &str) -> Error {
    const ENTRY: &str = "the schema";
    Error::new(Code::StoreCorrupt, format!("check `schema` failed: {ENTRY}: {problem}"))
        .with_details(serde_json::json!({"check": "schema", "entry": ENTRY, "problem": problem}))
}

/// A value as the JSON text its column holds: `serde_json`'s compact
/// writer into a byte buffer, the same bytes as `Value`'s `Display`
/// (`to_string`), which goes through `fmt::Write` a piece at a time and
/// cost about 30,000 instructions of a `builtin` step (callgrind) for its
/// four events, receipt and task details.
pub(super) fn json_text<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::internal(format!("{what} does not serialize: {e}")))
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match *self {
            Arg::Text(text) => rusqlite::types::ToSqlOutput::Borrowed(rusqlite::types::ValueRef::Text(text.as_bytes())),
            Arg::Int(n) => rusqlite::types::ToSqlOutput::Owned(rusqlite::types::Value::Integer(n)),
        })
    }
}

/// Run a statement through the connection's prepared-statement cache
/// (`Connection::execute` parses the SQL again at every call).
pub(super) fn exec<P: rusqlite::Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `query_row` through the prepared-statement cache.
pub(super) fn qrow<T, P: rusqlite::Params, F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: F,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

/// All rows of a query through the statement cache.
pub(super) fn rows<T, P: rusqlite::Params, F: FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: F,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let out = stmt.query_map(params, f)?.collect::<rusqlite::Result<Vec<T>>>()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::json_text;

    #[test]
    fn json_text_is_byte_for_byte_the_display_of_a_value() {
        let values = [
            json!(null),
            json!({"operation_id": "op_1", "try": 1, "request_digest": "ab", "approval_consumed": null}),
            json!({"detail": "builtin noop", "process": {"pid": 12, "start": "3 4"}}),
            json!({"quote\"": "line\nbreak\ttab \u{1b}[31m \\ back", "é": "ünï 😀", "": [1.5, -0.0, 1e300, -7]}),
            json!({"z": 1, "a": [true, false, {}, []], "m": {"b": "", "a": "\u{7f}\u{0}"}}),
            json!(u64::MAX),
            json!(i64::MIN),
        ];
        for v in values {
            assert_eq!(json_text("value", &v).unwrap(), v.to_string());
        }
    }
}
