//! Issue 42: `engine rerun REF [--downstream] --reason WHY`: a succeeded
//! task runs again as a new operation, every other completion kept; an
//! external task's re-run waits on a person's approval (judged from the
//! receiver's own log); an unknown operation is never sent again.

use serde_json::json;

use crate::helpers::*;

/// T1 → T2 → T3 (a chain), and T4 alone.
fn chain(ws: &Ws) {
    let mut t2 = sh_task("T2", "true");
    t2["depends_on"] = json!(["T1"]);
    let mut t3 = sh_task("T3", "true");
    t3["depends_on"] = json!(["T2"]);
    ws.write_plan("plan.json", &plan("rerun", vec![sh_task("T1", "true"), t2, t3, sh_task("T4", "true")]));
    ws.json(&["run", "plan.json"], 0);
}

#[test]
fn a_rerun_runs_the_task_again_as_a_new_operation_and_keeps_every_other_completion() {
    let ws = Ws::new();
    chain(&ws);
    let first_op = ws.attempts_of("T2")[0].operation_id.clone();
    let report = ws.json(&["rerun", "T2", "--reason", "its output looked truncated"], 0);
    assert_eq!(report["goal_state"], "satisfied", "{report:#}");
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3"), ws.calls("T4")), (1, 2, 1, 1));
    let t2 = ws.attempts_of("T2");
    assert_eq!(t2.len(), 2);
    assert_eq!((t2[1].state.as_str(), t2[1].kind.as_str()), ("succeeded", "rerun"), "{t2:?}");
    assert_ne!(t2[1].operation_id, first_op, "a rerun is a new operation");
    assert_eq!(ws.events_of("rerun_requested").len(), 1);

    // With --downstream its dependants run again too; the rest is kept.
    ws.json(&["rerun", "T2", "--downstream", "--reason", "the price list was wrong"], 0);
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3"), ws.calls("T4")), (1, 3, 2, 1));
    // The next plain run keeps everything.
    ws.json(&["run", "plan.json"], 0);
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3"), ws.calls("T4")), (1, 3, 2, 1));

    // Only a succeeded task is rerun; a held one is refused.
    ws.json(&["hold", "T4", "--reason", "frozen"], 0);
    ws.engine_json(&["rerun", "T4", "--reason", "x"]).expect(4, Some("HELD"));
    assert_eq!(ws.calls("T4"), 1);
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn an_external_rerun_waits_for_approval_and_an_unknown_operation_is_never_sent_again() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    let task = json!({"ref": "T1", "title": "post", "provider": "r", "effect": "external",
        "action": {"body": {"doc": "T1"}}});
    let p = json!({"version": 1, "goal": {"id": "ext", "statement": "posted", "acceptance": []},
        "providers": {"r": {"kind": "http", "endpoint": format!("{}/render", rcv.base())}}, "tasks": [task]});
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(rcv.deliveries().len(), 1);

    let out = ws.engine_json(&["rerun", "T1", "--reason", "the receiver lost it"]);
    out.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(rcv.deliveries().len(), 1, "nothing sent before a person approves");
    let op = out.json()["awaiting_approval"][0]["operation_id"].as_str().unwrap().to_string();
    assert_ne!(op, ws.attempts_of("T1")[0].operation_id, "the rerun's call is a new operation");
    ws.json(&["approve", &op, "--note", "send it again"], 0);
    // The receiver takes the approved call but drops the connection: its
    // outcome is unknown.
    rcv.control(json!({"mode": "drop", "times": 1}));
    ws.engine_json(&["run", "plan.json"]).expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let deliveries = rcv.wait_deliveries(&op, 1);
    assert_eq!(deliveries[0]["key"], op, "sent under the rerun's own operation id");
    assert_eq!(rcv.deliveries().len(), 2);

    // An operation whose outcome is unknown is never re-sent by a rerun:
    // refused, naming the settle command.
    let out = ws.engine_json(&["rerun", "T1", "--reason", "again"]);
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert!(out.describe().contains(&format!("engine settle {op}")), "{}", out.describe());
    assert_eq!(rcv.deliveries().len(), 2, "nothing sent");
}
