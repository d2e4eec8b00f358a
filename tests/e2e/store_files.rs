//! A store this binary cannot read as a ledger: a newer schema is refused
//! (`SCHEMA_TOO_NEW`), a file that is not a database is `STORE_CORRUPT`;
//! in both cases nothing is written to it.

use serde_json::json;

use crate::common::*;

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let ws = Ws::empty();
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    {
        let db = rusqlite::Connection::open(ws.store()).unwrap();
        db.execute_batch("PRAGMA user_version = 999;").unwrap();
    }
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
    let ws = Ws::empty();
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
    std::fs::create_dir(ws.store_dir()).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(ws.store_dir()).unwrap().permissions(), 0o700);
    let junk = vec![0x42u8; 8192];
    std::fs::write(ws.store(), &junk).unwrap();
    let out = ws.engine(&["run", "plan.json", "--json"]);
    out.expect_code(70);
    assert_eq!(out.json()["error"]["code"], json!("STORE_CORRUPT"), "{}", out.stdout);
    assert_eq!(std::fs::read(ws.store()).unwrap(), junk, "nothing written into it");
}

/// A store side file (`-wal`, `-shm`, the mark) that is a symlink is refused
/// as a usage error naming that file (exit 2), before SQLite follows it.
#[test]
fn a_symlinked_side_file_is_refused_naming_it() {
    for suffix in ["-wal", "-shm", ".mark"] {
        let ws = Ws::empty();
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
