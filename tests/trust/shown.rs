//! A person's acts shown as they are (issue 24, hole 6): an act row the
//! act chain does not vouch for is shown as `STORE_TAMPERED`, naming its
//! row, by every command that shows acts — `status`, `explain`, `report`
//! (the page and the document) and `log` — and never as a valid act.

use serde_json::{json, Value};

use crate::common::*;

/// A one-task plan whose task needs an approval for every call; run once,
/// so it waits on one.
fn waiting_for_approval() -> (Ws, String) {
    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
            "providers": {"sh": {"kind": "command"}},
            "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "effect": "external", "requires_approval": true,
                       "action": {"run": ["true"]}}]}),
    );
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    (ws, op)
}

/// Insert an approval of `op` by SQL, as anything holding the store file
/// could, with an event announcing it; its row id.
fn forge_approval(ws: &Ws, op: &str) -> i64 {
    ws.tamper(&format!(
        "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, os_uid, os_user)
         SELECT p.operation_id, p.goal_id, p.revision, p.task_ref, p.request_digest, r.plan_digest, 'root', 'forged', p.asked_at_ms + 1, 0, 'root'
         FROM pending_requests p JOIN revisions r ON r.goal_id = p.goal_id AND r.revision = p.revision
         WHERE p.operation_id = '{op}'"
    ));
    let id = ws.ledger().approvals().iter().map(|a| a.id.get()).max().expect("the forged row");
    ws.tamper(&format!(
        "INSERT INTO events (at_ms, goal_id, revision, task_ref, kind, data)
         VALUES (1, 'g', 1, 'T1', 'approval_recorded', '{{\"approval_id\": {id}, \"operation_id\": \"{op}\", \"actor\": \"root\"}}')"
    ));
    id
}

fn names_row(text: &str, row: &str) -> bool {
    text.contains("STORE_TAMPERED") && text.contains(row)
}

/// Hole 6 as found: an inserted approval was listed by `status` as
/// "approved by root, not spent yet". Now every view marks it.
#[test]
fn an_unchained_approval_is_store_tampered_in_every_view() {
    let (ws, op) = waiting_for_approval();
    let id = forge_approval(&ws, &op);
    let row = format!("approvals row {id}");

    let status = ws.engine(&["status"]);
    status.expect_code(0);
    assert!(names_row(&status.stdout, &row), "{}", status.stdout);
    assert!(!status.stdout.contains("not spent yet"), "shown as a valid approval: {}", status.stdout);
    assert!(!status.stdout.contains("approved by"), "{}", status.stdout);
    // The task still waits; the gate refuses to dispatch past the row, so
    // the way on is the store's check, not another approval.
    assert!(status.stdout.contains(&format!("{op}  task T1  awaiting_approval")), "{}", status.stdout);
    assert!(status.stdout.contains("-> engine verify"), "{}", status.stdout);
    let sj = ws.json(&["status"], 0);
    assert_eq!(sj["awaiting_approval"][0]["approval"], Value::Null, "{sj}");
    assert_eq!(sj["awaiting_approval"][0]["store_tampered"], json!(row), "{sj}");
    assert_eq!(sj["awaiting_approval"][0]["next"], json!("engine verify"), "{sj}");
    let act = &sj["acts"]["latest"][0];
    assert_eq!(act["store_tampered"]["code"], json!("STORE_TAMPERED"), "{sj}");
    assert_eq!(act["store_tampered"]["row"], json!(row), "{sj}");
    assert_eq!(sj["store_tampered"][0]["row"], json!(row), "{sj}");

    let explain = ws.engine(&["explain", "T1"]);
    explain.expect_code(0);
    assert!(names_row(&explain.stdout, &row), "{}", explain.stdout);
    assert!(!explain.stdout.contains("not spent yet"), "{}", explain.stdout);
    let ej = ws.json(&["explain", "T1"], 0);
    assert!(names_row(&ej.to_string(), &row), "{ej}");

    let doc = ws.json(&["report", "--no-timestamp"], 0);
    assert!(names_row(&doc.to_string(), &row), "{doc}");
    let page = ws.root().join("report.html");
    ws.engine(&["report", "--html", page.to_str().unwrap()]).expect_code(0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(names_row(&html, &row), "the page does not name the row");

    let log = ws.engine(&["log"]);
    log.expect_code(0);
    assert!(names_row(&log.stdout, &row), "{}", log.stdout);
    let line = log.stdout.lines().find(|l| l.contains("approval recorded")).expect("the forged event");
    assert!(names_row(line, &row), "the forged event's line is marked: {line}");
    let lj = ws.json(&["log"], 0);
    assert_eq!(lj["store_tampered"][0]["row"], json!(row), "{lj}");
}

/// The same store without the forged row shows the real approval as one
/// (the marking is the chain's verdict, not a blanket warning).
#[test]
fn a_chained_approval_is_shown_as_an_approval() {
    let (ws, op) = waiting_for_approval();
    ws.engine(&["approve", &op, "--note", "checked"]).expect_code(0);
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("not spent yet"), "{}", status.stdout);
    assert!(!status.stdout.contains("STORE_TAMPERED"), "{}", status.stdout);
    let sj = ws.json(&["status"], 0);
    assert_eq!(sj["store_tampered"], json!([]), "{sj}");
    assert!(sj["acts"]["latest"][0].get("store_tampered").is_none_or(Value::is_null), "{sj}");
    let log = ws.engine(&["log"]);
    assert!(!log.stdout.contains("STORE_TAMPERED"), "{}", log.stdout);
}

/// An edited settlement is marked too (every act table, not only approvals).
#[test]
fn an_edited_settlement_is_store_tampered_in_status_and_explain() {
    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
            "providers": {"sh": {"kind": "command"}},
            "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "effect": "external", "timeout_seconds": 1,
                       "action": {"run": ["sleep", "5"]}}]}),
    );
    let op = ws.digest_op("T1");
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine(&["settle", &op, "--outcome", "not_run", "--note", "it never started"]).expect_code(0);
    ws.tamper("UPDATE settlements SET note = 'edited'");
    let id = ws.ledger().settlements()[0].id;
    let row = format!("settlements row {id}");
    let status = ws.engine(&["status"]);
    assert!(names_row(&status.stdout, &row), "{}", status.stdout);
    let explain = ws.engine(&["explain", "T1"]);
    assert!(names_row(&explain.stdout, &row), "{}", explain.stdout);
}
