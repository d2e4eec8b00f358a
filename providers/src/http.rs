//! The HTTP provider: one JSON request to a service, one answer back.
//!
//! It is a minimal HTTP/1.1 client written directly on a TCP socket (no
//! client library) because the engine must know *exactly* whether any byte
//! left this process: "nothing written" is safe to re-send, "something
//! written, no complete answer" is an unknown effect. A library that retries
//! or pools connections behind our back would blur that line.
//!
//! Phases and what each failure means:
//! - bad URL / request, or a host that is not loopback (nor listed in
//!   `allowed_hosts`) → `NotDispatched{BadRequest}`;
//! - connect fails → `NotDispatched{ConnectionRefused}` (nothing sent);
//! - deadline before the first byte is written → `NotDispatched{Other}`;
//! - any byte written, then a write error, EOF, reset, a malformed or
//!   incomplete answer → `Lost{ResponseLost}`;
//! - any byte written, then the deadline → `Lost{DeadlineAfterDispatch}`;
//! - a complete answer (status, headers, body to its framed end) → `Received`,
//!   whatever the status code: judging it is the engine's job.
//!
//! `Progress::Dispatched` is sent once the whole request has been written.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::capture::Bounded;
use crate::{
    BoxFuture, Call, Captured, HttpReceipt, LostReason, NotDispatched, NotDispatchedKind, Observation, Outcome,
    Progress, ProgressSender, Provider, Receipt,
};

/// Bound on the status line plus headers (and on chunked trailers).
const HEAD_BYTES_MAX: usize = 64 * 1024;
/// Bound on one chunk-size line of a chunked body.
const CHUNK_LINE_BYTES_MAX: usize = 1024;
/// Bound on body bytes read (kept or not). Past it we stop reading; the
/// capture is marked truncated. Keeps a deadline-less call from reading an
/// endless body forever.
const BODY_READ_BYTES_MAX: u64 = 256 * 1024 * 1024;
/// Deadline for one observation request.
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Headers the provider writes itself; a plan may not set them, because they
/// carry framing (Content-Length, ...) or the idempotency identity.
const RESERVED_HEADERS: &[&str] =
    &["host", "content-length", "content-type", "transfer-encoding", "connection", "idempotency-key", "engine-try"];

/// Plan config: `{"kind":"http","endpoint":URL,"observe":URL-with-{operation_id}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpProvider {
    pub endpoint: String,
    /// Observation URL template; `{operation_id}` is replaced (percent-encoded).
    pub observe: Option<String>,
    /// Hosts allowed besides loopback (empty: loopback only). Not part of the
    /// identity: it is the engine's policy, not the task's meaning.
    pub allowed_hosts: Vec<String>,
}

impl HttpProvider {
    pub fn new(endpoint: impl Into<String>, observe: Option<String>) -> Self {
        HttpProvider { endpoint: endpoint.into(), observe, allowed_hosts: Vec::new() }
    }

