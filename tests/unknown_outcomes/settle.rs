//! `engine settle`: a person's word on an unknown outcome. `ok` lets the
//! task go on to its validations; `not_run` leaves the goal unproven until
//! an approved `engine retry` re-sends the same operation as the next try.
//! Refused settlements write nothing.

use serde_json::json;

use crate::common::*;

/// An external HTTP task killed after dispatch, restarted without
/// observation: exit 3, the operation unknown. Returns (workspace, op).
pub fn unknown_op(rcv: &Receiver) -> (Ws, String) {
    let ws = one_http_task(rcv, "external", false, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let op = out.json()["unknown"][0]["operation_id"].as_str().expect("one unknown op").to_string();
    assert_eq!(rcv.wait_deliveries(&op, 1).len(), 1);
    (ws, op)
}

#[test]
fn settle_ok_lets_the_task_validate_and_the_goal_be_satisfied() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    let a1 = ws.attempts()[0].clone();

    let settled = ws.engine_json(&[
        "settle",
        &op,
        "--outcome",
        "ok",
        "--note",
        "the receiver's log shows the delivery",
        "--actor",
        "alice",
    ]);
    settled.expect(0, None);
    assert_eq!(settled.json()["settlement"]["operation_id"], op.as_str());
    // Settling runs nothing: no new attempt, no check, no delivery.
    assert_eq!(ws.attempts().len(), 1);
    assert_eq!(ws.ledger().check_results().len(), 0);
    assert_eq!(rcv.tries_of(&op), vec![1]);
    let settlements = ws.ledger().settlements();
    assert_eq!(settlements.len(), 1, "{settlements:?}");
    let s = &settlements[0];
    let (outcome, actor, note, attempt_id) =
        (s.outcome.to_string(), s.actor.clone(), s.note.clone(), s.attempt_id.get());
    assert_eq!(
        (outcome.as_str(), actor.as_str(), note.as_str(), attempt_id),
        ("ok", "alice", "the receiver's log shows the delivery", a1.id)
    );
    assert_eq!(ws.attempts()[0].state, "settled_ok");

    // The next run goes on to the task's validations and the acceptance.
    let out = ws.run();
    out.expect(0, None);
    let j = out.json();
    assert_eq!(j["goal_state"], "satisfied");
    assert!(j["unknown"].as_array().unwrap().is_empty());
    assert_eq!(ws.task_state("T1"), "succeeded");
    let validated = ws
        .ledger()
        .check_results()
        .iter()
        .filter(|c| c.attempt_id.map(|a| a.get()) == Some(a1.id) && c.check_id == "V1" && c.passed)
        .count();
    assert_eq!(validated, 1, "V1 judged the settled attempt");
    // The attempt keeps saying a person settled it (the engine verified nothing).
    assert_eq!(ws.attempts()[0].state, "settled_ok");
    assert_eq!(ws.attempts().len(), 1);
    assert_eq!(rcv.tries_of(&op), vec![1], "settling ok re-sends nothing");
    // The summary says the task rests on a person's word, never folds it
    // into "every task succeeded".
    assert_eq!(j["tasks"][0]["settled_by_person"], true, "{j:#}");
    let text = ws.engine(&["run", "plan.json"]);
    assert_eq!(text.code(), 0, "{}", text.describe());
    assert!(
        text.stdout.contains("T1 completed only on a person's settlement `settled_ok` (its effect was not verified"),
        "{}",
        text.describe()
    );
    assert!(!text.stdout.contains("every task succeeded"), "{}", text.describe());
    // The report document (and so its HTML page) says the same.
    let report = ws.engine_json(&["report", "--json", "--no-timestamp"]);
    report.expect(0, None);
    let claims = report.json()["goal"]["claims"].as_str().unwrap_or_default().to_string();
    assert!(claims.starts_with("T1 completed only on a person's settlement `settled_ok`"), "{claims}");
    let not = report.json()["goal"]["does_not_claim"].as_str().unwrap_or_default().to_string();
    assert!(not.contains("verified the effect of T1"), "{not}");
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

#[test]
fn settle_not_run_then_retry_needs_approval_and_sends_try_two() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);

    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "the target has no record"]).expect(0, None);
    assert_eq!(ws.attempts()[0].state, "settled_not_run");

    // A plain run neither re-sends nor claims the goal.
    let out = ws.run();
    out.expect(3, Some("GOAL_OUTCOME_UNPROVEN"));
    assert_eq!(out.json()["settled_not_run"], json!([op]));
    assert_ne!(ws.goal_state(), "satisfied");
    assert_eq!(ws.attempts().len(), 1);

    // Retry without an approval waits.
    let out = ws.engine_json(&["retry", &op, "--jobs", "1"]);
    out.expect(4, Some("APPROVAL_REQUIRED"));
    let j = out.json();
    assert_eq!(j["awaiting_approval"][0]["operation_id"], op.as_str());
    assert_eq!(ws.task_state("T1"), "awaiting_approval");
    assert_eq!(ws.attempts().len(), 1, "nothing dispatched without the approval");
    assert_eq!(rcv.tries_of(&op), vec![1]);

    // With a person's approval: the same Idempotency-Key, Engine-Try 2.
    let approved = ws.engine_json(&["approve", &op, "--note", "re-send: the target confirmed it has nothing"]);
    approved.expect(0, None);
    let approval_id = approved.json()["approval"]["approval_id"].as_i64().unwrap();
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(0, None);
    let all = rcv.deliveries();
    assert_eq!(all.len(), 2, "exactly two deliveries in all: {all:?}");
    assert!(all.iter().all(|d| d["key"] == op.as_str()), "same Idempotency-Key: {all:?}");
    assert_eq!(rcv.tries_of(&op), vec![1, 2]);
    let attempts = ws.attempts();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (attempts[1].operation_id.as_str(), attempts[1].try_no, attempts[1].kind.as_str()),
        (op.as_str(), 2, "retry")
    );
    assert_eq!(attempts[1].state, "succeeded");
    let consumed_by = ws.ledger().approval(approval_id).consumed_by.map(|a| a.get());
    assert_eq!(consumed_by, Some(attempts[1].id), "the approval was consumed by the call it allowed");
    assert_eq!(ws.goal_state(), "satisfied");
}

