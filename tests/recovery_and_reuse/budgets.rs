//! Every budget's exhaustion: exit 5, `BUDGET_EXHAUSTED` naming the budget,
//! its use and its limit, and nothing dispatched past the limit.

use serde_json::{json, Value};

use crate::helpers::*;

fn with_budgets(mut p: Value, budgets: Value) -> Value {
    for (k, v) in budgets.as_object().unwrap() {
        p["budgets"][k] = v.clone();
    }
    p
}

fn assert_exhausted(report: &Value, budget: &str, used: f64, limit: f64) {
    assert_eq!(report["exit_code"], 5, "{report:#}");
    assert_eq!(report["code"], "BUDGET_EXHAUSTED", "{report:#}");
    assert_eq!(report["budget"]["budget"], budget, "{report:#}");
    assert_eq!(report["budget"]["used"].as_f64(), Some(used), "{report:#}");
    assert_eq!(report["budget"]["limit"].as_f64(), Some(limit), "{report:#}");
}

#[test]
fn max_attempts_per_task_through_repairs() {
    let ws = Ws::new();
    let mut p = plan("attempts", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "validations", json!([validation("V1", "exit 1")]));
    ws.write_plan("plan.json", &with_budgets(p, json!({"max_attempts_per_task": 2})));
    ws.json(&["run", "plan.json"], 1);
    ws.json(&["repair", "T1", "--instruction", "first idea"], 1);
    let report = ws.json(&["repair", "T1", "--instruction", "second idea"], 5);
    assert_exhausted(&report, "max_attempts_per_task", 2.0, 2.0);
    assert_eq!(ws.calls("T1"), 2);
    assert_eq!(ws.attempts_of("T1").len(), 2);
    assert_eq!(ws.task(1, "T1").0, "failed", "a refused repair leaves the task the failure it was");
    let ev = ws.events_of("budget_exhausted");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].2["budget"], "max_attempts_per_task");
    let text = ws.engine(&["repair", "T1", "--instruction", "third idea"]);
    assert_eq!(text.code(), 5);
    assert!(
        text.stdout.contains("BUDGET_EXHAUSTED") && text.stdout.contains("max_attempts_per_task"),
        "{}",
        text.describe()
    );
    assert_eq!(ws.calls("T1"), 2);
}

#[test]
fn max_provider_calls_goal_wide_across_runs_and_revisions() {
    let ws = Ws::new();
    let p = plan("calls", vec![sh_task("T1", "true"), sh_task("T2", "true"), sh_task("T3", "true")]);
    let p = with_budgets(p, json!({"max_provider_calls": 2}));
    ws.write_plan("plan.json", &p);
    let report = ws.json(&["run", "plan.json", "--jobs", "1"], 5);
    assert_exhausted(&report, "max_provider_calls", 2.0, 2.0);
    assert_eq!(ws.attempt_count(), 2);
    assert_eq!(ws.calls("T1") + ws.calls("T2") + ws.calls("T3"), 2);

    // Another run: still nothing past the limit.
    let report = ws.json(&["run", "plan.json", "--jobs", "1"], 5);
    assert_exhausted(&report, "max_provider_calls", 2.0, 2.0);
    assert_eq!(ws.attempt_count(), 2);

    // A revision does not reset it (the two done tasks are reused).
    let mut p2 = p.clone();
    set(&mut p2, "T3", "title", json!("renamed"));
    ws.write_plan("plan2.json", &p2);
    let rev = ws.json(&["revise", "plan2.json", "--reason", "rename", "--jobs", "1"], 5);
    assert_exhausted(&rev["run"], "max_provider_calls", 2.0, 2.0);
    assert_eq!(ws.attempt_count(), 2);
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_provider_calls"], json!({"used": 2, "limit": 2}));
}

#[test]
fn max_cost_counts_the_cost_of_calls() {
    let ws = Ws::new();
    let mut tasks = vec![sh_task("T1", "true"), sh_task("T2", "true"), sh_task("T3", "true")];
    for t in &mut tasks {
        t["cost"] = json!(1.0);
    }
    ws.write_plan("plan.json", &with_budgets(plan("cost", tasks), json!({"max_cost": 2.5})));
    let report = ws.json(&["run", "plan.json", "--jobs", "1"], 5);
    assert_exhausted(&report, "max_cost", 2.0, 2.5);
    assert_eq!(report["budget"]["requested"].as_f64(), Some(1.0));
    assert_eq!(ws.attempt_count(), 2);
    assert_eq!(ws.calls("T1") + ws.calls("T2") + ws.calls("T3"), 2);
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_cost"]["used"].as_f64(), Some(2.0));
}

