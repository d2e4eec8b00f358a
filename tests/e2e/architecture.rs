//! ARCHITECTURE.md's invariants that a reading of the source can check.
//! (The behavioural ones — no provider call without a committed intent,
//! approvals consumed at the call site — are end-to-end tests elsewhere.)

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::repo_root;

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// Files under `dir` whose text contains `needle` (case-insensitive).
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let needle = needle.to_lowercase();
    let root = repo_root();
    let mut hits: Vec<String> = rust_files(dir)
        .into_iter()
        .filter(|p| fs::read_to_string(p).unwrap().to_lowercase().contains(&needle))
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    hits.sort();
    hits
}

#[test]
fn providers_know_nothing_of_the_ledger() {
    let manifest = fs::read_to_string(repo_root().join("providers/Cargo.toml")).unwrap();
    for dep in ["engine", "rusqlite"] {
        assert!(!manifest.lines().any(|l| l.trim_start().starts_with(dep)), "providers/Cargo.toml depends on {dep}");
    }
    let src = repo_root().join("providers/src");
    assert!(files_containing(&src, "rusqlite").is_empty());
    assert!(files_containing(&src, "engine.db").is_empty());
}

#[test]
fn only_the_approve_path_writes_approvals() {
    let src = repo_root().join("engine/src");
    assert_eq!(files_containing(&src, "INSERT INTO approvals"), vec!["engine/src/approval.rs"]);
    // And only the call site consumes one.
    assert_eq!(files_containing(&src, "UPDATE approvals"), vec!["engine/src/approval.rs"]);
    // `approval::record` is reached from the CLI's `approve` command only.
    let callers: Vec<String> =
        files_containing(&src, "approval::record(").into_iter().filter(|f| f != "engine/src/approval.rs").collect();
    assert_eq!(callers, vec!["engine/src/cli.rs"]);
}

#[test]
fn only_settle_writes_settlements() {
    let src = repo_root().join("engine/src");
    assert_eq!(files_containing(&src, "INSERT INTO settlements"), vec!["engine/src/settle.rs"]);
}

#[test]
fn sqlite_is_reached_only_through_the_store() {
    // Reading the ledger elsewhere goes through `Store`/`ledger`; opening a
    // connection does not happen outside `store/`.
    let src = repo_root().join("engine/src");
    let opens: Vec<String> = files_containing(&src, "Connection::open")
        .into_iter()
        .filter(|f| !f.starts_with("engine/src/store/"))
        .collect();
    assert!(opens.is_empty(), "SQLite opened outside store/: {opens:?}");
}
