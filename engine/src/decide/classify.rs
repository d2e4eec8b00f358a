//! Evidence-first failure classification: a pure function from an
//! attempt's evidence to a class, the rule that decided it, and the ids of
//! the evidence it used. Claims (what a provider or model *says* caused the
//! failure) are never an input here: they cannot change a class.
//!
//! The rule table is `RULES`, in precedence order: a violated goal
//! constraint first, then SPEC.md's "Failure classes" order:
//! provider-observed errors → engine direct errors → effect markers →
//! process and validation evidence → `unclassified`.
//!
//! Why a violated constraint comes first: its evidence is the engine's own
//! observation of the goal's contract (a protected file's digests before
//! and after the attempt, a constraint's check), not a statement about the
//! call. Whatever else went wrong with the attempt — an exit code, a tool
//! error, a failed validation — the workspace now breaks the goal, and
//! that is what a person and a repair must see first: an agent that edits
//! a protected test and then exits non-zero must not pass as a mere
//! `provider_rejected`. Within it, a changed protected path outranks a
//! failed check (the path is the more direct evidence; the check may fail
//! because of it), and both outrank spending reported by a task the plan
//! did not let spend (`spending_not_declared`). Protected-path evidence is only recorded for attempts
//! with a receipt, so it never meets an effect marker.

pub use crate::evidence::Classification;
use crate::evidence::{EngineErrorKind, Evidence, EvidenceSource, Recorded};
use crate::ids::EvidenceId;
use crate::limits::FAILING_ASSERTION_CHARS_MAX;
use crate::state::FailureClass;
use providers::ExitStatus;

/// A rule: its name and a matcher returning the ids of the evidence it used.
struct Rule {
    name: &'static str,
    class: FailureClass,
    matches: fn(&Evidence) -> bool,
}

