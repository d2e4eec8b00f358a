//! Call-site rules added after review: Retry-After is honoured by a retry,
//! a refused call is logged, an in-doubt attempt of a superseded revision
//! is never re-sent and blocks the goal, plan-listed hosts only.

use std::time::Instant;

use serde_json::json;

use crate::common::*;

#[test]
fn retry_waits_out_retry_after() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "none", false, json!({}));
    rcv.control(json!({"mode": "status", "status": 503, "retry_after": 2, "times": 1}));
    let first = ws.run();
    first.expect(1, None);
    let op = ws.op_of("T1");
    let a = &ws.attempts_of("T1")[0];
    assert_eq!(a.class(), "provider_unavailable");
    let started = Instant::now();
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(0, None);
    // The 503 came at most a moment ago: the retry must not go out before
    // the provider's 2 s are up.
    assert!(started.elapsed().as_millis() >= 1000, "retry went out after {:?}", started.elapsed());
    assert_eq!(rcv.tries_of(&op), vec![2], "the 503 was not a delivery; the retry was");
}

#[test]
fn a_refused_call_is_logged_and_sends_nothing() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    ws.run().expect(1, None);
    let op = ws.op_of("T1");
    // Tamper: the operation id now seems to name another request.
    ws.tamper(&format!("UPDATE attempts SET request_digest = 'feed' WHERE operation_id = '{op}'"));
    ws.engine_json(&["approve", &op, "--note", "retry it"]).expect(0, None);
    ws.engine_json(&["retry", &op]).expect(2, Some("OPERATION_CONFLICT"));
    assert!(ws.event_kinds().iter().any(|k| k == "call_refused"), "{:?}", ws.event_kinds());
    assert!(rcv.deliveries_of(&op).is_empty());
}

#[test]
fn an_in_doubt_attempt_of_a_superseded_revision_is_never_resent() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    ws.run_fp("after_dispatch");
    let op = ws.op_of("T1");
    assert_eq!(rcv.wait_deliveries(&op, 1).len(), 1);
    // A person revises the plan before any run reconciles the crash.
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path("plan.json")).unwrap()).unwrap();
    plan["tasks"][0]["title"] = json!("deliver T1, renamed");
    ws.write_plan("plan.json", &plan);
    let out = ws.engine_json(&["revise", "plan.json", "--reason", "rename", "--no-run"]);
    // The revise itself takes over the dead lease; reconciliation is a run's job.
    out.expect(0, None);
    let run = ws.run();
    run.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let first = &ws.attempts().into_iter().find(|a| a.id == 1).unwrap();
    assert_eq!(first.state, "effect_unknown");
    assert!(ws.event_kinds().iter().any(|k| k == "superseded_attempt_reconciled"));
    // The old operation was not sent again by the new revision's run
    // (the new revision's task is its own operation: same request, so
    // the same id, and it is gated as a repeat of external work).
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

#[test]
fn only_loopback_or_listed_hosts() {
    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &plan(
            "docs",
            json!({"r": {"kind": "http", "endpoint": "http://example.com/render"}}),
            vec![http_task("T1", "external")],
        ),
    );
    ws.engine_json(&["check", "plan.json"]).expect(2, Some("PLAN_INVALID"));
    ws.write_plan(
        "plan.json",
        &plan(
            "docs",
            json!({"r": {"kind": "http", "endpoint": "http://example.com/render", "hosts": ["example.com"]}}),
            vec![http_task("T1", "external")],
        ),
    );
    ws.engine_json(&["check", "plan.json"]).expect(0, None);
}

/// A paid call left in doubt by a crash is a repeat when re-run: it needs a
/// person's approval, and the first try still counts against the budgets.
#[test]
fn a_paid_call_left_in_doubt_is_not_resent_without_approval_and_still_counts() {
    let ws = Ws::new();
    let task = json!({"ref": "T1", "title": "paid", "provider": "sh", "effect": "none", "cost": 1,
                      "action": {"run": ["sh", "-c", "echo paid >> paid.log"]}, "may_change": ["paid.log"]});
    let mut p = plan("paid", json!({"sh": {"kind": "command"}}), vec![task]);
    p["budgets"] = json!({"max_cost": 5, "max_provider_calls": 10});
    ws.write_plan("plan.json", &p);
    // Killed once the command has ended but before its receipt is written:
    // the attempt is `dispatched` with no receipt, as after `after_dispatch`,
    // but the paid effect surely happened (at `after_dispatch` the command
    // dies with the engine, PR_SET_PDEATHSIG, perhaps before its `echo`).
    assert!(ws.run_fp("after_receipt").killed());
    let paid = || std::fs::read_to_string(ws.path("paid.log")).unwrap_or_default().lines().count();
    wait_until(std::time::Duration::from_secs(5), "the first paid call", || (paid() == 1).then_some(()));
    let out = ws.run();
    out.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(paid(), 1, "not re-sent without a person");
    let status = ws.engine_json(&["status", "--json"]).json();
    assert_eq!(status["budgets"]["max_cost"]["used"], json!(1.0), "{status:#}");
    assert_eq!(status["budgets"]["max_provider_calls"]["used"], json!(1), "{status:#}");
    let op = ws.op_of("T1");
    ws.engine_json(&["approve", &op, "--note", "re-send the paid call once"]).expect(0, None);
    ws.run().expect(0, None);
    assert_eq!(paid(), 2);
    let status = ws.engine_json(&["status", "--json"]).json();
    assert_eq!(status["budgets"]["max_cost"]["used"], json!(2.0), "{status:#}");
}

