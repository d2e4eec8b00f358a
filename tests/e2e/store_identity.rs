//! A store knows it exists (issue 9, defect 1): its identity and a count of
//! its durable commits live in a mark file beside it, outside the WAL, so a
//! store that lost committed transactions — a deleted WAL, a deleted or
//! replaced store file, an old copy put back — is refused with
//! `STORE_CORRUPT` naming what is missing, never re-created, and nothing is
//! sent again. Ground truth for "sent" is the receiver fixture's own log.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::outcomes::*;

/// The store's files beside `engine.db`.
fn side(ws: &Ws, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", ws.store().display()))
}

/// `engine ARGS --json` must refuse with `STORE_CORRUPT` (exit 2: a store
/// condition a person sees to, never 70), naming the store, with `needle` in the message.
#[track_caller]
fn expect_refused(ws: &Ws, args: &[&str], needle: &str) {
    let out = ws.engine_json(args);
    out.expect(2, Some("STORE_CORRUPT"));
    let err = &out.json()["error"];
    assert_eq!(err["place"], json!(ws.store().display().to_string()), "names the store\n{}", out.describe());
    let msg = err["message"].as_str().unwrap_or_default();
    assert!(msg.contains(needle), "message says {needle:?}\n{}", out.describe());
}

/// An external HTTP task dispatched and then the engine SIGKILLed: the
/// receiver has the delivery, the ledger (still in the WAL) the intent.
fn dispatched_then_killed(rcv: &Receiver) -> (Ws, String) {
    let ws = one_http_task(rcv, "external", false, json!({}));
    let op = ws.digest_op("T1");
    assert!(ws.run_fp("after_dispatch").killed());
    assert_eq!(rcv.wait_deliveries(&op, 1).len(), 1);
    (ws, op)
}

/// A command task with effect `none`.
fn local_task(task_ref: &str) -> serde_json::Value {
    json!({"ref": task_ref, "title": format!("task {task_ref}"), "provider": "sh",
           "action": {"run": ["true"]}, "effect": "none"})
}

fn files_of(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn a_lost_wal_is_refused_and_nothing_is_sent_again() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = dispatched_then_killed(&rcv);
    std::fs::remove_file(side(&ws, "-wal")).expect("the crashed engine left its WAL");
    let _ = std::fs::remove_file(side(&ws, "-shm"));
    let before = std::fs::read(ws.store()).unwrap();

    expect_refused(&ws, &["status"], "lost committed transactions");
    expect_refused(&ws, &["run", "plan.json", "--jobs", "1"], "lost committed transactions");
    expect_refused(&ws, &["log"], "lost committed transactions");

    assert_eq!(rcv.tries_of(&op), vec![1], "the delivered request was not sent again");
    assert_eq!(std::fs::read(ws.store()).unwrap(), before, "the refused store was not re-created or written");
}

#[test]
fn a_deleted_store_file_is_refused_never_re_created() {
    let rcv = Receiver::start(&[]);
    let (ws, op) = dispatched_then_killed(&rcv);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(side(&ws, suffix));
    }
    let dir = ws.store().parent().unwrap().to_path_buf();
    let left = files_of(&dir);

    expect_refused(&ws, &["run", "plan.json", "--jobs", "1"], "missing");
    expect_refused(&ws, &["status"], "missing");

    assert!(!ws.store().exists(), "no new store was made in its place");
    assert_eq!(files_of(&dir), left, "nothing was added to the store folder");
    assert_eq!(rcv.tries_of(&op), vec![1], "nothing was sent again");
}

