//! Issue 24, hole 5: `engine retry` reads the target back first when the
//! task declares `observe`. Present: completed from that evidence, nothing
//! sent; absent: sent; inconclusive: nothing sent, the operation stays
//! unknown. The receiver's own log counts the deliveries.

use serde_json::json;

use crate::common::*;

/// An external HTTP task on `rcv` whose read-back is declared: present on
/// 200, absent on 404.
fn observed_task(rcv: &Receiver) -> Ws {
    let observe = json!({"url": format!("{}/operations/{{operation_id}}", rcv.base()),
                         "present_if": {"status": [200]}, "absent_if": {"status": [404]}});
    one_http_task(rcv, "external", false, json!({"observe": observe}))
}

/// Delivered, but the read-back could not tell at the time (the receiver
/// answered 500): unknown; a person then settles it `not_run` (wrongly).
fn delivered_then_settled_not_run(rcv: &Receiver) -> (Ws, String) {
    rcv.control(json!({"mode": "normal", "observe_status": 500}));
    let ws = observed_task(rcv);
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "I think it never arrived"]).expect(0, None);
    (ws, op)
}

/// `engine retry OP`, approving and retrying once more if an approval is
/// asked for (what a person would do).
fn retry(ws: &Ws, op: &str) -> Out {
    let out = ws.engine_json(&["retry", op]);
    if out.code() != 4 {
        return out;
    }
    ws.engine_json(&["approve", op, "--note", "send it again"]).expect(0, None);
    ws.engine_json(&["retry", op])
}

#[test]
fn a_retry_whose_effect_is_there_completes_from_the_read_back_and_sends_nothing() {
    let rcv = Receiver::start(&["--observe"]);
    let (ws, op) = delivered_then_settled_not_run(&rcv);
    rcv.control(json!({"mode": "normal", "observe_status": null}));
    let out = retry(&ws, &op);
    out.expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "the retry did not send again:\n{}", out.describe());
    assert_eq!(ws.task_state("T1"), "succeeded");
    let last = ws.attempts_of("T1").pop().unwrap();
    assert_eq!((last.try_no, last.state.as_str()), (2, "succeeded"), "{last:?}");
    assert_eq!(ws.receipt_of(last.id).unwrap()["source"], "observation");
    assert!(ws.events_of("approval_required").is_empty(), "nothing was sent, so no approval was asked for");
    ws.verify();
}

#[test]
fn a_retry_whose_read_back_cannot_tell_sends_nothing() {
    let rcv = Receiver::start(&["--observe"]);
    let (ws, op) = delivered_then_settled_not_run(&rcv);
    let out = retry(&ws, &op);
    out.expect(3, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "nothing sent:\n{}", out.describe());
    assert_eq!(ws.task_state("T1"), "effect_unknown");
}

#[test]
fn a_retry_whose_effect_is_absent_is_sent() {
    let rcv = Receiver::start(&["--observe"]);
    // The first try failed before its effect (503): absent, then sent.
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    let ws = observed_task(&rcv);
    ws.run().expect(1, None);
    let op = ws.op_of("T1");
    assert!(rcv.tries_of(&op).is_empty());
    retry(&ws, &op).expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![2]);
}
