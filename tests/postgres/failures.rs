//! Workers that die, stop (SIGSTOP, or a person's SIGINT), or lose their
//! database — and two that race for one approval.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::common::{approval_asked, plan, task, wide, Shared};
use crate::support::{Ledger, RUN_DEADLINE};

/// The lease the first worker's claims get: short, so a test waits little.
const SHORT_LEASE: (&str, &str) = ("ENGINE_CLAIM_LEASE_MS", "1500");

fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: signalling a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

#[test]
fn a_worker_killed_mid_task_is_reconciled_by_the_rules_and_nothing_is_sent_twice() {
    // A reads only (safe to re-run); B changes something outside.
    let s = Shared::new(&plan(vec![task("A", "none", 3.0, &[]), task("B", "external", 3.0, &[])]));
    s.submit();
    let mut first = s.worker("w1", 2, &[SHORT_LEASE]);
    s.wait_started("A");
    s.wait_started("B");
    first.kill9();

    let out = s.worker("w2", 2, &[]).wait(RUN_DEADLINE);
    // B's effect may or may not have happened: a person must settle it.
    out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let starts = s.starts();
    assert_eq!(starts.get("B"), Some(&1), "an external effect is never re-sent without a person: {starts:?}");
    assert_eq!(starts.get("A"), Some(&2), "a read-only task is re-run after its worker died: {starts:?}");
    let ledger = Ledger::open(Path::new(&s.url));
    let b: Vec<_> = ledger.attempts_of("B");
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(b[0].state, "effect_unknown");
    let a: Vec<String> = ledger.attempts_of("A").into_iter().map(|a| a.state).collect();
    assert_eq!(a, ["abandoned", "succeeded"]);
    let takeovers = ledger.events_of("claim_taken_over");
    assert_eq!(
        takeovers.len(),
        2,
        "both claims of the dead worker were taken over (at once: its pid is gone on this host): {takeovers:?}"
    );
}

#[test]
fn a_worker_stopped_past_its_lease_writes_nothing_once_resumed() {
    let s = Shared::new(&plan(vec![task("A", "none", 3.0, &[])]));
    s.submit();
    let mut first = s.worker("w1", 1, &[SHORT_LEASE]);
    s.wait_started("A");
    signal(first.pid(), libc::SIGSTOP);

    // The second worker takes the claim over once it expired, re-runs the
    // read-only task, and judges the goal.
    let out = s.worker("w2", 1, &[]).wait(RUN_DEADLINE);
    out.expect_code(0);
    // The first worker's provider kept running while it was stopped: wait
    // for it to end, so its answer is there when the worker resumes.
    crate::support::wait_until(Duration::from_secs(20), "the first call ended", || {
        (s.calls().iter().filter(|c| c.0 == "A" && c.1 == "end").count() == 2).then_some(())
    });
    let before = Ledger::open(Path::new(&s.url)).events().len();
    signal(first.pid(), libc::SIGCONT);
    let stale = first.wait(RUN_DEADLINE);
    stale.expect(70, Some("STALE_CLAIM"));

    let ledger = Ledger::open(Path::new(&s.url));
    assert_eq!(ledger.events().len(), before, "the resumed worker wrote nothing");
    let a: Vec<String> = ledger.attempts_of("A").into_iter().map(|a| a.state).collect();
    assert_eq!(a, ["abandoned", "succeeded"], "its attempt stays as the takeover left it");
    assert_eq!(ledger.goal_state(), "satisfied");
}

