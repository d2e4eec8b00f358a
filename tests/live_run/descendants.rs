//! Issue 24, hole 3: a provider's `setsid` descendant outlived a stop
//! (SIGTERM → exit 143 "cancelled", and the child still made its effect; a
//! re-run then made it twice), a takeover and a timeout; and a command that
//! exited 0 while a descendant still worked was recorded `succeeded`.
//!
//! Every provider process now runs in a cgroup of its own, which no
//! descendant can leave; where none can be made, the engine is the
//! subreaper of what its providers orphan and finds a call's processes by
//! parent and by the marks they carry (`providers::process::adopted`).
//! Each test runs twice: as the machine allows (a cgroup where one can be
//! made) and with `ENGINE_CGROUP=unavailable`, the fallback forced. Each test starts a task whose command leaves an
//! "escapee" — `setsid`, its own session and group — that waits for the
//! file `go` and then POSTs to the receiver; the test writes `go` only once
//! the engine is done with the task, so a surviving escapee *would* deliver,
//! and the receiver's own log says whether one did.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

/// How the engine under test tracks a call's processes.
#[derive(Clone, Copy, PartialEq)]
enum Tracking {
    /// As the machine allows: a cgroup where one can be made.
    Machine,
    /// `ENGINE_CGROUP=unavailable`: the subreaper and the marks.
    Marks,
}

impl Tracking {
    /// `engine ARGS` in `ws`, tracking this way.
    fn command(self, ws: &Ws, args: &[&str]) -> std::process::Command {
        let mut cmd = ws.command(args);
        if self == Tracking::Marks {
            cmd.env("ENGINE_CGROUP", "unavailable");
        }
        cmd
    }

    fn run(self, ws: &Ws, args: &[&str]) -> Out {
        ws.run_command(self.command(ws, args))
    }

    /// Does this engine get a cgroup per call?
    fn cgroups(self) -> bool {
        self == Tracking::Machine && providers::command::cgroups_unavailable().is_none()
    }
}

