//! Approvals: a person's act, bound to the exact request and plan, consumed
//! by the one call it allows; `requires_approval` gates even the first call.

use serde_json::json;

use super::settle::unknown_op;
use crate::common::*;

fn approvals(ws: &Ws) -> Vec<(i64, Option<i64>)> {
    ws.ledger().approvals().into_iter().map(|a| (a.id.get(), a.consumed_by.map(|c| c.get()))).collect()
}

fn approve(ws: &Ws, op: &str) -> i64 {
    let out = ws.engine_json(&["approve", op, "--note", "a person looked at this exact request"]);
    out.expect(0, None);
    out.json()["approval"]["approval_id"].as_i64().unwrap()
}

#[test]
fn requires_approval_gates_the_first_call() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({"requires_approval": true}));

    let out = ws.run();
    out.expect(4, Some("APPROVAL_REQUIRED"));
    let op = out.json()["awaiting_approval"][0]["operation_id"].as_str().unwrap().to_string();
    assert_eq!(op, ws.op_of("T1"));
    assert_eq!(ws.task_state("T1"), "awaiting_approval");
    assert!(ws.attempts().is_empty(), "no intent without the approval");
    assert!(rcv.deliveries().is_empty(), "nothing delivered");

    let approval = approve(&ws, &op);
    ws.run().expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "delivered once");
    assert_eq!(rcv.deliveries().len(), 1);
    let a = ws.attempts();
    assert_eq!(a.len(), 1);
    assert_eq!(approvals(&ws), vec![(approval, Some(a[0].id))]);
}

#[test]
fn an_approval_is_consumed_by_the_one_call_it_allows() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({"requires_approval": true}));
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let first = approve(&ws, &op);

    // The approved call is answered 503 (no effect): failed, retryable.
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    ws.run().expect(1, None);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].class()), (1, "provider_unavailable"));
    assert_eq!(approvals(&ws), vec![(first, Some(a[0].id))]);

    // A retry now waits again: the approval was used up by try 1.
    for _ in 0..2 {
        let out = ws.engine_json(&["retry", &op, "--jobs", "1"]);
        out.expect(4, Some("APPROVAL_REQUIRED"));
        assert_eq!(ws.task_state("T1"), "awaiting_approval");
        assert_eq!(ws.attempts().len(), 1);
        assert!(rcv.deliveries().is_empty());
    }
    // So does a plain run.
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(ws.attempts().len(), 1);

    // A fresh approval allows exactly the next call.
    let second = approve(&ws, &op);
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(0, None);
    let a = ws.attempts();
    assert_eq!(a.len(), 2);
    assert_eq!(a[1].try_no, 2);
    assert_eq!(approvals(&ws), vec![(first, Some(a[0].id)), (second, Some(a[1].id))]);
    assert_eq!(rcv.tries_of(&op), vec![2]);
}

#[test]
fn a_consumed_approval_does_not_allow_a_second_retry_of_a_settled_not_run_op() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "not on the target"]).expect(0, None);
    let approval = approve(&ws, &op);
    // The approved retry meets a 503 (no effect): retryable again.
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(1, None);
    let a = ws.attempts();
    assert_eq!(a.len(), 2);
    assert_eq!(approvals(&ws), vec![(approval, Some(a[1].id))]);

    let out = ws.engine_json(&["retry", &op, "--jobs", "1"]);
    out.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(ws.attempts().len(), 2, "the used approval allowed nothing more");
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

/// An approval row edited by hand (as if given for another request, then
/// for another plan) is no longer what the act chain holds: refused with
/// `STORE_TAMPERED` before the gate weighs it, nothing dispatched, nothing
/// consumed. Put back as it was, it allows the call. (Which approvals the
/// gate finds stale is `decide::gate`'s unit tests: an edit can no longer
/// make one.)
#[test]
fn an_approval_edited_by_hand_is_refused_until_put_back() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "not on the target"]).expect(0, None);
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(4, Some("APPROVAL_REQUIRED"));
    let approval = approve(&ws, &op);
    let row = ws.ledger().approval(approval);
    let (request_digest, plan_digest) = (row.request_digest.to_string(), row.plan_digest);
    let other = "0".repeat(64);
    for (column, good) in [("request_digest", &request_digest), ("plan_digest", &plan_digest)] {
        ws.tamper(&format!("UPDATE approvals SET {column} = '{other}' WHERE id = {approval}"));
        let out = ws.engine_json(&["retry", &op, "--jobs", "1"]);
        out.expect(2, Some("STORE_TAMPERED"));
        assert!(out.stdout.contains(&format!("approvals row {approval}")), "{}", out.describe());
        assert_eq!(ws.attempts().len(), 1, "nothing dispatched on an edited approval ({column})");
        assert_eq!(approvals(&ws), vec![(approval, None)], "an edited approval is not consumed");
        assert_eq!(rcv.tries_of(&op), vec![1]);
        ws.tamper(&format!("UPDATE approvals SET {column} = '{good}' WHERE id = {approval}"));
    }

    // Restored, it allows the call.
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1, 2]);
}

