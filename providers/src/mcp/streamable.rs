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
//!
//! A 2025-11-25 (or earlier) server may close a request's event stream
//! before it answers (SEP-1699: it polls, or sheds the connection) and
//! resume it on a GET carrying `Last-Event-ID`. A stream that ended cleanly — at its framed end, or a
//! clean close — after an event id is resumed so, after the server's
//! `retry` (`Resume`): the request is never sent again. A stream that
//! broke (a reset, a chunk cut short, a TLS close without `close_notify`),
//! or ended without an id to resume from, loses the answer.
//! Beside the requests' streams, the session's own GET stream carries what
//! the server sends outside them (`listen`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::events::{Events, STREAM_REQUESTS_MAX};
use super::inbound::{Inbound, Reply};
use super::jsonrpc::{self, Answer, RpcEnd};
use super::listen::Listening;
use super::revision;
use crate::capture::Bounded;
use crate::http::url::Target;
use crate::http::wire::{self, Ask, BodyEnd, Conn, Failure, Head, Track};
use crate::oauth::{AuthError, Bearer};
use crate::tls::Tls;
use crate::{NotDispatched, NotDispatchedKind};

/// Bound on answering one server request (a `ping` inside a stream).
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a request's stream closed by the server is resumed, at most.
const RESUMES_MAX: u32 = 8;
/// The wait before resuming when the server gave no `retry`, and the
/// longest `retry` honoured.
pub(crate) const RETRY_DEFAULT: Duration = Duration::from_secs(1);
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(60);