/// Each scenario as the machine allows, and with the fallback forced.
macro_rules! both {
    ($($name:ident => $scenario:ident;)*) => {
        mod machine { $(#[test] fn $name() { super::$scenario(super::Tracking::Machine) })* }
        mod marks { $(#[test] fn $name() { super::$scenario(super::Tracking::Marks) })* }
    };
}

both! {
    sigterm_ends_a_setsid_descendant_too => sigterm_ends_a_setsid_descendant_too;
    a_takeover_after_sigkill_ends_a_setsid_descendant => a_takeover_after_sigkill_ends_a_setsid_descendant;
    a_timeout_ends_a_setsid_descendant => a_timeout_ends_a_setsid_descendant;
    exit_0_with_a_descendant_still_running_is_not_success => exit_0_with_a_descendant_still_running_is_not_success;
    a_descendant_that_ends_within_the_grace_is_waited_for => a_descendant_that_ends_within_the_grace_is_waited_for;
}

/// The escapee: its own session, waiting for `go`, then one delivery.
fn escapee(port: u16) -> String {
    format!(
        "setsid sh -c 'while [ ! -e go ]; do sleep 0.1; done; curl -s -m 5 -o /dev/null -X POST \
         -H \"Idempotency-Key: escapee\" -H \"Engine-Try: 1\" --data \"{{}}\" http://127.0.0.1:{port}/effect' \
         > /dev/null 2>&1 < /dev/null & echo $! > escapee.pid"
    )
}

/// A plan whose one task, on its first try, leaves an escapee and then
/// `then` (a later try does nothing). Its provider runs unconfined (it
/// reaches the receiver, and nothing but its cgroup holds it: the cgroup
/// is every provider's, confined or not; `providers/tests/sandbox.rs`
/// shows the same for a confined one).
fn plan_leaving(port: u16, then: &str, extra: Value) -> Value {
    let script = format!("if [ \"$ENGINE_TRY\" = 1 ]; then {}; {then}; fi", escapee(port));
    let mut task = json!({"ref": "T1", "title": "leaves an escapee", "provider": "sh", "effect": "local",
                          "action": {"run": ["sh", "-c", script]}, "may_change": ["escapee.pid", "held"]});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        task[k] = v;
    }
    json!({"version": 1, "goal": {"id": "g", "statement": "nothing outlives its attempt"},
           "budgets": {"max_attempts_per_task": 5},
           "providers": {"sh": {"kind": "command", "sandbox": "none"}},
           "tasks": [task]})
}

/// Holds the task running until the test is done with it.
const HOLD: &str = "echo held > held; while :; do sleep 0.1; done";

fn escapee_pid(ws: &Ws) -> i32 {
    wait_until(SOON, "the escapee to start", || pid_in(ws, "escapee.pid"))
}

/// `go`, then long enough for a surviving escapee to have delivered.
fn go_and_see(ws: &Ws, rcv: &Receiver, escapee: i32) {
    ws.write("go", "");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(gone(escapee), "the escapee (pid {escapee}) still runs");
    assert!(rcv.deliveries().is_empty(), "the escapee's effect landed: {:?}", rcv.deliveries());
}

fn wait_held(ws: &Ws) {
    wait_until(SOON, "the task to hold", || {
        let db = Ledger::try_open(&ws.store())?;
        (ws.path("held").exists() && db.attempts().iter().any(|a| a.state == "dispatched")).then_some(())
    });
}

fn sigterm_ends_a_setsid_descendant_too(t: Tracking) {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan_leaving(rcv.port, HOLD, json!({})));
    let mut engine = ws.spawn(t.command(&ws, &["--json", "run", "plan.json"]));
    let pid = escapee_pid(&ws);
    let _cleanup = GroupGuard(pid);
    wait_held(&ws);
    send(engine.pid(), libc::SIGTERM);
    engine.wait(SOON).expect_code(143);
    go_and_see(&ws, &rcv, pid);
    assert_eq!(ws.ledger().attempts_of("T1")[0].state, "cancelled");
    // The next run runs the task again; the effect is never made twice.
    t.run(&ws, &["run", "plan.json"]).expect_code(0);
    assert!(rcv.deliveries().is_empty(), "{:?}", rcv.deliveries());
}

fn a_takeover_after_sigkill_ends_a_setsid_descendant(t: Tracking) {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan_leaving(rcv.port, HOLD, json!({})));
    let mut engine = ws.spawn(t.command(&ws, &["--json", "run", "plan.json"]));
    let pid = escapee_pid(&ws);
    let _cleanup = GroupGuard(pid);
    wait_held(&ws);
    let dispatched = ws.events_of("dispatched");
    engine.kill9();
    // The engine's death signal ends its direct child only: the escapee
    // lives on, in the cgroup the dispatch recorded.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!gone(pid), "the escapee is expected to outlive the engine until the takeover");
    // The takeover: the attempt was in flight (a local effect: unknown,
    // for a person to settle), and what it left is ended first.
    t.run(&ws, &["run", "plan.json"]).expect_code(3);
    go_and_see(&ws, &rcv, pid);
    let ended = ws.events_of("provider_processes_ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].2["result"]["outcome"], "ended", "{:?}", ended[0]);
    let pids = ended[0].2["result"]["pids"].as_array().cloned().unwrap_or_default();
    assert!(pids.contains(&json!(pid)), "the escapee is named among the ended: {ended:?}");
    let process = &dispatched.first().expect("the dispatch is recorded").2["process"];
    // What the dispatch recorded to find it by: its cgroup, or without one
    // the marks its call's processes carry.
    if t.cgroups() {
        assert!(process["cgroup"].is_string(), "the dispatch records the cgroup: {process}");
    } else {
        let op = &ws.ledger().attempts_of("T1")[0].operation_id;
        assert_eq!(process["marker"], json!(format!("ENGINE_OPERATION_ID={op} ENGINE_TRY=1")), "{process}");
        assert!(process.get("cgroup").is_none(), "{process}");
    }
}

fn a_timeout_ends_a_setsid_descendant(t: Tracking) {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan_leaving(rcv.port, HOLD, json!({"timeout_seconds": 2})));
    let out = t.run(&ws, &["--json", "run", "plan.json"]);
    assert_ne!(out.code(), 0, "{}", out.describe());
    let pid = escapee_pid(&ws);
    let _cleanup = GroupGuard(pid);
    go_and_see(&ws, &rcv, pid);
    assert_eq!(ws.ledger().attempts_of("T1")[0].class(), "timeout");
}

fn exit_0_with_a_descendant_still_running_is_not_success(t: Tracking) {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan_leaving(rcv.port, "exit 0", json!({})));
    let out = t.run(&ws, &["--json", "run", "plan.json"]);
    out.expect(1, None);
    let pid = escapee_pid(&ws);
    let _cleanup = GroupGuard(pid);
    go_and_see(&ws, &rcv, pid);
    let a = &ws.ledger().attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "killed", "descendants_outlived_the_command"));
    let explain = t.run(&ws, &["explain", "T1"]).stdout;
    assert!(explain.contains(&format!("(pid {pid})")), "explain names the escapee: {explain}");
    assert!(explain.contains("the engine ended them"), "{explain}");
}

/// The grace is real: a descendant that finishes its work within it is
/// part of a successful attempt (its effect lands once).
fn a_descendant_that_ends_within_the_grace_is_waited_for(t: Tracking) {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write("go", "");
    ws.write_plan("plan.json", &plan_leaving(rcv.port, "exit 0", json!({})));
    t.run(&ws, &["--json", "run", "plan.json"]).expect(0, None);
    assert_eq!(rcv.deliveries().len(), 1, "{:?}", rcv.deliveries());
    assert_eq!(ws.ledger().attempts_of("T1")[0].state, "succeeded");
}
