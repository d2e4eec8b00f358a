//! `ReadBack`: one read-back observation as evidence — what was asked, what
//! came back, and which rule decided.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::observe::{Decider, Decision, Verdict};

/// Bound on the answer excerpt in a one-line summary.
const SUMMARY_ANSWER_CHARS: usize = 300;

/// What a read-back found, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadBack {
    pub verdict: Verdict,
    /// The rule that decided (`present_if`, `absent_if`), or why neither did.
    pub decider: Decider,
    /// The tests of the deciding rule that held (both rules' when both
    /// matched).
    pub matched: Vec<String>,
    /// What was asked: `{"method": "GET", "url"}` or `{"tool", "arguments"}`,
    /// placeholders filled.
    pub request: Value,
    /// What came back (`{"status", "body"}`, `{"result"}`, `{"error"}`);
    /// `null` when nothing did.
    pub answer: Value,
    /// Why there was no usable answer, when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl ReadBack {
    pub fn decided(request: Value, answer: Value, d: Decision) -> Self {
        ReadBack { verdict: d.verdict, decider: d.decider, matched: d.matched, request, answer, failure: None }
    }

    /// No usable answer: inconclusive, whatever the rules say.
    pub fn failed(request: Value, answer: Value, why: String) -> Self {
        let d = Decision::no_answer();
        ReadBack { verdict: d.verdict, decider: d.decider, matched: d.matched, request, answer, failure: Some(why) }
    }

    /// One line for people: `GET url -> 404 …: absent by absent_if (status 404 in [404])`.
    pub fn summary(&self) -> String {
        let asked = match (self.request.get("url"), self.request.get("tool")) {
            (Some(Value::String(u)), _) => format!("GET {u}"),
            (_, Some(Value::String(t))) => format!("tools/call `{t}` {}", self.request["arguments"]),
            _ => self.request.to_string(),
        };
        let answered = match &self.failure {
            Some(why) => why.clone(),
            None => excerpt(&self.answer),
        };
        let verdict = match self.verdict {
            Verdict::Present => "present",
            Verdict::Absent => "absent",
            Verdict::Inconclusive => "inconclusive",
        };
        let why = match self.decider {
            Decider::PresentIf => format!("by present_if ({})", self.matched.join(", ")),
            Decider::AbsentIf => format!("by absent_if ({})", self.matched.join(", ")),
            Decider::NeitherMatched => "neither present_if nor absent_if matched".to_string(),
            Decider::BothMatched => format!("both present_if and absent_if matched ({})", self.matched.join(", ")),
            Decider::NoAnswer => "no usable answer".to_string(),
        };
        format!("{asked} -> {answered}: {verdict}, {why}")
    }
}

fn excerpt(answer: &Value) -> String {
    let text = match (answer.get("status"), answer.get("body")) {
        (Some(s), Some(Value::String(b))) => format!("{s} {b}"),
        _ => answer.to_string(),
    };
    let mut out: String = text.chars().take(SUMMARY_ANSWER_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_names_request_answer_and_rule() {
        let d = Decision { verdict: Verdict::Absent, decider: Decider::AbsentIf, matched: vec!["status 404".into()] };
        let r =
            ReadBack::decided(json!({"method": "GET", "url": "http://h/x"}), json!({"status": 404, "body": "no"}), d);
        assert_eq!(r.summary(), "GET http://h/x -> 404 no: absent, by absent_if (status 404)");
        let r = ReadBack::failed(json!({"tool": "t", "arguments": {"a": 1}}), Value::Null, "timed out".into());
        assert_eq!(r.summary(), "tools/call `t` {\"a\":1} -> timed out: inconclusive, no usable answer");
        let long = ReadBack::decided(json!({"url": "u"}), json!({"status": 200, "body": "x".repeat(1000)}), d_none());
        assert!(long.summary().chars().count() < 400);
    }

    fn d_none() -> Decision {
        Decision { verdict: Verdict::Inconclusive, decider: Decider::NeitherMatched, matched: vec![] }
    }
}
