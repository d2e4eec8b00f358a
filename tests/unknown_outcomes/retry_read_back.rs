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

/// Issue 36, case 5: the read-back before a retry is whatever `observe`
/// applies — here the provider's, the task declaring none. Delivered, the
/// read-back inconclusive at the time, settled `not_run` (wrongly): the
/// retry reads back first, finds it, and sends nothing.
#[test]
fn a_retry_reads_back_with_the_providers_observe_too() {
    let rcv = Receiver::start(&["--observe"]);
    rcv.control(json!({"mode": "normal", "observe_status": 500}));
    let ws = one_http_task(&rcv, "external", true, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "I think it never arrived"]).expect(0, None);
    rcv.control(json!({"mode": "normal", "observe_status": null}));
    let out = retry(&ws, &op);
    out.expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "the retry did not send again:\n{}", out.describe());
    let last = ws.attempts_of("T1").pop().unwrap();
    assert_eq!(ws.receipt_of(last.id).unwrap()["source"], "observation");
}

/// The same with an MCP server's `observe_tool`: the tool that acted once
/// is not called a second time. (The server cannot answer about the
/// operation while its log holds a line it cannot read.)
#[test]
fn a_retry_reads_back_with_an_mcp_observe_tool() {
    let ws = Ws::new();
    let providers = json!({"tools": mcp_provider(&ws, &[], true)});
    ws.write_plan("plan.json", &plan("docs", providers, vec![mcp_task("T1", "render", "external")]));
    assert!(ws.run_fp("after_receipt").killed());
    ws.wait_mcp_deliveries(1);
    let log = ws.mcp_log();
    let kept = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, format!("{kept}not json\n")).unwrap();
    let op = ws.op_of("T1");
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "I think it never ran"]).expect(0, None);
    std::fs::write(&log, kept).unwrap();
    let out = retry(&ws, &op);
    out.expect(0, None);
    assert_eq!(ws.mcp_deliveries().len(), 1, "the tool ran once:\n{}", out.describe());
    assert_eq!(ws.task_state("T1"), "succeeded");
}

/// After a `not_run` settlement whose read-back cannot answer, the way
/// out is a person's `engine retry REF --without-read-back --reason WHY`
/// (on the act chain); no printer points back to a plain retry, which
/// would only read back again.
#[test]
fn a_read_back_that_cannot_answer_has_a_named_way_out() {
    let rcv = Receiver::start(&["--observe"]);
    let (ws, op) = delivered_then_settled_not_run(&rcv);
    let out = retry(&ws, &op);
    out.expect(3, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "nothing sent:\n{}", out.describe());
    let way = "engine retry T1 --without-read-back --reason";
    let j = out.json();
    let next: Vec<String> = j["next"][0]["ways"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["command"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    assert!(next.iter().all(|c| c.starts_with(way)) && !next.is_empty(), "{next:?}\n{}", out.describe());
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains(way), "{}", status.describe());
    assert!(!status.stdout.contains("next: `engine retry T1`"), "{}", status.describe());
    let refused = ws.engine_json(&["retry", "T1", "--without-read-back"]);
    refused.expect_code(2);
    assert_eq!(rcv.tries_of(&op), vec![1], "no reason, nothing sent");

    // The person's way out: sent without the read-back (its approval first:
    // a repeat of external work), recorded as their act.
    let args = ["retry", "T1", "--without-read-back", "--reason", "the receiver's log is down; re-send"];
    let asked = ws.engine_json(&args);
    asked.expect(4, Some("APPROVAL_REQUIRED"));
    ws.engine_json(&["approve", &op, "--note", "send it again"]).expect(0, None);
    // The command that spends the approval keeps the person's choice.
    ws.engine_json(&["retry", "T1"]).expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1, 2]);
    let asked = ws.events_of("retry_requested");
    let waived: Vec<_> = asked.iter().filter(|(_, _, d)| d["without_read_back"].is_object()).collect();
    assert_eq!(waived.len(), 1, "{asked:?}");
    assert_eq!(waived[0].2["without_read_back"]["reason"], "the receiver's log is down; re-send");
    assert!(waived[0].2["ask_id"].is_i64(), "a person's request on the act chain: {waived:?}");
    ws.verify();
}

/// A try completed from the read-back is an attempt like any: within the
/// budgets, or not recorded at all. With one attempt per task, the retry
/// reads the effect back and stops on the budget (nothing recorded, nothing
/// sent); once a person raises it, the retry completes from a new read-back.
#[test]
fn a_try_completed_from_the_read_back_keeps_within_the_attempts_budget() {
    let rcv = Receiver::start(&["--observe"]);
    rcv.control(json!({"mode": "normal", "observe_status": 500}));
    let ws = Ws::new();
    let observe = json!({"url": format!("{}/operations/{{operation_id}}", rcv.base()),
                         "present_if": {"status": [200]}, "absent_if": {"status": [404]}});
    let mut task = http_task("T1", "external");
    task["observe"] = observe;
    let mut p = plan("docs", json!({"r": http_provider(&rcv, false)}), vec![task]);
    p["budgets"] = json!({"max_attempts_per_task": 1});
    ws.write_plan("plan.json", &p);
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    rcv.wait_deliveries(&op, 1);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine_json(&["settle", &op, "--outcome", "not_run", "--note", "I think it never arrived"]).expect(0, None);
    rcv.control(json!({"mode": "normal", "observe_status": null}));

    // The operation settled not run is still what the goal waits on (the
    // verdict's order, as for a retry the gate refuses on a budget); the
    // budget and its way out are named beside it.
    let out = retry(&ws, &op);
    out.expect(3, Some("GOAL_OUTCOME_UNPROVEN"));
    assert_eq!(out.json()["budget"]["budget"], "max_attempts_per_task", "{}", out.describe());
    assert_eq!(rcv.tries_of(&op), vec![1], "nothing sent:\n{}", out.describe());
    assert_eq!(ws.attempts_of("T1").len(), 1, "no try past the budget:\n{}", out.describe());
    ws.verify();

    let args = ["revise", "plan.json", "--reason", "one more try", "--raise", "max_attempts_per_task=2", "--no-run"];
    ws.engine_json(&args).expect(0, None);
    let out = retry(&ws, &op);
    out.expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "the retry did not send again:\n{}", out.describe());
    assert_eq!(ws.task_state("T1"), "succeeded");
    ws.verify();
}
