//! `engine log [--follow] [--goal ID] [--task REF]`: the event log in
//! ledger order. For a person, one line per event — its sequence number,
//! time, task and attempt (numbered as the task counts them), and what
//! happened in words, digests cut short; `--json` keeps the raw events.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::Output;
use crate::clock::utc;
use crate::error::Result;
use crate::ids::{AttemptId, GoalId, Revision, Seq};
use crate::limits::{LOG_FOLLOW_POLL, LOG_PAGE_EVENTS};
use crate::store::events::{EventKind, EventRecord};
use crate::store::{LedgerRead, Store};

/// How long a string value may be before it is cut (`…`).
const VALUE_CHARS_MAX: usize = 160;
/// How many items of a list are shown before `…`.
const LIST_ITEMS_MAX: usize = 8;
/// How deep nested data is shown before `{…}`.
const DEPTH_MAX: usize = 4;
/// The characters a digest is cut to (as `engine status` shows digests).
const DIGEST_CHARS: usize = 16;

/// Which events a person asked for.
pub struct Which {
    pub after: Seq,
    pub goal: Option<GoalId>,
    pub task_ref: Option<String>,
    pub follow: bool,
}

/// Attempt ids to the numbers their tasks count them by, read once per
/// task (and again when a new attempt shows up in `--follow`).
#[derive(Default)]
struct Numbers {
    of_task: HashMap<(GoalId, String), Vec<AttemptId>>,
}

impl Numbers {
    fn number(&mut self, l: &dyn LedgerRead, e: &EventRecord) -> Result<Option<i64>> {
        let (Some(goal), Some(task), Some(id)) = (&e.goal_id, &e.task_ref, e.attempt_id) else { return Ok(None) };
        let key = (goal.clone(), task.clone());
        let known = self.of_task.get(&key).is_some_and(|ids| ids.contains(&id));
        if !known {
            let ids = l.attempts_of_task(goal, task)?.into_iter().map(|a| a.id).collect();
            self.of_task.insert(key.clone(), ids);
        }
        Ok(self.of_task.get(&key).and_then(|ids| ids.iter().position(|x| *x == id)).map(|i| i as i64 + 1))
    }
}

/// One event for a person: `seq  time  [goal r]  task attempt N  what: details`.
fn line(e: &EventRecord, number: Option<i64>, show_goal: bool) -> String {
    let mut who = Vec::new();
    if show_goal {
        if let Some(g) = &e.goal_id {
            who.push(match e.revision {
                Some(r) => format!("{g} r{r}"),
                None => g.to_string(),
            });
        }
    }
    match (&e.task_ref, number) {
        (Some(t), Some(n)) => who.push(format!("{t} attempt {n}")),
        (Some(t), None) => who.push(t.clone()),
        (None, _) if e.goal_id.is_some() => who.push("goal".to_string()),
        (None, _) => who.push("store".to_string()),
    }
    format!("{:>6}  {}  {}  {}", e.seq.0, utc(e.at_ms), who.join("  "), what(e.kind, &e.data))
}

/// What happened: the kind in words, then its data. The few events a
/// person reads most get a sentence of their own.
fn what(kind: EventKind, data: &Value) -> String {
    let s = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or("?");
    let (head, shown) = match kind {
        EventKind::AttemptFailed => (format!("failed: {} by rule {}", s("class"), s("rule")), vec!["evidence_ids"]),
        EventKind::AttemptSucceeded => ("succeeded".to_string(), vec!["validations_passed", "checkpoint"]),
        EventKind::Dispatched => ("dispatched".to_string(), vec!["detail"]),
        k => return with_details(k.as_str().replace('_', " "), &details(data)),
    };
    let rest: Map<String, Value> =
        shown.iter().filter_map(|k| data.get(*k).map(|v| ((*k).to_string(), v.clone()))).collect();
    with_details(head, &pairs(&rest, 0))
}

/// `head: details`, or `head, details` when the head has its colon.
fn with_details(head: String, details: &str) -> String {
    match (details.is_empty(), head.contains(':')) {
        (true, _) => head,
        (false, true) => format!("{head}, {details}"),
        (false, false) => format!("{head}: {details}"),
    }
}

/// An event's data in words: `key value` pairs, digests cut short, long
/// text cut, nothing empty.
fn details(data: &Value) -> String {
    match data {
        Value::Object(m) => pairs(m, 0),
        Value::Null => String::new(),
        other => value(other, 0),
    }
}

