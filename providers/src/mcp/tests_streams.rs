//! A 2025-11-25 Streamable HTTP server's streams, against a scripted
//! server on a loopback port that keeps every request it received (with
//! when): a request's event stream the server closed before the answer is
//! resumed by a GET with `Last-Event-ID` after the server's `retry`, never
//! sent again; one that broke, or that gave no event id, loses the answer;
//! the session's own GET stream carries the server's questions and
//! progress to the call in flight, answered on a POST.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::tests::{go, receipt};
use super::*;
use crate::{InputAnswers, InputResponse, LostReason, Progress};

/// One request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    headers: Vec<(String, String)>,
    body: Value,
    at: Instant,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
}

/// How the scripted server answers a `tools/call`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Script {
    /// An event (`id: e1`, `retry: 300`, no data), then the stream's
    /// clean end; the answer on the GET that resumes from `e1`.
    CloseThenResume,
    /// The same event, then a chunk cut short and the connection closed.
    Break,
    /// An event without an id, then the stream's clean end.
    CloseWithoutId,
    /// A question and a progress note on the session's GET stream; the
    /// call's answer (JSON) once the question's reply was POSTed, and it
    /// says what the reply was.
    AskOnTheSessionStream,
}

#[derive(Default)]
struct Shared {
    seen: Vec<Seen>,
    /// The session stream, once the client opened it.
    session_stream: Option<TcpStream>,
    /// The reply to the question asked on it.
    reply: Option<Value>,
    /// The id of the `tools/call` waiting for a resumption.
    pending: Option<Value>,
    closed_at: Option<Instant>,
}

struct Server {
    url: String,
    shared: Arc<Mutex<Shared>>,
}

impl Server {
    async fn start(script: Script) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", l.local_addr().unwrap());
        let shared = Arc::new(Mutex::new(Shared::default()));
        let s = Arc::clone(&shared);
        tokio::spawn(async move {
            while let Ok((conn, _)) = l.accept().await {
                tokio::spawn(serve(conn, script, Arc::clone(&s)));
            }
        });
        Server { url, shared }
    }

    fn seen(&self) -> Vec<Seen> {
        self.shared.lock().unwrap().seen.clone()
    }

    fn provider(&self) -> McpProvider {
        McpProvider::new(McpConfig::http(&self.url))
    }
}

async fn read_request(conn: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.lines();
            let method = lines.next()?.split(' ').next()?.to_string();
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize =
                headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = conn.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
            return Some(Seen { method, headers, body, at: Instant::now() });
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn json_answer(conn: &mut TcpStream, body: &Value) {
    let text = body.to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s-1\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    let _ = conn.write_all(format!("{head}{text}").as_bytes()).await;
}

async fn status(conn: &mut TcpStream, code: &str) {
    let _ = conn.write_all(format!("HTTP/1.1 {code}\r\nContent-Length: 0\r\n\r\n").as_bytes()).await;
}

/// An event stream's head, and its events as chunks.
async fn stream_head(conn: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    let _ = conn.write_all(head.as_bytes()).await;
}

async fn event(conn: &mut TcpStream, text: &str) {
    let _ = conn.write_all(format!("{:x}\r\n{text}\r\n", text.len()).as_bytes()).await;
}

async fn serve(mut conn: TcpStream, script: Script, shared: Arc<Mutex<Shared>>) {
    let Some(req) = read_request(&mut conn).await else { return };
    shared.lock().unwrap().seen.push(req.clone());
    let id = req.body.get("id").cloned().unwrap_or(Value::Null);
    match (req.method.as_str(), req.rpc()) {
        ("GET", _) => get(conn, &req, script, shared).await,
        ("DELETE", _) => status(&mut conn, "200 OK").await,
        ("POST", "initialize") => {
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "scripted", "version": "1"}});
            json_answer(&mut conn, &json!({"jsonrpc": "2.0", "id": id, "result": result})).await
        }
        ("POST", "tools/list") => {
            let tools = json!([{"name": "work", "inputSchema": {"type": "object"}}]);
            json_answer(&mut conn, &json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})).await
        }
        ("POST", "tools/call") => call(conn, &req, script, shared).await,
        ("POST", "") => {
            // A response of ours (the reply to the server's question).
            if req.body.get("result").is_some() {
                shared.lock().unwrap().reply = Some(req.body["result"].clone());
            }
            status(&mut conn, "202 Accepted").await
        }
        _ => status(&mut conn, "202 Accepted").await,
    }
}

