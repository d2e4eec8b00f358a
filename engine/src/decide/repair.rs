//! `engine repair`: is a repair a repetition? The last two failures of a
//! task share a fingerprint (class + the evidence the class rests on,
//! without what varies between identical failures) and neither its inputs
//! nor the instruction changed since: then a repair would only repeat.
//! Also: which failure classes a repair is expected to fix.

use serde_json::Value;

use crate::digest::{Digester, Kind};
use crate::evidence::{Classification, Recorded};
use crate::state::FailureClass;

/// A repair of a failure of this class needs a person's `--force --note`:
/// the class does not suggest that a repair fixes it.
pub fn needs_force(class: FailureClass) -> bool {
    matches!(class, FailureClass::ProviderRejected | FailureClass::Unclassified)
}

/// The fingerprint of a failure: its class and a digest of its evidence,
/// leaving out what varies between identical failures (ids, durations).
pub fn fingerprint(class: &str, evidence: &[Recorded]) -> String {
    let mut list: Vec<Value> =
        evidence.iter().map(|r| serde_json::to_value(&r.evidence).unwrap_or(Value::Null)).collect();
    for v in &mut list {
        strip_volatile(v);
    }
    Digester::new(Kind::FailureFingerprint).str("class", class).json("evidence", &Value::Array(list)).finish()
}

fn strip_volatile(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("duration_ms");
            map.remove("checkpoint");
            // Output is compared by its shape, not its timings and counters:
            // the blob (exact bytes) goes, the excerpt keeps its words.
            map.remove("blob");
            map.remove("total_bytes");
            map.remove("kept_bytes");
            if let Some(Value::String(text)) = map.get_mut("excerpt") {
                *text = mask_digits(text);
            }
            map.values_mut().for_each(strip_volatile);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_volatile),
        _ => {}
    }
}

/// `Ran 3 tests in 0.001s` → `Ran # tests in #.#s`.
fn mask_digits(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

/// Would this repair only repeat the last failure? Pure: the caller reads
/// the ledger and observes the inputs.
pub fn is_repetition(
    last_two_fingerprints: Option<(&str, &str)>,
    inputs_then: Option<&str>,
    inputs_now: Option<&str>,
    instruction_then: Option<&str>,
    instruction_now: Option<&str>,
) -> bool {
    match last_two_fingerprints {
        Some((a, b)) if a == b => inputs_then == inputs_now && instruction_then == instruction_now,
        _ => false,
    }
}

/// The evidence a failure's classification rests on (its `evidence_ids`),
/// or all of the attempt's evidence when the class names none. What else
/// the attempt produced (an agent's chatter, a passing check) is not the
/// failure, and must not make two identical failures look different.
pub fn failure_evidence(classification: Option<&Classification>, all: Vec<Recorded>) -> Vec<Recorded> {
    let ids = classification.map(|c| c.evidence_ids.as_slice()).unwrap_or_default();
    if ids.is_empty() {
        return all;
    }
    all.into_iter().filter(|r| ids.contains(&r.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetition_needs_same_fingerprint_inputs_and_instruction() {
        let same = Some(("f", "f"));
        assert!(is_repetition(same, Some("c"), Some("c"), None, None));
        assert!(!is_repetition(Some(("f", "g")), Some("c"), Some("c"), None, None), "different failures");
        assert!(!is_repetition(None, Some("c"), Some("c"), None, None), "only one failure so far");
        assert!(!is_repetition(same, Some("c"), Some("d"), None, None), "inputs changed");
        assert!(!is_repetition(same, Some("c"), Some("c"), None, Some("try cents()")), "new instruction");
        assert!(is_repetition(same, Some("c"), Some("c"), Some("x"), Some("x")), "same instruction again");
    }

    #[test]
    fn fingerprint_ignores_durations_but_not_outputs() {
        use crate::evidence::{Evidence, Output};
        let out = |t: &str| Output {
            blob: t.into(),
            excerpt: t.into(),
            total_bytes: 1,
            kept_bytes: 1,
            truncated: false,
            omitted: None,
        };
        let e = |ms, text: &str| {
            vec![Recorded {
                id: crate::ids::EvidenceId(ms as i64),
                evidence: Evidence::ProcessExit {
                    exit: Some(providers::ExitStatus::Code { code: 1 }),
                    timed_out: false,
                    duration_ms: ms,
                    stdout: out(text),
                    stderr: out(""),
                },
            }]
        };
        assert_eq!(fingerprint("x", &e(5, "a")), fingerprint("x", &e(900, "a")));
        assert_eq!(fingerprint("x", &e(5, "Ran 3 tests in 0.001s")), fingerprint("x", &e(5, "Ran 3 tests in 0.020s")));
        assert_ne!(fingerprint("x", &e(5, "a")), fingerprint("x", &e(5, "b")));
        assert_ne!(fingerprint("x", &e(5, "a")), fingerprint("y", &e(5, "a")));
    }
}