pub(crate) struct HttpLink {
    url: String,
    pub(super) target: Target,
    pub(super) tls: Arc<Tls>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    next_id: AtomicU64,
    alive: AtomicBool,
    /// Bound on one answer (JSON body or SSE event).
    pub(super) answer_bytes_max: usize,
    /// The OAuth token source, for a server that wants a bearer token.
    bearer: Option<Arc<Bearer>>,
    /// Where the server's questions and progress go.
    pub(super) inbound: Arc<Inbound>,
    /// The session's standalone GET stream, read while the link lives.
    pub(super) listening: Mutex<Option<Listening>>,
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
            listening: Mutex::new(None),
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
            listening: Mutex::new(None),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// The session is over (the server ended it, or we close it): no
    /// request goes on it, and its own stream is no longer read.
    pub fn mark_dead(&self) {
        self.alive.store(false, Ordering::SeqCst);
        self.stop_listening();
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

    /// A GET for an event stream: the session's own (`last_event_id`:
    /// `None` at first), or a request's stream resumed from its last event.
    pub(crate) fn encode_get(&self, last_event_id: Option<&str>, token: Option<&str>) -> Vec<u8> {
        let t = &self.target;
        let mut head = format!("GET {} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n", t.path, t.authority);
        if let Some(s) = self.session_id() {
            head.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        if let Some(v) = self.protocol() {
            head.push_str(&format!("MCP-Protocol-Version: {v}\r\n"));
        }
        if let Some(id) = last_event_id {
            head.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        if let Some(t) = token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }

    /// The access token for the next request, if the server wants one.
    /// `Err`: none is usable, and nothing is sent.
    pub(super) async fn token(&self) -> Result<Option<String>, NotDispatched> {
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
            if let (Some(bearer), Some(used), Ok(Answer::HttpStatus { status: 401, .. })) =
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
            // A request that did nothing yet, refused for want of scope:
            // not sent, and a person's login (with that scope) cures it. A
            // `tools/call`'s refusal is its answer (the receipt says so).
            if let (Ok(Answer::HttpStatus { step_up: Some(scope), .. }), false) = (&result, method == "tools/call") {
                let m = crate::oauth::step_up_words(
                    scope,
                    &format!("{} answered 403 insufficient_scope to {method}", self.url),
                );
                return RpcEnd::NotSent(not_authorized(AuthError::Required(m)));
            }
            return match result {
                Ok(answer) => RpcEnd::Answer(answer),
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
    ) -> Result<Answer, Failure> {
        let mut conn = wire::send(&self.target, &self.tls, bytes, track).await?;
        on_sent();
        let head = conn.head(track).await?;
        if initialize {
            if let Some(s) = head.header("mcp-session-id").filter(|s| s.bytes().all(|b| (0x21..=0x7e).contains(&b))) {
                *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.to_string());
            }
        }
        if head.status != 200 {
            return self.refused(&mut conn, &head).await;
        }
        if !event_stream(&head) {
            return self.json_answer(&mut conn, &head).await;
        }
        let (replies, mut to_send) = tokio::sync::mpsc::unbounded_channel();
        let bounds = (self.answer_bytes_max, STREAM_REQUESTS_MAX);
        let mut events = Events::new(Some(id), bounds, Arc::clone(&self.inbound), replies);
        let mut end = self.read_events(&mut conn, &head, &mut events, &mut to_send).await?;
        let mut resumed = 0;
        loop {
            if let Some(answer) = events.answer.take() {
                return Ok(answer);
            }
            // 2026-07-28 has no resumption: a stream without its answer is lost.
            let modern = self.protocol().as_deref() == Some(revision::MODERN);
            let last = match (end, events.parser.last_event_id()) {
                (BodyEnd::Unconfirmed(why), _) => {
                    return Err(wire::lost(format!("the event stream ended without the answer: {why}")))
                }
                (BodyEnd::Whole, _) if modern => {
                    return Err(wire::lost(
                        "the event stream ended without the answer (2026-07-28 resumes none)".into(),
                    ))
                }
                (BodyEnd::Whole, None) => {
                    return Err(wire::lost(
                        "the server closed the event stream without the answer, and gave no event id to resume it \
                         from"
                            .into(),
                    ))
                }
                (BodyEnd::Whole, Some(_)) if resumed == RESUMES_MAX => {
                    return Err(wire::lost(format!(
                        "the server closed the event stream without the answer {} times",
                        RESUMES_MAX + 1
                    )))
                }
                (BodyEnd::Whole, Some(last)) => last.to_string(),
            };
            resumed += 1;
            tokio::time::sleep(retry_delay(events.parser.retry_ms())).await;
            let (mut conn, head) = self.resume_stream(&last).await?;
            events.parser.restart();
            end = self.read_events(&mut conn, &head, &mut events, &mut to_send).await?;
        }
    }

    /// A request's stream closed by the server before its answer, asked
    /// again from its last event (`GET` with `Last-Event-ID`). The request
    /// was sent: whatever fails here loses its answer, never "not sent".
    async fn resume_stream(&self, last: &str) -> Result<(Conn, Head), Failure> {
        let token = self.token().await.ok().flatten();
        let bytes = self.encode_get(Some(last), token.as_deref());
        let mut track = Track::default();
        let why = |m: &str| {
            wire::lost(format!(
                "the server closed the event stream before the answer; resuming it from event `{last}` failed: {m}"
            ))
        };
        let mut conn = wire::send(&self.target, &self.tls, &bytes, &mut track).await.map_err(|f| why(f.message()))?;
        let head = conn.head(&mut track).await.map_err(|f| why(f.message()))?;
        if head.status != 200 || !event_stream(&head) {
            return Err(why(&format!("HTTP {} without an event stream", head.status)));
        }
        Ok((conn, head))
    }

    /// Read an event stream into `events`, sending the replies it asks for
    /// as they come (the server may wait on one before it answers); a
    /// reply held for a person is sent once it is ready, while the stream
    /// is read, or after it ended (bounded by the held question's wait).
    pub(super) async fn read_events(
        &self,
        conn: &mut Conn,
        head: &Head,
        events: &mut Events,
        to_send: &mut tokio::sync::mpsc::UnboundedReceiver<Reply>,
    ) -> Result<BodyEnd, Failure> {
        let mut held = tokio::task::JoinSet::new();
        let end = {
            let read = conn.body(head, events);
            tokio::pin!(read);
            loop {
                tokio::select! {
                    r = &mut read => break r,
                    Some(reply) = to_send.recv() => match reply {
                        Reply::Now(v) => {
                            let _ = self.post_message(&v, REPLY_TIMEOUT).await;
                        }
                        Reply::Later(f) => {
                            held.spawn(f);
                        }
                    },
                    Some(Ok(v)) = held.join_next() => {
                        let _ = self.post_message(&v, REPLY_TIMEOUT).await;
                    }
                }
            }
        };
        while let Ok(reply) = to_send.try_recv() {
            let _ = self.post_message(&reply.value().await, REPLY_TIMEOUT).await;
        }
        while let Some(done) = held.join_next().await {
            if let Ok(v) = done {
                let _ = self.post_message(&v, REPLY_TIMEOUT).await;
            }
        }
        end
    }

    /// An answer as one JSON object. Over TLS a body ended by a close
    /// without `close_notify` is the answer if it is a whole JSON message.
    async fn json_answer(&self, conn: &mut Conn, head: &Head) -> Result<Answer, Failure> {
        let mut body = Bounded::new(self.answer_bytes_max);
        let end = conn.body(head, &mut body).await?;
        let body = body.finish();
        if body.truncated {
            return Ok(Answer::Truncated { kept: body.text.into_bytes(), total: body.total_bytes });
        }
        serde_json::from_str(&body.text).map(Answer::Message).map_err(|e| {
            let cut = match end {
                BodyEnd::Unconfirmed(why) => format!(" ({why})"),
                BodyEnd::Whole => String::new(),
            };
            wire::lost(format!("answer is not JSON: {e}{cut}"))
        })
    }

    /// An HTTP error status instead of a message. A 404 on a session means
    /// the server ended it.
    async fn refused(&self, conn: &mut Conn, head: &Head) -> Result<Answer, Failure> {
        if head.status == 404 && self.session_id().is_some() {
            self.mark_dead();
        }
        let mut body = Bounded::new(self.answer_bytes_max.min(64 * 1024));
        // The status is the answer; a body cut short is only less to show.
        let _ = conn.body(head, &mut body).await;
        // A token short of the scope the server asks (RFC 6750 §3.1): a
        // person's login with more scope may cure it, unless the kept
        // token was granted all of it already.
        let step_up = match (&self.bearer, head.status, head.header("www-authenticate")) {
            (Some(bearer), 403, Some(challenge)) => crate::oauth::step_up(challenge, bearer.granted_scope().as_deref()),
            _ => None,
        };
        Ok(Answer::HttpStatus {
            status: head.status,
            retry_after_seconds: head.retry_after_seconds,
            body: body.finish(),
            step_up,
        })
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
        self.mark_dead();
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

/// The answer is an event stream (else one JSON object).
pub(crate) fn event_stream(head: &Head) -> bool {
    head.header("content-type").is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// How long to wait before reopening a stream: the server's `retry`
/// (SEP-1699: the client waits that long), bounded.
pub(crate) fn retry_delay(retry_ms: Option<u64>) -> Duration {
    retry_ms.map_or(RETRY_DEFAULT, Duration::from_millis).min(RETRY_MAX)
}
