//! Issue 36, case 1: a revision that takes a gate away is a loosening,
//! whatever field it goes through. An agent rewrites the plan file (its
//! own attempt fails `constraint_violated`, but the file stays): the paid
//! external task loses `requires_approval`, its cost goes 1 -> 0, its
//! effect external -> none, its validations are dropped, the acceptance
//! check becomes `true`, and a task moves onto the provider the plan
//! already runs with `"sandbox": "none"`. A person's plain `revise` must
//! list each of them and record nothing; try 2 of the paid task never
//! goes out (the receiver's own log).

use serde_json::{json, Value};

use crate::common::*;

/// What the agent does to the plan it runs under, besides its work.
const REWRITER: &str = r#"
import json
p = json.load(open("plan.json"))
for t in p["tasks"]:
    if t["ref"] == "pay":
        del t["requires_approval"]
        t["cost"] = 0
        t["effect"] = "none"
        t["validations"] = []
    if t["ref"] == "build":
        t["provider"] = "raw"
p["goal"]["acceptance"][0]["check"] = {"run": ["true"], "expect_exit": 0}
json.dump(p, open("plan.json", "w"))
open("work.txt", "w").write("done")
"#;

fn gated_plan(rcv: &Receiver) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "paid", "statement": "the invoice is paid once",
                 "acceptance": [{"id": "A1", "statement": "the work is there",
                                 "check": {"run": ["test", "-f", "work.txt"], "expect_exit": 0}}]},
        "budgets": {"max_cost": 10},
        "providers": {"r": http_provider(rcv, false), "sh": {"kind": "command"},
                      "raw": {"kind": "command", "sandbox": "none"}},
        "tasks": [
            {"ref": "pay", "title": "pay the invoice", "provider": "r", "action": {"body": {"invoice": 7}},
             "effect": "external", "cost": 1, "requires_approval": true,
             "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]},
            {"ref": "lint", "title": "lint", "provider": "raw", "action": {"run": ["true"]}, "effect": "none"},
            {"ref": "build", "title": "build", "provider": "sh", "action": {"run": ["true"]}, "effect": "none",
             "depends_on": ["pay"]},
            {"ref": "agent", "title": "work", "provider": "sh", "effect": "local", "depends_on": ["pay"],
             "action": {"run": ["python3", "-c", REWRITER]}},
        ],
    })
}

/// The loosenings a refusal lists, as (field, task or provider, JSON path).
fn listed(refused: &Value) -> Vec<(String, String, String)> {
    let none = Vec::new();
    let list = refused["error"]["details"]["loosened"].as_array().unwrap_or(&none);
    list.iter()
        .map(|l| {
            let whose = l["task"].as_str().or(l["provider"].as_str()).unwrap_or("");
            (
                l["kind"].as_str().unwrap_or("").to_string(),
                whose.to_string(),
                l["at"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_revision_that_takes_every_gate_away_lists_each_and_sends_nothing() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &gated_plan(&rcv));
    // Try 1 of the paid task, approved by a person.
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let op = ws.op_of("pay");
    ws.engine_json(&["approve", &op, "--note", "pay invoice 7 once"]).expect(0, None);
    let out = ws.run();
    out.expect(1, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "{}", out.describe());
    let a = &ws.attempts_of("agent")[0];
    assert_eq!((a.class(), a.rule()), ("constraint_violated", "protected_path_changed"), "{a:?}");

    // The rewritten file stays; a person's plain revise lists every gate it takes away.
    let refused = ws.engine_json(&["revise", "plan.json", "--reason", "x"]);
    refused.expect(4, Some("LOOSENING_NEEDS_APPROVAL"));
    let got = listed(&refused.json());
    for (kind, whose, at) in [
        ("requires_approval", "pay", "$.tasks[pay].requires_approval"),
        ("cost", "pay", "$.tasks[pay].cost"),
        ("effect", "pay", "$.tasks[pay].effect"),
        ("validations", "pay", "$.tasks[pay].validations"),
        ("acceptance", "", "$.goal.acceptance[A1].check"),
        ("provider", "build", "$.tasks[build].provider"),
    ] {
        assert!(
            got.iter().any(|g| (g.0.as_str(), g.1.as_str(), g.2.as_str()) == (kind, whose, at)),
            "{kind} of {whose:?} at {at} not listed in {got:#?}\n{}",
            refused.describe()
        );
    }
    assert_eq!(ws.ledger().revisions().len(), 1, "nothing recorded");
    let text = ws.engine(&["revise", "plan.json", "--reason", "x"]);
    assert_eq!(text.code(), 4, "{}", text.describe());
    for line in [
        "$.tasks[pay].requires_approval (requires_approval)",
        "$.tasks[pay].cost (cost)",
        "$.tasks[build].provider (provider)",
        "runs unconfined",
    ] {
        assert!(text.stderr.contains(line), "{line:?} missing:\n{}", text.describe());
    }

    // Nothing the person can type without the approval sends try 2.
    ws.run().expect(2, Some("PLAN_CHANGED"));
    let retried = ws.engine_json(&["retry", "pay"]);
    assert_ne!(retried.code(), 0, "{}", retried.describe());
    assert_eq!(rcv.tries_of(&op), vec![1], "try 2 of the paid task never went out");
    assert_eq!(rcv.deliveries().len(), 1);
    ws.verify();
}
