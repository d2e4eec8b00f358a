//! Ledger records as sentences for a person: evidence kinds that have no
//! printer of their own, evidence ids, a claim's document and a read-back.
//! No `Debug` formatting and no raw JSON reach human output from here (the
//! raw forms stay in `--json`); JSON a person may need to read or type
//! (a tool's arguments) is quoted in backticks.

use serde_json::Value;

use crate::evidence::{EngineErrorKind, Evidence, EvidenceSource, ReadBackRecord, StopEnd, StoppedWhat};
use crate::ids::EvidenceId;

/// How many characters of a value a sentence quotes before `…`.
const QUOTED_CHARS_MAX: usize = 300;

/// `#6, #7` (or `none`).
pub fn evidence_ids(ids: &[EvidenceId]) -> String {
    match ids {
        [] => "none".to_string(),
        ids => ids.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", "),
    }
}

/// ` (evidence #6, #7)` after a provenance; nothing when it has none.
pub fn evidence_clause(ids: &[EvidenceId]) -> String {
    match ids {
        [] => String::new(),
        ids => format!(" (evidence {})", evidence_ids(ids)),
    }
}

/// The clause, from the ids as stored in JSON (`[6, 7]`).
pub fn evidence_clause_json(v: &Value) -> String {
    let ids: Vec<EvidenceId> =
        v.as_array().map_or(Vec::new(), |a| a.iter().filter_map(Value::as_i64).map(EvidenceId).collect());
    evidence_clause(&ids)
}

/// A read-back's one-line summary (`GET url -> ANSWER: present, by …`)
/// without the answer it quotes (shown in full by `explain`): `GET url:
/// present, by …`. Any other text as one line.
pub fn read_back_summary(s: &str) -> String {
    let verdict = [": present", ": absent", ": inconclusive"].iter().filter_map(|v| s.rfind(v)).max();
    match (s.split_once(" -> "), verdict) {
        (Some((asked, _)), Some(at)) if at > asked.len() => format!("{}{}", one_line(asked), one_line(&s[at..])),
        _ => one_line(s),
    }
}

/// The evidence kinds `explain` and the report print with no words of
/// their own: a sentence each. `None` for the kinds their printers say.
pub fn sentence(e: &Evidence) -> Option<String> {
    Some(match e {
        Evidence::ProviderError { http_status, retry_after_seconds, source, excerpt } => {
            let who = match (source, http_status) {
                (EvidenceSource::Http, Some(s)) => format!("the HTTP service answered {s}"),
                (EvidenceSource::Http, None) => "the HTTP service answered with an error".to_string(),
                (EvidenceSource::Tool, _) => "the MCP tool answered with an error".to_string(),
                (EvidenceSource::AgentReport, _) => {
                    "the agent reported `status: failed` (its word, a claim)".to_string()
                }
            };
            let after = retry_after_seconds.map(|s| format!("; it asked to retry after {s} s")).unwrap_or_default();
            format!("{who}{after}{}", said(excerpt))
        }
        Evidence::ProviderOutputInvalid { message } => {
            format!("the provider's output broke its protocol: {}", clip(message))
        }
        Evidence::EngineError { error, message } => format!("{}: {}", engine_error(*error), clip(message)),
        Evidence::EffectMarker { reason, safe_to_resend, dispatched } => marker(*reason, *safe_to_resend, *dispatched),
        Evidence::OutputsNotKept { limit, message } => match limit {
            Some(l) => format!("the declared outputs were not kept: over {l} ({})", clip(message)),
            None => format!("the declared outputs could not be read: {}", clip(message)),
        },
        Evidence::ProtectedPathsNotObserved { message } => {
            format!("the protected paths could not be observed, so the attempt is not judged clean: {}", clip(message))
        }
        Evidence::Stopped { signal, what, check_id, end } => {
            let what = match (what, check_id) {
                (StoppedWhat::Validation, Some(id)) => format!("validation {id}"),
                (StoppedWhat::Validation, None) => "a validation".to_string(),
                (StoppedWhat::ProviderCall, _) => "the provider call".to_string(),
            };
            format!("a person stopped the run ({signal}) during {what}: {}", stop_end(*end))
        }
        Evidence::ScopeRefused { scope } => format!(
            "the MCP server refused the call for want of scope `{}` (by its answer it did nothing): \
             `engine login` with that scope first",
            clip(scope)
        ),
        _ => return None,
    })
}

