//! Reuse across revisions: every refusal reason from a minimal plan pair
//! (read from `engine revise --json`), and the positive case.

use serde_json::{json, Value};

use crate::helpers::*;

/// T1 (input a.txt) → T2 (input b.txt), both with a passing validation.
fn chain() -> (Ws, Value) {
    let ws = Ws::new();
    ws.write("a.txt", "a\n");
    ws.write("b.txt", "b\n");
    let mut p = plan("reuse", vec![sh_task("T1", "true"), sh_task("T2", "true")]);
    set(&mut p, "T1", "inputs", json!(["a.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "test -f a.txt")]));
    set(&mut p, "T2", "inputs", json!(["b.txt"]));
    set(&mut p, "T2", "depends_on", json!(["T1"]));
    set(&mut p, "T2", "validations", json!([validation("V2", "test -f b.txt")]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    (ws, p)
}

/// Record `p2` as a new revision without running it; the `--json` report.
/// Several of the changes these cases make (an effect, a validation,
/// `idempotent`) loosen what the engine enforces: a person approves them
/// (`tests/trust/authority.rs` is where that is tested).
fn revise(ws: &Ws, p2: &Value) -> Value {
    ws.write_plan("plan.json", p2);
    ws.json(&["revise", "plan.json", "--reason", "test", "--no-run", "--approve-loosening"], 0)
}

/// A change that is not in any digest the reuse decision reads, so that
/// the plan differs (a revision needs a different plan).
fn touch(p: &Value) -> Value {
    let mut p = p.clone();
    // Lowered: a raise would be a loosening, which needs a person's approval.
    p["budgets"]["max_provider_calls"] = json!(p["budgets"]["max_provider_calls"].as_u64().unwrap() - 1);
    p
}

fn run_(reason: &str) -> (String, String) {
    ("run".to_string(), reason.to_string())
}
fn reuse() -> (String, String) {
    ("reuse".to_string(), String::new())
}

#[test]
fn positive_only_the_changed_task_runs_and_the_other_keeps_its_provenance() {
    let (ws, p) = chain();
    let t1_attempt = ws.attempts_of("T1")[0].clone();
    let v1_results: Vec<i64> =
        ws.ledger().check_results().iter().filter(|c| c.check_id == "V1").map(|c| c.evidence_id.get()).collect();
    assert_eq!(v1_results.len(), 1, "one result of V1 so far");
    let v1_evidence = v1_results[0];
    let receipts_before = ws.ledger().receipt_count();

    // Only T2 changes. (T1 runs before T2, so it has no upstream to lose.)
    let mut p2 = p.clone();
    set(&mut p2, "T2", "action", json!({"run": ["sh", "-c", "echo T2 >> \"$SIDE/calls.log\"; echo changed"]}));
    ws.write_plan("plan.json", &p2);
    let rev = ws.json(&["revise", "plan.json", "--reason", "T2 prints more"], 0);
    assert_eq!(decision(&rev, "T1"), reuse());
    assert_eq!(decision(&rev, "T2"), run_("MEANING_CHANGED"));
    assert_eq!(decision_detail(&rev, "T2")["refusal"]["field"], "action");
    assert_eq!(rev["run"]["goal_state"], "satisfied");

    // No provider call for T1: no attempt in revision 2, no side effect.
    assert_eq!(ws.calls("T1"), 1);
    assert_eq!(ws.attempts_of("T1").iter().filter(|a| a.revision == 2).count(), 0);
    assert_eq!(ws.calls("T2"), 2);
    assert_eq!(ws.attempts_of("T2").iter().filter(|a| a.revision == 2).count(), 1);
    // Nothing copied: the only new receipt is T2's.
    assert_eq!(ws.ledger().receipt_count(), receipts_before + 1);

    // Provenance: revision 1, T1's attempt, the evidence of V1's pass.
    let (state, detail) = ws.task(2, "T1");
    assert_eq!(state, "reused");
    let from = &detail["reused_from"];
    assert_eq!(from["attempt_id"].as_i64(), Some(t1_attempt.id));
    assert_eq!(from["revision"].as_i64(), Some(1));
    assert_eq!(from["checkpoint"].as_str(), t1_attempt.checkpoint.as_deref());
    assert_eq!(from["evidence_ids"], json!([v1_evidence]));
    assert_eq!(decision_detail(&rev, "T1")["provenance"], *from);
    // `engine explain` gives the same decision, for each task.
    let ex = ws.json(&["explain", "T1"], 0);
    assert_eq!(ex["reuse_decision"]["provenance"], *from);
    let text = ws.engine(&["explain", "T1"]);
    // The attempt as T1 counts its attempts (its first), not the ledger's id.
    assert!(text.stdout.contains("reused from revision 1 attempt 1 "), "{}", text.describe());
    let ex = ws.json(&["explain", "T2"], 0);
    assert_eq!(ex["reuse_decision"]["refusal"], json!({"reason": "MEANING_CHANGED", "field": "action"}));

    // A third revision reuses through the reuse: provenance still points at
    // the original attempt.
    let rev3 = revise(&ws, &touch(&p2));
    assert_eq!(decision(&rev3, "T1"), reuse());
    assert_eq!(decision_detail(&rev3, "T1")["provenance"]["attempt_id"].as_i64(), Some(t1_attempt.id));
    assert_eq!(decision(&rev3, "T2"), reuse());
}

#[test]
fn goal_digest_changed_when_an_acceptance_criterion_is_added_even_with_unchanged_files() {
    let (ws, p) = chain();
    let mut p2 = p.clone();
    p2["goal"]["acceptance"] =
        json!([{"id": "A1", "statement": "a.txt exists", "check": {"run": ["test", "-f", "a.txt"]}}]);
    let rev = revise(&ws, &p2);
    assert_eq!(rev["goal_contract_changed"], json!(true));
    assert_eq!(decision(&rev, "T1"), run_("GOAL_DIGEST_CHANGED"));
    assert_eq!(decision(&rev, "T2"), run_("GOAL_DIGEST_CHANGED"));
    // Constraints are part of the contract too.
    let mut p3 = p2.clone();
    p3["goal"]["constraints"] = json!(["a.txt is never deleted"]);
    let rev = revise(&ws, &p3);
    assert_eq!(decision(&rev, "T1"), run_("GOAL_DIGEST_CHANGED"));
}

#[test]
fn no_prior_completion_for_a_new_task_and_for_a_failed_one() {
    let (ws, p) = chain();
    let mut p2 = p.clone();
    p2["tasks"].as_array_mut().unwrap().push(sh_task("T3", "exit 1"));
    ws.write_plan("plan.json", &p2);
    let rev = ws.json(&["revise", "plan.json", "--reason", "add T3"], 1);
    assert_eq!(decision(&rev, "T1"), reuse());
    assert_eq!(decision(&rev, "T2"), reuse());
    assert_eq!(decision(&rev, "T3"), run_("NO_PRIOR_COMPLETION"));
    // T3 failed in revision 2: still nothing to reuse in revision 3.
    let rev = revise(&ws, &touch(&p2));
    assert_eq!(decision(&rev, "T3"), run_("NO_PRIOR_COMPLETION"));
    assert_eq!(decision(&rev, "T1"), reuse());
}

#[test]
fn meaning_changed_names_the_field() {
    let (ws, p) = chain();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("action", json!({"run": ["sh", "-c", "echo T1 >> \"$SIDE/calls.log\"; true; true"]}), "action"),
        ("effect", json!("none"), "effect"),
        ("inputs", json!(["a.txt", "b.txt"]), "inputs"),
        // The same validation id, another command (adding or removing one
        // is VALIDATION_SET_CHANGED, below).
        ("validations", json!([validation("V1", "test -f a.txt && test -d .")]), "validations"),
        ("idempotent", json!(true), "idempotent"),
    ];
    let mut current = p.clone();
    for (field, value, named) in cases {
        let mut next = current.clone();
        set(&mut next, "T1", field, value);
        let rev = revise(&ws, &next);
        assert_eq!(decision(&rev, "T1"), run_("MEANING_CHANGED"), "{field}");
        assert_eq!(decision_detail(&rev, "T1")["refusal"]["field"], named, "{field}");
        current = next;
        // Run it, so the next revision has a completion to compare with.
        ws.json(&["run", "plan.json"], 0);
    }
    // A title is not meaning.
    let mut next = current.clone();
    set(&mut next, "T1", "title", json!("a new title"));
    let rev = revise(&ws, &next);
    assert_eq!(decision(&rev, "T1"), reuse());
}

#[test]
fn dependencies_changed_when_an_upstream_meaning_changes_or_an_edge_is_added_or_removed() {
    let (ws, p) = chain();
    // T1's meaning changes: T2's dependency digest changes with it.
    let mut p2 = p.clone();
    set(&mut p2, "T1", "validations", json!([validation("V1", "test -s a.txt")]));
    let rev = revise(&ws, &p2);
    assert_eq!(decision(&rev, "T1"), run_("MEANING_CHANGED"));
    assert_eq!(decision(&rev, "T2"), run_("DEPENDENCIES_CHANGED"));
    ws.json(&["run", "plan.json"], 0);

    // Edge removed.
    let mut p3 = p2.clone();
    set(&mut p3, "T2", "depends_on", json!([]));
    let rev = revise(&ws, &p3);
    assert_eq!(decision(&rev, "T1"), reuse());
    assert_eq!(decision(&rev, "T2"), run_("DEPENDENCIES_CHANGED"));
    ws.json(&["run", "plan.json"], 0);

    // Edge added (the other way round this time).
    let mut p4 = p3.clone();
    set(&mut p4, "T1", "depends_on", json!(["T2"]));
    let rev = revise(&ws, &p4);
    assert_eq!(decision(&rev, "T2"), reuse());
    assert_eq!(decision(&rev, "T1"), run_("DEPENDENCIES_CHANGED"));
}

#[test]
fn upstream_not_reused_and_checkpoint_changed() {
    let (ws, p) = chain();
    ws.write("a.txt", "a, edited\n");
    let rev = revise(&ws, &touch(&p));
    assert_eq!(decision(&rev, "T1"), run_("CHECKPOINT_CHANGED"));
    assert_eq!(decision_detail(&rev, "T1")["refusal"]["path"], "a.txt");
    assert_eq!(decision(&rev, "T2"), run_("UPSTREAM_NOT_REUSED"));
    assert_eq!(decision_detail(&rev, "T2")["refusal"]["dependency"], "T1");
}

#[test]
fn checkpoint_changed_names_the_first_differing_path() {
    let ws = Ws::new();
    for f in ["a", "b", "c", "d"] {
        ws.write(&format!("data/{f}.txt"), f);
    }
    let mut p = plan("first-path", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "inputs", json!(["data/*.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "true")]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);

    ws.write("data/d.txt", "D");
    ws.write("data/b.txt", "B");
    let rev = revise(&ws, &touch(&p));
    assert_eq!(decision_detail(&rev, "T1")["refusal"], json!({"reason": "CHECKPOINT_CHANGED", "path": "data/b.txt"}));
    ws.json(&["run", "plan.json"], 0);

    // A new file matched by the glob, and a removed one.
    ws.write("data/0.txt", "new");
    let p3 = touch(&touch(&p));
    let rev = revise(&ws, &p3);
    assert_eq!(decision_detail(&rev, "T1")["refusal"]["path"], "data/0.txt");
    ws.json(&["run", "plan.json"], 0);
    std::fs::remove_file(ws.path("data/c.txt")).unwrap();
    let rev = revise(&ws, &touch(&p3));
    assert_eq!(decision_detail(&rev, "T1")["refusal"]["path"], "data/c.txt");
    // `engine explain` shows the same decision for the one task.
    let ex = ws.json(&["explain", "T1"], 0);
    assert_eq!(ex["reuse_decision"]["refusal"], json!({"reason": "CHECKPOINT_CHANGED", "path": "data/c.txt"}));
    let text = ws.engine(&["explain", "T1"]);
    assert!(text.stdout.contains("CHECKPOINT_CHANGED") && text.stdout.contains("data/c.txt"), "{}", text.describe());
}

#[test]
fn external_effect_is_never_reused() {
    let ws = Ws::new();
    let mut t1 = sh_task("T1", "true");
    t1["effect"] = json!("external");
    t1["validations"] = json!([validation("V1", "true")]);
    let t2 = sh_task("T2", "true");
    let p = plan("external", vec![t1, t2]);
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    // A plain re-run does not re-send it.
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 1);

    let rev = revise(&ws, &touch(&p));
    assert_eq!(decision(&rev, "T1"), run_("EXTERNAL_EFFECT"));
    assert_eq!(decision(&rev, "T2"), reuse());
    // Running it again is a repeat of external work: it waits on a person.
    let report = ws.json(&["run", "plan.json"], 4);
    assert_eq!(report["code"], "APPROVAL_REQUIRED");
    assert_eq!(ws.calls("T1"), 1);
}

#[test]
fn validation_not_passed_when_no_checkpoint_was_bound_to_the_completion() {
    // The action turns its input into a symlink out of the workspace, so
    // the checkpoint cannot be observed when the validations start: the
    // completion has no checkpoint its validations were bound to.
    let ws = Ws::new();
    let mut p = plan("unbound", vec![sh_task("T1", "ln -sf /etc/hostname link.txt")]);
    set(&mut p, "T1", "inputs", json!(["link.txt"]));
    set(&mut p, "T1", "may_change", json!(["link.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "true")]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.reusable, a.checkpoint.as_deref()), ("succeeded", Some(false), None));
    let ev = ws.events_of("completion_not_reusable");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].1, Some(a.id));

    std::fs::remove_file(ws.path("link.txt")).unwrap();
    let rev = revise(&ws, &touch(&p));
    assert_eq!(decision(&rev, "T1"), run_("VALIDATION_NOT_PASSED"));
}

#[test]
fn a_change_to_the_set_of_validations_alone_is_validation_set_changed() {
    // Validations are in the meaning digest; the decision compares the
    // meaning without them first, so a plan pair that only adds, removes or
    // renames validations is VALIDATION_SET_CHANGED (in SPEC's place), and
    // one that edits a validation under the same id is MEANING_CHANGED.
    let (ws, p) = chain();
    let mut p2 = p.clone();
    set(&mut p2, "T1", "validations", json!([validation("V1b", "test -f a.txt")]));
    let rev = revise(&ws, &p2);
    assert_eq!(decision(&rev, "T1"), run_("VALIDATION_SET_CHANGED"));
    assert_eq!(decision_detail(&rev, "T1")["refusal"], json!({"reason": "VALIDATION_SET_CHANGED"}));
    // T2 depends on T1, whose meaning changed: its dependencies changed.
    assert_eq!(decision(&rev, "T2"), run_("DEPENDENCIES_CHANGED"));
    ws.json(&["run", "plan.json"], 0);

    let mut p3 = p2.clone();
    set(&mut p3, "T1", "validations", json!([validation("V1b", "test -f a.txt"), validation("V2", "true")]));
    assert_eq!(decision(&revise(&ws, &p3), "T1"), run_("VALIDATION_SET_CHANGED"));
    ws.json(&["run", "plan.json"], 0);

    let mut p4 = p3.clone();
    set(&mut p4, "T1", "validations", json!([validation("V1b", "test -f a.txt"), validation("V2", "false || true")]));
    let rev = revise(&ws, &p4);
    assert_eq!(decision(&rev, "T1"), run_("MEANING_CHANGED"));
    assert_eq!(decision_detail(&rev, "T1")["refusal"]["field"], "validations");
}

#[test]
fn an_input_edit_refuses_that_task_and_everything_downstream_only() {
    let ws = Ws::new();
    for f in ["1", "2", "3", "4"] {
        ws.write(&format!("in{f}.txt"), f);
    }
    let mut tasks = Vec::new();
    for (r, deps) in [("T1", vec![]), ("T2", vec!["T1"]), ("T3", vec!["T2"]), ("T4", vec![])] {
        let mut t = sh_task(r, "true");
        t["inputs"] = json!([format!("in{}.txt", &r[1..])]);
        t["depends_on"] = json!(deps);
        t["validations"] = json!([validation("V", "true")]);
        tasks.push(t);
    }
    let p = plan("downstream", tasks);
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    ws.write("in2.txt", "2, edited");
    ws.write_plan("plan.json", &touch(&p));
    let rev = ws.json(&["revise", "plan.json", "--reason", "in2 edited"], 0);
    assert_eq!(decision(&rev, "T1"), reuse());
    assert_eq!(decision(&rev, "T2"), run_("CHECKPOINT_CHANGED"));
    assert_eq!(decision(&rev, "T3"), run_("UPSTREAM_NOT_REUSED"));
    assert_eq!(decision(&rev, "T4"), reuse());
    assert_eq!([ws.calls("T1"), ws.calls("T2"), ws.calls("T3"), ws.calls("T4")], [1, 2, 2, 1]);
}

#[test]
fn a_file_changed_while_validations_run_is_caught() {
    let ws = Ws::new();
    ws.write("in.txt", "start\n");
    let mut p = plan("racy", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "inputs", json!(["in.txt"]));
    // The validation passes, and edits the input it judged.
    set(&mut p, "T1", "validations", json!([validation("V1", "echo touched >> in.txt")]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);

    let a = &ws.attempts_of("T1")[0];
    assert_eq!(a.state, "succeeded", "the completion is still recorded");
    assert_eq!(a.reusable, Some(false));
    assert!(a.checkpoint.is_some());
    assert_eq!(ws.task(1, "T1").0, "succeeded");
    assert_eq!(ws.task(1, "T1").1["reusable"], json!(false));
    let ev = ws.events_of("completion_not_reusable");
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].0.as_deref(), ev[0].1), (Some("T1"), Some(a.id)));
    assert_eq!(ev[0].2["first_changed"], "in.txt");
    // Two separate records: the success, then the reuse verdict.
    assert_eq!(ws.events_of("attempt_succeeded").len(), 1);

    let rev = revise(&ws, &touch(&p));
    assert_eq!(decision(&rev, "T1"), run_("CHECKPOINT_CHANGED"));
}

#[test]
fn an_input_vanishing_while_validations_run_is_succeeded_but_not_reusable() {
    let ws = Ws::new();
    ws.write("in.txt", "here\n");
    let mut p = plan("vanished", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "inputs", json!(["in.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "rm in.txt")]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.reusable), ("succeeded", Some(false)));
    let ev = ws.events_of("completion_not_reusable");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].2["first_changed"], "in.txt");
}

#[test]
fn context_values_are_part_of_the_checkpoint_and_secrets_only_as_digests() {
    let ws = Ws::new();
    ws.write("in.txt", "x");
    let mut p = plan("context", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "inputs", json!(["in.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "true")]));
    set(&mut p, "T1", "context", json!({"mode": {"env": "FLOW_MODE"}, "token": {"env": "FLOW_TOKEN"}}));
    p["secrets"] = json!(["FLOW_TOKEN"]);
    ws.write_plan("plan.json", &p);
    let secret = "s3cr3t-value-for-the-test";
    let out = ws.engine_env(&["run", "plan.json"], &[("FLOW_MODE", "fast"), ("FLOW_TOKEN", secret)]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    let stored: Vec<String> =
        ws.ledger().checkpoints().iter().map(|c| serde_json::to_string(c).expect("a checkpoint serializes")).collect();
    assert!(!stored.is_empty());
    assert!(stored.iter().any(|c| c.contains("fast")), "{stored:?}");
    assert!(stored.iter().all(|c| !c.contains(secret)), "a secret is recorded only as a digest: {stored:?}");

    // Same files, another context value: CHECKPOINT_CHANGED names it.
    ws.write_plan("plan.json", &touch(&p));
    let out = ws.engine_env(
        &["revise", "plan.json", "--reason", "mode", "--no-run", "--json"],
        &[("FLOW_MODE", "slow"), ("FLOW_TOKEN", secret)],
    );
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!(
        decision_detail(&out.json(), "T1")["refusal"],
        json!({"reason": "CHECKPOINT_CHANGED", "path": "context:mode"})
    );
    // The secret changing is seen too, without being shown.
    let out = ws.engine_env(&["run", "plan.json"], &[("FLOW_MODE", "slow"), ("FLOW_TOKEN", secret)]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    ws.write_plan("plan.json", &touch(&touch(&p)));
    let out = ws.engine_env(
        &["revise", "plan.json", "--reason", "token", "--no-run", "--json"],
        &[("FLOW_MODE", "slow"), ("FLOW_TOKEN", "another")],
    );
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!(
        decision_detail(&out.json(), "T1")["refusal"],
        json!({"reason": "CHECKPOINT_CHANGED", "path": "context:token"})
    );
    assert!(!out.stdout.contains(secret) && !out.stdout.contains("another"));
}
