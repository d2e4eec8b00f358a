//! The e2e suite's own vocabulary over the shared harness (`support`):
//! minimal plans, a task held running until released, and the attempt rows
//! the lifecycle tests compare.

#![allow(dead_code, unused_imports)]

use serde_json::{json, Value};

pub use crate::support::workspace::arg;
pub use crate::support::*;

/// A minimal valid plan: goal `g`, one command provider `sh`, these tasks.
pub fn plan(tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "the e2e goal holds", "acceptance": [], "constraints": []},
        "providers": {"sh": {"kind": "command"}},
        "tasks": tasks,
    })
}

/// A command task with `effect: none` running `argv`.
pub fn task(task_ref: &str, argv: &[&str]) -> Value {
    json!({"ref": task_ref, "title": format!("task {task_ref}"), "provider": "sh",
           "action": {"run": argv}, "effect": "none"})
}

/// A shell snippet that waits (up to ~30 s) for the file `release` to
/// appear beside the workspace (`release`): lets a test hold a task
/// "running" exactly as long as it needs, with no fixed sleeps. Beside,
/// not in it: a file the test writes in the workspace while the task runs
/// would be the task's undeclared write.
pub const WAIT_FOR_RELEASE: &str = "i=0; while [ ! -e ../release ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done";

/// Let a task waiting in `WAIT_FOR_RELEASE` go on.
pub fn release(ws: &Ws) {
    std::fs::write(ws.root().join("release"), "").expect("write release");
}

/// An attempt row: (id, task_ref, state, try_no).
pub type Row = (i64, String, String, i64);

/// The store's attempts, oldest first.
pub fn attempts(ledger: &Ledger) -> Vec<Row> {
    ledger.attempts().into_iter().map(|a| (a.id, a.task_ref, a.state, a.try_no)).collect()
}

/// Events of `engine log --json`.
pub fn events(ws: &Ws) -> Vec<Value> {
    ws.log()
}
