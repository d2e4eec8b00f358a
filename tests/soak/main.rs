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
//! SOAK_ITERATIONS=200 SOAK_SECONDS=240 cargo test -p engine-suite --test suite soak:: -- --nocapture   # what .ci/run adds
//! SOAK_ITERATIONS=2000 SOAK_SECONDS=3600 cargo test --release -p engine-suite --test suite soak:: -- --nocapture
//! ```
//!
//! Options, from the environment: `SOAK_ITERATIONS` (12), `SOAK_SECONDS`
//! (60), `SOAK_SEED` (from the clock), `SOAK_WORKERS` (2). Fails if any
//! session has a finding, each printed with its reproduction (seed,
//! session, plan, `--jobs` and the commands of the session).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::Receiver;
use crate::support;
use crate::support::kill::Kill;
use crate::support::person::{Ending, Session};
use crate::support::reference::{Instance, PLANS};
use crate::support::rng::Rng;

struct Options {
    iterations: usize,
    seconds: u64,
    seed: u64,
    workers: usize,
}

fn options() -> Options {
    let number = |name: &str| -> Option<u64> {
        let value = std::env::var(name).ok()?;
        Some(value.replace('_', "").parse().unwrap_or_else(|_| panic!("{name}={value}: a whole number, please")))
    };
    Options {
        iterations: number("SOAK_ITERATIONS").unwrap_or(12) as usize,
        seconds: number("SOAK_SECONDS").unwrap_or(60),
        seed: number("SOAK_SEED").unwrap_or_else(clock_seed),
        workers: number("SOAK_WORKERS").unwrap_or(2).max(1) as usize,
    }
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

#[test]
fn sessions_with_random_kills_end_as_a_person_would_have_them() {
    let o = options();
    eprintln!(
        "soak: seed {} — repeat with `SOAK_SEED={}`; up to {} iterations or {} s, {} workers",
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
    let told: String = findings.iter().map(|f| format!("finding: {f}\n\n")).collect();
    assert!(
        findings.is_empty(),
        "{told}soak: {} finding(s) in {} session(s), seed {}",
        findings.len(),
        sessions(&findings),
        o.seed
    );
}
