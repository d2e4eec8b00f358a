//! `engine revise` of the goal contract, and verdicts from the latest
//! evidence only.

use serde_json::json;

use crate::helpers::*;

fn two_tasks() -> serde_json::Value {
    let mut p = plan("contract", vec![sh_task("T1", "true"), sh_task("T2", "true")]);
    set(&mut p, "T2", "depends_on", json!(["T1"]));
    p
}

#[test]
fn revise_with_a_changed_goal_statement_records_reason_and_new_contract_digest() {
    let ws = Ws::new();
    let p = two_tasks();
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let digest1 = ws.ledger().revisions()[0].goal_contract.clone();

    let mut p2 = p.clone();
    p2["goal"]["statement"] = json!("contract: the tasks are done, and done well");
    ws.write_plan("plan.json", &p2);
    let rev = ws.json(&["revise", "plan.json", "--reason", "the goal asks for more", "--no-run"], 0);
    assert_eq!(rev["goal_contract_changed"], json!(true));
    assert_eq!((rev["from_revision"].as_i64(), rev["revision"].as_i64()), (Some(1), Some(2)));
    let digest2 = rev["goal_contract_digest"].as_str().unwrap().to_string();
    assert_ne!(digest1, digest2);

    let r2 = ws.ledger().revisions().into_iter().find(|r| r.revision.get() == 2).expect("revision 2");
    let (parent, contract, reason) = (r2.parent.map(|p| p.get()), r2.goal_contract, r2.reason);
    assert_eq!(
        (parent, contract.as_str(), reason.as_deref()),
        (Some(1), digest2.as_str(), Some("the goal asks for more"))
    );
    // The digest is the one `engine digest` computes for the new plan.
    let dig = ws.json(&["digest", "plan.json"], 0);
    assert!(dig.to_string().contains(&digest2), "{dig:#}");

    for r in ["T1", "T2"] {
        assert_eq!(decision(&rev, r), ("run".to_string(), "GOAL_DIGEST_CHANGED".to_string()));
        assert_eq!(ws.task(2, r).1["reuse_refused"], "GOAL_DIGEST_CHANGED");
    }
    // The revision's verdict starts open: revision 1's satisfaction does
    // not carry over.
    assert_eq!(
        ws.json(&["status"], 0)["goal"],
        json!({"id": "contract", "state": "open", "verdict": "open", "constraints_not_checked": 0, "active_revision": 2})
    );
    assert_eq!(ws.events_of("revision_recorded")[0].2["reason"], "the goal asks for more");

    ws.json(&["run", "plan.json"], 0);
    assert_eq!((ws.calls("T1"), ws.calls("T2")), (2, 2));
}

#[test]
fn a_later_failing_validation_is_never_hidden_by_an_older_pass() {
    let ws = Ws::new();
    ws.write("in.txt", "good\n");
    let mut p = plan("latest", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "inputs", json!(["in.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "grep -q good in.txt")]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.goal_state(), "satisfied");

    ws.write("in.txt", "bad\n");
    let report = ws.json(&["run", "plan.json"], 1);
    assert_eq!(report["failed"], json!(["T1"]));
    assert_eq!(ws.goal_state(), "failed");
    assert_eq!(ws.task(1, "T1").0, "failed");
    let results: Vec<bool> =
        ws.ledger().check_results().iter().filter(|c| c.check_id == "V1").map(|c| c.passed).collect();
    assert_eq!(results, vec![true, false]);
    // And a plain run again does not resurrect the old pass.
    ws.json(&["run", "plan.json"], 1);
    assert_eq!(ws.goal_state(), "failed");
}

#[test]
fn a_later_failing_acceptance_check_is_never_hidden_by_an_older_pass() {
    let ws = Ws::new();
    ws.write("accept.txt", "yes\n");
    let mut p = plan("acceptance", vec![sh_task("T1", "true")]);
    p["goal"]["acceptance"] =
        json!([{"id": "A1", "statement": "accepted", "check": {"run": ["grep", "-q", "yes", "accept.txt"]}}]);
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    ws.write("accept.txt", "no\n");
    let report = ws.json(&["run", "plan.json"], 1);
    assert_eq!(report["acceptance"], json!([{"id": "A1", "passed": false}]));
    assert_eq!(ws.goal_state(), "failed");
    assert_eq!(ws.calls("T1"), 1, "T1's inputs did not change");
    ws.write("accept.txt", "yes\n");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.goal_state(), "satisfied");
}
