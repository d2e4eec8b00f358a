//! The act chain in PostgreSQL (`store::chain` holds the hashing, the same
//! as on SQLite, so both give the same verdicts): append an entry in the
//! act's transaction, check one act before the engine acts on it, check
//! them all, and adopt the acts a store held before schema 3. Appends
//! take a transaction-scoped advisory lock first: workers on several
//! machines append one after another, each after the last entry.

use serde_json::{json, Value};
use tokio_postgres::Row;

use super::acts::{
    approval_from_row, ask_from_row, settlement_from_row, APPROVAL_COLUMNS, ASK_COLUMNS, SETTLEMENT_COLUMNS,
};
use super::client::p;
use super::sql::{get, PgSql};
use crate::error::{Code, Error, Result};
use crate::ids::ApprovalId;
use crate::store::acts::{ActRef, ApprovalRecord, AskRecord, SettlementRecord};
use crate::store::chain::{self as links, Entry, EntryKind};

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

fn must<T>(found: Option<T>, what: &str, id: i64) -> Result<T> {
    found.ok_or_else(|| Error::internal(format!("{what} {id} vanished in its own transaction")))
}

pub(super) fn approval(db: &PgSql, id: ApprovalId) -> Result<ApprovalRecord> {
    let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1");
    must(one(db, &sql, id.get(), approval_from_row)?, "approval", id.get())
}

pub(super) fn settlement(db: &PgSql, id: i64) -> Result<SettlementRecord> {
    let sql = format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.id = $1");
    must(one(db, &sql, id, settlement_from_row)?, "settlement", id)
}

