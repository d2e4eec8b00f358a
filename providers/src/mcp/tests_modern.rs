//! The 2026-07-28 revision against the fixture (`--era modern|dual`, and
//! `http_server.py` over Streamable HTTP), judged from what the server
//! really received (`--received`): negotiated by `server/discover`, no
//! `initialize`, `_meta` on every request, the tasks extension, and a
//! broken response stream lost, never sent again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::tests::{env, go, go_until_handle, receipt, Env};
use super::*;
use crate::{LostReason, Progress, Receipt};

pub(super) fn received(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn methods(path: &Path) -> Vec<String> {
    received(path).iter().filter_map(|m| m["method"].as_str().map(str::to_string)).collect()
}

impl Env {
    pub(super) fn received(&self) -> PathBuf {
        self.dir.path().join("received.jsonl")
    }

    pub(super) fn modern(&self, flags: &[&str]) -> McpProvider {
        let received = self.received();
        let mut all = vec!["--era", "modern", "--received", received.to_str().unwrap()];
        all.extend_from_slice(flags);
        McpProvider::stdio(self.command(&all), None)
    }
}

#[tokio::test]
async fn a_modern_server_over_stdio_is_found_by_discovery_and_never_initialized() {
    let e = env();
    let p = e.modern(&[]);
    let inv = p.list_tools(&e.call("render", json!({}))).unwrap().await.unwrap();
    assert_eq!(inv.protocol, "2026-07-28");
    assert_eq!(inv.server.as_ref().map(|s| s.name.as_str()), Some("engine-mcp-fixture"), "from discover's _meta");
    let (o, progress) = go(&p, &e.call("render", json!({}))).await;
    let r = receipt(o);
    assert_eq!(r.tool_error, None, "{r:?}");
    let Some(Progress::Dispatched { detail }) = progress.first() else { panic!("{progress:?}") };
    assert!(detail.contains("MCP 2026-07-28"), "{detail}");
    assert_eq!(methods(&e.received()), ["server/discover", "tools/list", "tools/call"], "no initialize");
    for m in received(&e.received()) {
        assert_eq!(m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{m}");
        assert_eq!(m["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"], "engine", "{m}");
    }
    let call = received(&e.received()).pop().unwrap();
    assert_eq!(
        (call["params"]["_meta"]["operation_id"].as_str(), call["params"]["_meta"]["try"].as_u64()),
        (Some("op-7"), Some(2))
    );
    assert_eq!(e.deliveries().len(), 1);
    assert_eq!(p.server_starts(), 1);
}

#[tokio::test]
async fn a_dual_era_server_speaks_modern_and_a_legacy_one_is_initialized() {
    let e = env();
    let p = e.modern(&["--era", "dual"]);
    assert_eq!(p.list_tools(&e.call("render", json!({}))).unwrap().await.unwrap().protocol, "2026-07-28");
    // The legacy fixture refuses the probe (-32601): initialize follows.
    let legacy_log = e.dir.path().join("legacy.jsonl");
    let q = McpProvider::stdio(e.command(&["--received", legacy_log.to_str().unwrap()]), None);
    let inv = q.list_tools(&e.call("render", json!({}))).unwrap().await.unwrap();
    assert_eq!(inv.protocol, "2025-11-25");
    receipt(go(&q, &e.call("render", json!({}))).await.0);
    let legacy = methods(&legacy_log);
    assert_eq!(legacy, ["server/discover", "initialize", "notifications/initialized", "tools/list", "tools/call"]);
    let call = received(&legacy_log).pop().unwrap();
    assert!(call["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_none(), "{call}");
}

#[tokio::test]
async fn the_tasks_extension_polls_tasks_get_for_the_result_and_resumes_by_handle() {
    let e = env();
    let p = e.modern(&["--tasks"]);
    let c = e.call("render_later", json!({}));
    let handle = go_until_handle(&p, &c).await;
    let Handle::McpTask { task_id, session } = &handle;
    assert_eq!(session, &None, "no session under 2026-07-28");
    let r = receipt(go(&p, &c).await.0);
    assert_eq!(r.tool_error, None, "{r:?}");
    let result: Value = serde_json::from_str(&r.result.text).unwrap();
    assert_eq!(result["structuredContent"]["try"], 2, "{result}");
    // By the first handle, later: tasks/get carries its result; no tasks/result exists.
    let resumed = match p.resume(&c, &handle).unwrap().await {
        Resumed::Receipt(Receipt::Mcp(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(resumed.tool_error, None);
    let sent = received(&e.received());
    assert!(sent.iter().all(|m| m["method"] != "tasks/result"), "no tasks/result in 2026-07-28");
    assert!(sent.iter().any(|m| m["method"] == "tasks/get" && m["params"]["taskId"] == task_id.as_str()));
    let calls = sent.iter().filter(|m| m["method"] == "tools/call").count();
    assert_eq!(calls, 2, "one call per dispatch; resume sent none");
    assert!(
        sent.iter().filter(|m| m["method"] == "tools/call").all(|m| m["params"].get("task").is_none()),
        "the server decides on a task, the client asks for none"
    );
    // A failed tool is a completed task with isError.
    let r = receipt(go(&p, &e.call("render_later", json!({"fail": true}))).await.0);
    assert_eq!(r.tool_error.as_deref(), Some("render_later failed on purpose"));
    // The deadline: tasks/cancel is only acknowledged.
    let mut slow = e.call("render_later", json!({"ms": 3000}));
    slow.timeout = Some(Duration::from_millis(700));
    match go(&p, &slow).await.0 {
        Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, detail } => {
            assert!(detail.contains("tasks/cancel acknowledged"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
}

/// `fixtures/mcp/http_server.py` on a loopback port; killed on drop.
pub(super) struct HttpFixture {
    child: std::process::Child,
    pub url: String,
}

impl HttpFixture {
    pub(super) fn start(e: &Env, flags: &[&str]) -> HttpFixture {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/http_server.py");
        let port_file = e.dir.path().join("port");
        let child = std::process::Command::new("python3")
            .arg(script)
            .args(["--log", e.log.to_str().unwrap(), "--port-file", port_file.to_str().unwrap()])
            .args(["--received", e.received().to_str().unwrap()])
            .args(flags)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p;
            }
            assert!(Instant::now() < until, "http_server.py did not listen");
            std::thread::sleep(Duration::from_millis(50));
        };
        HttpFixture { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_modern_server_over_streamable_http_gets_the_headers_and_no_session() {
    let e = env();
    let server = HttpFixture::start(&e, &["--tasks"]);
    let p = McpProvider::new(McpConfig::http(&server.url));
    let r = receipt(go(&p, &e.call("render", json!({}))).await.0);
    assert_eq!((r.tool_error, r.http_status), (None, None));
    let r = receipt(go(&p, &e.call("render_later", json!({}))).await.0);
    assert_eq!(r.tool_error, None, "a task over HTTP: {r:?}");
    assert_eq!(methods(&e.received())[..3], ["server/discover", "tools/list", "tools/call"]);
    assert_eq!(e.deliveries().len(), 2);
    p.shutdown().await;
}

/// SEP-2575: a broken response stream loses the request. The server read
/// the `tools/call` (its log says so) and dropped the connection: the call
/// is `Lost` (its effect unknown), never sent again on its own.
#[tokio::test]
async fn a_stream_broken_after_the_request_was_written_is_lost_not_resent() {
    let e = env();
    let server = HttpFixture::start(&e, &["--drop-after-request"]);
    let p = McpProvider::new(McpConfig::http(&server.url));
    let (o, progress) = go(&p, &e.call("render", json!({}))).await;
    match o {
        Outcome::Lost { reason: LostReason::ResponseLost, detail } => {
            assert!(detail.contains("tools/call"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(progress.first(), Some(Progress::Dispatched { .. })), "{progress:?}");
    let calls = received(&e.received()).into_iter().filter(|m| m["method"] == "tools/call").count();
    assert_eq!(calls, 1, "the server read it once, and it was not sent again");
}

/// A call abandoned while the server works on it (its future dropped, as a
/// person's stop does) is cancelled the stdio way: the server receives
/// `notifications/cancelled` naming the request — in both revisions.
#[tokio::test]
async fn an_abandoned_call_sends_notifications_cancelled_over_stdio() {
    for era in ["modern", "legacy"] {
        let e = env();
        // Threaded: the server reads on while the call works.
        let p = e.modern(&["--era", era, "--threaded"]);
        let mut c = e.call("wait", json!({"ms": 20000}));
        c.timeout = None;
        let calls = || received(&e.received()).into_iter().filter(|m| m["method"] == "tools/call").count();
        {
            let (tx, _rx) = crate::progress_channel();
            let call = p.dispatch(&c, tx);
            let until = Instant::now() + Duration::from_secs(20);
            tokio::pin!(call);
            while calls() == 0 {
                assert!(Instant::now() < until, "the call never reached the server");
                let _ = tokio::time::timeout(Duration::from_millis(50), &mut call).await;
            }
        } // dropped here, unanswered
        let until = Instant::now() + Duration::from_secs(10);
        let cancelled = loop {
            let all = received(&e.received());
            if let Some(c) = all.iter().find(|m| m["method"] == "notifications/cancelled") {
                break (c.clone(), all);
            }
            assert!(Instant::now() < until, "{era}: no notifications/cancelled reached the server");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (note, all) = cancelled;
        let call_id = all.iter().find(|m| m["method"] == "tools/call").unwrap()["id"].clone();
        assert_eq!(note["params"]["requestId"], call_id, "{era}: {note}");
        p.shutdown().await;
    }
}