    /// Parse the plan's provider config. Unknown keys are an error.
    pub fn from_config(config: &Value) -> Result<Self, String> {
        let obj = config.as_object().ok_or("http provider config must be an object")?;
        for k in obj.keys() {
            if !matches!(k.as_str(), "kind" | "endpoint" | "observe") {
                return Err(format!("unknown field `{k}` in http provider config"));
            }
        }
        if obj.get("kind").and_then(Value::as_str) != Some("http") {
            return Err("http provider config needs \"kind\": \"http\"".into());
        }
        let endpoint =
            obj.get("endpoint").and_then(Value::as_str).ok_or("http provider config needs a string `endpoint`")?;
        let observe = match obj.get("observe") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`observe` must be a string URL".into()),
        };
        Ok(HttpProvider::new(endpoint, observe))
    }

    /// Check both URLs against the scheme and host policy (for `engine check`).
    pub fn check(&self) -> Result<(), String> {
        Target::parse(&self.endpoint, &self.allowed_hosts).map_err(|m| format!("endpoint: {m}"))?;
        if let Some(t) = &self.observe {
            if !t.contains("{operation_id}") {
                return Err("observe: URL must contain {operation_id}".into());
            }
            Target::parse(&t.replace("{operation_id}", "x"), &self.allowed_hosts)
                .map_err(|m| format!("observe: {m}"))?;
        }
        Ok(())
    }

    async fn dispatch_inner(&self, call: &Call, progress: &ProgressSender) -> Outcome {
        let started = Instant::now();
        let target = match Target::parse(&self.endpoint, &self.allowed_hosts) {
            Ok(t) => t,
            Err(m) => return bad_request(format!("endpoint {}: {m}", self.endpoint)),
        };
        let req = match HttpRequest::from_call(call) {
            Ok(r) => r,
            Err(m) => return bad_request(m),
        };
        let bytes = req.encode(&target, call);
        let detail = format!(
            "{} {} written ({} bytes, Idempotency-Key {}, Engine-Try {})",
            req.method,
            self.endpoint,
            bytes.len(),
            call.operation_id,
            call.try_no
        );
        let on_written = || {
            // The engine may have stopped listening; the outcome still returns.
            let _ = progress.try_send(Progress::Dispatched { detail });
        };
        let head_only = req.method == "HEAD";

        let mut track = Track::default();
        let exchange = exchange(&target, &bytes, head_only, call.output_bytes_max, on_written, &mut track);
        let result = match call.timeout {
            None => exchange.await,
            Some(limit) => match tokio::time::timeout(limit, exchange).await {
                Ok(r) => r,
                Err(_) => Err(track.deadline_failure(limit)),
            },
        };
        match result {
            Ok(resp) => {
                let mut stdout = resp.body;
                stdout.redact(&call.secrets);
                Outcome::Received(Receipt::Http(HttpReceipt {
                    status: resp.status,
                    retry_after_seconds: resp.retry_after_seconds,
                    body: stdout,
                    duration_ms: started.elapsed().as_millis() as u64,
                }))
            }
            Err(Failure::NotSent(nd)) => Outcome::NotDispatched(nd),
            Err(Failure::Lost(reason, detail)) => Outcome::Lost { reason, detail },
        }
    }

    async fn observe_inner(&self, template: &str, call: &Call) -> Observation {
        let url = template.replace("{operation_id}", &percent_encode(&call.operation_id));
        let inconclusive = |why: String| Observation::Inconclusive { evidence: format!("GET {url}: {why}") };
        let target = match Target::parse(&url, &self.allowed_hosts) {
            Ok(t) => t,
            Err(m) => return inconclusive(format!("URL refused: {m}")),
        };
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            target.path, target.authority
        );
        let mut track = Track::default();
        let exchange = exchange(&target, request.as_bytes(), false, call.output_bytes_max, || {}, &mut track);
        let resp = match tokio::time::timeout(OBSERVE_TIMEOUT, exchange).await {
            Err(_) => return inconclusive(format!("no answer within {}s", OBSERVE_TIMEOUT.as_secs())),
            Ok(Err(Failure::NotSent(nd))) => return inconclusive(nd.message),
            Ok(Err(Failure::Lost(_, detail))) => return inconclusive(detail),
            Ok(Ok(r)) => r,
        };
        let mut body = resp.body;
        body.redact(&call.secrets);
        let evidence = format!(
            "GET {url} -> {}{}: {}",
            resp.status,
            if body.truncated { format!(" (body truncated, {} bytes)", body.total_bytes) } else { String::new() },
            body.text
        );
        match resp.status {
            200 => Observation::EffectPresent { evidence },
            404 => Observation::EffectAbsent { evidence },
            _ => Observation::Inconclusive { evidence },
        }
    }
}

impl Provider for HttpProvider {
    fn identity(&self) -> Value {
        json!({"kind": "http", "endpoint": self.endpoint, "observe": self.observe})
    }

    fn dispatch<'a>(&'a self, call: &'a Call, progress: ProgressSender) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { self.dispatch_inner(call, &progress).await })
    }

    fn observe<'a>(&'a self, call: &'a Call) -> Option<BoxFuture<'a, Observation>> {
        let template = self.observe.as_deref()?;
        Some(Box::pin(self.observe_inner(template, call)))
    }
}

fn bad_request(message: String) -> Outcome {
    Outcome::NotDispatched(NotDispatched { kind: NotDispatchedKind::BadRequest, message })
}

// ---------------------------------------------------------------- URL

/// Where to connect and what to put on the request line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// Host without brackets (`::1`, `127.0.0.1`, `localhost`).
    host: String,
    port: u16,
    /// `host[:port]` as written in the URL, for the Host header.
    authority: String,
    /// Path plus query, at least `/`.
    path: String,
    /// Host is loopback by name or address (so resolution must stay loopback).
    loopback: bool,
}