const RULES: &[Rule] = &[
    Rule {
        name: "protected_path_changed",
        class: FailureClass::ConstraintViolated,
        matches: |e| matches!(e, Evidence::ProtectedPathChanged { .. }),
    },
    // A task writes only what it declares: any other file it created,
    // changed or removed in the workspace (the engine's own observation).
    Rule {
        name: "undeclared_write",
        class: FailureClass::ConstraintViolated,
        matches: |e| matches!(e, Evidence::UndeclaredWrite { .. }),
    },
    Rule {
        name: "constraint_check_failed",
        class: FailureClass::ConstraintViolated,
        matches: |e| matches!(e, Evidence::CheckResult { passed: false, of_constraint: true, .. }),
    },
    // The plan's own contract: a task not declared to spend (`may_spend`)
    // whose provider's report says it spent. The evidence is what the
    // report said (the engine saw it say so); the amounts stay the
    // provider's word, and this rule can only fail an attempt.
    Rule {
        name: "spending_not_declared",
        class: FailureClass::ConstraintViolated,
        matches: |e| matches!(e, Evidence::SpendingReported { may_spend: false, total_micros, .. } if *total_micros > 0),
    },
    Rule {
        name: "http_rate_limited_or_unavailable",
        class: FailureClass::ProviderUnavailable,
        matches: |e| matches!(e, Evidence::ProviderError { http_status: Some(429 | 502 | 503 | 504), .. }),
    },
    // Before the other 4xx: a refusal for want of scope that a person's
    // login can cure; the server did nothing, by its answer.
    Rule {
        name: "insufficient_scope",
        class: FailureClass::Environment,
        matches: |e| matches!(e, Evidence::ScopeRefused { .. }),
    },
    Rule {
        name: "http_request_rejected",
        class: FailureClass::ProviderRejected,
        matches: |e| matches!(e, Evidence::ProviderError { http_status: Some(400..=499), .. }),
    },
    Rule {
        name: "tool_error",
        class: FailureClass::ProviderRejected,
        matches: |e| matches!(e, Evidence::ProviderError { source, http_status: None, .. } if *source == EvidenceSource::Tool),
    },
    Rule {
        name: "provider_output_invalid",
        class: FailureClass::ProviderRejected,
        matches: |e| matches!(e, Evidence::ProviderOutputInvalid { .. }),
    },
    Rule {
        name: "connection_refused_before_dispatch",
        class: FailureClass::ProviderUnavailable,
        matches: |e| matches!(e, Evidence::EngineError { error: EngineErrorKind::ConnectionRefused, .. }),
    },
    Rule {
        name: "deadline_before_dispatch",
        class: FailureClass::Timeout,
        matches: |e| matches!(e, Evidence::EngineError { error: EngineErrorKind::TimeoutBeforeDispatch, .. }),
    },
    Rule {
        name: "environment_error",
        class: FailureClass::Environment,
        matches: |e| {
            matches!(
                e,
                Evidence::EngineError {
                    error: EngineErrorKind::ExecutableMissing | EngineErrorKind::PermissionDenied,
                    ..
                }
            )
        },
    },
    Rule {
        name: "outputs_over_limit",
        class: FailureClass::Environment,
        matches: |e| matches!(e, Evidence::OutputsNotKept { limit: Some(_), .. }),
    },
    Rule {
        name: "outputs_unreadable",
        class: FailureClass::Environment,
        matches: |e| matches!(e, Evidence::OutputsNotKept { limit: None, .. }),
    },
    Rule {
        name: "engine_error",
        class: FailureClass::Environment,
        matches: |e| matches!(e, Evidence::EngineError { .. }),
    },
    Rule {
        name: "observed_effect_absent",
        class: FailureClass::ProviderUnavailable,
        matches: |e| {
            matches!(e, Evidence::Observation { observation: providers::Observation::EffectAbsent { .. }, .. })
        },
    },
    Rule {
        name: "lost_answer_safe_to_resend",
        class: FailureClass::Timeout,
        matches: |e| matches!(e, Evidence::EffectMarker { safe_to_resend: true, .. }),
    },
    // The engine stopped after the intent and before it recorded the
    // dispatch: not sent, as far as the ledger shows (the request may
    // have begun to leave as it stopped: still a person's to settle).
    Rule {
        name: "intent_without_dispatch",
        class: FailureClass::EffectUnknown,
        matches: |e| matches!(e, Evidence::EffectMarker { dispatched: false, .. }),
    },
    Rule {
        name: "dispatched_without_receipt",
        class: FailureClass::EffectUnknown,
        matches: |e| matches!(e, Evidence::EffectMarker { .. }),
    },
    Rule {
        name: "engine_deadline_after_dispatch",
        class: FailureClass::Timeout,
        matches: |e| {
            matches!(e, Evidence::ProcessExit { timed_out: true, .. } | Evidence::BuiltinResult { timed_out: true, .. })
        },
    },
    Rule {
        name: "descendants_outlived_the_command",
        class: FailureClass::Killed,
        matches: |e| matches!(e, Evidence::DescendantsEnded { .. }),
    },
    Rule {
        name: "killed_by_signal",
        class: FailureClass::Killed,
        matches: |e| matches!(e, Evidence::ProcessExit { exit: Some(ExitStatus::Signal { .. }), .. }),
    },
    Rule {
        name: "action_exit_nonzero",
        class: FailureClass::ProviderRejected,
        matches: |e| matches!(e, Evidence::ProcessExit { exit: Some(ExitStatus::Code { code }), .. } if *code != 0),
    },
    Rule {
        name: "http_server_error",
        class: FailureClass::Unclassified,
        matches: |e| matches!(e, Evidence::ProviderError { http_status: Some(500..=599), .. }),
    },
    Rule {
        name: "agent_reported_failure",
        class: FailureClass::Unclassified,
        matches: |e| matches!(e, Evidence::ProviderError { source, .. } if *source == EvidenceSource::AgentReport),
    },
    Rule {
        name: "validation_check_failed",
        class: FailureClass::ValidationFailed,
        matches: |e| matches!(e, Evidence::CheckResult { passed: false, of_constraint: false, .. }),
    },
    // Last: an attempt whose protected paths could not be observed is not
    // judged clean, but nothing says it broke a constraint either; any
    // other evidence it has tells more. A person decides.
    Rule {
        name: "protected_paths_not_observed",
        class: FailureClass::Unclassified,
        matches: |e| matches!(e, Evidence::ProtectedPathsNotObserved { .. }),
    },
];

