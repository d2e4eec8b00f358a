use super::*;
use crate::plan::model::Validation;
use std::collections::BTreeMap;

fn task(effect: Effect) -> Task {
    serde_json::from_value(serde_json::json!({
        "ref": "T1", "provider": "sh", "action": {"run": ["true"]}, "effect": effect,
        "inputs": ["a.txt"], "validations": [{"id": "V1", "run": ["true"]}]
    }))
    .unwrap()
}

fn cp(digest: &str, content: &str) -> Checkpoint {
    Checkpoint {
        files: BTreeMap::from([("a.txt".to_string(), Some(content.to_string()))]),
        context: BTreeMap::new(),
        digest: digest.into(),
        workspace: None,
    }
}

fn completion(t: &Task) -> Completion<'_> {
    Completion {
        revision: Revision(1),
        attempt_id: AttemptId(7),
        task: t,
        meaning: "m".into(),
        meaning_core: "k".into(),
        dependencies: "d".into(),
        checkpoint: Some(cp("c1", "x").into()),
        reusable: true,
        validations: vec![ValidationResult {
            id: "V1".into(),
            passed: true,
            checkpoint: Some("c1".into()),
            evidence_id: EvidenceId(3),
        }],
    }
}

fn refusal(d: Decision) -> String {
    match d {
        Decision::Run { refusal } => refusal.code().to_string(),
        Decision::Reuse { .. } => "REUSE".into(),
    }
}

#[test]
fn reuses_when_everything_matches_and_keeps_provenance() {
    let t = task(Effect::Local);
    let c = completion(&t);
    let d = decide(
        false,
        Some(&c),
        &Candidate { task: &t, meaning: "m", meaning_core: "k", dependencies: "d" },
        None,
        || Ok(cp("c1", "x")),
    );
    assert_eq!(
        d,
        Decision::Reuse {
            provenance: Provenance {
                revision: Revision(1),
                attempt_id: AttemptId(7),
                checkpoint: "c1".into(),
                evidence_ids: vec![EvidenceId(3)],
            }
        }
    );
}

#[test]
fn each_refusal_in_order() {
    let t = task(Effect::Local);
    let c = completion(&t);
    let cand = Candidate { task: &t, meaning: "m", meaning_core: "k", dependencies: "d" };
    let same = || Ok(cp("c1", "x"));
    assert_eq!(refusal(decide(true, Some(&c), &cand, None, same)), "GOAL_DIGEST_CHANGED");
    assert_eq!(refusal(decide(false, None, &cand, None, same)), "NO_PRIOR_COMPLETION");
    let mut t2 = t.clone();
    t2.action = serde_json::json!({"run": ["false"]});
    let d = decide(
        false,
        Some(&c),
        &Candidate { task: &t2, meaning: "m2", meaning_core: "k2", dependencies: "d" },
        None,
        same,
    );
    assert_eq!(d, Decision::Run { refusal: Refusal::MeaningChanged { field: "action".into() } });
    assert_eq!(
        refusal(decide(
            false,
            Some(&c),
            &Candidate { task: &t, meaning: "m", meaning_core: "k", dependencies: "d2" },
            None,
            same
        )),
        "DEPENDENCIES_CHANGED"
    );
    assert_eq!(refusal(decide(false, Some(&c), &cand, Some("T0"), same)), "UPSTREAM_NOT_REUSED");
    let ext = task(Effect::External);
    assert_eq!(
        refusal(decide(
            false,
            Some(&completion(&ext)),
            &Candidate { task: &ext, meaning: "m", meaning_core: "k", dependencies: "d" },
            None,
            same
        )),
        "EXTERNAL_EFFECT"
    );
    let mut t3 = t.clone();
    t3.validations.push(Validation {
        id: "V2".into(),
        run: vec!["true".into()],
        expect_exit: 0,
        timeout_seconds: None,
    });
    assert_eq!(
        refusal(decide(
            false,
            Some(&c),
            &Candidate { task: &t3, meaning: "m", meaning_core: "k", dependencies: "d" },
            None,
            same
        )),
        "VALIDATION_SET_CHANGED"
    );
    let mut failed = c.clone();
    failed.validations[0].passed = false;
    assert_eq!(refusal(decide(false, Some(&failed), &cand, None, same)), "VALIDATION_NOT_PASSED");
    let mut unbound = c.clone();
    unbound.validations[0].checkpoint = Some("other".into());
    assert_eq!(refusal(decide(false, Some(&unbound), &cand, None, same)), "VALIDATION_NOT_PASSED");
    let d = decide(false, Some(&c), &cand, None, || Ok(cp("c2", "y")));
    assert_eq!(d, Decision::Run { refusal: Refusal::CheckpointChanged { path: "a.txt".into() } });
    let mut racy = c.clone();
    racy.reusable = false;
    assert_eq!(refusal(decide(false, Some(&racy), &cand, None, same)), "CHECKPOINT_CHANGED");
}

#[test]
fn observation_is_skipped_once_a_cheaper_condition_fails() {
    let t = task(Effect::Local);
    let cand = Candidate { task: &t, meaning: "m", meaning_core: "k", dependencies: "d" };
    let d = decide(true, Some(&completion(&t)), &cand, None, || panic!("must not observe"));
    assert!(!d.is_reuse());
}

