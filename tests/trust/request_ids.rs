//! `--request-id` on `approve`, `settle`, `retry`, `repair` and `revise`:
//! the same id and command again gives the first answer and changes
//! nothing; the same id with another command is `REQUEST_ID_CONFLICT`.

use serde_json::{json, Value};

use crate::common::*;
use crate::support::ledger::row_digest;

/// Give `args` twice under `id`, then a different command under `id`.
/// The repeat exits as the first did, says it is a repeat, and leaves the
/// store's rows exactly as the first left them; the conflict exits 2,
/// names the first command, and changes nothing either.
fn repeat_and_conflict(ws: &Ws, args: &[&str], other: &[&str], id: &str) -> Value {
    let with_id = |a: &[&str]| -> Vec<String> {
        a.iter().map(|s| s.to_string()).chain(["--request-id".into(), id.into()]).collect()
    };
    let first_args = with_id(args);
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let first = ws.engine_json(&first_args);
    let after_first = row_digest(&ws.store());
    let again = ws.engine_json(&first_args);
    assert_eq!(again.code(), first.code(), "{args:?}: the repeat exits as the first\n{}", again.describe());
    assert!(again.json()["repeat"]["request_id"] == json!(id), "{args:?}: marked as a repeat\n{}", again.describe());
    let text = ws.engine(&first_args);
    assert!(text.stdout.starts_with("repeat of request"), "{args:?}: {}", text.stdout);
    assert_eq!(row_digest(&ws.store()), after_first, "{args:?}: a repeat changes nothing");
    let other_args = with_id(other);
    let other_args: Vec<&str> = other_args.iter().map(String::as_str).collect();
    let conflict = ws.engine_json(&other_args);
    conflict.expect(2, Some("REQUEST_ID_CONFLICT"));
    assert!(
        conflict.stdout.contains(&format!("engine {}", args[0])),
        "{other:?}: names the first\n{}",
        conflict.describe()
    );
    assert_eq!(row_digest(&ws.store()), after_first, "{other:?}: a conflict changes nothing");
    first.json()
}

#[test]
fn approve_repeat_and_conflict() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({"requires_approval": true}));
    let op = ws.digest_op("T1");
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    repeat_and_conflict(&ws, &["approve", &op, "--note", "ok"], &["approve", &op, "--note", "other"], "a-1");
    assert_eq!(ws.ledger().approvals().len(), 1);
}

#[test]
fn settle_repeat_and_conflict() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    let op = ws.digest_op("T1");
    rcv.control(json!({"mode": "drop", "times": 1}));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let settle = ["settle", op.as_str(), "--outcome", "ok", "--note", "it arrived"];
    let other = ["settle", op.as_str(), "--outcome", "not_run", "--note", "it arrived"];
    repeat_and_conflict(&ws, &settle, &other, "s-1");
    assert_eq!(ws.ledger().settlements().len(), 1);
}

#[test]
fn retry_repeat_and_conflict() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    let op = ws.digest_op("T1");
    rcv.control(json!({"mode": "status", "status": 503, "times": 1}));
    ws.run().expect(1, None);
    repeat_and_conflict(&ws, &["retry", &op], &["retry", &op, "--actor", "someone"], "t-1");
    assert_eq!(ws.events_of("retry_requested").len(), 1, "the retry was asked once");
}

#[test]
fn repair_repeat_and_conflict() {
    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &json!({
        "version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "effect": "local",
                   "action": {"run": ["sh", "-c", "echo try >> tries.txt; test -e fixed"]}}]}),
    );
    ws.run().expect(1, None);
    ws.write("fixed", "");
    let first = repeat_and_conflict(
        &ws,
        &["repair", "T1", "--force", "--note", "fixed by hand"],
        &["repair", "T1", "--force", "--note", "another note"],
        "p-1",
    );
    assert_eq!(ws.read("tries.txt").lines().count(), 2, "the repair ran once: {first}");
}

#[test]
fn revise_repeat_and_conflict() {
    let ws = Ws::new();
    let plan = |statement: &str| {
        json!({
        "version": 1, "goal": {"id": "g", "statement": statement, "acceptance": []},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "effect": "none", "action": {"run": ["true"]}}]})
    };
    ws.write_plan("plan.json", &plan("first"));
    ws.run().expect(0, None);
    ws.write_plan("plan.json", &plan("second"));
    repeat_and_conflict(
        &ws,
        &["revise", "plan.json", "--reason", "r"],
        &["revise", "plan.json", "--reason", "x"],
        "v-1",
    );
    assert_eq!(ws.json(&["status"], 0)["goal"]["active_revision"], 2, "revised once");
}
