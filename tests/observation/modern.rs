//! MCP 2026-07-28 through the engine, with the project's fixtures in their
//! modern era (`server.py --era modern`, `http_server.py`), judged from
//! what the server really received (`--received`): the revision
//! negotiated and recorded; a task id of the tasks extension committed and
//! polled again after the engine was SIGKILLed; a response stream broken
//! after the request was written is `effect_unknown`, never sent again.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

fn received(ws: &Ws) -> Vec<Value> {
    read_json_lines(&ws.side.join("received.jsonl"))
}

fn count(ws: &Ws, method: &str) -> usize {
    received(ws).iter().filter(|m| m["method"] == method).count()
}

/// `fixtures/mcp/http_server.py` on a loopback port; killed on drop.
struct HttpFixture {
    child: Child,
    url: String,
}

impl HttpFixture {
    fn start(ws: &Ws, flags: &[&str]) -> HttpFixture {
        let port_file = ws.side.join("port");
        let child = Command::new("python3")
            .arg(repo_root().join("fixtures/mcp/http_server.py"))
            .arg("--log")
            .arg(ws.mcp_log())
            .arg("--port-file")
            .arg(&port_file)
            .arg("--received")
            .arg(ws.side.join("received.jsonl"))
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts http_server.py");
        let port = wait_until(Duration::from_secs(20), "http_server.py listening", || {
            std::fs::read_to_string(&port_file).ok()
        });
        HttpFixture { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn task(tool: &str, arguments: Value, effect: &str) -> Value {
    json!({"ref": "T1", "title": tool, "provider": "fx", "effect": effect,
           "action": {"tool": tool, "arguments": arguments},
           "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})
}

#[test]
fn a_modern_stdio_server_is_negotiated_and_recorded() {
    let ws = Ws::new();
    let received: PathBuf = ws.side.join("received.jsonl");
    let command = mcp_server_command(&ws.mcp_log(), &["--era", "modern", "--received", received.to_str().unwrap()]);
    ws.write_plan(
        "plan.json",
        &plan(json!({"fx": {"kind": "mcp", "command": command}}), vec![task("render", json!({}), "local")]),
    );
    ws.run().expect(0, None);
    let inventory = ws.events_of("tool_inventory");
    assert_eq!(inventory[0].2["protocol"], "2026-07-28", "{inventory:?}");
    assert_eq!(count(&ws, "initialize"), 0, "no handshake");
    assert_eq!(count(&ws, "server/discover"), 1);
    assert_eq!(count(&ws, "tools/call"), 1);
    let a = ws.attempts();
    assert!(a[0].dispatch_detail.as_deref().unwrap_or("").contains("MCP 2026-07-28"), "{a:?}");
}

/// The tasks extension: the server made a task of the call on its own; its
/// id is in the ledger before the engine is SIGKILLed; the next run polls
/// `tasks/get` for it (the server kept it) and records its result, with no
/// second `tools/call`.
#[test]
fn a_modern_task_is_polled_again_after_the_engine_was_killed() {
    let ws = Ws::new();
    let server = HttpFixture::start(&ws, &["--tasks"]);
    let provider = json!({"kind": "mcp", "url": server.url});
    ws.write_plan(
        "plan.json",
        &plan(json!({"fx": provider}), vec![task("render_later", json!({"ms": 1500}), "external")]),
    );
    let first = ws.run_fp("after_handle");
    assert!(first.killed(), "expected the failpoint's SIGKILL\n{}", first.describe());
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "dispatched"), "{a:?}");
    let handle = a[0].handle.clone().expect("the task id was committed");
    assert_eq!(handle["kind"], "mcp_task");
    assert!(handle.get("session").is_none(), "no session under 2026-07-28: {handle}");
    let task_id = handle["task_id"].as_str().unwrap().to_string();
    assert!(ws.receipt_of(a[0].id).is_none());
    let gets_before = count(&ws, "tasks/get");

    let second = ws.run();
    second.expect(0, None);
    assert_eq!(count(&ws, "tools/call"), 1, "never sent again");
    let gets: Vec<Value> = received(&ws).into_iter().filter(|m| m["method"] == "tasks/get").collect();
    assert!(gets.len() > gets_before, "polled after the restart");
    assert!(gets.iter().all(|g| g["params"]["taskId"] == task_id.as_str()), "{gets:?}");
    assert_eq!(count(&ws, "tasks/result"), 0, "2026-07-28 has no tasks/result");
    let receipt = ws.receipt_of(a[0].id).unwrap();
    assert_eq!(receipt["source"], "handle", "{receipt}");
    assert_eq!(ws.attempts()[0].state, "succeeded");
    assert_eq!(ws.mcp_deliveries().len(), 1, "the effect happened once");
}

/// SEP-2575: a broken response stream loses the request. The server read
/// the `tools/call` and dropped the connection: the attempt is
/// `effect_unknown` (exit 3), and neither this run nor the next sends it
/// again.
#[test]
fn a_stream_broken_after_the_request_was_written_is_effect_unknown() {
    let ws = Ws::new();
    let server = HttpFixture::start(&ws, &["--drop-after-request"]);
    let provider = json!({"kind": "mcp", "url": server.url});
    ws.write_plan("plan.json", &plan(json!({"fx": provider}), vec![task("render", json!({}), "external")]));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "effect_unknown"), "{a:?}");
    assert_eq!(count(&ws, "tools/call"), 1);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(count(&ws, "tools/call"), 1, "no silent resend");
    assert_eq!(ws.attempts().len(), 1);
}
