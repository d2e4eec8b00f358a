//! The act chain in SQLite (`store::chain` holds the hashing and the
//! verdicts): append an entry in the act's transaction, read the rows the
//! verdicts walk (`ChainRows`), and adopt the acts a store held before
//! schema 6.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::acts::{
    approval_from_row, ask_from_row, settlement_from_row, APPROVAL_COLUMNS, APPROVAL_COLUMNS_BEFORE_COST, ASK_COLUMNS,
    SETTLEMENT_COLUMNS,
};
use super::sql::{exec, qrow, rows};
use crate::error::Result;
use crate::ids::ApprovalId;
use crate::store::acts::{ActRef, ApprovalRecord, AskRecord, SettlementRecord};
use crate::store::chain::{self as links, ChainRows, Entry, EntryKind};

const ENTRY_COLUMNS: &str = "seq, kind, row_id, content, prev, hash";

fn entry_from_row(r: &rusqlite::Row) -> rusqlite::Result<Entry> {
    let bad =
        |i: usize, why: String| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, why.into());
    let kind: String = r.get(1)?;
    let content: String = r.get(3)?;
    Ok(Entry {
        seq: r.get(0)?,
        kind: EntryKind::parse(&kind).ok_or_else(|| bad(1, format!("unknown entry kind `{kind}`")))?,
        row_id: r.get(2)?,
        content: serde_json::from_str(&content).map_err(|e| bad(3, e.to_string()))?,
        prev: r.get(4)?,
        hash: r.get(5)?,
    })
}

fn last(conn: &Connection) -> Result<Option<Entry>> {
    let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain ORDER BY seq DESC LIMIT 1");
    Ok(qrow(conn, &sql, [], entry_from_row).optional()?)
}

/// Append the entry binding `row_id` of `kind`, after the last one.
pub(super) fn append(conn: &Connection, kind: EntryKind, row_id: i64, content: Value) -> Result<Entry> {
    let e = links::next(last(conn)?.as_ref(), kind, row_id, content);
    exec(
        conn,
        "INSERT INTO act_chain (seq, kind, row_id, content, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![e.seq, e.kind.as_str(), e.row_id, crate::digest::canonical_json(&e.content), e.prev, e.hash],
    )?;
    Ok(e)
}

/// The walk (`store::chain::walk`) reads the SQLite rows through this.
impl ChainRows for Connection {
    fn entry_of(&self, kind: EntryKind, row_id: i64) -> Result<Option<Entry>> {
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE kind = ?1 AND row_id = ?2");
        Ok(qrow(self, &sql, params![kind.as_str(), row_id], entry_from_row).optional()?)
    }

    fn entries(&self, through: Option<i64>) -> Result<Vec<Entry>> {
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE seq <= ?1 ORDER BY seq");
        rows(self, &sql, [through.unwrap_or(i64::MAX)], entry_from_row)
    }

    fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1");
        Ok(qrow(self, &sql, [id], approval_from_row).optional()?)
    }

    fn settlement(&self, id: i64) -> Result<Option<SettlementRecord>> {
        let sql = format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.id = ?1");
        Ok(qrow(self, &sql, [id], settlement_from_row).optional()?)
    }

    fn ask(&self, id: i64) -> Result<Option<AskRecord>> {
        let sql = format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE id = ?1");
        Ok(qrow(self, &sql, [id], ask_from_row).optional()?)
    }

    fn ids_of(&self, table: &str) -> Result<Vec<i64>> {
        rows(self, &format!("SELECT id FROM {table} ORDER BY id"), [], |r| r.get(0))
    }
}

/// Is this act on the chain as recorded (`store::chain::check`)?
pub(super) fn check(conn: &Connection, act: ActRef) -> Result<()> {
    links::check(conn, act)
}

/// Chain the acts a store held before schema 6, in the order they were
/// recorded (their time, then their table's order), with their spending.
pub(super) fn adopt(conn: &Connection) -> Result<()> {
    let approvals = rows(
        conn,
        &format!("SELECT {APPROVAL_COLUMNS_BEFORE_COST} FROM approvals ORDER BY id"),
        [],
        approval_from_row,
    )?;
    let settlements =
        rows(conn, &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s ORDER BY s.id"), [], settlement_from_row)?;
    for (kind, row_id, content) in links::adoption(&approvals, &settlements) {
        append(conn, kind, row_id, content)?;
    }
    Ok(())
}

/// `engine verify`'s act chain check (`store::chain::first_problem`).
pub(super) fn first_problem(conn: &Connection) -> Result<Option<(String, String)>> {
    links::first_problem(conn)
}
