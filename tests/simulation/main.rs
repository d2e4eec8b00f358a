//! The deterministic simulator (`engine/src/sim/`) as a suite: every seed
//! of the CI range holds every invariant; each planted fault is caught
//! within that range and names its seed; one seed is one run.
//!
//! A test of the simulator's own package (`simulator/`,
//! `engine-simulator`), built with every other test in one cargo
//! invocation (`.ci/test`); the engine library's hooks it arms stay
//! dormant in the `engine` binary the other suites run:
//!
//! - `SIM_SEED=123 cargo test -p engine-simulator --test simulation` runs seed 123
//!   alone and prints its story (the same as `engine-sim --seed 123`).
//! - `SIM_SEEDS=N` runs N seeds instead of the CI range's 5,000;
//!   `SIM_STEPS=M` lets each take M steps instead of 400.
//! - A seed that breaks an invariant fails the test with its findings,
//!   the last lines of its story, and the one line that runs it again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use engine::sim::{simulate, Config, Fault, Report};

/// The core alone against an in-memory ledger and a seeded world.
mod core_model;

/// Seeds CI runs (`.ci/test`), from 0: the full-stack sample beside the
/// core model's 100,000 (docs/testing.md, "Which seeds run on what").
const CI_SEEDS: u64 = 5_000;
/// Steps a seed may take.
const STEPS: u64 = 400;
/// Lines of a failing seed's story shown.
const STORY_LINES: usize = 60;

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok())
}

fn steps() -> u64 {
    env_number("SIM_STEPS").unwrap_or(STEPS)
}

/// Each seed's folder: beside cargo's build, never where a provider may
/// write (the engine refuses such a store).
fn base() -> PathBuf {
    std::env::var_os("ENGINE_SIM_DIR").map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from)
}

fn config(seed: u64, faults: &[Fault]) -> Config {
    Config { seed, steps: steps(), faults: faults.to_vec(), base: base() }
}

/// A failing seed, told: what broke, how it came to it, how to run it again.
fn story(r: &Report) -> String {
    let mut s = String::new();
    for f in &r.findings {
        s.push_str(&format!("FINDING seed {}: {f}\n", r.seed));
    }
    let from = r.trace.len().saturating_sub(STORY_LINES);
    for line in &r.trace[from..] {
        s.push_str(&format!("  {line}\n"));
    }
    s.push_str(&format!(
        "reproduce: {}   (or SIM_SEED={} cargo test -p engine-simulator --test simulation)\n",
        r.reproduction(),
        r.seed
    ));
    s
}

/// What a range of seeds did.
#[derive(Default)]
struct Tally {
    seeds: u64,
    steps: u64,
    commands: u64,
    crashes: u64,
    power_losses: u64,
    deliveries: u64,
}

