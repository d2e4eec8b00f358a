//! The Streamable HTTP transport (MCP 2025-11-25): every JSON-RPC message is
//! its own POST to the server's MCP endpoint, answered with one JSON object
//! or an SSE stream that carries the answer. It uses the HTTP provider's
//! wire, so the same rules hold: `https://` with rustls and the provider's
//! `ca_file`, loopback or a listed host only, and "sent" means a byte of the
//! request was written (for TLS: accepted by the TLS stream).
//!
//! The session id the server gives at `initialize` (`Mcp-Session-Id`) goes
//! on every later request, with `MCP-Protocol-Version`. A 404 to a request
//! that carried a session id means the server ended that session: the link
//! is dead and the next call starts a new one. Closing sends DELETE.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::inbound::Inbound;
use super::jsonrpc::{self, Answer, Kind, RpcEnd};
use super::revision;
use super::sse::SseParser;
use crate::capture::Bounded;
use crate::http::url::Target;
use crate::http::wire::{self, Ask, BodySink, Failure, Flow, Head, Track};
use crate::oauth::{AuthError, Bearer};
use crate::tls::Tls;
use crate::{NotDispatched, NotDispatchedKind};

/// Bound on answering one server request (a `ping` inside a stream).
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct HttpLink {
    url: String,
    target: Target,
    tls: Arc<Tls>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    next_id: AtomicU64,
    alive: AtomicBool,
    /// Bound on one answer (JSON body or SSE event).
    answer_bytes_max: usize,
    /// The OAuth token source, for a server that wants a bearer token.
    bearer: Option<Arc<Bearer>>,
    /// Where the server's questions and progress go.
    inbound: Arc<Inbound>,
}

impl HttpLink {
    pub fn new(
        url: &str,
        hosts: &[String],
        tls: Arc<Tls>,
        answer_bytes_max: usize,
        inbound: Arc<Inbound>,
    ) -> Result<Self, String> {
        let target = Target::parse(url, hosts)?;
        Ok(HttpLink {
            url: url.to_string(),
            target,
            tls,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            next_id: AtomicU64::new(1),
            alive: AtomicBool::new(true),
            answer_bytes_max,
            bearer: None,
            inbound,
        })
    }

    pub fn with_bearer(mut self, bearer: Option<Arc<Bearer>>) -> Self {
        self.bearer = bearer;
        self
    }