impl Target {
    fn parse(url: &str, allowed_hosts: &[String]) -> Result<Target, String> {
        if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err("URL contains whitespace or control characters".into());
        }
        let rest = match url.get(..7) {
            Some(s) if s.eq_ignore_ascii_case("http://") => &url[7..],
            _ => return Err(format!("only http:// URLs are supported, got `{url}`")),
        };
        if url.contains('#') {
            return Err("URL must not contain a fragment".into());
        }
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') {
            return Err("URL must not contain user info".into());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or("unclosed [ in URL host")?;
            match after {
                "" => (h, None),
                _ => (h, Some(after.strip_prefix(':').ok_or(format!("bad URL authority `{authority}`"))?)),
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port = match port {
            None => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(format!("bad port in URL authority `{authority}`")),
            },
        };
        if host.is_empty() {
            return Err("URL has no host".into());
        }
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false);
        let allowed = allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(host));
        if !loopback && !allowed {
            return Err(format!("host `{host}` is not loopback (127.0.0.0/8, ::1, localhost) and not an allowed host"));
        }
        Ok(Target { host: host.to_string(), port, authority: authority.to_string(), path, loopback })
    }
}

/// Percent-encode everything but RFC 3986 unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------- request

/// `call.request` for HTTP: `{"body"?: any, "method"?: "POST", "headers"?: {..}}`.
#[derive(Debug)]
struct HttpRequest {
    method: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl HttpRequest {
    fn from_call(call: &Call) -> Result<Self, String> {
        let obj = call.request.as_object().ok_or("http request must be a JSON object")?;
        for k in obj.keys() {
            if !matches!(k.as_str(), "body" | "method" | "headers") {
                return Err(format!("unknown field `{k}` in http request (expected body, method, headers)"));
            }
        }
        let method = match obj.get("method") {
            None => "POST".to_string(),
            Some(Value::String(m)) if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => m.clone(),
            Some(m) => return Err(format!("http method must be an uppercase word, got {m}")),
        };
        let mut headers = Vec::new();
        match obj.get("headers") {
            None => {}
            Some(Value::Object(h)) => headers = check_headers(h)?,
            Some(_) => return Err("http `headers` must be an object of strings".into()),
        }
        let body = obj.get("body").map(|b| serde_json::to_vec(b).expect("a Value always serializes"));
        Ok(HttpRequest { method, headers, body })
    }

    fn encode(&self, target: &Target, call: &Call) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\nHost: {}\r\n", self.method, target.path, target.authority);
        if self.body.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        let body_len = self.body.as_ref().map_or(0, Vec::len);
        head.push_str(&format!("Content-Length: {body_len}\r\n"));
        head.push_str(&format!("Idempotency-Key: {}\r\n", call.operation_id));
        head.push_str(&format!("Engine-Try: {}\r\n", call.try_no));
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(self.body.as_deref().unwrap_or_default());
        bytes
    }
}

/// Header names must be tokens and values free of CR/LF/NUL (no injection of
/// extra headers or a second request), and the reserved ones stay ours.
fn check_headers(h: &Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let is_tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let mut out = Vec::with_capacity(h.len());
    for (name, value) in h {
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!("bad http header name `{name}`"));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!("http header `{name}` is set by the engine and cannot be overridden"));
        }
        let value = value.as_str().ok_or(format!("http header `{name}` must be a string"))?;
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(format!("http header `{name}` contains CR, LF or NUL"));
        }
        out.push((name.clone(), value.to_string()));
    }
    Ok(out)
}

// ---------------------------------------------------------------- exchange

/// How far an exchange got, readable after the deadline dropped it.
#[derive(Debug, Default)]
struct Track {
    bytes_written: usize,
    status: Option<u16>,
}

impl Track {
    /// What a deadline means depends only on whether any byte left.
    fn deadline_failure(&self, limit: Duration) -> Failure {
        if self.bytes_written == 0 {
            Failure::NotSent(NotDispatched {
                kind: NotDispatchedKind::DeadlineBeforeDispatch,
                message: format!("deadline before dispatch: {limit:?} passed before any byte was written"),
            })
        } else {
            let seen = match self.status {
                Some(s) => format!(", status {s} seen but the answer was incomplete"),
                None => ", no status line received".into(),
            };
            Failure::Lost(
                LostReason::DeadlineAfterDispatch,
                format!("deadline {limit:?} fired after {} bytes were written{seen}", self.bytes_written),
            )
        }
    }
}

