//! Declared outputs carried between workers' workspaces through the
//! PostgreSQL ledger: `A` builds `dist/out.txt` in one worker's workspace,
//! `B` (which reads it) runs on another worker whose workspace never had
//! it; a blob edited with SQL is refused before anything is written.

use std::path::Path;

use serde_json::{json, Value};

use super::common::{plan, Shared};
use crate::support::{Ledger, RUN_DEADLINE};

const BUILT: &str = "built by A\n";

/// `A` builds the file (declared); `B` reads it, and waits on a person's
/// approval so that it runs on the next worker, not the one that ran `A`.
fn handoff() -> Value {
    let a = json!({
        "ref": "A", "provider": "sh", "effect": "local", "outputs": ["dist/**"],
        "action": {"run": ["sh", "-c", "mkdir -p dist && printf 'built by A\\n' > dist/out.txt"]},
    });
    let b = json!({
        "ref": "B", "provider": "sh", "effect": "none", "depends_on": ["A"], "inputs": ["dist/out.txt"],
        "requires_approval": true,
        "action": {"run": ["cat", "dist/out.txt"]},
        "validations": [{"id": "same", "run": ["sh", "-c", "test \"$(cat dist/out.txt)\" = 'built by A'"]}],
    });
    plan(vec![a, b])
}

/// Worker 1 runs `A` and stops at `B`'s approval; a person approves `B`.
fn built_on_worker_1() -> (Shared, String) {
    let s = Shared::new(&handoff());
    s.submit();
    let first = s.worker("w1", 1, &[]).wait(RUN_DEADLINE);
    first.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(std::fs::read_to_string(s.workspace("w1").join("dist/out.txt")).unwrap(), BUILT);
    assert!(!s.workspace("w2").join("dist").exists(), "workspace 2 never had the file");
    let op = first.json()["awaiting_approval"][0]["operation_id"].as_str().expect("B's operation").to_string();
    s.engine(&["approve", &op, "--note", "run B"]).expect_code(0);
    (s, op)
}

#[test]
fn a_declared_output_reaches_a_dependent_on_another_workspace() {
    let (s, _) = built_on_worker_1();
    let second = s.worker("w2", 1, &[]).wait(RUN_DEADLINE);
    second.expect_code(0);
    let here = s.workspace("w2").join("dist/out.txt");
    assert_eq!(std::fs::read_to_string(&here).unwrap(), BUILT, "written into workspace 2");
    let ledger = Ledger::open(Path::new(&s.url));
    let a = &ledger.attempts_of("A");
    assert_eq!(a.len(), 1, "A ran once, on worker 1");
    let kept = ledger.outputs_of(a[0].id);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].digest, engine::digest::content(&std::fs::read(&here).unwrap()), "the same content digest");
    let b = &ledger.attempts_of("B");
    assert_eq!((b.len(), b[0].state.as_str()), (1, "succeeded"));
    let out = ledger.evidence(b[0].id).into_iter().find(|(_, k, _)| k == "process_exit").expect("B's exit");
    assert!(out.2["stdout"]["excerpt"].as_str().unwrap_or_default().contains("built by A"), "{:?}", out.2);
    let written = ledger.events_of("outputs_materialized");
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].0.as_deref(), Some("B"));
    assert_eq!((&written[0].2["files"], &written[0].2["bytes"]), (&json!(1), &json!(BUILT.len())));
    assert_eq!(ledger.goal_state(), "satisfied");
}

#[test]
fn an_output_blob_edited_with_sql_is_refused_and_nothing_is_written() {
    let (s, _) = built_on_worker_1();
    let digest = engine::digest::content(BUILT.as_bytes());
    // The same length, other bytes: only the digest can tell.
    let forged = "\\x".to_string() + &"65".repeat(BUILT.len());
    let changed = s
        .pg
        .psql("ledger", &format!("UPDATE blobs SET data = '{forged}'::bytea WHERE digest = '{digest}' RETURNING 1"));
    assert_eq!(changed, "1");
    let out = s.worker("w2", 1, &[]).wait(RUN_DEADLINE);
    out.expect(2, Some("STORE_TAMPERED"));
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains(&format!("blobs row {digest}")), "{}", out.describe());
    assert!(!s.workspace("w2").join("dist").exists(), "nothing written to workspace 2");
    let ledger = Ledger::open(Path::new(&s.url));
    assert!(ledger.attempts_of("B").is_empty(), "B was never sent");
    assert!(ledger.events_of("call_refused").iter().any(|e| e.0.as_deref() == Some("B")));
}

#[test]
fn outputs_over_a_bound_fail_the_task_on_the_shared_store_too() {
    let many = json!({
        "ref": "MANY", "provider": "sh", "effect": "local", "outputs": ["many/**"],
        "action": {"run": ["sh", "-c", "mkdir -p many && for i in $(seq 0 1000); do : > many/$i; done"]},
    });
    let after = json!({"ref": "AFTER", "provider": "sh", "effect": "none", "depends_on": ["MANY"], "action": {"run": ["true"]}});
    let s = Shared::new(&plan(vec![many, after]));
    s.submit();
    s.worker("w1", 1, &[]).wait(RUN_DEADLINE).expect_code(1);
    let ledger = Ledger::open(Path::new(&s.url));
    let a = &ledger.attempts_of("MANY")[0];
    assert_eq!((a.state.as_str(), a.class(), a.rule()), ("failed", "environment", "outputs_over_limit"));
    let evidence = ledger.evidence(a.id);
    let not_kept = evidence.iter().find(|(_, k, _)| k == "outputs_not_kept").expect("the evidence");
    assert_eq!(not_kept.2["limit"], "OUTPUT_FILES_MAX");
    assert!(not_kept.2["message"].as_str().unwrap_or_default().contains("`MANY`"), "{:?}", not_kept.2);
    assert!(ledger.outputs_of(a.id).is_empty(), "nothing kept");
    assert_eq!(s.pg.psql("ledger", "SELECT count(*) FROM outputs"), "0");
    assert!(ledger.attempts_of("AFTER").is_empty(), "its dependent never ran");
}