#[test]
fn deadline_zero_dispatches_nothing() {
    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &with_budgets(plan("deadline0", vec![sh_task("T1", "true")]), json!({"deadline_seconds": 0})),
    );
    let report = ws.json(&["run", "plan.json"], 5);
    assert_exhausted(&report, "deadline_seconds", 0.0, 0.0);
    assert_eq!(ws.attempt_count(), 0);
    assert_eq!(ws.calls("T1"), 0);
}

#[test]
fn deadline_passes_while_a_task_runs() {
    let ws = Ws::new();
    let mut p = plan("deadline1", vec![sh_task("T1", "sleep 1.3"), sh_task("T2", "true")]);
    set(&mut p, "T2", "depends_on", json!(["T1"]));
    ws.write_plan("plan.json", &with_budgets(p, json!({"deadline_seconds": 1})));
    let report = ws.json(&["run", "plan.json"], 5);
    assert_eq!(
        (report["code"].as_str(), report["budget"]["budget"].as_str()),
        (Some("BUDGET_EXHAUSTED"), Some("deadline_seconds")),
        "{report:#}"
    );
    assert_eq!(report["budget"]["limit"].as_f64(), Some(1.0));
    assert!(report["budget"]["used"].as_f64().unwrap() >= 1.0, "{report:#}");
    assert_eq!(ws.attempts_of("T1").len(), 1);
    assert_eq!(ws.attempts_of("T1")[0].state, "succeeded");
    assert_eq!(ws.attempts_of("T2").len(), 0);
    assert_eq!(ws.calls("T2"), 0);
}

#[test]
fn max_revisions_refuses_the_revision_itself() {
    let ws = Ws::new();
    let p = with_budgets(plan("revisions", vec![sh_task("T1", "true")]), json!({"max_revisions": 1}));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let mut p2 = p.clone();
    set(&mut p2, "T1", "title", json!("second"));
    ws.write_plan("plan.json", &p2);
    ws.json(&["revise", "plan.json", "--reason", "one"], 0);
    let mut p3 = p2.clone();
    set(&mut p3, "T1", "title", json!("third"));
    ws.write_plan("plan.json", &p3);
    let doc = ws.json(&["revise", "plan.json", "--reason", "two"], 5);
    assert_eq!(doc["error"]["code"], "BUDGET_EXHAUSTED");
    assert_eq!(
        (&doc["error"]["details"]["budget"], &doc["error"]["details"]["used"], &doc["error"]["details"]["limit"]),
        (&json!("max_revisions"), &json!(1), &json!(1))
    );
    assert_eq!(ws.ledger().revisions().len(), 2);
    assert_eq!(ws.ledger().task_count(3), 0);
    assert_eq!(ws.ledger().goals_active_revision(), 2);
    assert_eq!(ws.calls("T1"), 1);
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_revisions"], json!({"used": 1, "limit": 1}));
}

#[test]
fn max_revisions_cannot_be_raised_in_steps() {
    let ws = Ws::new();
    let p = with_budgets(plan("revisions", vec![sh_task("T1", "true")]), json!({"max_revisions": 2}));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    // Revision 2 raises its own limit to 100 ...
    let mut p2 = with_budgets(p.clone(), json!({"max_revisions": 100}));
    set(&mut p2, "T1", "title", json!("second"));
    ws.write_plan("plan.json", &p2);
    ws.json(&["revise", "plan.json", "--reason", "raise the limit"], 0);
    let mut p3 = p2.clone();
    set(&mut p3, "T1", "title", json!("third"));
    ws.write_plan("plan.json", &p3);
    ws.json(&["revise", "plan.json", "--reason", "two"], 0);
    // ... but revision 1's limit of 2 still holds for the third.
    let mut p4 = p3.clone();
    set(&mut p4, "T1", "title", json!("fourth"));
    ws.write_plan("plan.json", &p4);
    let doc = ws.json(&["revise", "plan.json", "--reason", "three"], 5);
    assert_eq!(
        (&doc["error"]["details"]["budget"], &doc["error"]["details"]["used"], &doc["error"]["details"]["limit"]),
        (&json!("max_revisions"), &json!(2), &json!(2))
    );
    assert_eq!(ws.ledger().revisions().len(), 3);
}

