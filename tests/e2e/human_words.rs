//! Issue 41: what a person reads is words, never the engine's internals.
//! A three-task pipeline (a command, a command, an HTTP publish to the
//! receiver) taken through a lost answer read back as present, a failed
//! upstream under a kept dependant, a revision and an approval, and the
//! money demo through its failure and repair: every command's text output
//! at each stage is scanned for Rust `Debug` formatting (`EvidenceId(6)`,
//! `Some(`, `Name {`) and raw JSON (`{"`). JSON a person types or a
//! provider's own output quoted as such (in backticks, or the `| ` lines of
//! a captured output) is not the engine's internals.

use serde_json::{json, Value};

use super::common::*;

/// Every place in `text` that reads as an internal, with its line.
fn internals(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        // A captured output, quoted as it was.
        if line.trim_start().starts_with("| ") || line.trim_start() == "|" {
            continue;
        }
        let said = outside_backticks(line);
        let mut bad: Vec<&str> =
            ["Id(", "{\"", "Some(", "None)", "{waits"].into_iter().filter(|p| said.contains(p)).collect();
        if debug_struct(&said) {
            bad.push("a Debug struct");
        }
        if !bad.is_empty() {
            found.push(format!("{bad:?} in: {line}"));
        }
    }
    found
}

/// The line with every `quoted` span taken out.
fn outside_backticks(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// A CamelCase name (two humps at least) right before `(`, ` {` or `[`:
/// how `{:?}` prints a struct, a tuple struct or an enum.
fn debug_struct(s: &str) -> bool {
    let words = s.split(|c: char| !c.is_ascii_alphanumeric() && c != '(' && c != '{' && c != '[');
    let camel = |w: &str| {
        let name = w.trim_end_matches(['(', '{', '[']);
        name.len() > 2
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().skip(1).any(|c| c.is_ascii_uppercase())
            && name.chars().any(|c| c.is_ascii_lowercase())
    };
    words.clone().any(|w| camel(w) && w.ends_with(['(', '{', '[']))
        || s.match_indices(" {").any(|(i, _)| s[..i].rsplit(' ').next().is_some_and(camel))
}

/// `engine ARGS` in `ws`, its stdout and stderr scanned; the output.
#[track_caller]
fn scanned(ws: &Ws, args: &[&str], seen: &mut Vec<String>) -> Out {
    let out = ws.engine(args);
    for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        for f in internals(text) {
            seen.push(format!("engine {} ({stream}): {f}", args.join(" ")));
        }
    }
    out
}

/// Every reading command of a store, scanned (but `engine output`: it
/// prints a task's captured output as it was, by design).
fn read_all(ws: &Ws, tasks: &[&str], seen: &mut Vec<String>) {
    for args in [&["status"][..], &["log"], &["goals"], &["verify"], &["stores"]] {
        scanned(ws, args, seen);
    }
    for t in tasks {
        scanned(ws, &["explain", t], seen);
        scanned(ws, &["log", "--task", t], seen);
    }
}

/// load → transform → publish (HTTP, external, read back through the
/// receiver's `/operations/{key}`).
fn pipeline(rcv: &Receiver, body: Value) -> Value {
    let sh = |r: &str, script: &str, deps: &[&str], inputs: &[&str]| {
        json!({"ref": r, "title": format!("{r} the data"), "provider": "sh", "action": {"run": ["sh", "-c", script]},
               "effect": "local", "depends_on": deps, "inputs": inputs, "outputs": [format!("{r}.out")]})
    };
    json!({
        "version": 1,
        "goal": {"id": "pipe", "statement": "the data is published",
                 "acceptance": [{"id": "A1", "statement": "published", "check": {"run": ["true"]}}],
                 "constraints": [{"id": "C1", "statement": "the source stays", "protect": ["source.txt"]}]},
        "providers": {"sh": {"kind": "command"},
                      "shop": {"kind": "http", "endpoint": format!("{}/render", rcv.base()),
                               "observe": {"url": format!("{}/operations/{{operation_id}}", rcv.base()),
                                           "present_if": {"status": [200]}, "absent_if": {"status": [404]}}}},
        "tasks": [
            sh("load", "cat source.txt > load.out", &[], &["source.txt"]),
            sh("transform", "grep -q good mode.txt && tr a-z A-Z < load.out > transform.out", &["load"], &["mode.txt"]),
            {"ref": "publish", "title": "tell the shop", "provider": "shop", "action": {"body": body},
             "effect": "external", "depends_on": ["transform"]}
        ]
    })
}