fn pairs(m: &Map<String, Value>, depth: usize) -> String {
    m.iter()
        .filter(|(k, v)| !is_empty(v) && !matches!(k.as_str(), "goal_id" | "task_ref" | "attempt_id"))
        .map(|(k, v)| match v {
            Value::Bool(true) => name(k).to_string(),
            v if name(k).is_empty() => value(v, depth + 1),
            v => format!("{} {}", name(k), value(v, depth + 1)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a person reads for a key.
fn name(key: &str) -> &str {
    match key {
        "operation_id" => "operation",
        "request_digest" => "request",
        "plan_digest" => "plan",
        "goal_contract_digest" => "goal contract",
        "evidence_ids" => "evidence",
        "stdout_blob" => "stdout",
        "stderr_blob" => "stderr",
        "duration_ms" => "ms",
        "validations_passed" => "validations passed",
        "detail" => "",
        k => k,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) | Value::Bool(true) => false,
    }
}

fn value(v: &Value, depth: usize) -> String {
    match v {
        Value::String(s) if is_digest(s) => format!("{}…", s.get(..DIGEST_CHARS).unwrap_or(s)),
        Value::String(s) => clip(s),
        Value::Array(items) => {
            let mut shown: Vec<String> = items.iter().take(LIST_ITEMS_MAX).map(|x| value(x, depth + 1)).collect();
            if items.len() > LIST_ITEMS_MAX {
                shown.push(format!("… ({} in all)", items.len()));
            }
            format!("[{}]", shown.join(", "))
        }
        // An exit status: `code 1`, `signal 9`.
        Value::Object(m) if m.get("kind").and_then(Value::as_str).is_some() && m.len() == 2 => {
            m.iter().filter(|(k, _)| *k != "kind").map(|(k, x)| format!("{k} {}", value(x, depth + 1))).collect()
        }
        Value::Object(m) if depth < DEPTH_MAX => format!("{{{}}}", pairs(m, depth)),
        Value::Object(_) => "{…}".to_string(),
        other => other.to_string(),
    }
}

/// A BLAKE3 digest (64 hex digits), possibly with a prefix a kind of id
/// carries.
fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(VALUE_CHARS_MAX) {
        Some((i, _)) => format!("{}…", s.get(..i).unwrap_or(s)),
        None => s.to_string(),
    }
}

/// One page of events after `cursor`: every goal's, or one goal's.
fn page(store: &Store, goal: Option<&GoalId>, cursor: Seq) -> Result<Vec<EventRecord>> {
    match goal {
        Some(g) => store.read().goal_events_since(g, cursor, LOG_PAGE_EVENTS),
        None => store.read().events_since(cursor, LOG_PAGE_EVENTS),
    }
}

/// The goal a `--task` belongs to (`--goal`, else the latest), checked to
/// have had a task of that ref in some revision.
fn task_goal(store: &Store, goal: Option<&GoalId>, task_ref: &str) -> Result<GoalId> {
    let read = store.read();
    let g = read.goal_or_latest(goal)?;
    for r in 1..=g.active_revision.get() {
        if read.tasks(&g.id, Revision(r))?.iter().any(|t| t.task_ref == task_ref) {
            return Ok(g.id);
        }
    }
    let known = read.tasks(&g.id, g.active_revision)?;
    Err(crate::commands::no_task(&g.id, g.active_revision, task_ref, known.iter().map(|t| t.task_ref.as_str())))
}

pub fn render(store: &Store, which: &Which, as_json: bool) -> Result<Output> {
    let goal = match (&which.task_ref, &which.goal) {
        (Some(t), g) => Some(task_goal(store, g.as_ref(), t)?),
        (None, Some(g)) => {
            // A misspelt id would otherwise follow nothing, forever.
            store.read().goal_or_latest(Some(g))?;
            Some(g.clone())
        }
        (None, None) => None,
    };
    let keep = |e: &EventRecord| which.task_ref.as_ref().is_none_or(|t| e.task_ref.as_ref() == Some(t));
    let show_goal = goal.is_none() && store.read().goal_count()? > 1;
    let mut numbers = Numbers::default();
    if !which.follow {
        let mut all = Vec::new();
        let mut cursor = which.after;
        loop {
            let page = page(store, goal.as_ref(), cursor)?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            all.extend(page.into_iter().filter(keep));
        }
        let mut text = String::new();
        if !as_json {
            let read = store.read();
            for e in &all {
                text.push_str(&line(e, numbers.number(&*read, e)?, show_goal));
                text.push('\n');
            }
        }
        return Ok(Output { text, json: json!({"events": all}), exit_code: 0 });
    }
    // --follow: print as events arrive, one JSON object per line with --json.
    let mut cursor = which.after;
    loop {
        for e in page(store, goal.as_ref(), cursor)? {
            cursor = e.seq;
            if !keep(&e) {
                continue;
            }
            let text = if as_json {
                serde_json::to_string(&e).map_err(|e| crate::error::Error::internal(format!("event JSON: {e}")))?
            } else {
                let number = numbers.number(&*store.read(), &e)?;
                super::paint::text(&super::escape::for_terminal(&line(&e, number, show_goal)))
            };
            if !super::emit(&format!("{text}\n")) {
                // The reader is gone: stop following.
                return Ok(Output { text: String::new(), json: json!(null), exit_code: 0 });
            }
        }
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_reads_as_words_with_digests_cut() {
        let digest = "4e55d18097224d8632fbb1742194b16f590912c16f540c5a1342b7f86a4fa46a";
        let data = json!({"operation_id": "op_1", "try": 1, "request_digest": digest, "approval_consumed": null});
        assert_eq!(details(&data), "operation op_1, try 1, request 4e55d18097224d86…");
        let receipt = json!({"exit": {"kind": "code", "code": 1}, "timed_out": false, "duration_ms": 8});
        assert_eq!(details(&receipt), "exit code 1, ms 8");
        let failed = json!({"class": "validation_failed", "rule": "r", "evidence_ids": [1, 2], "claims": []});
        assert_eq!(details(&failed), "class validation_failed, rule r, evidence [1, 2]");
        let long = "x".repeat(500);
        assert_eq!(details(&json!({"note": long})).chars().count(), "note ".len() + VALUE_CHARS_MAX + 1);
        let many: Vec<i64> = (0..20).collect();
        assert!(details(&json!({"ids": many})).ends_with("… (20 in all)]"));
        assert_eq!(details(&json!({"deep": {"a": {"b": {"c": {"d": 1}}}}})), "deep {a {b {c {…}}}}");
    }
}
