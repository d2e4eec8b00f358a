//! Read-back rules: how a provider re-observes an effect without re-sending
//! it, and the pure decision from what came back to one of three verdicts.
//!
//! A rule names a request (an HTTP GET of `url`, or an MCP `tool` call with
//! `arguments`) and two optional matches. The verdict is:
//! - `present` when `present_if` matches and `absent_if` does not;
//! - `absent` when `absent_if` matches and `present_if` does not;
//! - `inconclusive` otherwise: neither matched, both matched, or nothing
//!   usable came back (an error, a timeout, a server that failed).
//!
//! So absence is never inferred: a 404 means "absent" only where a rule
//! says `"absent_if": {"status": [404]}`.
//!
//! Placeholders `{operation_id}`, `{try}` and `{workspace}` are replaced in
//! the URL (percent-encoded there), in MCP arguments (every string, at any
//! depth) and in the strings a match looks for.
//!
//! Everything here is pure: parsing with the exact place of an error, and
//! matching. The I/O lives with each provider.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Captured;

/// Bound on the tests in one match, and on the statuses listed in one test.
const TESTS_MAX: usize = 64;

/// A configuration error with its place inside the object that was parsed
/// (`present_if.status[1]`; empty for the object itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { path: path.into(), message: message.into() }
    }

    /// The same error, one level further out: `prefix.path`.
    pub fn under(mut self, prefix: &str) -> Self {
        self.path = join_path(prefix, &self.path);
        self
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path.as_str() {
            "" => write!(f, "{}", self.message),
            p => write!(f, "{p}: {}", self.message),
        }
    }
}

fn join_path(prefix: &str, rest: &str) -> String {
    match (prefix, rest) {
        ("", r) => r.to_string(),
        (p, "") => p.to_string(),
        (p, r) if r.starts_with('[') => format!("{p}{r}"),
        (p, r) => format!("{p}.{r}"),
    }
}

// ---------------------------------------------------------------- verdicts

/// What a read-back found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Present,
    Absent,
    Inconclusive,
}

/// Which rule decided a verdict, or why none did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decider {
    PresentIf,
    AbsentIf,
    /// An answer came back and neither rule matched it.
    NeitherMatched,
    /// Both rules matched: the rules contradict each other on this answer.
    BothMatched,
    /// No usable answer (error, timeout, refused, malformed).
    NoAnswer,
}

/// The pure part of a read-back: the verdict, the rule that decided it and
/// the tests of that rule that held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub decider: Decider,
    pub matched: Vec<String>,
}

impl Decision {
    pub fn no_answer() -> Self {
        Decision { verdict: Verdict::Inconclusive, decider: Decider::NoAnswer, matched: Vec::new() }
    }

    /// Combine the two rules' results (each `Some(tests that held)` when it
    /// matched).
    fn from_matches(present: Option<Vec<String>>, absent: Option<Vec<String>>) -> Self {
        let (verdict, decider, matched) = match (present, absent) {
            (Some(p), None) => (Verdict::Present, Decider::PresentIf, p),
            (None, Some(a)) => (Verdict::Absent, Decider::AbsentIf, a),
            (Some(mut p), Some(a)) => {
                p.extend(a);
                (Verdict::Inconclusive, Decider::BothMatched, p)
            }
            (None, None) => (Verdict::Inconclusive, Decider::NeitherMatched, Vec::new()),
        };
        Decision { verdict, decider, matched }
    }
}

// ---------------------------------------------------------------- placeholders

/// The values placeholders stand for, for one observed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    pub operation_id: String,
    pub try_no: u32,
    pub workspace: String,
}

impl Placeholders {
    pub fn of(call: &crate::Call) -> Self {
        Placeholders {
            operation_id: call.operation_id.clone(),
            try_no: call.try_no,
            workspace: call.workspace.to_string_lossy().into_owned(),
        }
    }

    /// Replace the placeholders with `encode`d values.
    pub fn fill_with(&self, template: &str, encode: impl Fn(&str) -> String) -> String {
        template
            .replace("{operation_id}", &encode(&self.operation_id))
            .replace("{try}", &self.try_no.to_string())
            .replace("{workspace}", &encode(&self.workspace))
    }

