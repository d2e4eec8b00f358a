//! The crash sweep: for every reference plan, for the k-th engine command
//! of the person's session (k = 1, 2, …) and N = 1, 2, … until that
//! command finishes uncrashed, a fresh workspace runs the session with
//! `ENGINE_CRASH_AFTER_COMMITS=N` on command k — so the engine dies after
//! every commit that any command of the session makes — and the person
//! then acts until the goal ends (`support::person`). After each case the
//! checks of `support::checks` run against the providers' own logs, and
//! `engine verify` against the store. Any finding fails the test, with
//! its reproduction (plan, k, N and the commands of the session).

use std::time::Instant;

use crate::common::Receiver;
use crate::support::checks;
use crate::support::kill::Kill;
use crate::support::person::{Ending, Session};
use crate::support::reference::{Instance, PLANS};

/// Bound on N for one command (no command of a reference plan commits
/// anywhere near this often).
const COMMITS_MAX: u64 = 200;

/// One (plan, k, N) case.
struct Case {
    plan: &'static str,
    k: usize,
    n: u64,
    crashed: bool,
    commands: usize,
    deliveries: usize,
    ending: Ending,
    findings: Vec<String>,
    transcript: String,
}

#[derive(Default)]
struct Figures {
    cases: usize,
    crashes: usize,
    commands: usize,
    restarts: usize,
    deliveries: usize,
}

impl Figures {
    fn add(&mut self, c: &Case) {
        self.cases += 1;
        self.crashes += usize::from(c.crashed);
        self.commands += c.commands;
        // The commands a person issued after the crash.
        self.restarts += if c.crashed { c.commands - c.k } else { 0 };
        self.deliveries += c.deliveries;
    }
}

fn run_case(plan: &'static str, rcv: &Receiver, k: usize, n: u64) -> Case {
    let inst = Instance::new(plan, rcv, &format!("k{k}n{n}"));
    let mut s = Session::new(&inst, rcv, 1, |no| if no == k { Kill::AfterCommits(n) } else { Kill::Never });
    let ending = s.run_to_end();
    checks::after_session(&mut s, &ending);
    if let Ending::Stuck(why) = &ending {
        s.finding(format!("the session did not end satisfied: {why}"));
    }
    let crashed = s.history.iter().any(|c| c.no == k && c.killed);
    let deliveries = inst.deliveries(rcv).len();
    Case {
        plan,
        k,
        n,
        crashed,
        commands: s.history.len(),
        deliveries,
        ending,
        transcript: s.transcript(),
        findings: std::mem::take(&mut s.findings),
    }
}

/// Every (k, N) of one plan, until the session has no k-th command.
fn sweep_plan(plan: &'static str, rcv: &Receiver) -> Vec<Case> {
    let mut cases = Vec::new();
    for k in 1.. {
        for n in 1..=COMMITS_MAX {
            let case = run_case(plan, rcv, k, n);
            let reached = case.commands >= k;
            let crashed = case.crashed;
            cases.push(case);
            if !reached {
                return cases;
            }
            if !crashed {
                break;
            }
            assert!(n < COMMITS_MAX, "{plan}: command {k} still crashes after {COMMITS_MAX} commits");
        }
    }
    cases
}

/// One plan's sweep: prints its size and returns the findings, each with
/// its reproduction. Each plan is a test of its own (below), so the test
/// harness spreads the six over its threads beside the suite's other
/// tests: run as one test on two workers, the sweep was the suite's
/// longest test and set its wall time (254 s at a load of 15, where the
/// whole suite took 277 s in the last cold CI run).
fn sweep(plan: &'static str) -> Vec<String> {
    let started = Instant::now();
    let rcv = Receiver::start(&["--observe"]);
    let cases = sweep_plan(plan, &rcv);
    let mut findings = Vec::new();
    let mut f = Figures::default();
    for c in &cases {
        f.add(c);
        for finding in &c.findings {
            findings.push(format!(
                "[{} k={} N={}] {finding}\n  ending: {:?}\n  commands:\n{}",
                c.plan, c.k, c.n, c.ending, c.transcript
            ));
        }
    }
    eprintln!(
        "crash sweep of {plan}: {} crash points ({} cases) × {} commands after a crash ({} commands, {} deliveries) in {:.1}s",
        f.crashes,
        f.cases,
        f.restarts,
        f.commands,
        f.deliveries,
        started.elapsed().as_secs_f64()
    );
    findings
}

#[track_caller]
fn sweep_finds_nothing(plan: &'static str) {
    let findings = sweep(plan);
    assert!(findings.is_empty(), "{} finding(s):\n\n{}", findings.len(), findings.join("\n\n"));
}

#[test]
fn command() {
    sweep_finds_nothing("command");
}

#[test]
fn agent() {
    sweep_finds_nothing("agent");
}

#[test]
fn http_observe() {
    sweep_finds_nothing("http-observe");
}

#[test]
fn http_blind() {
    sweep_finds_nothing("http-blind");
}

#[test]
fn mcp_observe() {
    sweep_finds_nothing("mcp-observe");
}

#[test]
fn mcp_blind() {
    sweep_finds_nothing("mcp-blind");
}

/// Every reference plan has its test above.
#[test]
fn every_reference_plan_is_swept() {
    let src = include_str!("sweep.rs");
    for plan in PLANS {
        let line = format!("sweep_finds_nothing(\"{plan}\");");
        assert!(src.contains(&line), "the crash sweep has no test for the reference plan {plan}");
    }
}
