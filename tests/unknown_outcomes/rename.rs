//! Issue 24, hole 4: an operation's identity survives a rename. A revision
//! that drops or renames a task whose operation is unknown is refused
//! (`UNSETTLED_OPERATION`, exit 3) until a person settles it: under another
//! ref the same work would be sent again at once. The receiver's own log
//! counts the deliveries.

use serde_json::json;

use super::settle::unknown_op;
use crate::common::*;

/// The plan of `unknown_op` with task T1 renamed (`extra`: more tasks).
fn renamed(rcv: &Receiver, tasks: Vec<serde_json::Value>) -> serde_json::Value {
    plan("docs", json!({"r": http_provider(rcv, false)}), tasks)
}

#[test]
fn renaming_a_task_whose_operation_is_unknown_is_refused_until_it_is_settled() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    // The same work under a new ref.
    let mut t = http_task("T1-renamed", "external");
    t["action"] = json!({"body": {"doc": "T1"}});
    ws.write_plan("plan.json", &renamed(&rcv, vec![t]));
    let out = ws.engine_json(&["revise", "plan.json", "--reason", "a better name"]);
    out.expect(3, Some("UNSETTLED_OPERATION"));
    let err = out.json();
    let msg = err["error"]["message"].as_str().unwrap_or_default().to_string();
    let settle = format!("engine settle {op} --outcome ok|not_run --note TEXT");
    assert!(msg.contains("task T1 ") && msg.contains(&op) && msg.contains(&settle), "{msg}");
    assert_eq!(err["error"]["details"]["operation_id"], op.as_str(), "{err:#}");
    assert_eq!(err["error"]["details"]["task_ref"], "T1");
    assert_eq!(err["error"]["place"], "T1");
    // Nothing recorded, nothing sent.
    assert_eq!(ws.ledger().revisions().len(), 1);
    assert_eq!(ws.attempts().len(), 1);
    assert_eq!(rcv.tries_of(&op), vec![1], "the renamed task was not sent again");
    assert_eq!(rcv.deliveries().len(), 1);
    // The human form says the same on stderr.
    let text = ws.engine(&["revise", "plan.json", "--reason", "a better name"]);
    assert_eq!(text.code(), 3, "{}", text.describe());
    assert!(text.stderr.contains("UNSETTLED_OPERATION") && text.stderr.contains(&settle), "{}", text.describe());

    // Dropping the task is refused the same way.
    ws.write_plan("plan.json", &renamed(&rcv, vec![http_task("T2", "external")]));
    ws.engine_json(&["revise", "plan.json", "--reason", "drop T1"]).expect(3, Some("UNSETTLED_OPERATION"));

    // Settled, the rename is a revision like any other.
    ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "delivered: the receiver's log"]).expect(0, None);
    let mut t = http_task("T1-renamed", "external");
    t["action"] = json!({"body": {"doc": "T1"}});
    ws.write_plan("plan.json", &renamed(&rcv, vec![t]));
    let out = ws.engine_json(&["revise", "plan.json", "--reason", "a better name", "--no-run"]);
    out.expect(0, None);
    assert_eq!(ws.ledger().revisions().len(), 2);
}
