//! A commit left in the write-ahead log of a store its engine closed
//! cleanly (issue 37, item 1): the clean close's record in the mark covered
//! `engine.db` alone, so a transaction appended to `engine.db-wal` by
//! anything holding the file was read as the ledger by `run` (a lowered
//! call counter let a run go past `max_provider_calls`; a stored plan
//! rewritten was hidden by the plan cache) while `engine verify` refused
//! the store. Every command now judges what the WAL holds as it judges the
//! store file: `run`, `status` and `verify` answer alike, and nothing is
//! sent. Ground truth for "sent" is the receiver fixture's own log.

use serde_json::{json, Value};

use super::outcomes::*;

/// Three HTTP tasks in a chain, two provider calls allowed: a run sends
/// T1 and T2 and stops on the budget before T3.
fn budgeted(rcv: &Receiver) -> Ws {
    let ws = Ws::new();
    let mut chain = vec![http_task("T1", "external"), http_task("T2", "external"), http_task("T3", "external")];
    chain[1]["depends_on"] = json!(["T1"]);
    chain[2]["depends_on"] = json!(["T2"]);
    let mut p = plan("docs", json!({"r": http_provider(rcv, false)}), chain);
    p["budgets"] = json!({"max_provider_calls": 2});
    ws.write_plan("plan.json", &p);
    ws
}

/// Commit `sql` into the store's WAL and leave it there, as a process
/// that writes the file and exits without a checkpoint does (the issue's
/// `python3 … PRAGMA wal_autocheckpoint=0 … os._exit(0)`).
fn commit_into_the_wal(ws: &Ws, sql: &str) {
    let c = rusqlite::Connection::open(ws.store()).expect("the store opens");
    c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).unwrap();
    c.execute_batch("PRAGMA wal_autocheckpoint = 0").unwrap();
    c.execute_batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    drop(c);
    let wal = std::fs::metadata(format!("{}-wal", ws.store().display())).expect("the WAL is there");
    assert!(wal.len() > 32, "the commit is in the WAL, not in engine.db");
}

/// `engine ARGS --json`: its exit code, error code and failed check.
fn answer(ws: &Ws, args: &[&str]) -> (i32, Value, Value) {
    let out = ws.engine_json(args);
    let doc = out.json();
    (out.code(), doc["error"]["code"].clone(), doc["error"]["details"]["check"].clone())
}

#[test]
fn a_commit_left_in_the_wal_of_a_closed_store_is_judged_alike_by_every_command() {
    let rcv = Receiver::start(&[]);
    let other_plan = json!({"version": 1, "goal": goal("docs"), "providers": {}, "tasks": []}).to_string();
    let attacks = [
        "UPDATE goals SET calls_used = 0".to_string(),
        "UPDATE revisions SET plan_json = 'not json'".to_string(),
        format!("UPDATE revisions SET plan_json = '{other_plan}'"),
    ];
    for attack in &attacks {
        let ws = budgeted(&rcv);
        ws.run().expect(5, None);
        let sent = rcv.deliveries().len();
        commit_into_the_wal(&ws, attack);
        let verify = answer(&ws, &["verify"]);
        assert_eq!((verify.0, &verify.1), (2, &json!("STORE_CORRUPT")), "{attack}: verify refuses it");
        for args in [&["status"][..], &["run", "plan.json"], &["log"], &["explain", "T3"]] {
            assert_eq!(answer(&ws, args), verify, "{attack}: `{}` answers as verify does", args.join(" "));
        }
        assert_eq!(rcv.deliveries().len(), sent, "{attack}: nothing more was sent");
    }
}

/// The clean close folds the WAL into the store file and records what is
/// left of it: a store closed and not touched since is read without a
/// check, whatever readers opened it in between.
#[test]
fn a_closed_store_read_by_anyone_stays_known_to_be_whole() {
    let rcv = Receiver::start(&[]);
    let ws = budgeted(&rcv);
    ws.run().expect(5, None);
    let wal = format!("{}-wal", ws.store().display());
    assert_eq!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0, "nothing is left in the WAL");
    // A reader that closes normally (sqlite3's shell, say) deletes an empty WAL.
    let c = rusqlite::Connection::open(ws.store()).unwrap();
    let _: i64 = c.query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0)).unwrap();
    drop(c);
    for args in [&["status"][..], &["verify"], &["run", "plan.json"]] {
        let out = ws.engine_json(args);
        assert_ne!(out.code(), 2, "`{}` takes the store as whole\n{}", args.join(" "), out.describe());
    }
    assert_eq!(rcv.deliveries().len(), 2, "the budget still holds");
}
