//! `engine log [--follow] [--goal ID]`: the event log in ledger order.

use serde_json::json;

use super::Output;
use crate::clock::utc;
use crate::error::Result;
use crate::ids::{GoalId, Seq};
use crate::limits::{LOG_FOLLOW_POLL, LOG_PAGE_EVENTS};
use crate::store::events::EventRecord;
use crate::store::Store;

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
    if !follow {
        let mut all = Vec::new();
        let mut cursor = after;
        loop {
            let page = page(store, goal, cursor)?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            all.extend(page);
        }
        let text = all.iter().map(|e| line(e) + "\n").collect();
        return Ok(Output { text, json: json!({"events": all}), exit_code: 0 });
    }
    // --follow: print as events arrive, one JSON object per line with --json.
    let mut cursor = after;
    loop {
        for e in page(store, goal, cursor)? {
            cursor = e.seq;
            let text = if as_json {
                super::escape::json_line(&e)
            } else {
                super::escape::for_terminal(&line(&e)).into_owned()
            };
            if !super::emit(&format!("{text}\n")) {
                // The reader is gone: stop following.
                return Ok(Output { text: String::new(), json: json!(null), exit_code: 0 });
            }
        }
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}