#[test]
fn no_command_prints_rust_internals_or_raw_json_over_the_e2e_plans() {
    let mut seen = Vec::new();
    let rcv = Receiver::start(&["--observe"]);
    let ws = Ws::new();
    ws.write("source.txt", "apples\n");
    ws.write("mode.txt", "good\n");
    ws.write_plan("plan.json", &pipeline(&rcv, json!({"list": "transform.out"})));
    scanned(&ws, &["check", "plan.json"], &mut seen).expect_code(0);

    // The publish's answer is lost; the shop is read back: present.
    rcv.control(json!({"mode": "drop", "times": 1}));
    let run = scanned(&ws, &["run", "plan.json"], &mut seen);
    run.expect_code(0);
    assert!(
        run.stdout.contains("publish    succeeded — answer lost, read back as present"),
        "the summary names the read-back:\n{}",
        run.stdout
    );
    read_all(&ws, &["load", "transform", "publish"], &mut seen);
    let explain = ws.engine(&["explain", "publish"]).stdout;
    assert!(!explain.contains("sandbox:"), "an HTTP call has no process sandbox:\n{explain}");
    let read_back = explain.lines().find(|l| l.contains("read back: GET")).unwrap_or_default().to_string();
    assert!(read_back.ends_with("present, by present_if (status 200 in [200])"), "one line:\n{explain}");

    // transform runs again (its input changed) and fails: publish, made
    // from its earlier output, is kept, never plain `succeeded`.
    ws.write("mode.txt", "bad\n");
    let run = scanned(&ws, &["run", "plan.json"], &mut seen);
    run.expect_code(1);
    assert!(run.stdout.contains("publish    kept  (upstream failed since: transform failed)"), "{}", run.stdout);
    let status = scanned(&ws, &["status"], &mut seen).stdout;
    let line = status.lines().find(|l| l.trim_start().starts_with("publish")).unwrap_or_default();
    // Its state column says `kept` (its last attempt did succeed, back then).
    assert_eq!(line.split_whitespace().nth(1), Some("kept"), "{status}");
    assert!(line.ends_with("(upstream failed since: transform failed)"), "{status}");
    let report = ws.json(&["report", "--no-timestamp"], 0);
    let publish = report["tasks"].as_array().and_then(|t| t.iter().find(|t| t["ref"] == "publish")).cloned();
    assert_eq!(publish.map(|p| p["upstream"]["upstream"].clone()), Some(json!("failed_since")), "{report:#}");
    read_all(&ws, &["transform", "publish"], &mut seen);

    // A revision that changes the publish: its new call repeats external
    // work that took effect in revision 1, and the approval says so.
    ws.write("mode.txt", "good\n");
    ws.write_plan("plan.json", &pipeline(&rcv, json!({"list": "transform.out", "again": true})));
    let revise = scanned(&ws, &["revise", "plan.json", "--reason", "publish again", "--approve-loosening"], &mut seen);
    assert!(!revise.stdout.contains("EvidenceId"), "{}", revise.stdout);
    assert!(
        revise.stdout.contains(
            "the first call in revision 2 of external work that already took effect in revision 1; \
             a new call of external work needs a person's approval"
        ),
        "{}",
        revise.stdout
    );
    read_all(&ws, &["publish"], &mut seen);

    // The money demo: a failed validation, the agent's claim, the repair.
    let money = Ws::fixture("money");
    scanned(&money, &["check", "plan.json"], &mut seen);
    scanned(&money, &["run", "plan.json"], &mut seen).expect_code(1);
    read_all(&money, &["T1", "T2"], &mut seen);
    scanned(&money, &["repair", "T2"], &mut seen).expect_code(0);
    read_all(&money, &["T2"], &mut seen);

    assert!(seen.is_empty(), "human output with internals:\n{}", seen.join("\n"));
}

#[test]
fn the_scan_catches_what_it_looks_for() {
    for bad in [
        "  TASK  reuse  -  from revision 1 attempt 1 (evidence [EvidenceId(6)])",
        "  evidence #3 {\"kind\":\"effect_marker\",\"reason\":\"response_lost\"}",
        "  17  2026-12-06 10:00:00  publish  task state changed: state blocked, {waits on [transform (pending)]}",
        "  handle Some(McpTask { task_id: \"t\" })",
    ] {
        assert!(!internals(bad).is_empty(), "missed: {bad}");
    }
    for fine in [
        "  evidence #3 no receipt: the connection broke after the request was written",
        "if it connects, add `\"network\": {\"connect\": [\"127.0.0.1:8765\"]}` to the task",
        "      | {\"status\": \"done\"}",
        "goal pipe (revision 1)",
    ] {
        assert!(internals(fine).is_empty(), "flagged: {fine}: {:?}", internals(fine));
    }
}
