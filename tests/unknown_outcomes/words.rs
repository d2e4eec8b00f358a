//! Issue 36, case 7: the words say no more than was verified. A crash
//! between the intent and the dispatch is its own rule
//! (`intent_without_dispatch`: not sent, as far as the ledger shows); a
//! call ended at its deadline has no receipt; an approval a revision made
//! stale is called stale; a call waiting on an approval shows its cost
//! where a person decides, and `approve --expect-cost` refuses another.

use serde_json::json;

use crate::common::*;

#[test]
fn a_crash_between_intent_and_dispatch_is_its_own_rule() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    assert!(ws.run_fp("after_intent").killed());
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let op = ws.op_of("T1");
    assert!(rcv.tries_of(&op).is_empty(), "the receiver never saw it");
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.class(), a.rule()), ("effect_unknown", "intent_without_dispatch"), "{a:?}");
    let text = ws.engine(&["run", "plan.json"]);
    assert!(text.stdout.contains("not sent, as far as the ledger shows"), "{}", text.describe());
    assert!(!text.stdout.contains("dispatched"), "never called dispatched:\n{}", text.describe());
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("intent_without_dispatch"), "{}", explain.describe());

    // The control: killed once the dispatch is recorded, the old rule.
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(ws.attempts_of("T1")[0].rule(), "dispatched_without_receipt");
}

#[test]
fn a_call_ended_at_its_deadline_has_no_receipt() {
    let ws = Ws::new();
    let task = json!({"ref": "T1", "title": "slow", "provider": "sh", "action": {"run": ["sleep", "5"]},
                      "effect": "external", "timeout_seconds": 1});
    ws.write_plan("plan.json", &plan("slow", json!({"sh": {"kind": "command"}}), vec![task]));
    let out = ws.run();
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let u = &out.json()["unknown"][0];
    assert_eq!((u["reason"].as_str(), u["last_state"].as_str()), (Some("deadline_after_dispatch"), Some("dispatched")));
    let text = ws.engine(&["run", "plan.json"]);
    assert!(text.stdout.contains("no receipt"), "{}", text.describe());
    assert!(!text.stdout.contains("receipt_recorded"), "{}", text.describe());
    // Issue 41: `status` lists the unknown outcome once, and a Tab after
    // `engine settle` offers its operation (`COMPLETE=bash`, cli/complete).
    let op = ws.op_of("T1");
    let status = ws.engine(&["status"]);
    let settle = format!("`engine settle {op} --outcome ok");
    assert_eq!(status.stdout.matches(&settle).count(), 1, "listed once:\n{}", status.describe());
    let tab = ws.engine_env(&["--", "engine", "settle", "op"], &[("COMPLETE", "bash"), ("_CLAP_COMPLETE_INDEX", "2")]);
    // A shared store is never read for a Tab (docs/commands.md): nothing offered.
    let offered = if ws.on_shared_store() { String::new() } else { op };
    assert_eq!(tab.stdout.trim(), offered, "{}", tab.describe());
}

#[test]
fn an_approval_a_revision_made_stale_is_called_stale() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({"requires_approval": true}));
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let op = ws.op_of("T1");
    ws.engine_json(&["approve", &op, "--note", "send it"]).expect(0, None);
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("not spent yet"), "fresh, it waits to be spent:\n{}", status.describe());

    // A revision (another task beside it) makes it stale.
    let tasks = vec![http_task("T1", "external"), http_task("T2", "external")];
    let mut p = plan("docs", json!({"r": http_provider(&rcv, false)}), tasks);
    p["tasks"][0]["requires_approval"] = json!(true);
    ws.write_plan("plan.json", &p);
    ws.engine_json(&["revise", "plan.json", "--reason", "one more document", "--no-run"]).expect(0, None);
    for args in [&["status"][..], &["explain", "T1"]] {
        let out = ws.engine(args);
        assert!(out.stdout.contains("stale"), "{args:?}:\n{}", out.describe());
        assert!(!out.stdout.contains("not spent yet"), "{args:?}:\n{}", out.describe());
    }
    ws.run().expect(4, Some("APPROVAL_STALE"));
    assert!(rcv.tries_of(&op).is_empty());
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("stale") && !status.stdout.contains("not spent yet"), "{}", status.describe());
    assert!(status.stdout.contains(&format!("`engine approve {op} --note")), "approve again:\n{}", status.describe());
}

#[test]
fn a_waiting_calls_cost_is_shown_and_expect_cost_refuses_another() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({"requires_approval": true, "cost": 2.5}));
    let mut p: serde_json::Value = serde_json::from_str(&ws.read("plan.json")).unwrap();
    p["budgets"] = json!({"max_cost": 10});
    ws.write_plan("plan.json", &p);
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let op = ws.op_of("T1");
    for args in [&["status"][..], &["explain", "T1"]] {
        let out = ws.engine(args);
        assert!(out.stdout.contains("cost 2.5"), "{args:?} shows the cost:\n{}", out.describe());
    }
    let status = ws.json(&["status"], 0);
    assert_eq!(status["awaiting_approval"][0]["cost"], 2.5, "{status:#}");
    let report = ws.json(&["report"], 0);
    let waiting = report["waiting"].as_array().cloned().unwrap_or_default();
    assert!(waiting.iter().any(|w| w["cost"] == 2.5), "{waiting:#?}");

    let refused = ws.engine_json(&["approve", &op, "--note", "ok", "--expect-cost", "1"]);
    refused.expect_code(2);
    assert!(refused.stdout.contains("2.5"), "{}", refused.describe());
    assert!(ws.ledger().approvals().is_empty(), "nothing recorded");
    ws.engine_json(&["approve", &op, "--note", "ok", "--expect-cost", "2.5"]).expect(0, None);
    assert_eq!(ws.ledger().approvals().len(), 1);
}