fn said(excerpt: &str) -> String {
    match excerpt.trim() {
        "" => String::new(),
        e => format!(": `{}`", clip(&one_line(e))),
    }
}

fn engine_error(k: EngineErrorKind) -> &'static str {
    match k {
        EngineErrorKind::ExecutableMissing => "the program to start was not found",
        EngineErrorKind::PermissionDenied => "permission denied",
        EngineErrorKind::BadRequest => "the request could not be made",
        EngineErrorKind::ConnectionRefused => "the connection was refused before anything was sent",
        EngineErrorKind::TimeoutBeforeDispatch => "the deadline passed before anything was sent",
        EngineErrorKind::Other => "the engine could not make the call",
    }
}

/// A missing receipt, in words.
fn marker(reason: crate::evidence::UnknownReason, safe_to_resend: bool, dispatched: bool) -> String {
    use crate::evidence::UnknownReason as R;
    let why = match reason {
        R::EngineRestarted => "the engine stopped before the answer came",
        R::ResponseLost => "the connection broke after the request was written",
        R::DeadlineAfterDispatch => "the deadline passed after the request was handed over",
        R::StoppedAfterDispatch => "a person stopped the run after the request was handed over",
    };
    let sent = match dispatched {
        true => "no receipt",
        false => "not sent, as far as the ledger shows (no dispatch recorded), and no receipt",
    };
    let resend = match safe_to_resend {
        true => "safe to send again (effect `none`, or declared idempotent)",
        false => "the effect may or may not have happened",
    };
    format!("{sent}: {why}; {resend}")
}

fn stop_end(end: StopEnd) -> &'static str {
    match end {
        StopEnd::Terminated => "its processes ended on SIGTERM",
        StopEnd::Killed => "its processes were killed (SIGKILL)",
        StopEnd::Dropped => "the engine stopped waiting for its answer",
        StopEnd::NotStarted => "it had not started",
        StopEnd::CancelAsked => "the provider was asked to cancel it",
    }
}

