//! Spending inside one approved step (issue 24, hole 2's accounting; seed
//! 002's case): an agent task that may make paid calls says so
//! (`may_spend: true`), and what its provider reports it spent (`spent` in
//! its agent-json report) is recorded as the agent's word — a claim, shown
//! as reported, never as verified — and counted against `max_cost`;
//! crossing the budget stops with `BUDGET_EXHAUSTED` naming the reported
//! amounts. A task that reports spending without `may_spend` is a
//! `constraint_violated` (rule `spending_not_declared`). The calls the
//! engine makes itself (HTTP, MCP) count their declared `cost`.
//!
//! The agent here makes no network call: its "paid renders" are lines it
//! writes in its own log beside the workspace, so the test shows the
//! accounting whatever the sandbox allows (an agent without network cannot
//! POST at all: the sandbox's part).

use serde_json::{json, Value};

use crate::helpers::*;

/// An agent-json agent that "renders" N times (a line each in
/// `$SIDE/renders.log`, its own record of what it paid for) and reports
/// each render's price.
const RENDERING_AGENT: &str = r#"
import json, os, sys
json.load(sys.stdin)
n = int(sys.argv[1])
price = float(sys.argv[2])
with open(os.path.join(os.environ["SIDE"], "renders.log"), "a") as log:
    for i in range(n):
        log.write(f"render {i + 1} at {price}\n")
print(json.dumps({"status": "done", "summary": f"rendered {n} times",
                  "spent": [{"amount": price, "what": f"render {i + 1}"} for i in range(n)]}))
"#;

fn agent(task_ref: &str, renders: u32, price: f64, cost: f64, may_spend: bool) -> Value {
    let mut t = json!({"ref": task_ref, "title": "render the poster", "provider": "agent", "effect": "external",
        "cost": cost, "action": {"run": ["python3", "render.py", renders.to_string(), price.to_string()]}});
    if may_spend {
        t["may_spend"] = json!(true);
    }
    t
}

fn workspace(max_cost: f64, tasks: Vec<Value>) -> Ws {
    let ws = Ws::new();
    ws.write("render.py", RENDERING_AGENT);
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "poster", "statement": "a poster is rendered", "acceptance": []},
            "budgets": {"max_cost": max_cost},
            "providers": {"agent": {"kind": "command", "protocol": "agent-json", "env": ["SIDE"]}}, "tasks": tasks}),
    );
    ws
}

fn renders(ws: &Ws) -> usize {
    std::fs::read_to_string(ws.side.join("renders.log")).map_or(0, |s| s.lines().count())
}

fn cost_used(ws: &Ws) -> Value {
    ws.json(&["status"], 0)["budgets"]["max_cost"].clone()
}

/// Seed 002's case: one call of a task declared at cost 1 that spent three
/// more, under a budget of 2 (a task that may spend runs only while the
/// budget leaves room after its cost: under 1, it would not have run). The
/// ledger counts 1 + 3, the run stops on the budget naming what the agent
/// reported, and nothing more is sent.
#[test]
fn reported_spending_is_counted_and_crossing_the_budget_stops() {
    let ws = workspace(2.0, vec![agent("T1", 3, 1.0, 1.0, true), agent("T2", 1, 0.5, 0.0, true)]);
    let mut plan: Value = serde_json::from_str(&ws.read("plan.json")).unwrap();
    plan["tasks"][1]["depends_on"] = json!(["T1"]);
    ws.write_plan("plan.json", &plan);
    let out = ws.run();
    out.expect(5, Some("BUDGET_EXHAUSTED"));
    assert_eq!(renders(&ws), 3, "T1 ran once; T2 never started");
    let said = format!("{}{}", out.stdout, out.stderr);
    let budget = &out.json()["budget"];
    assert_eq!(
        (budget["used"].clone(), budget["limit"].clone()),
        (json!(4.0), json!(2.0)),
        "the declared 1 and the reported 3"
    );
    let words = ws.engine(&["status"]).stdout;
    assert!(words.contains("cost                  4 of 2"), "{words}");
    for item in ["render 1", "render 2", "render 3"] {
        assert!(said.contains(item), "names the reported {item}: {}", out.describe());
    }
    assert!(said.contains("reported"), "{}", out.describe());
    assert_eq!(cost_used(&ws), json!({"used": 4.0, "limit": 2.0}));
    assert_eq!(ws.attempts_of("T2").len(), 0, "nothing more was sent");

    // The agent's word, kept as such: a claim with its authority, and
    // evidence of what its report said, shown as reported.
    let a = &ws.attempts_of("T1")[0];
    assert_eq!(a.state, "succeeded", "the work itself passed; the budget is what stops");
    let claims = ws.claims(a.id);
    assert_eq!(claims[0].0, "external_ai_message");
    assert_eq!(claims[0].1["spent"][2]["what"], "render 3");
    let reported = ws.evidence(a.id).into_iter().find(|(_, kind, _)| kind == "spending_reported").expect("evidence");
    assert_eq!(reported.2["total_micros"], json!(3_000_000));
    assert_eq!(reported.2["may_spend"], json!(true));
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("reported by the provider, not verified"), "{}", explain.stdout);

    // A later run sends nothing either: the goal is over its budget until
    // a person raises it.
    let again = ws.run();
    again.expect(5, Some("BUDGET_EXHAUSTED"));
    assert_eq!(renders(&ws), 3);
    ws.engine(&["revise", "plan.json", "--reason", "the renders were worth it", "--raise", "max_cost=10", "--no-run"])
        .expect_code(0);
    ws.run().expect(0, None);
    assert_eq!(renders(&ws), 4, "T2 ran once the budget was raised");
    assert_eq!(cost_used(&ws), json!({"used": 4.5, "limit": 10.0}));
    ws.verify();
}

