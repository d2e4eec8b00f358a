//! The act chain: an append-only hash chain over a person's acts, so that a
//! row inserted or edited by anything but the engine is detected.
//!
//! Entry `n` binds one act (an approval, a settlement, a retry, repair or
//! revision a person asked for) or one spending of an approval (consumed by
//! a call, or voided) to the entries before it:
//! `hash_n = BLAKE3-keyed("engine 2026-12 act chain v1"; hash_{n-1}, n, kind,
//! row id, canonical content)`, fields length-delimited (`digest`). The
//! content is the act's row as recorded, its row id included, so an edited
//! row no longer matches its entry and an inserted one has none.
//!
//! What it does not do: without a secret, a process that can write the
//! store can also rebuild the chain. The sandbox keeps provider processes
//! from writing the store (the protection); the chain is the detection of
//! anything else that did. Here: building contents and checking links
//! (pure), and in `walk` the verdicts over a store's rows — one walk for
//! both backends, which only read rows (`ChainRows`) and append.

use serde_json::{json, Value};

mod walk;
pub use walk::{adoption, check, first_problem, tampered, unvouched, ChainRows};

use super::acts::{ApprovalRecord, AskRecord, SettlementRecord};
use crate::digest::{canonical_json, Digester, Kind};
use crate::ids::{ApprovalId, AttemptId};

/// The `prev` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What an entry binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    Approval,
    Settlement,
    Retry,
    Repair,
    Revise,
    /// An approval spent by the call whose intent consumed it.
    ApprovalSpent,
    /// An approval voided by a call that did not need it.
    ApprovalVoided,
    /// A person's answer to what an MCP server asked (`engine answer`).
    Answer,
    /// A person's hold, release and rerun (issue 42).
    Hold,
    Release,
    Rerun,
    /// A person's `engine run --reuse-across-tool-change` (issue 43).
    ReuseAcrossToolChange,
}

impl EntryKind {
    pub const ALL: &'static [EntryKind] = &[
        EntryKind::Approval,
        EntryKind::Settlement,
        EntryKind::Retry,
        EntryKind::Repair,
        EntryKind::Revise,
        EntryKind::ApprovalSpent,
        EntryKind::ApprovalVoided,
        EntryKind::Answer,
        EntryKind::Hold,
        EntryKind::Release,
        EntryKind::Rerun,
        EntryKind::ReuseAcrossToolChange,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Approval => "approval",
            EntryKind::Settlement => "settlement",
            EntryKind::Retry => "retry",
            EntryKind::Repair => "repair",
            EntryKind::Revise => "revise",
            EntryKind::Answer => "answer",
            EntryKind::Hold => "hold",
            EntryKind::Release => "release",
            EntryKind::Rerun => "rerun",
            EntryKind::ReuseAcrossToolChange => "reuse_across_tool_change",
            EntryKind::ApprovalSpent => "approval_spent",
            EntryKind::ApprovalVoided => "approval_voided",
        }
    }

    pub fn parse(s: &str) -> Option<EntryKind> {
        EntryKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }

    /// The table whose row an entry of this kind binds, as errors name it.
    pub fn table(self) -> &'static str {
        match self {
            EntryKind::Approval | EntryKind::ApprovalSpent | EntryKind::ApprovalVoided => "approvals",
            EntryKind::Settlement => "settlements",
            EntryKind::Retry
            | EntryKind::Repair
            | EntryKind::Revise
            | EntryKind::Answer
            | EntryKind::Hold
            | EntryKind::Release
            | EntryKind::Rerun
            | EntryKind::ReuseAcrossToolChange => "person_requests",
        }
    }
}

/// One entry as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub seq: i64,
    pub kind: EntryKind,
    pub row_id: i64,
    pub content: Value,
    pub prev: String,
    pub hash: String,
}

/// The hash of entry `seq` after `prev`.
pub fn link(prev: &str, seq: i64, kind: EntryKind, row_id: i64, content: &Value) -> String {
    Digester::new(Kind::ActChain)
        .str("prev", prev)
        .str("seq", &seq.to_string())
        .str("kind", kind.as_str())
        .str("row_id", &row_id.to_string())
        .str("content", &canonical_json(content))
        .finish()
}

/// A new entry after `last` (`None`: the chain is empty).
pub fn next(last: Option<&Entry>, kind: EntryKind, row_id: i64, content: Value) -> Entry {
    let (seq, prev) = match last {
        Some(e) => (e.seq + 1, e.hash.clone()),
        None => (1, GENESIS.to_string()),
    };
    let hash = link(&prev, seq, kind, row_id, &content);
    Entry { seq, kind, row_id, content, prev, hash }
}

/// The first entry (in order) that does not follow from the one before:
/// a gap in the sequence, a `prev` that is not the previous hash, or a
/// hash that is not its own. Entries must be given in `seq` order from 1.
pub fn first_broken(entries: &[Entry]) -> Option<(i64, String)> {
    let mut prev = GENESIS.to_string();
    for (i, e) in entries.iter().enumerate() {
        let expected_seq = i as i64 + 1;
        if e.seq != expected_seq {
            return Some((e.seq, format!("comes where entry {expected_seq} should: the chain has a gap")));
        }
        if e.prev != prev {
            return Some((e.seq, "does not follow the entry before it (its `prev` is another hash)".into()));
        }
        if link(&e.prev, e.seq, e.kind, e.row_id, &e.content) != e.hash {
            return Some((e.seq, "does not hash to its recorded hash (its content or hash was changed)".into()));
        }
        prev = e.hash.clone();
    }
    None
}

