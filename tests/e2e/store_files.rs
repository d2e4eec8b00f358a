//! A store this binary cannot read as a ledger: a newer schema is refused
//! (`SCHEMA_TOO_NEW`), a file that is not a database is `STORE_CORRUPT`;
//! in both cases nothing is written to it.

use serde_json::json;

use super::common::*;

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    // What a newer engine's migration leaves: a table this one does not
    // know, and its version. (The version bytes alone changed are damage:
    // `store_open.rs`.)
    crate::support::ledger::tamper_batch(
        &ws.store(),
        "CREATE TABLE later_things (id INTEGER); PRAGMA user_version = 999;",
    );
    let before = std::fs::read(ws.store()).unwrap();
    for args in [vec!["run", "plan.json"], vec!["status"]] {
        let out = ws.engine(&args);
        out.expect_code(2);
        assert!(out.stderr.contains("SCHEMA_TOO_NEW"), "{}", out.stderr);
    }
    assert_eq!(std::fs::read(ws.store()).unwrap(), before, "the store is untouched");
}

#[test]
fn a_file_that_is_not_a_database_is_store_corrupt() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
    std::fs::create_dir_all(ws.store_dir()).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(ws.store_dir()).unwrap().permissions(), 0o700);
    let junk = vec![0x42u8; 8192];
    std::fs::write(ws.store(), &junk).unwrap();
    std::fs::set_permissions(ws.store(), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = ws.engine(&["run", "plan.json", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], json!("STORE_CORRUPT"), "{}", out.stdout);
    assert_eq!(std::fs::read(ws.store()).unwrap(), junk, "nothing written into it");
}

/// A store made by the engine of schema 1 (`tests/fixtures/store-v1.sql`)
/// is migrated by the first writing command and reads as it did: the same
/// task states, classifications, budget use (cost now counted exactly),
/// and the request a repair asked a person to approve — found then only
/// in an event, now a row — still takes its approval.
#[test]
fn a_schema_1_store_is_migrated_and_reads_as_before() {
    let ws = Ws::new();
    let dump = std::fs::read_to_string(repo_root().join("tests/fixtures/store-v1.sql")).unwrap();
    crate::support::ledger::load_dump(&ws.store(), &dump);
    assert_eq!(engine::store::Store::schema_version(&ws.store()).unwrap(), Some(1));

    // A reader never migrates: it says which command does.
    let status = ws.engine(&["status"]);
    status.expect_code(2);
    assert!(status.stderr.contains("a writing command (`engine run`) migrates it"), "{}", status.describe());
    assert_eq!(engine::store::Store::schema_version(&ws.store()).unwrap(), Some(1), "untouched by a reader");

    // A person's approval of the repair's request: the first writer
    // migrates, and the request binds from its migrated row.
    let repair_op = "op_b715359dae761991e7834ff9";
    let approve = ws.engine(&["approve", repair_op, "--note", "the repair may go", "--json"]);
    approve.expect_code(0);
    let approval = &approve.json()["approval"];
    assert_eq!((approval["task_ref"].as_str(), approval["revision"].as_i64()), (Some("T4"), Some(1)), "{approval}");
    assert_eq!(engine::store::Store::schema_version(&ws.store()).unwrap(), Some(engine::store::SCHEMA_VERSION));

    let status = ws.engine(&["status", "--json"]);
    status.expect_code(0);
    let status = status.json();
    let tasks: Vec<(&str, &str)> = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["ref"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tasks,
        [("T1", "succeeded"), ("T2", "failed"), ("T3", "awaiting_approval"), ("T4", "awaiting_approval")]
    );
    assert_eq!(status["budgets"]["max_cost"]["used"], json!(0.25), "{status:#}");
    assert_eq!(status["budgets"]["max_provider_calls"]["used"], json!(3));

    let explain = ws.engine(&["explain", "T2", "--json"]);
    explain.expect_code(0);
    let attempt = &explain.json()["attempts"][0]["attempt"];
    assert_eq!(
        attempt["classification"],
        json!({"class": "provider_rejected", "rule": "action_exit_nonzero", "evidence_ids": [3], "claims": [], "next": "revise"})
    );
    assert_eq!(attempt["cost"], json!(0.0));
    let t1 = &ws.attempts_of("T1")[0];
    assert_eq!((t1.cost, t1.state.as_str()), (0.25, "succeeded"));
}

/// The plan `tests/fixtures/store-v4.sql` was made from (or one whose T2
/// may change the protected file).
fn store_v4_plan(t2_may_change: bool) -> serde_json::Value {
    let mut p = json!({
        "version": 1,
        "goal": {"id": "guarded", "statement": "out.txt is written and locked.txt stays as it is",
                 "acceptance": [{"id": "A1", "statement": "out.txt exists", "check": {"run": ["test", "-s", "out.txt"]}}],
                 "constraints": ["the notes stay short",
                                 {"id": "C1", "statement": "locked.txt is not edited", "protect": ["locked.txt"]}]},
        "budgets": {"max_attempts_per_task": 3, "max_revisions": 3, "max_provider_calls": 20, "max_cost": 0,
                    "deadline_seconds": 600},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [
            {"ref": "T1", "provider": "sh", "effect": "local", "action": {"run": ["sh", "-c", "echo ok > out.txt"]},
             "validations": [{"id": "V1", "run": ["test", "-s", "out.txt"]}]},
            {"ref": "T2", "provider": "sh", "effect": "local", "action": {"run": ["sh", "-c", "echo edited >> locked.txt"]},
             "depends_on": ["T1"]}
        ]
    });
    if t2_may_change {
        p["tasks"][1]["may_change"] = json!(["locked.txt"]);
    }
    p
}

