//! HTTP read-back against the receiver fixture, declared per task: the
//! delivered document read back with a GET (present), a missing operation
//! record declared absent (retryable), and everything the rule does not
//! declare — a 404 without `absent_if`, a 500 — inconclusive (exit 3).
//! A provider's bare observe URL is present-only now: its 404 is
//! inconclusive unless a rule says otherwise. Deliveries come from the
//! receiver's own log.

use serde_json::{json, Value};

use super::common::*;

fn workspace(rcv: &Receiver, provider_observe: Option<Value>, task_observe: Option<Value>) -> Ws {
    let ws = Ws::new();
    let mut provider = json!({"kind": "http", "endpoint": format!("{}/render", rcv.base())});
    if let Some(o) = provider_observe {
        provider["observe"] = o;
    }
    let mut task = json!({"ref": "T1", "provider": "r", "effect": "external", "action": {"body": {"doc": "T1"}},
                          "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]});
    if let Some(o) = task_observe {
        task["observe"] = o;
    }
    ws.write_plan("plan.json", &plan(json!({"r": provider}), vec![task]));
    ws
}

/// The receiver's record of an operation: 200 with it, 404 without.
fn operations(rcv: &Receiver, absent_if: bool) -> Value {
    let mut r = json!({"url": format!("{}/operations/{{operation_id}}", rcv.base()), "present_if": {"status": [200]}});
    if absent_if {
        r["absent_if"] = json!({"status": [404]});
    }
    r
}

/// (decider, request, answer) of the attempt's read-back evidence.
fn read_back(ws: &Ws, attempt_id: i64) -> (String, Value, String) {
    let ev = ws.evidence(attempt_id);
    let (_, _, data) = ev.iter().find(|e| e.1 == "observation").unwrap_or_else(|| panic!("an observation: {ev:?}"));
    let rb = &data["read_back"];
    (rb["decider"].as_str().unwrap().to_string(), rb["request"].clone(), rb["answer"]["excerpt"].to_string())
}

#[test]
fn a_delivered_document_is_read_back_present_by_its_json() {
    let rcv = Receiver::start(&[]);
    // `GET /render` answers the latest document POSTed there, with its key.
    let rule = json!({"url": format!("{}/render", rcv.base()),
                      "present_if": {"status": [200], "json": {"/key": "{operation_id}", "/body/doc": "T1"}},
                      "absent_if": {"status": [404]}});
    let ws = workspace(&rcv, None, Some(rule));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    ws.run().expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "delivered once");
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"));
    assert_eq!(ws.receipt_of(a[0].id).unwrap()["source"], "observation");
    let (decider, request, answer) = read_back(&ws, a[0].id);
    assert_eq!(decider, "present_if");
    assert_eq!(request, json!({"method": "GET", "url": format!("{}/render", rcv.base())}));
    assert!(answer.contains(&op), "{answer}");
}

#[test]
fn a_missing_record_is_absent_only_where_declared() {
    let rcv = Receiver::start(&["--observe"]);
    // Declared: absent, a retryable failure; nothing was sent.
    let ws = workspace(&rcv, None, Some(operations(&rcv, true)));
    assert!(ws.run_fp("after_intent").killed());
    ws.run().expect(1, None);
    let a = ws.attempts();
    assert_eq!(
        (a[0].state.as_str(), a[0].class(), a[0].rule()),
        ("failed", "provider_unavailable", "observed_effect_absent")
    );
    let op = ws.op_of("T1");
    let (decider, request, answer) = read_back(&ws, a[0].id);
    assert_eq!(decider, "absent_if");
    assert_eq!(request["url"], format!("{}/operations/{op}", rcv.base()));
    assert!(answer.contains("404"), "{answer}");
    assert!(rcv.deliveries_of(&op).is_empty());

    // Not declared, in the task's rule or as the provider's bare URL (the
    // migration: a bare URL no longer calls a 404 absence): inconclusive.
    let bare = json!(format!("{}/operations/{{operation_id}}", rcv.base()));
    for (provider, task) in [(None, Some(operations(&rcv, false))), (Some(bare), None)] {
        let ws = workspace(&rcv, provider, task);
        assert!(ws.run_fp("after_intent").killed());
        let out = ws.run();
        out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
        let a = ws.attempts();
        assert_eq!((a.len(), a[0].state.as_str()), (1, "effect_unknown"));
        let (decider, _, answer) = read_back(&ws, a[0].id);
        assert_eq!(decider, "neither_matched");
        assert!(answer.contains("404"), "{answer}");
        assert!(rcv.deliveries_of(&ws.op_of("T1")).is_empty(), "never sent");
    }
}

#[test]
fn a_server_error_is_inconclusive_even_with_absence_declared() {
    let rcv = Receiver::start(&["--observe"]);
    rcv.control(json!({"mode": "normal", "observe_status": 500}));
    let ws = workspace(&rcv, None, Some(operations(&rcv, true)));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let a = ws.attempts();
    assert_eq!(a[0].state, "effect_unknown");
    assert_eq!(read_back(&ws, a[0].id).0, "neither_matched");
    assert_eq!(rcv.tries_of(&op), vec![1], "never sent again");
    // Once the receiver answers again, a person can look it up; the engine
    // does not settle an unknown on its own.
    rcv.control(json!({"mode": "normal", "observe_status": null}));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
}
