//! A person's acts: one approval pays for one call, a row the engine did
//! not write is refused (`STORE_TAMPERED`), who acted is the operating
//! system's user, and only the people a plan names may act.

use serde_json::{json, Value};

use crate::common::*;
use crate::support::ledger::row_digest;

fn approval_plan(rcv: &Receiver) -> Ws {
    one_http_task(rcv, "external", false, json!({"requires_approval": true}))
}

/// `approve` given twice (a caller that lost its reply), then `retry`:
/// exactly one delivery; the second approve recorded nothing and said so;
/// the next call waits for a new approval.
#[test]
fn approve_twice_then_retry_delivers_once() {
    let rcv = Receiver::start(&[]);
    let ws = approval_plan(&rcv);
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let first = ws.engine_json(&["approve", &op, "--note", "checked the request"]);
    first.expect(0, None);
    let second = ws.engine(&["approve", &op, "--note", "checked the request"]);
    second.expect_code(0);
    assert!(second.stdout.contains("already approved; waiting for the call"), "{}", second.stdout);
    assert_eq!(ws.ledger().approvals().len(), 1, "the second approve recorded nothing");
    // The approved call is answered 503: failed, retryable; try 2 needs a new approval.
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    ws.run().expect(1, None);
    ws.engine_json(&["retry", &op, "--jobs", "1"]).expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(rcv.tries_of(&op), Vec::<i64>::new(), "the 503 delivered nothing; no second try was sent");
    assert_eq!(ws.attempts().len(), 1, "one call for one approval");
}

/// A hand-inserted approval (a copy of a real one's bytes) is refused with
/// `STORE_TAMPERED` naming its row, nothing is dispatched, and it is never
/// spent; `engine verify` names the same row.
#[test]
fn a_hand_inserted_approval_is_store_tampered_and_never_spent() {
    let rcv = Receiver::start(&[]);
    let ws = approval_plan(&rcv);
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let sent = ws.engine_json(&["approve", &op, "--note", "the real one"]);
    sent.expect(0, None);
    let real = sent.json()["approval"]["approval_id"].as_i64().unwrap();
    // Remove nothing the chain holds: insert a copy, then void the real one
    // the only way a forger could (its row; the chain is append-only).
    ws.tamper(&format!(
        "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, os_uid, os_user)
         SELECT operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, 'forged', at_ms, os_uid, os_user
         FROM approvals WHERE id = {real}"
    ));
    let forged = ws.ledger().approvals().iter().map(|a| a.id.get()).max().unwrap();
    assert_ne!(forged, real);
    let before = rcv.deliveries().len();
    let out = ws.run();
    out.expect(2, Some("STORE_TAMPERED"));
    assert!(out.stderr.contains(&format!("approvals row {forged}")), "{}", out.describe());
    assert_eq!(rcv.deliveries().len(), before, "nothing dispatched");
    assert!(ws.attempts().is_empty(), "no intent was recorded");
    assert!(ws.ledger().approvals().iter().all(|a| a.consumed_by.is_none()), "no approval was spent");
    let verify = ws.engine_json(&["verify"]);
    assert_ne!(verify.code(), 0);
    assert!(verify.stdout.contains(&format!("approvals row {forged}")), "{}", verify.describe());
}

/// An edited settlement (its outcome flipped by hand) is refused before the
/// engine acts on it.
#[test]
fn an_edited_settlement_is_refused_before_a_retry() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    let op = ws.digest_op("T1");
    rcv.control(json!({"mode": "drop", "times": 1}));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "it arrived"]).expect(0, None);
    ws.tamper("UPDATE settlements SET outcome = 'not_run'");
    ws.tamper(&format!("UPDATE attempts SET state = 'settled_not_run' WHERE operation_id = '{op}'"));
    let sent = rcv.deliveries().len();
    let out = ws.engine_json(&["retry", &op]);
    out.expect(2, Some("STORE_TAMPERED"));
    assert!(out.stdout.contains("settlements row"), "{}", out.describe());
    assert_eq!(rcv.deliveries().len(), sent, "nothing re-sent");
}

/// Who acted: the operating system's uid and user name beside `--actor`,
/// in `status`, `explain` and `log`; retry and repair requests carry them.
#[test]
fn every_act_records_the_os_user() {
    let rcv = Receiver::start(&[]);
    let ws = approval_plan(&rcv);
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    ws.engine_json(&["approve", &op, "--note", "ok", "--actor", "release manager"]).expect(0, None);
    // SAFETY: plain syscall.
    let uid = unsafe { libc::getuid() };
    let user = String::from_utf8(std::process::Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let user = user.trim();
    let a = &ws.ledger().approvals()[0];
    assert_eq!((a.actor.as_str(), a.uid, a.user.as_deref()), ("release manager", Some(uid), Some(user)));
    let log = ws.log();
    let recorded = log.iter().find(|e| e["kind"] == "approval_recorded").unwrap();
    assert_eq!(recorded["data"]["uid"], json!(uid), "{recorded}");
    assert_eq!(recorded["data"]["user"], json!(user), "{recorded}");
    let log_text = ws.engine(&["log"]).stdout;
    assert!(log_text.contains(&format!("user {user}")), "{log_text}");
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains(user) && status.stdout.contains("release manager"), "{}", status.stdout);
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains(user), "{}", explain.stdout);
    // A retry request carries who asked.
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    ws.run().expect(1, None);
    ws.engine_json(&["retry", &op, "--actor", "ops"]).expect(4, Some("APPROVAL_REQUIRED"));
    let asked: Vec<Value> = ws.log().into_iter().filter(|e| e["kind"] == "retry_requested").collect();
    assert_eq!(asked.len(), 1);
    assert_eq!((asked[0]["data"]["actor"].clone(), asked[0]["data"]["user"].clone()), (json!("ops"), json!(user)));
}

/// A plan that names who may approve: anyone else is refused with
/// `NOT_PERMITTED`, and nothing is recorded anywhere.
#[test]
fn not_permitted_is_recorded_nowhere() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    let mut task = http_task("T1", "external");
    task["requires_approval"] = json!(true);
    let mut p = plan("docs", json!({"r": http_provider(&rcv, false)}), vec![task]);
    p["people"] = json!({"approve": ["someone-else"], "settle": ["someone-else"], "retry": ["someone-else"]});
    ws.write_plan("plan.json", &p);
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let before = row_digest(&ws.store());
    for args in [
        vec!["approve", op.as_str(), "--note", "n"],
        vec!["approve", op.as_str(), "--note", "n", "--request-id", "r1"],
        vec!["retry", op.as_str()],
        vec!["repair", "T1"],
    ] {
        let out = ws.engine_json(&args);
        out.expect(2, Some("NOT_PERMITTED"));
        assert!(out.stdout.contains("someone-else"), "{args:?}: {}", out.describe());
        assert_eq!(row_digest(&ws.store()), before, "{args:?} recorded something");
    }
    assert!(rcv.deliveries().is_empty());
}
