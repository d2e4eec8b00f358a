//! Issue 16, item 1: the builtin provider (`noop`, `sleep`) — no process,
//! and the same intent → dispatch → receipt → validations →
//! classification bookkeeping as any provider, checked in the ledger.

use serde_json::{json, Value};

use super::common::*;

/// A plan of builtin tasks (provider `b`) and one command provider `sh`.
fn builtin_plan(tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "builtin steps run"},
        "providers": {"b": {"kind": "builtin"}, "sh": {"kind": "command"}},
        "tasks": tasks,
    })
}

fn noop(task_ref: &str, deps: &[&str]) -> Value {
    json!({"ref": task_ref, "provider": "b", "action": {"op": "noop"}, "effect": "none", "depends_on": deps})
}

#[test]
fn a_chain_of_noops_is_recorded_like_any_provider_call() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &builtin_plan(vec![noop("a", &[]), noop("b", &["a"]), noop("c", &["b"])]));
    let out = ws.run();
    out.expect_code(0);
    assert_eq!(ws.goal_state(), "satisfied");
    let attempts = ws.attempts();
    assert_eq!(attempts.iter().map(|a| a.task_ref.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    for a in &attempts {
        assert_eq!((a.state.as_str(), a.try_no), ("succeeded", 1), "{a:?}");
        assert_eq!(a.dispatch_detail.as_deref(), Some("builtin noop"), "dispatched, with no process");
        assert!(a.dispatched_pid().is_none());
        let receipt = ws.receipt_of(a.id).expect("a receipt");
        assert_eq!(receipt["builtin"], json!({"op": "noop"}), "{receipt}");
        assert_eq!(receipt["timed_out"], false);
        let evidence = ws.evidence(a.id);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        assert_eq!(evidence[0].1, "builtin_result");
    }
    // Each attempt's records in the order of the protocol, and each task's
    // intent only after its dependency succeeded.
    let kinds: Vec<(String, String)> = ws
        .events()
        .into_iter()
        .filter_map(|e| Some((e.task_ref?, e.kind)))
        .filter(|(_, k)| {
            ["intent_recorded", "dispatched", "receipt_recorded", "attempt_succeeded"].contains(&k.as_str())
        })
        .collect();
    let want: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .flat_map(|t| {
            ["intent_recorded", "dispatched", "receipt_recorded", "attempt_succeeded"]
                .iter()
                .map(move |k| (t.to_string(), k.to_string()))
        })
        .collect();
    assert_eq!(kinds, want);
}

#[test]
fn a_builtin_task_is_judged_by_its_validations() {
    let ws = Ws::new();
    let mut t = noop("a", &[]);
    t["validations"] = json!([{"id": "V1", "run": ["sh", "-c", "echo 'AssertionError: not yet' >&2; exit 1"]}]);
    ws.write_plan("plan.json", &builtin_plan(vec![t]));
    let out = ws.run();
    out.expect_code(1);
    let a = &ws.attempts_of("a")[0];
    assert_eq!(a.state, "failed");
    assert_eq!((a.class(), a.rule()), ("validation_failed", "validation_check_failed"));
    assert!(ws.receipt_of(a.id).is_some(), "the builtin's receipt came before the validations");
}

#[test]
fn a_sleep_past_the_deadline_is_a_timeout() {
    let ws = Ws::new();
    let t = json!({"ref": "slow", "provider": "b", "action": {"op": "sleep", "ms": 600_000},
                   "effect": "none", "timeout_seconds": 1});
    ws.write_plan("plan.json", &builtin_plan(vec![t]));
    let out = ws.run();
    out.expect_code(1);
    let a = &ws.attempts_of("slow")[0];
    assert_eq!(a.state, "failed");
    assert_eq!((a.class(), a.rule()), ("timeout", "engine_deadline_after_dispatch"));
    assert_eq!(ws.receipt_of(a.id).expect("a receipt")["timed_out"], true);
}

#[test]
fn a_sleep_takes_its_time_and_succeeds() {
    let ws = Ws::new();
    let t = json!({"ref": "nap", "provider": "b", "action": {"op": "sleep", "ms": 50}, "effect": "none"});
    ws.write_plan("plan.json", &builtin_plan(vec![t]));
    ws.run().expect_code(0);
    let a = &ws.attempts_of("nap")[0];
    assert_eq!(a.dispatch_detail.as_deref(), Some("builtin sleep 50 ms"));
    let receipt = ws.receipt_of(a.id).expect("a receipt");
    assert_eq!(receipt["builtin"], json!({"op": "sleep", "ms": 50}));
    assert!(receipt["duration_ms"].as_u64().is_some_and(|ms| ms >= 50), "{receipt}");
}

#[test]
fn check_refuses_a_malformed_builtin_action_at_its_place() {
    let ws = Ws::new();
    let cases: Vec<(Value, Value, &str)> = vec![
        (json!({"op": "fly"}), json!({"kind": "builtin"}), "$.tasks[0].action.op"),
        (json!({"op": "sleep", "ms": 600_001}), json!({"kind": "builtin"}), "$.tasks[0].action.ms"),
        (json!({"op": "sleep", "ms": -5}), json!({"kind": "builtin"}), "$.tasks[0].action.ms"),
        (json!({"op": "sleep", "ms": 2.5}), json!({"kind": "builtin"}), "$.tasks[0].action.ms"),
        (json!({"op": "sleep"}), json!({"kind": "builtin"}), "$.tasks[0].action"),
        (json!({"op": "noop", "ms": 3}), json!({"kind": "builtin"}), "$.tasks[0].action.ms"),
        (json!({"run": ["true"]}), json!({"kind": "builtin"}), "$.tasks[0].action.run"),
        (json!({}), json!({"kind": "builtin"}), "$.tasks[0].action"),
        (json!({"op": "noop"}), json!({"kind": "builtin", "shell": true}), "$.providers.b.shell"),
    ];
    for (action, provider, place) in cases {
        let plan = json!({
            "version": 1,
            "goal": {"id": "g", "statement": "s"},
            "providers": {"b": provider},
            "tasks": [{"ref": "t", "provider": "b", "action": action, "effect": "none"}],
        });
        ws.write_plan("plan.json", &plan);
        let out = ws.engine(&["check", "plan.json", "--json"]);
        out.expect_code(2);
        let e = &out.json()["error"];
        assert_eq!(e["code"], "PLAN_INVALID", "{action}: {e}");
        assert_eq!(e["place"], place, "{action}: {e}");
    }
    assert!(!ws.store().exists(), "a check writes nothing");
}
