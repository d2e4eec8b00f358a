//! The act chain in SQLite (`store::chain` holds the hashing): append an
//! entry in the act's transaction, check one act before the engine acts on
//! it, check them all for `engine verify`, and adopt the acts a store held
//! before schema 6.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::acts::{
    approval_from_row, ask_from_row, settlement_from_row, APPROVAL_COLUMNS, ASK_COLUMNS, SETTLEMENT_COLUMNS,
};
use super::sql::{exec, qrow, rows};
use crate::error::{Code, Error, Result};
use crate::ids::ApprovalId;
use crate::store::acts::{ActRef, ApprovalRecord, AskRecord, SettlementRecord};
use crate::store::chain::{self as links, Entry, EntryKind};

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

pub(super) fn approval(conn: &Connection, id: ApprovalId) -> Result<ApprovalRecord> {
    Ok(qrow(conn, &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"), [id], approval_from_row)?)
}

pub(super) fn settlement(conn: &Connection, id: i64) -> Result<SettlementRecord> {
    Ok(qrow(
        conn,
        &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.id = ?1"),
        [id],
        settlement_from_row,
    )?)
}

pub(super) fn ask(conn: &Connection, id: i64) -> Result<AskRecord> {
    Ok(qrow(conn, &format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE id = ?1"), [id], ask_from_row)?)
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

fn entry_of(conn: &Connection, kind: EntryKind, row_id: i64) -> Result<Option<Entry>> {
    let sql = format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE kind = ?1 AND row_id = ?2");
    Ok(qrow(conn, &sql, params![kind.as_str(), row_id], entry_from_row).optional()?)
}

fn entries_through(conn: &Connection, seq: i64) -> Result<Vec<Entry>> {
    rows(conn, &format!("SELECT {ENTRY_COLUMNS} FROM act_chain WHERE seq <= ?1 ORDER BY seq"), [seq], entry_from_row)
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
fn content_now(conn: &Connection, act: ActRef) -> Result<Option<(EntryKind, i64, Value)>> {
    let found = match act {
        ActRef::Approval(id) => {
            qrow(conn, &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"), [id], approval_from_row)
                .optional()?
                .map(|a| (EntryKind::Approval, id.get(), links::approval_content(&a)))
        }
        ActRef::Settlement(id) => qrow(
            conn,
            &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s WHERE s.id = ?1"),
            [id],
            settlement_from_row,
        )
        .optional()?
        .map(|s| (EntryKind::Settlement, id, links::settlement_content(&s))),
        ActRef::Ask(id) => {
            qrow(conn, &format!("SELECT {ASK_COLUMNS} FROM person_requests WHERE id = ?1"), [id], ask_from_row)
                .optional()?
                .map(|a| (links::ask_kind(a.kind), id, links::ask_content(&a)))
        }
    };
    Ok(found)
}

/// Is this act on the chain as recorded, with the chain whole up to its
/// entry (and, for an approval, the entries of its spending), and do the
/// row and the chain agree on whether an approval was spent?
pub(super) fn check(conn: &Connection, act: ActRef) -> Result<()> {
    let (table, row_id) = where_of(act);
    let through = check_row(conn, act)?;
    if let Some((seq, why)) = links::first_broken(&entries_through(conn, through)?) {
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
fn check_row(conn: &Connection, act: ActRef) -> Result<i64> {
    let (table, row_id) = where_of(act);
    let Some((kind, _, now)) = content_now(conn, act)? else {
        return Err(tampered(table, row_id, "is missing"));
    };
    let entry = entry_of(conn, kind, row_id)?.ok_or_else(|| tampered(table, row_id, "is not on the act chain"))?;
    if entry.content != now {
        return Err(tampered(table, row_id, &format!("differs from its act chain entry {}", entry.seq)));
    }
    let mut through = entry.seq;
    if let ActRef::Approval(id) = act {
        through = through.max(check_spending(conn, id)?);
    }
    Ok(through)
}

/// The row's `consumed_by` / `voided_by` against the chain's spending
/// entries; the highest entry seen (0: none).
fn check_spending(conn: &Connection, id: ApprovalId) -> Result<i64> {
    let row = approval(conn, id)?;
    let mut highest = 0;
    for (kind, by, word) in
        [(EntryKind::ApprovalSpent, row.consumed_by, "consumed"), (EntryKind::ApprovalVoided, row.voided_by, "voided")]
    {
        match (entry_of(conn, kind, id.get())?, by) {
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

/// Chain the acts a store held before schema 6, in the order they were
/// recorded (their time, then their table's order), with their spending.
pub(super) fn adopt(conn: &Connection) -> Result<()> {
    let approvals =
        rows(conn, &format!("SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY id"), [], approval_from_row)?;
    let settlements =
        rows(conn, &format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements s ORDER BY s.id"), [], settlement_from_row)?;
    let mut acts: Vec<(i64, u8, i64, EntryKind, Value)> = Vec::new();
    for a in &approvals {
        acts.push((a.at_ms, 0, a.id.get(), EntryKind::Approval, links::approval_content(a)));
    }
    for s in &settlements {
        acts.push((s.at_ms, 1, s.id, EntryKind::Settlement, links::settlement_content(s)));
    }
    acts.sort_by_key(|(at, table, id, _, _)| (*at, *table, *id));
    for (_, _, row_id, kind, content) in acts {
        append(conn, kind, row_id, content)?;
    }
    for a in &approvals {
        if let Some(by) = a.consumed_by {
            append(conn, EntryKind::ApprovalSpent, a.id.get(), links::spent_content(a.id, by))?;
        }
        if let Some(by) = a.voided_by {
            append(conn, EntryKind::ApprovalVoided, a.id.get(), links::spent_content(a.id, by))?;
        }
    }
    Ok(())
}

/// `engine verify`'s act chain check: the first entry or act row that is
/// wrong, named, with its problem.
pub(super) fn first_problem(conn: &Connection) -> Result<Option<(String, String)>> {
    let entries = rows(conn, &format!("SELECT {ENTRY_COLUMNS} FROM act_chain ORDER BY seq"), [], entry_from_row)?;
    if let Some((seq, why)) = links::first_broken(&entries) {
        return Ok(Some((format!("act chain entry {seq}"), why)));
    }
    let ids = |sql: &str| -> Result<Vec<i64>> { rows(conn, sql, [], |r| r.get(0)) };
    let mut acts: Vec<ActRef> = Vec::new();
    acts.extend(ids("SELECT id FROM approvals ORDER BY id")?.into_iter().map(|i| ActRef::Approval(ApprovalId(i))));
    acts.extend(ids("SELECT id FROM settlements ORDER BY id")?.into_iter().map(ActRef::Settlement));
    acts.extend(ids("SELECT id FROM person_requests ORDER BY id")?.into_iter().map(ActRef::Ask));
    for act in acts {
        if let Err(e) = check_row(conn, act) {
            return Ok(Some((
                e.place.unwrap_or_default(),
                e.details["problem"].as_str().unwrap_or(&e.message).to_string(),
            )));
        }
    }
    // An entry whose row is gone (deleted, or never there).
    for e in &entries {
        let act = match e.kind {
            EntryKind::Approval | EntryKind::ApprovalSpent | EntryKind::ApprovalVoided => {
                ActRef::Approval(ApprovalId(e.row_id))
            }
            EntryKind::Settlement => ActRef::Settlement(e.row_id),
            EntryKind::Retry | EntryKind::Repair | EntryKind::Revise => ActRef::Ask(e.row_id),
        };
        if content_now(conn, act)?.is_none() {
            return Ok(Some((
                format!("act chain entry {}", e.seq),
                format!("binds {} row {}, which is missing (deleted outside the engine)", e.kind.table(), e.row_id),
            )));
        }
    }
    Ok(None)
}
