//! The MCP provider against the fixture server (`fixtures/mcp/server.py`):
//! the session's lifetime, stderr attribution, turns, deadlines, tasks and
//! read-back. The official servers are driven in `providers/tests/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::{Decider, LostReason, McpReceipt, NotDispatchedKind, Observation, Progress, Receipt, Verdict};

pub(super) fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/server.py").to_string_lossy().into_owned()
}

pub(super) struct Env {
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
}

pub(super) fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("deliveries.jsonl");
    Env { dir, log }
}

impl Env {
    pub(super) fn command(&self, flags: &[&str]) -> Vec<String> {
        let mut command =
            vec!["python3".to_string(), fixture(), "--log".into(), self.log.to_string_lossy().into_owned()];
        command.extend(flags.iter().map(|f| f.to_string()));
        command
    }

    fn provider(&self, flags: &[&str]) -> McpProvider {
        McpProvider::stdio(self.command(flags), Some("operation_status".into()))
    }

    pub(super) fn call(&self, tool: &str, arguments: Value) -> Call {
        Call {
            operation_id: "op-7".into(),
            try_no: 2,
            request: json!({"tool": tool, "arguments": arguments}),
            workspace: self.dir.path().to_path_buf(),
            timeout: Some(Duration::from_secs(20)),
            output_bytes_max: 1 << 20,
            stdin: None,
            env: vec![],
            secrets: vec![],
            sandbox: crate::sandbox::Sandbox::disabled(),
            traceparent: None,
        }
    }

    pub(super) fn deliveries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

pub(super) async fn go(p: &McpProvider, c: &Call) -> (Outcome, Vec<Progress>) {
    let (tx, mut rx) = crate::progress_channel();
    let o = p.dispatch(c, tx).await;
    let mut seen = Vec::new();
    while let Ok(m) = rx.try_recv() {
        seen.push(m);
    }
    (o, seen)
}

pub(super) fn receipt(o: Outcome) -> McpReceipt {
    match o {
        Outcome::Received(Receipt::Mcp(r)) => r,
        other => panic!("expected an MCP receipt, got {other:?}"),
    }
}

fn dispatched_detail(progress: &[Progress]) -> &str {
    match progress.first() {
        Some(Progress::Dispatched { detail }) => detail,
        other => panic!("expected Dispatched first, got {other:?}"),
    }
}

/// The server's pid from a Dispatched detail (`... MCP server pid N ...`).
fn server_pid(progress: &[Progress]) -> i32 {
    let d = dispatched_detail(progress);
    let after = d.split("pid ").nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn meta_carries_operation_id_and_try() {
    let e = env();
    let p = e.provider(&[]);
    let (o, progress) = go(&p, &e.call("render", json!({"doc": "d1"}))).await;
    let r = receipt(o);
    assert_eq!(r.tool_error, None);
    // (No exit status or deadline: an MCP receipt has none.)
    assert_eq!(r.http_status, None);
    let result: Value = serde_json::from_str(&r.result.text).unwrap();
    assert_eq!(result["structuredContent"], json!({"key": "op-7", "try": 2}));
    assert!(r.stderr.text.contains("delivered op-7 try 2"), "{:?}", r.stderr);
    let d = e.deliveries();
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0]["key"].as_str(), d[0]["try"].as_i64(), &d[0]["arguments"]),
        (Some("op-7"), Some(2), &json!({"doc": "d1"}))
    );
    assert_eq!(progress.len(), 1, "{progress:?}");
    let detail = dispatched_detail(&progress);
    assert!(detail.contains("tools/call `render`") && detail.contains("op-7"), "{detail}");
}

