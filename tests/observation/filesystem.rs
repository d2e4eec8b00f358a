//! `@modelcontextprotocol/server-filesystem`, which has no operation-status
//! tool: a `write_file`'s effect is read back with `read_text_file`. The
//! engine is killed after dispatch (`ENGINE_FAILPOINT=after_dispatch`) and
//! restarted; what the server was sent comes from `tee` of its stdin.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

const NOTE: &str = "data/note.txt";
const TEXT: &str = "hello from T1";

/// The read-back a `write_file` of `NOTE` declares.
fn rule(absent_if: Option<Value>) -> Value {
    let mut r = json!({"tool": "read_text_file", "arguments": {"path": format!("{{workspace}}/{NOTE}")},
                       "present_if": {"text_contains": TEXT}});
    if let Some(a) = absent_if {
        r["absent_if"] = a;
    }
    r
}

fn enoent() -> Option<Value> {
    Some(json!({"text_contains": "ENOENT"}))
}

/// A workspace whose plan writes `NOTE` with this read-back rule; run to
/// the failpoint after dispatch, and wait until the server (which finishes
/// what it was sent once the engine is gone) has written the note.
fn killed_after_dispatch(observe: Value) -> (Ws, String) {
    let ws = Ws::new();
    std::fs::create_dir(ws.path("data")).unwrap();
    let mut task = write_task(&ws, "T1", NOTE, TEXT);
    task["observe"] = observe;
    ws.write_plan("plan.json", &plan(json!({"fs": filesystem(&ws)}), vec![task]));
    let first = ws.run_fp("after_dispatch");
    assert!(first.killed(), "expected the failpoint's SIGKILL\n{}", first.describe());
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "dispatched"), "{a:?}");
    assert!(ws.receipt_of(a[0].id).is_none());
    wait_until(Duration::from_secs(20), "the server to write the note", || {
        std::fs::read_to_string(ws.path(NOTE)).ok().filter(|t| t == TEXT)
    });
    let op = a[0].operation_id.clone();
    assert_one_write(&ws, &op);
    (ws, op)
}

/// The server was sent exactly one `write_file`, try 1 of `op`.
fn assert_one_write(ws: &Ws, op: &str) {
    let writes = calls_of(ws, "write_file");
    assert_eq!(writes.len(), 1, "write_file sent once: {writes:?}");
    // The call's identity, and the progress token its notifications name.
    let token = format!("{op}#1");
    assert_eq!(writes[0]["params"]["_meta"], json!({"operation_id": op, "try": 1, "progressToken": token}));
}

/// The observation evidence of an attempt: (decider, request, answer excerpt).
fn read_back(ws: &Ws, attempt_id: i64) -> (String, Value, String) {
    let ev = ws.evidence(attempt_id);
    let (_, _, data) = ev.iter().find(|e| e.1 == "observation").unwrap_or_else(|| panic!("an observation: {ev:?}"));
    let rb = &data["read_back"];
    (rb["decider"].as_str().unwrap().to_string(), rb["request"].clone(), rb["answer"]["excerpt"].to_string())
}

#[test]
fn a_crash_after_dispatch_is_read_back_present_and_the_write_is_not_sent_again() {
    let (ws, op) = killed_after_dispatch(rule(enoent()));
    let second = ws.run();
    second.expect(0, None);
    assert_one_write(&ws, &op);
    let reads = calls_of(&ws, "read_text_file");
    assert_eq!(reads.len(), 1, "one read-back: {reads:?}");
    assert_eq!(reads[0]["params"]["arguments"], json!({"path": ws.path(NOTE)}), "{{workspace}} filled");
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"), "{a:?}");
    let receipt = ws.receipt_of(a[0].id).unwrap();
    assert_eq!((receipt["source"].as_str(), receipt["lost"].as_str()), (Some("observation"), Some("engine_restarted")));
    assert_eq!(receipt["read_back"]["decided_by"], "present_if", "{receipt}");
    let (decider, request, answer) = read_back(&ws, a[0].id);
    assert_eq!(decider, "present_if");
    assert_eq!(request, json!({"tool": "read_text_file", "arguments": {"path": ws.path(NOTE)}}));
    assert!(answer.contains(TEXT), "the answer is evidence: {answer}");
    // `explain` says what was asked, what came back and which rule decided.
    let explain = ws.engine(&["explain", "T1"]);
    assert!(
        explain.stdout.contains("read back: tools/call `read_text_file`")
            && explain.stdout.contains("present, by present_if (text contains \"hello from T1\")"),
        "{}",
        explain.stdout
    );
    // The HTML report shows the read-back and its answer.
    ws.engine(&["report", "--html", "report.html", "--no-timestamp"]).expect(0, None);
    let html = ws.read("report.html");
    assert!(html.contains("observed present: tools/call `read_text_file`"), "the read-back in the report");
}