#[test]
fn refused_settlements_write_nothing() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    let snapshot = ws.ledger().snapshot();

    // An empty (or blank) note.
    for note in ["", "   "] {
        let out = ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", note]);
        out.expect(2, Some("SETTLEMENT_INVALID"));
        assert!(out.stderr.contains("SETTLEMENT_INVALID"), "{}", out.describe());
        assert_eq!(ws.ledger().snapshot(), snapshot, "a refused settlement wrote something (note {note:?})");
    }
    // An operation this store does not know.
    ws.engine_json(&["settle", "op_000000000000000000000000", "--outcome", "not_run", "--note", "n"])
        .expect(2, Some("SETTLEMENT_INVALID"));
    assert_eq!(ws.ledger().snapshot(), snapshot);

    // Once settled, the operation is no longer `effect_unknown`.
    ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "seen in the receiver"]).expect(0, None);
    let settled = ws.ledger().snapshot();
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "changed my mind"])
        .expect(2, Some("SETTLEMENT_INVALID"));
    assert_eq!(ws.ledger().snapshot(), settled);
    assert_eq!(ws.ledger().settlements().len(), 1);

    // An operation that succeeded.
    let rcv2 = Receiver::start(&[]);
    let ws2 = one_http_task(&rcv2, "external", false, json!({}));
    ws2.run().expect(0, None);
    let op2 = ws2.op_of("T1");
    let before = ws2.ledger().snapshot();
    ws2.engine_json(&["settle", &op2, "--outcome", "ok", "--note", "n"]).expect(2, Some("SETTLEMENT_INVALID"));
    assert_eq!(ws2.ledger().snapshot(), before);
    assert_eq!(ws2.attempts()[0].state, "succeeded");
}

/// Found by the soak: an external command task with declared outputs,
/// killed after its dispatch, settled ok by a person, then validated: the
/// task stands on the settled attempt, its outputs are kept for it, and
/// `engine verify` agrees (it once refused outputs of a settled attempt).
#[test]
fn a_settled_ok_task_keeps_its_declared_outputs_and_verify_passes() {
    use crate::helpers::{plan, sh_task, validation};
    let ws = Ws::new();
    let mut t1 = sh_task("T1", "mkdir -p out && echo made > out/t1.txt");
    t1["effect"] = json!("external");
    t1["outputs"] = json!(["out/t1.txt"]);
    t1["validations"] = json!([validation("V1", "grep -q made out/t1.txt")]);
    ws.write_plan("plan.json", &plan("settled-outputs", vec![t1]));
    assert!(ws.run_fp("after_dispatch").killed());
    // The person looks at the world: the effect is there.
    ws.write("out/t1.txt", "made\n");
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let op = out.json()["unknown"][0]["operation_id"].as_str().expect("one unknown op").to_string();
    ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "out/t1.txt is there"]).expect(0, None);
    ws.run().expect(0, None);
    assert_eq!(ws.attempts()[0].state, "settled_ok");
    assert_eq!(ws.task_state("T1"), "succeeded");
    let kept = ws.events_of("outputs_recorded");
    assert_eq!(kept.len(), 1, "the outputs are kept for the settled attempt: {kept:#?}");
    ws.verify();
}