/// A task that reports spending it was not declared to make fails as a
/// constraint violation; its spending is counted all the same.
#[test]
fn spending_without_may_spend_is_a_constraint_violation_and_still_counted() {
    let ws = workspace(10.0, vec![agent("T1", 2, 0.25, 0.0, false)]);
    ws.run().expect(1, None);
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "constraint_violated", "spending_not_declared"));
    assert_eq!(cost_used(&ws), json!({"used": 0.5, "limit": 10.0}));
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("may_spend"), "says how to declare it: {}", explain.stdout);
    ws.verify();
}

/// A task that may spend needs room in `max_cost`: under the default
/// budget of 0 it is refused before it runs.
#[test]
fn a_task_that_may_spend_needs_room_in_the_budget() {
    let ws = workspace(0.0, vec![agent("T1", 1, 1.0, 0.0, true)]);
    let out = ws.run();
    out.expect(5, Some("BUDGET_EXHAUSTED"));
    assert!(format!("{}{}", out.stdout, out.stderr).contains("may_spend"), "{}", out.describe());
    assert_eq!(renders(&ws), 0);
}

/// `spent` that is not a list of `{"amount", "what"}` fails the attempt as
/// a broken report (the money may be gone: a person reads it); `may_spend`
/// on a provider that reports nothing is refused at check time.
#[test]
fn a_malformed_report_fails_and_may_spend_needs_an_agent() {
    let ws = workspace(10.0, vec![agent("T1", 1, 1.0, 0.0, true)]);
    ws.write(
        "render.py",
        "import json, sys\njson.load(sys.stdin)\nprint(json.dumps({'status': 'done', 'spent': [{'amount': -1, 'what': 'x'}]}))\n",
    );
    ws.run().expect(1, None);
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.class(), a.rule()), ("provider_rejected", "provider_output_invalid"));
    let evidence = ws.evidence(a.id);
    let invalid = evidence.iter().find(|(_, kind, _)| kind == "provider_output_invalid").expect("evidence");
    assert!(invalid.2["message"].as_str().unwrap().contains("spent[0].amount"), "{:#}", invalid.2);

    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
            "providers": {"sh": {"kind": "command"}},
            "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "may_spend": true, "action": {"run": ["true"]}}]}),
    );
    let out = ws.engine_json(&["check", "plan.json"]);
    out.expect(2, Some("PLAN_INVALID"));
    assert!(out.stdout.contains("$.tasks[0].may_spend"), "{}", out.describe());
}

/// The calls the engine makes itself count their declared `cost`, each
/// call as its receiver saw it: two HTTP deliveries at 1.25 and one MCP
/// tool call at 2 are 4.5 used.
#[test]
fn http_and_mcp_calls_count_their_declared_cost() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    let mcp_log = ws.root().join("mcp.jsonl");
    let http = |task_ref: &str| {
        json!({"ref": task_ref, "title": task_ref, "provider": "web", "effect": "external", "cost": 1.25,
               "action": {"body": {"doc": task_ref}}})
    };
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "paid", "statement": "paid calls", "acceptance": []},
            "budgets": {"max_cost": 10},
            "providers": {"web": {"kind": "http", "endpoint": format!("{}/render", rcv.base())},
                          "tools": {"kind": "mcp", "command": mcp_server_command(&mcp_log, &[])}},
            "tasks": [http("H1"), http("H2"),
                      {"ref": "M1", "title": "M1", "provider": "tools", "effect": "external", "cost": 2,
                       "action": {"tool": "render", "arguments": {"doc": "M1"}}}]}),
    );
    ws.run().expect(0, None);
    assert_eq!(rcv.deliveries().len(), 2, "the receiver's own log");
    assert_eq!(read_json_lines(&mcp_log).iter().filter(|d| d["tool"] == "render").count(), 1);
    assert_eq!(cost_used(&ws), json!({"used": 4.5, "limit": 10.0}));
}