/// An external command cut by the engine's deadline is unknown in the same
/// transaction as its receipt: a crash right after that commit must not
/// leave it looking like an ordinary receipt to validate.
#[test]
fn a_timed_out_external_command_stays_unknown_across_a_crash() {
    let ws = Ws::new();
    let task = json!({"ref": "T1", "title": "slow send", "provider": "sh", "effect": "external", "timeout_seconds": 1,
                      "action": {"run": ["sh", "-c", "echo sent >> sent.log; sleep 5"]},
                      "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]});
    ws.write_plan("plan.json", &plan("slow", json!({"sh": {"kind": "command"}}), vec![task]));
    assert!(ws.run_fp("after_receipt_commit").killed());
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(out.json()["unknown"][0]["reason"], "deadline_after_dispatch", "{}", out.describe());
    assert_eq!(ws.task_state("T1"), "effect_unknown");
    assert_eq!(ws.ledger().check_results().len(), 0, "no validation judged an unknown effect");
}

/// A revision that keeps a request keeps its operation id: while the
/// earlier try is unknown, the new revision sends nothing; once a person
/// settles that try, the new revision goes on.
#[test]
fn a_revision_never_sends_a_new_try_over_an_unknown_one() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "local", false, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path("plan.json")).unwrap()).unwrap();
    plan["goal"]["statement"] = json!("deliver the documents, revised");
    ws.write_plan("plan.json", &plan);
    ws.engine_json(&["revise", "plan.json", "--reason", "new statement", "--no-run"]).expect(0, None);
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(rcv.tries_of(&op), vec![1], "no second try while the first is unknown");
    assert!(ws.event_kinds().iter().any(|k| k == "call_refused"));
    let settled = ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "saw it on the receiver"]);
    settled.expect(0, None);
    let next = settled.json()["settlement"]["next"].as_str().unwrap().to_string();
    assert!(next.contains("no longer active"), "the hint says nothing more runs for the old try: {next}");
    ws.run().expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1, 2], "the new revision's own try, after the settlement");
}

/// The exit code names the first stop; the text names every other one too.
#[test]
fn every_stop_is_named_not_only_the_first() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    let t2 = json!({"ref": "T2", "title": "fails", "provider": "sh", "effect": "none", "action": {"run": ["sh", "-c", "exit 1"]}});
    ws.write_plan(
        "plan.json",
        &plan(
            "docs",
            json!({"r": http_provider(&rcv, false), "sh": {"kind": "command"}}),
            vec![http_task("T1", "external"), t2],
        ),
    );
    rcv.control(json!({"mode": "drop", "times": 1}));
    let out = ws.command(&["run", "plan.json"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("EXTERNAL_EFFECT_UNKNOWN"), "{text}");
    assert!(text.contains("also: failed task: T2"), "{text}");
}

/// A superseded revision's in-doubt attempt is observed with that
/// revision's provider: found present, it has a receipt (from observation),
/// and it is still never re-sent.
#[test]
fn a_superseded_in_doubt_attempt_is_observed_first() {
    let rcv = Receiver::start(&["--observe"]);
    let ws = one_http_task(&rcv, "external", true, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path("plan.json")).unwrap()).unwrap();
    plan["tasks"][0]["title"] = json!("deliver T1, renamed");
    ws.write_plan("plan.json", &plan);
    ws.engine_json(&["revise", "plan.json", "--reason", "rename", "--no-run"]).expect(0, None);
    // The new revision's call of the same request is a repeat: it waits for a person.
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let first = ws.attempts().into_iter().find(|a| a.id == 1).unwrap();
    assert_eq!(first.state, "receipt_recorded", "observed present: a receipt from observation");
    assert!(ws.receipt_of(1).is_some());
    assert_eq!(rcv.tries_of(&op), vec![1], "never re-sent");
}