pub(super) fn ask(db: &PgSql, id: i64) -> Result<AskRecord> {
    let sql = format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE id = $1");
    must(one(db, &sql, id, ask_from_row)?, "person request", id)
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

fn entry_of(db: &PgSql, kind: EntryKind, row_id: i64) -> Result<Option<Entry>> {
    let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE kind = $1 AND row_id = $2");
    db.q1(&sql, p![kind.as_str().to_string(), row_id])?.map(|r| entry_from_row(&r)).transpose()
}

fn entries_through(db: &PgSql, seq: i64) -> Result<Vec<Entry>> {
    let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE seq <= $1 ORDER BY seq");
    db.q(&sql, p![seq])?.iter().map(entry_from_row).collect()
}

/// A row the chain does not vouch for: `STORE_TAMPERED`, naming it.
fn tampered(table: &str, row_id: i64, problem: &str) -> Error {
    let row = format!("{table} row {row_id}");
    Error::new(
        Code::StoreTampered,
        format!("{row} {problem}: it was written by something other than the engine; nothing acts on it (`engine verify` checks the whole store)"),
    )
    .at(row.clone())
    .with_details(json!({"table": table, "row_id": row_id, "problem": problem}))
}

/// The act as its row holds it now: the content its entry must carry.
fn content_now(db: &PgSql, act: ActRef) -> Result<Option<(EntryKind, i64, Value)>> {
    let found = match act {
        ActRef::Approval(id) => {
            one(db, &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1"), id.get(), approval_from_row)?
                .map(|a| (EntryKind::Approval, id.get(), links::approval_content(&a)))
        }
        ActRef::Settlement(id) => one(
            db,
            &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.id = $1"),
            id,
            settlement_from_row,
        )?
        .map(|s| (EntryKind::Settlement, id, links::settlement_content(&s))),
        ActRef::Ask(id) => {
            one(db, &format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE id = $1"), id, ask_from_row)?
                .map(|a| (links::ask_kind(a.kind), id, links::ask_content(&a)))
        }
    };
    Ok(found)
}

/// Is this act on the chain as recorded, with the chain whole up to its
/// entry (and, for an approval, the entries of its spending), and do the
/// row and the chain agree on whether an approval was spent?
pub(super) fn check(db: &PgSql, act: ActRef) -> Result<()> {
    let (table, row_id) = where_of(act);
    let through = check_row(db, act)?;
    if let Some((seq, why)) = links::first_broken(&entries_through(db, through)?) {
        return Err(tampered(table, row_id, &format!("is on an act chain whose entry {seq} {why}")));
    }
    Ok(())
}

fn where_of(act: ActRef) -> (&'static str, i64) {
    match act {
        ActRef::Approval(id) => ("approvals", id.get()),
        ActRef::Settlement(id) => ("settlements", id),
        ActRef::Ask(id) => ("person_requests", id),
    }
}

/// The row against its entry (and an approval's spending against theirs);
/// the highest entry it involves.
fn check_row(db: &PgSql, act: ActRef) -> Result<i64> {
    let (table, row_id) = where_of(act);
    let Some((kind, _, now)) = content_now(db, act)? else {
        return Err(tampered(table, row_id, "is missing"));
    };
    let entry = entry_of(db, kind, row_id)?.ok_or_else(|| tampered(table, row_id, "is not on the act chain"))?;
    if entry.content != now {
        return Err(tampered(table, row_id, &format!("differs from its act chain entry {}", entry.seq)));
    }
    let mut through = entry.seq;
    if let ActRef::Approval(id) = act {
        through = through.max(check_spending(db, id)?);
    }
    Ok(through)
}

/// The row's `consumed_by` / `voided_by` against the chain's spending
/// entries; the highest entry seen (0: none).
fn check_spending(db: &PgSql, id: ApprovalId) -> Result<i64> {
    let row = approval(db, id)?;
    let mut highest = 0;
    for (kind, by, word) in
        [(EntryKind::ApprovalSpent, row.consumed_by, "consumed"), (EntryKind::ApprovalVoided, row.voided_by, "voided")]
    {
        match (entry_of(db, kind, id.get())?, by) {
            (None, None) => {}
            (Some(e), Some(by)) if e.content == links::spent_content(id, by) => highest = highest.max(e.seq),
            (Some(e), _) => {
                return Err(tampered(
                    "approvals",
                    id.get(),
                    &format!(
                        "says it was {word} by {}, but act chain entry {} says {}",
                        by.map_or("no call".into(), |b| format!("attempt {b}")),
                        e.seq,
                        e.content["attempt_id"]
                    ),
                ))
            }
            (None, Some(by)) => {
                return Err(tampered(
                    "approvals",
                    id.get(),
                    &format!("says it was {word} by attempt {by}, which the act chain does not record"),
                ))
            }
        }
    }
    Ok(highest)
}

/// Chain the acts a store held before schema 3, in the order they were
/// recorded (their time, then their table's order), with their spending.
pub(super) fn adopt(db: &PgSql) -> Result<()> {
    let approvals = db
        .q(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY id"), p![])?
        .iter()
        .map(approval_from_row)
        .collect::<Result<Vec<_>>>()?;
    let settlements = db
        .q(&format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s ORDER BY s.id"), p![])?
        .iter()
        .map(settlement_from_row)
        .collect::<Result<Vec<_>>>()?;
    let mut acts: Vec<(i64, u8, i64, EntryKind, Value)> = Vec::new();
    for a in &approvals {
        acts.push((a.at_ms, 0, a.id.get(), EntryKind::Approval, links::approval_content(a)));
    }
    for s in &settlements {
        acts.push((s.at_ms, 1, s.id, EntryKind::Settlement, links::settlement_content(s)));
    }
    acts.sort_by_key(|(at, table, id, _, _)| (*at, *table, *id));
    for (_, _, row_id, kind, content) in acts {
        append(db, kind, row_id, content)?;
    }
    for a in &approvals {
        if let Some(by) = a.consumed_by {
            append(db, EntryKind::ApprovalSpent, a.id.get(), links::spent_content(a.id, by))?;
        }
        if let Some(by) = a.voided_by {
            append(db, EntryKind::ApprovalVoided, a.id.get(), links::spent_content(a.id, by))?;
        }
    }
    Ok(())
}
