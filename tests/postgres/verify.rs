//! `engine verify` on the PostgreSQL ledger: the same named checks as on
//! SQLite over one read-only snapshot; a SQLite file's own checks are
//! reported as not applicable (never as passed); a row written with SQL
//! instead of by the engine is named, with SQLite's exit codes.

use super::common::{approval_asked, task, Shared};
use crate::support::RUN_DEADLINE;

/// A goal that needed a person's approval, approved and run to its verdict:
/// the ledger holds an approval spent by one call (two act chain entries).
fn approved_and_run() -> Shared {
    let (s, op) = approval_asked(vec![task("B", "none", 0.0, &["PAY"])]);
    s.engine(&["approve", &op, "--note", "pay once"]).expect_code(0);
    s.submit();
    s.worker("w1", 1, &[]).wait(RUN_DEADLINE).expect_code(0);
    assert_eq!(
        s.pg.psql("ledger", "SELECT string_agg(kind, ',' ORDER BY seq) FROM act_chain"),
        "approval,approval_spent"
    );
    s
}

const SQLITE_ONLY: [&str; 4] = ["no_hot_journal", "sqlite_integrity", "foreign_keys", "column_types"];

#[test]
fn a_healthy_ledger_passes_and_sqlite_only_checks_are_not_applicable() {
    let s = approved_and_run();
    let out = s.engine(&["--json", "verify"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["backend"], "postgres", "{v}");
    let passed: Vec<&str> = v["checks"].as_array().unwrap().iter().filter_map(|c| c.as_str()).collect();
    let skipped: Vec<&str> =
        v["not_applicable"].as_array().unwrap().iter().filter_map(|c| c["check"].as_str()).collect();
    assert_eq!(skipped, SQLITE_ONLY, "{v}");
    for name in
        ["schema", "lease_generation", "budget_counters", "attempt_traces", "approvals", "goal_verdicts", "act_chain"]
    {
        assert!(passed.contains(&name), "{name} ran and passed: {v}");
    }
    assert!(SQLITE_ONLY.iter().all(|n| !passed.contains(n)), "not applicable is not passed: {v}");
    let text = s.engine(&["verify"]);
    text.expect_code(0);
    assert!(text.stdout.contains("not applicable on postgres: sqlite_integrity"), "{}", text.stdout);
}

#[test]
fn an_edited_approval_row_is_named_as_tampered() {
    let s = approved_and_run();
    let id = s.pg.psql("ledger", "SELECT id FROM approvals");
    s.pg.psql("ledger", &format!("UPDATE approvals SET note = 'approved twice' WHERE id = {id}"));
    let out = s.engine(&["--json", "verify"]);
    out.expect(2, Some("STORE_TAMPERED"));
    let e = &out.json()["error"];
    assert_eq!(e["details"]["check"], "act_chain", "{}", out.describe());
    assert_eq!(e["details"]["entry"], format!("approvals row {id}"), "{}", out.describe());
    assert!(
        e["details"]["problem"].as_str().unwrap().contains("differs from its act chain entry 1"),
        "{}",
        out.describe()
    );
}

/// A copy of the real approval inserted with SQL (unspent, so no other
/// invariant minds it): only the act chain can tell, and it names the row.
#[test]
fn a_hand_inserted_approval_row_is_named_as_tampered() {
    let s = approved_and_run();
    s.pg.psql(
        "ledger",
        "INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, os_uid, os_user)
         SELECT operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, 'forged', at_ms, os_uid, os_user
         FROM approvals",
    );
    let id = s.pg.psql("ledger", "SELECT max(id) FROM approvals");
    let out = s.engine(&["--json", "verify"]);
    out.expect(2, Some("STORE_TAMPERED"));
    let e = &out.json()["error"];
    assert_eq!(e["details"]["check"], "act_chain", "{}", out.describe());
    assert_eq!(e["details"]["entry"], format!("approvals row {id}"), "{}", out.describe());
    assert_eq!(e["details"]["problem"], "is not on the act chain", "{}", out.describe());
}

/// A shared (non-chain) invariant, checked on PostgreSQL with the same SQL
/// as on SQLite: a goal's counters against a recount of its attempts.
#[test]
fn a_budget_counter_edited_by_hand_is_store_corrupt() {
    let s = approved_and_run();
    s.pg.psql("ledger", "UPDATE goals SET calls_used = calls_used + 5");
    let out = s.engine(&["--json", "verify"]);
    out.expect(2, Some("STORE_CORRUPT"));
    let e = &out.json()["error"];
    assert_eq!(e["details"]["check"], "budget_counters", "{}", out.describe());
    assert_eq!(e["details"]["entry"], "goal wide", "{}", out.describe());
}

/// A disabled append-only trigger is found by the schema check.
#[test]
fn a_disabled_append_only_trigger_is_found() {
    let s = approved_and_run();
    s.pg.psql("ledger", "ALTER TABLE act_chain DISABLE TRIGGER act_chain_append_only");
    let out = s.engine(&["--json", "verify"]);
    out.expect(2, Some("STORE_CORRUPT"));
    let e = &out.json()["error"];
    assert_eq!(e["details"]["check"], "schema", "{}", out.describe());
    assert_eq!(e["details"]["entry"], "trigger act_chain_append_only", "{}", out.describe());
}

/// Damage the shared checks must name on PostgreSQL as on SQLite (the
/// same SQL): (what is done to a copy of a healthy ledger, the check that
/// fails, words its finding contains). Each case on its own copy
/// (`CREATE DATABASE … TEMPLATE ledger`, `Pg::database_from`).
const DAMAGE: &[(&str, &str, &str)] = &[
    ("UPDATE evidence SET data = '{\"kind\": 7}' WHERE id = (SELECT min(id) FROM evidence)", "json_columns", "evidence "),
    ("UPDATE attempts SET request_json = '{' WHERE task_ref = 'B'", "json_columns", "`request_json` is not JSON"),
    ("UPDATE blobs SET data = 'x'::bytea, size = 1", "blobs", "hash to"),
    ("UPDATE revisions SET plan_json = replace(plan_json, 'every task once', 'every task twice')", "plan_digests", "revision 1"),
    ("UPDATE attempts SET generation = 99 WHERE task_ref = 'B'", "lease_generation", "generation 99, newer than its task's claim's"),
    ("UPDATE goals SET cost_used_micros = 5", "budget_counters", "recount"),
    ("UPDATE attempts SET try_no = 2 WHERE task_ref = 'B'", "tries_contiguous", "has tries 2, not 1 to 2"),
    ("UPDATE attempts SET state = 'dispatched' WHERE task_ref = 'B'", "attempt_traces", "has a receipt but is dispatched"),
    ("UPDATE attempts SET state = 'settled_ok' WHERE task_ref = 'B'", "settlements", "without a settlement"),
    // An edited act meets the act chain first (STORE_TAMPERED), as on SQLite.
    ("UPDATE approvals SET voided_by = consumed_by", "act_chain", "voided by attempt 1, which the act chain does not record"),
    ("UPDATE attempts SET state = 'effect_unknown' WHERE task_ref = 'PAY'; UPDATE tasks SET state = 'pending' WHERE task_ref = 'PAY'",
     "task_follows_attempt", "is effect_unknown but its task is pending"),
    ("UPDATE check_results SET passed = false WHERE scope = 'acceptance'", "goal_verdicts", "acceptance check A1"),
    ("UPDATE tasks SET state = 'blocked' WHERE task_ref = 'B'", "goal_verdicts", "task B is blocked"),
];

#[test]
fn the_shared_checks_name_the_same_damage_as_on_sqlite() {
    let s = approved_and_run();
    let mut failures = Vec::new();
    for (i, (sql, check, words)) in DAMAGE.iter().enumerate() {
        let db = format!("damaged_{i}");
        let url = s.pg.database_from(&db, "ledger");
        s.pg.psql(&db, sql);
        let out = s.ws.engine(&["--json", "verify", "--store", &url]);
        let doc = out.json();
        let error = &doc["error"];
        let code = if *check == "act_chain" { "STORE_TAMPERED" } else { "STORE_CORRUPT" };
        let ok = out.code() == 2
            && error["code"] == code
            && error["details"]["check"] == *check
            && error["message"].as_str().is_some_and(|m| m.contains(words));
        if !ok {
            failures.push(format!("{sql}\n  expected check {check} naming {words:?}, got exit {}: {doc}", out.code()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A person's `engine run --reuse-across-tool-change` on the shared store
/// (schema 8): on the act chain as its own kind, and `engine verify`'s
/// act-chain check accepts it. (A plain run there re-checks no completion,
/// docs/postgres.md: the act keeps nothing, and is recorded all the same.)
#[test]
fn reuse_across_a_tool_change_is_on_the_act_chain_and_verifies() {
    let s = Shared::new(&super::common::plan(vec![task("A", "none", 0.0, &[])]));
    s.engine(&["--json", "run", "plan.json"]).expect_code(0);
    s.engine(&["--json", "run", "plan.json", "--reuse-across-tool-change"]).expect_code(0);
    assert_eq!(
        s.pg.psql("ledger", "SELECT string_agg(kind, ',' ORDER BY seq) FROM act_chain"),
        "reuse_across_tool_change"
    );
    assert_eq!(s.pg.psql("ledger", "SELECT kind FROM person_requests"), "reuse_across_tool_change");
    s.engine(&["--json", "verify"]).expect_code(0);
}
