//! `engine-sim`: the deterministic simulator from the command line, the
//! binary of the simulator's own package (`simulator/`,
//! `engine-simulator`: `cargo run -p engine-simulator -- --seed N`), so
//! never installed with the engine.
//!
//!     engine-sim --seed 123 [--steps 400] [--seeds 1000] [--fault NAME]... [--trace]
//!
//! Runs seeds `seed`, `seed + 1`, … (`--seeds` of them), each for at most
//! `--steps` steps, and prints the figures; the first seed that breaks an
//! invariant prints what broke, the story's last lines and the one line
//! that runs it again, and the exit code is 1.

use std::time::Instant;

use engine::sim::{simulate, Config, Fault};

fn usage() -> ! {
    engine::say_line!("usage: engine-sim --seed N [--steps M] [--seeds K] [--fault NAME]... [--trace]");
    engine::say_line!("faults: {}", Fault::ALL.map(Fault::name).join(", "));
    std::process::exit(2);
}

fn number(arg: Option<String>) -> u64 {
    arg.and_then(|a| a.replace('_', "").parse().ok()).unwrap_or_else(|| usage())
}

fn main() {
    let (mut seed, mut steps, mut seeds, mut faults, mut trace) = (None, 400, 1, Vec::new(), false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seed" => seed = Some(number(args.next())),
            "--steps" => steps = number(args.next()),
            "--seeds" => seeds = number(args.next()),
            "--fault" => faults.push(args.next().and_then(|f| Fault::named(&f)).unwrap_or_else(|| usage())),
            "--trace" => trace = true,
            _ => usage(),
        }
    }
    let Some(first) = seed else { usage() };
    let began = Instant::now();
    let (mut total_steps, mut crashes, mut commands, mut deliveries, mut power) = (0, 0, 0, 0, 0);
    for seed in first..first.saturating_add(seeds) {
        let mut config = Config::new(seed, steps);
        config.faults = faults.clone();
        let report = simulate(&config);
        total_steps += report.steps;
        crashes += report.crashes;
        power += report.power_losses;
        commands += report.commands;
        deliveries += report.deliveries;
        if trace || !report.passed() {
            for line in &report.trace {
                println!("  {line}");
            }
        }
        if !report.passed() {
            for f in &report.findings {
                println!("FINDING seed {seed}: {f}");
            }
            println!("reproduce: {}", report.reproduction());
            std::process::exit(1);
        }
    }
    let secs = began.elapsed().as_secs_f64();
    println!(
        "{seeds} seeds from {first}: {total_steps} steps, {commands} commands, {crashes} crashes ({power} power losses), {deliveries} deliveries, \
         no finding; {secs:.1} s ({:.0} steps/s, {:.1} seeds/s)",
        total_steps as f64 / secs.max(1e-9),
        seeds as f64 / secs.max(1e-9)
    );
}
