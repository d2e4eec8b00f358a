//! The request a task sends to an HTTP provider, checked and encoded.

use serde_json::{Map, Value};

use super::url::Target;
use crate::Call;

/// Headers the provider writes itself; a plan may not set them, because they
/// carry framing (Content-Length, ...) or the idempotency identity.
const RESERVED_HEADERS: &[&str] =
    &["host", "content-length", "content-type", "transfer-encoding", "connection", "idempotency-key", "engine-try"];

/// `call.request` for HTTP: `{"body"?: any, "method"?: "POST", "headers"?: {..}}`.
#[derive(Debug)]
pub(crate) struct HttpRequest {
    pub method: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl HttpRequest {
    pub fn from_call(call: &Call) -> Result<Self, String> {
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
        let headers = match obj.get("headers") {
            None => Vec::new(),
            Some(Value::Object(h)) => check_headers(h)?,
            Some(_) => return Err("http `headers` must be an object of strings".into()),
        };
        let body = obj.get("body").map(|b| b.to_string().into_bytes());
        Ok(HttpRequest { method, headers, body })
    }

    pub fn encode(&self, target: &Target, call: &Call) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\nHost: {}\r\n", self.method, target.path, target.authority);
        if self.body.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        let body_len = self.body.as_ref().map_or(0, Vec::len);
        head.push_str(&format!("Content-Length: {body_len}\r\n"));
        head.push_str(&format!("Idempotency-Key: {}\r\n", call.operation_id));
        head.push_str(&format!("Engine-Try: {}\r\n", call.try_no));
        if let Some(tp) = &call.traceparent {
            head.push_str(&format!("traceparent: {tp}\r\n"));
        }
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(self.body.as_deref().unwrap_or_default());
        bytes
    }
}

/// A GET with `Accept: application/json` (read-back requests).
pub(crate) fn get(target: &Target) -> Vec<u8> {
    format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
        target.path, target.authority
    )
    .into_bytes()
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
