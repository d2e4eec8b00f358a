//! Killing the engine from outside while the receiver holds its answer:
//! the effect happened (the receiver logged it), the engine never got the
//! answer. A restart must not re-send; it observes where it can, otherwise
//! stops with EXTERNAL_EFFECT_UNKNOWN.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

/// Start `engine run`, wait for the delivery in the receiver's log and for
/// the store to show the attempt dispatched, SIGKILL the engine; return the
/// workspace, the operation id and the killed attempt's id.
fn kill_while_answer_is_held(rcv: &Receiver, observe: bool) -> (Ws, String, i64) {
    let ws = one_http_task(rcv, "external", observe, json!({}));
    let op = ws.digest_op("T1");
    rcv.control(json!({"mode": "delay", "delay_seconds": 5, "times": 1}));
    let mut engine = ws.spawn_run();
    rcv.wait_deliveries(&op, 1);
    let attempt = wait_until(Duration::from_secs(5), "the attempt to be recorded as dispatched", || {
        ws.attempts().into_iter().find(|a| a.state == "dispatched")
    });
    engine.sigkill();
    let killed = engine.wait(RUN_DEADLINE);
    assert!(killed.killed(), "{}", killed.describe());
    assert_eq!(ws.receipt_of(attempt.id), None, "no answer reached the engine");
    assert_eq!(rcv.tries_of(&op), vec![1]);
    (ws, op, attempt.id)
}

#[test]
fn killed_while_answer_held_without_observation_is_unknown() {
    let rcv = Receiver::start(&[]);
    let (ws, op, attempt_id) = kill_while_answer_is_held(&rcv, false);

    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let u = &out.json()["unknown"][0];
    assert_eq!(u["operation_id"], op.as_str());
    assert_eq!(u["task_ref"], "T1");
    assert_eq!(u["reason"], "engine_restarted");
    assert_eq!(u["last_state"], "dispatched");
    let attempts = ws.attempts();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!((attempts[0].id, attempts[0].state.as_str()), (attempt_id, "effect_unknown"));
    assert_eq!(ws.goal_state(), "needs_settlement");
    // The receiver's own log: still the one delivery.
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

#[test]
fn killed_while_answer_held_with_observation_finds_the_effect() {
    let rcv = Receiver::start(&["--observe"]);
    let (ws, op, attempt_id) = kill_while_answer_is_held(&rcv, true);

    let out = ws.run();
    out.expect(0, None);
    let attempts = ws.attempts();
    assert_eq!(attempts.len(), 1, "nothing re-sent: {attempts:?}");
    assert_eq!((attempts[0].id, attempts[0].state.as_str()), (attempt_id, "succeeded"));
    let receipt = ws.receipt_of(attempt_id).expect("the observation is the receipt");
    assert_eq!(receipt["source"], "observation");
    assert!(receipt["evidence"].as_str().unwrap().contains("-> 200"), "{receipt}");
    assert_eq!(ws.evidence(attempt_id).iter().filter(|e| e.1 == "observation").count(), 1);
    assert_eq!(rcv.tries_of(&op), vec![1]);
}