/// A claim's document (an agent's report, a provider's spending) as
/// `key "text", key value` pairs; nested JSON quoted in backticks.
pub fn claim(data: &Value) -> String {
    match data {
        Value::Object(m) => m
            .iter()
            .filter(|(k, v)| !v.is_null() && *k != "authority")
            .map(|(k, v)| format!("{} {}", k.replace('_', " "), scalar(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => scalar(other),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{}\"", clip(&one_line(s))),
        Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        other => format!("`{}`", clip(&other.to_string())),
    }
}

/// A read-back: what was asked, the verdict and the rule that decided it
/// (the answer itself is printed below it, as an output).
pub fn read_back(verdict: &str, r: &ReadBackRecord) -> String {
    let asked = match (r.request.get("url"), r.request.get("tool")) {
        (Some(Value::String(u)), _) => format!("GET {}", clip(u)),
        (_, Some(Value::String(t))) => match r.request.get("arguments") {
            Some(a) if !a.is_null() => format!("tools/call `{t}` with arguments `{}`", clip(&a.to_string())),
            _ => format!("tools/call `{t}`"),
        },
        _ => format!("`{}`", clip(&r.request.to_string())),
    };
    let matched = r.matched.join(", ");
    let why = match r.decider {
        providers::Decider::PresentIf => format!("by present_if ({matched})"),
        providers::Decider::AbsentIf => format!("by absent_if ({matched})"),
        providers::Decider::NeitherMatched => "neither present_if nor absent_if matched".to_string(),
        providers::Decider::BothMatched => format!("both present_if and absent_if matched ({matched})"),
        providers::Decider::NoAnswer => "no usable answer".to_string(),
    };
    let failure = r.failure.as_deref().map(|f| format!(" ({})", clip(&one_line(f)))).unwrap_or_default();
    format!("read back: {asked}: {verdict}, {why}{failure}")
}

/// What a process prints when a connection is refused or cannot be made.
const NO_CONNECTION: &[&str] = &[
    "connection refused",
    "econnrefused",
    "network is unreachable",
    "enetunreach",
    "no route to host",
    "could not resolve host",
    "name or service not known",
    "temporary failure in name resolution",
    "failed to connect",
    "couldn't connect",
    "could not connect",
];

/// For a failed attempt of a process that had no network: when its output
/// shows a connection refused or unreachable, the line that says why and
/// what to declare (`HOST:PORT` named when its output or its command
/// names one).
pub fn no_network(outputs: &[&str], command: &[&str]) -> Option<String> {
    let refused = outputs.iter().any(|o| {
        let o = o.to_ascii_lowercase();
        NO_CONNECTION.iter().any(|n| o.contains(n))
    });
    if !refused {
        return None;
    }
    let host = command
        .iter()
        .chain(outputs)
        .find_map(|w| crate::plan::warnings::network::mentioned_host(w))
        .unwrap_or_else(|| "HOST:PORT".to_string());
    Some(format!(
        "this process had no network (none declared): add `\"network\": {{\"connect\": [\"{host}\"]}}` to the task or its provider, in a revision"
    ))
}

/// Line breaks as spaces, the ends trimmed: one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(QUOTED_CHARS_MAX) {
        Some((i, _)) => format!("{}…", s.get(..i).unwrap_or(s)),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn evidence_ids_read_as_numbers() {
        assert_eq!(evidence_ids(&[EvidenceId(6), EvidenceId(7)]), "#6, #7");
        assert_eq!(evidence_ids(&[]), "none");
        assert_eq!(evidence_clause_json(&json!([3])), " (evidence #3)");
        assert_eq!(evidence_clause_json(&json!([])), "");
        let summary =
            "GET http://h/operations/op_1 -> 200 {\"key\": \"op_1\"}\n: present, by present_if (status 200 in [200])";
        assert_eq!(
            read_back_summary(summary),
            "GET http://h/operations/op_1: present, by present_if (status 200 in [200])"
        );
    }

    #[test]
    fn every_kind_without_a_printer_reads_as_a_sentence() {
        let kinds = [
            Evidence::ProviderError {
                http_status: Some(422),
                retry_after_seconds: None,
                source: EvidenceSource::Http,
                excerpt: "{\"error\": \"bad\"}\n".into(),
            },
            Evidence::EffectMarker {
                reason: crate::evidence::UnknownReason::ResponseLost,
                safe_to_resend: false,
                dispatched: true,
            },
            Evidence::EngineError { error: EngineErrorKind::ConnectionRefused, message: "refused".into() },
            Evidence::ScopeRefused { scope: "files:write".into() },
        ];
        for e in &kinds {
            let s = sentence(e).unwrap_or_default();
            assert!(!s.is_empty() && !s.contains("kind") && !s.contains('\n'), "{s}");
        }
        assert_eq!(
            sentence(&kinds[1]).unwrap_or_default(),
            "no receipt: the connection broke after the request was written; the effect may or may not have happened"
        );
    }

    #[test]
    fn a_refused_connection_without_a_network_says_what_to_declare() {
        let err = "curl: (7) Failed to connect to 127.0.0.1 port 8765: Connection refused\n";
        let said = no_network(&["", err], &["sh", "-c", "curl http://127.0.0.1:8765/x"]).unwrap_or_default();
        assert_eq!(
            said,
            "this process had no network (none declared): add `\"network\": {\"connect\": [\"127.0.0.1:8765\"]}` \
             to the task or its provider, in a revision"
        );
        assert_eq!(no_network(&["all fine"], &["true"]), None);
        let unnamed = no_network(&["OSError: [Errno 101] Network is unreachable"], &["python3", "x.py"]);
        assert!(unnamed.unwrap_or_default().contains("[\"HOST:PORT\"]"));
    }

    #[test]
    fn a_claim_reads_as_pairs() {
        let c = claim(&json!({"status": "done", "summary": "wrote\nsummary.md", "claimed_cause": null}));
        assert_eq!(c, "status \"done\", summary \"wrote summary.md\"");
    }
}
