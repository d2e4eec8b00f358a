//! The fuzzer's properties, each over one generator: in-process `check`
//! for thousands of cases, the binary for a sample against a store.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};

use super::{check_in_process, gen, judge, through_the_binary, Existing, Verdict};
use crate::common::repo_root;

fn cases(var: &str, default: u32) -> u32 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        // Seeds of past failures, replayed first on every run.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../tests/fuzz/proptest-regressions.txt"))),
        ..Config::default()
    })
}

/// The plans byte mutation starts from: every reference plan (placeholders
/// filled with plain paths) and the money demo's plan.
fn bases() -> Vec<Vec<u8>> {
    let root = repo_root();
    let mut out: Vec<Vec<u8>> = crate::support::reference::PLANS
        .iter()
        .map(|p| {
            std::fs::read_to_string(root.join(format!("fixtures/reference/plans/{p}.json")))
                .unwrap()
                .replace("@RUN@", "fuzz")
                .replace("@TOOLS@", "/opt/tools")
                .replace("@EFFECTS_LOG@", "/tmp/effects.jsonl")
                .replace("@RECEIVER@", "http://127.0.0.1:9")
                .replace("@MCP_SERVER@", "/opt/server.py")
                .replace("@MCP_LOG@", "/tmp/mcp.jsonl")
                .into_bytes()
        })
        .collect();
    out.push(std::fs::read(root.join("fixtures/money/plan.json")).unwrap());
    out
}

/// Keep a failing input where a person can move it into `corpus/`, and fail.
fn fail(result: Result<(), TestError<Vec<u8>>>) {
    let Err(e) = result else { return };
    let (why, bytes) = match &e {
        TestError::Fail(why, bytes) => (why.to_string(), bytes.clone()),
        TestError::Abort(why) => (why.to_string(), Vec::new()),
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}.plan", &blake3::hash(&bytes).to_hex()[..16]));
    std::fs::write(&file, &bytes).unwrap();
    panic!(
        "{why}\nthe input ({} bytes) is kept in {}: move it into tests/fuzz/corpus/ once understood",
        bytes.len(),
        file.display()
    );
}

fn structured() -> BoxedStrategy<Vec<u8>> {
    (gen::plan(Existing::goal_id()), any::<bool>())
        .prop_map(
            |(p, pretty)| if pretty { serde_json::to_vec_pretty(&p).unwrap() } else { serde_json::to_vec(&p).unwrap() },
        )
        .boxed()
}

fn mutated() -> BoxedStrategy<Vec<u8>> {
    (prop::sample::select(bases()), gen::edits()).prop_map(|(base, edits)| gen::mutate(&base, &edits)).boxed()
}

/// Verdicts by kind, printed after a run: what the cases exercised.
#[derive(Default)]
struct Tally(Mutex<BTreeMap<String, usize>>);

impl Tally {
    fn add(&self, v: &Verdict) {
        let key = match v {
            Verdict::Rejected { code, .. } => code.clone(),
            other => format!("{other:?}").chars().take(40).collect(),
        };
        *self.0.lock().unwrap().entry(key).or_default() += 1;
    }

    fn print(&self, what: &str) {
        eprintln!("{what}: {:?}", self.0.lock().unwrap());
    }
}

fn in_process(what: &str, strategy: BoxedStrategy<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let tally = Tally::default();
    let result = runner(cases("FUZZ_CASES", 2000)).run(&strategy, |bytes| {
        let verdict = check_in_process(dir.path(), &bytes);
        tally.add(&verdict);
        match judge(&verdict) {
            Some(why) => Err(TestCaseError::fail(why)),
            None => Ok(()),
        }
    });
    tally.print(what);
    fail(result);
}

fn binary(what: &str, strategy: BoxedStrategy<Vec<u8>>) {
    let existing = Existing::start();
    let dir = tempfile::tempdir().unwrap();
    let tally = Tally::default();
    let result = runner(cases("FUZZ_BINARY_CASES", 60)).run(&strategy, |bytes| {
        let verdict = check_in_process(dir.path(), &bytes);
        tally.add(&verdict);
        if let Some(why) = judge(&verdict) {
            return Err(TestCaseError::fail(why));
        }
        through_the_binary(&existing, &bytes, &verdict).map_err(TestCaseError::fail)
    });
    tally.print(what);
    fail(result);
}

#[test]
fn check_in_process_structured_plans() {
    in_process("check in-process, structured", structured());
}

#[test]
fn check_in_process_mutated_plans() {
    in_process("check in-process, mutated", mutated());
}

#[test]
fn binary_check_and_run_structured_plans() {
    binary("binary, structured", structured());
}

#[test]
fn binary_check_and_run_mutated_plans() {
    binary("binary, mutated", mutated());
}
