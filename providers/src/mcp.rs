//! The MCP provider: one tool call on an MCP tool server spoken to over
//! stdio (newline-delimited JSON-RPC 2.0).
//!
//! The server is started per call — in the workspace, in its own process
//! group, with the command provider's environment rules — and its whole
//! group is killed and reaped when the call ends, whatever happened. The
//! idempotency identity travels in the request's `_meta`
//! (`{"operation_id": ..., "try": n}`), and in `ENGINE_OPERATION_ID` /
//! `ENGINE_TRY` like for a command.
//!
//! Phases and what each failure means:
//! - bad request (no `tool`, `arguments` not an object) or an empty command
//!   → `NotDispatched{BadRequest}`;
//! - the server cannot be started → `NotDispatched{ExecutableMissing |
//!   PermissionDenied | Other}`;
//! - `initialize` fails (EOF, a JSON-RPC error, the server closed its stdin)
//!   → `NotDispatched{Other}`; the deadline during it →
//!   `NotDispatched{DeadlineBeforeDispatch}`;
//! - from the moment the `tools/call` line starts being written: EOF or a
//!   crash before its response → `Lost{ResponseLost}`; the deadline →
//!   `Lost{DeadlineAfterDispatch}` (a write error means the server had
//!   already closed its stdin, so it never read the call: `NotDispatched`);
//! - a response → `Received`, with `stdout` = the JSON of its `result` (or
//!   `error`) and `tool_error` set for `isError: true` or a JSON-RPC error.
//!
//! `Progress::Dispatched` is sent once the `tools/call` line is written and
//! flushed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc::UnboundedSender;

use crate::capture::Bounded;
use crate::command::{kill_group, not_dispatched, provider_command, spawn_failure, DRAIN_AFTER_KILL, REAP_AFTER_KILL};
use crate::{
    BoxFuture, Call, Captured, LostReason, NotDispatched, NotDispatchedKind, Observation, Outcome, Progress, Provider,
    Receipt,
};

/// The MCP protocol revision this client speaks.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// Deadline for a whole observation (start, initialize, one tool call).
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of the server's stderr goes into a failure message.
const STDERR_TAIL: usize = 500;

const INITIALIZE_ID: u64 = 1;
const CALL_ID: u64 = 2;

/// Plan config: `{"kind": "mcp", "command": [...], "observe_tool": ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpProvider {
    /// argv of the server (no shell), run in the workspace.
    pub command: Vec<String>,
    /// A tool that answers `{"operation_id": op}` with
    /// `structuredContent.state` of `present` or `absent`.
    pub observe_tool: Option<String>,
}

impl Provider for McpProvider {
    fn identity(&self) -> Value {
        json!({"kind": "mcp", "command": self.command, "observe_tool": self.observe_tool})
    }

    fn dispatch<'a>(&'a self, call: &'a Call, progress: UnboundedSender<Progress>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.dispatch_inner(call, progress))
    }

    fn observe<'a>(&'a self, call: &'a Call) -> Option<BoxFuture<'a, Observation>> {
        let tool = self.observe_tool.as_deref()?;
        Some(Box::pin(self.observe_inner(tool, call)))
    }
}

/// `{"tool": "name", "arguments": {...}}` → (tool, arguments).
fn parse_request(request: &Value) -> Result<(String, Value), String> {
    let tool = request.get("tool").and_then(Value::as_str).filter(|t| !t.is_empty());
    let Some(tool) = tool else {
        return Err(format!("mcp request needs {{\"tool\": name, \"arguments\": {{...}}}}, got {request}"));
    };
    let arguments = match request.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(other) => return Err(format!("mcp `arguments` must be an object, got {other}")),
    };
    Ok((tool.to_string(), arguments))
}

/// A started server: its pipes and its process group.
struct Server {
    child: Child,
    pgid: u32,
    io: Io,
    stderr: ChildStderr,
}

/// The JSON-RPC side of a server.
struct Io {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Bound on one stdout line.
    line_max: usize,
}

/// One stdout line.
enum Line {
    Eof,
    Whole(Vec<u8>),
    /// Longer than the bound: the kept prefix and the line's real length.
    Truncated {
        kept: Vec<u8>,
        total: u64,
    },
}