/// Run seeds `0..count` on every core, each seed once, until one matches
/// `stop` (if given); the matching reports, lowest seed first.
fn sweep(count: u64, faults: &[Fault], stop: impl Fn(&Report) -> bool + Sync) -> (Vec<Report>, Tally) {
    let next = AtomicU64::new(0);
    let found = AtomicBool::new(false);
    let matched = Mutex::new(Vec::new());
    let tally = Mutex::new(Tally::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                if found.load(Ordering::SeqCst) {
                    return;
                }
                let seed = next.fetch_add(1, Ordering::SeqCst);
                if seed >= count {
                    return;
                }
                let r = simulate(&config(seed, faults));
                {
                    let mut t = tally.lock().unwrap();
                    t.seeds += 1;
                    t.steps += r.steps;
                    t.commands += r.commands;
                    t.crashes += r.crashes;
                    t.power_losses += r.power_losses;
                    t.deliveries += r.deliveries;
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
fn every_seed_holds_every_invariant() {
    if let Some(seed) = env_number("SIM_SEED") {
        let r = simulate(&config(seed, &[]));
        println!("{}", r.trace.join("\n"));
        assert!(r.passed(), "\n{}", story(&r));
        println!("seed {seed}: {} steps, {} commands, {} crashes, no finding", r.steps, r.commands, r.crashes);
        return;
    }
    let count = env_number("SIM_SEEDS").unwrap_or(CI_SEEDS);
    let began = Instant::now();
    let (failed, t) = sweep(count, &[], |r| !r.passed());
    let secs = began.elapsed().as_secs_f64();
    println!(
        "simulation: {} seeds × up to {} steps: {} steps, {} commands, {} crashes ({} power losses), {} deliveries \
         in {secs:.1} s ({:.0} steps/s, {:.0} seeds/s)",
        t.seeds,
        steps(),
        t.steps,
        t.commands,
        t.crashes,
        t.power_losses,
        t.deliveries,
        t.steps as f64 / secs.max(1e-9),
        t.seeds as f64 / secs.max(1e-9)
    );
    if let Some(r) = failed.first() {
        panic!("\n{}", story(r));
    }
    assert_eq!(t.seeds, count, "every seed of the range ran");
}

/// The simulator catches `fault` within the CI range, as a finding of
/// `invariant`, and says how to run that seed again.
fn caught(fault: Fault, invariant: &str) {
    let (found, t) = sweep(CI_SEEDS, &[fault], |r| r.findings.iter().any(|f| f.invariant == invariant));
    let Some(r) = found.first() else {
        panic!("planted fault {} was not caught in {} seeds", fault.name(), t.seeds);
    };
    let finding = r.findings.iter().find(|f| f.invariant == invariant).unwrap();
    println!("planted fault {} caught by seed {} ({} seeds tried): {finding}", fault.name(), r.seed, t.seeds);
    println!("reproduce: {}", r.reproduction());
    assert!(r.reproduction().contains(&format!("--seed {} ", r.seed)));
    assert!(r.reproduction().contains(&format!("--fault {}", fault.name())));
    // The same seed without the fault holds every invariant: the fault,
    // not the seed, broke it.
    let clean = simulate(&config(r.seed, &[]));
    assert!(clean.passed(), "seed {} fails without the fault too:\n{}", r.seed, story(&clean));
}

/// Issue 27: the simulated MCP servers ask a person now and then, and a
/// simulated person answers (`engine answer`): within a few seeds some
/// call carries a person's answers, and every seed holds "no answer sent
/// without a person's act" (checked at each delivery).
#[test]
fn simulated_people_answer_what_simulated_servers_ask() {
    // The seeds in which a call carried a person's answers (the sweep
    // stops at the first).
    let (reports, _) = sweep(100, &[], |r| r.answered > 0);
    assert!(!reports.is_empty(), "no seed of 100 sent a person's answer");
    for r in &reports {
        assert!(r.findings.is_empty(), "seed {}: {:?}\n{}", r.seed, r.findings, r.reproduction());
    }
}

#[test]
fn an_answer_the_engine_made_up_is_caught() {
    caught(Fault::AnswerOnItsOwn, "no answer sent without a person's act");
}

/// Issue 38: a simulated power loss takes the commits made since the last
/// flush (`engine::sim` `disk`): within a few seeds one does, and the
/// invariants of durability by effect hold across it (no external or paid
/// intent, no person's act lost; only free `none`/`local` work runs again).
#[test]
fn power_losses_take_only_what_may_run_again() {
    let (reports, t) = sweep(200, &[], |r| r.power_losses > 0);
    let Some(r) = reports.first() else { panic!("no seed of {} lost power with commits unflushed", t.seeds) };
    assert!(r.passed(), "\n{}", story(r));
    println!("seed {} lost power {} times, no finding", r.seed, r.power_losses);
}

#[test]
fn an_external_intent_committed_without_a_flush_is_caught() {
    caught(Fault::ExternalIntentNormal, "no external or paid intent lost");
}

#[test]
fn a_call_sent_before_its_intent_commits_is_caught() {
    caught(Fault::SendBeforeCommit, "no send without a committed intent");
}

#[test]
fn a_call_sent_twice_is_caught() {
    caught(Fault::SendTwice, "one try is never sent twice");
}

#[test]
fn a_re_send_after_a_restart_is_caught() {
    caught(Fault::ResendOnRestart, "no re-send of an unknown outcome without a person's act");
}

#[test]
fn a_skipped_call_budget_is_caught() {
    caught(Fault::SkipCallBudget, "budgets never passed");
}

#[test]
fn a_call_to_a_server_whose_tools_could_not_be_read_is_caught() {
    caught(Fault::SendWithoutInventory, "no call to a server whose tools could not be read");
}

/// Issue 42: the simulated person holds and releases tasks (and the
/// goal), reruns a succeeded task (with and without `--downstream`),
/// approves for a while (the simulated clock passes it) and stops runs
/// with SIGINT, SIGTERM or SIGHUP; each planted fault below breaks one of
/// the invariants these acts are checked against.
#[test]
fn a_held_task_started_is_caught() {
    caught(Fault::StartHeldTask, "a held task never starts an attempt while held");
}

#[test]
fn an_expired_approval_spent_is_caught() {
    caught(Fault::SpendExpiredApproval, "an expired approval is never spent");
}

#[test]
fn a_rerun_of_more_than_was_chosen_is_caught() {
    caught(Fault::RerunEverything, "a rerun re-runs exactly the chosen tasks and keeps the rest");
}

#[test]
fn a_stop_that_consumes_an_attempt_is_caught() {
    caught(Fault::StopConsumesAttempt, "a person's stop never consumes an attempt");
}

/// Issue 43: the simulated service names its version in every answer and
/// moves to a new one between runs; a completion of the old version is
/// never kept without a person's `--reuse-across-tool-change`.
#[test]
fn a_completion_kept_across_a_changed_tool_is_caught() {
    caught(Fault::KeepChangedTool, "never reused across a changed tool without a person's act");
}

/// Issue 43: some simulated tasks declare an output their provider writes
/// (the bytes of its last call, or now and then new ones) and an input a
/// person edits between runs; an upstream that runs again (an edited
/// input, `engine rerun`, a changed tool) keeps its dependants by early
/// cutoff when its outputs come out byte-identical, and runs them again
/// when they do not. Within a few hundred seeds both happen, with no finding.
#[test]
fn re_runs_with_unchanged_and_changed_outputs_reach_early_cutoff() {
    for (what, reached) in [
        ("a dependant kept by early cutoff", (|r: &Report| r.kept_by_cutoff > 0) as fn(&Report) -> bool),
        ("a dependant run again on changed outputs", |r: &Report| r.ran_on_new_outputs > 0),
    ] {
        let (reports, t) = sweep(400, &[], reached);
        let Some(r) = reports.first() else { panic!("no seed of {} had {what}", t.seeds) };
        assert!(r.passed(), "\n{}", story(r));
        println!("seed {}: {what} ({} kept, {} run again), no finding", r.seed, r.kept_by_cutoff, r.ran_on_new_outputs);
    }
}

#[test]
fn a_cutoff_across_changed_outputs_is_caught() {
    caught(
        Fault::CutoffIgnoresOutputs,
        "a dependant is kept across its upstream's re-run only on byte-identical outputs",
    );
}

#[test]
fn one_seed_is_one_run() {
    for seed in [3, 41, 977] {
        let (a, b) = (simulate(&config(seed, &[])), simulate(&config(seed, &[])));
        assert_eq!((a.steps, a.commands, a.crashes, a.deliveries), (b.steps, b.commands, b.crashes, b.deliveries));
        assert_eq!(a.trace, b.trace, "seed {seed} told two stories");
    }
}

/// The simulation's one source of chance (`engine::sim::rng`).
mod rng {
    use engine::sim::rng::Rng;

    #[test]
    fn one_seed_draws_one_sequence() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..100).map(|_| a.next()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(8).next(), Rng::new(7).next());
    }

    #[test]
    fn draws_stay_in_their_range() {
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!(r.below(5) < 5);
            assert!((3..=9).contains(&r.range(3, 9)));
            assert!(r.weighted(&[1, 0, 3]) != 1);
        }
        assert_eq!(r.below(0), 0);
    }
}
