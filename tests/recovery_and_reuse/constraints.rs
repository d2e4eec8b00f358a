//! Issue 14: the goal's constraints enforced from evidence. An agent that
//! edits a protected test is caught however its validation ends; a task
//! allowed to change it (`may_change`) is not; a constraint's check runs
//! after every attempt's validations; and the words of a run claim only
//! what was checked.

use serde_json::{json, Value};

use crate::helpers::*;

/// An agent that "makes the tests pass" by rewriting the test, dumping the
/// request it got (`agent_stdins`).
const CHEAT_PY: &str = r#"import json, os, sys
raw = sys.stdin.read()
side = os.environ["SIDE"]
n = len([f for f in os.listdir(side) if f.startswith("stdin-")]) + 1
open(os.path.join(side, "stdin-%d.json" % n), "w").write(raw)
open("tests/test_money.sh", "w").write("exit 0  # assertTrue(True)\n")
print(json.dumps({"status": "done", "summary": "all tests pass now", "claimed_cause": None}))
"#;

/// The code is wrong, its test says so; the goal forbids editing the tests.
fn cheating_agent() -> (Ws, Value) {
    let ws = Ws::new();
    ws.write("agent.py", CHEAT_PY);
    ws.write("money.sh", "echo 1\n");
    ws.write("tests/test_money.sh", "test \"$(sh money.sh)\" = 2\n");
    let mut task = agent_task("T1", "cheat");
    task["action"] = json!({"run": ["python3", "agent.py"]});
    task["inputs"] = json!(["money.sh"]);
    task["validations"] = json!([validation("V1", "sh tests/test_money.sh")]);
    let mut p = plan("money", vec![task]);
    p["goal"]["acceptance"] = json!([{"id": "A1", "statement": "the money test passes",
        "check": {"run": ["sh", "tests/test_money.sh"], "expect_exit": 0}}]);
    p["goal"]["constraints"] = json!([
        "the code stays readable",
        {"id": "C1", "statement": "the tests are not edited", "protect": ["tests/**"]},
    ]);
    (ws, p)
}

/// The evidence records of `engine explain REF --json`, as one string.
fn explained(ws: &Ws, task_ref: &str) -> String {
    ws.json(&["explain", task_ref], 0).to_string()
}

