//! The unknown-outcome suite's own vocabulary over the shared harness
//! (`support`): plans around the receiver fixture and the MCP fixture.

#![allow(dead_code, unused_imports)]

use serde_json::{json, Value};

pub use crate::support::*;

/// A goal whose one acceptance check passes.
pub fn goal(id: &str) -> Value {
    json!({"id": id, "statement": "deliver the documents", "acceptance": [
        {"id": "A1", "statement": "the run completed", "check": {"run": ["true"], "expect_exit": 0}}
    ]})
}

/// The receiver as provider `r`, with or without its observation rule.
/// The receiver's `/operations/{key}` answers 404 for a key it never
/// received: these tests rely on that as absence, so the rule declares it
/// (a bare URL would make a 404 inconclusive).
pub fn http_provider(rcv: &Receiver, observe: bool) -> Value {
    let mut p = json!({"kind": "http", "endpoint": format!("{}/render", rcv.base())});
    if observe {
        p["observe"] = json!({"url": format!("{}/operations/{{operation_id}}", rcv.base()),
                              "present_if": {"status": [200]}, "absent_if": {"status": [404]}});
    }
    p
}

/// An HTTP task on provider `r` with one passing validation.
pub fn http_task(task_ref: &str, effect: &str) -> Value {
    json!({"ref": task_ref, "title": format!("deliver {task_ref}"), "provider": "r",
           "action": {"body": {"doc": task_ref}}, "effect": effect,
           "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})
}

pub fn plan(goal_id: &str, providers: Value, tasks: Vec<Value>) -> Value {
    json!({"version": 1, "goal": goal(goal_id), "providers": providers, "tasks": tasks})
}

/// A workspace with a one-task HTTP plan on `rcv`.
pub fn one_http_task(rcv: &Receiver, effect: &str, observe: bool, extra: Value) -> Ws {
    let ws = Ws::new();
    let mut task = http_task("T1", effect);
    if let Value::Object(m) = extra {
        for (k, v) in m {
            task[k] = v;
        }
    }
    ws.write_plan("plan.json", &plan("docs", json!({"r": http_provider(rcv, observe)}), vec![task]));
    ws
}

/// The MCP fixture (`fixtures/mcp/server.py`) as provider `tools` of a plan
/// in `ws`, writing its delivery log to `ws.mcp_log()` (beside the workspace).
pub fn mcp_provider(ws: &Ws, flags: &[&str], observe: bool) -> Value {
    let mut p = json!({"kind": "mcp", "command": mcp_server_command(&ws.mcp_log(), flags)});
    if observe {
        p["observe_tool"] = json!("operation_status");
    }
    p
}

/// An MCP task calling `tool` on provider `tools`, with one passing validation.
pub fn mcp_task(task_ref: &str, tool: &str, effect: &str) -> Value {
    json!({"ref": task_ref, "title": format!("{tool} {task_ref}"), "provider": "tools",
           "action": {"tool": tool, "arguments": {"doc": task_ref}}, "effect": effect,
           "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})
}
