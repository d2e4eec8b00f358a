//! Issue 12, item 2 through a pipe: one plain line per task start and end,
//! as it happens (read while the run goes on), no colour; `--json` keeps
//! stdout one document; `--quiet` prints the summary only.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use super::common::*;

/// T1 holds until its child is killed; T2 (after T1) fails.
fn two_tasks(ws: &Ws) {
    let mut t2 = task("T2", "none", "exit 3");
    t2["depends_on"] = serde_json::json!(["T1"]);
    ws.write_plan("plan.json", &plan(vec![task("T1", "none", &holding("t1", false)), t2]));
}

/// `engine ARGS` with stderr on a pipe read line by line as it comes.
fn spawn_piped(ws: &Ws, args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let stdout = std::fs::File::create(ws.root().join("piped.stdout")).expect("stdout file");
    let mut child =
        ws.command(args).stdin(Stdio::null()).stdout(stdout).stderr(Stdio::piped()).spawn().expect("start the engine");
    let stderr = child.stderr.take().expect("stderr pipe");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Lines from `rx` up to and including the first containing `needle`.
#[track_caller]
fn lines_until(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    loop {
        match rx.recv_timeout(SOON) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return;
                }
            }
            Err(e) => panic!("no line with {needle:?} ({e}); got {seen:#?}"),
        }
    }
}

#[test]
fn a_pipe_gets_a_plain_line_per_task_start_and_end_as_it_happens() {
    let ws = Ws::new();
    two_tasks(&ws);
    let (mut engine, rx) = spawn_piped(&ws, &["run", "plan.json"]);
    let (leader, child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);

    let mut seen = Vec::new();
    lines_until(&rx, "T1 started: task T1 (try 1)", &mut seen);
    // Read while T1 still runs: the line came as it happened, not at the end.
    assert!(matches!(engine.try_wait(), Ok(None)) && !gone(leader), "the run is still going on");
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "nothing else until T1 ends: {seen:?}");

    send(child, libc::SIGKILL); // T1's script ends: it succeeds.
    lines_until(&rx, "T2 failed: provider_rejected (", &mut seen);
    assert_eq!(engine.wait().expect("wait").code(), Some(1));
    seen.extend(rx.iter());

    let shown: Vec<&str> = seen.iter().map(|l| l.get(8..).unwrap_or("")).collect();
    assert_eq!(shown[0], "goal g (revision 1): 2 tasks, 0 complete", "{seen:#?}");
    assert_eq!(shown[1], "T1 started: task T1 (try 1)", "{seen:#?}");
    assert!(shown[2].starts_with("T1 succeeded ("), "{seen:#?}");
    assert_eq!(shown[3], "T2 started: task T2 (try 1)", "{seen:#?}");
    assert!(shown[4].starts_with("T2 failed: provider_rejected ("), "{seen:#?}");
    assert_eq!(seen.len(), 5, "{seen:#?}");
    for line in &seen {
        assert!(line.starts_with("[00:") && line.as_bytes().get(7) == Some(&b' '), "a clock: {line:?}");
        assert!(!line.contains('\u{1b}'), "no colour or cursor control in a pipe: {line:?}");
    }
    // The summary went to stdout.
    let summary = std::fs::read_to_string(ws.root().join("piped.stdout")).expect("stdout");
    assert!(summary.contains("T2    failed  provider_rejected"), "{summary}");
}

#[test]
fn json_keeps_stdout_one_document_and_progress_goes_to_stderr() {
    let ws = Ws::new();
    two_tasks(&ws);
    ws.write("t1.release", "");
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect_code(1);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("stdout is exactly one JSON document");
    assert_eq!(doc["exit_code"], 1, "{doc}");
    assert!(out.stderr.contains("] T1 started: task T1 (try 1)"), "{}", out.describe());
    assert!(out.stderr.contains("] T2 failed: provider_rejected ("), "{}", out.describe());
}

#[test]
fn quiet_prints_the_summary_only() {
    let ws = Ws::new();
    two_tasks(&ws);
    ws.write("t1.release", "");
    let out = ws.engine(&["run", "plan.json", "--quiet"]);
    out.expect_code(1);
    assert_eq!(out.stderr, "", "{}", out.describe());
    assert!(out.stdout.contains("stopped: task failed: T2"), "{}", out.describe());
}

/// Issue 27: an MCP server's `notifications/progress` (with the
/// `progressToken` the engine sent) reach the task's line as they come,
/// escaped; and the ledger keeps a bounded number of them as events.
#[test]
fn an_mcp_servers_progress_reaches_the_task_line_escaped_and_a_bounded_log() {
    let ws = Ws::new();
    let command = mcp_server_command(&ws.mcp_log(), &[]);
    let mut p = plan(vec![serde_json::json!({"ref": "T1", "title": "steps", "provider": "fx", "effect": "none",
        "action": {"tool": "steps", "arguments": {"steps": 20, "ms": 120}}})]);
    p["providers"]["fx"] = serde_json::json!({"kind": "mcp", "command": command});
    ws.write_plan("plan.json", &p);
    let (mut engine, rx) = spawn_piped(&ws, &["run", "plan.json", "--progress", "plain"]);
    let mut seen = Vec::new();
    // Read while the call is still out: the first notes arrive long
    // before the 20th step.
    lines_until(&rx, "T1 progress 1/20 step 1 of 20\\x1b[2J", &mut seen);
    lines_until(&rx, "T1 progress 2/20", &mut seen);
    assert!(seen.iter().all(|l| !l.contains('\u{1b}')), "escaped: {seen:#?}");
    let status = engine.wait().expect("the engine ends");
    assert_eq!(status.code(), Some(0), "{seen:#?}");
    let notes = ws.events_of("provider_progress");
    // 20 notes (100 ms apart at the least): the 1st, 2nd, 4th, 8th, 16th recorded.
    let numbers: Vec<i64> = notes.iter().map(|(_, _, d)| d["note"].as_i64().unwrap_or(0)).collect();
    assert!(!numbers.is_empty() && numbers.len() <= 8, "{numbers:?}");
    assert!(numbers.iter().all(|n| (*n as u64).is_power_of_two()), "{numbers:?}");
    assert_eq!(notes[0].2["message"], "step 1 of 20\u{1b}[2J", "kept as the server said it, escaped when shown");
}