#[test]
fn an_agent_that_edits_a_protected_test_is_caught_and_its_repair_sees_why() {
    let (ws, p) = cheating_agent();
    ws.write_plan("plan.json", &p);
    let before = blake3::hash(ws.read("tests/test_money.sh").as_bytes()).to_hex().to_string();

    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    // Its validation passed (the test now passes), yet the attempt failed.
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "constraint_violated", "protected_path_changed"));
    assert_eq!(ws.goal_state(), "failed", "never satisfied over a violated constraint");
    assert!(!out.stdout.contains("goal satisfied"), "{}", out.describe());
    assert!(out.stdout.contains("constraint C1  VIOLATED by T1 attempt"), "{}", out.describe());
    assert!(out.stdout.contains("\"the code stays readable\"  not checked by the engine"), "{}", out.describe());
    // The evidence names the path with both digests.
    let explain = ws.json(&["explain", "T1"], 0);
    let text = explain.to_string();
    assert!(text.contains("protected_path_changed") && text.contains("tests/test_money.sh"), "{explain:#}");
    let after = blake3::hash(ws.read("tests/test_money.sh").as_bytes()).to_hex().to_string();
    assert_ne!(before, after);
    assert!(text.contains(&before) || text.contains(&before[..16]), "the before digest in {explain:#}");
    // No acceptance check ran on a goal whose task failed.
    assert_eq!(ws.ledger().check_results().iter().filter(|c| c.check_id == "A1").count(), 0);

    // A repair hands the violation to the agent.
    let out = ws.engine(&["repair", "T1", "--json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    let stdins = agent_stdins(&ws);
    assert_eq!(stdins.len(), 2);
    let repair = stdins[1]["repair"].to_string();
    assert!(repair.contains("constraint_violated") && repair.contains("tests/test_money.sh"), "{repair}");
    // It left the test edited: the same violation again, not a clean start.
    let a2 = ws.attempts_of("T1").pop().unwrap();
    assert_eq!((a2.class(), a2.rule()), ("constraint_violated", "protected_path_changed"));
    // A repair that would only repeat it is refused, and nothing is sent.
    let doc = ws.json(&["repair", "T1"], 2);
    assert_eq!(doc["error"]["code"], "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE", "{doc:#}");
    assert_eq!(agent_stdins(&ws).len(), 2);
}

#[test]
fn a_task_that_may_change_the_protected_test_is_not_caught() {
    let (ws, mut p) = cheating_agent();
    set(&mut p, "T1", "may_change", json!(["tests/test_money.sh"]));
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!(ws.attempts_of("T1")[0].state, "succeeded");
    assert_eq!(ws.goal_state(), "satisfied");
    assert!(
        out.stdout.contains("constraint C1  no protected path changed in the 1 attempt judged"),
        "{}",
        out.describe()
    );
    // may_change is part of the task's meaning.
    let mut q = p.clone();
    set(&mut q, "T1", "may_change", json!(["tests/other.sh"]));
    ws.write_plan("plan2.json", &q);
    let d1 = ws.json(&["digest", "plan.json"], 0);
    let d2 = ws.json(&["digest", "plan2.json"], 0);
    assert_ne!(d1["tasks"][0]["meaning_digest"], d2["tasks"][0]["meaning_digest"], "{d1:#}\n{d2:#}");
    assert_eq!(d1["goal_contract_digest"], d2["goal_contract_digest"]);
}

#[test]
fn a_constraint_check_that_fails_after_an_attempt_fails_it_with_the_checks_output() {
    let ws = Ws::new();
    let mut p = plan("tidy", vec![sh_task("T1", "echo left over > debug.log")]);
    set(&mut p, "T1", "validations", json!([validation("V1", "true")]));
    // Declared, so the constraint's check is what judges it.
    set(&mut p, "T1", "may_change", json!(["debug.log"]));
    p["goal"]["constraints"] = json!([{"id": "C2", "statement": "no debug log is left",
        "check": {"run": ["sh", "-c", "test ! -e debug.log || { echo 'debug.log is still here' >&2; exit 1; }"],
                  "expect_exit": 0}}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "constraint_violated", "constraint_check_failed"));
    assert_eq!(ws.goal_state(), "failed");
    let text = explained(&ws, "T1");
    assert!(text.contains("debug.log is still here"), "the check's output is the evidence: {text}");

    // Without the left-over file the same check passes, before acceptance.
    ws.write(
        "plan.json",
        serde_json::to_string(&{
            let mut q = p.clone();
            set(&mut q, "T1", "action", json!({"run": ["sh", "-c", "echo T1 >> \"$SIDE/calls.log\""]}));
            q
        })
        .unwrap(),
    );
    std::fs::remove_file(ws.path("debug.log")).unwrap();
    let out = ws.engine(&["revise", "plan.json", "--reason", "stop leaving debug.log", "--json"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert!(out.stdout.contains("constraint C2  its check passed before the acceptance checks"), "{}", out.describe());
}

#[test]
fn a_goal_without_acceptance_checks_is_described_honestly() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan("plain", vec![sh_task("T1", "true")]));
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert!(
        out.stdout.contains(
            "goal completed: every task succeeded or was reused and no unknown outcome is left; no acceptance check \
             is declared, so nothing beyond the tasks' own validations was verified"
        ),
        "{}",
        out.describe()
    );
    assert!(!out.stdout.contains("acceptance check passed"), "{}", out.describe());
    let doc = ws.json(&["status"], 0);
    assert_eq!(doc["goal"]["state"], "satisfied", "{doc:#}");
}

#[test]
fn status_and_explain_keep_completion_and_reusability_apart() {
    let ws = Ws::new();
    ws.write("in.txt", "one\n");
    let mut p = plan("standing", vec![sh_task("T1", "true"), sh_task("T2", "true"), sh_task("T3", "true")]);
    set(&mut p, "T2", "effect", json!("external"));
    set(&mut p, "T3", "inputs", json!(["in.txt"]));
    // Its validation changes the input it judges.
    set(&mut p, "T3", "validations", json!([validation("V1", "echo more >> in.txt")]));
    // After T2: a write of a validation while another task is in flight
    // is judged against that task's window (its `outputs` do not cover
    // in.txt), which is not what this test is about.
    set(&mut p, "T3", "depends_on", json!(["T2"]));
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);

    let status = ws.json(&["status"], 0);
    let completion = |r: &str| {
        let rows = status["tasks"].as_array().unwrap_or_else(|| panic!("{status:#}"));
        rows.iter().find(|t| t["ref"] == r).unwrap()["completion"].clone()
    };
    assert_eq!(completion("T1")["reusable"], true, "{status:#}");
    assert_eq!(
        (completion("T2")["reusable"].clone(), completion("T2")["reason"].clone()),
        (json!(false), json!("EXTERNAL_EFFECT"))
    );
    assert_eq!(completion("T3")["reusable"], false, "{status:#}");
    // Every one of them succeeded: completion is not reusability.
    let states: Vec<&str> = status["tasks"].as_array().unwrap().iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["succeeded"; 3]);

    let text = ws.engine(&["status"]).stdout;
    assert!(text.contains("not reusable: EXTERNAL_EFFECT"), "{text}");
    let explain = ws.engine(&["explain", "T3"]).stdout;
    assert!(explain.contains("not reusable"), "{explain}");
    assert_eq!(ws.json(&["explain", "T1"], 0)["completion"]["reusable"], true);
}