/// What answered our request.
enum Answer {
    Message(Value),
    /// A line over the bound, taken as the answer (it cannot be parsed).
    Truncated {
        kept: Vec<u8>,
        total: u64,
    },
}

impl Io {
    async fn send(&mut self, msg: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(msg).expect("serializes");
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await
    }

    /// One line, keeping at most `line_max` bytes of it; the rest is read
    /// and counted, never held.
    async fn next_line(&mut self) -> std::io::Result<Line> {
        let (mut kept, mut total) = (Vec::new(), 0u64);
        loop {
            let buf = self.stdout.fill_buf().await?;
            if buf.is_empty() {
                return Ok(match total {
                    0 => Line::Eof,
                    _ => finish_line(kept, total, self.line_max),
                });
            }
            let (chunk, used, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            total += chunk.len() as u64;
            let room = self.line_max.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.stdout.consume(used);
            if done {
                return Ok(finish_line(kept, total, self.line_max));
            }
        }
    }

    /// Read until the response to `id`: notifications and answers to other
    /// ids are skipped, a server's own request is answered (`ping` with
    /// `{}`, anything else "method not found"). `Ok(None)`: EOF.
    async fn answer_to(&mut self, id: u64) -> Result<Option<Answer>, String> {
        loop {
            let line = self.next_line().await.map_err(|e| format!("reading the server's stdout: {e}"))?;
            let bytes = match line {
                Line::Eof => return Ok(None),
                Line::Truncated { kept, total } => return Ok(Some(Answer::Truncated { kept, total })),
                Line::Whole(b) => b,
            };
            let Ok(msg) = serde_json::from_slice::<Value>(&bytes) else { continue };
            let Some(obj) = msg.as_object() else { continue };
            if let Some(method) = obj.get("method").and_then(Value::as_str) {
                if let Some(req_id) = obj.get("id") {
                    let reply = if method == "ping" {
                        json!({"jsonrpc": "2.0", "id": req_id, "result": {}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32601, "message": "method not found"}})
                    };
                    // A failed reply shows up as EOF on the next read.
                    let _ = self.send(&reply).await;
                }
                continue;
            }
            if obj.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(Some(Answer::Message(msg)));
            }
        }
    }

    /// `initialize` → its result → `notifications/initialized` is left to
    /// the caller (it goes out with the call).
    async fn initialize(&mut self) -> Result<(), String> {
        let init = json!({
            "jsonrpc": "2.0", "id": INITIALIZE_ID, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "engine", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        self.send(&init).await.map_err(|e| format!("writing initialize: {e}"))?;
        match self.answer_to(INITIALIZE_ID).await? {
            None => Err("the server closed its stdout before answering initialize".into()),
            Some(Answer::Truncated { total, .. }) => Err(format!("initialize answer over the bound ({total} bytes)")),
            Some(Answer::Message(m)) => match (m.get("result"), m.get("error")) {
                (Some(Value::Object(_)), None) => Ok(()),
                (_, Some(err)) => Err(format!("initialize refused: {}", rpc_error_text(err))),
                _ => Err(format!("malformed initialize answer: {m}")),
            },
        }
    }

    /// `notifications/initialized` and the `tools/call`, in one write.
    /// `attempting` is set before any byte of the call may reach the server.
    async fn call_tool(
        &mut self,
        tool: &str,
        arguments: &Value,
        meta: Option<Value>,
        attempting: &AtomicBool,
    ) -> std::io::Result<()> {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(m) = meta {
            params["_meta"] = m;
        }
        let mut bytes =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).expect("serializes");
        bytes.push(b'\n');
        bytes.extend(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": CALL_ID, "method": "tools/call", "params": params}))
                .expect("serializes"),
        );
        bytes.push(b'\n');
        attempting.store(true, Ordering::SeqCst);
        self.stdin.write_all(&bytes).await?;
        self.stdin.flush().await
    }
}

fn finish_line(kept: Vec<u8>, total: u64, max: usize) -> Line {
    if total > max as u64 {
        Line::Truncated { kept, total }
    } else {
        Line::Whole(kept)
    }
}