/// An external task with a cost whose engine dies after dispatch: its
/// outcome is unknown, and its cost still counts.
#[test]
fn cost_budget_counts_unknown_outcomes() {
    let ws = Ws::new();
    let mut t1 = sh_task("T1", "true");
    t1["effect"] = json!("external");
    t1["cost"] = json!(1.0);
    let mut t2 = sh_task("T2", "true");
    t2["cost"] = json!(1.0);
    ws.write_plan("plan.json", &with_budgets(plan("unknown-cost", vec![t1, t2]), json!({"max_cost": 1.5})));

    let crashed = ws.engine_env(&["run", "plan.json", "--jobs", "1"], &[("ENGINE_FAILPOINT", "after_dispatch")]);
    assert_ne!(crashed.code(), 0, "{}", crashed.describe());
    assert!(crashed.stderr.contains("failpoint after_dispatch"), "{}", crashed.describe());
    assert_eq!(ws.attempts_of("T2").len(), 0);

    let report = ws.json(&["run", "plan.json", "--jobs", "1"], 3);
    assert_eq!(report["code"], "EXTERNAL_EFFECT_UNKNOWN");
    let a = ws.attempts_of("T1");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].state, "effect_unknown");
    // T2 would bring the cost to 2 > 1.5: refused before its intent.
    assert_eq!(ws.attempts_of("T2").len(), 0);
    assert_eq!(ws.calls("T2"), 0);
    assert_eq!(report["budget"]["budget"], "max_cost", "{report:#}");
    assert_eq!(report["budget"]["used"].as_f64(), Some(1.0));
    let ev = ws.events_of("budget_exhausted");
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].0.as_deref(), ev[0].2["budget"].as_str()), (Some("T2"), Some("max_cost")));
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_cost"]["used"].as_f64(), Some(1.0));
    assert_eq!(status["effect_unknown"][0]["task_ref"], "T1");
}

/// SPEC: `max_cost` is the sum of the cost of calls *dispatched*. A call
/// the engine could not even start was not dispatched.
#[test]
fn cost_of_a_call_that_never_started_does_not_count() {
    let ws = Ws::new();
    let mut t1 = sh_task("T1", "true");
    t1["action"] = json!({"run": ["/nonexistent/engine-test-program"]});
    t1["cost"] = json!(1.0);
    ws.write_plan("plan.json", &with_budgets(plan("never-started", vec![t1]), json!({"max_cost": 5})));
    ws.json(&["run", "plan.json"], 1);
    let a = ws.attempts_of("T1");
    assert_eq!((a[0].state.as_str(), a[0].class()), ("failed", "environment"));
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_cost"]["used"].as_f64(), Some(0.0), "{:#}", status["budgets"]);
    assert_eq!(status["budgets"]["max_provider_calls"]["used"], 0, "{:#}", status["budgets"]);
    // It is still an attempt of the task.
    assert_eq!(status["budgets"]["max_attempts_per_task"]["used"], 1, "{:#}", status["budgets"]);
}

#[test]
fn max_cost_holds_with_parallel_jobs() {
    let ws = Ws::new();
    let mut tasks: Vec<Value> = (1..=6).map(|i| sh_task(&format!("T{i}"), "sleep 0.2")).collect();
    for t in &mut tasks {
        t["cost"] = json!(1.0);
    }
    ws.write_plan("plan.json", &with_budgets(plan("cost-parallel", tasks), json!({"max_cost": 2.5})));
    let report = ws.json(&["run", "plan.json", "--jobs", "8"], 5);
    assert_exhausted(&report, "max_cost", 2.0, 2.5);
    assert_eq!(ws.attempt_count(), 2);
    assert_eq!((1..=6).map(|i| ws.calls(&format!("T{i}"))).sum::<usize>(), 2);
}
