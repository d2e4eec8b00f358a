//! Issue 12, item 5: budgets a person can get past. Every
//! `BUDGET_EXHAUSTED` names the way out as a command to type;
//! `deadline_seconds` bounds one run of work, never the goal's life; a
//! person raises a limit with `engine revise PLAN --reason TEXT --raise
//! NAME=VALUE`, recorded as their act; a plan still cannot raise
//! `max_revisions` by editing itself.

use serde_json::{json, Value};

use crate::helpers::*;

fn with_budgets(mut p: Value, budgets: Value) -> Value {
    for (k, v) in budgets.as_object().unwrap() {
        p["budgets"][k] = v.clone();
    }
    p
}

/// The one `budget_raised` event's data.
fn raised(ws: &Ws) -> Vec<Value> {
    ws.events_of("budget_raised").into_iter().map(|(_, _, d)| d).collect()
}

#[test]
fn calls_exhausted_names_the_raise_and_the_raise_alone_lets_the_run_go_on() {
    let ws = Ws::new();
    let p = plan("calls", vec![sh_task("T1", "true"), sh_task("T2", "true"), sh_task("T3", "true")]);
    ws.write_plan("plan.json", &with_budgets(p, json!({"max_provider_calls": 2})));
    let report = ws.json(&["run", "plan.json", "--jobs", "1"], 5);
    let way_out = "raise it (a person's act, recorded): \
                   `engine revise plan.json --reason \"…\" --raise max_provider_calls=4`";
    assert_eq!(report["way_out"], way_out, "{report:#}");
    let text = ws.engine(&["run", "plan.json", "--jobs", "1"]);
    assert_eq!(text.code(), 5);
    assert!(text.stdout.contains(way_out), "{}", text.describe());

    // The command as printed (with a reason): the plan is the same, so no
    // new revision, only the raise; then the run goes on.
    let out =
        ws.json(&["revise", "plan.json", "--reason", "three calls are fine", "--raise", "max_provider_calls=4"], 0);
    assert_eq!((out["from_revision"].as_i64(), out["revision"].as_i64()), (Some(1), Some(1)), "{out:#}");
    assert_eq!(out["raised"], json!([{"budget": "max_provider_calls", "from": 2.0, "to": 4.0}]), "{out:#}");
    assert_eq!(out["run"]["exit_code"], 0, "{out:#}");
    assert_eq!(ws.calls("T1") + ws.calls("T2") + ws.calls("T3"), 3);
    assert_eq!(ws.ledger().revisions().len(), 1, "a raise alone records no revision");

    // A person's act: who (the OS user and uid) and why.
    let ev = raised(&ws);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0]["budget"].as_str(), ev[0]["to"].as_f64()), (Some("max_provider_calls"), Some(4.0)));
    assert_eq!(ev[0]["reason"], "three calls are fine");
    assert_eq!(ev[0]["uid"].as_u64(), Some(unsafe { libc::getuid() } as u64));
    assert!(ev[0]["actor"].as_str().is_some_and(|a| !a.is_empty()), "{ev:?}");
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_provider_calls"], json!({"used": 3, "limit": 4}));
    ws.verify();
}

#[test]
fn max_revisions_is_raised_by_a_person_never_by_the_plan() {
    let ws = Ws::new();
    let p = with_budgets(plan("revisions", vec![sh_task("T1", "true")]), json!({"max_revisions": 1}));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let mut p2 = p.clone();
    set(&mut p2, "T1", "title", json!("second"));
    ws.write_plan("plan.json", &p2);
    ws.json(&["revise", "plan.json", "--reason", "one"], 0);

    // The plan raises its own limit: refused, with the way out.
    let mut p3 = with_budgets(p2.clone(), json!({"max_revisions": 100}));
    set(&mut p3, "T1", "title", json!("third"));
    ws.write_plan("plan.json", &p3);
    let doc = ws.json(&["revise", "plan.json", "--reason", "two"], 5);
    let way_out =
        "raise it (a person's act, recorded): `engine revise plan.json --reason \"…\" --raise max_revisions=2`";
    assert_eq!(doc["error"]["details"]["way_out"], way_out, "{doc:#}");
    assert!(doc["error"]["message"].as_str().unwrap().ends_with(way_out), "{doc:#}");
    let text = ws.engine(&["revise", "plan.json", "--reason", "two"]);
    assert!(text.stderr.contains("--raise max_revisions=2"), "{}", text.describe());

    // A raise that does not raise, or names no budget: bad input, nothing recorded.
    let low = ws.json(&["revise", "plan.json", "--reason", "two", "--raise", "max_revisions=1"], 2);
    assert!(low["error"]["message"].as_str().unwrap().contains("already 1"), "{low:#}");
    let typo = ws.json(&["revise", "plan.json", "--reason", "two", "--raise", "max_revision=2"], 2);
    assert!(typo["error"]["message"].as_str().unwrap().contains("is not a budget"), "{typo:#}");
    assert!(raised(&ws).is_empty());
    assert_eq!(ws.ledger().revisions().len(), 2);

    // The person's raise: revision 3 is recorded in the same command.
    let out = ws.json(&["revise", "plan.json", "--reason", "two", "--raise", "max_revisions=2"], 0);
    assert_eq!(out["revision"], 3, "{out:#}");
    assert_eq!(ws.ledger().revisions().len(), 3);
    assert_eq!(raised(&ws)[0]["from"].as_f64(), Some(1.0));
    // The plan's own 100 still does not count: a fourth is refused at 2.
    let mut p4 = p3.clone();
    set(&mut p4, "T1", "title", json!("fourth"));
    ws.write_plan("plan.json", &p4);
    let doc = ws.json(&["revise", "plan.json", "--reason", "three"], 5);
    assert_eq!(doc["error"]["details"]["limit"], 2, "{doc:#}");
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_revisions"], json!({"used": 2, "limit": 2}));
}

