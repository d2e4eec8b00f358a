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

/// What the shell gets at a Tab after `engine WORDS…` (the last word is
/// the one completed), through clap_complete's protocol for bash: the
/// engine called back as `COMPLETE=bash engine -- engine WORDS…`.
fn tab(ws: &Ws, words: &[&str]) -> (Vec<String>, Out) {
    let mut args = vec!["--", "engine"];
    args.extend_from_slice(words);
    let index = words.len().to_string();
    let out = ws.engine_env(&args, &[("COMPLETE", "bash"), ("_CLAP_COMPLETE_INDEX", &index)]);
    // Flags are offered too where nothing is typed yet: the values only.
    let value = |l: &&str| !l.is_empty() && !l.starts_with('-');
    let mut offered: Vec<String> = out.stdout.lines().filter(value).map(str::to_string).collect();
    offered.sort();
    (offered, out)
}

/// Issue 41: completions that know the store. In a workspace with a run
/// (load succeeded, bad failed, gated waiting on a person's approval), a
/// Tab after a command that names a task offers the goal's refs, after
/// `approve` the operation waiting on an approval, after `retry` the refs
/// and the failed task's operation; `settle` has no unknown to offer.
/// Where there is no store it offers nothing, prints nothing and creates
/// no store; `engine completions bash` still prints the built script.
#[test]
fn completions_offer_the_stores_task_refs_and_operation_ids() {
    let ws = Ws::new();
    let mut gated = task("gated", &["true"]);
    gated["requires_approval"] = json!(true);
    gated["depends_on"] = json!(["load"]);
    ws.write_plan("plan.json", &plan(vec![task("load", &["true"]), task("bad", &["false"]), gated]));
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    let status = ws.json(&["status"], 0);
    let op_of = |r: &str| {
        let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
        let t = tasks.into_iter().find(|t| t["ref"] == r).unwrap_or_default();
        t["operation_id"].as_str().unwrap_or_default().to_string()
    };
    let (gated_op, bad_op) = (op_of("gated"), op_of("bad"));
    assert!(gated_op.starts_with("op_") && bad_op.starts_with("op_"), "{status:#}");

    let started = std::time::Instant::now();
    let (refs, out) = tab(&ws, &["explain", ""]);
    let took = started.elapsed();
    assert_eq!(refs, ["bad", "gated", "load"], "{}", out.describe());
    assert!(out.stderr.is_empty(), "{}", out.describe());
    eprintln!("a Tab over the store took {took:?}");
    assert!(took < Duration::from_secs(2), "a Tab took {took:?}");
    for command in ["hold", "release", "repair", "rerun", "output"] {
        assert_eq!(tab(&ws, &[command, "l"]).0, ["load"], "engine {command} l<Tab>");
    }
    assert_eq!(tab(&ws, &["log", "--task", "g"]).0, ["gated"]);
    assert_eq!(tab(&ws, &["approve", ""]).0, [gated_op.clone()]);
    assert_eq!(tab(&ws, &["approve", "op_"]).0, [gated_op.clone()]);
    let mut retry = vec![bad_op, "bad".into(), "gated".into(), "load".into()];
    retry.sort();
    assert_eq!(tab(&ws, &["retry", ""]).0, retry);
    assert!(tab(&ws, &["settle", ""]).0.is_empty(), "no unknown outcome to settle");
    // Another goal than the store's: nothing; the help beside each (fish).
    assert!(tab(&ws, &["explain", "--goal", "nosuch", ""]).0.is_empty());
    let fish = ws.engine_env(&["--", "engine", "approve", ""], &[("COMPLETE", "fish")]);
    let help = format!("{gated_op}\ttask gated (awaiting_approval)");
    assert!(fish.stdout.lines().any(|l| l == help), "{}", fish.describe());

    // No store for this folder: nothing offered, nothing said, none made.
    let bare = Ws::new();
    let (none, out) = tab(&bare, &["explain", ""]);
    assert!(none.is_empty() && out.stderr.is_empty() && out.code() == 0, "{}", out.describe());
    assert!(!bare.store_dir().exists(), "a Tab created a store");

    // The shell's registration, and the built script, as before.
    let registration = ws.engine_env(&[], &[("COMPLETE", "bash")]);
    assert!(registration.stdout.contains("_CLAP_COMPLETE_INDEX"), "{}", registration.describe());
    let script = ws.engine(&["completions", "bash"]);
    script.expect_code(0);
    assert!(script.stdout.contains("_engine()"), "{}", script.describe());
}

/// Issue 41, item 7: `explain` of a blocked task names what it waits on,
/// the dependency and its state.
#[test]
fn explain_of_a_blocked_task_names_what_it_waits_on() {
    let ws = Ws::new();
    let mut after = task("after", &["true"]);
    after["depends_on"] = json!(["bad"]);
    ws.write_plan("plan.json", &plan(vec![task("bad", &["false"]), after]));
    ws.run().expect(1, None);
    let out = ws.engine(&["explain", "after"]);
    out.expect_code(0);
    assert!(out.stdout.contains("state blocked"), "{}", out.describe());
    assert!(out.stdout.lines().any(|l| l == "blocked: waits on bad (failed)"), "{}", out.describe());
}

/// Issue 41, item 1: the network said up front and after. A command task
/// that names a URL and declares no network: `check` warns
/// NETWORK_UNDECLARED with the line to add; its refused connection fails
/// it, and `explain` says the process had no network and what to declare.
#[test]
fn a_task_without_a_network_is_told_before_and_after() {
    let ws = Ws::new();
    let fetch = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/data', timeout=5)";
    ws.write_plan("plan.json", &plan(vec![task("fetch", &["python3", "-c", fetch])]));
    let check = ws.engine(&["check", "plan.json"]);
    check.expect_code(0);
    let warned = check.stderr.lines().find(|l| l.contains("NETWORK_UNDECLARED")).unwrap_or_default().to_string();
    assert!(warned.contains("127.0.0.1:8765"), "{}", check.describe());
    ws.run().expect(1, None);
    let explain = ws.engine(&["explain", "fetch"]);
    let said = "this process had no network (none declared): add `\"network\": {\"connect\": [\"127.0.0.1:8765\"]}`";
    assert!(explain.stdout.contains(said), "{}", explain.describe());
    // Before and after, the same words to paste.
    let hint = "`\"network\": {\"connect\": [\"127.0.0.1:8765\"]}`";
    assert!(warned.contains(hint) && explain.stdout.contains(hint), "{warned}\n{}", explain.stdout);
}
