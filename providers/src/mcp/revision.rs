//! The two MCP revisions this client speaks, as data and pure decisions.
//!
//! - **2025-11-25** (and the earlier `2025-06-18`, `2025-03-26`), "legacy":
//!   an `initialize` handshake, a session (`Mcp-Session-Id` over HTTP),
//!   server-initiated requests, tasks as a core utility
//!   (`params.task`, `tasks/result`).
//! - **2026-07-28**, "modern": no handshake and no session; every request
//!   carries its protocol version, the client's identity and capabilities
//!   in `params._meta`; over HTTP also `MCP-Protocol-Version`, `Mcp-Method`
//!   and `Mcp-Name` headers; results say what they are (`resultType`:
//!   `complete`, `input_required`, `task`); tasks are the
//!   `io.modelcontextprotocol/tasks` extension (the server answers a task
//!   on its own, `tasks/get` carries the result); a broken response stream
//!   loses the request (no resumption).
//!
//! Negotiation (the specification's "dual-era client"): probe with
//! `server/discover`; a `DiscoverResult` naming 2026-07-28 is modern; a
//! recognized modern error (`-32020`…`-32022`) is a modern server we
//! cannot serve; any other answer, or none in time, is a legacy server,
//! which gets `initialize`.

use serde_json::{json, Value};

use super::jsonrpc::{Answer, RpcEnd};

/// The modern revision.
pub const MODERN: &str = "2026-07-28";
/// The tasks extension's identifier (2026-07-28).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// `_meta` keys of a modern request.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a modern result naming its server.
pub const META_SERVER: &str = "io.modelcontextprotocol/serverInfo";
/// The error codes the 2026-07-28 revision reserves (HeaderMismatch,
/// MissingRequiredClientCapability, UnsupportedProtocolVersion).
const MODERN_ERRORS: std::ops::RangeInclusive<i64> = -32022..=-32020;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// `params` with the modern request metadata merged into its `_meta` (the
/// keys already there — `operation_id`, `try`, `progressToken` — kept).
/// The client declares the tasks extension and elicitation (form and
/// URL: its questions go to a person, `engine answer`), and nothing it
/// cannot do: no sampling or roots, so a server must not ask for them.
pub fn with_modern_meta(params: &Value) -> Value {
    let mut params = match params {
        Value::Object(_) => params.clone(),
        _ => json!({}),
    };
    let meta = params.as_object_mut().map(|o| o.entry("_meta").or_insert_with(|| json!({})));
    if let Some(Value::Object(m)) = meta {
        m.insert(META_VERSION.into(), json!(MODERN));
        m.insert(META_CLIENT.into(), json!({"name": "engine", "version": env!("CARGO_PKG_VERSION")}));
        m.insert(
            META_CAPABILITIES.into(),
            json!({"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}, "url": {}}}),
        );
    }
    params
}

/// What the `server/discover` probe found.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// A modern server speaking 2026-07-28: its `DiscoverResult`.
    Modern(Value),
    /// A modern server we cannot serve (it answered a modern error, or
    /// discovers without 2026-07-28): why.
    Refused(String),
    /// Not a modern server: fall back to `initialize`.
    Legacy,
    /// The server could not be asked (it died, or the bytes never left).
    Failed,
}

/// Judge the probe's end (pure).
pub fn probe(end: &RpcEnd) -> Probe {
    match end {
        RpcEnd::Answer(a) => match a.result() {
            Some(r) => {
                let versions: Vec<&str> = r
                    .get("supportedVersions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if versions.contains(&MODERN) {
                    Probe::Modern(r.clone())
                } else if versions.is_empty() {
                    Probe::Legacy
                } else {
                    Probe::Refused(format!(
                        "the MCP server speaks {} and this client {MODERN} (or 2025-11-25 after initialize); refused",
                        versions.join(", ")
                    ))
                }
            }
            None => match modern_error(a) {
                Some(e) => Probe::Refused(refusal_of(&e)),
                None => Probe::Legacy,
            },
        },
        RpcEnd::Deadline { .. } => Probe::Legacy,
        RpcEnd::NotSent(_) | RpcEnd::Lost(_) => Probe::Failed,
    }
}

/// A recognized modern JSON-RPC error in an answer: in a JSON-RPC error
/// response, or in the body of an HTTP 400 (how a modern server refuses
/// over Streamable HTTP).
pub fn modern_error(a: &Answer) -> Option<Value> {
    let err = match a {
        Answer::Message(m) => m.get("error").cloned(),
        Answer::HttpStatus { status: 400, body, .. } => {
            serde_json::from_str::<Value>(&body.text).ok().and_then(|v| v.get("error").cloned())
        }
        _ => None,
    }?;
    let code = err.get("code").and_then(Value::as_i64)?;
    MODERN_ERRORS.contains(&code).then_some(err)
}

fn refusal_of(err: &Value) -> String {
    let code = err.get("code").and_then(Value::as_i64).unwrap_or_default();
    let message = err.get("message").and_then(Value::as_str).unwrap_or("");
    if code == UNSUPPORTED_PROTOCOL_VERSION {
        let supported: Vec<String> = err
            .pointer("/data/supported")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect();
        return format!(
            "the MCP server does not speak {MODERN} (it speaks {}); refused",
            if supported.is_empty() { "no version it names".into() } else { supported.join(", ") }
        );
    }
    format!("the MCP server refused the 2026-07-28 probe: JSON-RPC error {code}: {message}")
}

/// What a result says it is (`resultType`; absent means `complete`, as
/// an earlier revision's results are read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultKind {
    Complete,
    /// The server needs input before it can answer (multi round-trip).
    InputRequired,
    /// The server made a task of the request (the tasks extension).
    Task,
    Other(String),
}

