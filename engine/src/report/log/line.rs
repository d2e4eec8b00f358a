//! One event of `engine log` in words, for a person: pure (the attempts'
//! numbers are looked up by the caller and handed in).
//!
//! `seq  time  who  what: details` — who is the task and its attempt as the
//! task counts them (or `goal`, or `store`), what is the event's kind in
//! words, and its data as `key value` pairs: digests cut short, long text
//! cut, nothing empty, every attempt the data names numbered as its task
//! counts it.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::clock::utc;
use crate::ids::AttemptId;
use crate::store::events::{EventKind, EventRecord};

/// How long a string value may be before it is cut (`…`).
const VALUE_CHARS_MAX: usize = 160;
/// How many items of a list are shown before `…`.
const LIST_ITEMS_MAX: usize = 8;
/// How deep nested data is shown before `{…}`.
const DEPTH_MAX: usize = 4;
/// The characters a digest is cut to (as `engine status` shows digests).
const DIGEST_CHARS: usize = 16;
/// The width the who column is padded to, so most lines' kinds align.
const WHO_WIDTH: usize = 12;

/// The keys whose value, anywhere in an event's data, is a ledger attempt
/// id: shown as `attempt N`, the task's own numbering.
const ATTEMPT_KEYS: [&str; 4] = ["attempt_id", "failed_attempt", "waits_on_attempt", "repair_of"];

/// Attempt ids to their numbers among their tasks' attempts.
pub type Numbers = HashMap<AttemptId, i64>;