#[test]
fn a_file_that_is_not_there_is_absent_as_declared_retryable_and_not_sent_twice() {
    let (ws, op) = killed_after_dispatch(rule(enoent()));
    // The effect is not there (gone before anyone looked).
    std::fs::remove_file(ws.path(NOTE)).unwrap();
    let second = ws.run();
    second.expect(1, None);
    assert_one_write(&ws, &op);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "failed"), "{a:?}");
    assert_eq!((a[0].class(), a[0].rule()), ("provider_unavailable", "observed_effect_absent"));
    let (decider, _, answer) = read_back(&ws, a[0].id);
    assert_eq!(decider, "absent_if");
    assert!(answer.contains("ENOENT"), "{answer}");
    assert!(!ws.path(NOTE).exists(), "nothing re-sent");
    // Retryable: a person's retry (external work: approved first) sends try 2, once.
    ws.engine_json(&["retry", &op]).expect(4, Some("APPROVAL_REQUIRED"));
    assert_one_write(&ws, &op);
    ws.engine_json(&["approve", &op, "--note", "read back absent; send it again"]).expect(0, None);
    ws.engine_json(&["retry", &op]).expect(0, None);
    let writes = calls_of(&ws, "write_file");
    let tries: Vec<&Value> = writes.iter().map(|w| &w["params"]["_meta"]["try"]).collect();
    assert_eq!(tries, vec![&json!(1), &json!(2)], "{writes:?}");
    assert_eq!(std::fs::read_to_string(ws.path(NOTE)).unwrap(), TEXT);
}

#[test]
fn an_answer_the_rule_does_not_declare_is_inconclusive_and_waits_for_a_person() {
    // An error the rule does not call absence (outside the allowed folder),
    // and a missing file where the rule declares no absence at all.
    let outside = json!({"tool": "read_text_file", "arguments": {"path": "{workspace}/../outside.txt"},
                         "present_if": {"text_contains": TEXT}, "absent_if": {"text_contains": "ENOENT"}});
    for (observe, remove, why) in [(outside, false, "Access denied"), (rule(None), true, "ENOENT")] {
        let (ws, op) = killed_after_dispatch(observe);
        if remove {
            std::fs::remove_file(ws.path(NOTE)).unwrap();
        }
        let second = ws.run();
        second.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
        assert_eq!(second.json()["unknown"][0]["operation_id"], op.as_str());
        assert_one_write(&ws, &op);
        let a = ws.attempts();
        assert_eq!((a.len(), a[0].state.as_str()), (1, "effect_unknown"), "{a:?}");
        let (decider, _, answer) = read_back(&ws, a[0].id);
        assert_eq!(decider, "neither_matched", "{why}");
        assert!(answer.contains(why), "{answer}");
        // Another run still sends nothing.
        ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
        assert_one_write(&ws, &op);
    }
}

#[test]
fn four_calls_in_one_run_are_served_by_one_server_process() {
    let ws = Ws::new();
    let read = json!({"ref": "R1", "provider": "fs", "effect": "none", "depends_on": ["W1"],
                      "action": {"tool": "read_text_file", "arguments": {"path": ws.path("a.txt")}}});
    let list = json!({"ref": "L1", "provider": "fs", "effect": "none", "depends_on": ["W2"],
                      "action": {"tool": "list_directory", "arguments": {"path": ws.dir}}});
    let tasks = vec![write_task(&ws, "W1", "a.txt", "alpha"), write_task(&ws, "W2", "b.txt", "beta"), read, list];
    ws.write_plan("plan.json", &plan(json!({"fs": filesystem(&ws)}), tasks));
    let out = ws.engine_json(&["run", "plan.json", "--jobs", "4"]);
    out.expect(0, None);
    let pids = starts(&ws);
    assert_eq!(pids.len(), 1, "one server start for four calls: {pids:?}");
    let methods: Vec<String> = sent(&ws).iter().filter_map(|m| m["method"].as_str().map(str::to_string)).collect();
    assert_eq!(methods.iter().filter(|m| *m == "initialize").count(), 1, "{methods:?}");
    let calls: Vec<Value> = sent(&ws).into_iter().filter(|m| m["method"] == "tools/call").collect();
    assert_eq!(calls.len(), 4, "{calls:?}");
    let ops: std::collections::BTreeSet<String> =
        calls.iter().map(|c| c["params"]["_meta"]["operation_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ops.len(), 4, "each call carries its own operation id");
    assert_eq!(ws.read("b.txt"), "beta");
    // The run shut its server down: its process group is gone.
    wait_until(Duration::from_secs(5), "the server's group to be gone", || group_gone(pids[0]).then_some(()));
}

/// No process is left in process group `pgid`.
fn group_gone(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks; negative pid = the process group.
    unsafe { libc::kill(-pgid, 0) != 0 }
}
