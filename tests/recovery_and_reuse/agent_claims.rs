//! What an agent says is a claim, kept apart; the class comes from the
//! evidence the engine saw itself.

use serde_json::json;

use crate::helpers::*;

const FAILING_CHECK: &str = "echo 'AssertionError: 4.35 != 435' >&2; exit 1";

#[test]
fn agent_success_claim_with_failing_validation_is_validation_failed_and_the_claim_is_kept_apart() {
    let ws = Ws::new();
    ws.write("agent.py", AGENT_PY);
    let mut p = plan("claims", vec![agent_task("T1", "done")]);
    set(&mut p, "T1", "validations", json!([validation("V1", FAILING_CHECK)]));
    ws.write_plan("plan.json", &p);

    let run = ws.json(&["run", "plan.json"], 1);
    assert_eq!(run["failed"], json!(["T1"]));

    let a = &ws.attempts_of("T1")[0];
    assert_eq!(a.state, "failed");
    assert_eq!((a.class(), a.rule()), ("validation_failed", "validation_check_failed"));
    // The classification names the failed check's evidence, and only it.
    let ids: Vec<i64> = serde_json::from_value(a.classification.as_ref().unwrap()["evidence_ids"].clone()).unwrap();
    let evidence = ws.evidence(a.id);
    let check = evidence.iter().find(|(_, kind, _)| kind == "check_result").expect("a check_result evidence row");
    assert_eq!(ids, vec![check.0]);
    assert_eq!(check.2["passed"], json!(false));
    assert!(check.2["failing_assertion"].as_str().unwrap().contains("4.35 != 435"), "{:#}", check.2);

    // The agent's "done" is stored as a claim with the agent's authority,
    // and nowhere in the classification.
    let claims = ws.claims(a.id);
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].0, "external_ai_message");
    assert_eq!(claims[0].1["status"], "done");
    assert_eq!(claims[0].1["summary"], "all tests pass now");
    assert!(!a.classification.as_ref().unwrap().to_string().contains("all tests pass"));

    // `explain --json` shows the class and, apart from it, the claim.
    let ex = ws.json(&["explain", "T1"], 0);
    let att = &ex["attempts"][0];
    assert_eq!(att["attempt"]["classification"]["class"], "validation_failed");
    assert_eq!(att["claims"][0]["authority"], "external_ai_message");
    assert_eq!(att["claims"][0]["data"]["status"], "done");
}

