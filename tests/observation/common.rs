//! The observation suite's own vocabulary over the shared harness: the
//! pinned official MCP servers (`fixtures/node/`), each with a record of
//! what it really received — server-filesystem through `tee` (its stdin
//! copied to a log), server-everything over Streamable HTTP behind a tap
//! (a loopback relay that keeps every byte the client sent) — and plans.

#![allow(dead_code, unused_imports)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

pub use crate::support::*;

/// `dist/index.js` of the pinned `@modelcontextprotocol/<package>`; fails
/// (never skips) saying exactly what to run when it is missing.
pub fn node_server(package: &str) -> PathBuf {
    crate::support::node::node_server(&repo_root(), package)
}

/// A goal whose one acceptance check passes.
pub fn plan(providers: Value, tasks: Vec<Value>) -> Value {
    json!({"version": 1,
           "goal": {"id": "obs", "statement": "the effects are there", "acceptance": [
               {"id": "A1", "statement": "the run completed", "check": {"run": ["true"], "expect_exit": 0}}]},
           "budgets": {"max_attempts_per_task": 5},
           "providers": providers, "tasks": tasks})
}

// ------------------------------------------------------------ server-filesystem

/// server-filesystem over stdio, allowed the workspace, started through
/// `sh`: each start appends the shell's pid to `$SIDE/starts.log`, and
/// `tee` copies every byte the engine writes to the server into
/// `$SIDE/stdin.log` — the server's own record of what it was sent.
pub fn filesystem(ws: &Ws) -> Value {
    let index = node_server("server-filesystem");
    json!({"kind": "mcp", "command": [
        "sh", "-c", r#"echo $$ >> "$1/starts.log"; tee -a "$1/stdin.log" | node "$2" "$3""#, "sh",
        ws.side.to_string_lossy(), index.to_string_lossy(), ws.dir.to_string_lossy()]})
}

/// The JSON-RPC messages the server was sent (from the `tee` log).
pub fn sent(ws: &Ws) -> Vec<Value> {
    read_json_lines(&ws.side.join("stdin.log"))
}

/// The `tools/call`s of `tool` the server was sent, with their `_meta`.
pub fn calls_of(ws: &Ws, tool: &str) -> Vec<Value> {
    sent(ws).into_iter().filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool).collect()
}

/// How many times the server was started (pids of its shell).
pub fn starts(ws: &Ws) -> Vec<i32> {
    std::fs::read_to_string(ws.side.join("starts.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A `write_file` task of `content` to `rel` in the workspace.
pub fn write_task(ws: &Ws, task_ref: &str, rel: &str, content: &str) -> Value {
    json!({"ref": task_ref, "title": format!("write {rel}"), "provider": "fs", "effect": "external",
           "action": {"tool": "write_file", "arguments": {"path": ws.path(rel), "content": content}},
           // The server writes it in the workspace: a declared change.
           "may_change": [rel]})
}

// ------------------------------------------------------------ server-everything

/// server-everything over Streamable HTTP on a loopback port; killed on drop.
pub struct Everything {
    child: Child,
    pub port: u16,
}

impl Everything {
    pub fn start() -> Everything {
        let index = node_server("server-everything");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("node")
            .arg(&index)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts server-everything");
        let mut e = Everything { child, port };
        wait_until(Duration::from_secs(30), "server-everything listening", || {
            if let Ok(Some(st)) = e.child.try_wait() {
                panic!("server-everything exited ({st}) before listening");
            }
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        e
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback relay in front of a server that keeps every byte clients
/// sent through it: what the server really received, whoever asks.
pub struct Tap {
    pub port: u16,
    sent: Arc<Mutex<Vec<u8>>>,
}

impl Tap {
    pub fn new(upstream: u16) -> Tap {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&sent);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                relay(client, server, Arc::clone(&log));
            }
        });
        Tap { port, sent }
    }

    /// How many times `needle` occurs in what clients sent.
    pub fn count(&self, needle: &str) -> usize {
        let bytes = self.sent.lock().unwrap();
        String::from_utf8_lossy(&bytes).matches(needle).count()
    }
}

/// Copy both ways until either side closes; client bytes are logged.
fn relay(client: TcpStream, server: TcpStream, log: Arc<Mutex<Vec<u8>>>) {
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = c_read.read(&mut buf) {
            if n == 0 || s_write.write_all(&buf[..n]).is_err() {
                break;
            }
            log.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let _ = s_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut s_read, &mut c_write);
        let _ = c_write.shutdown(std::net::Shutdown::Both);
    });
}

/// The research tool of server-everything, which requires task
/// augmentation (about 4 s of simulated work).
pub fn research_task(task_ref: &str, topic: &str) -> Value {
    json!({"ref": task_ref, "title": format!("research {topic}"), "provider": "ev", "effect": "external",
           "action": {"tool": "simulate-research-query", "arguments": {"topic": topic}},
           "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})
}

/// The receipt's answer (its stdout blob: an MCP result's JSON).
pub fn receipt_answer(ws: &Ws, attempt_id: i64) -> Option<Value> {
    let blob = ws.receipt_of(attempt_id)?["stdout_blob"].as_str()?.to_string();
    let row = ws.ledger().blobs().into_iter().find(|b| b.digest == blob)?;
    serde_json::from_slice(&row.data).ok()
}

/// The task id a receipt's MCP result names as its task
/// (`_meta["io.modelcontextprotocol/related-task"].taskId`).
pub fn related_task(ws: &Ws, attempt_id: i64) -> Option<String> {
    let v = receipt_answer(ws, attempt_id)?;
    v["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].as_str().map(str::to_string)
}
