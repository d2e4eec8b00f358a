//! `engine log [--follow] [--goal ID]`: the event log in ledger order,
//! and the act rows the act chain does not vouch for (`STORE_TAMPERED`):
//! an event announcing such an act is marked on its line.

use serde_json::json;

use super::Output;
use crate::clock::utc;
use crate::error::Result;
use crate::ids::{GoalId, Seq};
use crate::limits::{LOG_FOLLOW_POLL, LOG_PAGE_EVENTS};
use crate::store::acts::{ActRef, Tampered};
use crate::store::events::{EventKind, EventRecord};
use crate::store::Store;

/// The act an event announces, by its row.
fn act_of(e: &EventRecord) -> Option<ActRef> {
    let id = |key: &str| e.data.get(key).and_then(serde_json::Value::as_i64);
    match e.kind {
        EventKind::ApprovalRecorded => id("approval_id").map(|i| ActRef::Approval(crate::ids::ApprovalId(i))),
        EventKind::RetryRequested | EventKind::RepairRequested => id("ask_id").map(ActRef::Ask),
        _ => None,
    }
}

/// An event's line, marked when the act it announces is not vouched for.
fn marked_line(e: &EventRecord, tampered: &[Tampered]) -> String {
    let mut s = line(e);
    if let Some(t) = act_of(e).and_then(|act| tampered.iter().find(|t| t.act == act)) {
        s.push_str(&format!("  [{}]", t.words()));
    }
    s
}

fn line(e: &EventRecord) -> String {
    let mut s = format!("{:>6}  {}  {:<24}", e.seq, utc(e.at_ms), e.kind);
    if let Some(g) = &e.goal_id {
        s.push_str(&format!(" goal={g}"));
    }
    if let Some(r) = e.revision {
        s.push_str(&format!(" r{r}"));
    }
    if let Some(t) = &e.task_ref {
        s.push_str(&format!(" task={t}"));
    }
    if let Some(a) = e.attempt_id {
        s.push_str(&format!(" attempt={a}"));
    }
    if !e.data.is_null() && e.data != json!({}) {
        s.push_str(&format!(" {}", e.data));
    }
    s
}

/// One page of events after `cursor`: every goal's, or one goal's.
fn page(store: &Store, goal: Option<&GoalId>, cursor: Seq) -> Result<Vec<EventRecord>> {
    match goal {
        Some(g) => store.read().goal_events_since(g, cursor, LOG_PAGE_EVENTS),
        None => store.read().events_since(cursor, LOG_PAGE_EVENTS),
    }
}

pub fn render(store: &Store, after: Seq, goal: Option<&GoalId>, follow: bool, as_json: bool) -> Result<Output> {
    if let Some(g) = goal {
        // A misspelt id would otherwise follow nothing, forever.
        store.read().goal_or_latest(Some(g))?;
    }
    let tampered = store.read().unvouched_acts(goal)?;
    if !follow {
        let mut all = Vec::new();
        let mut cursor = after;
        loop {
            let page = page(store, goal, cursor)?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            all.extend(page);
        }
        let mut text: String = all.iter().map(|e| marked_line(e, &tampered) + "\n").collect();
        for t in &tampered {
            text.push_str(&format!("{}\n", t.words()));
        }
        return Ok(Output { text, json: json!({"events": all, "store_tampered": tampered}), exit_code: 0 });
    }
    // Said once, on stderr, so the followed stream stays one event a line.
    for t in &tampered {
        eprintln!("{}", t.words());
    }
    // --follow: print as events arrive, one JSON object per line with --json.
    let mut cursor = after;
    loop {
        for e in page(store, goal, cursor)? {
            cursor = e.seq;
            let text = if as_json {
                super::escape::json_line(&e)
            } else {
                super::escape::for_terminal(&marked_line(&e, &tampered)).into_owned()
            };
            if !super::emit(&format!("{text}\n")) {
                // The reader is gone: stop following.
                return Ok(Output { text: String::new(), json: json!(null), exit_code: 0 });
            }
        }
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}
