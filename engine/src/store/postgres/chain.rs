//! The act chain in PostgreSQL (`store::chain` holds the hashing and the
//! verdicts, the same as on SQLite, so both give the same verdicts):
//! append an entry in the act's transaction, read the rows the verdicts
//! walk (`ChainRows`), and adopt the acts a store held before schema 3. Appends
//! take a transaction-scoped advisory lock first: workers on several
//! machines append one after another, each after the last entry.

use serde_json::Value;
use tokio_postgres::Row;

use super::acts::{
    approval_from_row, ask_from_row, settlement_from_row, APPROVAL_COLUMNS, APPROVAL_COLUMNS_BEFORE_COST, ASK_COLUMNS,
    SETTLEMENT_COLUMNS,
};
use super::client::p;
use super::sql::{get, PgSql};
use crate::error::{Code, Error, Result};
use crate::ids::ApprovalId;
use crate::store::acts::{ActRef, ApprovalRecord, AskRecord, SettlementRecord};
use crate::store::chain::{self as links, ChainRows, Entry, EntryKind};

const ENTRY_COLUMNS: &str = "seq, kind, row_id, content, prev, hash";

/// The advisory lock an append takes (any fixed number; "actchain").
const APPEND_LOCK: i64 = 0x6163_7463_6861_696e;

fn entry_from_row(r: &Row) -> Result<Entry> {
    let bad = |why: String| Error::new(Code::StoreCorrupt, format!("an act chain entry does not read: {why}"));
    let kind: String = get(r, 1)?;
    let content: String = get(r, 3)?;
    Ok(Entry {
        seq: get(r, 0)?,
        kind: EntryKind::parse(&kind).ok_or_else(|| bad(format!("unknown entry kind `{kind}`")))?,
        row_id: get(r, 2)?,
        content: serde_json::from_str(&content).map_err(|e| bad(e.to_string()))?,
        prev: get(r, 4)?,
        hash: get(r, 5)?,
    })
}

/// The one row of `sql` (an act that must be there), read by `from_row`.
fn one<T>(db: &PgSql, sql: &str, id: i64, from_row: fn(&Row) -> Result<T>) -> Result<Option<T>> {
    db.q1(sql, p![id])?.map(|r| from_row(&r)).transpose()
}

fn last(db: &PgSql) -> Result<Option<Entry>> {
    let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain ORDER BY seq DESC LIMIT 1");
    db.q1(&sql, p![])?.map(|r| entry_from_row(&r)).transpose()
}

/// Append the entry binding `row_id` of `kind`, after the last one (under
/// the append lock, held to the transaction's end).
pub(super) fn append(db: &PgSql, kind: EntryKind, row_id: i64, content: Value) -> Result<Entry> {
    db.q("SELECT pg_advisory_xact_lock($1)", p![APPEND_LOCK])?;
    let e = links::next(last(db)?.as_ref(), kind, row_id, content);
    db.q(
        "INSERT INTO act_chain (seq, kind, row_id, content, prev, hash) VALUES ($1, $2, $3, $4, $5, $6)",
        p![
            e.seq,
            e.kind.as_str().to_string(),
            e.row_id,
            crate::digest::canonical_json(&e.content),
            e.prev.clone(),
            e.hash.clone()
        ],
    )?;
    Ok(e)
}

/// The walk (`store::chain::walk`) reads the PostgreSQL rows through this.
impl ChainRows for PgSql<'_> {
    fn entry_of(&self, kind: EntryKind, row_id: i64) -> Result<Option<Entry>> {
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE kind = $1 AND row_id = $2");
        self.q1(&sql, p![kind.as_str().to_string(), row_id])?.map(|r| entry_from_row(&r)).transpose()
    }

    fn entries(&self, through: Option<i64>) -> Result<Vec<Entry>> {
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE seq <= $1 ORDER BY seq");
        self.q(&sql, p![through.unwrap_or(i64::MAX)])?.iter().map(entry_from_row).collect()
    }

    fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>> {
        one(self, &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1"), id.get(), approval_from_row)
    }

    fn settlement(&self, id: i64) -> Result<Option<SettlementRecord>> {
        one(self, &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.id = $1"), id, settlement_from_row)
    }

    fn ask(&self, id: i64) -> Result<Option<AskRecord>> {
        one(self, &format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE id = $1"), id, ask_from_row)
    }

    fn ids_of(&self, table: &str) -> Result<Vec<i64>> {
        self.q(&format!("SELECT id FROM {table} ORDER BY id"), p![])?.iter().map(|r| get(r, 0)).collect()
    }
}

/// Is this act on the chain as recorded (`store::chain::check`)?
pub(super) fn check(db: &PgSql, act: ActRef) -> Result<()> {
    links::check(db, act)
}

/// `engine verify`'s act chain check (`store::chain::first_problem`).
pub(super) fn first_problem(db: &PgSql) -> Result<Option<(String, String)>> {
    links::first_problem(db)
}

/// Chain the acts a store held before schema 3, in the order they were
/// recorded (their time, then their table's order), with their spending.
pub(super) fn adopt(db: &PgSql) -> Result<()> {
    let approvals = db
        .q(&format!("SELECT {APPROVAL_COLUMNS_BEFORE_COST} FROM approvals ORDER BY id"), p![])?
        .iter()
        .map(approval_from_row)
        .collect::<Result<Vec<_>>>()?;
    let settlements = db
        .q(&format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s ORDER BY s.id"), p![])?
        .iter()
        .map(settlement_from_row)
        .collect::<Result<Vec<_>>>()?;
    for (kind, row_id, content) in links::adoption(&approvals, &settlements) {
        append(db, kind, row_id, content)?;
    }
    Ok(())
}