#[test]
fn the_deadline_bounds_one_run_and_the_next_run_goes_on() {
    let ws = Ws::new();
    let mut p = plan("deadline", vec![sh_task("T1", "sleep 1.3"), sh_task("T2", "true")]);
    set(&mut p, "T2", "depends_on", json!(["T1"]));
    ws.write_plan("plan.json", &with_budgets(p, json!({"deadline_seconds": 1})));
    let report = ws.json(&["run", "plan.json"], 5);
    assert_eq!(report["budget"]["budget"], "deadline_seconds", "{report:#}");
    let way_out = report["way_out"].as_str().unwrap();
    assert!(way_out.contains("`engine run plan.json` goes on with a new one"), "{way_out}");
    assert!(way_out.ends_with("`engine revise plan.json --reason \"…\" --raise deadline_seconds=2`"), "{way_out}");
    assert_eq!(ws.calls("T2"), 0);
    // The next run has a deadline of its own: T2 runs.
    ws.json(&["run", "plan.json"], 0);
    assert_eq!((ws.calls("T1"), ws.calls("T2")), (1, 1));
}

#[test]
fn an_edit_long_after_the_first_run_is_not_over_the_deadline() {
    let ws = Ws::new();
    let p = with_budgets(plan("later", vec![sh_task("T1", "true")]), json!({"deadline_seconds": 1}));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    // Longer after the goal's first run than its deadline: the goal is
    // satisfied, and a person edits it.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let mut p2 = p.clone();
    p2["tasks"].as_array_mut().unwrap().push(sh_task("T2", "true"));
    ws.write_plan("plan.json", &p2);
    let out = ws.json(&["revise", "plan.json", "--reason", "one more task"], 0);
    assert_eq!(out["run"]["goal_state"], "satisfied", "{out:#}");
    assert_eq!(ws.calls("T2"), 1);
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["deadline_seconds"], json!({"limit": 1, "per": "run"}));
}

#[test]
fn attempts_and_cost_exhausted_name_a_raise_that_lets_the_work_go_on() {
    let ws = Ws::new();
    let mut p = plan("attempts", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "validations", json!([validation("V1", "test -e fixed")]));
    ws.write_plan("plan.json", &with_budgets(p, json!({"max_attempts_per_task": 1})));
    ws.json(&["run", "plan.json"], 1);
    let report = ws.json(&["repair", "T1", "--instruction", "try again"], 5);
    let way_out = "`engine revise plan.json --reason \"…\" --raise max_attempts_per_task=2`";
    assert!(report["way_out"].as_str().unwrap().ends_with(way_out), "{report:#}");
    ws.json(&["revise", "plan.json", "--reason", "one more try", "--raise", "max_attempts_per_task=2", "--no-run"], 0);
    ws.write("fixed", "");
    ws.json(&["repair", "T1", "--instruction", "try again"], 0);
    assert_eq!(ws.calls("T1"), 2);

    let ws = Ws::new();
    let mut p = plan("cost", vec![sh_task("T1", "true"), sh_task("T2", "true")]);
    set(&mut p, "T1", "cost", json!(0.25));
    set(&mut p, "T2", "cost", json!(0.5));
    set(&mut p, "T2", "depends_on", json!(["T1"]));
    ws.write_plan("plan.json", &with_budgets(p, json!({"max_cost": 0.5})));
    let report = ws.json(&["run", "plan.json"], 5);
    assert!(report["way_out"].as_str().unwrap().ends_with("--raise max_cost=0.75`"), "{report:#}");
    ws.json(&["revise", "plan.json", "--reason", "worth it", "--raise", "max_cost=0.75"], 0);
    assert_eq!(ws.calls("T2"), 1);
}
