//! Issue 42: a person's hold and release (`engine hold REF|--goal`,
//! `engine release`), and a person's stop that consumes no attempt.
//! Judged from the tasks' own call log, the ledger and the exit codes.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

/// Goal `held` with T0 alone (registered by a first run), then a revision
/// (recorded, not run) that adds T1, T2 and T3 (which depends on T2).
fn registered_with_more(ws: &Ws) {
    ws.write_plan("plan.json", &plan("held", vec![sh_task("T0", "true")]));
    ws.json(&["run", "plan.json"], 0);
    let mut t3 = sh_task("T3", "true");
    t3["depends_on"] = json!(["T2"]);
    let more = vec![sh_task("T0", "true"), sh_task("T1", "true"), sh_task("T2", "true"), t3];
    ws.write_plan("plan.json", &plan("held", more));
    ws.json(&["revise", "plan.json", "--reason", "three more tasks", "--no-run"], 0);
}

#[test]
fn a_held_task_and_its_dependants_wait_while_the_rest_goes_on_until_released() {
    let ws = Ws::new();
    registered_with_more(&ws);
    let held = ws.json(&["hold", "T2", "--reason", "the vendor is down until Monday"], 0);
    assert_eq!((held["act"].as_str(), held["task_ref"].as_str()), (Some("hold"), Some("T2")), "{held:#}");
    assert_eq!(held["next"], "engine release T2");
    // Holding it again records nothing new.
    let again = ws.json(&["hold", "T2", "--reason", "still down"], 0);
    assert_eq!(again["already_held"], true, "{again:#}");

    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(4, Some("HELD"));
    let report = out.json();
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3")), (1, 0, 0), "T1 ran; T2 held; T3 waits on it");
    assert_eq!(ws.attempts_of("T2").len(), 0, "no intent for a held task");
    assert_eq!(report["held"][0]["task_ref"], "T2", "{report:#}");
    assert_eq!(report["held"][0]["release"], "engine release T2", "{report:#}");
    assert_eq!(ws.task_state("T3"), "blocked");
    let (_, detail) = ws.task(2, "T3");
    assert!(detail.to_string().contains("T2 (held)"), "T3 says what it waits on: {detail}");
    let text = ws.engine(&["run", "plan.json"]);
    assert_eq!(text.code(), 4, "{}", text.describe());
    assert!(text.stdout.contains("HELD: only work a person holds is left"), "{}", text.describe());
    assert!(text.stdout.contains("held by") && text.stdout.contains("the vendor is down"), "{}", text.describe());

    // Status names the hold, who and why, and the release.
    let status = ws.json(&["status"], 0);
    assert_eq!(status["held"][0]["task_ref"], "T2", "{status:#}");
    assert_eq!(status["held"][0]["reason"], "the vendor is down until Monday");
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("held      T2") && status.stdout.contains("engine release T2"), "{}", status.stdout);

    // A person's retry of it sends nothing either.
    ws.engine_json(&["retry", "T2"]).expect(4, Some("HELD"));
    assert_eq!(ws.calls("T2"), 0);

    // Released: the next run runs T2 and T3, and keeps T1.
    ws.json(&["release", "T2"], 0);
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect_code(0);
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3")), (1, 1, 1));
    // Releasing what is not held records nothing.
    let out = ws.engine_json(&["release", "T2"]);
    out.expect_code(2);
    assert!(out.stderr.contains("is not held") || out.stdout.contains("is not held"), "{}", out.describe());
    // Both acts are on the act chain, which verify walks.
    let kinds: Vec<String> =
        ws.events().into_iter().map(|e| e.kind).filter(|k| k == "held" || k == "released").collect();
    assert_eq!(kinds, vec!["held", "released"]);
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn a_goal_hold_starts_nothing_and_a_hold_is_the_retry_peoples_by_default() {
    let ws = Ws::new();
    registered_with_more(&ws);
    ws.json(&["hold", "--goal", "--reason", "freeze during the audit"], 0);
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(4, Some("HELD"));
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3")), (0, 0, 0), "{}", out.describe());
    assert_eq!(out.json()["held"][0]["release"], "engine release --goal held");
    // A task the goal's hold covers is not released on its own.
    ws.engine_json(&["release", "T1"]).expect_code(2);
    ws.json(&["release", "--goal"], 0);
    ws.engine_json(&["run", "plan.json"]).expect_code(0);
    assert_eq!((ws.calls("T1"), ws.calls("T2"), ws.calls("T3")), (1, 1, 1));

    // `people.retry` names who may hold when `people.hold` does not.
    let ws = Ws::new();
    let mut p = plan("people", vec![sh_task("T1", "true")]);
    p["people"] = json!({"retry": ["somebody-else-entirely"]});
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let out = ws.engine_json(&["hold", "T1", "--reason", "mine"]);
    out.expect(2, Some("NOT_PERMITTED"));
    assert!(out.describe().contains("people.hold"), "{}", out.describe());
    assert!(ws.events_of("held").is_empty(), "a refused act is recorded nowhere");
}

