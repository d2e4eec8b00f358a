//! Past failures and boundary cases, kept as files in `corpus/` and run
//! every time through the same checks as new cases.

use std::path::PathBuf;

use super::{check_in_process, judge, through_the_binary, Existing};

fn corpus_dir() -> PathBuf {
    crate::common::repo_root().join("tests/fuzz/corpus")
}

/// (file name, bytes) of every `*.plan` in the corpus, by name.
fn cases() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "plan"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn corpus_regressions() {
    let cases = cases();
    assert!(!cases.is_empty(), "the corpus is empty");
    let existing = Existing::start();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (name, bytes) in cases {
        let verdict = check_in_process(dir.path(), &bytes);
        let outcome = match judge(&verdict) {
            Some(why) => Err(why),
            None => through_the_binary(&existing, &bytes, &verdict),
        };
        if let Err(why) = outcome {
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
