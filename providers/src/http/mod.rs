//! The HTTP provider: one JSON request to a service, one answer back, and
//! read-back observation by GET.
//!
//! It is a minimal HTTP/1.1 client written directly on a TCP socket (with
//! rustls over it for `https://`), not a client library, because the engine
//! must know *exactly* whether any byte left this process: "nothing
//! written" is safe to re-send, "something written, no complete answer" is
//! an unknown effect. A library that retries or pools connections behind our
//! back would blur that line.
//!
//! Phases and what each failure means (`wire` tracks the bytes):
//! - bad URL / request, or a host that is not loopback (nor listed in
//!   `allowed_hosts`) → `NotDispatched{BadRequest}`;
//! - connect fails → `NotDispatched{ConnectionRefused}` (nothing sent);
//! - the TLS handshake fails (unknown CA, wrong name, ...) →
//!   `NotDispatched{Other}`: the handshake carries no byte of the request;
//! - deadline before the first byte is written → `NotDispatched{DeadlineBeforeDispatch}`;
//! - any byte written (for TLS: any plaintext byte the TLS stream accepted),
//!   then a write error, EOF, reset, a malformed or incomplete status line
//!   or head → `Lost{ResponseLost}`;
//! - any byte written, then the deadline before the head → `Lost{DeadlineAfterDispatch}`;
//! - a status line and its headers → `Received`, whatever the status code:
//!   judging it is the engine's job. The server answered: a body cut short
//!   after that (the connection broken in it, a TLS close without
//!   `close_notify` ending an unframed body, the deadline) is kept as far
//!   as it came, and the receipt says why (`body_cut`): a body problem, not
//!   an unknown effect.
//!
//! `Progress::Dispatched` is sent once the whole request has been written.

mod request;
pub(crate) mod url;
pub(crate) mod wire;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::observe::{ConfigError, HttpObserve, Placeholders};
use crate::tls::Tls;
use crate::{
    BoxFuture, Call, HttpReceipt, NotDispatched, NotDispatchedKind, Outcome, Progress, ProgressSender, Provider,
    ReadBack, Receipt,
};
use request::HttpRequest;
use url::{percent_encode, Target};
use wire::{exchange, Ask, Failure, Track};

/// Deadline for one read-back request.
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Plan config: `{"kind": "http", "endpoint": URL, "observe"?: URL | rule,
/// "hosts"?: [names], "ca_file"?: path}`.
#[derive(Debug, Clone)]
pub struct HttpProvider {
    pub endpoint: String,
    /// The default read-back, for tasks that declare none.
    pub observe: Option<HttpObserve>,
    /// Hosts allowed besides loopback (empty: loopback only). Not part of the
    /// identity: it is the engine's policy, not the task's meaning.
    pub allowed_hosts: Vec<String>,
    tls: Tls,
    /// A response header whose value is the service's version
    /// (`version_header`, lower-cased): kept with each receipt.
    pub version_header: Option<String>,
}

impl HttpProvider {
    pub fn new(endpoint: impl Into<String>) -> Self {
        HttpProvider {
            endpoint: endpoint.into(),
            observe: None,
            allowed_hosts: Vec::new(),
            tls: Tls::default(),
            version_header: None,
        }
    }

    /// Keep the value of this response header with each receipt.
    pub fn with_version_header(mut self, name: Option<String>) -> Self {
        self.version_header = name.map(|n| n.to_ascii_lowercase());
        self
    }

    pub fn with_observe(mut self, observe: Option<HttpObserve>) -> Self {
        self.observe = observe;
        self
    }

    pub fn with_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// Trust this PEM file's certificates besides the system roots.
    pub fn with_ca_file(mut self, ca_file: Option<PathBuf>) -> Self {
        self.tls = Tls::new(ca_file);
        self
    }

    pub fn ca_file(&self) -> Option<&Path> {
        self.tls.ca_file()
    }

