//! A person's acts on the PostgreSQL ledger: a row the engine did not
//! write (SQL straight into the table, as a provider holding the
//! database's credentials could) is `STORE_TAMPERED` and never spent; the
//! act chain gives the same verdicts as on SQLite.

use std::path::Path;

use super::common::approval_asked;
use crate::support::{Ledger, RUN_DEADLINE};

/// An approval inserted with SQL, bound exactly to the pending request and
/// the active plan (what `engine approve` would have written, without the
/// act chain's entry): the worker refuses it naming its row, dispatches
/// nothing, records no intent, and the row stays unspent.
#[test]
fn a_hand_inserted_approval_is_store_tampered_and_never_spent() {
    let (s, op) = approval_asked(vec![]);
    s.pg.psql(
        "ledger",
        &format!(
            "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, os_uid, os_user)
             SELECT p.operation_id, p.goal_id, p.revision, p.task_ref, p.request_digest, r.plan_digest, 'me', 'forged', 1, 0, 'root'
             FROM pending_requests p JOIN revisions r ON r.goal_id = p.goal_id AND r.revision = p.revision
             WHERE p.operation_id = '{op}'"
        ),
    );
    let forged = s.pg.psql("ledger", "SELECT max(id) FROM approvals");
    s.submit();
    let out = s.worker("w1", 1, &[]).wait(RUN_DEADLINE);
    out.expect(2, Some("STORE_TAMPERED"));
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains(&format!("approvals row {forged}")), "{}", out.describe());
    assert_eq!(s.starts().get("PAY"), None, "nothing dispatched");
    let ledger = Ledger::open(Path::new(&s.url));
    assert!(ledger.attempts_of("PAY").is_empty(), "no intent was recorded");
    let approvals = ledger.approvals();
    assert_eq!(approvals.len(), 1);
    assert!(approvals.iter().all(|a| a.consumed_by.is_none() && a.voided_by.is_none()), "never spent: {approvals:?}");
}

/// A real approval is on the chain and is spent by exactly one call; the
/// chain is append-only (an UPDATE or DELETE of an entry is refused by the
/// database), and an approval row edited afterwards is refused when a
/// person's act would rely on it.
#[test]
fn a_real_approval_is_chained_and_spent_and_the_chain_is_append_only() {
    let (s, op) = approval_asked(vec![]);
    s.engine(&["approve", &op, "--note", "pay once"]).expect_code(0);
    s.submit();
    s.worker("w1", 1, &[]).wait(RUN_DEADLINE).expect_code(0);
    assert_eq!(s.starts().get("PAY"), Some(&1), "one approval, one call");
    let kinds = s.pg.psql("ledger", "SELECT string_agg(kind, ',' ORDER BY seq) FROM act_chain");
    assert_eq!(kinds, "approval,approval_spent");
    let approval = Ledger::open(Path::new(&s.url)).approvals().remove(0);
    assert!(approval.uid.is_some() && approval.user.is_some(), "who acted is recorded: {approval:?}");
    for sql in ["UPDATE act_chain SET content = '{}'", "DELETE FROM act_chain"] {
        let refused = s.pg.try_psql("ledger", sql);
        assert!(refused.contains("append-only"), "{sql}: {refused}");
    }
}

/// Issue 36, case 4 on the shared ledger: an HTTP request whose answer
/// was lost is unknown; the identical request from another goal in the
/// same database is not sent (`SAME_REQUEST_UNSETTLED`), until a person
/// settles the first. The receiver's own log counts the deliveries.
#[test]
fn the_same_request_of_another_goal_waits_for_the_unknown_one() {
    use crate::support::{Receiver, Ws};
    use serde_json::json;
    let rcv = Receiver::start(&[]);
    let pg = super::common::Db::on_process_server();
    let url = pg.url("ledger");
    let ws = Ws::new();
    let plan = |goal: &str, task_ref: &str| {
        json!({"version": 1, "goal": {"id": goal, "statement": "deliver"},
               "providers": {"r": {"kind": "http", "endpoint": format!("{}/render", rcv.base())}},
               "tasks": [{"ref": task_ref, "title": "send", "provider": "r", "action": {"body": {"doc": 1}}}]})
    };
    ws.write_plan("first.json", &plan("first", "send"));
    ws.write_plan("second.json", &plan("second", "send_too"));
    rcv.control(json!({"mode": "drop", "times": 1}));
    ws.engine_json(&["run", "first.json", "--store", &url]).expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(rcv.deliveries().len(), 1);
    let out = ws.engine_json(&["run", "second.json", "--store", &url]);
    out.expect(3, Some("SAME_REQUEST_UNSETTLED"));
    let first = &out.json()["same_request_unsettled"][0]["first"];
    assert_eq!((first["goal_id"].as_str(), first["task_ref"].as_str()), (Some("first"), Some("send")), "{out:?}");
    assert_eq!(rcv.deliveries().len(), 1, "not sent again:\n{}", out.describe());
    let op = first["operation_id"].as_str().expect("the first operation").to_string();
    ws.engine_json(&["settle", &op, "--outcome", "ok", "--note", "in the receiver's log", "--store", &url])
        .expect(0, None);
    ws.engine_json(&["run", "second.json", "--store", &url]).expect(0, None);
    assert_eq!(rcv.deliveries().len(), 2);
}