fn rpc_error_text(err: &Value) -> String {
    let code = err.get("code").map(Value::to_string).unwrap_or_else(|| "?".into());
    let message = err.get("message").and_then(Value::as_str).unwrap_or("");
    format!("JSON-RPC error {code}: {message}")
}

/// The text items of a tool result's `content`, joined.
fn content_text(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Bounded capture of a JSON value's text.
fn captured_json(v: &Value, max: usize) -> Captured {
    let bytes = serde_json::to_vec(v).expect("serializes");
    let mut b = Bounded::new(max);
    b.push(&bytes);
    b.finish()
}

fn redact_str(s: String, secrets: &[String]) -> String {
    let mut c = Captured { text: s, total_bytes: 0, truncated: false };
    c.redact(secrets);
    c.text
}

/// The last `STDERR_TAIL` bytes of the server's stderr, for a message.
fn stderr_tail(err: &Captured) -> String {
    let t = err.text.trim_end();
    if t.is_empty() {
        return String::new();
    }
    let mut start = t.len().saturating_sub(STDERR_TAIL);
    while !t.is_char_boundary(start) {
        start += 1;
    }
    format!("; server stderr: {}", &t[start..])
}

fn spawn(command: &[String], call: &Call) -> Result<Server, NotDispatched> {
    let Some(prog) = command.first().filter(|p| !p.is_empty()) else {
        return Err(NotDispatched {
            kind: NotDispatchedKind::BadRequest,
            message: "mcp provider `command` is empty".into(),
        });
    };
    if !call.workspace.is_dir() {
        return Err(NotDispatched {
            kind: NotDispatchedKind::Other,
            message: format!("workspace {} is not a directory; `{prog}` not started", call.workspace.display()),
        });
    }
    let mut cmd = provider_command(call, command);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| spawn_failure(prog, &e))?;
    // pgid == pid because of process_group(0).
    let pgid = child.id().expect("child not yet reaped");
    let io = Io {
        stdin: child.stdin.take().expect("stdin piped"),
        stdout: BufReader::new(child.stdout.take().expect("stdout piped")),
        line_max: call.output_bytes_max,
    };
    let stderr = child.stderr.take().expect("stderr piped");
    Ok(Server { child, pgid, io, stderr })
}

/// Run `talk` (which owns the server's pipes) under `limit` while draining
/// its stderr; then kill the server's process group and reap it, always.
/// `None`: the deadline fired.
async fn drive<T>(
    mut child: Child,
    pgid: u32,
    mut stderr: ChildStderr,
    max: usize,
    limit: Option<Duration>,
    talk: impl std::future::Future<Output = T>,
) -> (Option<T>, Captured) {
    let mut err = Bounded::new(max);
    let (killed_tx, killed_rx) = tokio::sync::oneshot::channel::<()>();
    let (result, ()) = tokio::join!(
        async {
            let r = match limit {
                Some(d) => tokio::time::timeout(d, talk).await.ok(),
                None => Some(talk.await),
            };
            kill_group(pgid);
            let _ = killed_tx.send(());
            r
        },
        async {
            // Killing the group closes the pipe; bounded in case something
            // outside the group still holds it (a cut drain is "truncated").
            tokio::select! {
                _ = err.drain_from(&mut stderr) => {}
                _ = async { let _ = killed_rx.await; tokio::time::sleep(DRAIN_AFTER_KILL).await } => {}
            }
        }
    );
    let _ = tokio::time::timeout(REAP_AFTER_KILL, child.wait()).await;
    (result, err.finish())
}