pub fn result_kind(result: &Value) -> ResultKind {
    match result.get("resultType").and_then(Value::as_str) {
        None | Some("complete") => ResultKind::Complete,
        Some("input_required") => ResultKind::InputRequired,
        Some("task") => ResultKind::Task,
        Some(other) => ResultKind::Other(other.chars().take(64).collect()),
    }
}

/// The questions of an `input_required` result (or task), in words: each
/// input request's key, method, mode and message.
pub fn input_requests_words(result: &Value) -> String {
    let Some(requests) = result.get("inputRequests").and_then(Value::as_object) else {
        return "no input request named (requestState only)".into();
    };
    let words: Vec<String> = requests
        .iter()
        .take(8)
        .map(|(key, r)| {
            let method = r.get("method").and_then(Value::as_str).unwrap_or("?");
            let mode = r.pointer("/params/mode").and_then(Value::as_str).unwrap_or("form");
            let message = r.pointer("/params/message").and_then(Value::as_str).unwrap_or("");
            let message: String = message.chars().take(200).collect();
            match method {
                "elicitation/create" => format!("{key}: {mode} elicitation \"{message}\""),
                other => format!("{key}: {other}"),
            }
        })
        .collect();
    words.join("; ")
}

/// The header value of `Mcp-Name` (and `Mcp-Param-*`): the value as is
/// when it is plain visible ASCII, else the Base64 sentinel form
/// (`=?base64?…?=`), which also carries a value that looks like one.
pub fn header_value(v: &str) -> String {
    let sentinel = v.starts_with("=?base64?") && v.ends_with("?=");
    let edges = v.starts_with(' ') || v.ends_with(' ');
    let plain = !v.is_empty() && v.bytes().all(|b| (0x20..=0x7e).contains(&b)) && !edges && !sentinel;
    if plain {
        v.to_string()
    } else {
        use base64::Engine;
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(v.as_bytes()))
    }
}