    /// A link into an existing session (to ask about a task after a crash).
    pub fn resume(&self, session: &str, protocol: &str) -> Self {
        HttpLink {
            url: self.url.clone(),
            target: self.target.clone(),
            tls: Arc::clone(&self.tls),
            session: Mutex::new(Some(session.to_string())),
            protocol: Mutex::new(Some(protocol.to_string())),
            next_id: AtomicU64::new(1),
            alive: AtomicBool::new(true),
            answer_bytes_max: self.answer_bytes_max,
            bearer: self.bearer.clone(),
            inbound: Arc::clone(&self.inbound),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    pub fn session_id(&self) -> Option<String> {
        self.session.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_protocol(&self, v: Option<&str>) {
        *self.protocol.lock().unwrap_or_else(|e| e.into_inner()) = v.map(str::to_string);
    }

    pub fn protocol(&self) -> Option<String> {
        self.protocol.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One HTTP request's bytes. `rpc`: the JSON-RPC method and params of
    /// a request, mirrored into `Mcp-Method` / `Mcp-Name` under 2026-07-28.
    fn encode(&self, method: &str, body: &[u8], rpc: Option<(&str, &Value)>, token: Option<&str>) -> Vec<u8> {
        let t = &self.target;
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n",
            t.path, t.authority
        );
        if !body.is_empty() {
            head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        if let Some(s) = self.session_id() {
            head.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        let protocol = self.protocol();
        if let Some(v) = &protocol {
            head.push_str(&format!("MCP-Protocol-Version: {v}\r\n"));
        }
        if let (Some((m, params)), Some(revision::MODERN)) = (rpc, protocol.as_deref()) {
            head.push_str(&format!("Mcp-Method: {}\r\n", revision::header_value(m)));
            if let Some(name) = revision::name_of(m, params) {
                head.push_str(&format!("Mcp-Name: {name}\r\n"));
            }
        }
        if let Some(t) = token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        bytes
    }

    /// The access token for the next request, if the server wants one.
    /// `Err`: none is usable, and nothing is sent.
    async fn token(&self) -> Result<Option<String>, NotDispatched> {
        match &self.bearer {
            None => Ok(None),
            Some(_) if !crate::oauth::plain_allowed(&self.target) => Err(NotDispatched {
                kind: NotDispatchedKind::BadRequest,
                message: format!("{}: a bearer token goes over https:// (plain http:// only to loopback)", self.url),
            }),
            Some(b) => b.token().await.map(Some).map_err(not_authorized),
        }
    }

    pub async fn request(
        &self,
        method: &str,
        params: &Value,
        deadline: Option<Instant>,
        on_sent: impl FnOnce() + Send,
    ) -> RpcEnd {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let body = jsonrpc::request(id, method, params).to_string();
        let mut token = match self.token().await {
            Ok(t) => t,
            Err(nd) => return RpcEnd::NotSent(nd),
        };
        let mut on_sent = Some(on_sent);
        let mut tried = false;
        loop {
            let bytes = self.encode("POST", body.as_bytes(), Some((method, params)), token.as_deref());
            let mut track = Track::default();
            let sent = || {
                if let Some(f) = on_sent.take() {
                    f()
                }
            };
            let exchange = self.exchange(&bytes, id, method == "initialize", sent, &mut track);
            let result = match deadline {
                None => exchange.await,
                Some(at) => match tokio::time::timeout_at(at.into(), exchange).await {
                    Ok(r) => r,
                    Err(_) => return RpcEnd::Deadline { sent: track.bytes_written > 0, id },
                },
            };
            // A 401 to a request that did nothing yet (not a `tools/call`,
            // whose 401 is its answer): refresh once and send it again.
            if let (Some(bearer), Some(used), Ok((Answer::HttpStatus { status: 401, .. }, _))) =
                (&self.bearer, token.as_deref(), &result)
            {
                if method != "tools/call" {
                    if tried {
                        let m = format!("{} answered 401 to {method} with a refreshed token", self.url);
                        return RpcEnd::NotSent(not_authorized(AuthError::Required(m)));
                    }
                    match bearer.refused(used).await {
                        Ok(t) => {
                            (token, tried) = (Some(t), true);
                            continue;
                        }
                        Err(e) => return RpcEnd::NotSent(not_authorized(e)),
                    }
                }
            }
            return match result {
                Ok((answer, server_requests)) => {
                    self.answer_server(server_requests).await;
                    RpcEnd::Answer(answer)
                }
                Err(Failure::NotSent(nd)) => RpcEnd::NotSent(nd),
                Err(Failure::Lost(_, m)) => RpcEnd::Lost(format!("{method} to {}: {m}", self.url)),
            };
        }
    }

    async fn exchange(
        &self,
        bytes: &[u8],
        id: u64,
        initialize: bool,
        on_sent: impl FnOnce(),
        track: &mut Track,
    ) -> Result<(Answer, Vec<Value>), Failure> {
        let mut conn = wire::send(&self.target, &self.tls, bytes, track).await?;
        on_sent();
        let head = conn.head(track).await?;
        if initialize {
            if let Some(s) = head.header("mcp-session-id").filter(|s| s.bytes().all(|b| (0x21..=0x7e).contains(&b))) {
                *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.to_string());
            }
        }
        if head.status != 200 {
            return self.refused(&mut conn, &head).await.map(|a| (a, Vec::new()));
        }
        let sse = head.header("content-type").is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        if !sse {
            let mut body = Bounded::new(self.answer_bytes_max);
            conn.body(&head, &mut body).await?;
            let body = body.finish();
            if body.truncated {
                return Ok((Answer::Truncated { kept: body.text.into_bytes(), total: body.total_bytes }, Vec::new()));
            }
            let msg = serde_json::from_str(&body.text).map_err(|e| wire::lost(format!("answer is not JSON: {e}")))?;
            return Ok((Answer::Message(msg), Vec::new()));
        }
        // A question the server puts in the stream is answered at once
        // (it waits for the reply before it answers us); the rest after.
        let (replies, mut to_send) = tokio::sync::mpsc::unbounded_channel();
        let mut stream = Stream::new(id, self.answer_bytes_max, Arc::clone(&self.inbound), replies);
        {
            let read = conn.body(&head, &mut stream);
            tokio::pin!(read);
            let _ = loop {
                tokio::select! {
                    r = &mut read => break r?,
                    Some(reply) = to_send.recv() => {
                        let _ = self.post_message(&reply, REPLY_TIMEOUT).await;
                    }
                }
            };
        }
        match stream.answer {
            Some(a) => Ok((a, stream.server_requests)),
            None => Err(wire::lost("the event stream ended without the answer".into())),
        }
    }

    /// An HTTP error status instead of a message. A 404 on a session means
    /// the server ended it.
    async fn refused(&self, conn: &mut wire::Conn, head: &Head) -> Result<Answer, Failure> {
        if head.status == 404 && self.session_id().is_some() {
            self.alive.store(false, Ordering::SeqCst);
        }
        let mut body = Bounded::new(self.answer_bytes_max.min(64 * 1024));
        conn.body(head, &mut body).await?;
        Ok(Answer::HttpStatus {
            status: head.status,
            retry_after_seconds: head.retry_after_seconds,
            body: body.finish(),
        })
    }

    /// Requests the server sent inside a stream get their answer once the
    /// stream is read (we offer no feature that would make one wait on us).
    async fn answer_server(&self, requests: Vec<Value>) {
        for req in requests {
            if let Some(reply) = jsonrpc::reply_to_server_request(&req) {
                let _ = self.post_message(&reply, REPLY_TIMEOUT).await;
            }
        }
    }

    /// POST a notification or a response; the server answers 202.
    async fn post_message(&self, msg: &Value, limit: Duration) -> Result<(), String> {
        let token = self.bearer.as_ref().and_then(|b| b.current());
        let bytes = self.encode("POST", msg.to_string().as_bytes(), None, token.as_deref());
        let mut track = Track::default();
        let ask = Ask {
            target: &self.target,
            tls: &self.tls,
            request: &bytes,
            head_only: false,
            body_bytes_max: 64 * 1024,
            limit: Some(limit),
        };
        match wire::exchange(&ask, || {}, &mut track).await {
            Ok(r) if (200..300).contains(&r.status) => Ok(()),
            Ok(r) => Err(format!("HTTP {}: {}", r.status, r.body.text.trim())),
            Err(f) => Err(f.message().to_string()),
        }
    }

    pub async fn notify(&self, method: &str, params: Option<&Value>, limit: Duration) -> Result<(), String> {
        self.post_message(&jsonrpc::notification(method, params), limit).await.map_err(|e| format!("{method}: {e}"))
    }

    /// End the session on the server (DELETE), best effort.
    pub async fn close(&self, limit: Duration) {
        self.alive.store(false, Ordering::SeqCst);
        if self.session_id().is_none() {
            return;
        }
        let token = self.bearer.as_ref().and_then(|b| b.current());
        let bytes = self.encode("DELETE", &[], None, token.as_deref());
        let mut track = Track::default();
        let ask = Ask {
            target: &self.target,
            tls: &self.tls,
            request: &bytes,
            head_only: false,
            body_bytes_max: 4096,
            limit: Some(limit),
        };
        let _ = wire::exchange(&ask, || {}, &mut track).await;
    }
}

/// No usable token: nothing of the request goes out (or what went out was
/// refused before anything was done). The message starts with
/// `oauth::AUTHORIZATION_REQUIRED`.
fn not_authorized(e: AuthError) -> NotDispatched {
    NotDispatched { kind: NotDispatchedKind::Other, message: e.message() }
}

/// An SSE answer being read: stops at the message that answers `id`.
struct Stream {
    id: u64,
    parser: SseParser,
    answer: Option<Answer>,
    server_requests: Vec<Value>,
    /// The server's requests met in the stream, answered at once or after.
    requests_seen: usize,
    inbound: Arc<Inbound>,
    /// Replies to send while the stream is still read.
    replies: tokio::sync::mpsc::UnboundedSender<Value>,
}

/// Bound on the server's requests answered within one stream.
const STREAM_REQUESTS_MAX: usize = 16;

impl Stream {
    fn new(
        id: u64,
        bytes_max: usize,
        inbound: Arc<Inbound>,
        replies: tokio::sync::mpsc::UnboundedSender<Value>,
    ) -> Self {
        Stream {
            id,
            parser: SseParser::new(bytes_max),
            answer: None,
            server_requests: Vec::new(),
            requests_seen: 0,
            inbound,
            replies,
        }
    }
}

impl BodySink for Stream {
    fn push(&mut self, chunk: &[u8]) -> Flow {
        for event in self.parser.feed(chunk) {
            if event.truncated {
                // Over the bound: the answer if it starts with our id.
                if jsonrpc::id_in_prefix(event.data.as_bytes()) == Some(self.id) {
                    let total = event.data.len() as u64;
                    self.answer = Some(Answer::Truncated { kept: event.data.into_bytes(), total });
                    return Flow::Done;
                }
                continue;
            }
            let Ok(msg) = serde_json::from_str::<Value>(&event.data) else { continue };
            match jsonrpc::kind(&msg) {
                Kind::Response(id) if id == self.id => {
                    self.answer = Some(Answer::Message(msg));
                    return Flow::Done;
                }
                Kind::ServerRequest if self.requests_seen < STREAM_REQUESTS_MAX => {
                    self.requests_seen += 1;
                    match self.inbound.request(&msg) {
                        Some(reply) => {
                            let _ = self.replies.send(reply);
                        }
                        None => self.server_requests.push(msg),
                    }
                }
                Kind::Notification => self.inbound.notification(&msg),
                _ => {}
            }
        }
        Flow::More
    }
}