impl McpProvider {
    async fn dispatch_inner(&self, call: &Call, progress: UnboundedSender<Progress>) -> Outcome {
        let started = Instant::now();
        let (tool, arguments) = match parse_request(&call.request) {
            Ok(r) => r,
            Err(m) => return not_dispatched(NotDispatchedKind::BadRequest, m),
        };
        let Server { child, pgid, mut io, stderr } = match spawn(&self.command, call) {
            Ok(s) => s,
            Err(nd) => return Outcome::NotDispatched(nd),
        };
        let attempting = AtomicBool::new(false);
        let meta = json!({"operation_id": call.operation_id, "try": call.try_no});
        let talk = async {
            io.initialize().await.map_err(|m| (false, m))?;
            if let Err(e) = io.call_tool(&tool, &arguments, Some(meta), &attempting).await {
                // The server closed its stdin: it never read the whole call.
                return Err((false, format!("writing tools/call: {e}")));
            }
            let _ = progress.send(Progress::Dispatched {
                detail: format!(
                    "tools/call `{tool}` written to MCP server pid {pgid} (_meta operation_id {}, try {})",
                    call.operation_id, call.try_no
                ),
            });
            match io.answer_to(CALL_ID).await {
                Ok(Some(a)) => Ok(a),
                Ok(None) => Err((true, "the server closed its stdout before answering tools/call".to_string())),
                Err(m) => Err((true, m)),
            }
        };
        let (result, mut err) = drive(child, pgid, stderr, call.output_bytes_max, call.timeout, talk).await;
        err.redact(&call.secrets);
        let prog = &self.command[0];
        match result {
            None => {
                let limit = call.timeout.unwrap_or_default().as_secs_f64();
                if attempting.load(Ordering::SeqCst) {
                    Outcome::Lost {
                        reason: LostReason::DeadlineAfterDispatch,
                        detail: format!(
                            "no answer to tools/call `{tool}` within {limit}s; server `{prog}` killed{}",
                            stderr_tail(&err)
                        ),
                    }
                } else {
                    not_dispatched(
                        NotDispatchedKind::DeadlineBeforeDispatch,
                        format!(
                            "MCP server `{prog}` not initialized within {limit}s; tools/call not sent{}",
                            stderr_tail(&err)
                        ),
                    )
                }
            }
            Some(Err((false, m))) => not_dispatched(
                NotDispatchedKind::Other,
                redact_str(
                    format!("MCP server `{prog}`: {m}; tools/call not sent{}", stderr_tail(&err)),
                    &call.secrets,
                ),
            ),
            Some(Err((true, m))) => Outcome::Lost {
                reason: LostReason::ResponseLost,
                detail: redact_str(format!("MCP server `{prog}`: {m}{}", stderr_tail(&err)), &call.secrets),
            },
            Some(Ok(answer)) => {
                let max = call.output_bytes_max;
                let (mut stdout, tool_error) = match answer {
                    Answer::Truncated { kept, total } => (
                        Captured::from_bytes(kept, total, true),
                        Some(format!("the answer to tools/call was {total} bytes, over the {max}-byte bound: truncated, not read")),
                    ),
                    Answer::Message(m) => match (m.get("result"), m.get("error")) {
                        (_, Some(e)) => (captured_json(e, max), Some(rpc_error_text(e))),
                        (Some(r), None) => {
                            let is_error = r.get("isError").and_then(Value::as_bool) == Some(true);
                            let te = is_error.then(|| {
                                let text = content_text(r);
                                if text.is_empty() { "the tool reported an error (isError) without text".to_string() } else { text }
                            });
                            (captured_json(r, max), te)
                        }
                        (None, None) => (captured_json(&m, max), Some("malformed JSON-RPC answer: neither result nor error".to_string())),
                    },
                };
                stdout.redact(&call.secrets);
                Outcome::Received(Receipt {
                    exit: None,
                    http_status: None,
                    retry_after_seconds: None,
                    stdout,
                    stderr: err,
                    timed_out: false,
                    duration_ms: started.elapsed().as_millis() as u64,
                    tool_error: tool_error.map(|t| redact_str(t, &call.secrets)),
                })
            }
        }
    }

