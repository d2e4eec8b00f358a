//! The engine binary these tests run is the one users get, and nothing in
//! it can set the simulator going. Every build of the engine compiles the
//! same code (its package has no features): the simulator's hooks (its
//! clock, world and crashes, and the planted faults) are in the library,
//! each dormant until the simulator arms it on its own thread. Only
//! `engine::sim` calls the arming functions, and only the simulator's own
//! package (simulator/, `engine-simulator`) runs it; the linker leaves out
//! what a binary never calls, so the `engine` binary holds none of them —
//! no variable, flag or file reaches a hook through it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{repo_root, ENGINE};

/// Pieces of the symbol names (as Rust mangles a path, in either of its
/// schemes: each name's length, then the name) of the functions that arm
/// the simulator's hooks: `failpoint::sim::begin_process` (its crashes),
/// `failpoint::sim::plant` (its faults), `clock::sim::set` and
/// `run::world::simulated::set`. Each is `#[inline(never)]`, so a caller
/// keeps its symbol.
const ARMING: &[&str] =
    &["9failpoint3sim13begin_process", "9failpoint3sim5plant", "5clock3sim3set", "5world9simulated3set"];

/// A piece of a symbol name the binary must have (`engine::cli::main`):
/// seen, it shows the binary's symbols are there to be judged (not
/// stripped).
const ALWAYS: &str = "6engine3cli4main";

/// Which of `needles` the file holds (grep reads a large binary far faster
/// than an unoptimised test could).
fn found_in(file: &Path, needles: &[&str]) -> Vec<String> {
    let mut grep = Command::new("grep");
    grep.args(["-a", "-o", "-F"]);
    for n in needles {
        grep.args(["-e", n]);
    }
    let out = grep.arg(file).output().unwrap_or_else(|e| panic!("grep (to read {}): {e}", file.display()));
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "grep {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seen: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    seen.sort();
    seen.dedup();
    seen
}

/// The engine library the binary was linked with: the newest
/// `libengine-*.rlib` of its build folder.
fn engine_library(engine: &Path) -> PathBuf {
    let deps = engine.parent().expect("the binary's folder").join("deps");
    let rlibs = std::fs::read_dir(&deps).unwrap_or_else(|e| panic!("{}: {e}", deps.display()));
    let newest = rlibs
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("libengine-") && n.ends_with(".rlib")))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max();
    newest.unwrap_or_else(|| panic!("no libengine-*.rlib in {}", deps.display())).1
}

/// The workspace's own packages as `cargo metadata --locked` sees them
/// (the lock file must name every package: `--locked` takes it as is).
fn workspace_metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked", "--no-deps"])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata --locked: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

#[test]
fn the_engine_the_tests_run_holds_no_code_that_arms_the_simulators_hooks() {
    let engine = Path::new(ENGINE);
    // The pieces name real functions: the library holds each of them.
    let library = engine_library(engine);
    let in_library = found_in(&library, ARMING);
    let missing: Vec<&&str> = ARMING.iter().filter(|a| !in_library.iter().any(|s| s == **a)).collect();
    assert!(missing.is_empty(), "{} holds no {missing:?}: renamed? ARMING must name them", library.display());
    let seen = found_in(engine, &[&[ALWAYS], ARMING].concat());
    assert!(seen.iter().any(|s| s == ALWAYS), "{ENGINE} has no symbols to judge it by (stripped?)");
    let arming: Vec<&String> = seen.iter().filter(|s| ARMING.contains(&s.as_str())).collect();
    assert!(
        arming.is_empty(),
        "{ENGINE} holds code that arms the simulator's hooks ({}): only `engine::sim`, run by the simulator's \
         package (simulator/), may call it, never the engine binary",
        arming.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
    );
}

/// What `cargo install --locked --path .` builds is this binary: the root
/// package has no features (no build of the engine compiles other code than
/// another) and one binary, `engine`; the simulator's binary is its own
/// package's; the lock file names every package (`--locked` takes it as is).
#[test]
fn the_installed_engine_is_built_from_the_same_code_as_the_tested_one() {
    let meta = workspace_metadata();
    let packages = meta["packages"].as_array().expect("packages");
    let named = |name: &str| packages.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no package {name}"));
    let bins = |p: &Value| -> Vec<String> {
        let targets = p["targets"].as_array().expect("targets");
        let bins = targets.iter().filter(|t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")));
        bins.filter_map(|t| t["name"].as_str().map(str::to_string)).collect()
    };
    let engine = named("engine");
    assert_eq!(engine["manifest_path"].as_str(), repo_root().join("Cargo.toml").to_str());
    assert_eq!(engine["features"], serde_json::json!({}), "the engine package has features: builds would differ");
    assert_eq!(bins(engine), ["engine"]);
    assert_eq!(bins(named("engine-simulator")), ["engine-sim"]);
    let built_as = Path::new(ENGINE).file_name().and_then(|n| n.to_str());
    assert_eq!(built_as, Some("engine"), "{ENGINE}");
}

/// `.ci/test` runs the workspace's tests in cargo runs of their own (the
/// unit tests unoptimised, the suite and the simulator optimised), each
/// naming its packages and targets: a test target no run names would
/// never run in CI. Every target that has tests, of every member, is
/// named in a run with its package (`--lib`, `--bin NAME`, `--test
/// NAME`), and the run is run, not only built.
#[test]
fn every_test_target_of_the_workspace_is_in_one_of_ci_tests_runs() {
    let meta = workspace_metadata();
    let script = std::fs::read_to_string(repo_root().join(".ci/test")).expect(".ci/test");
    // The runs: the arrays of a run's arguments (`NAME=(--release …)`)
    // that a `cargo test "${NAME[@]}"` line runs, not only builds.
    let ran = |name: &str| {
        let used = format!("cargo test \"${{{name}[@]}}\"");
        script.lines().any(|l| l.contains(&used) && !l.contains("--no-run"))
    };
    let runs: Vec<Vec<&str>> = script
        .lines()
        .filter_map(|l| l.split_once("=(--release --no-fail-fast"))
        .filter(|(name, _)| ran(name.trim()))
        .map(|(_, args)| args.split([' ', '(', ')']).collect())
        .collect();
    assert!(runs.len() >= 3, ".ci/test's runs not found: {runs:?}");
    let mut missing = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("a package's name");
        for target in package["targets"].as_array().expect("targets") {
            let kinds = target["kind"].as_array().expect("kinds");
            let kind = kinds.first().and_then(Value::as_str).unwrap_or("");
            let target_name = target["name"].as_str().unwrap_or("");
            let selector: Vec<&str> = match kind {
                _ if target["test"] == false => continue,
                "lib" => vec!["--lib"],
                "bin" => vec!["--bin", target_name],
                "test" => vec!["--test", target_name],
                _ => continue,
            };
            let named = runs.iter().any(|run| {
                run.windows(2).any(|w| w == ["-p", name])
                    && run.windows(selector.len()).any(|w| w == selector.as_slice())
            });
            if !named {
                missing.push(format!("{name}: {kind} {target_name}"));
            }
        }
    }
    assert!(missing.is_empty(), "test targets no run of .ci/test names: {missing:?}");
}
