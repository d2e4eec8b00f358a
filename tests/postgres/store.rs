//! Every command against the PostgreSQL ledger, its schema, and what a
//! worker refuses.

use super::common::{plan, task, Shared, GOAL};

#[test]
fn engine_run_on_postgres_is_a_worker_and_every_reading_command_works() {
    let s = Shared::new(&plan(vec![task("A", "none", 0.0, &[]), task("B", "local", 0.0, &["A"])]));
    let out = s.engine(&["--json", "run", "plan.json", "--jobs", "2"]);
    out.expect_code(0);
    assert_eq!(out.json()["goal_state"], "satisfied");
    let status = s.engine(&["--json", "status"]);
    status.expect_code(0);
    let j = status.json();
    assert_eq!(j["goal"]["state"].as_str().or(j["goal_state"].as_str()), Some("satisfied"), "{j}");
    assert!(!status.stdout.contains("127.0.0.1:") || !status.stdout.contains('@') || !status.stdout.contains(":@"));
    s.engine(&["explain", "B"]).expect_code(0);
    let log = s.engine(&["--json", "log"]);
    log.expect_code(0);
    assert!(log.stdout.contains("goal_submitted"), "{}", log.stdout);
    s.engine(&["report", "--json"]).expect_code(0);
    let goals = s.engine(&["--json", "goals"]);
    goals.expect_code(0);
    assert!(goals.stdout.contains(GOAL) && goals.stdout.contains("every task once"), "{}", goals.stdout);
    let log = s.engine(&["--json", "log", "--goal", GOAL]);
    log.expect_code(0);
    assert!(log.stdout.contains("run_finished"), "{}", log.stdout);
    let output = s.engine(&["output", "A"]);
    output.expect_code(0);
    // A second run of the same plan: registered already, nothing to do.
    let again = s.engine(&["--json", "run", "plan.json"]);
    again.expect_code(0);
    assert_eq!(crate::support::Ledger::open(std::path::Path::new(&s.url)).attempts().len(), 2);
}

#[test]
fn a_newer_schema_is_refused() {
    let s = Shared::new(&plan(vec![task("A", "none", 0.0, &[])]));
    s.submit();
    s.pg.psql("ledger", "UPDATE schema_meta SET version = 99");
    for args in [&["--json", "status"][..], &["--json", "submit", "plan.json"][..]] {
        let out = s.engine(args);
        out.expect(2, None);
        assert!(out.stdout.contains("SCHEMA_TOO_NEW"), "{args:?}: {}", out.describe());
    }
}

#[test]
fn a_worker_needs_a_shared_store_and_an_unreachable_one_is_a_clear_error() {
    let s = Shared::new(&plan(vec![task("A", "none", 0.0, &[])]));
    let out = s.ws.engine(&["--json", "worker", "--goal", GOAL]);
    out.expect(2, Some("USAGE_ERROR"));
    assert!(out.stdout.contains("postgres://"), "{}", out.stdout);
    let gone = s.ws.engine(&["--json", "status", "--store", "postgres://engine@127.0.0.1:1/none"]);
    gone.expect(2, Some("USAGE_ERROR"));
    assert!(gone.stdout.contains("cannot connect to PostgreSQL"), "{}", gone.stdout);
}

/// What schemas 3 to 7 added, taken out again: a ledger at schema 2 (the
/// CHECKs that later schemas widen are dropped and made again by them).
const SCHEMA_3_UNDONE: &str =
    "ALTER TABLE outputs DROP CONSTRAINT outputs_mode_check, DROP CONSTRAINT outputs_size_check,
       DROP CONSTRAINT outputs_path_check;
     DROP TABLE act_chain; DROP FUNCTION act_chain_append_only(); DROP TABLE request_ids; DROP TABLE person_requests;
     ALTER TABLE attempts DROP COLUMN sandbox, DROP COLUMN handle, DROP COLUMN handle_at_ms, DROP COLUMN spent_micros;
     ALTER TABLE approvals DROP COLUMN os_uid, DROP COLUMN os_user, DROP COLUMN cost_micros, DROP COLUMN expires_at_ms;
     ALTER TABLE settlements DROP COLUMN os_uid, DROP COLUMN os_user;
     UPDATE schema_meta SET version = 2;";