/// Classify a failed attempt from its evidence. Returns `unclassified` with
/// rule `no_direct_evidence` when no rule matches.
pub fn classify(evidence: &[Recorded]) -> Classification {
    for rule in RULES {
        let ids: Vec<EvidenceId> = evidence.iter().filter(|r| (rule.matches)(&r.evidence)).map(|r| r.id).collect();
        if !ids.is_empty() {
            return Classification {
                class: rule.class,
                rule: rule.name.to_string(),
                evidence_ids: ids,
                claims: Vec::new(),
                next: rule.class.next_step().to_string(),
            };
        }
    }
    Classification {
        class: FailureClass::Unclassified,
        rule: "no_direct_evidence".to_string(),
        evidence_ids: Vec::new(),
        claims: Vec::new(),
        next: FailureClass::Unclassified.next_step().to_string(),
    }
}

/// Classify from evidence, then list the attempt's claims beside the
/// result. The claims are passed through untouched: they cannot move it.
pub fn classify_with_claims(evidence: &[Recorded], claim_ids: Vec<i64>) -> Classification {
    let mut c = classify(evidence);
    c.claims = claim_ids;
    c
}

/// The failing assertion line in unittest / pytest / cargo-test output:
/// the first line that states what was asserted.
pub fn failing_assertion(output: &str) -> Option<String> {
    // What was asserted beats where: unittest's `AssertionError: 4.35 !=
    // 435` and pytest's `E   assert ...` come before a `FAIL:` header.
    const STATEMENTS: &[&str] = &["AssertionError", "E   ", "assertion `", "assertion failed", "panicked at"];
    const HEADERS: &[&str] = &["FAIL:", "FAILED ", "assert "];
    let find = |markers: &[&str]| {
        output
            .lines()
            .find(|l| !l.trim().is_empty() && markers.iter().any(|m| l.contains(m)))
            .map(|l| l.trim().chars().take(FAILING_ASSERTION_CHARS_MAX).collect::<String>())
    };
    find(STATEMENTS).or_else(|| find(HEADERS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Output, UnknownReason};

    fn out() -> Output {
        Output {
            blob: String::new(),
            excerpt: String::new(),
            total_bytes: 0,
            kept_bytes: 0,
            truncated: false,
            omitted: None,
        }
    }
    fn exit(e: Option<ExitStatus>, timed_out: bool) -> Evidence {
        Evidence::ProcessExit { exit: e, timed_out, duration_ms: 1, stdout: out(), stderr: out() }
    }
    fn check(passed: bool) -> Evidence {
        Evidence::CheckResult {
            check_id: "V1".into(),
            exit: Some(ExitStatus::Code { code: if passed { 0 } else { 1 } }),
            expect_exit: 0,
            timed_out: false,
            passed,
            failing_assertion: None,
            stdout: out(),
            stderr: out(),
            checkpoint: None,
            of_constraint: false,
        }
    }
    fn constraint_check(passed: bool) -> Evidence {
        let mut e = check(passed);
        if let Evidence::CheckResult { check_id, of_constraint, .. } = &mut e {
            *check_id = "C1".into();
            *of_constraint = true;
        }
        e
    }
    fn protected_change() -> Evidence {
        Evidence::ProtectedPathChanged {
            changes: vec![crate::evidence::PathChange {
                path: "tests/test_money.py".into(),
                before: Some("aa".into()),
                after: Some("bb".into()),
                constraints: vec!["C1".into()],
            }],
        }
    }
    fn rec(list: Vec<Evidence>) -> Vec<Recorded> {
        list.into_iter().enumerate().map(|(i, evidence)| Recorded { id: EvidenceId(i as i64 + 1), evidence }).collect()
    }

    #[test]
    fn exit_zero_with_failing_validation_is_validation_failed() {
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 0 }), false), check(false)]));
        assert_eq!(c.class, FailureClass::ValidationFailed);
        assert_eq!(c.rule, "validation_check_failed");
        assert_eq!(c.evidence_ids, vec![EvidenceId(2)]);
        assert_eq!(c.next, "repair");
    }

    #[test]
    fn signal_is_killed_never_success() {
        let c = classify(&rec(vec![exit(Some(ExitStatus::Signal { signal: 9 }), false)]));
        assert_eq!(c.class, FailureClass::Killed);
        // Negative: an exit code is not a signal.
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 137 }), false)]));
        assert_ne!(c.class, FailureClass::Killed);
    }

    #[test]
    fn exit_zero_with_descendants_left_running_is_killed_never_success() {
        let left = Evidence::DescendantsEnded {
            processes: vec![providers::Descendant { pid: 7, name: "sleep".into() }],
            grace_ms: 2000,
            ended: true,
        };
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 0 }), false), left.clone(), check(true)]));
        assert_eq!((c.class, c.rule.as_str()), (FailureClass::Killed, "descendants_outlived_the_command"));
        assert_eq!(c.evidence_ids, vec![EvidenceId(2)], "the descendants are the evidence");
        // Before a non-zero exit (the engine cut its work short), after a
        // deadline (which ended them itself).
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 3 }), false), left.clone()]));
        assert_eq!(c.rule, "descendants_outlived_the_command");
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 0 }), true), left]));
        assert_eq!(c.class, FailureClass::Timeout);
    }

    #[test]
    fn timeout_outranks_the_kill_it_caused() {
        let c = classify(&rec(vec![exit(Some(ExitStatus::Signal { signal: 9 }), true)]));
        assert_eq!(c.class, FailureClass::Timeout);
    }

    #[test]
    fn missing_executable_is_environment() {
        let e = Evidence::EngineError { error: EngineErrorKind::ExecutableMissing, message: "x".into() };
        assert_eq!(classify(&rec(vec![e])).class, FailureClass::Environment);
    }

    #[test]
    fn http_statuses() {
        let pe = |s| Evidence::ProviderError {
            http_status: Some(s),
            retry_after_seconds: None,
            source: EvidenceSource::Http,
            excerpt: String::new(),
        };
        assert_eq!(classify(&rec(vec![pe(503)])).class, FailureClass::ProviderUnavailable);
        assert_eq!(classify(&rec(vec![pe(429)])).class, FailureClass::ProviderUnavailable);
        assert_eq!(classify(&rec(vec![pe(400)])).class, FailureClass::ProviderRejected);
        assert_eq!(classify(&rec(vec![pe(500)])).class, FailureClass::Unclassified);
    }

    #[test]
    fn provider_error_outranks_validation() {
        let pe = Evidence::ProviderError {
            http_status: Some(400),
            retry_after_seconds: None,
            source: EvidenceSource::Http,
            excerpt: String::new(),
        };
        assert_eq!(classify(&rec(vec![check(false), pe])).class, FailureClass::ProviderRejected);
    }

    #[test]
    fn effect_marker_is_effect_unknown() {
        let c = classify(&rec(vec![Evidence::EffectMarker {
            reason: UnknownReason::ResponseLost,
            safe_to_resend: false,
            dispatched: true,
        }]));
        assert_eq!(c.class, FailureClass::EffectUnknown);
        assert_eq!(c.next, "settle");
    }

    #[test]
    fn no_evidence_is_unclassified() {
        let c = classify(&rec(vec![check(true), exit(Some(ExitStatus::Code { code: 0 }), false)]));
        assert_eq!(c.class, FailureClass::Unclassified);
        assert_eq!(c.rule, "no_direct_evidence");
        assert!(c.evidence_ids.is_empty());
    }

    #[test]
    fn a_violated_constraint_outranks_every_other_evidence() {
        // An agent edited a protected test, and its validation passed.
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 0 }), false), check(true), protected_change()]));
        assert_eq!((c.class, c.rule.as_str()), (FailureClass::ConstraintViolated, "protected_path_changed"));
        assert_eq!(c.evidence_ids, vec![EvidenceId(3)]);
        assert_eq!(c.next, "repair");
        // ... and then exited non-zero, or its validation failed too.
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 1 }), false), check(false), protected_change()]));
        assert_eq!(c.class, FailureClass::ConstraintViolated);
        let pe = Evidence::ProviderError {
            http_status: Some(400),
            retry_after_seconds: None,
            source: EvidenceSource::Tool,
            excerpt: String::new(),
        };
        assert_eq!(classify(&rec(vec![pe.clone(), protected_change()])).class, FailureClass::ConstraintViolated);
        // A changed path outranks a failed constraint check.
        let c = classify(&rec(vec![constraint_check(false), protected_change()]));
        assert_eq!((c.rule.as_str(), c.evidence_ids.clone()), ("protected_path_changed", vec![EvidenceId(2)]));
        // A failed constraint check alone, beside a failed validation.
        let c = classify(&rec(vec![check(false), constraint_check(false)]));
        assert_eq!((c.class, c.rule.as_str()), (FailureClass::ConstraintViolated, "constraint_check_failed"));
        assert_eq!(c.evidence_ids, vec![EvidenceId(2)]);
        // Negative: a passing constraint check is no violation; a failed
        // validation is still `validation_failed`.
        let c = classify(&rec(vec![check(false), constraint_check(true)]));
        assert_eq!((c.class, c.rule.as_str()), (FailureClass::ValidationFailed, "validation_check_failed"));
        assert_eq!(classify(&rec(vec![constraint_check(true)])).class, FailureClass::Unclassified);
        assert_eq!(classify(&rec(vec![pe])).class, FailureClass::ProviderRejected);
    }

    #[test]
    fn spending_the_plan_did_not_allow_is_a_violated_constraint() {
        let spent = |may_spend: bool, total_micros: i64| Evidence::SpendingReported {
            items: vec![crate::evidence::SpentItem { amount_micros: total_micros, what: "render".into() }],
            total_micros,
            may_spend,
        };
        let ok = exit(Some(ExitStatus::Code { code: 0 }), false);
        let c = classify(&rec(vec![ok.clone(), check(true), spent(false, 1)]));
        assert_eq!((c.class, c.rule.as_str()), (FailureClass::ConstraintViolated, "spending_not_declared"));
        assert_eq!(c.evidence_ids, vec![EvidenceId(3)]);
        // A protected path or a constraint check outranks it.
        let c = classify(&rec(vec![spent(false, 1), protected_change()]));
        assert_eq!(c.rule, "protected_path_changed");
        // Negative: declared spending, or nothing spent, is no violation.
        assert_eq!(classify(&rec(vec![ok.clone(), spent(true, 5)])).class, FailureClass::Unclassified);
        assert_eq!(classify(&rec(vec![ok, spent(false, 0)])).class, FailureClass::Unclassified);
    }

    #[test]
    fn finds_assertion_lines() {
        let unittest = "F\n====\nFAIL: test_total (tests.test_money.T)\nTraceback...\nAssertionError: 300 != 3\n";
        assert_eq!(failing_assertion(unittest).as_deref(), Some("AssertionError: 300 != 3"));
        let pytest = "    def test_x():\n>       assert total([]) == 1\nE       assert 0 == 1\n";
        assert_eq!(failing_assertion(pytest).as_deref(), Some("E       assert 0 == 1"));
        assert_eq!(failing_assertion("FAIL: test_y (t.T)\nerror: boom").as_deref(), Some("FAIL: test_y (t.T)"));
        let cargo = "thread 'x' panicked at src/lib.rs:3:5:\nassertion `left == right` failed";
        assert!(failing_assertion(cargo).unwrap().contains("panicked at"));
        assert_eq!(failing_assertion("all good\nok\n"), None);
    }

    #[test]
    fn protected_paths_not_observed_is_last_and_claims_no_violation() {
        let unobserved = || Evidence::ProtectedPathsNotObserved { message: "unreadable".into() };
        let c = classify(&rec(vec![exit(Some(ExitStatus::Code { code: 0 }), false), unobserved()]));
        assert_eq!((c.class, c.rule.as_str()), (FailureClass::Unclassified, "protected_paths_not_observed"));
        assert_eq!(c.evidence_ids, vec![EvidenceId(2)]);
        // Any other evidence tells more.
        let c = classify(&rec(vec![unobserved(), check(false)]));
        assert_eq!(c.class, FailureClass::ValidationFailed);
        let c = classify(&rec(vec![unobserved(), constraint_check(false)]));
        assert_eq!(c.rule, "constraint_check_failed");
    }
}
