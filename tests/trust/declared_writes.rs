//! Issue 36, cases 2 and 3: a task writes only what it declares. Real
//! processes change the workspace; what the engine says is judged against
//! the file system. An agent that rewrites the check that judges it, a
//! task that points `.git/commondir` elsewhere or runs `git init` in a
//! sub-folder, a file nobody declared: each fails `constraint_violated`,
//! rule `undeclared_write`, naming the path. What a check's interpreter
//! writes for itself (`__pycache__`, `.pytest_cache`) is not a task's
//! change.

use std::process::Command;

use serde_json::{json, Value};

use crate::support::*;

fn plan(tasks: Vec<Value>, acceptance: Value) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "the work is done", "acceptance": [acceptance]},
        "budgets": {"max_attempts_per_task": 1},
        "providers": {"sh": {"kind": "command"}},
        "tasks": tasks,
    })
}

fn qa_true() -> Value {
    json!({"id": "A1", "statement": "QA", "check": {"run": ["true"], "expect_exit": 0}})
}

fn sh_task(task_ref: &str, script: &str, outputs: Value) -> Value {
    json!({"ref": task_ref, "title": task_ref, "provider": "sh", "effect": "local",
           "action": {"run": ["sh", "-c", script]}, "outputs": outputs})
}

/// The one undeclared-write evidence of `task_ref`'s only attempt, after
/// checking its class and rule.
fn undeclared(ws: &Ws, task_ref: &str) -> Value {
    let attempts = ws.attempts_of(task_ref);
    let a = attempts.last().expect("an attempt");
    assert_eq!((a.class(), a.rule()), ("constraint_violated", "undeclared_write"), "{a:?}");
    let evidence = ws.evidence(a.id);
    let found = evidence.iter().find(|(_, kind, _)| kind == "undeclared_write").expect("the evidence");
    found.2.clone()
}

fn paths(evidence: &Value) -> Vec<String> {
    let changes = evidence["changes"].as_array().expect("changes");
    changes.iter().map(|c| c["path"].as_str().unwrap_or_default().to_string()).collect()
}

