//! The act chain's verdicts over a store: is one act on the chain as
//! recorded (checked before the engine acts on it), and what is the first
//! wrong entry or act row (`engine verify`). One walk for both backends:
//! a backend only reads its rows (`ChainRows`), so SQLite and PostgreSQL
//! give the same verdicts, word for word.

use serde_json::{json, Value};

use super::{Entry, EntryKind};
use crate::error::{Code, Error, Result};
use crate::ids::ApprovalId;
use crate::store::acts::{ActRef, ApprovalRecord, AskRecord, SettlementRecord, Tampered};

/// What the walk reads from a store, as it is recorded now.
pub trait ChainRows {
    /// The entry binding `row_id` of `kind`, if any.
    fn entry_of(&self, kind: EntryKind, row_id: i64) -> Result<Option<Entry>>;
    /// The entries with `seq <= through` (all of them: `None`), in `seq` order.
    fn entries(&self, through: Option<i64>) -> Result<Vec<Entry>>;
    fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>>;
    fn settlement(&self, id: i64) -> Result<Option<SettlementRecord>>;
    fn ask(&self, id: i64) -> Result<Option<AskRecord>>;
    /// The ids of one table's rows (`approvals`, `settlements`,
    /// `person_requests`), in id order.
    fn ids_of(&self, table: &str) -> Result<Vec<i64>>;

    /// Every act's row: approvals, then settlements, then asks, each by id.
    fn acts(&self) -> Result<Vec<ActRef>> {
        let mut acts: Vec<ActRef> = Vec::new();
        acts.extend(self.ids_of("approvals")?.into_iter().map(|i| ActRef::Approval(ApprovalId(i))));
        acts.extend(self.ids_of("settlements")?.into_iter().map(ActRef::Settlement));
        acts.extend(self.ids_of("person_requests")?.into_iter().map(ActRef::Ask));
        Ok(acts)
    }

    /// An approval's row inside the transaction that just wrote it (to
    /// chain it).
    fn written_approval(&self, id: ApprovalId) -> Result<ApprovalRecord> {
        written(self.approval(id)?, "approval", id.get())
    }

    /// A settlement's row inside the transaction that just wrote it.
    fn written_settlement(&self, id: i64) -> Result<SettlementRecord> {
        written(self.settlement(id)?, "settlement", id)
    }

    /// A person's request's row inside the transaction that just wrote it.
    fn written_ask(&self, id: i64) -> Result<AskRecord> {
        written(self.ask(id)?, "person request", id)
    }
}

/// A row its own transaction just wrote: there, or the store is broken.
fn written<T>(found: Option<T>, what: &str, id: i64) -> Result<T> {
    found.ok_or_else(|| Error::internal(format!("{what} {id} vanished in its own transaction")))
}

/// A row the chain does not vouch for: `STORE_TAMPERED`, naming it.
pub fn tampered(table: &str, row_id: i64, problem: &str) -> Error {
    let row = format!("{table} row {row_id}");
    Error::new(
        Code::StoreTampered,
        format!("{row} {problem}: it was written by something other than the engine; nothing acts on it (`engine verify` checks the whole store)"),
    )
    .at(row.clone())
    .with_details(json!({"table": table, "row_id": row_id, "problem": problem}))
}

fn where_of(act: ActRef) -> (&'static str, i64) {
    match act {
        ActRef::Approval(id) => ("approvals", id.get()),
        ActRef::Settlement(id) => ("settlements", id),
        ActRef::Ask(id) => ("person_requests", id),
    }
}

/// The act as its row holds it now: the content its entry must carry.
fn content_now(rows: &dyn ChainRows, act: ActRef) -> Result<Option<(EntryKind, Value)>> {
    Ok(match act {
        ActRef::Approval(id) => rows.approval(id)?.map(|a| (EntryKind::Approval, super::approval_content(&a))),
        ActRef::Settlement(id) => rows.settlement(id)?.map(|s| (EntryKind::Settlement, super::settlement_content(&s))),
        ActRef::Ask(id) => rows.ask(id)?.map(|a| (super::ask_kind(a.kind), super::ask_content(&a))),
    })
}

/// Which of `acts` the chain does not vouch for: for each, the verdict
/// `check` would give, in one walk of the chain (the views mark every act
/// a person reads, so one walk per act would be quadratic).
pub fn unvouched(rows: &dyn ChainRows, acts: &[ActRef]) -> Result<Vec<Tampered>> {
    let broken = super::first_broken(&rows.entries(None)?);
    let mut out = Vec::new();
    for &act in acts {
        let (table, row_id) = where_of(act);
        let refused = match check_row(rows, act) {
            Err(e) if e.code == Code::StoreTampered => e,
            Err(e) => return Err(e),
            Ok(through) => match &broken {
                Some((seq, why)) if *seq <= through => {
                    tampered(table, row_id, &format!("is on an act chain whose entry {seq} {why}"))
                }
                _ => continue,
            },
        };
        out.push(Tampered::of(act, &refused));
    }
    Ok(out)
}