#[tokio::test]
async fn one_server_serves_every_call_and_each_gets_its_own_stderr() {
    let e = env();
    let p = e.provider(&[]);
    let mut pids = Vec::new();
    for n in 1..=4 {
        let mut c = e.call("render", json!({"n": n}));
        c.operation_id = format!("op-{n}");
        let (o, progress) = go(&p, &c).await;
        let r = receipt(o);
        pids.push(server_pid(&progress));
        // What the server wrote during this call, and nothing of the others.
        assert!(r.stderr.text.contains(&format!("delivered op-{n} try 2")), "{n}: {:?}", r.stderr.text);
        for other in (1..=4).filter(|m| *m != n) {
            assert!(!r.stderr.text.contains(&format!("op-{other} ")), "{n}: {:?}", r.stderr.text);
        }
        // The start-up line belongs to the call that started the server.
        assert_eq!(r.stderr.text.contains("started, pid"), n == 1, "{n}: {:?}", r.stderr.text);
    }
    assert!(pids.iter().all(|p| *p == pids[0]), "{pids:?}");
    assert_eq!(p.server_starts(), 1);
    assert_eq!(e.deliveries().len(), 4);
    // A read-back goes to the same server.
    let o = p.observe(&e.call("render", json!({}))).unwrap().await;
    assert!(matches!(o, Observation::EffectAbsent { .. }), "op-7 was never sent: {o:?}");
    assert_eq!(p.server_starts(), 1);
    p.shutdown().await;
    assert!(crate::test_support::wait_gone(pids[0], Duration::from_secs(5)).await, "server left running");
}