fn git(ws: &Ws, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(ws.path("")).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_file_the_task_does_not_declare_fails_it_naming_the_path_and_the_outputs_line() {
    let ws = Ws::new();
    let script = "echo a > out.txt; echo b > notes.txt; mkdir -p d; echo c > d/e.txt";
    ws.write_plan("plan.json", &plan(vec![sh_task("T1", script, json!(["out.txt"]))], qa_true()));
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(1, None);
    assert_eq!(out.json()["goal_state"], "failed", "{}", out.describe());
    let e = undeclared(&ws, "T1");
    assert_eq!(paths(&e), vec!["d/e.txt", "notes.txt"], "{e}");
    assert_eq!(e["changes"][0]["before"], Value::Null, "created: no digest before");
    assert_eq!(e["outputs"], json!(["out.txt", "d/e.txt", "notes.txt"]), "the exact line to put");
    // The files are there (judged from the file system, not the claim).
    assert_eq!(ws.read("notes.txt"), "b\n");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(
        explain.stdout.contains("created notes.txt")
            && explain.stdout.contains(r#""outputs": ["out.txt","d/e.txt","notes.txt"]"#)
            && explain.stdout.contains("engine revise plan.json"),
        "{}",
        explain.describe()
    );
    // Declared, the same work passes.
    let mut p = plan(vec![sh_task("T1", script, e["outputs"].clone())], qa_true());
    p["budgets"]["max_attempts_per_task"] = json!(2);
    ws.write_plan("plan.json", &p);
    ws.engine_json(&["revise", "plan.json", "--reason", "declare what T1 writes", "--approve-loosening"])
        .expect(0, None);
    let status = ws.json(&["status"], 0);
    assert_eq!(ws.task_state("T1"), "succeeded", "{status:#}");
}

#[test]
fn a_changed_or_removed_file_is_named_and_the_list_is_capped() {
    let ws = Ws::new();
    ws.write("keep.txt", "k");
    ws.write("gone.txt", "g");
    let script = "echo changed > keep.txt; rm gone.txt; mkdir many; for i in $(seq 1 60); do echo $i > many/f$i; done";
    ws.write_plan("plan.json", &plan(vec![sh_task("T1", script, json!([]))], qa_true()));
    ws.engine_json(&["run", "plan.json"]).expect(1, None);
    let e = undeclared(&ws, "T1");
    let named = paths(&e);
    assert_eq!(named.len(), 50, "{e}");
    assert_eq!(e["more"], 12, "62 files in all: 50 named, 12 counted");
    let what: Vec<(&str, &str)> = e["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["path"] == "gone.txt" || c["path"] == "keep.txt")
        .map(|c| (c["path"].as_str().unwrap(), if c["after"].is_null() { "deleted" } else { "changed" }))
        .collect();
    assert_eq!(what, vec![("gone.txt", "deleted"), ("keep.txt", "changed")], "{e}");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("… and 12 more"), "{}", explain.describe());
}

/// The look after an attempt is stat-based (issue 38): a file whose size,
/// mtime, ctime, inode and device match the state it was hashed in is not
/// read again. An in-place rewrite of a settled file with the same size and
/// its mtime put back still moves the ctime, which user space cannot set:
/// the rule sees it (docs/trust.md, "How the workspace is looked at").
#[test]
fn a_same_size_rewrite_with_its_mtime_put_back_is_still_seen() {
    let ws = Ws::new();
    ws.write("keep.txt", "good\n");
    ws.write("ref.txt", "r");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for f in ["keep.txt", "ref.txt"] {
        let file = std::fs::File::options().write(true).open(ws.path(f)).expect("opens");
        file.set_modified(old).expect("mtime set");
    }
    // Past the cache's racy window (2 s) after the ctime the mtime change
    // moved: the entry
    // the look before the attempt makes is then settled on any file system,
    // so only the ctime can tell the rewrite (the reason for this 2.2 s).
    std::thread::sleep(std::time::Duration::from_millis(2_200));
    let script = "printf 'bad!\\n' > keep.txt; touch -r ref.txt keep.txt";
    // Unconfined: the kernel would refuse the write where it holds the
    // task (`trust::kernel_writes`); here only the look after it judges.
    let mut p = plan(vec![sh_task("T1", script, json!([]))], qa_true());
    p["providers"]["sh"]["sandbox"] = json!("none");
    ws.write_plan("plan.json", &p);
    ws.engine_json(&["run", "plan.json"]).expect(1, None);
    assert_eq!(ws.read("keep.txt"), "bad!\n", "rewritten in place");
    let meta = std::fs::metadata(ws.path("keep.txt")).expect("there");
    assert_eq!(meta.modified().expect("mtime"), std::fs::metadata(ws.path("ref.txt")).unwrap().modified().unwrap());
    let e = undeclared(&ws, "T1");
    assert_eq!(paths(&e), vec!["keep.txt"], "{e}");
}

/// A mode is part of what a look sees (Landlock has no right for `chmod`,
/// so only the look can catch one): a protected file's `chmod` is
/// `protected_path_changed`, an undeclared file's `undeclared_write`,
/// each naming the path; the run's words no longer say that no protected
/// path changed. Main at 714a6df let this attempt succeed.
#[test]
fn a_mode_change_is_a_change_of_a_protected_or_undeclared_file() {
    let ws = Ws::new();
    for f in ["check.sh", "data.txt"] {
        ws.write(f, "x\n");
        set_mode(&ws, f, 0o644);
    }
    let script = "chmod 755 data.txt; chmod 444 check.sh; echo x > out.txt";
    let mut p = plan(vec![sh_task("T1", script, json!(["out.txt"]))], qa_true());
    p["goal"]["constraints"] = json!([{"id": "C1", "statement": "the check is not touched", "protect": ["check.sh"]}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    assert_eq!(mode_of(&ws, "check.sh"), 0o444, "the task ran");
    let a = ws.attempts_of("T1").pop().expect("an attempt");
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "constraint_violated", "protected_path_changed"));
    let evidence = ws.evidence(a.id);
    let of = |kind: &str| evidence.iter().find(|(_, k, _)| k == kind).map(|e| paths(&e.2)).unwrap_or_default();
    assert_eq!(of("protected_path_changed"), vec!["check.sh"], "{evidence:?}");
    assert_eq!(of("undeclared_write"), vec!["data.txt"], "{evidence:?}");
    assert!(out.stdout.contains("constraint C1  VIOLATED by T1 attempt"), "{}", out.describe());
    assert!(!out.stdout.contains("no protected path changed"), "{}", out.describe());
    let explain = ws.engine(&["explain", "T1"]);
    assert!(
        explain.stdout.contains("mode 0644 -> ") && explain.stdout.contains("changed data.txt (mode 0644 -> 0755)"),
        "{}",
        explain.describe()
    );
}

/// A link and a regular file whose bytes are the text a look records of
/// the link once shared one entry: swapping one for the other went unseen
/// (both digests equal, and a link had no mode to compare). The link's
/// entry is marked now. Main at e11b53d let this attempt succeed.
#[test]
fn a_link_swapped_for_a_file_holding_its_recorded_text_is_a_change() {
    let ws = Ws::new();
    ws.write("target.txt", "t\n");
    std::os::unix::fs::symlink("target.txt", ws.path("x")).expect("a link");
    let script = "rm x; printf 'symlink:target.txt' > x; echo x > out.txt";
    let p = plan(vec![sh_task("T1", script, json!(["out.txt"]))], qa_true());
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    assert!(std::fs::symlink_metadata(ws.path("x")).expect("x").is_file(), "the task ran");
    let e = undeclared(&ws, "T1");
    assert_eq!(paths(&e), vec!["x"], "{e}");
}

/// What a task declares (`outputs`, `may_change`) may change its mode.
#[test]
fn a_declared_output_or_may_change_path_may_change_its_mode() {
    let ws = Ws::new();
    for f in ["check.sh", "out.txt"] {
        ws.write(f, "x\n");
        set_mode(&ws, f, 0o644);
    }
    let mut task = sh_task("T1", "chmod 755 out.txt; chmod 600 check.sh", json!(["out.txt"]));
    task["may_change"] = json!(["check.sh"]);
    let mut p = plan(vec![task], qa_true());
    p["goal"]["constraints"] = json!([{"id": "C1", "statement": "the check is not touched", "protect": ["check.sh"]}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!((mode_of(&ws, "out.txt"), mode_of(&ws, "check.sh")), (0o755, 0o600), "the task ran");
    assert_eq!(ws.task_state("T1"), "succeeded");
}

fn set_mode(ws: &Ws, rel: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(ws.path(rel), std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode_of(ws: &Ws, rel: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(ws.path(rel)).expect("there").permissions().mode() & 0o7777
}

/// Case 3: `.git/commondir` pointed at a folder whose `config` names a
/// program (what a person's next `git status` would run).
#[test]
fn a_task_pointing_git_commondir_elsewhere_fails_and_says_so() {
    let ws = Ws::new();
    git(&ws, &["init", "-q"]);
    let script = "mkdir -p evil && printf '[core]\\n\\tfsmonitor = touch pwned\\n' > evil/config && \
                  echo ../evil > .git/commondir";
    ws.write_plan("plan.json", &plan(vec![sh_task("T1", script, json!(["evil/**"]))], qa_true()));
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(1, None);
    assert_ne!(out.json()["goal_state"], "satisfied");
    assert_eq!(ws.read(".git/commondir"), "../evil\n", "the write happened: the engine judged it");
    let e = undeclared(&ws, "T1");
    assert_eq!(paths(&e), vec![".git/commondir"], "evil/config is declared; .git never is: {e}");
    assert_eq!(e["outputs"], Value::Null, "nothing in .git may be declared");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("never an output"), "{}", explain.describe());
    // Declaring it is refused at check, at its place.
    let p = plan(vec![sh_task("T1", "true", json!([".git/commondir"]))], qa_true());
    ws.write_plan("other.json", &p);
    let check = ws.engine_json(&["check", "other.json"]);
    check.expect(2, Some("PLAN_INVALID"));
    assert_eq!(check.json()["error"]["place"], "$.tasks[0].outputs[0]", "{}", check.describe());
    // So is the plan file itself.
    let p = plan(vec![sh_task("T1", "true", json!(["out.txt", "./other.json"]))], qa_true());
    ws.write_plan("other.json", &p);
    let check = ws.engine_json(&["check", "other.json"]);
    check.expect(2, Some("PLAN_INVALID"));
    assert_eq!(check.json()["error"]["place"], "$.tasks[0].outputs[1]", "{}", check.describe());
}

/// Case 3: `git init` in a plain folder the task may write, and the same
/// config line.
#[test]
fn a_task_running_git_init_in_a_declared_folder_fails_on_the_new_git_folder() {
    let ws = Ws::new();
    let script =
        "mkdir -p sub && echo x > sub/a.txt && git init -q sub && git -C sub config core.fsmonitor 'touch pwned'";
    ws.write_plan("plan.json", &plan(vec![sh_task("T1", script, json!(["sub"]))], qa_true()));
    ws.engine_json(&["run", "plan.json"]).expect(1, None);
    assert!(ws.read("sub/.git/config").contains("fsmonitor"), "git init ran");
    let e = undeclared(&ws, "T1");
    let named = paths(&e);
    assert!(named.contains(&"sub/.git/config".to_string()), "{named:?}");
    assert!(named.iter().all(|p| p.starts_with("sub/.git/")), "sub/a.txt is declared: {named:?}");
}

/// Case 2: the acceptance check runs `check.sh`; the agent writes `exit 0`
/// into it instead of doing the work.
#[test]
fn an_agent_rewriting_the_check_that_judges_it_fails_and_qa_never_passes() {
    let ws = Ws::new();
    ws.write("check.sh", "test -f result.txt\n");
    let acceptance = json!({"id": "A1", "statement": "the result is there",
                            "check": {"run": ["sh", "check.sh"], "expect_exit": 0}});
    let task = sh_task("T1", "echo 'exit 0' > check.sh", json!(["result.txt"]));
    ws.write_plan("plan.json", &plan(vec![task], acceptance));
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(1, None);
    let j = out.json();
    assert_eq!(j["goal_state"], "failed", "{j:#}");
    assert_eq!(paths(&undeclared(&ws, "T1")), vec!["check.sh"]);
    assert!(!ws.path("result.txt").exists(), "nothing was produced");
    let status = ws.json(&["status"], 0);
    assert_ne!(status["goal"]["state"], "satisfied", "{status:#}");
    // The acceptance check never ran against the rewritten copy.
    assert!(!ws.event_kinds().iter().any(|k| k == "acceptance_checked"), "{:?}", ws.event_kinds());
}

/// What a check writes is not the task's change: its validation leaves
/// files behind; the task wrote only its output.
#[test]
fn files_its_validation_writes_are_not_the_tasks() {
    let ws = Ws::new();
    let mut task = sh_task("T1", "echo done > out.txt", json!(["out.txt"]));
    task["validations"] = json!([{"id": "V1", "run": ["sh", "-c", "mkdir -p .pytest_cache && echo x > .pytest_cache/v && echo y > check.log"]}]);
    // Nor the next task's: the look after T1's receipt (before its
    // validation wrote) does not stand as T2's baseline.
    let mut next = sh_task("T2", "echo two > two.txt", json!(["two.txt"]));
    next["depends_on"] = json!(["T1"]);
    ws.write_plan("plan.json", &plan(vec![task, next], qa_true()));
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(0, None);
    assert_eq!(out.json()["goal_state"], "satisfied", "{}", out.describe());
    assert_eq!(ws.read("check.log"), "y\n", "the validation ran and wrote");
    assert_eq!(ws.read("two.txt"), "two\n");
}

/// The documented `protect: ["tests/**"]` with a real Python project: its
/// validation imports the tests package and the code; no `__pycache__`
/// lands in the workspace (a scratch place takes it), nothing fails.
#[test]
fn a_python_validation_leaves_no_pycache_under_protected_tests() {
    let ws = Ws::new();
    ws.write("tests/__init__.py", "");
    ws.write(
        "tests/test_money.py",
        "import unittest\nimport money\n\nclass T(unittest.TestCase):\n    def test_total(self):\n        self.assertEqual(money.total([1, 2]), 3)\n",
    );
    let mut p = plan(
        vec![json!({"ref": "T1", "title": "write money.py", "provider": "sh", "effect": "local",
                    "action": {"run": ["sh", "-c", "printf 'def total(xs):\\n    return sum(xs)\\n' > money.py"]},
                    "outputs": ["money.py"],
                    "validations": [{"id": "V1", "run": ["python3", "-m", "unittest", "-q", "tests.test_money"]}]})],
        json!({"id": "A1", "statement": "tests pass", "check": {"run": ["python3", "-m", "unittest", "-q"], "expect_exit": 0}}),
    );
    p["goal"]["constraints"] = json!([{"id": "C1", "statement": "tests are not edited", "protect": ["tests/**"]}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(0, None);
    assert_eq!(out.json()["goal_state"], "satisfied", "{}", out.describe());
    let pycache: Vec<_> = walk(&ws.path("")).into_iter().filter(|p| p.contains("__pycache__")).collect();
    assert!(pycache.is_empty(), "{pycache:?}");
}

/// Two tasks apart in the graph run side by side, each writing its own
/// declared output while the other runs: neither answers for the other's.
#[test]
fn tasks_running_side_by_side_each_answer_only_for_their_own_writes() {
    let ws = Ws::new();
    let a = sh_task("A", "sleep 0.3; echo a > a.txt; sleep 0.6", json!(["a.txt"]));
    let b = sh_task("B", "sleep 0.6; echo b > b.txt; sleep 0.3", json!(["b.txt"]));
    ws.write_plan("plan.json", &plan(vec![a, b], qa_true()));
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(0, None);
    assert_eq!((ws.read("a.txt"), ws.read("b.txt")), ("a\n".to_string(), "b\n".to_string()));
}

/// Issue 38: the workspace is walked once a task (plus the first task's
/// baseline), in a fan-out whose tasks run two at a time as in a chain:
/// the look after one attempt stands as the baseline of those started
/// while it is the last look and every call since still runs. Counted
/// from the kernel's side: `strace` sees each walk open `marker/`.
#[test]
fn a_fan_out_walks_the_workspace_once_a_task() {
    let ws = Ws::new();
    ws.write("marker/m.txt", "m");
    let n = 12;
    let tasks =
        (0..n).map(|i| sh_task(&format!("T{i}"), &format!("echo {i} > out{i}.txt"), json!([format!("out{i}.txt")])));
    ws.write_plan("plan.json", &plan(tasks.collect(), qa_true()));
    let traced = traced_run(&ws, &["run", "plan.json", "--jobs", "2"], &["-e", "trace=openat"]);
    let walks = traced.lines().filter(|l| l.contains("O_DIRECTORY") && l.contains("/marker\"")).count();
    // Main at 714a6df walked 24 here (two a task): a look stood only with
    // nothing else in flight, and a task declaring outputs took the
    // (empty) validation path, which forgot it.
    assert_eq!(walks, n + 1, "walks of the workspace for {n} tasks:\n{traced}");
}

/// No look stands while a validation's checks run beside: what they write
/// is no attempt's, so a look taken meanwhile (B's receipt) is not the
/// next attempt's baseline (C's), which would answer for what the checks
/// write before it starts. The order is fixed by files: A's check runs
/// from before B ends until after C ran; with `--jobs 2` it holds a slot,
/// so C starts when B ends. Walks of `marker/` counted with `strace`: A's
/// baseline (B's stands on it), A's receipt, B's receipt, C's baseline, C's
/// receipt. Main at 0aa3d21 walked 4 (B's receipt look stood for C).
#[test]
fn no_look_stands_for_a_later_task_while_checks_run_beside() {
    let ws = Ws::new();
    ws.write("marker/m.txt", "m");
    let wait = |f: &str| format!("while [ ! -e {f} ]; do sleep 0.01; done");
    let mut a = sh_task("A", "echo a > a.txt", json!(["a.txt"]));
    let check = format!("echo y > check.log && touch a.checking && {}", wait("c.done"));
    a["validations"] = json!([{"id": "V1", "run": ["sh", "-c", check]}]);
    // What its check writes, declared: the tasks beside it do not answer
    // for it (nor does A: a validation's writes are not its task's).
    a["may_change"] = json!(["a.checking", "check.log"]);
    let b = sh_task("B", &format!("{} && echo b > b.txt", wait("a.checking")), json!(["b.txt"]));
    let c = sh_task("C", "echo c > c.txt && touch c.done", json!(["c.txt", "c.done"]));
    ws.write_plan("plan.json", &plan(vec![a, b, c], qa_true()));
    let traced = traced_run(&ws, &["run", "plan.json", "--jobs", "2"], &["-e", "trace=openat"]);
    let walks = traced.lines().filter(|l| l.contains("O_DIRECTORY") && l.contains("/marker\"")).count();
    assert_eq!(walks, 5, "walks of the workspace:\n{traced}");
    assert_eq!(ws.read("check.log"), "y\n", "A's check ran");
}

#[test]
fn check_warns_about_a_task_that_may_write_with_no_outputs() {
    let ws = Ws::new();
    let mut none = sh_task("R", "true", json!([]));
    none["effect"] = json!("none");
    let p = plan(vec![sh_task("W", "true", json!([])), none, sh_task("D", "true", json!(["x"]))], qa_true());
    ws.write_plan("plan.json", &p);
    let out = ws.engine_json(&["check", "plan.json"]);
    out.expect(0, None);
    let warned: Vec<String> = out.json()["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "NO_OUTPUTS_DECLARED")
        .map(|w| w["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(warned, vec!["$.tasks[0].outputs"], "{}", out.describe());
}

/// Every file under `dir`, relative.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
        }
    }
    out
}