#[derive(Debug)]
enum Failure {
    NotSent(NotDispatched),
    Lost(LostReason, String),
}

fn lost(detail: String) -> Failure {
    Failure::Lost(LostReason::ResponseLost, detail)
}

#[derive(Debug)]
struct Response {
    status: u16,
    retry_after_seconds: Option<u64>,
    body: Captured,
}

/// Connect, write `request`, call `on_written`, read one complete response.
async fn exchange(
    target: &Target,
    request: &[u8],
    head_only: bool,
    body_bytes_max: usize,
    on_written: impl FnOnce(),
    track: &mut Track,
) -> Result<Response, Failure> {
    let mut stream = connect(target).await?;

    while track.bytes_written < request.len() {
        let res = stream.write(&request[track.bytes_written..]).await;
        match res {
            Ok(n) if n > 0 => track.bytes_written += n,
            other => {
                let why = other.err().map_or("socket accepted 0 bytes".into(), |e| e.to_string());
                return Err(if track.bytes_written == 0 {
                    Failure::NotSent(NotDispatched {
                        kind: NotDispatchedKind::ConnectionRefused,
                        message: format!("connection failed before any byte was written: {why}"),
                    })
                } else {
                    lost(format!("write failed after {} of {} bytes: {why}", track.bytes_written, request.len()))
                });
            }
        }
    }
    // A TcpStream has no user-space buffer; flush is for form's sake.
    if let Err(e) = stream.flush().await {
        return Err(lost(format!("flush failed after the request was written: {e}")));
    }
    on_written();

    let mut r = BufReader::new(stream);
    let head = read_head(&mut r).await?;
    track.status = Some(head.status);
    let no_body = head_only || head.status == 204 || head.status == 304;
    let mut body = Bounded::new(body_bytes_max);
    if !no_body {
        read_body(&mut r, &head, &mut body).await?;
    }
    Ok(Response { status: head.status, retry_after_seconds: head.retry_after_seconds, body: body.finish() })
}

async fn connect(target: &Target) -> Result<TcpStream, Failure> {
    let not_sent = |kind, message| Failure::NotSent(NotDispatched { kind, message });
    let addrs: Vec<SocketAddr> = match tokio::net::lookup_host((target.host.as_str(), target.port)).await {
        Ok(a) => a.collect(),
        Err(e) => return Err(not_sent(NotDispatchedKind::Other, format!("cannot resolve {}: {e}", target.host))),
    };
    // A loopback name must not resolve elsewhere (e.g. a doctored hosts file).
    if target.loopback && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(not_sent(
            NotDispatchedKind::BadRequest,
            format!("{} resolves to a non-loopback address", target.host),
        ));
    }
    let mut last = format!("{} resolved to no address", target.host);
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connect to {addr} failed: {e}"),
        }
    }
    Err(not_sent(NotDispatchedKind::ConnectionRefused, last))
}

#[derive(Debug)]
struct Head {
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    retry_after_seconds: Option<u64>,
}

/// Read the status line and headers, skipping interim 1xx answers.
async fn read_head<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> Result<Head, Failure> {
    let mut budget = HEAD_BYTES_MAX;
    loop {
        let line = read_line(r, &mut budget, "status line").await?;
        let status =
            parse_status_line(&line).ok_or_else(|| lost(format!("malformed status line {:?}", trunc(&line))))?;
        let mut head = Head { status, content_length: None, chunked: false, retry_after_seconds: None };
        loop {
            let line = read_line(r, &mut budget, "headers").await?;
            if line.is_empty() {
                break;
            }
            let (name, value) =
                line.split_once(':').ok_or_else(|| lost(format!("malformed header {:?}", trunc(&line))))?;
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    let n = value.parse::<u64>().map_err(|_| lost(format!("bad Content-Length {value:?}")))?;
                    if head.content_length.is_some_and(|m| m != n) {
                        return Err(lost("conflicting Content-Length headers".into()));
                    }
                    head.content_length = Some(n);
                }
                "transfer-encoding" => head.chunked = value.to_ascii_lowercase().contains("chunked"),
                // Only delta-seconds; an HTTP-date is left as "no hint".
                "retry-after" => head.retry_after_seconds = value.parse::<u64>().ok(),
                _ => {}
            }
        }
        // 1xx (other than 101, which we never ask for) precede the real answer.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        return Ok(head);
    }
}