/// Every attempt an event names, once each: its own and those in its data.
pub fn attempts_named(e: &EventRecord) -> Vec<AttemptId> {
    fn walk(v: &Value, out: &mut Vec<AttemptId>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x.as_i64() {
                        Some(id) if ATTEMPT_KEYS.contains(&k.as_str()) => {
                            if !out.contains(&AttemptId(id)) {
                                out.push(AttemptId(id));
                            }
                        }
                        _ => walk(x, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out: Vec<AttemptId> = e.attempt_id.into_iter().collect();
    walk(&e.data, &mut out);
    out
}

/// One event for a person: `seq  time  [goal rN]  who  what: details`.
pub fn line(e: &EventRecord, numbers: &Numbers, show_goal: bool) -> String {
    let mut who = Vec::new();
    if show_goal {
        if let Some(g) = &e.goal_id {
            who.push(match e.revision {
                Some(r) => format!("{g} r{r}"),
                None => g.to_string(),
            });
        }
    }
    who.push(match (&e.task_ref, e.attempt_id) {
        (Some(t), Some(id)) => format!("{t} {}", attempt(numbers, id.0)),
        (Some(t), None) => t.clone(),
        (None, _) if e.goal_id.is_some() => "goal".to_string(),
        (None, _) => "store".to_string(),
    });
    let who = who.join("  ");
    let data = numbered(&e.data, numbers);
    format!("{:>6}  {}  {who:<WHO_WIDTH$}  {}", e.seq.0, utc(e.at_ms), what(e.kind, &data))
}

/// `attempt N`; a ledger id the ledger could not number is said as one.
fn attempt(numbers: &Numbers, id: i64) -> String {
    match numbers.get(&AttemptId(id)) {
        Some(n) => format!("attempt {n}"),
        None => format!("ledger attempt {id}"),
    }
}

/// `data` with every attempt id in it (`ATTEMPT_KEYS`) replaced by words,
/// except the event's own (top-level `attempt_id`: the who column says it).
fn numbered(data: &Value, numbers: &Numbers) -> Value {
    fn walk(v: &Value, numbers: &Numbers, top: bool) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !(top && *k == "attempt_id"))
                    .map(|(k, x)| match x.as_i64() {
                        Some(id) if ATTEMPT_KEYS.contains(&k.as_str()) => (k.clone(), attempt(numbers, id).into()),
                        _ => (k.clone(), walk(x, numbers, false)),
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|x| walk(x, numbers, false)).collect()),
            other => other.clone(),
        }
    }
    walk(data, numbers, true)
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
/// text cut, nothing empty (an empty list is `none`).
fn details(data: &Value) -> String {
    match data {
        Value::Object(m) => pairs(m, 0),
        Value::Null => String::new(),
        Value::Array(a) if a.is_empty() => "none".to_string(),
        other => value(other, 0),
    }
}

fn pairs(m: &Map<String, Value>, depth: usize) -> String {
    m.iter()
        .filter(|(k, v)| !is_empty(v) && !matches!(k.as_str(), "goal_id" | "task_ref"))
        .map(|(k, v)| match (v, name(k)) {
            (Value::Bool(true), name) => name.into_owned(),
            // A task's detail (`waits on a, b`): its own pairs, no braces.
            (Value::Object(m), name) if name.is_empty() => pairs(m, depth + 1),
            (Value::Array(items), name) if k == "waits_on" => format!("{name} {}", words(items, depth + 1)),
            // A read-back's summary, without the answer it quotes (`explain` shows it).
            (Value::String(s), name) if k == "read_back" => {
                format!("{name} {}", crate::report::words::read_back_summary(s))
            }
            (v, name) if name.is_empty() => value(v, depth + 1),
            (v, name) => format!("{name} {}", value(v, depth + 1)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a person reads for a key: a few renamed, the rest with spaces for
/// underscores; empty where the value says it all.
fn name(key: &str) -> Cow<'_, str> {
    Cow::Borrowed(match key {
        "operation_id" => "operation",
        "request_digest" => "request",
        "plan_digest" => "plan",
        "goal_contract_digest" => "goal contract",
        "evidence_ids" => "evidence",
        "stdout_blob" => "stdout",
        "stderr_blob" => "stderr",
        "duration_ms" => "ms",
        "failed_attempt" => "failed",
        "waits_on_attempt" => "waits on",
        "repair_of" => "repair of",
        "detail" | "attempt_id" => "",
        k if k.contains('_') => return Cow::Owned(k.replace('_', " ")),
        k => k,
    })
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

/// A list as words: `a, b and 3 more`.
fn words(items: &[Value], depth: usize) -> String {
    let mut shown: Vec<String> = items.iter().take(LIST_ITEMS_MAX).map(|x| value(x, depth)).collect();
    if items.len() > LIST_ITEMS_MAX {
        shown.push(format!("and {} more", items.len() - LIST_ITEMS_MAX));
    }
    shown.join(", ")
}

/// A BLAKE3 digest: 64 hex digits.
fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(VALUE_CHARS_MAX) {
        Some((i, _)) => format!("{}…", s.get(..i).unwrap_or(s)),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ids::{GoalId, Revision, Seq};

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
        assert_eq!(details(&json!({"goal_state": "failed", "exit_code": 1})), "goal state failed, exit code 1");
        assert_eq!(details(&json!([])), "none");
        let blocked = json!({"state": "blocked", "detail": {"waits_on": ["transform (pending)", "load (failed)"]}});
        assert_eq!(details(&blocked), "state blocked, waits on transform (pending), load (failed)");
    }

    #[test]
    fn every_attempt_an_event_names_is_numbered_as_its_task_counts_it() {
        // Ledger ids 3 and 7 are this task's attempts 1 and 2; 9 is unknown.
        let e = EventRecord {
            seq: Seq(12),
            at_ms: 0,
            goal_id: Some(GoalId::new("g".to_string())),
            revision: Some(Revision(1)),
            task_ref: Some("A".into()),
            attempt_id: Some(AttemptId(7)),
            kind: EventKind::RepairRequested,
            data: json!({"failed_attempt": 3, "attempt_id": 7,
                "decisions": [{"task_ref": "B", "provenance": {"revision": 1, "attempt_id": 9}}]}),
        };
        assert_eq!(attempts_named(&e), [AttemptId(7), AttemptId(3), AttemptId(9)]);
        let numbers: Numbers = [(AttemptId(3), 1), (AttemptId(7), 2)].into();
        assert_eq!(
            line(&e, &numbers, false),
            "    12  1970-01-01 00:00:00  A attempt 2   repair requested: failed attempt 1, \
             decisions [{provenance {revision 1, ledger attempt 9}}]"
        );
        let shown = line(&e, &numbers, true);
        assert!(shown.contains("  g r1  A attempt 2  repair requested"), "{shown}");
    }
}
