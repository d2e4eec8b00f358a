//! Several workers on one goal: every task run exactly once, the goal
//! judged once.

use std::collections::BTreeSet;

use super::common::{wide, Shared};
use crate::support::RUN_DEADLINE;

fn workers_share_a_wide_plan(n: usize) {
    let s = Shared::new(&wide(20, 0.2));
    s.submit();
    let mut workers: Vec<_> = (0..n).map(|i| s.worker(&format!("w{i}"), 2, &[])).collect();
    let pids: BTreeSet<i32> = workers.iter().map(|w| w.pid()).collect();
    for w in &mut workers {
        let out = w.wait(RUN_DEADLINE);
        out.expect_code(0);
        assert_eq!(out.json()["goal_state"], "satisfied", "{}", out.describe());
    }
    let starts = s.starts();
    assert_eq!(starts.len(), 21, "every task ran: {starts:?}");
    assert!(starts.values().all(|&c| c == 1), "no task ran twice: {starts:?}");
    let ran_in: BTreeSet<i32> = s.calls().iter().map(|c| c.2).collect();
    assert!(ran_in.is_subset(&pids), "calls came from the workers: {ran_in:?} vs {pids:?}");
    assert!(ran_in.len() >= 2, "the work was shared: {ran_in:?}");
    let ledger = crate::support::Ledger::open(std::path::Path::new(&s.url));
    let attempts = ledger.attempts();
    assert_eq!(attempts.len(), 21, "one attempt per task");
    assert!(attempts.iter().all(|a| a.state == "succeeded"), "{attempts:?}");
    assert_eq!(ledger.events_of("acceptance_checked").len(), 1, "the goal was judged once");
    assert_eq!(ledger.events_of("run_finished").len(), 1, "one verdict");
}

#[test]
fn two_workers_run_every_task_of_a_20_task_plan_once() {
    workers_share_a_wide_plan(2);
}

#[test]
fn three_workers_run_every_task_of_a_20_task_plan_once() {
    workers_share_a_wide_plan(3);
}
