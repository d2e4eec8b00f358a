//! The core-model simulation (`engine::sim::core`): the real run core
//! against an in-memory ledger and a seeded world, no SQLite. Every seed
//! of its CI range holds every invariant; each planted fault that lives
//! in the core is caught within that range, and the same seed without it
//! holds.
//!
//! - `SIM_CORE_SEED=123` runs seed 123 alone and prints its story;
//!   with `SIM_CORE_FAULT=send-twice` (names, comma-separated) planted.
//! - `SIM_CORE_SEEDS=N` runs N seeds instead of the CI range's 100,000.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use engine::sim::core::{simulate, Report, NO_RESOLUTION_WITHOUT_EVIDENCE};
use engine::sim::Fault;

/// Seeds CI runs, from 0: most of the simulation's seeds (the full
/// stack's 5,000 are the sample against SQLite).
const CI_SEEDS: u64 = 100_000;

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok())
}

fn story(r: &Report) -> String {
    let mut s = String::new();
    for f in &r.findings {
        s.push_str(&format!("FINDING core-model seed {}: {f}\n", r.seed));
    }
    for line in &r.trace {
        s.push_str(&format!("  {line}\n"));
    }
    s.push_str(&format!("reproduce: {}\n", r.reproduction()));
    s
}

/// What a range of seeds did.
#[derive(Default, Debug)]
struct Tally {
    seeds: u64,
    processes: u64,
    crashes: u64,
    power_losses: u64,
    requests: u64,
    sends: u64,
}

/// Run seeds `0..count` on every core until one matches `stop`; the
/// matching reports, lowest seed first.
fn sweep(count: u64, faults: &[Fault], stop: impl Fn(&Report) -> bool + Sync) -> (Vec<Report>, Tally) {
    let next = AtomicU64::new(0);
    let found = AtomicBool::new(false);
    let matched = Mutex::new(Vec::new());
    let tally = Mutex::new(Tally::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::SeqCst);
                if seed >= count || found.load(Ordering::SeqCst) {
                    return;
                }
                let r = simulate(seed, faults);
                {
                    let mut t = tally.lock().unwrap();
                    t.seeds += 1;
                    t.processes += r.processes;
                    t.crashes += r.crashes;
                    t.power_losses += r.power_losses;
                    t.requests += r.requests;
                    t.sends += r.sends;
                }
                if stop(&r) {
                    found.store(true, Ordering::SeqCst);
                    matched.lock().unwrap().push(r);
                }
            });
        }
    });
    let mut matched = matched.into_inner().unwrap();
    matched.sort_by_key(|r| r.seed);
    (matched, tally.into_inner().unwrap())
}

#[test]
fn every_core_model_seed_holds_every_invariant() {
    if let Some(seed) = env_number("SIM_CORE_SEED") {
        let names = std::env::var("SIM_CORE_FAULT").unwrap_or_default();
        let faults: Vec<Fault> = names.split(',').filter_map(Fault::named).collect();
        let r = simulate(seed, &faults);
        println!("{}", r.trace.join("\n"));
        assert!(r.passed(), "\n{}", story(&r));
        println!(
            "core-model seed {seed}: {} processes, {} requests, {} sends, no finding",
            r.processes, r.requests, r.sends
        );
        return;
    }
    let count = env_number("SIM_CORE_SEEDS").unwrap_or(CI_SEEDS);
    let began = Instant::now();
    let (failed, t) = sweep(count, &[], |r| !r.passed());
    let secs = began.elapsed().as_secs_f64();
    println!(
        "core-model simulation: {} seeds: {} processes, {} crashes ({} power losses), {} requests, {} sends \
         in {secs:.2} s ({:.0} seeds/s, {:.1} µs a seed)",
        t.seeds,
        t.processes,
        t.crashes,
        t.power_losses,
        t.requests,
        t.sends,
        t.seeds as f64 / secs.max(1e-9),
        secs * 1e6 / (t.seeds.max(1) as f64)
    );
    if let Some(r) = failed.first() {
        panic!("\n{}", story(r));
    }
    assert_eq!(t.seeds, count, "every seed of the range ran");
    // The range exercises what the invariants are about.
    assert!(t.crashes > count / 10 && t.power_losses > 0 && t.sends > count, "{t:?}");
}

/// The core-model simulation catches `fault` within the CI range as a
/// finding of `invariant`; the same seed without it holds.
fn caught(fault: Fault, invariant: &str) {
    let (found, t) = sweep(CI_SEEDS, &[fault], |r| r.findings.iter().any(|f| f.invariant == invariant));
    let Some(r) = found.first() else {
        panic!("planted fault {} was not caught by the core model in {} seeds", fault.name(), t.seeds);
    };
    let finding = r.findings.iter().find(|f| f.invariant == invariant).unwrap();
    println!(
        "planted fault {} caught by core-model seed {} ({} seeds tried): {finding}",
        fault.name(),
        r.seed,
        t.seeds
    );
    println!("reproduce: {}", r.reproduction());
    let clean = simulate(r.seed, &[]);
    assert!(clean.passed(), "core-model seed {} fails without the fault too:\n{}", r.seed, story(&clean));
}

#[test]
fn a_call_sent_before_its_intent_commits_is_caught_by_the_core_model() {
    caught(Fault::SendBeforeCommit, "no send without a committed intent");
}

#[test]
fn a_call_sent_twice_is_caught_by_the_core_model() {
    caught(Fault::SendTwice, "one try is never sent twice");
}

#[test]
fn a_re_send_after_a_restart_is_caught_by_the_core_model() {
    caught(Fault::ResendOnRestart, "no re-send of an unknown outcome without a person's act");
}

#[test]
fn an_abandoned_unsafe_try_is_caught_by_the_core_model_as_a_resolution_without_evidence() {
    caught(Fault::ResendOnRestart, NO_RESOLUTION_WITHOUT_EVIDENCE);
}

#[test]
fn a_held_task_started_is_caught_by_the_core_model() {
    caught(Fault::StartHeldTask, "a held task never starts an attempt while held");
}

#[test]
fn an_answer_the_engine_made_up_is_caught_by_the_core_model() {
    caught(Fault::AnswerOnItsOwn, "no answer sent without a person's act");
}

#[test]
fn a_call_to_a_server_whose_tools_could_not_be_read_is_caught_by_the_core_model() {
    caught(Fault::SendWithoutInventory, "no call to a server whose tools could not be read");
}

#[test]
fn one_core_model_seed_is_one_run() {
    for seed in [3, 41, 977] {
        let (a, b) = (simulate(seed, &[]), simulate(seed, &[]));
        assert_eq!((a.requests, a.sends, a.crashes), (b.requests, b.sends, b.crashes));
        assert_eq!(a.trace, b.trace, "core-model seed {seed} told two stories");
    }
}
