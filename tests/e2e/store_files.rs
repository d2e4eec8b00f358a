//! A store this binary cannot read as a ledger: a newer schema is refused
//! (`SCHEMA_TOO_NEW`), a file that is not a database is `STORE_CORRUPT`;
//! in both cases nothing is written to it.

use serde_json::json;

use crate::common::*;

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    ws.tamper("PRAGMA user_version = 999");
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
    let out = ws.engine(&["run", "plan.json", "--json"]);
    out.expect_code(70);
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
