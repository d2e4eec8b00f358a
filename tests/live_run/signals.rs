//! Issue 12, item 1: SIGINT, SIGTERM and SIGHUP sent to the engine process
//! alone (its providers run in process groups of their own, so a
//! terminal's Ctrl-C reaches only the engine) stop the run: the providers'
//! own pids are gone afterwards, the ledger says `cancelled` (or
//! `effect_unknown` for an external effect that may have left), the lease
//! is given back, the exit code is 130 / 143 / 129, and the next plain run
//! runs a cancelled task with effect `none` or `local` again.

use serde_json::Value;

use super::common::*;

/// Start `engine --json run plan.json --progress plain` in the background.
fn spawn_run(ws: &Ws) -> Running {
    ws.spawn_engine(&["--json", "run", "plan.json", "--jobs", "2", "--progress", "plain"])
}

/// The one event of `kind`'s data.
fn the_event(ws: &Ws, kind: &str) -> Value {
    let all = events_of(ws, kind);
    assert_eq!(all.len(), 1, "{kind}: {all:?}");
    all[0].1.clone()
}

/// Evidence of `kind` of an attempt.
fn evidence_of(ws: &Ws, attempt_id: i64, kind: &str) -> Vec<Value> {
    ws.ledger().evidence(attempt_id).into_iter().filter(|(_, k, _)| k == kind).map(|(_, _, d)| d).collect()
}

