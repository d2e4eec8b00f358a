//! `ENGINE_CRASH_AFTER_COMMITS=N`: the engine SIGKILLs itself right after
//! its N-th committed write transaction — everything of commit N is in the
//! store, nothing of commit N+1 — and no provider or check ever sees the
//! variable.

use serde_json::Value;

use crate::common::{read_json_lines, Receiver};
use crate::support::kill::{self, Kill};
use crate::support::reference::Instance;

/// Each of a run's first commits writes exactly one event (goal
/// registered, run started, intent, dispatched), so after a crash at
/// commit N the log holds exactly N events.
#[test]
fn the_engine_dies_right_after_its_nth_commit() {
    let rcv = Receiver::start(&[]);
    for n in 1..=4u64 {
        let inst = Instance::new("command", &rcv, &format!("n{n}"));
        let ran = kill::run(&inst.ws, &["run", "plan.json", "--jobs", "1"], Kill::AfterCommits(n));
        assert!(ran.out.killed(), "N={n}: expected a SIGKILL\n{}", ran.out.describe());
        assert!(
            ran.out.stderr.contains(&format!("ENGINE_CRASH_AFTER_COMMITS={n}: commit {n} done")),
            "N={n}: the engine says why it died\n{}",
            ran.out.describe()
        );
        let kinds = inst.ws.event_kinds();
        let expected = ["goal_registered", "run_started", "intent_recorded", "dispatched"];
        assert_eq!(kinds, expected[..n as usize], "N={n}: the events of exactly {n} commits");
    }
}

#[test]
fn zero_or_garbage_arms_nothing() {
    let rcv = Receiver::start(&[]);
    for value in ["0", "soon"] {
        let inst = Instance::new("command", &rcv, &format!("v{value}"));
        let mut cmd = inst.ws.command(&["--json", "run", "plan.json", "--jobs", "1"]);
        cmd.env("ENGINE_CRASH_AFTER_COMMITS", value);
        let out = inst.ws.run_command(cmd);
        let stderr = out.stderr.clone();
        assert_eq!(out.exit(), Some(0), "{value}: the run goes to the end\n{stderr}");
        assert_eq!(stderr.contains("ignoring ENGINE_CRASH_AFTER_COMMITS"), value == "soon", "{stderr}");
    }
}

/// The tools log the `ENGINE_*` names they received, and the plan's
/// validations fail if a check receives one: with both test variables
/// set, the providers and checks see only their identity.
#[test]
fn crash_variables_never_reach_providers_or_checks() {
    let rcv = Receiver::start(&[]);
    for plan in ["command", "agent"] {
        let inst = Instance::new(plan, &rcv, "env");
        let mut cmd = inst.ws.command(&["--json", "run", "plan.json", "--jobs", "1"]);
        cmd.env("ENGINE_FAILPOINT", "not_a_point_anyone_hits").env("ENGINE_CRASH_AFTER_COMMITS", "100000");
        let out = inst.ws.run_command(cmd);
        let report: Value = out.json();
        assert_eq!(out.exit(), Some(0), "{plan}: {report}");
        let deliveries = read_json_lines(&inst.effects_log);
        assert_eq!(deliveries.len(), inst.tasks.len(), "{plan}: one delivery per task: {deliveries:?}");
        for d in deliveries {
            assert_eq!(d["engine_env"], serde_json::json!(["ENGINE_OPERATION_ID", "ENGINE_TRY"]), "{plan}: {d}");
        }
    }
}