/// A ledger at schema 1 (this branch's first release) is migrated to the
/// current schema by the next writing command, in place, its rows kept: the class
/// `constraint_violated`, `attempts.protected_at_intent` and the state
/// `cancelled` are then accepted, and the old rows read as before.
#[test]
fn a_schema_1_ledger_is_migrated_with_its_rows() {
    let s = Shared::new(&plan(vec![task("A", "none", 0.0, &[])]));
    s.engine(&["--json", "run", "plan.json"]).expect_code(0);
    // Take the ledger back to schema 1 exactly: nothing of schema 3, the
    // CHECKs as they were, no protected_at_intent.
    s.pg.psql("ledger", SCHEMA_3_UNDONE);
    s.pg.psql(
        "ledger",
        "ALTER TABLE attempts DROP CONSTRAINT attempts_class_check;
         ALTER TABLE attempts ADD CONSTRAINT attempts_class_check CHECK (class IS NULL OR class IN ('validation_failed','provider_rejected','provider_unavailable','timeout','killed','environment','effect_unknown','unclassified'));
         ALTER TABLE attempts DROP COLUMN protected_at_intent;
         ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
         ALTER TABLE attempts ADD CONSTRAINT attempts_state_check CHECK (state IN ('intent_recorded','dispatched','receipt_recorded','succeeded','failed','effect_unknown','settled_ok','settled_not_run','abandoned'));
         ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
         ALTER TABLE tasks ADD CONSTRAINT tasks_state_check CHECK (state IN ('pending','ready','running','succeeded','reused','failed','blocked','effect_unknown','awaiting_approval'));
         UPDATE schema_meta SET version = 1;",
    );
    // A reader never migrates: it names the command that does.
    let read = s.engine(&["--json", "status"]);
    read.expect(2, Some("USAGE_ERROR"));
    assert!(read.stdout.contains("schema version 1"), "{}", read.describe());
    assert_eq!(s.pg.psql("ledger", "SELECT version FROM schema_meta"), "1");

    // A writing command migrates, and keeps every row.
    s.engine(&["--json", "run", "plan.json"]).expect_code(0);
    s.engine(&["--json", "status"]).expect_code(0);
    assert_eq!(s.pg.psql("ledger", "SELECT version FROM schema_meta"), "8");
    assert_eq!(s.pg.psql("ledger", "SELECT count(*) FROM attempts WHERE state = 'succeeded'"), "1");
    s.pg.psql(
        "ledger",
        "BEGIN;
         UPDATE attempts SET state = 'cancelled', class = 'constraint_violated', protected_at_intent = 'd';
         UPDATE tasks SET state = 'cancelled';
         ROLLBACK;",
    );
    let refused = s.pg.try_psql("ledger", "UPDATE tasks SET state = 'canceled'");
    assert!(refused.contains("tasks_state_check"), "{refused}");
}

/// Schema 3 (SQLite's 6 and 7) taken back out: a ledger at schema 2 with
/// an approval already spent and a settlement is migrated by the next
/// writing command, its acts adopted onto the act chain in the order they
/// were recorded (so they are not refused as tampered), the new columns
/// and tables there with their CHECKs.
#[test]
fn a_schema_2_ledger_is_migrated_to_3_and_its_acts_adopted() {
    let mut t = task("PAY", "external", 0.0, &[]);
    t["requires_approval"] = serde_json::json!(true);
    let s = Shared::new(&plan(vec![t]));
    let asked = s.engine(&["--json", "run", "plan.json"]);
    asked.expect(4, Some("APPROVAL_REQUIRED"));
    let op = asked.json()["awaiting_approval"][0]["operation_id"].as_str().expect("the operation").to_string();
    s.engine(&["approve", &op, "--note", "pay once"]).expect_code(0);
    s.engine(&["--json", "run", "plan.json"]).expect_code(0);
    s.pg.psql("ledger", SCHEMA_3_UNDONE);
    let read = s.engine(&["--json", "status"]);
    read.expect(2, Some("USAGE_ERROR"));
    assert!(read.stdout.contains("schema version 2"), "{}", read.describe());

    s.engine(&["--json", "run", "plan.json"]).expect_code(0);
    assert_eq!(s.pg.psql("ledger", "SELECT version FROM schema_meta"), "8");
    assert_eq!(
        s.pg.psql("ledger", "SELECT string_agg(kind, ',' ORDER BY seq) FROM act_chain"),
        "approval,approval_spent"
    );
    assert_eq!(s.pg.psql("ledger", "SELECT count(*) FROM attempts WHERE handle IS NULL AND sandbox IS NULL"), "1");
    // The adopted approval is vouched for: reading the goal's acts works.
    s.engine(&["--json", "status"]).expect_code(0);
    let refused = s.pg.try_psql("ledger", "UPDATE attempts SET handle = '{\"no\": 1}'");
    assert!(refused.contains("attempts_handle_check"), "{refused}");
    let refused = s.pg.try_psql("ledger", "INSERT INTO person_requests (kind, goal_id, revision, actor, os_uid, os_user, data, at_ms) SELECT 'undo', goal_id, revision, 'a', 0, 'u', '{}', 1 FROM revisions");
    assert!(refused.contains("person_requests_kind_check"), "{refused}");
}