/// The `Mcp-Name` of a request: the tool, resource or prompt it names, or
/// the task it asks about.
pub fn name_of(method: &str, params: &Value) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        m if m.starts_with("tasks/") => "taskId",
        _ => return None,
    };
    params.get(key).and_then(Value::as_str).map(header_value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Captured;

    fn answer(v: Value) -> RpcEnd {
        RpcEnd::Answer(Answer::Message(v))
    }

    #[test]
    fn the_probe_tells_the_eras_apart() {
        let modern = answer(json!({"result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}));
        assert!(matches!(probe(&modern), Probe::Modern(_)));
        // A legacy server refuses the unknown method before initialize, with any code.
        for code in [-32601, -32602, -32000] {
            assert_eq!(probe(&answer(json!({"error": {"code": code, "message": "no"}}))), Probe::Legacy);
        }
        assert_eq!(probe(&RpcEnd::Deadline { sent: true, id: 1 }), Probe::Legacy, "silence is legacy");
        let body = |s: &str| Captured { text: s.into(), total_bytes: s.len() as u64, truncated: false, omitted: None };
        let legacy_400 = RpcEnd::Answer(Answer::HttpStatus {
            status: 400,
            retry_after_seconds: None,
            body: body(
                r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID"},"id":null}"#,
            ),
            step_up: None,
        });
        assert_eq!(probe(&legacy_400), Probe::Legacy);
        // A recognized modern error is a modern server: never a fallback.
        let unsupported = RpcEnd::Answer(Answer::HttpStatus {
            status: 400,
            retry_after_seconds: None,
            body: body(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2027-01-01"]}}}"#,
            ),
            step_up: None,
        });
        match probe(&unsupported) {
            Probe::Refused(why) => assert!(why.contains("2027-01-01"), "{why}"),
            other => panic!("{other:?}"),
        }
        let newer = answer(json!({"result": {"supportedVersions": ["2027-01-01"]}}));
        assert!(matches!(probe(&newer), Probe::Refused(_)));
        assert_eq!(probe(&RpcEnd::Lost("gone".into())), Probe::Failed);
    }

    #[test]
    fn modern_meta_keeps_what_was_there() {
        let p = with_modern_meta(&json!({"name": "t", "_meta": {"operation_id": "op", "try": 2}}));
        assert_eq!(p["_meta"]["operation_id"], "op");
        assert_eq!(p["_meta"]["try"], 2);
        assert_eq!(p["_meta"][META_VERSION], MODERN);
        assert_eq!(p["_meta"][META_CAPABILITIES]["extensions"][TASKS_EXTENSION], json!({}));
        assert_eq!(p["_meta"][META_CAPABILITIES]["elicitation"], json!({"form": {}, "url": {}}));
        let caps = &p["_meta"][META_CAPABILITIES];
        assert!(caps.get("sampling").is_none() && caps.get("roots").is_none(), "nothing it cannot do");
        assert_eq!(with_modern_meta(&Value::Null)["_meta"][META_VERSION], MODERN);
    }

    #[test]
    fn result_kinds_and_questions() {
        assert_eq!(result_kind(&json!({"content": []})), ResultKind::Complete, "an earlier revision's result");
        assert_eq!(result_kind(&json!({"resultType": "task"})), ResultKind::Task);
        let ask = json!({"resultType": "input_required", "inputRequests": {"login": {"method": "elicitation/create",
            "params": {"mode": "form", "message": "Your GitHub login?"}}}});
        assert_eq!(result_kind(&ask), ResultKind::InputRequired);
        assert_eq!(input_requests_words(&ask), "login: form elicitation \"Your GitHub login?\"");
        assert_eq!(result_kind(&json!({"resultType": "later"})), ResultKind::Other("later".into()));
    }

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_value("get_weather"), "get_weather");
        assert_eq!(header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(header_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
        assert_eq!(name_of("tools/call", &json!({"name": "render"})).as_deref(), Some("render"));
        assert_eq!(name_of("tasks/get", &json!({"taskId": "t1"})).as_deref(), Some("t1"));
        assert_eq!(name_of("tools/list", &json!({})), None);
    }
}
