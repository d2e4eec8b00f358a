//! This suite's vocabulary: plans whose tasks write their pids and wait
//! until released, and the engine started with its stderr where a test can
//! read it while the run goes on.

#![allow(dead_code, unused_imports)]

use std::time::Duration;

use serde_json::{json, Value};

pub use crate::support::workspace::arg;
pub use crate::support::*;

/// How long a test waits for something the run is expected to do soon.
pub const SOON: Duration = Duration::from_secs(30);

/// A plan: goal `g` with these acceptance checks, a command provider `sh`,
/// these tasks.
pub fn plan_with(tasks: Vec<Value>, acceptance: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "the live-run goal holds", "acceptance": acceptance},
        "budgets": {"max_attempts_per_task": 5},
        "providers": {"sh": {"kind": "command"}},
        "tasks": tasks,
    })
}

pub fn plan(tasks: Vec<Value>) -> Value {
    plan_with(tasks, vec![])
}

/// A task `task_ref` with `effect` running `sh -c script`.
/// Its writes are declared: the bookkeeping files of `holding` (and the
/// `NAME.release` a test writes while it runs).
pub fn task(task_ref: &str, effect: &str, script: &str) -> Value {
    json!({"ref": task_ref, "title": format!("task {task_ref}"), "provider": "sh", "effect": effect,
           "action": {"run": ["sh", "-c", script]},
           "may_change": ["*.pid", "*.runs", "*.child", "*.release"]})
}

/// A script that counts its runs in `NAME.runs`, starts a background child
/// (its pid in `NAME.child`) and writes its own pid to `NAME.pid` last (so a
/// test that sees that file sees the script ready), then waits — unless the
/// file `NAME.release` exists: then it exits 0 at once.
///
/// With `ignore_term` the leader ignores SIGTERM (set after the child
/// started, so the child still dies of it) and waits in a loop that only
/// SIGKILL ends; otherwise it waits for the child.
pub fn holding(name: &str, ignore_term: bool) -> String {
    let wait = if ignore_term {
        "trap '' TERM; echo $$ > {name}.pid; while :; do sleep 1; done"
    } else {
        "echo $$ > {name}.pid; wait"
    };
    let wait = wait.replace("{name}", name);
    format!("echo run >> {name}.runs; if [ -e {name}.release ]; then exit 0; fi; sleep 300 & echo $! > {name}.child; {wait}")
}

/// A pid a script wrote, once it is there.
pub fn pid_in(ws: &Ws, file: &str) -> Option<i32> {
    std::fs::read_to_string(ws.path(file)).ok()?.trim().parse().ok()
}

/// How many times a `holding` script ran.
pub fn runs(ws: &Ws, name: &str) -> usize {
    std::fs::read_to_string(ws.path(&format!("{name}.runs"))).map_or(0, |s| s.lines().count())
}

/// Wait until `NAME.pid` and `NAME.child` exist and the ledger records
/// the attempt as dispatched: (leader, child).
pub fn wait_started(ws: &Ws, name: &str) -> (i32, i32) {
    wait_until(SOON, &format!("{name} to start and its dispatch to be recorded"), || {
        let pids = (pid_in(ws, &format!("{name}.pid"))?, pid_in(ws, &format!("{name}.child"))?);
        let db = Ledger::try_open(&ws.store())?;
        db.attempts().iter().any(|a| a.state == "dispatched").then_some(pids)
    })
}

/// Send `signal` to `pid` (the engine alone: never its providers' groups).
pub fn send(pid: i32, signal: i32) {
    // SAFETY: plain syscall on a pid this test started.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
}

/// The process group of a live pid.
pub fn pgid(pid: i32) -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::getpgid(pid) }
}

/// Wait until `pid` is gone (dead, or a zombie: it runs no more).
pub fn wait_gone(pid: i32, what: &str) {
    wait_until(SOON, &format!("{what} (pid {pid}) to be gone"), || gone(pid).then_some(()));
}

/// `engine log --json`'s events of `kind`: (task ref, data).
pub fn events_of(ws: &Ws, kind: &str) -> Vec<(Option<String>, Value)> {
    ws.events_of(kind).into_iter().map(|(task, _, data)| (task, data)).collect()
}