    /// Replace the placeholders with their plain values.
    pub fn fill(&self, template: &str) -> String {
        self.fill_with(template, str::to_string)
    }

    /// Every string inside `v` (not the keys), filled.
    pub fn fill_json(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.fill(s)),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.fill_json(i)).collect()),
            Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), self.fill_json(v))).collect()),
            other => other.clone(),
        }
    }
}

// ---------------------------------------------------------------- HTTP rules

/// HTTP read-back: `{"url", "present_if"?, "absent_if"?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpObserve {
    /// URL template (placeholders allowed), fetched with GET.
    pub url: String,
    pub present_if: Option<HttpMatch>,
    pub absent_if: Option<HttpMatch>,
}

/// Tests on an HTTP answer; all declared tests must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpMatch {
    /// The status is one of these. Omitted in `present_if`: any 2xx.
    /// Omitted in `absent_if`: any status.
    pub status: Option<Vec<u16>>,
    /// The body contains this text.
    pub body_contains: Option<String>,
    /// The body is JSON and each pointer holds exactly this value.
    pub json: Vec<(String, Value)>,
}

impl HttpObserve {
    /// The meaning of a bare `"observe": URL` in a provider's config since
    /// read-back rules exist: 200 is present, and nothing is absent (a 404
    /// is inconclusive). To keep 404 as absence, declare it:
    /// `{"url": URL, "present_if": {"status": [200]}, "absent_if": {"status": [404]}}`.
    pub fn status_url(url: &str) -> Self {
        HttpObserve {
            url: url.to_string(),
            present_if: Some(HttpMatch { status: Some(vec![200]), ..HttpMatch::default() }),
            absent_if: None,
        }
    }

    /// What a bare observe URL meant before read-back rules (200 present,
    /// 404 absent). Only for a caller whose configuration cannot say
    /// `absent_if` yet; see `status_url`.
    pub fn legacy_status_url(url: &str) -> Self {
        let mut rule = Self::status_url(url);
        rule.absent_if = Some(HttpMatch { status: Some(vec![404]), ..HttpMatch::default() });
        rule
    }

    /// A string (see `status_url`) or a rule object.
    pub fn from_json(v: &Value) -> Result<Self, ConfigError> {
        if let Value::String(url) = v {
            return Ok(Self::status_url(url));
        }
        let obj = object(v, "")?;
        known_keys(obj, &["url", "present_if", "absent_if"])?;
        let url = match obj.get("url") {
            Some(Value::String(u)) if !u.is_empty() => u.clone(),
            _ => return Err(ConfigError::new("url", "needs a non-empty string URL")),
        };
        let present_if = optional(obj, "present_if", HttpMatch::from_json)?;
        let absent_if = optional(obj, "absent_if", HttpMatch::from_json)?;
        rules_present(&present_if, &absent_if)?;
        Ok(HttpObserve { url, present_if, absent_if })
    }

    /// The rule as JSON (its canonical form).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("url".into(), Value::String(self.url.clone()));
        if let Some(p) = &self.present_if {
            m.insert("present_if".into(), p.to_json());
        }
        if let Some(a) = &self.absent_if {
            m.insert("absent_if".into(), a.to_json());
        }
        Value::Object(m)
    }

    /// Judge an answer (`status`, `body`), with placeholders filled in the
    /// strings the rule looks for.
    pub fn decide(&self, status: u16, body: &Captured, ph: &Placeholders) -> Decision {
        let json = serde_json::from_str::<Value>(&body.text).ok().filter(|_| !body.truncated);
        let test = |m: &HttpMatch, default_2xx: bool| m.test(status, &body.text, json.as_ref(), ph, default_2xx);
        let present = self.present_if.as_ref().and_then(|m| test(m, true));
        let absent = self.absent_if.as_ref().and_then(|m| test(m, false));
        Decision::from_matches(present, absent)
    }
}

