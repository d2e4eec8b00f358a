//! Past failures, kept as files in `corpus/` and run every time through
//! the same checks as new cases. A file listed in `corpus/KNOWN_FAILURES`
//! reproduces a defect that is fixed on another branch: it runs only in
//! the ignored `corpus_known_failures` until the fix is merged (then
//! delete its line, and it runs with the rest).

use std::path::PathBuf;

use crate::{check_in_process, judge, through_the_binary, Existing};

fn corpus_dir() -> PathBuf {
    crate::common::repo_root().join("tests/fuzz/corpus")
}

/// (file name, defect) of each known failure.
fn known_failures() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(corpus_dir().join("KNOWN_FAILURES")).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (file, defect) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (file.to_string(), defect.trim().to_string())
        })
        .collect()
}

fn cases(known: bool) -> Vec<(String, Vec<u8>)> {
    let listed = known_failures();
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "plan"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .filter(|(name, _)| listed.iter().any(|(f, _)| f == name) == known)
        .collect();
    out.sort();
    out
}

/// Each case through the library and the binary; the failures, by file.
fn run(cases: Vec<(String, Vec<u8>)>, skip_known: bool) -> Vec<String> {
    let existing = Existing::start();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (name, bytes) in cases {
        let verdict = check_in_process(dir.path(), &bytes);
        let outcome = match judge(&verdict) {
            Some(why) => Err(why),
            None => through_the_binary(&existing, &bytes, &verdict, skip_known),
        };
        if let Err(why) = outcome {
            failures.push(format!("{name}: {why}"));
        }
    }
    failures
}

#[test]
fn corpus_regressions() {
    let cases = cases(false);
    assert!(!cases.is_empty(), "the corpus is empty");
    let failures = run(cases, true);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "reproduces defects of issue 9 fixed on other branches (corpus/KNOWN_FAILURES); run with --ignored after merging them"]
fn corpus_known_failures() {
    let known = known_failures();
    let failures = run(cases(true), false);
    let listed: Vec<String> = known.iter().map(|(f, d)| format!("{f}: {d}")).collect();
    assert!(failures.is_empty(), "still failing:\n{}\n(listed:\n{})", failures.join("\n"), listed.join("\n"));
}