#[test]
fn postgres_restarted_during_a_run_loses_no_record_and_duplicates_nothing() {
    let s = Shared::own(&wide(20, 0.3));
    s.submit();
    let mut workers = vec![s.worker("w1", 2, &[]), s.worker("w2", 2, &[])];
    crate::support::wait_until(Duration::from_secs(30), "a few tasks done", || {
        (s.calls().iter().filter(|c| c.1 == "end").count() >= 4).then_some(())
    });
    s.pg.crash_and_restart(Duration::from_millis(500));
    for w in &mut workers {
        let out = w.wait(RUN_DEADLINE);
        out.expect_code(0);
    }
    let starts = s.starts();
    assert_eq!(starts.len(), 21, "{starts:?}");
    assert!(starts.values().all(|&c| c == 1), "nothing ran twice: {starts:?}");
    let ledger = Ledger::open(Path::new(&s.url));
    let attempts = ledger.attempts();
    assert_eq!(attempts.len(), 21, "no attempt lost or doubled: {attempts:?}");
    assert!(attempts.iter().all(|a| a.state == "succeeded"));
    let receipts = ledger.events_of("receipt_recorded").len();
    assert_eq!(receipts, 21, "every receipt recorded once");
    assert_eq!(ledger.goal_state(), "satisfied");
}

#[test]
fn two_workers_racing_for_one_approval_make_exactly_one_call() {
    let (s, op) = approval_asked(vec![]);
    s.engine(&["approve", &op, "--note", "pay once"]).expect_code(0);
    s.submit();

    let mut racers = vec![s.worker("w1", 1, &[]), s.worker("w2", 1, &[])];
    for w in &mut racers {
        w.wait(RUN_DEADLINE).expect_code(0);
    }
    assert_eq!(s.starts().get("PAY"), Some(&1), "one approval, one call");
    let ledger = Ledger::open(Path::new(&s.url));
    let approvals = ledger.approvals();
    assert_eq!(approvals.len(), 1);
    assert!(approvals[0].consumed_by.is_some(), "spent by the call: {approvals:?}");
    assert_eq!(ledger.attempts_of("PAY").len(), 1);
}

#[test]
fn two_workers_never_pass_a_call_budget_together() {
    let mut p = wide(8, 0.3);
    p["budgets"]["max_provider_calls"] = json!(3);
    let s = Shared::new(&p);
    s.submit();
    let mut racers = vec![s.worker("w1", 4, &[]), s.worker("w2", 4, &[])];
    for w in &mut racers {
        w.wait(RUN_DEADLINE).expect(5, Some("BUDGET_EXHAUSTED"));
    }
    let calls: usize = s.starts().values().sum();
    assert_eq!(calls, 3, "the budget allows three calls in all: {:?}", s.starts());
    assert_eq!(Ledger::open(Path::new(&s.url)).attempts().len(), 3);
}

#[test]
fn a_worker_stopped_by_a_person_cancels_its_task_gives_its_claim_back_and_another_runs_it() {
    let s = Shared::new(&plan(vec![task("A", "none", 5.0, &[])]));
    s.submit();
    let mut first = s.worker("w1", 1, &[]);
    s.wait_started("A");
    signal(first.pid(), libc::SIGINT);
    // The stop ends the provider's process group and records the attempt
    // as a person's stop: exit 130, as after Ctrl-C in `engine run`.
    let out = first.wait(RUN_DEADLINE);
    out.expect_code(130);
    let ledger = Ledger::open(Path::new(&s.url));
    let a: Vec<String> = ledger.attempts_of("A").into_iter().map(|a| a.state).collect();
    assert_eq!(a, ["cancelled"], "{}", out.describe());
    assert_eq!(ledger.events_of("run_stopped").len(), 1);
    assert!(!s.calls().iter().any(|c| c.0 == "A" && c.1 == "end"), "the stopped call did not run on");

    // The stopped worker gave its claim back: the next worker takes the
    // task at once (no takeover after a lease) and runs it again.
    let out = s.worker("w2", 1, &[]).wait(RUN_DEADLINE);
    out.expect_code(0);
    let ledger = Ledger::open(Path::new(&s.url));
    assert!(ledger.events_of("claim_taken_over").is_empty(), "{:?}", ledger.events_of("claim_taken_over"));
    let a: Vec<String> = ledger.attempts_of("A").into_iter().map(|a| a.state).collect();
    assert_eq!(a, ["cancelled", "succeeded"]);
    assert_eq!(s.starts().get("A"), Some(&2));
    assert_eq!(ledger.goal_state(), "satisfied");
}
