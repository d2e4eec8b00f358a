//! Every command against the PostgreSQL ledger, its schema, and what a
//! worker refuses.

use crate::common::{plan, task, Shared, GOAL};

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