#[test]
fn an_agent_blaming_the_network_is_classified_by_the_real_evidence() {
    let ws = Ws::new();
    ws.write("agent.py", AGENT_PY);
    let mut p = plan(
        "network",
        vec![
            agent_task("DONE", "blame-network"),
            agent_task("FAILED", "failed-network"),
            agent_task("EXIT1", "failed-network-exit1"),
        ],
    );
    set(&mut p, "DONE", "validations", json!([validation("V1", FAILING_CHECK)]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 1);

    // Says "done, the network is to blame", but its validation failed.
    let a = &ws.attempts_of("DONE")[0];
    assert_eq!((a.class(), a.rule()), ("validation_failed", "validation_check_failed"));
    assert_eq!(ws.claims(a.id)[0].1["claimed_cause"], "the network was flaky");
    // Says "failed: the network is down" and exits 0: no network evidence.
    let a = &ws.attempts_of("FAILED")[0];
    assert_eq!((a.class(), a.rule()), ("unclassified", "agent_reported_failure"));
    assert_eq!(ws.claims(a.id)[0].1["claimed_cause"], "the network is down");
    // Same words, exit 1: the exit code is the evidence.
    let a = &ws.attempts_of("EXIT1")[0];
    assert_eq!((a.class(), a.rule()), ("provider_rejected", "action_exit_nonzero"));

    for r in ["DONE", "FAILED", "EXIT1"] {
        let a = &ws.attempts_of(r)[0];
        assert_ne!(a.class(), "provider_unavailable", "{r}: a claimed cause must never become the class");
        for (_, kind, data) in ws.evidence(a.id) {
            assert!(
                kind != "engine_error" && data.get("http_status").is_none(),
                "{r}: no network evidence was observed: {data}"
            );
        }
    }
}

#[test]
fn a_malformed_agent_report_is_provider_output_invalid_never_success() {
    let ws = Ws::new();
    ws.write("agent.py", AGENT_PY);
    let mut p = plan("malformed", vec![agent_task("GARBAGE", "garbage"), agent_task("NOSTATUS", "no-status")]);
    // Even with validations that would pass.
    set(&mut p, "GARBAGE", "validations", json!([validation("V1", "true")]));
    set(&mut p, "NOSTATUS", "validations", json!([validation("V1", "true")]));
    ws.write_plan("plan.json", &p);
    let run = ws.json(&["run", "plan.json"], 1);
    assert_eq!(run["goal_state"], "failed");

    for r in ["GARBAGE", "NOSTATUS"] {
        let (state, _) = ws.task(1, r);
        assert_eq!(state, "failed", "{r}");
        let a = &ws.attempts_of(r)[0];
        assert_eq!(a.state, "failed", "{r}");
        assert_eq!((a.class(), a.rule()), ("provider_rejected", "provider_output_invalid"), "{r}");
        let kinds: Vec<String> = ws.evidence(a.id).into_iter().map(|(_, k, _)| k).collect();
        assert!(kinds.contains(&"provider_output_invalid".to_string()), "{r}: {kinds:?}");
        assert_eq!(ws.attempts_of(r).iter().filter(|a| a.state == "succeeded").count(), 0);
    }
}

#[test]
fn a_repair_hands_the_agent_the_instruction_and_the_classified_failure() {
    let ws = Ws::new();
    ws.write("agent.py", AGENT_PY);
    let mut p = plan("instruction", vec![agent_task("T1", "done")]);
    set(&mut p, "T1", "validations", json!([validation("V1", FAILING_CHECK)]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 1);
    ws.json(&["repair", "T1", "--instruction", "sum cents, not dollars"], 1);

    let stdins = agent_stdins(&ws);
    assert_eq!(stdins.len(), 2);
    let (first, second) = (&stdins[0], &stdins[1]);
    for doc in [first, second] {
        assert_eq!(doc["goal"]["id"], "instruction");
        assert_eq!(doc["task"]["ref"], "T1");
    }
    let attempts = ws.attempts_of("T1");
    assert_eq!(second["operation_id"], json!(attempts[1].operation_id));
    assert_eq!(second["repair"]["instruction"], "sum cents, not dollars");
    assert_eq!(second["repair"]["failed_attempt"], attempts[0].id);
    assert_eq!(second["repair"]["classification"]["class"], "validation_failed");
    assert_eq!(second["repair"]["classification"]["rule"], "validation_check_failed");
    // The agent is told what failed, not what it said about it: its own
    // claim is not passed back as evidence.
    let evidence = second["repair"]["evidence"].to_string();
    assert!(evidence.contains("4.35 != 435"), "{evidence}");
    assert!(!evidence.contains("external_ai_message"), "{evidence}");
    // Provider processes never receive the store path.
    assert!(!second.to_string().contains(".engine/engine.db"));
}

#[test]
fn signals_and_deadlines_end_to_end() {
    let ws = Ws::new();
    let mut p = plan("signals", vec![sh_task("KILLED", "kill -9 $$"), sh_task("SLOW", "sleep 5")]);
    set(&mut p, "KILLED", "validations", json!([validation("V1", "true")]));
    set(&mut p, "SLOW", "timeout_seconds", json!(1));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 1);
    let a = &ws.attempts_of("KILLED")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "killed", "killed_by_signal"));
    assert_eq!(
        ws.ledger().check_results().iter().filter(|c| c.attempt_id.map(|id| id.get()) == Some(a.id)).count(),
        0,
        "a killed action is never validated into a success"
    );
    let a = &ws.attempts_of("SLOW")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "timeout", "engine_deadline_after_dispatch"));
    // A killed task may be repaired without --force.
    ws.json(&["repair", "KILLED"], 1);
    assert_eq!(ws.calls("KILLED"), 2);
}