/// Is this act on the chain as recorded, with the chain whole up to its
/// entry (and, for an approval, the entries of its spending), and do the
/// row and the chain agree on whether an approval was spent?
pub fn check(rows: &dyn ChainRows, act: ActRef) -> Result<()> {
    let (table, row_id) = where_of(act);
    let through = check_row(rows, act).map_err(|e| unreadable(act, e))?;
    if let Some((seq, why)) = super::first_broken(&rows.entries(Some(through))?) {
        return Err(tampered(table, row_id, &format!("is on an act chain whose entry {seq} {why}")));
    }
    Ok(())
}

/// An act's row (or its entry) that does not read as the engine wrote it
/// (a value its column cannot hold: `STORE_CORRUPT` from the backend) was
/// written outside the engine too: tampering, naming the row.
fn unreadable(act: ActRef, e: Error) -> Error {
    if e.code != Code::StoreCorrupt {
        return e;
    }
    let (table, row_id) = where_of(act);
    tampered(table, row_id, &format!("does not read as the engine wrote it ({})", e.message))
}

/// The row against its entry (and an approval's spending against theirs);
/// the highest entry it involves.
fn check_row(rows: &dyn ChainRows, act: ActRef) -> Result<i64> {
    let (table, row_id) = where_of(act);
    let Some((kind, now)) = content_now(rows, act)? else {
        return Err(tampered(table, row_id, "is missing"));
    };
    let entry = rows.entry_of(kind, row_id)?.ok_or_else(|| tampered(table, row_id, "is not on the act chain"))?;
    if entry.content != now {
        return Err(tampered(table, row_id, &format!("differs from its act chain entry {}", entry.seq)));
    }
    let mut through = entry.seq;
    if let ActRef::Approval(id) = act {
        through = through.max(check_spending(rows, id)?);
    }
    Ok(through)
}

/// The row's `consumed_by` / `voided_by` against the chain's spending
/// entries; the highest entry seen (0: none).
fn check_spending(rows: &dyn ChainRows, id: ApprovalId) -> Result<i64> {
    let row = rows.approval(id)?.ok_or_else(|| tampered("approvals", id.get(), "is missing"))?;
    let mut highest = 0;
    for (kind, by, word) in
        [(EntryKind::ApprovalSpent, row.consumed_by, "consumed"), (EntryKind::ApprovalVoided, row.voided_by, "voided")]
    {
        match (rows.entry_of(kind, id.get())?, by) {
            (None, None) => {}
            (Some(e), Some(by)) if e.content == super::spent_content(id, by) => highest = highest.max(e.seq),
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

/// `engine verify`'s act chain check: the first entry or act row that is
/// wrong, named, with its problem.
pub fn first_problem(rows: &dyn ChainRows) -> Result<Option<(String, String)>> {
    let entries = rows.entries(None)?;
    if let Some((seq, why)) = super::first_broken(&entries) {
        return Ok(Some((format!("act chain entry {seq}"), why)));
    }
    for act in rows.acts()? {
        if let Err(e) = check_row(rows, act).map_err(|e| unreadable(act, e)) {
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
            EntryKind::Retry
            | EntryKind::Repair
            | EntryKind::Revise
            | EntryKind::Answer
            | EntryKind::Hold
            | EntryKind::Release
            | EntryKind::Rerun
            | EntryKind::ReuseAcrossToolChange => ActRef::Ask(e.row_id),
        };
        if content_now(rows, act)?.is_none() {
            return Ok(Some((
                format!("act chain entry {}", e.seq),
                format!("binds {} row {}, which is missing (deleted outside the engine)", e.kind.table(), e.row_id),
            )));
        }
    }
    Ok(None)
}

/// The entries that chain the acts a store held before it had the chain,
/// in the order they were recorded (their time, then their table's order),
/// then their spending: `(kind, row id, content)`, for the backend to append.
pub fn adoption(approvals: &[ApprovalRecord], settlements: &[SettlementRecord]) -> Vec<(EntryKind, i64, Value)> {
    let mut acts: Vec<(i64, u8, i64, EntryKind, Value)> = Vec::new();
    for a in approvals {
        acts.push((a.at_ms, 0, a.id.get(), EntryKind::Approval, super::approval_content(a)));
    }
    for s in settlements {
        acts.push((s.at_ms, 1, s.id, EntryKind::Settlement, super::settlement_content(s)));
    }
    acts.sort_by_key(|(at, table, id, _, _)| (*at, *table, *id));
    let mut out: Vec<(EntryKind, i64, Value)> = acts.into_iter().map(|(_, _, id, k, c)| (k, id, c)).collect();
    for a in approvals {
        if let Some(by) = a.consumed_by {
            out.push((EntryKind::ApprovalSpent, a.id.get(), super::spent_content(a.id, by)));
        }
        if let Some(by) = a.voided_by {
            out.push((EntryKind::ApprovalVoided, a.id.get(), super::spent_content(a.id, by)));
        }
    }
    out
}
