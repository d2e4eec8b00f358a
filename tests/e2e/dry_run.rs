//! Issue 42: `engine run PLAN --dry-run` says what a run would do, task by
//! task, and does none of it: judged by the receiver's own delivery log
//! (no request reached it), a command task's marker file (no process ran)
//! and the store's bytes before and after (nothing written).
//!
//! The store's `engine.db` and `engine.db-wal` are compared byte for byte.
//! `engine.db-shm` is not: it is SQLite's shared-memory index of the WAL,
//! which every reader maps and may rewrite (a reader's lock marks and
//! read marks live there); it holds no ledger data and is rebuilt from the
//! WAL when lost.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::outcomes::*;

/// T1 writes a marker file (a process ran); T2, after it, posts to the
/// receiver (an external effect); T3 is paid and always asks a person.
fn dry_plan(rcv: &Receiver) -> Value {
    let t1 = json!({"ref": "T1", "title": "mark", "provider": "sh", "effect": "local",
        "action": {"run": ["sh", "-c", "echo ran >> ran-T1"]}, "outputs": ["ran-T1"], "inputs": ["in.txt"]});
    let mut t2 = http_task("T2", "external");
    t2["depends_on"] = json!(["T1"]);
    let t3 = json!({"ref": "T3", "title": "paid", "provider": "sh", "effect": "local", "cost": 1.5,
        "requires_approval": true, "action": {"run": ["sh", "-c", "touch ran-T3"]}, "outputs": ["ran-T3"]});
    let mut p = plan("dry", json!({"r": http_provider(rcv, false), "sh": {"kind": "command"}}), vec![t1, t2, t3]);
    p["budgets"] = json!({"max_attempts_per_task": 3, "max_revisions": 3, "max_provider_calls": 10,
        "max_cost": 10, "deadline_seconds": 600});
    p
}

fn line<'a>(dry: &'a Value, task_ref: &str) -> &'a Value {
    dry["tasks"].as_array().unwrap().iter().find(|t| t["task_ref"] == task_ref).unwrap()
}

fn verdicts(dry: &Value) -> Vec<(String, String)> {
    let tasks = dry["tasks"].as_array().unwrap();
    tasks.iter().map(|t| (t["task_ref"].as_str().unwrap().into(), t["verdict"].as_str().unwrap().into())).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// The store's file and its write-ahead log, as bytes.
fn store_bytes(store: &Path) -> (Vec<u8>, Option<Vec<u8>>) {
    let wal = PathBuf::from(format!("{}-wal", store.display()));
    (std::fs::read(store).expect("the store file"), std::fs::read(wal).ok())
}

#[test]
fn a_dry_run_says_what_a_run_would_do_and_starts_sends_and_writes_nothing() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &dry_plan(&rcv));
    ws.write("in.txt", "first");

    // No store yet: every task would run (T2 after T1), T3 waits on a person.
    let dry = ws.json(&["run", "plan.json", "--dry-run"], 0);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["revision"], Value::Null, "{dry:#}");
    assert_eq!(
        verdicts(&dry),
        pairs(&[("T1", "would run"), ("T2", "would run"), ("T3", "would wait for approval")]),
        "{dry:#}"
    );
    assert_eq!((line(&dry, "T1")["provider_calls"].as_u64(), dry["provider_calls"].as_u64()), (Some(1), Some(2)));
    assert_eq!(line(&dry, "T3")["cost"], 1.5, "the approval's cost is named: {dry:#}");
    assert!(!ws.path("ran-T1").exists(), "no process ran");
    assert!(rcv.deliveries().is_empty(), "nothing reached the receiver");
    assert!(!ws.store().exists() && !ws.store_dir().exists(), "no store was made");

    // A real run: T1 and T2 run, T3 waits for its approval.
    ws.engine_json(&["run", "plan.json"]).expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!((rcv.deliveries().len(), runs_of_t1(&ws)), (1, 1));

    // Against the store: T1 and T2 kept, T3 still waits; nothing done.
    let before = store_bytes(&ws.store());
    let dry = ws.json(&["run", "plan.json", "--dry-run"], 0);
    assert_eq!(dry["revision"], 1, "{dry:#}");
    assert_eq!(verdicts(&dry), pairs(&[("T1", "kept"), ("T2", "kept"), ("T3", "would wait for approval")]), "{dry:#}");
    assert_eq!(dry["provider_calls"], 0, "{dry:#}");
    assert_eq!(dry["budgets"]["max_provider_calls"]["used"], 2, "{dry:#}");
    let text = ws.engine(&["run", "plan.json", "--dry-run"]);
    text.expect_code(0);
    assert!(text.stdout.contains("a dry run: nothing was started, sent or written"), "{}", text.stdout);
    assert!(text.stdout.contains("would wait for approval") && text.stdout.contains("cost 1.5"), "{}", text.stdout);
    assert_eq!(store_bytes(&ws.store()), before, "the store's bytes are what they were");
    assert_eq!((rcv.deliveries().len(), runs_of_t1(&ws)), (1, 1), "no request, no process");

    // A hold is a blocker, named; an input that changed makes T1 run again
    // (the run's own reuse decision), and T2 with it.
    ws.json(&["hold", "T3", "--reason", "the budget review"], 0);
    ws.write("in.txt", "second");
    let before = store_bytes(&ws.store());
    let dry = ws.json(&["run", "plan.json", "--dry-run"], 0);
    assert_eq!(verdicts(&dry), pairs(&[("T1", "would run"), ("T2", "kept"), ("T3", "blocked")]), "{dry:#}");
    assert!(line(&dry, "T1")["why"].as_str().unwrap().contains("CHECKPOINT_CHANGED"), "{dry:#}");
    assert_eq!(dry["provider_calls"], 1, "{dry:#}");
    assert!(line(&dry, "T3")["why"].as_str().unwrap().contains("held by"), "{dry:#}");
    assert_eq!(store_bytes(&ws.store()), before, "the store's bytes are what they were");
    assert_eq!((rcv.deliveries().len(), runs_of_t1(&ws)), (1, 1), "no request, no process");
    ws.engine(&["verify"]).expect_code(0);
}

/// How many times T1's process ran (it appends a line each time).
fn runs_of_t1(ws: &Ws) -> usize {
    std::fs::read_to_string(ws.path("ran-T1")).map_or(0, |s| s.lines().count())
}