/// An attempt's (id, revision, task, state, protected_at_intent, handle).
type AttemptColumns = (i64, i64, String, String, Option<String>, Option<String>);

/// Each attempt's columns as the store file holds them.
fn attempt_columns(ws: &Ws) -> Vec<AttemptColumns> {
    let db = rusqlite::Connection::open(ws.store()).unwrap();
    let mut q = db
        .prepare("SELECT id, revision, task_ref, state, protected_at_intent, handle FROM attempts ORDER BY id")
        .unwrap();
    let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// A store made by the engine of schema 4 (constraints:
/// `tests/fixtures/store-v4.sql`, with its mark) is migrated by the first
/// writing command to this engine's schema (the provider's handle on an
/// attempt) and reads as before: T1 kept, T2 still failed as
/// `constraint_violated` from the same evidence, nothing sent again, each
/// attempt's protected-path checkpoint kept and no handle made up; then a
/// new goal runs on the migrated store.
#[test]
fn a_schema_4_store_is_migrated_and_reads_as_before() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &store_v4_plan(false));
    ws.write("locked.txt", "do not edit\nedited\n");
    ws.write("out.txt", "ok\n");
    let dump = std::fs::read_to_string(repo_root().join("tests/fixtures/store-v4.sql")).unwrap();
    crate::support::ledger::load_dump(&ws.store(), &dump);
    let mark = std::path::PathBuf::from(format!("{}.mark", ws.store().display()));
    std::fs::copy(repo_root().join("tests/fixtures/store-v4.mark"), &mark).unwrap();
    // The mode the engine gives its files (a checkout's 0644 would be a
    // changed mode: `STORE_TAMPERED`).
    std::fs::set_permissions(&mark, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    assert_eq!(engine::store::Store::schema_version(&ws.store()).unwrap(), Some(4));
    let protected = "680c85bd2a5f9587757743f1a09d10396ee2b8a11723ec64bb1daa3d5bab1771";

    let status = ws.engine(&["status"]);
    status.expect_code(2);
    assert!(status.stderr.contains("a writing command (`engine run`) migrates it"), "{}", status.describe());
    assert_eq!(engine::store::Store::schema_version(&ws.store()).unwrap(), Some(4), "untouched by a reader");

    ws.engine(&["run", "plan.json"]).expect_code(1);
    assert_eq!(engine::store::Store::schema_version(&ws.store()).unwrap(), Some(engine::store::SCHEMA_VERSION));
    let row = |id: i64, task: &str, state: &str| {
        (id, 1, task.to_string(), state.to_string(), Some(protected.to_string()), None)
    };
    assert_eq!(
        attempt_columns(&ws),
        [row(1, "T1", "succeeded"), row(2, "T2", "failed")],
        "nothing sent again; each attempt keeps its protected-path checkpoint and has no handle"
    );
    let explain = ws.engine(&["explain", "T2", "--json"]);
    explain.expect_code(0);
    assert_eq!(
        explain.json()["attempts"][0]["attempt"]["classification"],
        json!({"class": "constraint_violated", "rule": "protected_path_changed", "evidence_ids": [4], "claims": [],
               "next": "repair"})
    );
    ws.engine(&["verify"]).expect_code(0);

    // The migrated store takes new work: another goal (the fixture's own is
    // past its wall-clock budget, counted from its first run), whose task
    // may change the protected file.
    let mut again = store_v4_plan(true);
    again["goal"]["id"] = json!("guarded-again");
    ws.write("locked.txt", "do not edit\n");
    ws.write_plan("plan2.json", &again);
    let run = ws.engine(&["run", "plan2.json"]);
    run.expect_code(0);
    let rows = attempt_columns(&ws);
    let new: Vec<_> = rows.iter().skip(2).map(|a| (a.0, a.2.as_str(), a.3.as_str(), a.5.clone())).collect();
    assert_eq!(new, [(3, "T1", "succeeded", None), (4, "T2", "succeeded", None)], "{}", run.describe());
    assert!(rows.iter().all(|a| a.4.is_some()), "each attempt is judged against a protected-path checkpoint");
    ws.engine(&["verify"]).expect_code(0);
}

/// A store side file (`-wal`, `-shm`, the mark) that is a symlink is refused
/// as a usage error naming that file (exit 2), before SQLite follows it.
#[test]
fn a_symlinked_side_file_is_refused_naming_it() {
    for suffix in ["-wal", "-shm", ".mark"] {
        let ws = Ws::new();
        ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
        ws.engine(&["run", "plan.json"]).expect_code(0);
        let side = std::path::PathBuf::from(format!("{}{suffix}", ws.store().display()));
        let elsewhere = ws.root().join(format!("elsewhere{suffix}"));
        if side.exists() {
            std::fs::rename(&side, &elsewhere).unwrap();
        } else {
            std::fs::write(&elsewhere, b"").unwrap();
        }
        std::os::unix::fs::symlink(&elsewhere, &side).unwrap();
        let before = std::fs::read(&elsewhere).unwrap();
        for args in [vec!["run", "plan.json", "--json"], vec!["status", "--json"]] {
            let out = ws.engine(&args);
            out.expect_code(2);
            let err = &out.json()["error"];
            assert_eq!(err["code"], json!("USAGE_ERROR"), "{suffix}: {}", out.stdout);
            assert_eq!(err["place"], json!(side.display().to_string()), "{suffix}: names the file");
        }
        assert_eq!(std::fs::read(&elsewhere).unwrap(), before, "{suffix}: the link's target is untouched");
    }
}
