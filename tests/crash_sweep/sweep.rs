//! The crash sweep: for every reference plan, for the k-th engine command
//! of the person's session (k = 1, 2, …) and N = 1, 2, … until that
//! command finishes uncrashed, a fresh workspace runs the session with
//! `ENGINE_CRASH_AFTER_COMMITS=N` on command k — so the engine dies after
//! every commit that any command of the session makes — and the person
//! then acts until the goal ends (`support::person`). After each case the
//! checks of `support::checks` run against the providers' own logs, and
//! `engine verify` against the store. Any finding fails the test, with
//! its reproduction (plan, k, N and the commands of the session).

use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    fn row(&self) -> String {
        format!("{:4} {:4} {:5} {:5} {:5}", self.cases, self.crashes, self.commands, self.restarts, self.deliveries)
    }

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

/// Every plan's sweep, on two workers (each with its own receiver), in
/// `PLANS` order, with the time each took.
fn sweep_all() -> Vec<(Vec<Case>, Duration)> {
    let queue = Mutex::new(PLANS.to_vec());
    let done: Mutex<Vec<(Vec<Case>, Duration)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let rcv = Receiver::start(&["--observe"]);
                while let Some(plan) = queue.lock().unwrap().pop() {
                    let t = Instant::now();
                    let cases = sweep_plan(plan, &rcv);
                    done.lock().unwrap().push((cases, t.elapsed()));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(cases, _)| PLANS.iter().position(|p| *p == cases[0].plan));
    done
}

/// Run the sweep; print its size. Returns the findings, each with its
/// reproduction.
fn sweep() -> Vec<String> {
    let started = Instant::now();
    let done = sweep_all();
    let mut findings = Vec::new();
    let mut total = Figures::default();
    eprintln!("crash sweep: plan, cases (k, N), crashes, commands, of them after a crash, deliveries, time");
    for (cases, took) in &done {
        let mut f = Figures::default();
        for c in cases {
            f.add(c);
            total.add(c);
            for finding in &c.findings {
                findings.push(format!(
                    "[{} k={} N={}] {finding}\n  ending: {:?}\n  commands:\n{}",
                    c.plan, c.k, c.n, c.ending, c.transcript
                ));
            }
        }
        eprintln!("  {:13} {}  {:6.1}s", cases[0].plan, f.row(), took.as_secs_f64());
    }
    eprintln!(
        "crash sweep: {} plans × {} crash points ({} cases) × {} commands after a crash ({} commands, {} deliveries) in {:.1}s",
        PLANS.len(),
        total.crashes,
        total.cases,
        total.restarts,
        total.commands,
        total.deliveries,
        started.elapsed().as_secs_f64()
    );
    findings
}

#[test]
fn crash_sweep() {
    let findings = sweep();
    assert!(findings.is_empty(), "{} finding(s):\n\n{}", findings.len(), findings.join("\n\n"));
}