/// The state an attempt is judged against is stored with its intent: an
/// engine killed after the receipt judges the attempt on restart against
/// the protected paths as they were before it, not as they are now.
#[test]
fn an_attempt_judged_after_a_crash_is_judged_against_the_state_before_it() {
    let (ws, p) = cheating_agent();
    ws.write_plan("plan.json", &p);
    assert!(ws.run_fp("after_receipt_commit").killed());
    assert_eq!(ws.attempts_of("T1")[0].state, "receipt_recorded");
    // The test is already rewritten when the new engine looks.
    assert!(ws.read("tests/test_money.sh").contains("assertTrue(True)"));

    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "constraint_violated", "protected_path_changed"));
    assert_eq!(ws.attempts_of("T1").len(), 1, "judged, not sent again");
    assert!(explained(&ws, "T1").contains("tests/test_money.sh"));
    assert_eq!(ws.goal_state(), "failed");
}

/// Protected paths that cannot be observed after an attempt: the attempt
/// is not judged clean, nor called a violation, and it still counts as a
/// call (it was sent).
#[test]
fn an_attempt_whose_protected_paths_cannot_be_observed_is_not_judged_clean() {
    let ws = Ws::new();
    ws.write("secret/keys.txt", "k\n");
    // The task turns its protected folder into a link out of the workspace
    // (refused by every observation of the workspace).
    let mut p = plan("unobservable", vec![sh_task("T1", "rm -r secret && ln -s / secret")]);
    p["goal"]["constraints"] = json!([{"id": "C1", "statement": "the keys stay", "protect": ["secret"]}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "unclassified", "protected_paths_not_observed"));
    assert!(explained(&ws, "T1").contains("could not be observed"));
    let status = ws.json(&["status"], 0);
    assert_eq!(status["budgets"]["max_provider_calls"]["used"], 1, "{status:#}");
    ws.verify();
}

/// Issue 24, hole 9: an agent that cannot edit the protected tests writes
/// `unittest/__main__.py` instead, so `python3 -m unittest` prints OK
/// without running them. What the check's interpreter would load in place
/// of the real module is protected with the tests: `constraint_violated`.
#[test]
fn a_module_shadowing_the_checks_interpreter_is_a_protected_path() {
    let ws = Ws::new();
    ws.write("money.py", "def total():\n    return 1\n");
    ws.write("tests/__init__.py", "");
    ws.write("tests/test_money.py", "import unittest, money\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(money.total(), 2)\n");
    let shadow = "import os\nos.makedirs('unittest', exist_ok=True)\nopen('unittest/__init__.py', 'w').write('')\n\
                  open('unittest/__main__.py', 'w').write('print(\"OK\")\\n')\n";
    let mut task = agent_task("T1", "shadow unittest");
    task["provider"] = json!("sh");
    task["action"] = json!({"run": ["python3", "-c", shadow]});
    let check = json!({"run": ["python3", "-m", "unittest", "-q"], "expect_exit": 0});
    task["validations"] = json!([{"id": "V1", "run": check["run"].clone(), "expect_exit": 0}]);
    let mut p = plan("money", vec![task]);
    p["goal"]["acceptance"] = json!([{"id": "A1", "statement": "the money tests pass", "check": check}]);
    p["goal"]["constraints"] = json!([{"id": "C1", "statement": "the tests are not edited", "protect": ["tests/**"]}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 1, "{}", out.describe());
    assert!(!out.stdout.contains("goal satisfied"), "{}", out.describe());
    let a = &ws.attempts_of("T1")[0];
    assert_eq!((a.class(), a.rule()), ("constraint_violated", "protected_path_changed"), "{}", out.describe());
    assert!(explained(&ws, "T1").contains("unittest/__main__.py"));
}

/// Issue 24, hole 9: constraints nothing checks are never "satisfied".
#[test]
fn a_goal_whose_constraints_nothing_checks_ends_completed_not_satisfied() {
    let ws = Ws::new();
    let mut p = plan("plain", vec![agent_task("T1", "work")]);
    p["tasks"][0]["provider"] = json!("sh");
    p["tasks"][0]["action"] = json!({"run": ["true"]});
    p["goal"]["acceptance"] = json!([{"id": "A1", "statement": "ok", "check": {"run": ["true"], "expect_exit": 0}}]);
    p["goal"]["constraints"] = json!(["the code stays readable", "no secrets are logged"]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine(&["run", "plan.json"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert!(out.stdout.contains("goal completed (2 constraints not checked)"), "{}", out.describe());
    assert!(!out.stdout.contains("goal satisfied"), "{}", out.describe());
    let j = ws.json(&["run", "plan.json"], 0);
    assert_eq!((j["verdict"].clone(), j["constraints_not_checked"].clone()), (json!("completed"), json!(2)), "{j:#}");
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("completed (2 constraints not checked)"), "{}", status.stdout);
    assert_eq!(ws.json(&["status"], 0)["goal"]["verdict"], "completed");
    let report = ws.json(&["report"], 0);
    assert_eq!(report["goal"]["state"], "completed", "{report:#}");
    let check = ws.engine(&["check", "plan.json"]);
    assert!(check.stderr.contains("CONSTRAINT_UNCHECKED"), "{}", check.describe());
}