/// A change to a task's validations alone: another set of ids is
/// VALIDATION_SET_CHANGED, in SPEC's place (after the dependencies, the
/// upstream and the effect); a validation changed under the same id, or any
/// other change, is MEANING_CHANGED.
#[test]
fn a_change_to_the_validations_alone_is_validation_set_changed() {
    let t = task(Effect::Local);
    let c = completion(&t);
    let same = || Ok(cp("c1", "x"));
    let v2 = Validation { id: "V2".into(), run: vec!["true".into()], expect_exit: 0, timeout_seconds: None };
    let mut added = t.clone();
    added.validations.push(v2);
    let cand = |task, meaning, core, deps| Candidate { task, meaning, meaning_core: core, dependencies: deps };
    assert_eq!(
        decide(false, Some(&c), &cand(&added, "m+V2", "k", "d"), None, same),
        Decision::Run { refusal: Refusal::ValidationSetChanged }
    );
    let mut removed = t.clone();
    removed.validations.clear();
    assert_eq!(
        refusal(decide(false, Some(&c), &cand(&removed, "m-V1", "k", "d"), None, same)),
        "VALIDATION_SET_CHANGED"
    );
    // SPEC's order: the dependencies and the upstream come first.
    assert_eq!(refusal(decide(false, Some(&c), &cand(&added, "m+V2", "k", "d2"), None, same)), "DEPENDENCIES_CHANGED");
    assert_eq!(
        refusal(decide(false, Some(&c), &cand(&added, "m+V2", "k", "d"), Some("T0"), same)),
        "UPSTREAM_NOT_REUSED"
    );
    // The same ids, one validation's command changed: what it checks changed.
    let mut edited = t.clone();
    edited.validations[0].run = vec!["false".into()];
    assert_eq!(
        decide(false, Some(&c), &cand(&edited, "m'", "k", "d"), None, same),
        Decision::Run { refusal: Refusal::MeaningChanged { field: "validations".into() } }
    );
    // Added V2 and edited V1 at once: the edit is a meaning change.
    let mut both = edited.clone();
    both.validations.push(Validation {
        id: "V2".into(),
        run: vec!["true".into()],
        expect_exit: 0,
        timeout_seconds: None,
    });
    assert_eq!(refusal(decide(false, Some(&c), &cand(&both, "m''", "k", "d"), None, same)), "MEANING_CHANGED");
    // Validations and something else changed: MEANING_CHANGED, naming the other.
    let mut action = added.clone();
    action.action = serde_json::json!({"run": ["false"]});
    assert_eq!(
        decide(false, Some(&c), &cand(&action, "m2", "k2", "d"), None, same),
        Decision::Run { refusal: Refusal::MeaningChanged { field: "action".into() } }
    );
}

/// Whether a completion could ever be reused, as `status` and `explain`
/// show it: the static conditions of the decision, nothing observed.
#[test]
fn standing_names_why_a_completion_is_never_reusable() {
    let t = task(Effect::Local);
    assert_eq!(standing(&completion(&t)), None);
    let ext = task(Effect::External);
    assert_eq!(standing(&completion(&ext)).map(|r| r.code()), Some("EXTERNAL_EFFECT"));
    let mut racy = completion(&t);
    racy.reusable = false;
    assert_eq!(standing(&racy).map(|r| r.code()), Some("CHECKPOINT_CHANGED"));
    let mut unbound = completion(&t);
    unbound.validations[0].checkpoint = None;
    assert_eq!(standing(&unbound).map(|r| r.code()), Some("VALIDATION_NOT_PASSED"));
    let mut none = completion(&t);
    none.checkpoint = None;
    assert_eq!(standing(&none).map(|r| r.code()), Some("VALIDATION_NOT_PASSED"));
}

/// A checkpoint read from the ledger as its JSON decides as the parsed one
/// does: reused on the same digest, the first differing path named on
/// another, and standing (which compares it with itself) reusable.
#[test]
fn a_recorded_checkpoint_read_as_json_decides_as_a_parsed_one() {
    let t = task(Effect::Local);
    let then = cp("c1", "x");
    let mut c = completion(&t);
    c.checkpoint = RecordedCheckpoint::from_json(serde_json::to_string(&then).unwrap());
    assert!(c.checkpoint.is_some());
    let cand = Candidate { task: &t, meaning: "m", meaning_core: "k", dependencies: "d" };
    assert!(decide(false, Some(&c), &cand, None, || Ok(cp("c1", "x"))).is_reuse());
    assert_eq!(
        decide(false, Some(&c), &cand, None, || Ok(cp("c2", "y"))),
        Decision::Run { refusal: Refusal::CheckpointChanged { path: "a.txt".into() } }
    );
    assert_eq!(standing(&c), None);
    // A stored checkpoint that does not parse is no checkpoint at all.
    assert!(RecordedCheckpoint::from_json(r#"{"files":{},"digest":"c1"}"#.into()).is_none());
}