    async fn observe_inner(&self, tool: &str, call: &Call) -> Observation {
        let what = format!("tools/call `{tool}` {{\"operation_id\": {:?}}}", call.operation_id);
        let inconclusive =
            |why: String| Observation::Inconclusive { evidence: redact_str(format!("{what}: {why}"), &call.secrets) };
        let Server { child, pgid, mut io, stderr } = match spawn(&self.command, call) {
            Ok(s) => s,
            Err(nd) => return inconclusive(nd.message),
        };
        let attempting = AtomicBool::new(false);
        let arguments = json!({"operation_id": call.operation_id});
        let talk = async {
            io.initialize().await?;
            io.call_tool(tool, &arguments, None, &attempting).await.map_err(|e| format!("writing tools/call: {e}"))?;
            io.answer_to(CALL_ID).await?.ok_or_else(|| "the server closed its stdout before answering".to_string())
        };
        let (result, err) = drive(child, pgid, stderr, call.output_bytes_max, Some(OBSERVE_TIMEOUT), talk).await;
        let answer = match result {
            None => {
                return inconclusive(format!("no answer within {}s{}", OBSERVE_TIMEOUT.as_secs(), stderr_tail(&err)))
            }
            Some(Err(m)) => return inconclusive(format!("{m}{}", stderr_tail(&err))),
            Some(Ok(Answer::Truncated { total, .. })) => {
                return inconclusive(format!("answer over the bound ({total} bytes)"))
            }
            Some(Ok(Answer::Message(m))) => m,
        };
        if let Some(e) = answer.get("error") {
            return inconclusive(rpc_error_text(e));
        }
        let result = answer.get("result").cloned().unwrap_or(Value::Null);
        let mut body = captured_json(&result, call.output_bytes_max);
        body.redact(&call.secrets);
        let evidence = format!("{what} -> {}", body.text);
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Observation::Inconclusive { evidence };
        }
        match result.pointer("/structuredContent/state").and_then(Value::as_str) {
            Some("present") => Observation::EffectPresent { evidence },
            Some("absent") => Observation::EffectAbsent { evidence },
            _ => Observation::Inconclusive { evidence },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use tokio::sync::mpsc::unbounded_channel;

    fn fixture() -> String {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/server.py").to_string_lossy().into_owned()
    }

    struct Env {
        dir: tempfile::TempDir,
        log: PathBuf,
    }

    fn env() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("deliveries.jsonl");
        Env { dir, log }
    }

    impl Env {
        fn provider(&self, flags: &[&str]) -> McpProvider {
            let mut command =
                vec!["python3".to_string(), fixture(), "--log".into(), self.log.to_string_lossy().into_owned()];
            command.extend(flags.iter().map(|f| f.to_string()));
            McpProvider { command, observe_tool: Some("operation_status".into()) }
        }

        fn call(&self, tool: &str, arguments: Value) -> Call {
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
            }
        }

