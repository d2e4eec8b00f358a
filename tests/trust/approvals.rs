//! What an approval answers and binds (issue 24, hole 6): `approve`
//! refuses an operation that waits on nothing (`NOTHING_TO_APPROVE`,
//! nothing recorded); an approval binds the request digest, the plan
//! revision and the call's cost, `approve` prints them, and a call whose
//! cost or revision changed since does not spend it (`APPROVAL_STALE`,
//! naming what changed).

use serde_json::{json, Value};

use crate::common::*;
use crate::support::ledger::row_digest;

fn task(task_ref: &str, effect: &str, cost: f64, gated: bool) -> Value {
    json!({"ref": task_ref, "title": task_ref, "provider": "sh", "effect": effect, "cost": cost,
           "requires_approval": gated, "action": {"run": ["true"]}})
}

fn write(ws: &Ws, tasks: Vec<Value>) {
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
            "budgets": {"max_cost": 10}, "providers": {"sh": {"kind": "command"}}, "tasks": tasks}),
    );
}

/// `approve` of an operation nothing waits on records nothing and says
/// why: an unknown operation, a task never gated (it succeeded without
/// asking), a task that already spent its approval.
#[test]
fn approve_refuses_an_operation_that_waits_on_nothing() {
    let ws = Ws::new();
    write(&ws, vec![task("T1", "local", 0.0, false), task("T2", "external", 1.0, true)]);
    let (t1, t2) = (ws.digest_op("T1"), ws.digest_op("T2"));
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(ws.task_state("T1"), "succeeded");
    let refused = |op: &str, names: &str| {
        let before = row_digest(&ws.store());
        let out = ws.engine_json(&["approve", op, "--note", "go"]);
        out.expect(2, Some("NOTHING_TO_APPROVE"));
        assert!(out.stdout.contains(names), "{}", out.describe());
        assert_eq!(row_digest(&ws.store()), before, "approve {op} recorded something");
    };
    refused("op_0123456789abcdef01234567", "no task of a goal's active revision has operation");
    refused(&t1, "task T1");
    assert!(ws.ledger().approvals().is_empty());

    let approved = ws.engine_json(&["approve", &t2, "--note", "go"]);
    approved.expect(0, None);
    ws.run().expect(0, None);
    assert_eq!(ws.task_state("T2"), "succeeded");
    refused(&t2, "task T2");
    assert_eq!(ws.ledger().approvals().len(), 1);
}

/// `approve` prints what it binds — the request digest, the revision, the
/// cost — in words and in `--json`, and so does a repeated approve.
#[test]
fn approve_prints_the_request_digest_revision_and_cost_it_binds() {
    let ws = Ws::new();
    write(&ws, vec![task("T1", "external", 1.5, true)]);
    let op = ws.digest_op("T1");
    let digest = ws.json(&["digest", "plan.json"], 0);
    let request = digest.to_string();
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let text = ws.engine(&["approve", &op, "--note", "go"]);
    text.expect_code(0);
    let a = &ws.ledger().approvals()[0];
    assert!(request.contains(a.request_digest.as_str()), "the digest `engine digest` prints: {request}");
    for line in
        [format!("request digest  {}", a.request_digest), "plan revision   1".into(), "cost            1.5".into()]
    {
        assert!(text.stdout.contains(&line), "{line:?} in {}", text.stdout);
    }
    let again = ws.engine_json(&["approve", &op, "--note", "go"]);
    again.expect(0, None);
    let j = &again.json()["approval"];
    assert_eq!(j["already_approved"], json!(true));
    assert_eq!(
        (j["request_digest"].clone(), j["revision"].clone(), j["cost"].clone()),
        (json!(a.request_digest), json!(1), json!(1.5)),
        "{j}"
    );
    assert_eq!(a.cost.map(|c| c.micros()), Some(1_500_000), "the row binds the cost");
}

/// A revision that changes the task's cost: the approval given at the old
/// cost and revision is not spent; the run says which changed, nothing is
/// dispatched, and a fresh approval (at the new cost) lets it go.
#[test]
fn an_approval_given_at_another_cost_or_revision_is_stale() {
    let ws = Ws::new();
    write(&ws, vec![task("T1", "external", 1.0, true)]);
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    ws.engine(&["approve", &op, "--note", "one unit"]).expect_code(0);
    write(&ws, vec![task("T1", "external", 2.0, true)]);
    assert_eq!(ws.digest_op("T1"), op, "the request (and so the operation) is the same");
    ws.engine(&["revise", "plan.json", "--reason", "dearer", "--no-run"]).expect_code(0);
    let out = ws.run();
    out.expect(4, Some("APPROVAL_STALE"));
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("the cost changed: approved 1, this call costs 2"), "{}", out.describe());
    assert!(said.contains("approved at revision 1, this call is of revision 2"), "{}", out.describe());
    assert!(ws.attempts().is_empty(), "nothing dispatched");
    let fresh = ws.engine_json(&["approve", &op, "--note", "two units"]);
    fresh.expect(0, None);
    assert_eq!(
        (fresh.json()["approval"]["cost"].clone(), fresh.json()["approval"]["revision"].clone()),
        (json!(2.0), json!(2))
    );
    ws.run().expect(0, None);
    let spent: Vec<_> = ws.ledger().approvals().into_iter().filter(|a| a.consumed_by.is_some()).collect();
    assert_eq!(spent.len(), 1);
    assert_eq!(spent[0].note, "two units", "the stale one is never spent");
}
