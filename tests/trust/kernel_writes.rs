//! Issue 36: a task writes only what it declares, held by the kernel where
//! it can be. A confined command's process may write of the workspace only
//! the smallest existing hierarchy covering each declared output (Landlock):
//! a file it writes and puts back within one attempt, unseen by the check
//! after the attempt, is refused at the write; `.git` and the plan file are
//! never writable. A line the kernel cannot grant narrowly (a top-level
//! file not made yet) gives the workspace as before, and the attempt says
//! that output is held only by the check after it. Judged from the files.

use serde_json::{json, Value};

use crate::support::*;

/// Tries each write, restoring what it changed, and logs in its declared
/// output folder whether the kernel let it.
const MEDDLER: &str = r#"
try() { if ( eval "$2" ) 2>>out/errors; then echo "$1 written" >> out/log; else echo "$1 refused" >> out/log; fi; }
echo result > out/r.txt
try keep 'cp keep.txt "${TMPDIR:-/tmp}/k$$" && echo evil > keep.txt && cp "${TMPDIR:-/tmp}/k$$" keep.txt'
try git 'echo "[core] fsmonitor = evil" >> .git/config'
try plan 'echo " " >> plan.json'
try scratch 'echo x > scratch.txt && rm scratch.txt'
try deep 'mkdir -p sub && echo x > sub/x.txt && rm -r sub'
true
"#;

fn plan() -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "the work is done", "acceptance": []},
        "budgets": {"max_attempts_per_task": 1},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [
            {"ref": "T1", "title": "T1", "provider": "sh", "effect": "local",
             "action": {"run": ["sh", "-c", MEDDLER]}, "outputs": ["out/**"]},
            {"ref": "T2", "title": "T2", "provider": "sh", "effect": "local", "depends_on": ["T1"],
             "action": {"run": ["sh", "-c", "echo r > report.txt"]}, "outputs": ["report.txt"]},
        ],
    })
}

fn writes(status: &Value, task_ref: &str) -> Value {
    let tasks = status["tasks"].as_array().expect("tasks");
    let t = tasks.iter().find(|t| t["ref"] == task_ref).expect("the task");
    t["last_attempt"]["sandbox"]["writes"].clone()
}

#[test]
fn the_kernel_refuses_what_a_task_does_not_declare_even_when_put_back() {
    let ws = Ws::outside_temp();
    std::fs::create_dir_all(ws.path("out")).unwrap();
    std::fs::create_dir_all(ws.path(".git")).unwrap();
    std::fs::write(ws.path(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.path("keep.txt"), "original\n").unwrap();
    ws.write_plan("plan.json", &plan());
    let plan_before = ws.read("plan.json");
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(0, None);
    // The declared output was written; everything else was refused at the
    // write (not found after the fact: nothing changed to find).
    assert_eq!(ws.read("out/r.txt"), "result\n");
    let log = ws.read("out/log");
    for what in ["keep", "git", "plan", "scratch", "deep"] {
        assert!(log.contains(&format!("{what} refused")), "{what} was not refused by the kernel:\n{log}");
    }
    assert!(ws.read("out/errors").contains("Permission denied"), "{}", ws.read("out/errors"));
    assert_eq!(ws.read("keep.txt"), "original\n");
    assert_eq!(ws.read(".git/config"), "[core]\n");
    assert_eq!(ws.read("plan.json"), plan_before);
    assert!(!ws.path("scratch.txt").exists() && !ws.path("sub").exists());
    // What each attempt recorded: T1 held by the kernel beneath out/; T2's
    // top-level file not made yet: the whole workspace, held only after.
    let status = ws.json(&["status"], 0);
    assert_eq!(
        writes(&status, "T1"),
        json!({"by": "kernel", "rules": [{"output": "out/**", "path": "out"}]}),
        "{status}"
    );
    let t2 = writes(&status, "T2");
    assert_eq!((&t2["by"], &t2["after_attempt"][0]["output"]), (&json!("after_attempt"), &json!("report.txt")), "{t2}");
    assert_eq!(ws.read("report.txt"), "r\n");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(
        explain.stdout.contains(r#"workspace writes: only out (for "out/**"), by the kernel"#),
        "{}",
        explain.stdout
    );
    let explain = ws.engine(&["explain", "T2"]);
    assert!(
        explain.stdout.contains(r#"workspace writes: the whole workspace, checked after the attempt; "report.txt" checked after the attempt only: a top-level path"#),
        "{}",
        explain.stdout
    );
}

#[test]
fn without_landlock_the_attempt_says_its_outputs_were_held_after_it_only() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("out")).unwrap();
    let mut p = plan();
    p["tasks"] = json!([p["tasks"][1].clone()]);
    p["tasks"][0]["depends_on"] = json!([]);
    p["tasks"][0]["outputs"] = json!(["out/**"]);
    p["tasks"][0]["action"] = json!({"run": ["sh", "-c", "echo r > out/r.txt"]});
    ws.write_plan("plan.json", &p);
    let out = ws.engine_env(&["run", "plan.json", "--json"], &[("ENGINE_SANDBOX", "unavailable")]);
    out.expect(0, None);
    let status = ws.json(&["status"], 0);
    let w = writes(&status, "T2");
    assert_eq!(w["by"], "after_attempt", "{w}");
    assert!(
        w["after_attempt"][0]["why"].as_str().unwrap_or_default().contains("the kernel confines nothing here"),
        "{w}"
    );
}