    /// Parse the plan's provider config. Unknown keys are an error. A bare
    /// string `observe` URL must contain `{operation_id}`; it means 200
    /// present, and nothing absent (`HttpObserve::status_url`).
    pub fn from_config(config: &Value) -> Result<Self, ConfigError> {
        let obj = config.as_object().ok_or_else(|| ConfigError::new("", "http provider config must be an object"))?;
        let known = ["kind", "endpoint", "observe", "hosts", "ca_file", "version_header"];
        if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ConfigError::new(k.as_str(), "unknown field in http provider config"));
        }
        if obj.get("kind").and_then(Value::as_str) != Some("http") {
            return Err(ConfigError::new("kind", "http provider config needs \"kind\": \"http\""));
        }
        let endpoint = obj
            .get("endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| ConfigError::new("endpoint", "needs a string URL"))?;
        let observe = match obj.get("observe") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.contains("{operation_id}") => {
                return Err(ConfigError::new("observe", "a bare observe URL must contain {operation_id}"))
            }
            Some(v) => Some(HttpObserve::from_json(v).map_err(|e| e.under("observe"))?),
        };
        let hosts = match obj.get("hosts") {
            None => Vec::new(),
            Some(v) => string_list(v).ok_or_else(|| ConfigError::new("hosts", "must be a list of host names"))?,
        };
        let ca_file = match obj.get("ca_file") {
            None => None,
            Some(Value::String(p)) if !p.is_empty() => Some(PathBuf::from(p)),
            Some(_) => return Err(ConfigError::new("ca_file", "must be a path")),
        };
        let version_header = match obj.get("version_header") {
            None => None,
            Some(Value::String(h)) if is_header_name(h) => Some(h.clone()),
            Some(_) => {
                return Err(ConfigError::new(
                    "version_header",
                    "must be an HTTP header name (1 to 128 token characters)",
                ))
            }
        };
        Ok(HttpProvider::new(endpoint)
            .with_observe(observe)
            .with_hosts(hosts)
            .with_ca_file(ca_file)
            .with_version_header(version_header))
    }

    /// Check the URLs against the scheme and host policy, and that a
    /// `ca_file` loads (for `engine check`).
    pub fn check(&self) -> Result<(), ConfigError> {
        Target::parse(&self.endpoint, &self.allowed_hosts).map_err(|m| ConfigError::new("endpoint", m))?;
        if let Some(rule) = &self.observe {
            self.check_rule(rule).map_err(|e| e.under("observe"))?;
        }
        if let Some(path) = self.tls.ca_file() {
            crate::tls::read_ca_file(path).map_err(|m| ConfigError::new("ca_file", m))?;
        }
        Ok(())
    }

    /// The `version_header`'s value in an answer's headers (the first, if
    /// repeated; secrets redacted, kept to 256 characters).
    fn version_of(&self, headers: &[(String, String)], secrets: &[String]) -> Option<String> {
        let name = self.version_header.as_ref()?;
        let (_, value) = headers.iter().find(|(n, _)| n == name)?;
        let value: String = value.chars().take(256).collect();
        Some(crate::capture::redact_text(value, secrets))
    }

    fn check_rule(&self, rule: &HttpObserve) -> Result<(), ConfigError> {
        let ph = Placeholders { operation_id: "op".into(), try_no: 1, workspace: "/ws".into() };
        let url = ph.fill_with(&rule.url, percent_encode);
        Target::parse(&url, &self.allowed_hosts).map(|_| ()).map_err(|m| ConfigError::new("url", m))
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
        let ask = Ask {
            target: &target,
            tls: &self.tls,
            request: &bytes,
            head_only: req.method == "HEAD",
            body_bytes_max: call.output_bytes_max,
            limit: call.timeout,
        };
        let mut track = Track::default();
        match exchange(&ask, on_written, &mut track).await {
            Ok(resp) => {
                let mut stdout = resp.body;
                stdout.redact(&call.secrets);
                Outcome::Received(Receipt::Http(HttpReceipt {
                    status: resp.status,
                    retry_after_seconds: resp.retry_after_seconds,
                    body: stdout,
                    duration_ms: started.elapsed().as_millis() as u64,
                    body_cut: resp.body_cut.map(|m| crate::capture::redact_text(m, &call.secrets)),
                    version: self.version_of(&resp.headers, &call.secrets),
                }))
            }
            Err(Failure::NotSent(nd)) => Outcome::NotDispatched(nd),
            Err(Failure::Lost(reason, detail)) => Outcome::Lost { reason, detail },
        }
    }

    /// GET the rule's URL and judge the answer by the rule.
    async fn read_back_with(&self, rule: &HttpObserve, call: &Call) -> ReadBack {
        let ph = Placeholders::of(call);
        let url = ph.fill_with(&rule.url, percent_encode);
        let request = json!({"method": "GET", "url": url});
        let target = match Target::parse(&url, &self.allowed_hosts) {
            Ok(t) => t,
            Err(m) => return ReadBack::failed(request, Value::Null, format!("URL refused: {m}")),
        };
        let mut track = Track::default();
        let bytes = request::get(&target);
        let ask = Ask {
            target: &target,
            tls: &self.tls,
            request: &bytes,
            head_only: false,
            body_bytes_max: call.output_bytes_max,
            limit: Some(OBSERVE_TIMEOUT),
        };
        let resp = match exchange(&ask, || {}, &mut track).await {
            Err(f) => return ReadBack::failed(request, Value::Null, f.message().to_string()),
            // A rule may read the body: one cut short decides nothing.
            Ok(r) if r.body_cut.is_some() => {
                let why = format!("HTTP {}, then {}", r.status, r.body_cut.unwrap_or_default());
                return ReadBack::failed(request, Value::Null, why);
            }
            Ok(r) => r,
        };
        let mut body = resp.body;
        body.redact(&call.secrets);
        let decision = rule.decide(resp.status, &body, &ph);
        let answer = json!({"status": resp.status, "body": body.text,
                            "body_bytes": body.total_bytes, "body_truncated": body.truncated});
        ReadBack::decided(request, answer, decision)
    }
}