fn parse_status_line(line: &str) -> Option<u16> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    let code = parts.next()?;
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") || code.len() != 3 {
        return None;
    }
    code.parse::<u16>().ok().filter(|c| (100..600).contains(c))
}

/// One CRLF-terminated line (terminator stripped), charged against `budget`.
/// EOF or a reset before the line ends means the answer was lost.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    budget: &mut usize,
    what: &str,
) -> Result<String, Failure> {
    let mut line = Vec::new();
    let n = (&mut *r)
        .take(*budget as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| lost(format!("connection broke while reading the {what}: {e}")))?;
    *budget -= n;
    if !line.ends_with(b"\n") {
        return Err(lost(if *budget == 0 {
            format!("response {what} over {HEAD_BYTES_MAX} bytes")
        } else {
            format!("connection closed before the {what} was complete")
        }));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn trunc(s: &str) -> String {
    s.chars().take(120).collect()
}

/// Read the body to its framed end into `out`. An early end is a lost answer:
/// a partial body is not a receipt.
async fn read_body<R: AsyncRead + Unpin>(r: &mut BufReader<R>, head: &Head, out: &mut Bounded) -> Result<(), Failure> {
    let status = head.status;
    if head.chunked {
        let mut budget = HEAD_BYTES_MAX;
        let mut read_total: u64 = 0;
        loop {
            let mut line_budget = CHUNK_LINE_BYTES_MAX;
            let line = read_line(r, &mut line_budget, "chunk size").await?;
            let hex = line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(hex, 16).map_err(|_| lost(format!("bad chunk size {:?}", trunc(&line))))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !read_line(r, &mut budget, "trailers").await?.is_empty() {}
                return Ok(());
            }
            read_total += size;
            if read_total > BODY_READ_BYTES_MAX {
                return Ok(()); // stop reading; `out` records truncation
            }
            copy_exact(r, size, out, status).await?;
            if !read_line(r, &mut line_budget, "chunk end").await?.is_empty() {
                return Err(lost("chunk not followed by CRLF".into()));
            }
        }
    }
    match head.content_length {
        Some(n) => copy_exact(r, n.min(BODY_READ_BYTES_MAX), out, status).await,
        None => {
            // No framing: the body ends at EOF (we sent Connection: close).
            let mut limited = (&mut *r).take(BODY_READ_BYTES_MAX);
            out.drain_from(&mut limited)
                .await
                .map_err(|e| lost(format!("status {status} received, then the connection broke in the body: {e}")))
        }
    }
}

async fn copy_exact<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    n: u64,
    out: &mut Bounded,
    status: u16,
) -> Result<(), Failure> {
    let mut left = n;
    let mut chunk = vec![0u8; 64 * 1024];
    while left > 0 {
        let want = chunk.len().min(left as usize);
        match r.read(&mut chunk[..want]).await {
            Ok(0) => return Err(lost(format!("status {status} received, then the body ended {left} bytes short"))),
            Ok(k) => {
                out.push(&chunk[..k]);
                left -= k as u64;
            }
            Err(e) => {
                return Err(lost(format!("status {status} received, then the connection broke in the body: {e}")))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tokio::net::TcpListener;

    fn call(request: Value) -> Call {
        Call {
            operation_id: "op-1".into(),
            try_no: 3,
            request,
            workspace: PathBuf::from("."),
            timeout: Some(Duration::from_secs(5)),
            output_bytes_max: 4096,
            stdin: None,
            env: vec![],
            secrets: vec![],
        }
    }

    /// Read one request: head up to the blank line, then Content-Length bytes.
    async fn read_request(s: &mut TcpStream) -> String {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(i) = text.find("\r\n\r\n") {
                let len = text
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .map_or(0, |v| v.parse::<usize>().unwrap());
                if buf.len() >= i + 4 + len {
                    return text;
                }
            }
            let n = s.read(&mut chunk).await.unwrap();
            if n == 0 {
                return String::from_utf8_lossy(&buf).to_string();
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// A one-connection fake server: reads the request, then writes `answer`
    /// (after `delay`), unless `answer` is None (close without a byte).
    async fn fake(answer: Option<Vec<u8>>, delay: Duration) -> (String, tokio::task::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/render", l.local_addr().unwrap());
        let h = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let req = read_request(&mut s).await;
            tokio::time::sleep(delay).await;
            if let Some(a) = answer {
                let _ = s.write_all(&a).await;
            }
            req
        });
        (url, h)
    }

    fn answer(status: &str, extra: &str, body: &str) -> Option<Vec<u8>> {
        Some(format!("HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes())
    }

    async fn run(p: &HttpProvider, c: &Call) -> (Outcome, Vec<Progress>) {
        let (tx, mut rx) = crate::progress_channel();
        let out = p.dispatch(c, tx).await;
        let mut seen = Vec::new();
        while let Ok(m) = rx.try_recv() {
            seen.push(m);
        }
        (out, seen)
    }

    fn receipt(o: Outcome) -> HttpReceipt {
        match o {
            Outcome::Received(Receipt::Http(r)) => r,
            other => panic!("expected an HTTP receipt, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn request_carries_idempotency_key_try_and_body() {
        let (url, server) = fake(answer("200 OK", "", r#"{"ok":true}"#), Duration::ZERO).await;
        let p = HttpProvider::new(&url, None);
        let c = call(json!({"body": {"a": 1}, "headers": {"X-Trace": "abc"}}));
        let (out, progress) = run(&p, &c).await;
        let r = receipt(out);
        assert_eq!(r.status, 200);
        assert_eq!(r.body.text, r#"{"ok":true}"#);
        assert_eq!(progress.len(), 1, "exactly one Dispatched");
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /render HTTP/1.1\r\n"), "{req}");
        for h in [
            "Idempotency-Key: op-1\r\n",
            "Engine-Try: 3\r\n",
            "X-Trace: abc\r\n",
            "Content-Type: application/json\r\n",
            "Connection: close\r\n",
        ] {
            assert!(req.contains(h), "missing {h:?} in {req}");
        }
        assert!(req.ends_with("\r\n\r\n{\"a\":1}"), "{req}");
    }

    #[tokio::test]
    async fn refused_connection_is_not_dispatched() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/render", l.local_addr().unwrap());
        drop(l);
        let (out, progress) = run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await;
        match out {
            Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::ConnectionRefused),
            other => panic!("{other:?}"),
        }
        assert!(progress.is_empty(), "nothing was sent, so no Dispatched");
    }

    #[tokio::test]
    async fn close_without_answer_is_response_lost() {
        let (url, _server) = fake(None, Duration::ZERO).await;
        let (out, progress) = run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await;
        assert!(matches!(out, Outcome::Lost { reason: LostReason::ResponseLost, .. }), "{out:?}");
        assert_eq!(progress.len(), 1);
    }

    #[tokio::test]
    async fn answer_after_deadline_is_deadline_after_dispatch() {
        let (url, _server) = fake(answer("200 OK", "", "late"), Duration::from_secs(3)).await;
        let mut c = call(json!({"body": 1}));
        c.timeout = Some(Duration::from_millis(200));
        let (out, progress) = run(&HttpProvider::new(url, None), &c).await;
        assert!(matches!(out, Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, .. }), "{out:?}");
        assert_eq!(progress.len(), 1);
    }

    #[test]
    fn deadline_with_nothing_written_is_not_dispatched() {
        // Pure mapping: a hanging connect cannot be staged reliably on loopback.
        match Track::default().deadline_failure(Duration::from_secs(1)) {
            Failure::NotSent(nd) => {
                assert_eq!(nd.kind, NotDispatchedKind::DeadlineBeforeDispatch);
                assert!(nd.message.contains("deadline before dispatch"));
            }
            other => panic!("{other:?}"),
        }
        let t = Track { bytes_written: 10, status: None };
        assert!(matches!(
            t.deadline_failure(Duration::from_secs(1)),
            Failure::Lost(LostReason::DeadlineAfterDispatch, _)
        ));
    }

    #[tokio::test]
    async fn hanging_connect_is_deadline_before_dispatch() {
        // A listener that never accepts, its backlog filled: the next SYN is
        // dropped and connect hangs, so the deadline fires with nothing sent.
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let l = sock.listen(0).unwrap();
        let addr = l.local_addr().unwrap();
        let mut fillers = Vec::new();
        for _ in 0..4 {
            if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_millis(100), TcpStream::connect(addr)).await {
                fillers.push(s);
            }
        }
        // Kernels that answer anyway (e.g. SYN cookies) cannot stage this.
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
            eprintln!("skipped: this kernel completes connects past a full backlog");
            return;
        }
        let mut c = call(json!({"body": 1}));
        c.timeout = Some(Duration::from_millis(300));
        let (out, progress) = run(&HttpProvider::new(format!("http://{addr}/render"), None), &c).await;
        match out {
            Outcome::NotDispatched(nd) => {
                assert_eq!(nd.kind, NotDispatchedKind::DeadlineBeforeDispatch);
                assert!(nd.message.contains("deadline before dispatch"), "{}", nd.message);
            }
            other => panic!("{other:?}"),
        }
        assert!(progress.is_empty());
    }

    #[tokio::test]
    async fn status_503_with_retry_after() {
        let (url, _s) = fake(answer("503 Service Unavailable", "Retry-After: 7\r\n", "busy"), Duration::ZERO).await;
        let r = receipt(run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await.0);
        assert_eq!(r.status, 503);
        assert_eq!(r.retry_after_seconds, Some(7));
        assert_eq!(r.body.text, "busy");
    }

    #[tokio::test]
    async fn body_over_bound_is_truncated_and_counted() {
        let body = "x".repeat(10_000);
        let (url, _s) = fake(answer("200 OK", "", &body), Duration::ZERO).await;
        let mut c = call(json!({"body": 1}));
        c.output_bytes_max = 100;
        let r = receipt(run(&HttpProvider::new(url, None), &c).await.0);
        assert_eq!(r.body.text.len(), 100);
        assert_eq!(r.body.total_bytes, 10_000);
        assert!(r.body.truncated);
    }

    #[tokio::test]
    async fn chunked_and_eof_framed_bodies() {
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: 1\r\n\r\n"
                .to_vec();
        let (url, _s) = fake(Some(chunked), Duration::ZERO).await;
        let r = receipt(run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await.0);
        assert_eq!(r.body.text, "hello world");

        // 100 Continue skipped; no Content-Length: body runs to EOF.
        let eof = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 201 Created\r\n\r\nto the end".to_vec();
        let (url, _s) = fake(Some(eof), Duration::ZERO).await;
        let r = receipt(run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await.0);
        assert_eq!((r.status, r.body.text.as_str()), (201, "to the end"));
    }

    #[tokio::test]
    async fn short_body_is_lost_not_a_receipt() {
        let (url, _s) =
            fake(Some(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly this".to_vec()), Duration::ZERO).await;
        let (out, _) = run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await;
        assert!(matches!(out, Outcome::Lost { reason: LostReason::ResponseLost, .. }), "{out:?}");
    }

    #[tokio::test]
    async fn secrets_are_redacted_from_the_body() {
        let (url, _s) = fake(answer("200 OK", "", "token=s3cr3t"), Duration::ZERO).await;
        let mut c = call(json!({"body": 1}));
        c.secrets = vec!["s3cr3t".into()];
        let r = receipt(run(&HttpProvider::new(url, None), &c).await.0);
        assert_eq!(r.body.text, "token=[REDACTED]");
    }

    #[tokio::test]
    async fn non_loopback_and_bad_requests_are_refused_before_dispatch() {
        for url in [
            "http://example.com/x",
            "https://127.0.0.1/x",
            "http://10.0.0.1:80/",
            "http://user@127.0.0.1/",
            "http://127.0.0.1:0/",
            "ftp://localhost/",
        ] {
            let (out, progress) = run(&HttpProvider::new(url, None), &call(json!({"body": 1}))).await;
            match out {
                Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::BadRequest, "{url}"),
                other => panic!("{url}: {other:?}"),
            }
            assert!(progress.is_empty());
        }
        let ok = "http://127.0.0.1:9/x";
        for req in [
            json!([1]),
            json!({"bdy": 1}),
            json!({"method": "post"}),
            json!({"headers": {"Idempotency-Key": "x"}}),
            json!({"headers": {"X-A": "a\r\nX-B: b"}}),
            json!({"headers": {"Bad Name": "v"}}),
            json!({"headers": {"X-N": 1}}),
        ] {
            let (out, _) = run(&HttpProvider::new(ok, None), &call(req.clone())).await;
            assert!(
                matches!(out, Outcome::NotDispatched(NotDispatched { kind: NotDispatchedKind::BadRequest, .. })),
                "{req}: {out:?}"
            );
        }
    }

    #[test]
    fn url_parsing() {
        let t = Target::parse("http://[::1]:8080/a?b=1", &[]).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str(), t.authority.as_str()),
            ("::1", 8080, "/a?b=1", "[::1]:8080")
        );
        let t = Target::parse("http://localhost?q", &[]).unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/?q"));
        assert!(Target::parse("http://127.9.9.9/", &[]).is_ok());
        assert!(Target::parse("http://[::1]x/", &[]).is_err());
        assert!(Target::parse("http://svc.internal/", &[]).is_err());
        assert!(Target::parse("http://svc.internal/", &["svc.internal".into()]).is_ok());
    }

    #[test]
    fn config_identity_and_check() {
        let cfg = json!({"kind": "http", "endpoint": "http://127.0.0.1:1/render",
                         "observe": "http://127.0.0.1:1/operations/{operation_id}"});
        let p = HttpProvider::from_config(&cfg).unwrap();
        assert_eq!(p.identity(), cfg);
        p.check().unwrap();
        assert!(HttpProvider::from_config(&json!({"kind": "http", "endpoint": "x", "extra": 1})).is_err());
        assert!(HttpProvider::new("http://127.0.0.1/", Some("http://127.0.0.1/ops".into())).check().is_err());
        assert_eq!(HttpProvider::new("http://a/", None).identity()["observe"], Value::Null);
    }

    async fn observe_with(status: &str) -> (Observation, String) {
        let (url, server) = fake(answer(status, "", "{}"), Duration::ZERO).await;
        let template = url.replace("/render", "/operations/{operation_id}");
        let p = HttpProvider::new("http://127.0.0.1:1/", Some(template));
        let mut c = call(json!({}));
        c.operation_id = "op 1/x".into();
        let o = p.observe(&c).expect("observe configured").await;
        (o, server.await.unwrap())
    }

    #[tokio::test]
    async fn observe_maps_200_404_other() {
        let (o, req) = observe_with("200 OK").await;
        assert!(matches!(o, Observation::EffectPresent { .. }), "{o:?}");
        assert!(req.starts_with("GET /operations/op%201%2Fx HTTP/1.1\r\n"), "{req}");
        assert!(matches!(observe_with("404 Not Found").await.0, Observation::EffectAbsent { .. }));
        assert!(matches!(observe_with("500 Internal Server Error").await.0, Observation::Inconclusive { .. }));
        // Nobody listening: inconclusive, never absent.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = format!("http://{}/operations/{{operation_id}}", l.local_addr().unwrap());
        drop(l);
        let o = HttpProvider::new("http://127.0.0.1:1/", Some(dead)).observe(&call(json!({}))).unwrap().await;
        assert!(matches!(o, Observation::Inconclusive { .. }), "{o:?}");
        assert!(HttpProvider::new("http://127.0.0.1:1/", None).observe(&call(json!({}))).is_none());
    }

    /// End to end against the receiver fixture: a dropped answer after the
    /// effect is Lost, and observation then finds the effect.
    #[tokio::test]
    async fn receiver_fixture_drop_then_observe() {
        let dir = tempfile::tempdir().unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/receiver/receiver.py");
        let log = dir.path().join("deliveries.jsonl");
        let mut child = tokio::process::Command::new("python3")
            .args([script, "--port", "0", "--observe", "--log"])
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs the receiver fixture");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        tokio::time::timeout(Duration::from_secs(10), out.read_line(&mut line)).await.unwrap().unwrap();
        let port: u16 = line.trim().strip_prefix("listening ").unwrap().parse().unwrap();
        let base = format!("http://127.0.0.1:{port}");

        // Script the next delivery to be dropped after its effect.
        let control = HttpProvider::new(format!("{base}/_control"), None);
        let r = receipt(run(&control, &call(json!({"body": {"mode": "drop", "times": 1}}))).await.0);
        assert_eq!(r.status, 200);

        let p = HttpProvider::new(format!("{base}/render"), Some(format!("{base}/operations/{{operation_id}}")));
        let c = call(json!({"body": {"doc": "a"}}));
        let (out, progress) = run(&p, &c).await;
        assert!(matches!(out, Outcome::Lost { reason: LostReason::ResponseLost, .. }), "{out:?}");
        assert_eq!(progress.len(), 1);
        let o = p.observe(&c).unwrap().await;
        assert!(matches!(&o, Observation::EffectPresent { evidence } if evidence.contains("\"try\": 3")), "{o:?}");

        let mut other = call(json!({"body": 1}));
        other.operation_id = "never-sent".into();
        assert!(matches!(p.observe(&other).unwrap().await, Observation::EffectAbsent { .. }));
        // The mode applied once: the next delivery is answered.
        other.operation_id = "op-2".into();
        assert_eq!(receipt(run(&p, &other).await.0).status, 200);
        child.kill().await.unwrap();
    }
}
