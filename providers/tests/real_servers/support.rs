//! Shared pieces: the pinned Node packages, calls, progress, servers.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use providers::{Call, HttpReceipt, McpReceipt, Outcome, Progress, Provider, Receipt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `dist/index.js` of a pinned `@modelcontextprotocol/<package>`; fails
/// (never skips) saying exactly what to run when it is missing.
pub fn node_server(package: &str) -> PathBuf {
    node::node_server(&repo(), package)
}

// The engine's tests use more of it (the conformance kit).
#[allow(dead_code)]
#[path = "../../../tests/support/node.rs"]
mod node;

pub fn call(workspace: &Path, operation_id: &str, request: Value) -> Call {
    Call {
        operation_id: operation_id.into(),
        try_no: 1,
        request,
        workspace: workspace.to_path_buf(),
        timeout: Some(Duration::from_secs(60)),
        output_bytes_max: 1 << 20,
        stdin: None,
        env: vec![],
        secrets: vec![],
        sandbox: providers::sandbox::Sandbox::disabled(),
        traceparent: None,
    }
}

pub async fn go(p: &dyn Provider, c: &Call) -> (Outcome, Vec<Progress>) {
    let (tx, mut rx) = providers::progress_channel();
    let o = p.dispatch(c, tx).await;
    let mut seen = Vec::new();
    while let Ok(m) = rx.try_recv() {
        seen.push(m);
    }
    (o, seen)
}

pub fn receipt(o: Outcome) -> McpReceipt {
    match o {
        Outcome::Received(Receipt::Mcp(r)) => r,
        other => panic!("expected an MCP receipt, got {other:?}"),
    }
}

pub fn http_receipt(o: Outcome) -> HttpReceipt {
    match o {
        Outcome::Received(Receipt::Http(r)) => r,
        other => panic!("expected an HTTP receipt, got {other:?}"),
    }
}

/// The JSON an MCP receipt's result holds.
pub fn result_of(r: &McpReceipt) -> Value {
    serde_json::from_str(&r.result.text).unwrap()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Wait until something accepts connections on `port`.
pub async fn wait_listening(port: u16, child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the server exited ({st}) before listening on {port}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on {port} after 30 s");
}

/// server-everything over Streamable HTTP on a loopback port.
pub async fn everything_http() -> (Child, u16) {
    let index = node_server("server-everything");
    let port = free_port();
    let mut child = Command::new("node")
        .arg(&index)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts server-everything");
    wait_listening(port, &mut child).await;
    (child, port)
}

/// The receiver fixture on a free port: (child, base URL).
pub async fn receiver(log: &Path) -> (Child, String) {
    let script = repo().join("fixtures/receiver/receiver.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args(["--port", "0", "--log"])
        .arg(log)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs the receiver fixture");
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    tokio::time::timeout(Duration::from_secs(10), out.read_line(&mut line)).await.unwrap().unwrap();
    let port: u16 = line.trim().strip_prefix("listening ").unwrap().parse().unwrap();
    (child, format!("http://127.0.0.1:{port}"))
}