#[test]
fn sigint_ends_the_provider_group_records_cancelled_and_the_next_run_runs_it_again() {
    let ws = Ws::new();
    let after = task("T2", "none", "true");
    let mut after = after;
    after["depends_on"] = serde_json::json!(["T1"]);
    ws.write_plan("plan.json", &plan(vec![task("T1", "local", &holding("t1", false)), after]));

    let mut engine = spawn_run(&ws);
    let (leader, child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);
    // The provider and its child are in a group of their own, not the
    // engine's: a signal to the engine's group would not reach them.
    assert_eq!(pgid(leader), leader);
    assert_eq!(pgid(child), leader);
    assert_ne!(pgid(engine.pid()), leader);

    send(engine.pid(), libc::SIGINT);
    let out = engine.wait(SOON);
    out.expect_code(130);
    wait_gone(leader, "the provider");
    wait_gone(child, "the provider's child");

    // The report says what the stop did, and how to go on.
    let report = out.json();
    assert_eq!(report["exit_code"], 130, "{report}");
    assert_eq!(report["stopped"]["signal"], "SIGINT", "{report}");
    assert_eq!(report["stopped"]["cancelled"], serde_json::json!(["T1"]), "{report}");
    assert_eq!(report["stopped"]["next"], "engine run plan.json", "{report}");
    assert!(report.get("code").is_none(), "a person's stop is not an error code: {report}");
    assert!(out.stderr.contains("T1 started") && out.stderr.contains("SIGINT: stopping"), "{}", out.describe());

    // The ledger: the attempt and its task cancelled (not failed), T2 never
    // started, the lease given back, the store whole.
    let db = ws.ledger();
    let attempts = db.attempts();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!((attempts[0].state.as_str(), attempts[0].class()), ("cancelled", ""), "{attempts:?}");
    assert_eq!(db.task_state("T1"), "cancelled");
    assert_eq!(db.task_state("T2"), "pending");
    assert_eq!(db.goal_state(), "open");
    assert_eq!(db.lease().pid, None, "the lease is given back");
    let stopped = evidence_of(&ws, attempts[0].id, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!((stopped[0]["signal"].as_str(), stopped[0]["end"].as_str()), (Some("SIGINT"), Some("terminated")));
    assert_eq!(the_event(&ws, "run_stopping")["signal"], "SIGINT");
    assert_eq!(the_event(&ws, "attempt_cancelled")["end"], "terminated");
    assert_eq!(the_event(&ws, "run_stopped")["cancelled"], serde_json::json!(["T1"]));
    ws.engine(&["verify"]).expect_code(0);

    // The report shows the cancelled task and attempt, and what it claims.
    let page = ws.root().join("report.html");
    ws.engine(&["report", "--html", arg(&page)]).expect_code(0);
    let page = std::fs::read_to_string(page).expect("report page");
    assert!(page.contains("st-cancelled") && page.contains("as-cancelled"), "the report styles cancelled");
    assert!(page.contains("a person stopped the run while it was in flight"), "the legend says what it claims");

    // The next plain run runs T1 again (a new try), and the goal is met.
    ws.write("t1.release", "");
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect_code(0);
    assert_eq!(runs(&ws, "t1"), 2, "T1 ran again");
    let t1: Vec<(String, i64)> = ws.attempts_of("T1").into_iter().map(|a| (a.state, a.try_no)).collect();
    assert_eq!(t1, vec![("cancelled".to_string(), 1), ("succeeded".to_string(), 2)]);
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn sigterm_exits_143_and_sighup_129_and_both_cancel() {
    for (signal, name, code) in [(libc::SIGTERM, "SIGTERM", 143), (libc::SIGHUP, "SIGHUP", 129)] {
        let ws = Ws::new();
        ws.write_plan("plan.json", &plan(vec![task("T1", "none", &holding("t1", false))]));
        let mut engine = spawn_run(&ws);
        let (leader, child) = wait_started(&ws, "t1");
        let _cleanup = GroupGuard(leader);
        send(engine.pid(), signal);
        let out = engine.wait(SOON);
        out.expect_code(code);
        wait_gone(leader, "the provider");
        wait_gone(child, "the provider's child");
        assert_eq!(out.json()["stopped"]["signal"], name, "{}", out.describe());
        assert_eq!(ws.ledger().task_state("T1"), "cancelled", "{name}");
        assert_eq!(ws.attempts()[0].state, "cancelled", "{name}");
        ws.write("t1.release", "");
        ws.engine_json(&["run", "plan.json"]).expect_code(0);
        assert_eq!(runs(&ws, "t1"), 2, "{name}: the effect-none task ran again");
    }
}

#[test]
fn an_external_call_that_may_have_left_is_effect_unknown_and_never_sent_again() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("X", "external", &holding("x", false))]));
    let mut engine = spawn_run(&ws);
    let (leader, child) = wait_started(&ws, "x");
    let _cleanup = GroupGuard(leader);
    send(engine.pid(), libc::SIGINT);
    let out = engine.wait(SOON);
    out.expect_code(130);
    wait_gone(leader, "the provider");
    wait_gone(child, "the provider's child");

    let a = &ws.attempts()[0];
    assert_eq!((a.state.as_str(), a.unknown_reason.as_deref()), ("effect_unknown", Some("stopped_after_dispatch")));
    assert_eq!(ws.ledger().task_state("X"), "effect_unknown");
    assert_eq!(ws.ledger().goal_state(), "needs_settlement");
    let report = out.json();
    assert_eq!(report["unknown"][0]["reason"], "stopped_after_dispatch", "{report}");

    // The next plain run sends nothing: a person settles first.
    ws.write("x.release", "");
    ws.engine_json(&["run", "plan.json"]).expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(runs(&ws, "x"), 1, "an external effect is never re-sent on the engine's word");
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn a_second_signal_skips_the_grace_but_still_kills_the_group() {
    let ws = Ws::new();
    // The leader ignores SIGTERM: only SIGKILL ends it.
    ws.write_plan("plan.json", &plan(vec![task("T1", "local", &holding("t1", true))]));
    let mut engine = spawn_run(&ws);
    let (leader, child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);
    send(engine.pid(), libc::SIGINT);
    // The stop began (recorded), and the grace holds: the leader that
    // ignores SIGTERM still runs, and so does the engine.
    wait_until(SOON, "the stop to begin", || {
        let db = Ledger::try_open(&ws.store())?;
        db.event_kinds().iter().any(|k| k == "run_stopping").then_some(())
    });
    wait_gone(child, "the child that took SIGTERM");
    assert!(!gone(leader), "the leader ignores SIGTERM: the grace is not over");
    assert!(engine.alive(), "the engine waits out the grace");

    send(engine.pid(), libc::SIGINT);
    let out = engine.wait(SOON);
    out.expect_code(130);
    wait_gone(leader, "the provider that ignored SIGTERM");
    let report = out.json();
    assert_eq!(report["stopped"]["grace_cut"], true, "{report}");
    assert_eq!(the_event(&ws, "attempt_cancelled")["end"], "killed");
    assert_eq!(the_event(&ws, "run_stopped")["grace_cut"], true);
    assert!(out.stderr.contains("SIGKILL to 1 process group (second signal)"), "{}", out.describe());
}