async fn call(mut conn: TcpStream, req: &Seen, script: Script, shared: Arc<Mutex<Shared>>) {
    let id = req.body["id"].clone();
    match script {
        Script::CloseThenResume | Script::CloseWithoutId | Script::Break => {
            shared.lock().unwrap().pending = Some(id);
            stream_head(&mut conn).await;
            let first = if script == Script::CloseWithoutId {
                "retry: 300\ndata: \n\n"
            } else {
                "id: e1\nretry: 300\ndata: \n\n"
            };
            event(&mut conn, first).await;
            if script == Script::Break {
                let _ = conn.write_all(b"40\r\nevent: mess").await;
            } else {
                let _ = conn.write_all(b"0\r\n\r\n").await;
            }
            shared.lock().unwrap().closed_at = Some(Instant::now());
        }
        Script::AskOnTheSessionStream => {
            let token = req.body["params"]["_meta"]["progressToken"].clone();
            let ask = json!({"jsonrpc": "2.0", "id": 900, "method": "elicitation/create", "params": {
                "message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}});
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": 1, "total": 2, "message": "halfway"}});
            let started = Instant::now();
            let mut stream = loop {
                if let Some(s) = shared.lock().unwrap().session_stream.take() {
                    break s;
                }
                assert!(started.elapsed() < Duration::from_secs(10), "the session stream was never opened");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            event(&mut stream, &format!("data: {note}\n\ndata: {ask}\n\n")).await;
            let started = Instant::now();
            let reply = loop {
                if let Some(r) = shared.lock().unwrap().reply.clone() {
                    break r;
                }
                assert!(started.elapsed() < Duration::from_secs(10), "no reply to the question");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            shared.lock().unwrap().session_stream = Some(stream);
            let result = json!({"content": [{"type": "text", "text": reply.to_string()}]});
            json_answer(&mut conn, &json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
        }
    }
}

async fn get(mut conn: TcpStream, req: &Seen, script: Script, shared: Arc<Mutex<Shared>>) {
    match (script, req.header("last-event-id")) {
        (Script::AskOnTheSessionStream, None) => {
            stream_head(&mut conn).await;
            shared.lock().unwrap().session_stream = Some(conn);
        }
        (_, Some("e1")) => {
            let Some(id) = shared.lock().unwrap().pending.take() else {
                return status(&mut conn, "404 Not Found").await;
            };
            stream_head(&mut conn).await;
            let answer =
                json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "resumed"}]}});
            event(&mut conn, &format!("id: e2\ndata: {answer}\n\n")).await;
            let _ = conn.write_all(b"0\r\n\r\n").await;
        }
        // No session stream offered.
        _ => status(&mut conn, "405 Method Not Allowed").await,
    }
}

fn call_of(tool: &str) -> Call {
    Call {
        operation_id: "op-s".into(),
        try_no: 1,
        request: json!({"tool": tool, "arguments": {}}),
        workspace: std::env::temp_dir(),
        timeout: Some(Duration::from_secs(20)),
        output_bytes_max: 1 << 20,
        stdin: None,
        env: vec![],
        secrets: vec![],
        sandbox: crate::sandbox::Sandbox::disabled(),
        traceparent: None,
    }
}

fn tools_calls(seen: &[Seen]) -> usize {
    seen.iter().filter(|s| s.rpc() == "tools/call").count()
}

fn resumptions(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter().filter(|s| s.method == "GET" && s.header("last-event-id").is_some()).collect()
}

#[tokio::test]
async fn a_stream_closed_before_its_answer_is_resumed_after_the_servers_retry_never_sent_again() {
    let server = Server::start(Script::CloseThenResume).await;
    let r = receipt(go(&server.provider(), &call_of("work")).await.0);
    assert_eq!(r.tool_error, None, "{r:?}");
    assert!(r.result.text.contains("resumed"), "{}", r.result.text);
    let seen = server.seen();
    assert_eq!(tools_calls(&seen), 1, "sent once: {seen:?}");
    let resumed = resumptions(&seen);
    assert_eq!(resumed.len(), 1, "{seen:?}");
    assert_eq!(resumed[0].header("mcp-session-id"), Some("s-1"));
    assert_eq!(resumed[0].header("accept"), Some("text/event-stream"));
    let closed = server.shared.lock().unwrap().closed_at.unwrap();
    let waited = resumed[0].at.duration_since(closed);
    assert!(waited >= Duration::from_millis(290), "the server's retry (300 ms) was waited: {waited:?}");
}

#[tokio::test]
async fn a_broken_stream_or_one_without_an_event_id_loses_the_answer_and_is_not_resumed() {
    for (script, says) in [(Script::Break, "short"), (Script::CloseWithoutId, "no event id")] {
        let server = Server::start(script).await;
        match go(&server.provider(), &call_of("work")).await.0 {
            Outcome::Lost { reason: LostReason::ResponseLost, detail } => {
                assert!(detail.contains(says), "{script:?}: {detail}")
            }
            other => panic!("{script:?}: {other:?}"),
        }
        let seen = server.seen();
        assert_eq!(tools_calls(&seen), 1, "{script:?}: never sent again: {seen:?}");
        assert!(resumptions(&seen).is_empty(), "{script:?}: not resumed: {seen:?}");
    }
}

#[tokio::test]
async fn the_session_stream_brings_the_servers_question_and_progress_to_the_call() {
    // Nobody answered yet: the question is dismissed (cancel) and comes
    // back with the receipt; the progress note reaches the call.
    let server = Server::start(Script::AskOnTheSessionStream).await;
    let p = server.provider();
    let (o, progress) = go(&p, &call_of("work")).await;
    let r = receipt(o);
    assert!(r.result.text.contains("cancel"), "the reply the server got: {}", r.result.text);
    let ask = r.input.clone().expect("the question comes back with the receipt");
    assert_eq!(ask.questions[0].question["message"], "Name?");
    assert!(progress.iter().any(|p| matches!(p, Progress::Note(n) if n.message.as_deref() == Some("halfway"))));
    let gets: Vec<Seen> = server.seen().into_iter().filter(|s| s.method == "GET").collect();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert_eq!(gets[0].header("mcp-session-id"), Some("s-1"));
    // The call that carries a person's answer gets it sent as the reply.
    server.shared.lock().unwrap().reply = None;
    let answers = InputAnswers {
        task_id: None,
        request_state: None,
        responses: vec![InputResponse {
            key: "q1".into(),
            question: ask.questions[0].question.clone(),
            result: json!({"action": "accept", "content": {"name": "Ada"}}),
        }],
    };
    let mut c = call_of("work");
    c.request["answers"] = json!(answers);
    let r = receipt(go(&p, &c).await.0);
    assert!(r.result.text.contains("Ada"), "{}", r.result.text);
    assert!(r.input.is_none(), "answered: {r:?}");
}