/// An HTTP header name: 1 to 128 token characters (RFC 9110 `tchar`).
fn is_header_name(h: &str) -> bool {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    (1..=128).contains(&h.len()) && h.chars().all(tchar)
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?.iter().map(|h| h.as_str().filter(|s| !s.is_empty()).map(str::to_string)).collect()
}

impl Provider for HttpProvider {
    fn identity(&self) -> Value {
        let mut id = json!({"kind": "http", "endpoint": self.endpoint,
                            "observe": self.observe.as_ref().map(HttpObserve::to_json)});
        if let Some(p) = self.tls.ca_file() {
            id["ca_file"] = json!(p.to_string_lossy());
        }
        id
    }

    fn dispatch<'a>(&'a self, call: &'a Call, progress: ProgressSender) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { self.dispatch_inner(call, &progress).await })
    }

    fn check_observe(&self, rule: &Value) -> Result<(), ConfigError> {
        self.check_rule(&HttpObserve::from_json(rule)?)
    }

    fn read_back<'a>(&'a self, call: &'a Call, rule: Option<&'a Value>) -> Option<BoxFuture<'a, ReadBack>> {
        let rule = match rule {
            None => self.observe.clone()?,
            Some(v) => match HttpObserve::from_json(v) {
                Ok(r) => r,
                Err(e) => {
                    let failed = ReadBack::failed(v.clone(), Value::Null, format!("observe rule refused: {e}"));
                    return Some(Box::pin(async move { failed }));
                }
            },
        };
        Some(Box::pin(async move { self.read_back_with(&rule, call).await }))
    }
}

