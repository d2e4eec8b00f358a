//! Answers lost while the engine keeps running (no crash): the connection
//! dropped after the effect, or the engine's deadline fired after dispatch.
//! And the one kind of task a restart may re-send on its own besides effect
//! `none`: a task declared idempotent.

use serde_json::json;

use crate::common::*;

#[test]
fn dropped_answer_is_unknown_without_observation_and_found_with_it() {
    for observe in [false, true] {
        let rcv = Receiver::start(if observe { &["--observe"] } else { &[] });
        let ws = one_http_task(&rcv, "external", observe, json!({}));
        rcv.control(json!({"mode": "drop", "times": 1}));
        let out = ws.run();
        let op = ws.op_of("T1");
        assert_eq!(rcv.tries_of(&op), vec![1], "the effect happened once");
        let a = ws.attempts();
        assert_eq!(a.len(), 1, "never re-sent: {a:?}");
        if observe {
            out.expect(0, None);
            let receipt = ws.receipt_of(a[0].id).unwrap();
            assert_eq!(
                (receipt["source"].as_str(), receipt["lost"].as_str()),
                (Some("observation"), Some("response_lost"))
            );
        } else {
            out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
            let u = &out.json()["unknown"][0];
            assert_eq!(
                (u["operation_id"].as_str(), u["reason"].as_str(), u["last_state"].as_str()),
                (Some(op.as_str()), Some("response_lost"), Some("dispatched"))
            );
            assert_eq!(a[0].state, "effect_unknown");
        }
    }
}

#[test]
fn deadline_after_dispatch_is_unknown() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({"timeout_seconds": 1}));
    rcv.control(json!({"mode": "delay", "delay_seconds": 3, "times": 1}));
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let op = ws.op_of("T1");
    assert_eq!(out.json()["unknown"][0]["reason"], "deadline_after_dispatch");
    assert_eq!(rcv.tries_of(&op), vec![1]);
    assert_eq!(ws.attempts().len(), 1);
}

#[test]
fn idempotent_external_task_is_observed_or_rerun_and_the_receiver_dedupes() {
    for observe in [false, true] {
        let flags: &[&str] = if observe { &["--dedupe", "--observe"] } else { &["--dedupe"] };
        let rcv = Receiver::start(flags);
        let ws = one_http_task(&rcv, "external", observe, json!({"idempotent": true}));
        assert!(ws.run_fp("after_dispatch").killed());
        let op = ws.op_of("T1");
        rcv.wait_deliveries(&op, 1);
        if !observe {
            // SPEC: re-run where the task is declared idempotent — but a
            // repeat of external work still needs a person's approval.
            ws.run().expect(4, Some("APPROVAL_REQUIRED"));
            assert_eq!(rcv.tries_of(&op), vec![1], "nothing re-sent before the approval");
            assert!(ws.engine_json(&["approve", &op, "--note", "idempotent; re-send"]).code() == 0);
        }
        ws.run().expect(0, None);
        let a = ws.attempts();
        if observe {
            // Observation comes before any re-send: found, so nothing re-sent.
            assert_eq!(a.len(), 1, "{a:?}");
            assert_eq!(a[0].state, "succeeded");
        } else {
            // Re-run once approved; the provider deduplicates by
            // Idempotency-Key, so one effect.
            assert_eq!(a.len(), 2, "{a:?}");
            assert_eq!((a[0].state.as_str(), a[1].state.as_str(), a[1].try_no), ("abandoned", "succeeded", 2));
        }
        assert_eq!(rcv.deliveries_of(&op).len(), 1, "one effect in the receiver's log");
    }
}