/// An edited approval beside a real one: the run stops on the edited row
/// (named) rather than pick around it; neither is spent.
#[test]
fn an_edited_approval_stops_the_call_even_beside_a_real_one() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = unknown_op(&rcv);
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "not on the target"]).expect(0, None);
    let stale = approve(&ws, &op);
    ws.tamper(&format!("UPDATE approvals SET plan_digest = '{}' WHERE id = {stale}", "0".repeat(64)));
    let out = ws.engine_json(&["approve", &op, "--note", "a person looked at this exact request"]);
    out.expect(2, Some("STORE_TAMPERED"));
    let out = ws.engine_json(&["retry", &op, "--jobs", "1"]);
    out.expect(2, Some("STORE_TAMPERED"));
    assert!(out.stdout.contains(&format!("approvals row {stale}")), "{}", out.describe());
    assert_eq!(approvals(&ws), vec![(stale, None)]);
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

/// An approval cannot be given ahead of a first call nobody asked about
/// (`NOTHING_TO_APPROVE`); one given while a call waited, whose call then
/// turned out to need none (a revision dropped `requires_approval`), is
/// voided by that call: it cannot be spent later on a repeat nobody was
/// asked about.
#[test]
fn an_approval_not_needed_by_the_call_is_voided_not_kept() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    // T0 fails its validation until `go` exists; T1 (external) waits on it.
    let t0 = json!({"ref": "T0", "title": "gate", "provider": "sh", "effect": "none", "action": {"run": ["true"]},
                    "validations": [{"id": "V0", "run": ["test", "-f", "go"], "expect_exit": 0}]});
    let mut t1 = http_task("T1", "external");
    t1["depends_on"] = json!(["T0"]);
    t1["requires_approval"] = json!(true);
    let providers = json!({"r": http_provider(&rcv, false), "sh": {"kind": "command"}});
    ws.write_plan("plan.json", &plan("docs", providers.clone(), vec![t0.clone(), t1.clone()]));
    ws.run().expect(1, None);
    let op = ws.op_of("T1");
    let ahead = ws.engine_json(&["approve", &op, "--note", "ahead of time"]);
    ahead.expect(2, Some("NOTHING_TO_APPROVE"));
    assert!(ws.ledger().approvals().is_empty(), "nothing recorded");
    ws.write("go", "");
    ws.engine_json(&["repair", "T0"]).expect(4, Some("APPROVAL_REQUIRED"));
    let early = approve(&ws, &op);
    t1["requires_approval"] = json!(false);
    ws.write_plan("plan.json", &plan("docs", providers, vec![t0, t1]));
    // Dropping `requires_approval` takes a gate away: a person approves that too.
    let args = ["revise", "plan.json", "--reason", "T1 needs no approval after all"];
    ws.engine_json(&args).expect(4, Some("LOOSENING_NEEDS_APPROVAL"));
    ws.engine_json(&[&args[..], &["--approve-loosening"]].concat()).expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "T1's first call needed no approval");
    let t1_attempt = ws.attempts_of("T1")[0].id;
    let row = ws.ledger().approval(early);
    let (consumed, voided) = (row.consumed_by.map(|a| a.get()), row.voided_by.map(|a| a.get()));
    assert_eq!((consumed, voided), (None, Some(t1_attempt)), "voided by the call that did not need it");
    assert!(ws.event_kinds().iter().any(|k| k == "approvals_voided"));
}

/// Found by the deterministic simulator (docs/testing.md): an external
/// call whose engine died after its intent, before its dispatch was
/// recorded, may have been sent; a read-back that later finds its effect
/// absent does not make it unsent. The task's next call (here a revision's
/// new request) is a repeat of external work: it waits for a person's
/// approval, as it would had the dispatch been recorded.
#[test]
fn a_try_that_may_have_been_sent_makes_the_next_call_a_repeat_after_an_absent_read_back() {
    let rcv = Receiver::start(&["--observe"]);
    let observe = json!({"url": format!("{}/operations/{{operation_id}}", rcv.base()),
                         "present_if": {"status": [200]}, "absent_if": {"status": [404]}});
    let ws = one_http_task(&rcv, "external", false, json!({"observe": observe.clone()}));
    assert!(ws.run_fp("after_intent").killed());
    let op = ws.op_of("T1");
    // The restart reads it back: absent, so it failed (retryable).
    ws.run().expect(1, None);
    assert_eq!(ws.attempts_of("T1").pop().unwrap().state, "failed");
    assert!(rcv.deliveries().is_empty());
    // A revision gives the task a new request: its next call.
    let mut t = http_task("T1", "external");
    t["action"] = json!({"body": {"doc": "T1", "edition": 2}});
    t["observe"] = observe;
    ws.write_plan("plan.json", &plan("docs", json!({"r": http_provider(&rcv, false)}), vec![t]));
    let out = ws.engine_json(&["revise", "plan.json", "--reason", "a second edition"]);
    out.expect(4, None);
    assert!(rcv.deliveries().is_empty(), "nothing sent without a person's approval:\n{}", out.describe());
    let waiting = out.json()["run"]["awaiting_approval"][0]["operation_id"].as_str().unwrap_or_default().to_string();
    assert!(!waiting.is_empty() && waiting != op, "the new request waits for its approval:\n{}", out.describe());
    ws.verify();
}
