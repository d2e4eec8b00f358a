//! `@modelcontextprotocol/server-everything`: its `simulate-research-query`
//! requires task augmentation. Over stdio and over Streamable HTTP: the
//! task id arrives before the result, the result is the receipt, and a task
//! is found again by its handle after the client that started it is gone.

use std::sync::Arc;
use std::time::Duration;

use providers::mcp::{McpConfig, McpProvider};
use providers::{Handle, Outcome, Progress, Provider, Receipt, Resumed};
use serde_json::json;

use crate::support::*;

fn research(ws: &std::path::Path, op: &str) -> providers::Call {
    call(ws, op, json!({"tool": "simulate-research-query", "arguments": {"topic": "tides"}}))
}

/// Dispatch in the background; return the handle as it arrives and the
/// still-running call.
async fn until_handle(p: &Arc<McpProvider>, c: &providers::Call) -> (Handle, String, tokio::task::JoinHandle<Outcome>) {
    let (tx, mut rx) = providers::progress_channel();
    let job = {
        let (p, c) = (Arc::clone(p), c.clone());
        tokio::spawn(async move { p.dispatch(&c, tx).await })
    };
    assert!(matches!(rx.recv().await, Some(Progress::Dispatched { .. })));
    match rx.recv().await {
        Some(Progress::Handle { handle, detail }) => (handle, detail, job),
        other => panic!("expected the task's handle, got {other:?}"),
    }
}

fn report_text(o: Outcome) -> String {
    let r = receipt(o);
    assert_eq!(r.tool_error, None, "{}", r.result.text);
    providers::observe::content_text(&result_of(&r))
}

#[tokio::test]
async fn a_required_task_completes_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let index = node_server("server-everything");
    let p =
        Arc::new(McpProvider::stdio(vec!["node".into(), index.to_string_lossy().into_owned(), "stdio".into()], None));
    let c = research(dir.path(), "op-stdio");
    let (handle, detail, job) = until_handle(&p, &c).await;
    assert!(!job.is_finished(), "the task id came before the result");
    let Handle::McpTask { task_id, session } = &handle;
    assert!(!task_id.is_empty() && session.is_none(), "{handle:?}");
    assert!(detail.contains("working"), "{detail}");
    let text = report_text(job.await.unwrap());
    assert!(text.contains("Research Report: tides"), "{text}");
    // A plain call on the same server process.
    let (o, _) = go(&*p, &call(dir.path(), "op-echo", json!({"tool": "echo", "arguments": {"message": "hi"}}))).await;
    assert!(report_text(o).contains("hi"));
    assert_eq!(p.server_starts(), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn a_required_task_completes_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = everything_http().await;
    let p = Arc::new(McpProvider::new(McpConfig::http(format!("http://127.0.0.1:{port}/mcp"))));
    let c = research(dir.path(), "op-http");
    let (handle, _, job) = until_handle(&p, &c).await;
    assert!(!job.is_finished(), "the task id came before the result");
    let Handle::McpTask { session, .. } = &handle;
    assert!(session.is_some(), "an HTTP task names its session: {handle:?}");
    assert!(report_text(job.await.unwrap()).contains("Research Report: tides"));
    let (o, progress) =
        go(&*p, &call(dir.path(), "op-echo", json!({"tool": "echo", "arguments": {"message": "hi"}}))).await;
    assert!(report_text(o).contains("hi"));
    assert!(matches!(progress.as_slice(), [Progress::Dispatched { .. }]), "{progress:?}");
    assert_eq!(p.server_starts(), 1, "one session for the run");
    p.shutdown().await;
}

/// The client that started the task is gone (as after a crash: no
/// shutdown, nothing deleted); a new one asks the server by the handle and
/// gets the result without calling the tool again.
#[tokio::test]
async fn a_task_is_found_by_its_handle_after_its_client_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = everything_http().await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let c = research(dir.path(), "op-crash");
    let handle = {
        let first = Arc::new(McpProvider::new(McpConfig::http(url.clone())));
        let (handle, _, job) = until_handle(&first, &c).await;
        job.abort();
        handle
    };
    let second = McpProvider::new(McpConfig::http(url.clone()));
    let mut waiting = c.clone();
    waiting.timeout = Some(Duration::from_secs(30));
    match second.resume(&waiting, &handle).unwrap().await {
        Resumed::Receipt(Receipt::Mcp(r)) => {
            assert_eq!(r.tool_error, None);
            let text = providers::observe::content_text(&result_of(&r));
            assert!(text.contains("Research Report: tides"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // The second client's own session (opened to ask) is not the task's.
    assert_eq!(second.server_starts(), 1);
    // An id the server never gave, in that session: inconclusive.
    let Handle::McpTask { session, .. } = handle.clone();
    let unknown = Handle::McpTask { task_id: "no-such-task".into(), session: session.clone() };
    assert!(matches!(second.resume(&waiting, &unknown).unwrap().await, Resumed::Inconclusive { .. }));
    // A session the server does not have: inconclusive.
    let Handle::McpTask { task_id, .. } = handle;
    let gone = Handle::McpTask { task_id, session: Some("no-such-session".into()) };
    match second.resume(&waiting, &gone).unwrap().await {
        Resumed::Inconclusive { evidence } => assert!(!evidence.is_empty()),
        other => panic!("{other:?}"),
    }
}
