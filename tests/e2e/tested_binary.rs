//! The engine binary these tests run is the one users get: built without
//! the simulator's hooks (the `sim` feature: the simulated clock, world and
//! crashes, and the planted faults). Only the simulator's own targets turn
//! the feature on, in a cargo invocation of their own (`.ci/test`); were it
//! on here, cargo would have unified it into this binary too.

use std::process::Command;

use crate::support::ENGINE;

/// Pieces of symbol names (as Rust mangles a path, in either of its
/// schemes: each name's length, then the name) of code that exists only
/// in a `sim` build: `engine::sim`, `engine::failpoint::sim` and
/// `engine::run::world::simulated`.
const SIM_ONLY: &[&str] = &["6engine3sim", "9failpoint3sim", "5world9simulated"];

/// A piece of a symbol name every build has (`engine::failpoint::hit`):
/// seen, it shows the binary's symbols are there to be judged.
const ALWAYS: &str = "9failpoint3hit";

/// Which of `needles` the file holds (grep reads 250 MB far faster than
/// an unoptimised test could).
fn found_in(file: &str, needles: &[&str]) -> Vec<String> {
    let mut grep = Command::new("grep");
    grep.args(["-a", "-o", "-F"]);
    for n in needles {
        grep.args(["-e", n]);
    }
    let out = grep.arg(file).output().unwrap_or_else(|e| panic!("grep (to read {file}): {e}"));
    assert!(out.status.code().is_some_and(|c| c <= 1), "grep {file}: {}", String::from_utf8_lossy(&out.stderr));
    let mut seen: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn the_engine_the_tests_run_holds_none_of_the_simulators_code() {
    let seen = found_in(ENGINE, &[&[ALWAYS], SIM_ONLY].concat());
    assert!(seen.iter().any(|s| s == ALWAYS), "{ENGINE} has no symbols to judge it by");
    let sim: Vec<&String> = seen.iter().filter(|s| SIM_ONLY.contains(&s.as_str())).collect();
    assert!(
        sim.is_empty(),
        "{ENGINE} was built with the `sim` feature (it holds {}): the tests would not run the binary users get. \
         Only the simulator's own cargo invocation may turn the feature on (`.ci/test`)",
        sim.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
    );
}
