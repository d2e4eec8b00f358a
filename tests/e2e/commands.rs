//! The read-side commands: `digest`, `graph`, `log --follow`, and secret
//! redaction as a person would meet it in `explain`.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

fn chain_plan() -> Value {
    let mut b = task("B", &["true"]);
    b["depends_on"] = json!(["A"]);
    let mut c = task("C", &["true"]);
    c["depends_on"] = json!(["A", "B"]);
    plan(vec![task("A", &["true"]), b, c])
}

#[test]
fn digest_prints_every_digest_and_operation_id() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &chain_plan());
    let out = ws.engine(&["digest", "plan.json", "--json"]);
    out.expect_code(0);
    let j = out.json();
    let hex64 = |v: &Value| v.as_str().is_some_and(|s| s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(hex64(&j["plan_digest"]) && hex64(&j["goal_contract_digest"]), "{j:#}");
    let tasks = j["tasks"].as_array().unwrap();
    assert_eq!(tasks.iter().map(|t| t["ref"].as_str().unwrap()).collect::<Vec<_>>(), ["A", "B", "C"]);
    for t in tasks {
        for k in ["meaning_digest", "dependency_digest", "request_digest"] {
            assert!(hex64(&t[k]), "{k}: {t}");
        }
        assert!(t["operation_id"].as_str().unwrap().starts_with("op_"));
    }
    // Same action, same provider: same request digest; different refs: different operations.
    assert_eq!(tasks[0]["request_digest"], tasks[1]["request_digest"]);
    assert_ne!(tasks[0]["operation_id"], tasks[1]["operation_id"]);
    let text = ws.engine(&["digest", "plan.json"]);
    assert!(text.stdout.contains(tasks[2]["operation_id"].as_str().unwrap()), "{}", text.stdout);
}

#[test]
fn graph_as_dot_and_mermaid_has_every_edge() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &chain_plan());
    let dot = ws.engine(&["graph", "plan.json"]);
    dot.expect_code(0);
    assert!(dot.stdout.starts_with("digraph plan {"), "{}", dot.stdout);
    for edge in ["\"A\" -> \"B\";", "\"A\" -> \"C\";", "\"B\" -> \"C\";"] {
        assert!(dot.stdout.contains(edge), "missing {edge} in\n{}", dot.stdout);
    }
    assert_eq!(dot.stdout.matches("->").count(), 3);
    let mermaid = ws.engine(&["graph", "plan.json", "--format", "mermaid"]);
    mermaid.expect_code(0);
    assert!(mermaid.stdout.starts_with("flowchart LR"), "{}", mermaid.stdout);
    assert_eq!(mermaid.stdout.matches("-->").count(), 3, "{}", mermaid.stdout);
    // Nothing is written by reading a plan.
    assert!(!ws.store_dir().exists());
}

#[test]
fn log_follow_prints_events_as_they_are_written() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    let mut follower = ws.spawn_engine(&["log", "--follow", "--json"]);
    let seen = |want: usize| {
        wait_for(Duration::from_secs(10), || {
            let lines = std::fs::read_dir(ws.root())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".stdout"))
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .find(|t| t.contains("\"kind\""))?;
            let n = lines.lines().filter(|l| l.contains("run_finished")).count();
            (n >= want).then_some(lines)
        })
    };
    assert!(seen(1).is_some(), "the follower printed the existing events");
    // A second run writes more; the follower prints them without restarting.
    ws.engine(&["run", "plan.json"]).expect_code(0);
    let text = seen(2).expect("the follower printed the new run's events");
    let seqs: Vec<i64> =
        text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in ledger order: {seqs:?}");
    assert!(follower.alive());
    follower.kill9();
}

#[test]
fn secrets_named_in_the_plan_are_redacted_from_captured_output() {
    let ws = Ws::new();
    let mut p = plan(vec![task("A", &["sh", "-c", "echo token=$API_TOKEN; echo $API_TOKEN >&2"])]);
    p["secrets"] = json!(["API_TOKEN"]);
    p["providers"]["sh"]["env"] = json!(["API_TOKEN"]);
    ws.write_plan("plan.json", &p);
    let mut cmd = ws.command(&["run", "plan.json"]);
    cmd.env("API_TOKEN", "s3cr3t-value-42");
    ws.run_command(cmd).expect_code(0);
    let explain = ws.engine(&["explain", "A", "--json"]).stdout;
    assert!(!explain.contains("s3cr3t-value-42"), "{explain}");
    assert!(explain.contains("[REDACTED]"), "{explain}");
    // Nor in any stored blob.
    let needle = b"s3cr3t-value-42";
    let leaked = ws.ledger().blobs().iter().filter(|b| b.data.windows(needle.len()).any(|w| w == needle)).count();
    assert_eq!(leaked, 0);
}
