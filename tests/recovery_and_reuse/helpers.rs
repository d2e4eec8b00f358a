//! The recovery-and-reuse suite's own vocabulary over the shared harness
//! (`support`): plans of `sh` tasks that log their calls, a scripted
//! agent-json agent, and readers of `engine revise`'s decisions.

#![allow(dead_code, unused_imports)]

use serde_json::{json, Value};

pub use crate::support::*;

/// A plan with two command providers (`sh`, and `agent` speaking
/// agent-json; both get `$SIDE`, the tests' side folder), generous
/// budgets, and the given tasks.
pub fn plan(goal_id: &str, tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": goal_id, "statement": format!("{goal_id}: the tasks are done"), "acceptance": [], "constraints": []},
        "budgets": {"max_attempts_per_task": 10, "max_revisions": 10, "max_provider_calls": 1000, "max_cost": 0, "deadline_seconds": 3600},
        "providers": {"sh": {"kind": "command", "env": ["SIDE"]},
                      "agent": {"kind": "command", "protocol": "agent-json", "env": ["SIDE"]}},
        "tasks": tasks,
    })
}

/// A local-effect `sh -c` task that first appends its ref to the side call
/// log (`Ws::calls`), then runs `script`.
pub fn sh_task(task_ref: &str, script: &str) -> Value {
    json!({
        "ref": task_ref, "title": format!("task {task_ref}"), "provider": "sh",
        "action": {"run": ["sh", "-c", format!("echo {task_ref} >> \"$SIDE/calls.log\"; {script}")]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [],
    })
}

/// A validation: `sh -c script`.
pub fn validation(id: &str, script: &str) -> Value {
    json!({"id": id, "run": ["sh", "-c", script], "expect_exit": 0})
}

/// Set a field of every task in `plan` whose ref is `task_ref`.
pub fn set(plan: &mut Value, task_ref: &str, field: &str, value: Value) {
    let task = plan["tasks"].as_array_mut().unwrap().iter_mut().find(|t| t["ref"] == task_ref).expect("task in plan");
    task[field] = value;
}

/// The decision of `task_ref` in `engine revise --json` output:
/// ("reuse", "") or ("run", REASON).
pub fn decision(revise: &Value, task_ref: &str) -> (String, String) {
    let d = revise["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["task_ref"] == task_ref)
        .unwrap_or_else(|| panic!("no decision for {task_ref} in {revise:#}"));
    let kind = d["decision"].as_str().unwrap().to_string();
    let reason = d["refusal"]["reason"].as_str().unwrap_or("").to_string();
    (kind, reason)
}

pub fn decision_detail(revise: &Value, task_ref: &str) -> Value {
    revise["decisions"].as_array().unwrap().iter().find(|d| d["task_ref"] == task_ref).cloned().unwrap()
}

/// A tiny agent-json agent: dumps its stdin to `$SIDE/stdin-<n>.json`,
/// logs its task ref to the call log, then reports according to MODE
/// (`python3 agent.py MODE REF`).
pub const AGENT_PY: &str = r#"import json, os, sys
mode, ref = sys.argv[1], sys.argv[2]
raw = sys.stdin.read()
side = os.environ["SIDE"]
n = len([f for f in os.listdir(side) if f.startswith("stdin-")]) + 1
open(os.path.join(side, "stdin-%d.json" % n), "w").write(raw)
open(os.path.join(side, "calls.log"), "a").write(ref + "\n")
request = json.loads(raw)
print("agent working on", request["task"]["ref"], "try", request["try"])
if mode == "done":
    print(json.dumps({"status": "done", "summary": "all tests pass now", "claimed_cause": None}))
elif mode == "blame-network":
    print(json.dumps({"status": "done", "summary": "done; any failure is the network", "claimed_cause": "the network was flaky"}))
elif mode == "failed-network":
    print(json.dumps({"status": "failed", "summary": "could not finish", "claimed_cause": "the network is down"}))
elif mode == "failed-network-exit1":
    print(json.dumps({"status": "failed", "summary": "could not finish", "claimed_cause": "the network is down"}))
    sys.exit(1)
elif mode == "garbage":
    print("I fixed everything, trust me")
elif mode == "no-status":
    print(json.dumps({"summary": "done", "claimed_cause": None}))
"#;

/// An agent task: `python3 agent.py MODE REF`.
pub fn agent_task(task_ref: &str, mode: &str) -> Value {
    json!({
        "ref": task_ref, "title": format!("agent {task_ref}"), "provider": "agent",
        "action": {"run": ["python3", "agent.py", mode, task_ref]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [],
    })
}

/// The stdin documents the agent received, in call order.
pub fn agent_stdins(ws: &Ws) -> Vec<Value> {
    let mut n = 1;
    let mut out = Vec::new();
    while let Ok(text) = std::fs::read_to_string(ws.side.join(format!("stdin-{n}.json"))) {
        out.push(serde_json::from_str(&text).unwrap());
        n += 1;
    }
    out
}