/// An approval's content: what the person approved (the request, the
/// plan and its revision, and the call's cost), who, when. An approval
/// recorded before approvals bound the cost has no `cost_micros`, so its
/// entry, made then, still matches.
pub fn approval_content(a: &ApprovalRecord) -> Value {
    let mut content = json!({
        "id": a.id, "operation_id": a.operation_id, "goal_id": a.goal_id, "revision": a.revision,
        "task_ref": a.task_ref, "request_digest": a.request_digest, "plan_digest": a.plan_digest,
        "actor": a.actor, "uid": a.uid, "user": a.user, "note": a.note, "at_ms": a.at_ms,
    });
    if let Some(cost) = a.cost {
        content["cost_micros"] = json!(cost.micros());
    }
    // An approval's end is what the person gave: on the chain, so no row
    // edit can make it last longer (none on approvals without one).
    if let Some(at) = a.expires_at_ms {
        content["expires_at_ms"] = json!(at);
    }
    content
}

/// A settlement's content.
pub fn settlement_content(s: &SettlementRecord) -> Value {
    json!({
        "id": s.id, "attempt_id": s.attempt_id, "operation_id": s.operation_id, "outcome": s.outcome.as_str(),
        "actor": s.actor, "uid": s.uid, "user": s.user, "note": s.note, "evidence_blob": s.evidence_blob,
        "at_ms": s.at_ms,
    })
}

/// A retry, repair or revision a person asked for.
pub fn ask_content(a: &AskRecord) -> Value {
    json!({
        "id": a.id, "kind": a.kind.as_str(), "goal_id": a.goal_id, "revision": a.revision, "task_ref": a.task_ref,
        "operation_id": a.operation_id, "actor": a.actor, "uid": a.uid, "user": a.user, "data": a.data,
        "at_ms": a.at_ms,
    })
}

/// An approval's spending: which attempt consumed or voided it.
pub fn spent_content(approval: ApprovalId, by: AttemptId) -> Value {
    json!({"approval_id": approval, "attempt_id": by})
}

/// The entry kind of an ask.
pub fn ask_kind(kind: super::acts::AskKind) -> EntryKind {
    match kind {
        super::acts::AskKind::Retry => EntryKind::Retry,
        super::acts::AskKind::Repair => EntryKind::Repair,
        super::acts::AskKind::Revise => EntryKind::Revise,
        super::acts::AskKind::Answer => EntryKind::Answer,
        super::acts::AskKind::Hold => EntryKind::Hold,
        super::acts::AskKind::Release => EntryKind::Release,
        super::acts::AskKind::Rerun => EntryKind::Rerun,
        super::acts::AskKind::ReuseAcrossToolChange => EntryKind::ReuseAcrossToolChange,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: i64) -> Vec<Entry> {
        let mut out: Vec<Entry> = Vec::new();
        for i in 1..=n {
            let e = next(out.last(), EntryKind::Approval, i, json!({"id": i, "note": format!("n{i}")}));
            out.push(e);
        }
        out
    }

    #[test]
    fn a_chain_built_by_next_is_whole() {
        let c = chain(5);
        assert_eq!(c[0].prev, GENESIS);
        assert_eq!(c.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        assert_eq!(first_broken(&c), None);
        assert_eq!(first_broken(&[]), None);
    }

    #[test]
    fn an_edited_content_breaks_its_own_entry() {
        let mut c = chain(4);
        c[2].content["note"] = json!("forged");
        let (seq, why) = first_broken(&c).unwrap();
        assert_eq!(seq, 3);
        assert!(why.contains("does not hash"), "{why}");
    }

    #[test]
    fn a_rebuilt_entry_breaks_the_next_one() {
        let mut c = chain(4);
        c[1].content["note"] = json!("forged");
        c[1].hash = link(&c[1].prev, 2, c[1].kind, c[1].row_id, &c[1].content);
        assert_eq!(first_broken(&c).map(|(s, _)| s), Some(3));
    }

    #[test]
    fn a_removed_or_inserted_entry_leaves_a_gap_or_a_bad_link() {
        let mut c = chain(4);
        c.remove(1);
        assert_eq!(first_broken(&c).map(|(s, _)| s), Some(3));
        let mut c = chain(3);
        let mut extra = c[2].clone();
        extra.seq = 4;
        extra.prev = "f".repeat(64);
        c.push(extra);
        assert_eq!(first_broken(&c).map(|(s, _)| s), Some(4));
    }

    #[test]
    fn every_field_of_the_link_matters() {
        let base = link(GENESIS, 1, EntryKind::Approval, 1, &json!({"a": 1}));
        assert_ne!(base, link(&"1".repeat(64), 1, EntryKind::Approval, 1, &json!({"a": 1})));
        assert_ne!(base, link(GENESIS, 2, EntryKind::Approval, 1, &json!({"a": 1})));
        assert_ne!(base, link(GENESIS, 1, EntryKind::Settlement, 1, &json!({"a": 1})));
        assert_ne!(base, link(GENESIS, 1, EntryKind::Approval, 2, &json!({"a": 1})));
        assert_ne!(base, link(GENESIS, 1, EntryKind::Approval, 1, &json!({"a": 2})));
        // Canonical: key order does not matter.
        let v: Value = serde_json::from_str(r#"{"b": 1, "a": 2}"#).unwrap();
        let w: Value = serde_json::from_str(r#"{"a": 2, "b": 1}"#).unwrap();
        assert_eq!(link(GENESIS, 1, EntryKind::Retry, 1, &v), link(GENESIS, 1, EntryKind::Retry, 1, &w));
    }

    #[test]
    fn kinds_have_stable_words() {
        for k in EntryKind::ALL {
            assert_eq!(EntryKind::parse(k.as_str()), Some(*k));
        }
        assert_eq!(EntryKind::parse("nope"), None);
    }
}