impl HttpMatch {
    fn from_json(v: &Value) -> Result<Self, ConfigError> {
        let obj = object(v, "")?;
        known_keys(obj, &["status", "body_contains", "json"])?;
        let status = match obj.get("status") {
            None => None,
            Some(s) => Some(statuses(s).map_err(|e| e.under("status"))?),
        };
        let body_contains = optional(obj, "body_contains", non_empty_string)?;
        let json = optional(obj, "json", pointers)?.unwrap_or_default();
        let m = HttpMatch { status, body_contains, json };
        if m.status.is_none() && m.body_contains.is_none() && m.json.is_empty() {
            return Err(ConfigError::new("", "declares no test (status, body_contains or json)"));
        }
        Ok(m)
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(s) = &self.status {
            m.insert("status".into(), Value::from(s.clone()));
        }
        if let Some(b) = &self.body_contains {
            m.insert("body_contains".into(), Value::String(b.clone()));
        }
        if !self.json.is_empty() {
            m.insert("json".into(), Value::Object(self.json.iter().cloned().collect()));
        }
        Value::Object(m)
    }

    /// `Some(the tests that held)` when every declared test holds.
    fn test(
        &self,
        status: u16,
        body: &str,
        json: Option<&Value>,
        ph: &Placeholders,
        default_2xx: bool,
    ) -> Option<Vec<String>> {
        let mut held = Vec::new();
        match &self.status {
            Some(list) if list.contains(&status) => held.push(format!("status {status} in {list:?}")),
            Some(_) => return None,
            None if default_2xx && !(200..300).contains(&status) => return None,
            None if default_2xx => held.push(format!("status {status} is 2xx")),
            None => {}
        }
        if let Some(text) = &self.body_contains {
            let text = ph.fill(text);
            if !body.contains(&text) {
                return None;
            }
            held.push(format!("body contains {text:?}"));
        }
        held.extend(json_tests(&self.json, json, ph)?);
        Some(held)
    }
}

// ---------------------------------------------------------------- MCP rules

/// MCP read-back: `{"tool", "arguments"?, "present_if"?, "absent_if"?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpObserve {
    pub tool: String,
    /// Arguments of the read tool (placeholders allowed in strings).
    pub arguments: Value,
    pub present_if: Option<McpMatch>,
    pub absent_if: Option<McpMatch>,
}

/// Tests on a tool result; all declared tests must hold. `present_if` is
/// tested only on a result without `isError` (an error's text often echoes
/// the request, so it must not read as the effect); `absent_if` on any
/// result, since "not found" usually comes as a tool error.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpMatch {
    /// The result's text content (its text items, joined by newlines)
    /// contains this.
    pub text_contains: Option<String>,
    /// Each pointer into the tool result (e.g. `/structuredContent/state`)
    /// holds exactly this value.
    pub json: Vec<(String, Value)>,
}

impl McpObserve {
    /// The pre-rule `observe_tool`: called with `{"operation_id": …}`, it
    /// answers `structuredContent.state` `present` or `absent` — a server
    /// built for this declares absence itself.
    pub fn status_tool(tool: &str) -> Self {
        let state = |s: &str| McpMatch {
            text_contains: None,
            json: vec![("/structuredContent/state".into(), Value::String(s.into()))],
        };
        McpObserve {
            tool: tool.to_string(),
            arguments: serde_json::json!({"operation_id": "{operation_id}"}),
            present_if: Some(state("present")),
            absent_if: Some(state("absent")),
        }
    }

    pub fn from_json(v: &Value) -> Result<Self, ConfigError> {
        let obj = object(v, "")?;
        known_keys(obj, &["tool", "arguments", "present_if", "absent_if"])?;
        let tool = match obj.get("tool") {
            Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
            _ => return Err(ConfigError::new("tool", "needs a non-empty tool name")),
        };
        let arguments = match obj.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => return Err(ConfigError::new("arguments", "must be an object")),
        };
        let present_if = optional(obj, "present_if", McpMatch::from_json)?;
        let absent_if = optional(obj, "absent_if", McpMatch::from_json)?;
        rules_present(&present_if, &absent_if)?;
        Ok(McpObserve { tool, arguments, present_if, absent_if })
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("tool".into(), Value::String(self.tool.clone()));
        m.insert("arguments".into(), self.arguments.clone());
        if let Some(p) = &self.present_if {
            m.insert("present_if".into(), p.to_json());
        }
        if let Some(a) = &self.absent_if {
            m.insert("absent_if".into(), a.to_json());
        }
        Value::Object(m)
    }

    /// Judge a tool result (the JSON-RPC `result` of `tools/call`).
    pub fn decide(&self, result: &Value, ph: &Placeholders) -> Decision {
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        let text = content_text(result);
        let present = match (&self.present_if, is_error) {
            (Some(m), false) => m.test(result, &text, ph),
            _ => None,
        };
        let absent = self.absent_if.as_ref().and_then(|m| m.test(result, &text, ph));
        Decision::from_matches(present, absent)
    }
}

