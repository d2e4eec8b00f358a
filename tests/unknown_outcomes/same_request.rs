//! Issue 36, case 4: a request is known by its content. An HTTP `send`
//! whose answer was lost is unknown; the identical body to the same
//! endpoint, under another task ref (a revision adds `send_again`) or
//! another goal in the same store, is not sent while it stays unknown:
//! `SAME_REQUEST_UNSETTLED` (exit 3), naming the first operation and its
//! settle command. Once a person settles it, it goes. The receiver's own
//! log counts the deliveries.

use serde_json::{json, Value};

use crate::common::*;

/// A task on provider `r` that sends `{"doc": "T1"}`, as T1 does.
fn same_body(task_ref: &str) -> Value {
    let mut t = http_task(task_ref, "external");
    t["action"] = json!({"body": {"doc": "T1"}});
    t
}

/// The one call a run (or the run of a revise) did not send, checked to
/// wait on `op`.
fn blocked_by(out: &Out, op: &str) -> Value {
    let whole = out.json();
    let j = if whole["run"].is_object() { &whole["run"] } else { &whole };
    assert_eq!(j["code"], "SAME_REQUEST_UNSETTLED", "{}", out.describe());
    let list = j["same_request_unsettled"].as_array().cloned().unwrap_or_default();
    assert_eq!(list.len(), 1, "{}", out.describe());
    assert_eq!(list[0]["first"]["operation_id"], op, "{}", out.describe());
    list[0].clone()
}

#[test]
fn the_same_request_under_another_ref_or_goal_waits_for_the_unknown_one() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    rcv.control(json!({"mode": "drop", "times": 1}));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let op = ws.op_of("T1");
    assert_eq!(rcv.tries_of(&op), vec![1]);

    // A revision adds the identical request under a new ref, and another
    // request beside it (the control: it goes).
    let tasks = vec![http_task("T1", "external"), same_body("send_again"), http_task("other", "external")];
    ws.write_plan("plan.json", &plan("docs", json!({"r": http_provider(&rcv, false)}), tasks));
    let out = ws.engine_json(&["revise", "plan.json", "--reason", "send it again"]);
    out.expect(3, None);
    assert_eq!(rcv.deliveries().len(), 2, "T1's one try and `other`:\n{}", out.describe());
    let b = blocked_by(&out, &op);
    assert_eq!((b["task_ref"].as_str(), b["first"]["task_ref"].as_str()), (Some("send_again"), Some("T1")));
    assert!(b["settle"].as_str().unwrap_or_default().starts_with(&format!("engine settle {op} --outcome")), "{b:#}");
    assert_eq!(ws.task_state("send_again"), "blocked");
    let text = ws.engine(&["run", "plan.json"]);
    assert_eq!(text.code(), 3, "{}", text.describe());
    assert!(
        text.stdout.contains("send_again") && text.stdout.contains(&op) && text.stdout.contains("engine settle"),
        "{}",
        text.describe()
    );
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains(&format!("engine settle {op}")), "{}", status.describe());

    // Another goal in the same store, the same request under its own ref.
    let other = plan("docs-again", json!({"r": http_provider(&rcv, false)}), vec![same_body("send")]);
    ws.write_plan("again.json", &other);
    let out = ws.engine_json(&["run", "again.json"]);
    out.expect(3, Some("SAME_REQUEST_UNSETTLED"));
    let b = blocked_by(&out, &op);
    assert_eq!(b["first"]["goal_id"], "docs", "{b:#}");
    assert_eq!(rcv.deliveries().len(), 2, "nothing more sent:\n{}", out.describe());

    // A person's settlement is what lets the same request go again.
    ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "the receiver logged it"]).expect(0, None);
    ws.engine_json(&["run", "again.json"]).expect(0, None);
    assert_eq!(rcv.deliveries().len(), 3);
    ws.verify();
}
