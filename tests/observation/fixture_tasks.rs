//! MCP tasks at their edges, with the project's MCP fixture
//! (`fixtures/mcp/server.py --tasks`, whose `render_later` requires task
//! augmentation and logs its effect, fsynced, before it completes): a task
//! that fails is a classified tool error with its handle kept; a task whose
//! deadline passes is cancelled (`tasks/cancel`, from the server's own
//! stdin) and read back absent without a second call.

use serde_json::{json, Value};

use super::common::*;

/// The fixture with tasks, its stdin copied to `$SIDE/stdin.log`.
fn fixture(ws: &Ws) -> Value {
    // `sh -c SCRIPT sh SIDE ARGV...`: the side folder, then the server's argv.
    let mut cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        r#"side="$1"; shift; tee -a "$side/stdin.log" | "$@""#.to_string(),
        "sh".to_string(),
        ws.side.to_string_lossy().into_owned(),
    ];
    cmd.extend(mcp_server_command(&ws.mcp_log(), &["--tasks"]));
    json!({"kind": "mcp", "command": cmd, "observe_tool": "operation_status"})
}

fn render_later(arguments: Value, timeout: Option<u64>) -> Value {
    let mut t = json!({"ref": "T1", "title": "render later", "provider": "fx", "effect": "external",
                       "action": {"tool": "render_later", "arguments": arguments}});
    if let Some(s) = timeout {
        t["timeout_seconds"] = json!(s);
    }
    t
}

fn methods(ws: &Ws) -> Vec<String> {
    sent(ws).iter().filter_map(|m| m["method"].as_str().map(str::to_string)).collect()
}

#[test]
fn a_task_that_fails_is_a_classified_tool_error_and_keeps_its_handle() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"fx": fixture(&ws)}), vec![render_later(json!({"fail": true}), None)]));
    ws.run().expect(1, None);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "failed"), "{a:?}");
    assert_eq!((a[0].class(), a[0].rule()), ("provider_rejected", "tool_error"), "{a:?}");
    assert!(a[0].handle.as_ref().is_some_and(|h| h["kind"] == "mcp_task"), "{a:?}");
    assert!(ws.mcp_deliveries().is_empty(), "no effect");
    let m = methods(&ws);
    assert_eq!(m.iter().filter(|x| *x == "tools/call").count(), 1, "{m:?}");
    assert!(m.iter().any(|x| x == "tasks/result"), "{m:?}");
}

#[test]
fn a_task_past_its_deadline_is_cancelled_and_read_back_without_a_second_call() {
    let ws = Ws::new();
    // A first call starts the server, so the deadline (2 s) times the
    // task, not a loaded machine's start-up.
    let warm =
        json!({"ref": "T0", "provider": "fx", "effect": "none", "action": {"tool": "wait", "arguments": {"ms": 1}}});
    let mut task = render_later(json!({"ms": 60_000}), Some(2));
    task["depends_on"] = json!(["T0"]);
    ws.write_plan("plan.json", &plan(json!({"fx": fixture(&ws)}), vec![warm, task]));
    ws.run().expect(1, None);
    let m = methods(&ws);
    let calls: Vec<Value> = sent(&ws).into_iter().filter(|x| x["method"] == "tools/call").collect();
    let names: Vec<&str> = calls.iter().filter_map(|c| c["params"]["name"].as_str()).collect();
    assert_eq!(names, ["wait", "render_later", "operation_status"], "the work once, then only a look: {m:?}");
    let cancels: Vec<Value> = sent(&ws).into_iter().filter(|x| x["method"] == "tasks/cancel").collect();
    assert_eq!(cancels.len(), 1, "{m:?}");
    let a: Vec<Attempt> = ws.attempts().into_iter().filter(|a| a.task_ref == "T1").collect();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "failed"), "{a:?}");
    assert!(a[0].dispatched_at_ms.is_some(), "it was dispatched: {a:?}");
    let task_id = a[0].handle.as_ref().and_then(|h| h["task_id"].as_str()).unwrap_or_default().to_string();
    assert_eq!(cancels[0]["params"]["taskId"], task_id.as_str(), "the task the ledger names was cancelled");
    assert_eq!((a[0].class(), a[0].rule()), ("provider_unavailable", "observed_effect_absent"), "{a:?}");
    assert!(ws.mcp_deliveries().is_empty(), "cancelled before its effect");
}