impl McpMatch {
    fn from_json(v: &Value) -> Result<Self, ConfigError> {
        let obj = object(v, "")?;
        known_keys(obj, &["text_contains", "json"])?;
        let text_contains = optional(obj, "text_contains", non_empty_string)?;
        let json = optional(obj, "json", pointers)?.unwrap_or_default();
        if text_contains.is_none() && json.is_empty() {
            return Err(ConfigError::new("", "declares no test (text_contains or json)"));
        }
        Ok(McpMatch { text_contains, json })
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(t) = &self.text_contains {
            m.insert("text_contains".into(), Value::String(t.clone()));
        }
        if !self.json.is_empty() {
            m.insert("json".into(), Value::Object(self.json.iter().cloned().collect()));
        }
        Value::Object(m)
    }

    fn test(&self, result: &Value, text: &str, ph: &Placeholders) -> Option<Vec<String>> {
        let mut held = Vec::new();
        if let Some(want) = &self.text_contains {
            let want = ph.fill(want);
            if !text.contains(&want) {
                return None;
            }
            held.push(format!("text contains {want:?}"));
        }
        held.extend(json_tests(&self.json, Some(result), ph)?);
        Some(held)
    }
}

/// The text items of a tool result's `content`, joined by newlines.
pub fn content_text(result: &Value) -> String {
    let Some(items) = result.get("content").and_then(Value::as_array) else { return String::new() };
    items
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------- shared

/// Every pointer test holds on `doc` (placeholders filled in the expected
/// strings); `None` if any fails or there is no JSON to test.
fn json_tests(tests: &[(String, Value)], doc: Option<&Value>, ph: &Placeholders) -> Option<Vec<String>> {
    if tests.is_empty() {
        return Some(Vec::new());
    }
    let doc = doc?;
    let mut held = Vec::with_capacity(tests.len());
    for (pointer, want) in tests {
        let want = ph.fill_json(want);
        if doc.pointer(pointer) != Some(&want) {
            return None;
        }
        held.push(format!("json {pointer} == {want}"));
    }
    Some(held)
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ConfigError> {
    v.as_object().ok_or_else(|| ConfigError::new(path, "must be an object"))
}

fn known_keys(obj: &Map<String, Value>, known: &[&str]) -> Result<(), ConfigError> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ConfigError::new(k.as_str(), format!("unknown field (expected one of {})", known.join(", ")))),
        None => Ok(()),
    }
}

fn optional<T>(
    obj: &Map<String, Value>,
    key: &str,
    parse: impl FnOnce(&Value) -> Result<T, ConfigError>,
) -> Result<Option<T>, ConfigError> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => parse(v).map(Some).map_err(|e| e.under(key)),
    }
}

fn rules_present<T>(present: &Option<T>, absent: &Option<T>) -> Result<(), ConfigError> {
    if present.is_none() && absent.is_none() {
        return Err(ConfigError::new("", "declares neither present_if nor absent_if"));
    }
    Ok(())
}

fn non_empty_string(v: &Value) -> Result<String, ConfigError> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        _ => Err(ConfigError::new("", "must be a non-empty string")),
    }
}

fn statuses(v: &Value) -> Result<Vec<u16>, ConfigError> {
    let list = v
        .as_array()
        .filter(|l| !l.is_empty() && l.len() <= TESTS_MAX)
        .ok_or_else(|| ConfigError::new("", format!("must be a list of 1 to {TESTS_MAX} HTTP status codes")))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        match s.as_u64().filter(|n| (100..600).contains(n)) {
            Some(n) => out.push(n as u16),
            None => return Err(ConfigError::new(format!("[{i}]"), "must be an HTTP status code (100-599)")),
        }
    }
    Ok(out)
}

