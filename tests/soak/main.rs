//! The soak (issue 9): random SIGKILLs at random times across sessions of
//! the reference plans, each session then carried to its end by the
//! person of `support::person` and checked like a crash-sweep case
//! (`support::checks`: the providers' own delivery logs and `engine
//! verify`). Bounded by iterations and by time; seeded, and the seed is
//! printed so a run can be repeated (kill times are wall-clock, so a
//! repeat draws the same plans and delays, not always the same instants).
//!
//! `cargo test` runs a smoke of it (12 iterations); longer ones by name:
//!
//! ```sh
//! cargo test -p engine --test soak -- --iterations 200 --seconds 240          # what .ci/run adds
//! cargo test --release -p engine --test soak -- --iterations 2000 --seconds 3600
//! ```
//!
//! Options: `--iterations N` (12), `--seconds S` (60), `--seed X` (from
//! the clock), `--workers W` (2). A name filter given to `cargo test` that
//! is not `soak` skips it, as libtest would. Exits 1 if any session has a
//! finding, each printed with its reproduction (seed, session, plan,
//! `--jobs` and the commands of the session).

#[path = "../unknown_outcomes/common.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::Receiver;
use support::kill::Kill;
use support::person::{Ending, Session};
use support::reference::{Instance, PLANS};
use support::rng::Rng;

struct Options {
    iterations: usize,
    seconds: u64,
    seed: u64,
    workers: usize,
    /// `cargo test NAME` with a NAME that does not match this binary.
    filtered_out: bool,
}

fn options() -> Options {
    let mut o = Options { iterations: 12, seconds: 60, seed: clock_seed(), workers: 2, filtered_out: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} takes a whole number"))
        };
        match a.as_str() {
            "--iterations" => o.iterations = value("--iterations") as usize,
            "--seconds" => o.seconds = value("--seconds"),
            "--seed" => o.seed = value("--seed"),
            "--workers" => o.workers = value("--workers").max(1) as usize,
            // libtest's own flags, which `cargo test -- …` passes to every test binary.
            "--nocapture" | "--quiet" | "-q" | "--ignored" | "--include-ignored" | "--show-output" | "--exact" => {}
            "--list" => o.filtered_out = true,
            "--test-threads" | "--color" | "--format" => {
                args.next();
            }
            other if other.starts_with("-") => panic!("unknown option {other}"),
            filter => o.filtered_out |= !"soak".contains(filter),
        }
    }
    o
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

/// What the soak counted.
#[derive(Default)]
struct Figures {
    iterations: usize,
    kills: usize,
    commands: usize,
    deliveries: usize,
    satisfied: usize,
}

impl Figures {
    fn add(&mut self, f: &Figures) {
        self.iterations += f.iterations;
        self.kills += f.kills;
        self.commands += f.commands;
        self.deliveries += f.deliveries;
        self.satisfied += f.satisfied;
    }
}

/// How long an uncrashed first run of each plan takes here: kills are
/// drawn uniformly between 0 and a little more than that.
fn measure(rcv: &Receiver) -> Vec<Duration> {
    PLANS
        .iter()
        .map(|plan| {
            let inst = Instance::new(plan, rcv, &format!("measure-{}", clock_seed()));
            let started = Instant::now();
            let _ = support::kill::run(&inst.ws, &["run", "plan.json", "--jobs", "1"], Kill::Never);
            started.elapsed().mul_f64(1.2).max(Duration::from_millis(20))
        })
        .collect()
}

/// One session: a plan, up to 3 kills at random times of random commands
/// (each command is killed with probability 0.7 while kills are left).
fn iteration(rng: &mut Rng, rcv: &Receiver, spans: &[Duration], label: &str) -> (Figures, Vec<String>) {
    let which = rng.below(PLANS.len() as u64) as usize;
    let plan = PLANS[which];
    let span_ms = spans[which].as_millis() as u64;
    let inst = Instance::new(plan, rcv, label);
    let mut kills_left = 1 + rng.below(3);
    let mut draw = Rng::new(rng.next_u64());
    let jobs = 1 + rng.below(2) as usize;
    let mut s = Session::new(&inst, rcv, jobs, move |_| {
        if kills_left > 0 && draw.chance(0.7) {
            kills_left -= 1;
            // One kill in five lands in the first 20 ms: start-up, store
            // creation, lease takeover.
            let window = if draw.chance(0.2) { 20 } else { span_ms };
            Kill::After(Duration::from_millis(draw.below(window + 1)))
        } else {
            Kill::Never
        }
    });
    let ending = s.run_to_end();
    support::checks::after_session(&mut s, &ending);
    if let Ending::Stuck(why) = &ending {
        s.finding(format!("the session did not end satisfied: {why}"));
    }
    let figures = Figures {
        iterations: 1,
        kills: s.kills,
        commands: s.history.len(),
        deliveries: inst.deliveries(rcv).len(),
        satisfied: usize::from(ending == Ending::Satisfied),
    };
    let findings = s
        .findings
        .iter()
        .map(|f| format!("[{label} {plan} --jobs {jobs}] {f}\n  commands:\n{}", s.transcript()))
        .collect();
    (figures, findings)
}

/// Sessions on `o.workers` workers until the iterations or the time run
/// out; the totals and every finding.
fn soak(o: &Options) -> (Figures, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(o.seconds);
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Figures::default());
    let findings: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for worker in 0..o.workers {
            let (next, totals, findings) = (&next, &totals, &findings);
            scope.spawn(move || {
                let rcv = Receiver::start(&["--observe"]);
                let spans = measure(&rcv);
                let mut rng = Rng::new(o.seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= o.iterations || Instant::now() >= deadline {
                        break;
                    }
                    let (f, mut found) = iteration(&mut rng, &rcv, &spans, &format!("s{}-w{worker}-i{i}", o.seed));
                    totals.lock().unwrap().add(&f);
                    findings.lock().unwrap().append(&mut found);
                }
            });
        }
    });
    (totals.into_inner().unwrap(), findings.into_inner().unwrap())
}

/// The sessions (labels) a list of findings comes from.
fn sessions(findings: &[String]) -> usize {
    findings.iter().filter_map(|f| f.split(']').next()).collect::<std::collections::HashSet<_>>().len()
}

fn main() {
    let o = options();
    if o.filtered_out {
        eprintln!("soak: filtered out");
        return;
    }
    eprintln!(
        "soak: seed {} — repeat with `--seed {}`; up to {} iterations or {} s, {} workers",
        o.seed, o.seed, o.iterations, o.seconds, o.workers
    );
    let started = Instant::now();
    let (t, findings) = soak(&o);
    eprintln!(
        "soak: seed {}: {} iterations, {} SIGKILLs, {} commands, {} deliveries, {} satisfied, in {:.1} s",
        o.seed,
        t.iterations,
        t.kills,
        t.commands,
        t.deliveries,
        t.satisfied,
        started.elapsed().as_secs_f64()
    );
    for f in &findings {
        eprintln!("finding: {f}\n");
    }
    eprintln!("soak: {} finding(s) in {} session(s)", findings.len(), sessions(&findings));
    if !findings.is_empty() {
        std::process::exit(1);
    }
}