#[test]
fn an_older_copy_of_the_store_put_back_is_refused() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    let providers = json!({"r": http_provider(&rcv, false), "sh": {"kind": "command"}});
    ws.write_plan("plan.json", &plan("docs", providers.clone(), vec![local_task("A")]));
    ws.run().expect(0, None);
    // A copy of the store file as the first run left it.
    let copy = std::fs::read(ws.store()).unwrap();

    // The real work: a revision that adds a delivery, delivered.
    ws.write_plan("plan.json", &plan("docs", providers, vec![local_task("A"), http_task("T1", "external")]));
    ws.engine_json(&["revise", "plan.json", "--reason", "add the delivery"]).expect(0, None);
    let op = ws.op_of("T1");
    assert_eq!(rcv.tries_of(&op), vec![1]);

    // Put the older copy back (and nothing of the newer WAL).
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(side(&ws, suffix));
    }
    std::fs::write(ws.store(), &copy).unwrap();
    expect_refused(&ws, &["status"], "lost committed transactions");
    expect_refused(&ws, &["revise", "plan.json", "--reason", "again"], "lost committed transactions");
    expect_refused(&ws, &["run", "plan.json", "--jobs", "1"], "lost committed transactions");
    assert_eq!(rcv.tries_of(&op), vec![1], "nothing was sent again");
}

#[test]
fn another_store_swapped_in_is_refused() {
    let a = Ws::new();
    let b = Ws::new();
    for ws in [&a, &b] {
        ws.write_plan("plan.json", &plan("docs", json!({"sh": {"kind": "command"}}), vec![local_task("A")]));
        ws.run().expect(0, None);
    }
    // b's store file (closed cleanly) copied over a's; a's mark stays.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(side(&a, suffix));
    }
    std::fs::copy(b.store(), a.store()).unwrap();
    expect_refused(&a, &["status"], "not the store its mark");
    expect_refused(&a, &["run", "plan.json", "--jobs", "1"], "not the store its mark");
}

#[test]
fn a_deleted_mark_is_refused_once_the_store_holds_commits() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan("docs", json!({"sh": {"kind": "command"}}), vec![local_task("A")]));
    ws.run().expect(0, None);
    std::fs::remove_file(side(&ws, ".mark")).expect("the store has a mark file beside it");
    expect_refused(&ws, &["status"], "mark");
    expect_refused(&ws, &["run", "plan.json", "--jobs", "1"], "mark");
    assert!(!side(&ws, ".mark").exists(), "a refused store does not get a new mark");
}

#[test]
fn the_mark_is_private_and_lost_shm_alone_is_harmless() {
    use std::os::unix::fs::PermissionsExt;
    let rcv = Receiver::start(&[]);
    let (ws, op) = dispatched_then_killed(&rcv);
    let mode = std::fs::metadata(side(&ws, ".mark")).expect("mark file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the mark file is 0600");
    // The shared-memory index is rebuilt from the WAL: nothing is lost.
    std::fs::remove_file(side(&ws, "-shm")).unwrap();
    ws.engine_json(&["status"]).expect(0, None);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

/// A store made before stores had an identity (schema 1, no mark) is
/// adopted by the next writer: migrated, given its mark, and from then on
/// protected like any other.
#[test]
fn a_store_from_before_marks_is_adopted_by_the_next_writer() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan("docs", json!({"sh": {"kind": "command"}}), vec![local_task("A")]));
    // A store of schema 1 (no identity table, no mark), as that engine made it.
    let dump = std::fs::read_to_string(repo_root().join("tests/fixtures/store-v1.sql")).unwrap();
    crate::support::ledger::load_dump(&ws.store(), &dump);
    assert!(!side(&ws, ".mark").exists());

    ws.engine_json(&["status"]).expect(2, Some("USAGE_ERROR"));
    ws.run().expect(0, None);
    assert!(side(&ws, ".mark").exists(), "the writer gave it a mark");
    let version = engine::store::Store::schema_version(&ws.store()).unwrap();
    assert_eq!(version, Some(engine::store::SCHEMA_VERSION));
    ws.engine_json(&["status"]).expect(0, None);

    // Protected now: an older copy of it is refused.
    let copy = std::fs::read(ws.store()).unwrap();
    ws.run().expect(0, None);
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(side(&ws, suffix));
    }
    std::fs::write(ws.store(), &copy).unwrap();
    expect_refused(&ws, &["status"], "lost committed transactions");
}