/// `{"/pointer": value, ...}`: each key a JSON pointer (empty or `/…`).
fn pointers(v: &Value) -> Result<Vec<(String, Value)>, ConfigError> {
    let obj = object(v, "")?;
    if obj.is_empty() || obj.len() > TESTS_MAX {
        return Err(ConfigError::new("", format!("must map 1 to {TESTS_MAX} JSON pointers to values")));
    }
    let mut out = Vec::with_capacity(obj.len());
    for (pointer, want) in obj {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(ConfigError::new(pointer.as_str(), "a JSON pointer starts with `/`"));
        }
        out.push((pointer.clone(), want.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ph() -> Placeholders {
        Placeholders { operation_id: "op 1".into(), try_no: 2, workspace: "/ws".into() }
    }

    fn body(text: &str) -> Captured {
        Captured { text: text.into(), total_bytes: text.len() as u64, truncated: false, omitted: None }
    }

    fn http(v: Value) -> HttpObserve {
        HttpObserve::from_json(&v).unwrap()
    }

    #[test]
    fn http_three_outcomes_and_absence_only_when_declared() {
        let r = http(json!({"url": "http://h/{operation_id}",
            "present_if": {"status": [200], "body_contains": "saved {operation_id}"},
            "absent_if": {"status": [404]}}));
        let d = r.decide(200, &body("saved op 1"), &ph());
        assert_eq!((d.verdict, d.decider), (Verdict::Present, Decider::PresentIf));
        assert_eq!(d.matched, vec!["status 200 in [200]", "body contains \"saved op 1\""]);
        let d = r.decide(404, &body(""), &ph());
        assert_eq!((d.verdict, d.decider), (Verdict::Absent, Decider::AbsentIf));
        // 200 without the text, 500, 410: neither rule matched.
        for (s, b) in [(200, "other"), (500, ""), (410, "")] {
            let d = r.decide(s, &body(b), &ph());
            assert_eq!((d.verdict, d.decider), (Verdict::Inconclusive, Decider::NeitherMatched), "{s}");
        }
        // The bare-URL form: 404 is not absence.
        let bare = HttpObserve::from_json(&json!("http://h/ops/{operation_id}")).unwrap();
        assert_eq!(bare.decide(200, &body(""), &ph()).verdict, Verdict::Present);
        assert_eq!(bare.decide(404, &body(""), &ph()).verdict, Verdict::Inconclusive);
        let legacy = HttpObserve::legacy_status_url("http://h/ops/{operation_id}");
        assert_eq!(legacy.decide(404, &body(""), &ph()).verdict, Verdict::Absent);
    }

    #[test]
    fn http_present_without_status_means_2xx_and_json_pointers() {
        let r = http(json!({"url": "u", "present_if": {"json": {"/state": "done", "/n": 2}}}));
        assert_eq!(r.decide(200, &body(r#"{"state":"done","n":2}"#), &ph()).verdict, Verdict::Present);
        assert_eq!(r.decide(500, &body(r#"{"state":"done","n":2}"#), &ph()).verdict, Verdict::Inconclusive);
        assert_eq!(r.decide(200, &body(r#"{"state":"done","n":"2"}"#), &ph()).verdict, Verdict::Inconclusive);
        assert_eq!(r.decide(200, &body("not json"), &ph()).verdict, Verdict::Inconclusive);
        let mut cut = body(r#"{"state":"done","n":2}"#);
        cut.truncated = true;
        assert_eq!(r.decide(200, &cut, &ph()).verdict, Verdict::Inconclusive, "a cut body is not JSON evidence");
    }

    #[test]
    fn both_rules_matching_is_inconclusive() {
        let r = http(json!({"url": "u", "present_if": {"body_contains": "x"}, "absent_if": {"body_contains": "x"}}));
        let d = r.decide(200, &body("x"), &ph());
        assert_eq!((d.verdict, d.decider), (Verdict::Inconclusive, Decider::BothMatched));
        assert_eq!(d.matched.len(), 3);
    }

    #[test]
    fn mcp_rules_present_needs_a_result_without_is_error() {
        let r = McpObserve::from_json(&json!({"tool": "read_text_file",
            "arguments": {"path": "{workspace}/note-{try}.txt"},
            "present_if": {"text_contains": "hello {operation_id}"},
            "absent_if": {"text_contains": "ENOENT"}}))
        .unwrap();
        let ok = json!({"content": [{"type": "text", "text": "hello op 1"}]});
        assert_eq!(r.decide(&ok, &ph()).verdict, Verdict::Present);
        let missing = json!({"isError": true, "content": [{"type": "text", "text": "ENOENT: no such file"}]});
        let d = r.decide(&missing, &ph());
        assert_eq!((d.verdict, d.decider), (Verdict::Absent, Decider::AbsentIf));
        // An error that echoes the wanted text is not the effect.
        let echo = json!({"isError": true, "content": [{"type": "text", "text": "denied: hello op 1"}]});
        assert_eq!(r.decide(&echo, &ph()).decider, Decider::NeitherMatched);
        assert_eq!(ph().fill_json(&r.arguments), json!({"path": "/ws/note-2.txt"}));
    }

    #[test]
    fn mcp_status_tool_is_the_old_observe_tool() {
        let r = McpObserve::status_tool("operation_status");
        let ph = ph();
        assert_eq!(ph.fill_json(&r.arguments), json!({"operation_id": "op 1"}));
        let with = |s: &str| json!({"content": [], "structuredContent": {"state": s}});
        assert_eq!(r.decide(&with("present"), &ph).verdict, Verdict::Present);
        assert_eq!(r.decide(&with("absent"), &ph).verdict, Verdict::Absent);
        assert_eq!(r.decide(&with("maybe"), &ph).verdict, Verdict::Inconclusive);
        assert_eq!(r.decide(&json!({}), &ph).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn parse_errors_name_their_place() {
        let bad = |v: Value| HttpObserve::from_json(&v).unwrap_err();
        assert_eq!(bad(json!({"url": "u"})).message, "declares neither present_if nor absent_if");
        assert_eq!(bad(json!({"url": "u", "present_if": {"status": [200, 99]}})).path, "present_if.status[1]");
        assert_eq!(bad(json!({"url": "u", "present_if": {"status": []}})).path, "present_if.status");
        assert_eq!(bad(json!({"url": "u", "absent_if": {}})).path, "absent_if");
        assert_eq!(bad(json!({"url": "u", "absent_if": {"colour": 1}})).path, "absent_if.colour");
        assert_eq!(bad(json!({"url": "u", "present_if": {"json": {"state": 1}}})).path, "present_if.json.state");
        assert_eq!(bad(json!({"present_if": {"status": [200]}})).path, "url");
        assert_eq!(bad(json!(3)).message, "must be an object");
        let bad = |v: Value| McpObserve::from_json(&v).unwrap_err();
        assert_eq!(bad(json!({"tool": " ", "present_if": {"text_contains": "x"}})).path, "tool");
        assert_eq!(bad(json!({"tool": "t", "arguments": [], "present_if": {"text_contains": "x"}})).path, "arguments");
        assert_eq!(bad(json!({"tool": "t", "present_if": {"text_contains": ""}})).path, "present_if.text_contains");
        assert_eq!(bad(json!({"tool": "t", "present_if": {"status": [200]}})).path, "present_if.status");
        let e = ConfigError::new("present_if.status[1]", "m").under("observe");
        assert_eq!(e.to_string(), "observe.present_if.status[1]: m");
    }

    #[test]
    fn rules_round_trip_through_json() {
        let v = json!({"url": "u", "present_if": {"status": [200, 201], "body_contains": "b", "json": {"/a": 1}},
                       "absent_if": {"status": [404]}});
        assert_eq!(http(v.clone()).to_json(), v);
        let v = json!({"tool": "t", "arguments": {"p": "{try}"}, "present_if": {"json": {"/x": true}},
                       "absent_if": {"text_contains": "no"}});
        assert_eq!(McpObserve::from_json(&v).unwrap().to_json(), v);
    }

    #[test]
    fn placeholders_are_encoded_where_asked() {
        let p = ph();
        assert_eq!(p.fill("{operation_id}/{try}/{workspace}/{other}"), "op 1/2//ws/{other}");
        assert_eq!(p.fill_with("{operation_id}", |s| s.replace(' ', "%20")), "op%201");
    }
}
