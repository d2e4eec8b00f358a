//! OPERATION_CONFLICT: the same operation id with a different request
//! fingerprint. Operation ids embed the request digest, so this cannot
//! arise from a plan edit; we simulate a ledger whose earlier attempt of
//! the operation carries another request digest, and check that nothing is
//! dispatched.

use serde_json::json;

use super::settle::unknown_op;
use crate::common::*;

const OTHER: &str = "1111111111111111111111111111111111111111111111111111111111111111";

#[test]
fn retry_of_an_operation_recorded_with_another_request_is_refused() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "not on the target"]).expect(0, None);
    // Approved, so only the conflict check stands between retry and dispatch.
    let approval = ws.engine_json(&["approve", &op, "--note", "ok to re-send"]);
    approval.expect(0, None);
    let approval_id = approval.json()["approval"]["approval_id"].as_i64().unwrap();
    assert_eq!(ws.tamper(&format!("UPDATE attempts SET request_digest = '{OTHER}' WHERE operation_id = '{op}'")), 1);

    let out = ws.engine_json(&["retry", &op, "--jobs", "1"]);
    out.expect(2, Some("OPERATION_CONFLICT"));
    assert!(out.stderr.contains("OPERATION_CONFLICT"), "{}", out.describe());
    assert_eq!(rcv.tries_of(&op), vec![1], "delivery log unchanged");
    assert_eq!(ws.attempts().len(), 1, "no intent recorded");
    let consumed: Option<i64> = ws.ledger().approval(approval_id).consumed_by.map(|a| a.get());
    assert_eq!(consumed, None, "the approval is not used up by a refused call");
}

#[test]
fn run_of_an_operation_recorded_with_another_request_is_refused() {
    // Effect `none`, killed after its intent: a restart would re-run it.
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "none", false, json!({}));
    assert!(ws.run_fp("after_intent").killed());
    let op = ws.op_of("T1");
    assert_eq!(ws.tamper(&format!("UPDATE attempts SET request_digest = '{OTHER}' WHERE operation_id = '{op}'")), 1);

    let out = ws.run();
    out.expect(2, Some("OPERATION_CONFLICT"));
    assert!(rcv.deliveries().is_empty(), "nothing dispatched: {:?}", rcv.deliveries());
    let a = ws.attempts();
    assert_eq!(a.len(), 1, "no new intent: {a:?}");
}