#[test]
fn a_provider_that_ignores_sigterm_is_killed_when_the_grace_runs_out() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("T1", "none", &holding("t1", true))]));
    let mut engine = spawn_run(&ws);
    let (leader, _child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);
    send(engine.pid(), libc::SIGTERM);
    let out = engine.wait(SOON);
    out.expect_code(143);
    wait_gone(leader, "the provider that ignored SIGTERM");
    assert_eq!(out.json()["stopped"]["grace_cut"], false);
    assert_eq!(the_event(&ws, "attempt_cancelled")["end"], "killed");
    assert!(out.stderr.contains("(grace over)"), "{}", out.describe());
}

#[test]
fn validations_in_flight_are_stopped_not_failed_and_the_next_run_judges_the_receipt() {
    let ws = Ws::new();
    let mut t = task("T1", "local", "echo run >> t1.runs");
    // The validation holds until released (then it passes).
    t["validations"] = serde_json::json!([{"id": "V1", "run": ["sh", "-c", holding("v1", false)], "expect_exit": 0}]);
    ws.write_plan("plan.json", &plan(vec![t]));
    let mut engine = spawn_run(&ws);
    let (leader, child) =
        wait_until(SOON, "the validation to start", || Some((pid_in(&ws, "v1.pid")?, pid_in(&ws, "v1.child")?)));
    let _cleanup = GroupGuard(leader);
    send(engine.pid(), libc::SIGINT);
    let out = engine.wait(SOON);
    out.expect_code(130);
    wait_gone(leader, "the validation");
    wait_gone(child, "the validation's child");

    // The provider's answer is kept (receipt_recorded), nothing failed, no
    // validation result was recorded: the task is cancelled.
    let a = ws.attempts()[0].clone();
    assert_eq!((a.state.as_str(), a.class()), ("receipt_recorded", ""), "{a:?}");
    assert!(ws.ledger().check_results().is_empty(), "a stopped validation is neither a pass nor a failure");
    assert_eq!(ws.ledger().task_state("T1"), "cancelled");
    let stopped = evidence_of(&ws, a.id, "stopped");
    assert_eq!((stopped[0]["what"].as_str(), stopped[0]["check_id"].as_str()), (Some("validation"), Some("V1")));
    assert_eq!(the_event(&ws, "validations_stopped")["validations"], serde_json::json!(["V1"]));
    ws.engine(&["verify"]).expect_code(0);

    // The next run judges the kept receipt: the provider is not called again.
    ws.write("v1.release", "");
    ws.engine_json(&["run", "plan.json"]).expect_code(0);
    assert_eq!(runs(&ws, "t1"), 1, "the provider ran once");
    let all = ws.attempts();
    assert_eq!((all.len(), all[0].state.as_str()), (1, "succeeded"), "{all:?}");
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn acceptance_checks_in_flight_are_stopped_not_failed() {
    let ws = Ws::new();
    let check = serde_json::json!({"id": "A1", "statement": "holds",
        "check": {"run": ["sh", "-c", holding("a1", false)], "expect_exit": 0}});
    ws.write_plan("plan.json", &plan_with(vec![task("T1", "none", "true")], vec![check]));
    let mut engine = spawn_run(&ws);
    let (leader, child) =
        wait_until(SOON, "the acceptance check to start", || Some((pid_in(&ws, "a1.pid")?, pid_in(&ws, "a1.child")?)));
    let _cleanup = GroupGuard(leader);
    send(engine.pid(), libc::SIGHUP);
    let out = engine.wait(SOON);
    out.expect_code(129);
    wait_gone(leader, "the acceptance check");
    wait_gone(child, "the acceptance check's child");
    let report = out.json();
    assert_eq!(report["stopped"]["acceptance_stopped"], serde_json::json!(["A1"]), "{report}");
    assert_eq!(report["goal_state"], "open", "not failed: {report}");
    assert!(ws.ledger().check_results().is_empty(), "a stopped acceptance check is neither a pass nor a failure");

    ws.write("a1.release", "");
    ws.engine_json(&["run", "plan.json"]).expect_code(0);
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn a_stopped_repair_leaves_the_failure_it_was() {
    let ws = Ws::new();
    // Fails on its first try; a repair holds until stopped.
    let script = format!("if [ -e failed.once ]; then {}; else touch failed.once; exit 3; fi", holding("r", false));
    let mut t1 = task("T1", "local", &script);
    t1["may_change"].as_array_mut().expect("the helper's list").push(serde_json::json!("failed.once"));
    ws.write_plan("plan.json", &plan(vec![t1]));
    ws.engine_json(&["run", "plan.json"]).expect_code(1);
    let mut engine = ws.spawn_engine(&["--json", "repair", "T1", "--force", "--note", "try again"]);
    let (leader, _) =
        wait_until(SOON, "the repair to start", || Some((pid_in(&ws, "r.pid")?, pid_in(&ws, "r.child")?)));
    let _cleanup = GroupGuard(leader);
    send(engine.pid(), libc::SIGINT);
    let out = engine.wait(SOON);
    out.expect_code(130);
    wait_gone(leader, "the repair's provider");
    // The way on is the repair again (with --force: the failure is
    // provider_rejected), not a plain run.
    assert_eq!(out.json()["stopped"]["next"], "engine repair T1 --force --note \"…\"", "{}", out.describe());
    let states: Vec<String> = ws.attempts_of("T1").into_iter().map(|a| a.state).collect();
    assert_eq!(states, vec!["failed", "cancelled"]);
    // A plain run never re-runs a failed task: the repair is asked again.
    assert_eq!(ws.ledger().task_state("T1"), "failed");
    ws.engine_json(&["run", "plan.json"]).expect_code(1);
    assert_eq!(ws.attempts_of("T1").len(), 2, "the plain run sent nothing");
}

#[test]
fn an_mcp_task_in_flight_is_cancelled_at_the_server_and_its_effect_never_happens() {
    let ws = Ws::new();
    let server = mcp_server_command(&ws.mcp_log(), &["--tasks"]);
    let plan = serde_json::json!({
        "version": 1,
        "goal": {"id": "g", "statement": "rendered", "acceptance": []},
        "providers": {"tools": {"kind": "mcp", "command": server, "observe_tool": "operation_status"}},
        "tasks": [{"ref": "M", "title": "render later", "provider": "tools", "effect": "external",
                   "action": {"tool": "render_later", "arguments": {"doc": "M", "ms": 4000}}}],
    });
    ws.write_plan("plan.json", &plan);
    let mut engine = spawn_run(&ws);
    wait_until(SOON, "the call to be dispatched", || {
        let db = Ledger::try_open(&ws.store())?;
        db.attempts().iter().any(|a| a.state == "dispatched").then_some(())
    });
    // The server answers `tools/call` with its task id at once; give the
    // answer a moment to arrive.
    std::thread::sleep(std::time::Duration::from_millis(500));
    send(engine.pid(), libc::SIGINT);
    let out = engine.wait(SOON);
    out.expect_code(130);
    let a = &ws.attempts()[0];
    let detail = format!("{a:?}\n{}", out.describe());
    // `tasks/cancel` reached the server, which cancelled the task; the
    // target, observed, shows no effect: cancelled, not unknown.
    assert_eq!(a.state, "cancelled", "{detail}");
    assert_eq!(ws.ledger().task_state("M"), "cancelled", "{detail}");
    let stopped = evidence_of(&ws, a.id, "stopped");
    assert_eq!(stopped[0]["end"], "cancel_asked", "{stopped:?}");
    assert_eq!(evidence_of(&ws, a.id, "observation").len(), 1, "the target was observed before `cancelled`");
    // Past the moment the task would have done its effect.
    std::thread::sleep(std::time::Duration::from_millis(4000));
    assert!(ws.mcp_deliveries().is_empty(), "the cancelled task did its effect: {detail}");
}
