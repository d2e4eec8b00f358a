//! Issue 40: a 2025-11-25 server's event streams, end to end with the real
//! binary against a scripted server (`fixtures/mcp/sse_server.py`) that
//! ends a `tools/call`'s stream one way, byte for byte, and logs every
//! HTTP request it read and every delivery of its tool. A stream the
//! server ended at its framed end after an event id is resumed with
//! `Last-Event-ID` and the call is sent once; a stream that broke is a
//! lost answer (`effect_unknown`), never resumed nor sent again; the
//! session's own GET stream brings the server's progress to the call in
//! flight. MCP's conformance kit (`conformance::sse_retry`,
//! `conformance::elicitation_sep1034_client_defaults`) drives the same
//! paths against its own servers.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

struct SseServer {
    child: Child,
    url: String,
    received: PathBuf,
}

impl SseServer {
    fn start(ws: &Ws, stream: &str) -> SseServer {
        let (port_file, received) = (ws.side.join("port"), ws.side.join("received.jsonl"));
        let child = Command::new("python3")
            .arg(repo_root().join("fixtures/mcp/sse_server.py"))
            .args(["--stream", stream, "--port-file"])
            .arg(&port_file)
            .arg("--received")
            .arg(&received)
            .arg("--log")
            .arg(ws.mcp_log())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts sse_server.py");
        let port = wait_until(Duration::from_secs(20), "sse_server.py listening", || {
            std::fs::read_to_string(&port_file).ok().filter(|p| !p.is_empty())
        });
        SseServer { child, url: format!("http://127.0.0.1:{port}/mcp"), received }
    }

    /// Every HTTP request the server read, in order.
    fn received(&self) -> Vec<Value> {
        read_json_lines(&self.received)
    }

    fn calls(&self) -> usize {
        self.received().iter().filter(|r| r["method"] == "tools/call").count()
    }

    /// The GETs that asked for a stream from an event (resumptions).
    fn resumptions(&self) -> Vec<Value> {
        self.received().into_iter().filter(|r| r["http"] == "GET" && !r["last_event_id"].is_null()).collect()
    }
}

impl Drop for SseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn one_call(ws: &Ws, server: &SseServer) {
    let task = json!({"ref": "T1", "title": "render", "provider": "fx", "effect": "external",
                      "action": {"tool": "render", "arguments": {}}, "timeout_seconds": 30});
    ws.write_plan("plan.json", &plan(json!({"fx": {"kind": "mcp", "url": server.url}}), vec![task]));
}

/// The server ends the call's stream at its framed end after a priming
/// event (`id: e1`, `retry: 200`) and no answer: the engine asks for the
/// stream again from `e1` (a GET with `Last-Event-ID: e1`), reads the
/// answer there, and the task succeeds, the call delivered once.
#[test]
fn a_stream_the_server_ended_before_its_answer_is_resumed_from_its_last_event_and_sent_once() {
    let ws = Ws::new();
    let server = SseServer::start(&ws, "clean");
    one_call(&ws, &server);
    ws.run().expect(0, None);
    assert_eq!(server.calls(), 1, "{:#?}", server.received());
    let resumed = server.resumptions();
    assert_eq!(resumed.len(), 1, "{:#?}", server.received());
    assert_eq!(resumed[0]["last_event_id"], "e1");
    let delivered = ws.mcp_deliveries();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["operation_id"], json!(ws.op_of("T1")));
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"), "{a:?}");
}

/// The same priming event, then a chunk cut short and the connection
/// closed: the stream broke, so the answer is lost. The attempt is
/// `effect_unknown` (exit 3); the engine neither resumes it (no GET with
/// `Last-Event-ID`, though the server would answer one) nor sends the
/// call again, on this run or the next.
#[test]
fn a_stream_that_broke_after_its_event_id_is_effect_unknown_never_resumed_nor_sent_again() {
    let ws = Ws::new();
    let server = SseServer::start(&ws, "broken");
    one_call(&ws, &server);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "effect_unknown"), "{a:?}");
    assert_eq!((server.calls(), ws.mcp_deliveries().len()), (1, 1));
    assert!(server.resumptions().is_empty(), "a broken stream is not resumed: {:#?}", server.received());
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(server.calls(), 1, "never sent again: {:#?}", server.received());
    assert!(server.resumptions().is_empty());
    assert_eq!(ws.attempts().len(), 1);
}

/// The server sends its progress for the call on the session's own GET
/// stream (not the call's), then a ping there, and answers the call only
/// once the ping's reply came: the engine opened that stream, read it
/// while the call was out, replied to the ping with a POST, and recorded
/// both notes as the call's progress.
#[test]
fn the_sessions_own_stream_brings_the_servers_progress_to_the_call_in_flight() {
    let ws = Ws::new();
    let server = SseServer::start(&ws, "get-progress");
    one_call(&ws, &server);
    ws.run().expect(0, None);
    let received = server.received();
    let opened = received.iter().position(|r| r["http"] == "GET" && r["last_event_id"].is_null());
    let called = received.iter().position(|r| r["method"] == "tools/call");
    assert!(opened.is_some() && called.is_some(), "{received:#?}");
    let pong = received.iter().filter(|r| r["http"] == "POST" && r["method"].is_null() && r["id"] == "srv-ping");
    assert_eq!(pong.count(), 1, "the ping on the session stream was answered: {received:#?}");
    let notes = ws.events_of("provider_progress");
    let said: Vec<&str> = notes.iter().filter_map(|(_, _, d)| d["message"].as_str()).collect();
    assert_eq!(said, ["halfway", "done"], "{notes:?}");
    assert_eq!(ws.mcp_deliveries().len(), 1);
}