#[tokio::test]
async fn is_error_and_rpc_error_become_tool_error() {
    let e = env();
    let p = e.provider(&[]);
    let r = receipt(go(&p, &e.call("fail", json!({"template": "x"}))).await.0);
    assert_eq!(r.tool_error.as_deref(), Some("cannot render: template `x` not found"));
    assert!(r.result.text.contains("\"isError\":true"), "{}", r.result.text);
    // A tool the server does not list is never called.
    match go(&p, &e.call("no_such_tool", json!({}))).await.0 {
        Outcome::NotDispatched(nd) => {
            assert_eq!(nd.kind, NotDispatchedKind::BadRequest);
            assert!(nd.message.contains("does not offer tool `no_such_tool`"), "{}", nd.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.deliveries().is_empty());
}

/// Issue 24 item 8, in the provider: no `tools/call` without the server's
/// inventory, and none to another server that came up behind the same
/// command after the first one died.
#[tokio::test]
async fn no_call_without_an_inventory_nor_to_another_server_after_a_restart() {
    let e = env();
    let p = e.provider(&["--fail-tools-list"]);
    match go(&p, &e.call("render", json!({}))).await.0 {
        Outcome::NotDispatched(nd) => assert!(nd.message.contains("inventory unavailable"), "{}", nd.message),
        other => panic!("{other:?}"),
    }
    assert!(e.deliveries().is_empty(), "nothing called");

    // Each start of this command is a new version of the server.
    let count = e.dir.path().join("starts");
    // The counter's path is the script's first argument, not part of its text.
    let script = r#"c=$1; shift; n=$(cat "$c" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$c"; MCP_SERVER_VERSION=$n exec "$@""#;
    let mut command = vec!["sh".to_string(), "-c".into(), script.into(), "sh".into(), count.to_str().unwrap().into()];
    command.extend(e.command(&[]));
    let p = McpProvider::stdio(command, None);
    let inv = p.list_tools(&e.call("render", json!({}))).unwrap().await.unwrap();
    assert_eq!(inv.server, Some(crate::ServerInfo { name: "engine-mcp-fixture".into(), version: "1".into() }));
    assert_eq!(inv.protocol, "2025-11-25");
    assert!(inv.tools.iter().any(|t| t.name == "render"));
    let (o, _) = go(&p, &e.call("crash", json!({}))).await;
    assert!(matches!(o, Outcome::Lost { .. }), "{o:?}");
    match go(&p, &e.call("render", json!({}))).await.0 {
        Outcome::NotDispatched(nd) => {
            assert!(nd.message.contains("engine-mcp-fixture 1 then, engine-mcp-fixture 2 now"), "{}", nd.message)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.server_starts(), 2);
    assert_eq!(e.deliveries().len(), 1, "only the crash's effect");
}

#[tokio::test]
async fn a_server_that_dies_loses_its_call_and_is_restarted_for_the_next() {
    let e = env();
    let p = e.provider(&[]);
    let (o, progress) = go(&p, &e.call("crash", json!({}))).await;
    let first = server_pid(&progress);
    match o {
        Outcome::Lost { reason: LostReason::ResponseLost, detail } => {
            assert!(detail.contains("before answering tools/call"), "{detail}");
            assert!(detail.contains("crashing after the effect"), "stderr tail in the detail: {detail}");
        }
        other => panic!("{other:?}"),
    }
    let (o, progress) = go(&p, &e.call("render", json!({}))).await;
    receipt(o);
    assert_ne!(server_pid(&progress), first);
    assert_eq!(p.server_starts(), 2);
    assert_eq!(e.deliveries().len(), 2);
    // The flag form: the effect, then the crash.
    let p = e.provider(&["--crash-after-effect"]);
    let (o, _) = go(&p, &e.call("render", json!({}))).await;
    assert!(matches!(o, Outcome::Lost { reason: LostReason::ResponseLost, .. }), "{o:?}");
    assert_eq!(e.deliveries().len(), 3);
}

#[tokio::test]
async fn deadline_after_dispatch_is_lost_and_the_group_is_killed() {
    let e = env();
    let pidfile = e.dir.path().join("grandchild.pid");
    let mut c = e.call("hang", json!({"pidfile": pidfile}));
    c.timeout = Some(Duration::from_secs(2));
    let t = Instant::now();
    let p = e.provider(&[]);
    let (o, progress) = go(&p, &c).await;
    assert!(t.elapsed() < Duration::from_secs(8), "took {:?}", t.elapsed());
    match &o {
        Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, detail } => {
            assert!(detail.contains("killed"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(progress.len(), 1);
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let dead = crate::test_support::wait_gone(pid, Duration::from_secs(2)).await;
    assert!(dead, "the server's grandchild {pid} survived the call");
    // The next call gets a new server.
    receipt(go(&p, &e.call("render", json!({}))).await.0);
    assert_eq!(p.server_starts(), 2);
}

#[tokio::test]
async fn deadline_during_initialize_is_not_dispatched() {
    let e = env();
    // A "server" that never answers.
    let p = McpProvider::stdio(vec!["sleep".into(), "30".into()], None);
    let mut c = e.call("render", json!({}));
    c.timeout = Some(Duration::from_millis(500));
    let (o, progress) = go(&p, &c).await;
    match o {
        Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::DeadlineBeforeDispatch, "{nd:?}"),
        other => panic!("{other:?}"),
    }
    assert!(progress.is_empty());
}

#[tokio::test]
async fn missing_executable_and_bad_requests_are_not_dispatched() {
    let e = env();
    let p = McpProvider::stdio(vec!["/nonexistent/mcp-server".into()], None);
    match go(&p, &e.call("render", json!({}))).await.0 {
        Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::ExecutableMissing),
        other => panic!("{other:?}"),
    }
    let p = e.provider(&[]);
    for req in [json!({}), json!({"tool": ""}), json!({"tool": "render", "arguments": [1]})] {
        let mut c = e.call("render", json!({}));
        c.request = req;
        match go(&p, &c).await.0 {
            Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::BadRequest),
            other => panic!("{other:?}"),
        }
    }
    assert!(e.deliveries().is_empty());
    assert_eq!(p.server_starts(), 0, "a bad request starts nothing");
}

#[tokio::test]
async fn initialize_failure_is_not_dispatched() {
    let e = env();
    let (o, progress) = go(&e.provider(&["--fail-initialize"]), &e.call("render", json!({}))).await;
    match o {
        Outcome::NotDispatched(nd) => {
            assert_eq!(nd.kind, NotDispatchedKind::Other);
            assert!(nd.message.contains("before answering initialize"), "{}", nd.message);
            assert!(nd.message.contains("refusing to initialize"), "{}", nd.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(progress.is_empty());
    assert!(e.deliveries().is_empty());
}

#[tokio::test]
async fn an_unsupported_protocol_version_is_refused() {
    let e = env();
    let p = e.provider(&["--protocol-version", "2024-11-05"]);
    let (o, progress) = go(&p, &e.call("render", json!({}))).await;
    match o {
        Outcome::NotDispatched(nd) => {
            assert_eq!(nd.kind, NotDispatchedKind::Other);
            assert!(nd.message.contains("protocolVersion \"2024-11-05\""), "{}", nd.message);
            assert!(nd.message.contains("2025-11-25, 2025-06-18, 2025-03-26"), "{}", nd.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(progress.is_empty());
    assert!(e.deliveries().is_empty());
    // An older version we do speak is accepted.
    receipt(go(&e.provider(&["--protocol-version", "2025-03-26"]), &e.call("render", json!({}))).await.0);
}

#[tokio::test]
async fn calls_take_turns_unless_the_server_is_concurrent() {
    let e = env();
    for (concurrent, want) in [(false, 1), (true, 2)] {
        let mut config = McpConfig::stdio(e.command(&["--threaded"]));
        config.concurrent = concurrent;
        let p = Arc::new(McpProvider::new(config));
        let (tx, mut rx) = crate::progress_channel();
        let first = {
            let (p, c) = (Arc::clone(&p), e.call("wait", json!({"ms": 1500})));
            tokio::spawn(async move { p.dispatch(&c, tx).await })
        };
        // The second call starts once the first is on the wire.
        assert!(matches!(rx.recv().await, Some(Progress::Dispatched { .. })));
        let second = receipt(go(&p, &e.call("wait", json!({"ms": 10}))).await.0);
        let first = receipt(first.await.unwrap());
        let seen = |r: &McpReceipt| {
            serde_json::from_str::<Value>(&r.result.text).unwrap()["structuredContent"]["in_flight_at_start"].clone()
        };
        assert_eq!((seen(&first), seen(&second)), (json!(1), json!(want)), "concurrent: {concurrent}");
        assert_eq!(p.server_starts(), 1);
    }
}

#[tokio::test]
async fn observe_by_the_old_tool_and_by_a_read_back_rule() {
    let e = env();
    let p = e.provider(&[]);
    let c = e.call("render", json!({}));
    let obs = p.observe(&c).unwrap().await;
    assert!(matches!(obs, Observation::EffectAbsent { .. }), "{obs:?}");
    receipt(go(&p, &c).await.0);
    match p.observe(&c).unwrap().await {
        Observation::EffectPresent { evidence } => {
            assert!(evidence.contains("operation_status") && evidence.contains("present"), "{evidence}")
        }
        other => panic!("{other:?}"),
    }
    // A task's own rule: a tool that does not say is inconclusive.
    let rule = json!({"tool": "operation_status", "arguments": {"operation_id": "{operation_id}"},
                      "present_if": {"json": {"/structuredContent/deliveries": 1}}});
    let r = p.read_back(&c, Some(&rule)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Present, Decider::PresentIf), "{r:?}");
    assert_eq!(r.request, json!({"tool": "operation_status", "arguments": {"operation_id": "op-7"}}));
    assert_eq!(r.answer["result"]["structuredContent"]["deliveries"], 1);
    let mut other = c.clone();
    other.operation_id = "op-none".into();
    let r = p.read_back(&other, Some(&rule)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NeitherMatched), "no absent_if declared");
    // A JSON-RPC error is no answer.
    let r = p.read_back(&c, Some(&json!({"tool": "nope", "absent_if": {"text_contains": "unknown"}}))).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NoAnswer), "{r:?}");
    assert!(r.failure.unwrap().contains("-32602"));
    // No rule at all: cannot observe; a server that cannot start: inconclusive.
    let q = McpProvider::stdio(e.command(&[]), None);
    assert!(q.observe(&c).is_none());
    let dead = McpProvider::stdio(vec!["/nonexistent/x".into()], Some("operation_status".into()));
    assert!(matches!(dead.observe(&c).unwrap().await, Observation::Inconclusive { .. }));
}

#[tokio::test]
async fn over_long_answer_is_truncated_and_recorded() {
    let e = env();
    // The bound is above the server's tools/list answer (read on the same
    // link, under the same line bound, before any call).
    let mut c = e.call("fail", json!({"template": "x".repeat(20000)}));
    c.output_bytes_max = 4000;
    let r = receipt(go(&e.provider(&[]), &c).await.0);
    assert!(r.result.truncated && r.result.total_bytes > 20000, "{:?}", r.result.total_bytes);
    assert_eq!(r.result.text.len(), 4000);
    assert!(r.tool_error.unwrap().contains("over the 4000-byte bound"));
}

#[tokio::test]
async fn secrets_redacted() {
    let e = env();
    let mut c = e.call("fail", json!({"template": "hunter2"}));
    c.secrets = vec!["hunter2".into()];
    let r = receipt(go(&e.provider(&[]), &c).await.0);
    assert!(!r.result.text.contains("hunter2"), "{}", r.result.text);
    assert_eq!(r.tool_error.as_deref(), Some("cannot render: template `[REDACTED]` not found"));
}

#[tokio::test]
async fn a_task_reports_its_id_before_the_result() {
    let e = env();
    let p = Arc::new(e.provider(&["--tasks"]));
    let (tx, mut rx) = crate::progress_channel();
    let c = e.call("render_later", json!({"ms": 1500}));
    let call = {
        let (p, c) = (Arc::clone(&p), c.clone());
        tokio::spawn(async move { p.dispatch(&c, tx).await })
    };
    assert!(matches!(rx.recv().await, Some(Progress::Dispatched { .. })));
    let handle = match rx.recv().await {
        Some(Progress::Handle { handle, detail }) => {
            assert!(detail.contains("working"), "{detail}");
            handle
        }
        other => panic!("{other:?}"),
    };
    assert!(!call.is_finished(), "the handle came before the result");
    assert!(e.deliveries().is_empty(), "and before the effect");
    let r = receipt(call.await.unwrap());
    assert_eq!(r.tool_error, None);
    let result: Value = serde_json::from_str(&r.result.text).unwrap();
    assert_eq!(result["structuredContent"], json!({"key": "op-7", "try": 2}));
    assert!(r.stderr.text.contains("as task"), "{:?}", r.stderr.text);
    assert_eq!(e.deliveries().len(), 1);
    // Asked again by its handle: the same result, nothing sent again.
    match p.resume(&c, &handle).unwrap().await {
        Resumed::Receipt(Receipt::Mcp(again)) => assert_eq!(again.result.text, r.result.text),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.deliveries().len(), 1);
}

#[tokio::test]
async fn task_failure_deadline_cancel_and_unknown_handles() {
    let e = env();
    let p = e.provider(&["--tasks"]);
    let r = receipt(go(&p, &e.call("render_later", json!({"fail": true}))).await.0);
    assert_eq!(r.tool_error.as_deref(), Some("render_later failed on purpose"));
    // The deadline cancels the task: its effect never happens.
    let mut c = e.call("render_later", json!({"ms": 2500}));
    c.timeout = Some(Duration::from_millis(800));
    let (o, progress) = go(&p, &c).await;
    match &o {
        Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, detail } => {
            assert!(detail.contains("tasks/cancel answered cancelled"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    let Some(Progress::Handle { handle, .. }) = progress.get(1) else { panic!("{progress:?}") };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(e.deliveries().is_empty(), "a cancelled task did its effect");
    match p.resume(&c, handle).unwrap().await {
        Resumed::Receipt(Receipt::Mcp(r)) => assert!(r.tool_error.unwrap().contains("cancelled")),
        other => panic!("{other:?}"),
    }
    // Still running, looked at once; then cancelled by a person.
    let started = go_until_handle(&p, &e.call("render_later", json!({"ms": 5000}))).await;
    let mut once = c.clone();
    once.timeout = None;
    assert!(matches!(p.resume(&once, &started).unwrap().await, Resumed::Running { .. }));
    let cancelled = p.cancel(&once, &started).unwrap().await;
    assert!(cancelled.confirmed, "{cancelled:?}");
    assert!(!p.cancel(&once, &started).unwrap().await.confirmed, "already ended");
    // A task id the server never gave: inconclusive, never a receipt.
    let unknown = Handle::McpTask { task_id: "no-such-task".into(), session: None };
    match p.resume(&c, &unknown).unwrap().await {
        Resumed::Inconclusive { evidence } => assert!(evidence.contains("does not know"), "{evidence}"),
        other => panic!("{other:?}"),
    }
    // After the server restarted, its old tasks are unknown to it.
    p.shutdown().await;
    assert!(matches!(p.resume(&c, handle).unwrap().await, Resumed::Inconclusive { .. }));
}

/// Start a task call and return its handle (the call goes on in the background).
pub(super) async fn go_until_handle(p: &McpProvider, c: &Call) -> Handle {
    let (tx, mut rx) = crate::progress_channel();
    let mut fut = p.dispatch(c, tx);
    loop {
        tokio::select! {
            _ = &mut fut => panic!("the call ended before its handle came"),
            Some(m) = rx.recv() => if let Progress::Handle { handle, .. } = m { return handle },
        }
    }
}

#[tokio::test]
async fn drop_kills_the_server() {
    let e = env();
    let p = e.provider(&[]);
    let (_, progress) = go(&p, &e.call("render", json!({}))).await;
    let pid = server_pid(&progress);
    drop(p);
    assert!(crate::test_support::wait_gone(pid, Duration::from_secs(5)).await);
}

#[test]
fn identity_and_config() {
    let p = McpProvider::stdio(vec!["srv".into()], None);
    assert_eq!(p.identity(), json!({"kind": "mcp", "command": ["srv"], "observe_tool": null}));
    let p = McpProvider::from_config(&json!({"kind": "mcp", "url": "https://127.0.0.1:8443/mcp", "concurrent": true,
        "observe": {"tool": "read", "present_if": {"text_contains": "x"}}}))
    .unwrap();
    assert_eq!(
        p.identity(),
        json!({"kind": "mcp", "url": "https://127.0.0.1:8443/mcp", "observe_tool": null, "concurrent": true,
               "observe": {"tool": "read", "arguments": {}, "present_if": {"text_contains": "x"}}})
    );
    p.check().unwrap();
    let err = |v: Value| McpProvider::from_config(&v).unwrap_err();
    assert_eq!(err(json!({"kind": "mcp"})).path, "");
    assert_eq!(err(json!({"kind": "mcp", "command": ["a"], "url": "u"})).path, "");
    assert_eq!(err(json!({"kind": "mcp", "command": []})).path, "command");
    assert_eq!(err(json!({"kind": "mcp", "command": ["a"], "observe": {"tool": "t"}})).path, "observe");
    assert_eq!(
        err(json!({"kind": "mcp", "command": ["a"], "observe_tool": "s", "observe": {"tool": "t"}})).path,
        "observe"
    );
    assert_eq!(err(json!({"kind": "mcp", "command": ["a"], "concurrent": 1})).path, "concurrent");
    let remote = McpProvider::from_config(&json!({"kind": "mcp", "url": "https://mcp.example.com/mcp"})).unwrap();
    assert_eq!(remote.check().unwrap_err().path, "url");
    let listed = json!({"kind": "mcp", "url": "https://mcp.example.com/mcp", "hosts": ["mcp.example.com"], "ca_file": "/no/ca.pem"});
    assert_eq!(McpProvider::from_config(&listed).unwrap().check().unwrap_err().path, "ca_file");
}

/// `ask`: how long a question is held open for a person, bounded; not
/// part of the provider's identity (it changes no request).
#[test]
fn ask_holds_questions_open_for_a_bounded_time() {
    let with = |ask: Value| McpProvider::from_config(&json!({"kind": "mcp", "command": ["a"], "ask": ask}));
    let p = with(json!({"wait_seconds": 90})).unwrap();
    assert_eq!(p.config().ask_wait, std::time::Duration::from_secs(90));
    assert!(p.holds_questions());
    assert_eq!(p.identity(), McpProvider::stdio(vec!["a".into()], None).identity());
    assert!(!with(json!({"wait_seconds": 0})).unwrap().holds_questions());
    assert!(!McpProvider::stdio(vec!["a".into()], None).holds_questions(), "default: dismissed at once");
    let most = with(json!({"wait_seconds": super::ASK_WAIT_SECONDS_MAX})).unwrap();
    assert_eq!(most.config().ask_wait.as_secs(), 3600);
    for (ask, path) in [
        (json!({"wait_seconds": 3601}), "ask.wait_seconds"),
        (json!({"wait_seconds": -1}), "ask.wait_seconds"),
        (json!({"wait_seconds": 1.5}), "ask.wait_seconds"),
        (json!({}), "ask.wait_seconds"),
        (json!({"wait_seconds": 5, "forever": true}), "ask.forever"),
        (json!(30), "ask"),
    ] {
        assert_eq!(with(ask.clone()).unwrap_err().path, path, "{ask}");
    }
}
