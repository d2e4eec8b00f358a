//! The classifier's rule table, rule by rule, through the public pure
//! function: each rule's positive case, and a negative case next to it
//! that looks alike but must not match (or must lose to a rule ranked
//! higher by SPEC's order of evidence).

use engine::decide::classify::classify;
use engine::evidence::{EngineErrorKind, Evidence, EvidenceSource, Output, Recorded, UnknownReason};
use engine::ids::EvidenceId;
use engine::state::FailureClass as C;
use providers::ExitStatus;

fn out(text: &str) -> Output {
    Output {
        blob: String::new(),
        excerpt: text.into(),
        total_bytes: text.len() as u64,
        kept_bytes: text.len() as u64,
        truncated: false,
        omitted: None,
    }
}
fn code(c: i32) -> Option<ExitStatus> {
    Some(ExitStatus::Code { code: c })
}
fn exit(e: Option<ExitStatus>, timed_out: bool) -> Evidence {
    Evidence::ProcessExit { exit: e, timed_out, duration_ms: 3, stdout: out(""), stderr: out("") }
}
fn check(passed: bool) -> Evidence {
    Evidence::CheckResult {
        check_id: "V1".into(),
        exit: code(if passed { 0 } else { 1 }),
        expect_exit: 0,
        timed_out: false,
        passed,
        failing_assertion: if passed { None } else { Some("AssertionError: 1 != 2".into()) },
        stdout: out(""),
        stderr: out(""),
        checkpoint: Some("cp".into()),
        of_constraint: false,
    }
}
fn http(status: u16) -> Evidence {
    Evidence::ProviderError {
        http_status: Some(status),
        retry_after_seconds: None,
        source: EvidenceSource::Http,
        excerpt: String::new(),
    }
}
fn provider_error(source: &str) -> Evidence {
    Evidence::ProviderError {
        http_status: None,
        retry_after_seconds: None,
        source: serde_json::from_value(serde_json::json!(source)).expect("a source word"),
        excerpt: "the network is down".into(),
    }
}
fn engine_error(k: EngineErrorKind) -> Evidence {
    Evidence::EngineError { error: k, message: "x".into() }
}
fn marker(safe: bool) -> Evidence {
    Evidence::EffectMarker { reason: UnknownReason::EngineRestarted, safe_to_resend: safe, dispatched: true }
}
fn rec(list: Vec<Evidence>) -> Vec<Recorded> {
    list.into_iter().enumerate().map(|(i, evidence)| Recorded { id: EvidenceId(10 + i as i64), evidence }).collect()
}
/// (class, rule, evidence ids, next)
fn cl(list: Vec<Evidence>) -> (C, String, Vec<i64>, String) {
    let c = classify(&rec(list));
    (c.class, c.rule, c.evidence_ids.iter().map(|id| id.get()).collect(), c.next)
}

#[test]
fn http_rate_limited_or_unavailable() {
    for s in [429, 502, 503, 504] {
        let (class, rule, ids, next) = cl(vec![http(s)]);
        assert_eq!(
            (class, rule.as_str(), ids, next.as_str()),
            (C::ProviderUnavailable, "http_rate_limited_or_unavailable", vec![10], "retry"),
            "{s}"
        );
    }
    // Negative: 500 is not "unavailable", and 429 is not "rejected".
    assert_ne!(cl(vec![http(500)]).0, C::ProviderUnavailable);
    assert_ne!(cl(vec![http(429)]).0, C::ProviderRejected);
}

#[test]
fn http_request_rejected() {
    for s in [400, 401, 403, 404, 422] {
        let (class, rule, ..) = cl(vec![http(s)]);
        assert_eq!((class, rule.as_str()), (C::ProviderRejected, "http_request_rejected"), "{s}");
    }
    // Negative: a 2xx/3xx HttpResponse alone is no provider error.
    let ok = Evidence::HttpResponse { status: 302, body: out(""), duration_ms: 1, body_cut: None };
    assert_eq!(cl(vec![ok]).1, "no_direct_evidence");
}

#[test]
fn tool_error() {
    let (class, rule, ..) = cl(vec![provider_error("tool")]);
    assert_eq!((class, rule.as_str()), (C::ProviderRejected, "tool_error"));
    // Negative: a tool error that carries an HTTP status is judged by it.
    let with_status = Evidence::ProviderError {
        http_status: Some(503),
        retry_after_seconds: Some(2),
        source: EvidenceSource::Tool,
        excerpt: String::new(),
    };
    assert_eq!(cl(vec![with_status]).1, "http_rate_limited_or_unavailable");
}

#[test]
fn provider_output_invalid_is_never_success() {
    // A malformed agent report after exit 0 and passing validations: the
    // broken protocol is evidence of its own, and the attempt is a failure.
    let invalid = Evidence::ProviderOutputInvalid { message: "last stdout line is not JSON".into() };
    let (class, rule, ids, _) = cl(vec![exit(code(0), false), invalid, check(true)]);
    assert_eq!((class, rule.as_str(), ids), (C::ProviderRejected, "provider_output_invalid", vec![11]));
    // Negative: the same attempt without it has no failure evidence at all.
    assert_eq!(cl(vec![exit(code(0), false), check(true)]).1, "no_direct_evidence");
}

