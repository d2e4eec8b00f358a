//! JSON-RPC 2.0 pieces shared by both transports: what answered a request,
//! and how an answer reads as text.

use serde_json::{json, Value};

use crate::capture::Bounded;
use crate::{Captured, NotDispatched};

/// What answered one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// A JSON-RPC response (`result` or `error`).
    Message(Value),
    /// A stdout line over the bound, taken as the answer (it cannot be
    /// parsed): its kept prefix and real length.
    Truncated { kept: Vec<u8>, total: u64 },
    /// A Streamable HTTP server answered with an HTTP error status instead
    /// of a JSON-RPC message. `step_up`: a `403 insufficient_scope` a
    /// person's login can cure — the scope that login must ask for.
    HttpStatus { status: u16, retry_after_seconds: Option<u64>, body: Captured, step_up: Option<String> },
}

impl Answer {
    /// The `result` of a response, if it is one.
    pub fn result(&self) -> Option<&Value> {
        match self {
            Answer::Message(m) if m.get("error").is_none() => m.get("result"),
            _ => None,
        }
    }

    /// Why this answer is not a result (JSON-RPC error, truncation, HTTP
    /// status); `None` for a result.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Answer::Message(m) => match (m.get("result"), m.get("error")) {
                (_, Some(e)) => Some(rpc_error_text(e)),
                (Some(_), None) => None,
                (None, None) => Some("malformed JSON-RPC answer: neither result nor error".into()),
            },
            Answer::Truncated { total, .. } => Some(format!("an answer of {total} bytes, over the bound")),
            Answer::HttpStatus { status, body, .. } => Some(format!("HTTP {status}: {}", excerpt(&body.text))),
        }
    }
}

/// How one request ended.
#[derive(Debug)]
pub(crate) enum RpcEnd {
    Answer(Answer),
    /// Nothing of the request reached the server.
    NotSent(NotDispatched),
    /// The request was (or may have been) written, then the link broke
    /// before an answer.
    Lost(String),
    /// The deadline fired; `sent`: any byte of the request had been written.
    Deadline {
        sent: bool,
        id: u64,
    },
}

pub(crate) fn request(id: u64, method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub(crate) fn notification(method: &str, params: Option<&Value>) -> Value {
    match params {
        Some(p) => json!({"jsonrpc": "2.0", "method": method, "params": p}),
        None => json!({"jsonrpc": "2.0", "method": method}),
    }
}

/// Our answer to a request the server sent us: `ping` gets `{}`; we offer
/// no other client feature (no sampling, elicitation or roots).
pub(crate) fn reply_to_server_request(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?;
    let method = msg.get("method")?.as_str()?;
    Some(if method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
    })
}

/// What a parsed message is.
pub(crate) enum Kind {
    /// An answer to our request with this id.
    Response(u64),
    /// A request from the server (it needs an answer).
    ServerRequest,
    Notification,
    /// Not JSON-RPC we understand (an id that is not ours, ...).
    Other,
}

pub(crate) fn kind(msg: &Value) -> Kind {
    match (msg.get("method"), msg.get("id")) {
        (Some(_), Some(_)) => Kind::ServerRequest,
        (Some(_), None) => Kind::Notification,
        (None, Some(id)) => id.as_u64().map_or(Kind::Other, Kind::Response),
        (None, None) => Kind::Other,
    }
}

/// The id of a response whose line was cut by the bound: the first
/// `"id":N` in the kept prefix (our ids are numbers).
pub(crate) fn id_in_prefix(kept: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(kept);
    let at = text.find("\"id\"")?;
    let rest = text.get(at + 4..)?.trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

pub(crate) fn rpc_error_text(err: &Value) -> String {
    let code = err.get("code").map(Value::to_string).unwrap_or_else(|| "?".into());
    let message = err.get("message").and_then(Value::as_str).unwrap_or("");
    format!("JSON-RPC error {code}: {message}")
}

/// The JSON-RPC error code of an answer, if it is an error.
pub(crate) fn error_code(answer: &Answer) -> Option<i64> {
    match answer {
        Answer::Message(m) => m.get("error")?.get("code")?.as_i64(),
        _ => None,
    }
}

/// Bounded capture of a JSON value's text.
pub(crate) fn captured_json(v: &Value, max: usize) -> Captured {
    let mut b = Bounded::new(max);
    b.push(v.to_string().as_bytes());
    b.finish()
}

pub(crate) fn redact_str(s: String, secrets: &[String]) -> String {
    crate::capture::redact_text(s, secrets)
}

fn excerpt(s: &str) -> String {
    s.trim().chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_kinds() {
        assert_eq!(id_in_prefix(br#"{"jsonrpc":"2.0","id": 17,"result":{"content":"#), Some(17));
        assert_eq!(id_in_prefix(br#"{"result":{"x":"#), None);
        assert!(matches!(kind(&json!({"id": 3, "result": {}})), Kind::Response(3)));
        assert!(matches!(kind(&json!({"id": "a", "result": {}})), Kind::Other));
        assert!(matches!(kind(&json!({"id": 1, "method": "ping"})), Kind::ServerRequest));
        assert!(matches!(kind(&json!({"method": "notifications/x"})), Kind::Notification));
        let pong = reply_to_server_request(&json!({"id": 9, "method": "ping"})).unwrap();
        assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 9, "result": {}}));
        let no = reply_to_server_request(&json!({"id": 9, "method": "sampling/createMessage"})).unwrap();
        assert_eq!(no["error"]["code"], -32601);
    }

    #[test]
    fn refusals() {
        assert_eq!(Answer::Message(json!({"result": {}})).refusal(), None);
        let e = Answer::Message(json!({"error": {"code": -32602, "message": "no"}}));
        assert_eq!(e.refusal().unwrap(), "JSON-RPC error -32602: no");
        assert_eq!(error_code(&e), Some(-32602));
        assert!(Answer::Message(json!({})).refusal().unwrap().contains("malformed"));
    }
}
