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
    }
}

fn completion(t: &Task) -> Completion {
    Completion {
        revision: Revision(1),
        attempt_id: AttemptId(7),
        task: t.clone(),
        meaning: "m".into(),
        dependencies: "d".into(),
        checkpoint: Some(cp("c1", "x")),
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
    let d =
        decide(false, Some(&c), &Candidate { task: &t, meaning: "m", dependencies: "d" }, None, || Ok(cp("c1", "x")));
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
    let cand = Candidate { task: &t, meaning: "m", dependencies: "d" };
    let same = || Ok(cp("c1", "x"));
    assert_eq!(refusal(decide(true, Some(&c), &cand, None, same)), "GOAL_DIGEST_CHANGED");
    assert_eq!(refusal(decide(false, None, &cand, None, same)), "NO_PRIOR_COMPLETION");
    let mut t2 = t.clone();
    t2.action = serde_json::json!({"run": ["false"]});
    let d = decide(false, Some(&c), &Candidate { task: &t2, meaning: "m2", dependencies: "d" }, None, same);
    assert_eq!(d, Decision::Run { refusal: Refusal::MeaningChanged { field: "action".into() } });
    assert_eq!(
        refusal(decide(false, Some(&c), &Candidate { task: &t, meaning: "m", dependencies: "d2" }, None, same)),
        "DEPENDENCIES_CHANGED"
    );
    assert_eq!(refusal(decide(false, Some(&c), &cand, Some("T0"), same)), "UPSTREAM_NOT_REUSED");
    let ext = task(Effect::External);
    assert_eq!(
        refusal(decide(
            false,
            Some(&completion(&ext)),
            &Candidate { task: &ext, meaning: "m", dependencies: "d" },
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
        refusal(decide(false, Some(&c), &Candidate { task: &t3, meaning: "m", dependencies: "d" }, None, same)),
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
    let cand = Candidate { task: &t, meaning: "m", dependencies: "d" };
    let d = decide(true, Some(&completion(&t)), &cand, None, || panic!("must not observe"));
    assert!(!d.is_reuse());
}