        fn deliveries(&self) -> Vec<Value> {
            std::fs::read_to_string(&self.log)
                .unwrap_or_default()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        }
    }

    async fn go(p: &McpProvider, c: &Call) -> (Outcome, Vec<Progress>) {
        let (tx, mut rx) = unbounded_channel();
        let o = p.dispatch(c, tx).await;
        let mut seen = Vec::new();
        while let Ok(m) = rx.try_recv() {
            seen.push(m);
        }
        (o, seen)
    }

    fn receipt(o: Outcome) -> Receipt {
        match o {
            Outcome::Received(r) => r,
            other => panic!("expected a receipt, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn meta_carries_operation_id_and_try() {
        let e = env();
        let p = e.provider(&[]);
        let (o, progress) = go(&p, &e.call("render", json!({"doc": "d1"}))).await;
        let r = receipt(o);
        assert_eq!(r.tool_error, None);
        assert_eq!((r.exit, r.http_status, r.timed_out), (None, None, false));
        let result: Value = serde_json::from_str(&r.stdout.text).unwrap();
        assert_eq!(result["structuredContent"], json!({"key": "op-7", "try": 2}));
        assert!(r.stderr.text.contains("delivered op-7 try 2"), "{:?}", r.stderr);
        let d = e.deliveries();
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0]["key"].as_str(), d[0]["try"].as_i64(), &d[0]["arguments"]),
            (Some("op-7"), Some(2), &json!({"doc": "d1"}))
        );
        assert_eq!(progress.len(), 1, "{progress:?}");
        let Some(Progress::Dispatched { detail }) = progress.first() else { panic!("{progress:?}") };
        assert!(detail.contains("tools/call `render`") && detail.contains("op-7"), "{detail}");
    }

    #[tokio::test]
    async fn is_error_and_rpc_error_become_tool_error() {
        let e = env();
        let p = e.provider(&[]);
        let r = receipt(go(&p, &e.call("fail", json!({"template": "x"}))).await.0);
        assert_eq!(r.tool_error.as_deref(), Some("cannot render: template `x` not found"));
        assert!(r.stdout.text.contains("\"isError\":true"), "{}", r.stdout.text);
        let r = receipt(go(&p, &e.call("no_such_tool", json!({}))).await.0);
        assert_eq!(r.tool_error.as_deref(), Some("JSON-RPC error -32602: unknown tool: no_such_tool"));
        assert!(e.deliveries().is_empty());
    }

    #[tokio::test]
    async fn crash_after_effect_is_response_lost() {
        let e = env();
        for (p, tool) in [(e.provider(&[]), "crash"), (e.provider(&["--crash-after-effect"]), "render")] {
            let (o, progress) = go(&p, &e.call(tool, json!({}))).await;
            match o {
                Outcome::Lost { reason: LostReason::ResponseLost, detail } => {
                    assert!(detail.contains("before answering tools/call"), "{detail}");
                    assert!(detail.contains("crashing after the effect"), "stderr tail in the detail: {detail}");
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(progress.len(), 1);
        }
        assert_eq!(e.deliveries().len(), 2);
    }

    #[tokio::test]
    async fn deadline_after_dispatch_is_lost_and_the_group_is_killed() {
        let e = env();
        let pidfile = e.dir.path().join("grandchild.pid");
        let mut c = e.call("hang", json!({"pidfile": pidfile}));
        c.timeout = Some(Duration::from_secs(2));
        let t = Instant::now();
        let (o, progress) = go(&e.provider(&[]), &c).await;
        assert!(t.elapsed() < Duration::from_secs(8), "took {:?}", t.elapsed());
        assert!(matches!(o, Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, .. }), "{o:?}");
        assert_eq!(progress.len(), 1);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let dead = crate::test_support::wait_gone(pid, Duration::from_secs(2)).await;
        assert!(dead, "the server's grandchild {pid} survived the call");
    }

    #[tokio::test]
    async fn deadline_during_initialize_is_not_dispatched() {
        let e = env();
        // A "server" that never answers.
        let p = McpProvider { command: vec!["sleep".into(), "30".into()], observe_tool: None };
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
        let p = McpProvider { command: vec!["/nonexistent/mcp-server".into()], observe_tool: None };
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
    async fn observe_present_and_absent() {
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
        // A tool that does not say: inconclusive; no observe_tool: cannot observe.
        let mut q = p.clone();
        q.observe_tool = Some("render".into());
        assert!(matches!(q.observe(&c).unwrap().await, Observation::Inconclusive { .. }));
        q.observe_tool = None;
        assert!(q.observe(&c).is_none());
        let dead =
            McpProvider { command: vec!["/nonexistent/x".into()], observe_tool: Some("operation_status".into()) };
        assert!(matches!(dead.observe(&c).unwrap().await, Observation::Inconclusive { .. }));
    }

    #[tokio::test]
    async fn over_long_answer_is_truncated_and_recorded() {
        let e = env();
        let mut c = e.call("fail", json!({"template": "x".repeat(5000)}));
        c.output_bytes_max = 1000;
        let r = receipt(go(&e.provider(&[]), &c).await.0);
        assert!(r.stdout.truncated && r.stdout.total_bytes > 5000, "{:?}", r.stdout.total_bytes);
        assert_eq!(r.stdout.text.len(), 1000);
        assert!(r.tool_error.unwrap().contains("over the 1000-byte bound"));
    }

    #[tokio::test]
    async fn secrets_redacted() {
        let e = env();
        let mut c = e.call("fail", json!({"template": "hunter2"}));
        c.secrets = vec!["hunter2".into()];
        let r = receipt(go(&e.provider(&[]), &c).await.0);
        assert!(!r.stdout.text.contains("hunter2"), "{}", r.stdout.text);
        assert_eq!(r.tool_error.as_deref(), Some("cannot render: template `[REDACTED]` not found"));
    }

    #[test]
    fn identity_shape() {
        let p = McpProvider { command: vec!["srv".into()], observe_tool: None };
        assert_eq!(p.identity(), json!({"kind": "mcp", "command": ["srv"], "observe_tool": null}));
    }
}