#[test]
fn engine_errors() {
    assert_eq!(cl(vec![engine_error(EngineErrorKind::ConnectionRefused)]).1, "connection_refused_before_dispatch");
    assert_eq!(cl(vec![engine_error(EngineErrorKind::ConnectionRefused)]).0, C::ProviderUnavailable);
    assert_eq!(cl(vec![engine_error(EngineErrorKind::TimeoutBeforeDispatch)]).0, C::Timeout);
    assert_eq!(cl(vec![engine_error(EngineErrorKind::TimeoutBeforeDispatch)]).1, "deadline_before_dispatch");
    for k in [EngineErrorKind::ExecutableMissing, EngineErrorKind::PermissionDenied] {
        let (class, rule, ..) = cl(vec![engine_error(k)]);
        assert_eq!((class, rule.as_str()), (C::Environment, "environment_error"), "{k:?}");
    }
    for k in [EngineErrorKind::BadRequest, EngineErrorKind::Other] {
        let (class, rule, ..) = cl(vec![engine_error(k)]);
        assert_eq!((class, rule.as_str()), (C::Environment, "engine_error"), "{k:?}");
    }
    // Negative: a provider-observed error outranks the engine's own.
    assert_eq!(cl(vec![engine_error(EngineErrorKind::Other), http(400)]).1, "http_request_rejected");
}

#[test]
fn observed_effect_absent() {
    let absent = Evidence::Observation {
        observation: providers::Observation::EffectAbsent { evidence: "404".into() },
        read_back: None,
    };
    let (class, rule, ..) = cl(vec![absent, marker(false)]);
    assert_eq!((class, rule.as_str()), (C::ProviderUnavailable, "observed_effect_absent"));
    // Negative: an inconclusive observation leaves the marker in charge.
    let present = Evidence::Observation {
        observation: providers::Observation::EffectPresent { evidence: "200".into() },
        read_back: None,
    };
    assert_eq!(cl(vec![present, marker(false)]).0, C::EffectUnknown);
}

#[test]
fn effect_markers() {
    let (class, rule, _, next) = cl(vec![marker(false)]);
    assert_eq!((class, rule.as_str(), next.as_str()), (C::EffectUnknown, "dispatched_without_receipt", "settle"));
    let (class, rule, ..) = cl(vec![marker(true)]);
    assert_eq!((class, rule.as_str()), (C::Timeout, "lost_answer_safe_to_resend"));
    // Negative: a missing receipt outranks a failed validation.
    assert_eq!(cl(vec![check(false), marker(false)]).0, C::EffectUnknown);
    // Left before the dispatch was recorded: its own rule, the same class.
    let undispatched =
        Evidence::EffectMarker { reason: UnknownReason::EngineRestarted, safe_to_resend: false, dispatched: false };
    let (class, rule, _, next) = cl(vec![undispatched]);
    assert_eq!((class, rule.as_str(), next.as_str()), (C::EffectUnknown, "intent_without_dispatch", "settle"));
}

#[test]
fn process_exits() {
    let (class, rule, ..) = cl(vec![exit(Some(ExitStatus::Signal { signal: 9 }), false)]);
    assert_eq!((class, rule.as_str()), (C::Killed, "killed_by_signal"));
    // Killed is never success, even if the validations then pass.
    assert_eq!(cl(vec![exit(Some(ExitStatus::Signal { signal: 9 }), false), check(true)]).0, C::Killed);
    // Negative: 137 is an exit code, not a signal.
    assert_eq!(cl(vec![exit(code(137), false)]).1, "action_exit_nonzero");
    let (class, rule, ..) = cl(vec![exit(Some(ExitStatus::Signal { signal: 9 }), true)]);
    assert_eq!((class, rule.as_str()), (C::Timeout, "engine_deadline_after_dispatch"));
    let (class, rule, ..) = cl(vec![exit(code(3), false)]);
    assert_eq!((class, rule.as_str()), (C::ProviderRejected, "action_exit_nonzero"));
    // Negative: exit 0 is no evidence of failure.
    assert_eq!(cl(vec![exit(code(0), false)]).1, "no_direct_evidence");
}

#[test]
fn http_server_error_and_agent_failure_stay_unclassified_with_their_rule() {
    let (class, rule, ids, next) = cl(vec![http(500)]);
    assert_eq!(
        (class, rule.as_str(), ids, next.as_str()),
        (C::Unclassified, "http_server_error", vec![10], "a person decides")
    );
    let (class, rule, ..) = cl(vec![exit(code(0), false), provider_error("agent_report")]);
    assert_eq!((class, rule.as_str()), (C::Unclassified, "agent_reported_failure"));
    // Negative: what the agent says never outranks the real exit code.
    assert_eq!(cl(vec![exit(code(1), false), provider_error("agent_report")]).1, "action_exit_nonzero");
}

#[test]
fn exit_zero_with_failing_validation_is_validation_failed() {
    let (class, rule, ids, next) = cl(vec![exit(code(0), false), check(true), check(false)]);
    assert_eq!(
        (class, rule.as_str(), ids, next.as_str()),
        (C::ValidationFailed, "validation_check_failed", vec![12], "repair")
    );
    // Negative: passing checks are not a failure.
    assert_eq!(cl(vec![exit(code(0), false), check(true)]).1, "no_direct_evidence");
}

#[test]
fn no_evidence_is_unclassified() {
    let (class, rule, ids, _) = cl(vec![]);
    assert_eq!((class, rule.as_str()), (C::Unclassified, "no_direct_evidence"));
    assert!(ids.is_empty());
}

#[test]
fn failing_assertion_lines() {
    use engine::decide::classify::failing_assertion;
    let pytest = "    def test_total():\n>       assert total([\"0.10\"]) == 10\nE       assert 0.1 == 10\n";
    assert!(failing_assertion(pytest).is_some());
    assert_eq!(failing_assertion("ok\nRan 3 tests\nOK\n"), None);
}