fn bad_request(message: String) -> Outcome {
    Outcome::NotDispatched(NotDispatched { kind: NotDispatchedKind::BadRequest, message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::HttpObserve;
    use crate::{Decider, LostReason, Observation, Verdict};
    use std::path::PathBuf;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;
    use tokio::net::TcpStream;

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
            sandbox: crate::sandbox::Sandbox::disabled(),
            traceparent: None,
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
    async fn the_declared_version_header_is_kept_with_the_receipt() {
        let (url, _server) = fake(answer("200 OK", "X-Service-Version: 2.1.0\r\n", "{}"), Duration::ZERO).await;
        let config = json!({"kind": "http", "endpoint": url, "version_header": "x-service-VERSION"});
        let p = HttpProvider::from_config(&config).unwrap();
        assert_eq!(receipt(run(&p, &call(json!({}))).await.0).version.as_deref(), Some("2.1.0"));
        let (url, _server) = fake(answer("200 OK", "", "{}"), Duration::ZERO).await;
        let p = HttpProvider::from_config(&json!({"kind": "http", "endpoint": url, "version_header": "X-V"})).unwrap();
        assert_eq!(receipt(run(&p, &call(json!({}))).await.0).version, None, "not in the answer: none");
        let (url, _server) = fake(answer("200 OK", "X-Service-Version: 2.1.0\r\n", "{}"), Duration::ZERO).await;
        let p = HttpProvider::new(&url);
        assert_eq!(receipt(run(&p, &call(json!({}))).await.0).version, None, "not declared: not kept");
        for bad in [json!("X V"), json!(""), json!(1)] {
            let e = HttpProvider::from_config(
                &json!({"kind": "http", "endpoint": "http://127.0.0.1/", "version_header": bad}),
            );
            assert!(e.is_err(), "{bad} is no header name");
        }
    }

    #[tokio::test]
    async fn request_carries_idempotency_key_try_and_body() {
        let (url, server) = fake(answer("200 OK", "", r#"{"ok":true}"#), Duration::ZERO).await;
        let p = HttpProvider::new(&url);
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
        let (out, progress) = run(&HttpProvider::new(url), &call(json!({"body": 1}))).await;
        match out {
            Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::ConnectionRefused),
            other => panic!("{other:?}"),
        }
        assert!(progress.is_empty(), "nothing was sent, so no Dispatched");
    }

    #[tokio::test]
    async fn close_without_answer_is_response_lost() {
        let (url, _server) = fake(None, Duration::ZERO).await;
        let (out, progress) = run(&HttpProvider::new(url), &call(json!({"body": 1}))).await;
        assert!(matches!(out, Outcome::Lost { reason: LostReason::ResponseLost, .. }), "{out:?}");
        assert_eq!(progress.len(), 1);
    }

    #[tokio::test]
    async fn answer_after_deadline_is_deadline_after_dispatch() {
        let (url, _server) = fake(answer("200 OK", "", "late"), Duration::from_secs(3)).await;
        let mut c = call(json!({"body": 1}));
        c.timeout = Some(Duration::from_millis(200));
        let (out, progress) = run(&HttpProvider::new(url), &c).await;
        assert!(matches!(out, Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, .. }), "{out:?}");
        assert_eq!(progress.len(), 1);
    }

    #[test]
    fn a_traced_call_sends_its_traceparent_header() {
        let target = Target::parse("http://127.0.0.1:9/x", &[]).unwrap();
        let mut c = call(json!({"body": 1}));
        let req = HttpRequest::from_call(&c).unwrap();
        let plain = String::from_utf8(req.encode(&target, &c)).unwrap();
        assert!(!plain.to_ascii_lowercase().contains("traceparent"), "{plain}");
        c.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        let traced = String::from_utf8(req.encode(&target, &c)).unwrap();
        assert!(
            traced.contains("\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"),
            "{traced}"
        );
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
        let (out, progress) = run(&HttpProvider::new(format!("http://{addr}/render")), &c).await;
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
        let r = receipt(run(&HttpProvider::new(url), &call(json!({"body": 1}))).await.0);
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
        let r = receipt(run(&HttpProvider::new(url), &c).await.0);
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
        let r = receipt(run(&HttpProvider::new(url), &call(json!({"body": 1}))).await.0);
        assert_eq!(r.body.text, "hello world");

        // 100 Continue skipped; no Content-Length: body runs to EOF.
        let eof = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 201 Created\r\n\r\nto the end".to_vec();
        let (url, _s) = fake(Some(eof), Duration::ZERO).await;
        let r = receipt(run(&HttpProvider::new(url), &call(json!({"body": 1}))).await.0);
        assert_eq!((r.status, r.body.text.as_str()), (201, "to the end"));
    }

    #[tokio::test]
    async fn a_status_received_is_the_answer_and_a_short_body_says_so() {
        let (url, _s) =
            fake(Some(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly this".to_vec()), Duration::ZERO).await;
        let r = receipt(run(&HttpProvider::new(url), &call(json!({"body": 1}))).await.0);
        assert_eq!((r.status, r.body.text.as_str()), (200, "only this"));
        let cut = r.body_cut.expect("the cut is recorded");
        assert!(cut.contains("status 200 received") && cut.contains("41 bytes short"), "{cut}");
        // A whole body has nothing to say.
        let (url, _s) = fake(answer("200 OK", "", "whole"), Duration::ZERO).await;
        assert_eq!(receipt(run(&HttpProvider::new(url), &call(json!({"body": 1}))).await.0).body_cut, None);
    }

    #[tokio::test]
    async fn a_deadline_in_the_body_keeps_the_status_and_what_came() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/render", l.local_addr().unwrap());
        let _server = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            read_request(&mut s).await;
            s.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nhalf").await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let mut c = call(json!({"body": 1}));
        c.timeout = Some(Duration::from_millis(300));
        let r = receipt(run(&HttpProvider::new(url), &c).await.0);
        assert_eq!((r.status, r.body.text.as_str()), (201, "half"));
        assert!(r.body_cut.unwrap().contains("deadline"));
    }

    #[tokio::test]
    async fn secrets_are_redacted_from_the_body() {
        let (url, _s) = fake(answer("200 OK", "", "token=s3cr3t"), Duration::ZERO).await;
        let mut c = call(json!({"body": 1}));
        c.secrets = vec!["s3cr3t".into()];
        let r = receipt(run(&HttpProvider::new(url), &c).await.0);
        assert_eq!(r.body.text, "token=[REDACTED]");
    }

    #[tokio::test]
    async fn non_loopback_and_bad_requests_are_refused_before_dispatch() {
        for url in [
            "http://example.com/x",
            "http://10.0.0.1:80/",
            "http://user@127.0.0.1/",
            "http://127.0.0.1:0/",
            "ftp://localhost/",
        ] {
            let (out, progress) = run(&HttpProvider::new(url), &call(json!({"body": 1}))).await;
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
            let (out, _) = run(&HttpProvider::new(ok), &call(req.clone())).await;
            assert!(
                matches!(out, Outcome::NotDispatched(NotDispatched { kind: NotDispatchedKind::BadRequest, .. })),
                "{req}: {out:?}"
            );
        }
    }

    #[test]
    fn config_identity_and_check() {
        let cfg = json!({"kind": "http", "endpoint": "http://127.0.0.1:1/render",
                         "observe": "http://127.0.0.1:1/operations/{operation_id}"});
        let p = HttpProvider::from_config(&cfg).unwrap();
        // The bare URL is migrated: 200 present, nothing absent.
        assert_eq!(
            p.identity()["observe"],
            json!({"url": "http://127.0.0.1:1/operations/{operation_id}", "present_if": {"status": [200]}})
        );
        p.check().unwrap();
        let err = |v: Value| HttpProvider::from_config(&v).unwrap_err();
        assert_eq!(err(json!({"kind": "http", "endpoint": "x", "extra": 1})).path, "extra");
        assert_eq!(err(json!({"kind": "http", "endpoint": "x", "observe": "http://127.0.0.1/ops"})).path, "observe");
        let e = err(json!({"kind": "http", "endpoint": "x", "observe": {"url": "u", "absent_if": {"status": [1]}}}));
        assert_eq!(e.path, "observe.absent_if.status[0]");
        assert_eq!(err(json!({"kind": "http", "endpoint": "x", "hosts": [1]})).path, "hosts");
        // Hosts apply to read-back URLs too; a ca_file must load.
        let rule = json!({"kind": "http", "endpoint": "http://127.0.0.1/",
                          "observe": {"url": "https://svc.internal/{operation_id}", "present_if": {"status": [200]}}});
        let p = HttpProvider::from_config(&rule).unwrap();
        assert_eq!(p.check().unwrap_err().path, "observe.url");
        let mut with_hosts = rule.clone();
        with_hosts["hosts"] = json!(["svc.internal"]);
        HttpProvider::from_config(&with_hosts).unwrap().check().unwrap();
        let mut missing_ca = rule.clone();
        missing_ca["observe"] = Value::Null;
        missing_ca["ca_file"] = json!("/nonexistent/ca.pem");
        assert_eq!(HttpProvider::from_config(&missing_ca).unwrap().check().unwrap_err().path, "ca_file");
        assert_eq!(HttpProvider::new("http://a/").identity()["observe"], Value::Null);
        assert_eq!(
            p.check_observe(&json!({"url": "http://10.1.1.1/", "present_if": {"status": [200]}})).unwrap_err().path,
            "url"
        );
    }

    async fn read_back_with(status: &str, rule: Value) -> (ReadBack, String) {
        let (url, server) = fake(answer(status, "", r#"{"state":"done"}"#), Duration::ZERO).await;
        let mut rule = rule;
        rule["url"] = json!(url.replace("/render", "/operations/{operation_id}/{try}"));
        let p = HttpProvider::new("http://127.0.0.1:1/");
        let mut c = call(json!({}));
        c.operation_id = "op 1/x".into();
        let o = p.read_back(&c, Some(&rule)).expect("a rule was given").await;
        (o, server.await.unwrap())
    }

    #[tokio::test]
    async fn read_back_by_task_rule_three_outcomes() {
        let rule = json!({"present_if": {"status": [200], "json": {"/state": "done"}}, "absent_if": {"status": [404]}});
        let (o, req) = read_back_with("200 OK", rule.clone()).await;
        assert_eq!((o.verdict, o.decider), (Verdict::Present, Decider::PresentIf), "{o:?}");
        assert!(req.starts_with("GET /operations/op%201%2Fx/3 HTTP/1.1\r\n"), "{req}");
        assert_eq!(o.answer["status"], 200);
        assert!(o.request["url"].as_str().unwrap().ends_with("/operations/op%201%2Fx/3"));
        let (o, _) = read_back_with("404 Not Found", rule.clone()).await;
        assert_eq!((o.verdict, o.decider), (Verdict::Absent, Decider::AbsentIf));
        let (o, _) = read_back_with("500 Internal Server Error", rule).await;
        assert_eq!((o.verdict, o.decider), (Verdict::Inconclusive, Decider::NeitherMatched));
        // An undeclared 404 is not absence.
        let (o, _) = read_back_with("404 Not Found", json!({"present_if": {"status": [200]}})).await;
        assert_eq!(o.verdict, Verdict::Inconclusive);
    }

    #[tokio::test]
    async fn default_rule_and_failures_are_inconclusive() {
        let (url, _server) = fake(answer("404 Not Found", "", "{}"), Duration::ZERO).await;
        let template = url.replace("/render", "/operations/{operation_id}");
        let p = HttpProvider::new("http://127.0.0.1:1/").with_observe(Some(HttpObserve::status_url(&template)));
        let o = p.observe(&call(json!({}))).expect("observe configured").await;
        assert!(matches!(&o, Observation::Inconclusive { evidence } if evidence.contains("-> 404")), "{o:?}");
        // Nobody listening: inconclusive, never absent.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = format!("http://{}/operations/{{operation_id}}", l.local_addr().unwrap());
        drop(l);
        let p = HttpProvider::new("http://127.0.0.1:1/").with_observe(Some(HttpObserve::legacy_status_url(&dead)));
        let o = p.read_back(&call(json!({})), None).unwrap().await;
        assert_eq!((o.verdict, o.decider), (Verdict::Inconclusive, Decider::NoAnswer), "{o:?}");
        assert!(o.failure.as_deref().unwrap_or("").contains("connect"), "{o:?}");
        assert!(HttpProvider::new("http://127.0.0.1:1/").observe(&call(json!({}))).is_none());
        let (p, c, rule) = (HttpProvider::new("http://127.0.0.1:1/"), call(json!({})), json!({"url": 1}));
        let o = p.read_back(&c, Some(&rule)).unwrap().await;
        assert!(o.failure.unwrap().contains("observe rule refused"));
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
        let control = HttpProvider::new(format!("{base}/_control"));
        let r = receipt(run(&control, &call(json!({"body": {"mode": "drop", "times": 1}}))).await.0);
        assert_eq!(r.status, 200);

        let observe = HttpObserve::legacy_status_url(&format!("{base}/operations/{{operation_id}}"));
        let p = HttpProvider::new(format!("{base}/render")).with_observe(Some(observe));
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