/// A command task that counts its runs in `t1.runs` and, until `t1.release`
/// exists, writes its pid to `t1.pid` and waits.
fn stoppable_plan() -> Value {
    let script = "echo run >> t1.runs; if [ -e t1.release ]; then exit 0; fi; echo $$ > t1.pid; exec sleep 300";
    json!({
        "version": 1,
        "goal": {"id": "stops", "statement": "a person's stops are the person's", "acceptance": []},
        "budgets": {"max_attempts_per_task": 3},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "T1", "title": "waits", "provider": "sh", "effect": "local",
                   "action": {"run": ["sh", "-c", script]}, "outputs": ["t1.runs", "t1.pid"]}],
    })
}

#[test]
fn three_stops_by_a_person_consume_no_attempt_and_a_fourth_run_still_starts_the_task() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &stoppable_plan());
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130), (libc::SIGHUP, 129)] {
        let _ = std::fs::remove_file(ws.path("t1.pid"));
        let mut engine = ws.spawn_engine(&["--json", "run", "plan.json"]);
        wait_until(Duration::from_secs(30), "T1 to start and its dispatch to be recorded", || {
            std::fs::read_to_string(ws.path("t1.pid")).ok()?;
            let db = Ledger::try_open(&ws.store())?;
            db.attempts().iter().any(|a| a.state == "dispatched").then_some(())
        });
        // SAFETY: a plain syscall on the engine this test started.
        assert_eq!(unsafe { libc::kill(engine.pid(), signal) }, 0);
        engine.wait(Duration::from_secs(30)).expect_code(code);
    }
    let states: Vec<String> = ws.attempts_of("T1").into_iter().map(|a| a.state).collect();
    assert_eq!(states, vec!["cancelled"; 3], "each stop is recorded as the person's");
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_attempts_per_task"]["used"], 0, "{status:#}");

    // The fourth run still starts T1 (max_attempts_per_task is 3).
    ws.write("t1.release", "");
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect_code(0);
    let runs = std::fs::read_to_string(ws.path("t1.runs")).unwrap().lines().count();
    assert_eq!(runs, 4, "{}", out.describe());
    let last = ws.attempts_of("T1").pop().unwrap();
    assert_eq!((last.state.as_str(), last.try_no), ("succeeded", 4));
    ws.engine(&["verify"]).expect_code(0);
}

/// The reconcile path: an engine killed (SIGKILL) in the middle of T1's
/// call leaves an attempt without a receipt. T1 is idempotent, so a plain
/// run would give the lost try up and start a new one; but a person holds
/// T1 before the next run. That run still looks at the lost attempt, and
/// starts no new try of the held task, and ends `HELD`; after `engine
/// release` the next run starts T1 again.
#[test]
fn a_held_task_whose_attempt_was_lost_is_looked_at_but_not_started_again_until_released() {
    let ws = Ws::new();
    let mut p = stoppable_plan();
    p["tasks"][0]["idempotent"] = json!(true);
    ws.write_plan("plan.json", &p);
    let mut engine = ws.spawn_engine(&["--json", "run", "plan.json"]);
    let pid: i32 = wait_until(Duration::from_secs(30), "T1 to start and its dispatch to be recorded", || {
        let pid = std::fs::read_to_string(ws.path("t1.pid")).ok()?.trim().parse().ok()?;
        let db = Ledger::try_open(&ws.store())?;
        db.attempts().iter().any(|a| a.state == "dispatched").then_some(pid)
    });
    assert!(engine.kill9().killed());
    // SAFETY: a plain syscall on the task process this test's engine started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    ws.json(&["hold", "T1", "--reason", "look at it before it runs again"], 0);

    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(4, Some("HELD"));
    let runs = std::fs::read_to_string(ws.path("t1.runs")).unwrap().lines().count();
    assert_eq!(runs, 1, "the held task is not started again: {}", out.describe());
    let attempts = ws.attempts_of("T1");
    assert_eq!(attempts.len(), 1, "no new intent for a held task: {attempts:?}");
    assert_eq!(attempts[0].state, "abandoned", "the lost try was looked at and given up: {attempts:?}");
    assert_eq!(ws.events_of("rerun_after_restart").len(), 1, "the run reconciled the lost attempt");

    ws.json(&["release", "T1"], 0);
    ws.write("t1.release", "");
    ws.engine_json(&["run", "plan.json"]).expect_code(0);
    let runs = std::fs::read_to_string(ws.path("t1.runs")).unwrap().lines().count();
    assert_eq!(runs, 2, "released, the next run starts T1 again");
    ws.engine(&["verify"]).expect_code(0);
}
