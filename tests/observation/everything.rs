//! `@modelcontextprotocol/server-everything`: `simulate-research-query`
//! requires task augmentation (about 4 s of work). Over stdio and over
//! Streamable HTTP on a loopback port: the call completes, and its task id
//! is in the ledger before its result; a crash after the task id was
//! committed is reconciled from `tasks/get` without a second `tools/call`
//! (HTTP: the server keeps the task), or waits for a person (stdio: the
//! server died with the engine, and its tasks with it).

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

const TOOLS_CALL: &str = r#""method":"tools/call""#;
const TASKS_GET: &str = r#""method":"tasks/get""#;

/// server-everything over stdio, its stdin copied to `$SIDE/stdin.log`.
fn stdio(ws: &Ws) -> Value {
    let index = node_server("server-everything");
    json!({"kind": "mcp", "command": [
        "sh", "-c", r#"echo $$ >> "$1/starts.log"; tee -a "$1/stdin.log" | node "$2" stdio"#, "sh",
        ws.side.to_string_lossy(), index.to_string_lossy()]})
}

fn http(tap: &Tap) -> Value {
    json!({"kind": "mcp", "url": format!("http://127.0.0.1:{}/mcp", tap.port)})
}

fn research_plan(ws: &Ws, provider: Value) {
    ws.write_plan("plan.json", &plan(json!({"ev": provider}), vec![research_task("T1", "tides")]));
}

/// The task id of an attempt's handle (and its session, over HTTP).
fn task_of(a: &Attempt) -> (String, Option<String>) {
    let h = a.handle.as_ref().unwrap_or_else(|| panic!("a handle on {a:?}"));
    assert_eq!(h["kind"], "mcp_task", "{h}");
    (h["task_id"].as_str().unwrap().to_string(), h["session"].as_str().map(str::to_string))
}

/// Run in the background; return the attempt as first seen with a handle,
/// and whether its receipt was there then.
fn handle_before_result(ws: &Ws) -> (Attempt, bool, Out) {
    let mut running = ws.spawn_run();
    let seen = wait_until(Duration::from_secs(60), "the task id in the ledger, or the run's end", || {
        let l = Ledger::try_open(&ws.store());
        let first = l.as_ref().and_then(|l| l.attempts().into_iter().next());
        match first {
            Some(a) if a.handle.is_some() => {
                let had = l.as_ref().is_some_and(|l| l.receipt_of(a.id).is_some());
                Some(Some((a, had)))
            }
            _ if !running.alive() => Some(None),
            _ => None,
        }
    });
    let out = running.wait(RUN_DEADLINE);
    let (attempt, had_receipt) =
        seen.unwrap_or_else(|| panic!("the run ended with no handle recorded\n{}", out.describe()));
    (attempt, had_receipt, out)
}

/// What every completed research call shows in the ledger.
fn assert_completed_from(ws: &Ws, task_id: &str) {
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"), "{a:?}");
    assert_eq!(related_task(ws, a[0].id).as_deref(), Some(task_id), "the receipt is that task's result");
    let kinds = ws.event_kinds();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap_or_else(|| panic!("no {k} in {kinds:?}"));
    assert!(pos("dispatched") < pos("handle_recorded") && pos("handle_recorded") < pos("receipt_recorded"));
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains(&format!("accepted by the provider as MCP task {task_id}")), "{}", explain.stdout);
}

#[test]
fn a_task_augmented_call_over_stdio_completes_with_its_task_id_committed_first() {
    let ws = Ws::new();
    research_plan(&ws, stdio(&ws));
    let (attempt, had_receipt, out) = handle_before_result(&ws);
    assert!(!had_receipt, "the task id was in the ledger before the result");
    assert_eq!(attempt.state, "dispatched", "a handle claims acceptance, not the work: {attempt:?}");
    out.expect(0, None);
    let (task_id, session) = task_of(&attempt);
    assert_eq!(session, None, "a stdio task has no HTTP session");
    assert_completed_from(&ws, &task_id);
    let calls = calls_of(&ws, "simulate-research-query");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0]["params"]["task"]["ttl"].is_number(), "the call was task-augmented: {}", calls[0]);
    assert_eq!(starts(&ws).len(), 1);
}

#[test]
fn a_task_augmented_call_over_streamable_http_completes_with_its_task_id_committed_first() {
    let ev = Everything::start();
    let tap = Tap::new(ev.port);
    let ws = Ws::new();
    research_plan(&ws, http(&tap));
    let (attempt, had_receipt, out) = handle_before_result(&ws);
    assert!(!had_receipt, "the task id was in the ledger before the result");
    out.expect(0, None);
    let (task_id, session) = task_of(&attempt);
    assert!(session.is_some(), "an HTTP task names its session: {attempt:?}");
    assert_completed_from(&ws, &task_id);
    assert_eq!(tap.count(TOOLS_CALL), 1, "one tools/call reached the server");
    assert!(tap.count(TASKS_GET) >= 1, "the task was polled");
    // The run's end deleted its session.
    assert_eq!(tap.count("DELETE /mcp"), 1, "the session was closed at the end of the run");
}

#[test]
fn a_crash_after_the_task_id_was_committed_is_reconciled_from_tasks_get_without_a_second_call() {
    let ev = Everything::start();
    let tap = Tap::new(ev.port);
    let ws = Ws::new();
    research_plan(&ws, http(&tap));
    let first = ws.run_fp("after_handle");
    assert!(first.killed(), "expected the failpoint's SIGKILL\n{}", first.describe());
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "dispatched"), "{a:?}");
    assert!(ws.receipt_of(a[0].id).is_none());
    let (task_id, session) = task_of(&a[0]);
    assert!(session.is_some());
    assert_eq!(tap.count(TOOLS_CALL), 1);
    let gets_before = tap.count(TASKS_GET);

    let second = ws.run();
    second.expect(0, None);
    assert_eq!(tap.count(TOOLS_CALL), 1, "no second tools/call");
    assert!(tap.count(TASKS_GET) > gets_before, "asked the server with tasks/get");
    let receipt = ws.receipt_of(a[0].id).unwrap();
    assert_eq!(receipt["source"], "handle", "{receipt}");
    assert_eq!(receipt["lost"], "engine_restarted");
    assert_eq!(receipt["handle"]["task_id"], task_id.as_str());
    assert_completed_from(&ws, &task_id);
    assert!(ws.event_kinds().iter().any(|k| k == "answered_by_handle"));
    let lookup = ws.evidence(a[0].id).into_iter().find(|e| e.1 == "handle_lookup").expect("the lookup is evidence");
    assert_eq!(lookup.2["found"], "answered");
}

/// An answer fetched by its handle after a crash is judged like any answer,
/// against the goal's protected paths as they were stored with its intent
/// (issue 14): a protected file changed while the engine was down fails the
/// attempt as `constraint_violated`, and nothing is called twice.
#[test]
fn an_answer_by_handle_is_judged_against_the_protected_paths_of_its_intent() {
    let ev = Everything::start();
    let tap = Tap::new(ev.port);
    let ws = Ws::new();
    ws.write("locked.txt", "as it was\n");
    let mut p = plan(json!({"ev": http(&tap)}), vec![research_task("T1", "tides")]);
    p["goal"]["constraints"] =
        json!([{"id": "C1", "statement": "locked.txt is not edited", "protect": ["locked.txt"]}]);
    ws.write_plan("plan.json", &p);
    let first = ws.run_fp("after_handle");
    assert!(first.killed(), "expected the failpoint's SIGKILL\n{}", first.describe());
    ws.write("locked.txt", "edited while the engine was down\n");

    let second = ws.run();
    second.expect(1, None);
    assert_eq!(tap.count(TOOLS_CALL), 1, "no second tools/call");
    let a = ws.attempts();
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(ws.receipt_of(a[0].id).unwrap()["source"], "handle");
    assert_eq!(a[0].state, "failed", "{a:?}");
    let class = a[0].classification.as_ref().expect("classified");
    assert_eq!(
        (class["class"].as_str(), class["rule"].as_str()),
        (Some("constraint_violated"), Some("protected_path_changed"))
    );
    let changed = ws.evidence(a[0].id).into_iter().find(|e| e.1 == "protected_path_changed").expect("its evidence");
    assert_eq!(changed.2["changes"][0]["path"], "locked.txt", "{}", changed.2);
}

#[test]
fn a_crash_after_the_task_id_over_stdio_is_unknown_the_server_died_with_its_tasks() {
    let ws = Ws::new();
    research_plan(&ws, stdio(&ws));
    let first = ws.run_fp("after_handle");
    assert!(first.killed(), "{}", first.describe());
    let a = ws.attempts();
    let (task_id, _) = task_of(&a[0]);
    let second = ws.run();
    second.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(calls_of(&ws, "simulate-research-query").len(), 1, "never sent again");
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "effect_unknown"), "{a:?}");
    let lookup = ws.evidence(a[0].id).into_iter().find(|e| e.1 == "handle_lookup").expect("the lookup is evidence");
    assert_eq!(lookup.2["found"], "unknown", "{:?}", lookup.2);
    // The new server was asked about the task (and did not know it).
    let gets: Vec<Value> = sent(&ws).into_iter().filter(|m| m["method"] == "tasks/get").collect();
    assert!(gets.iter().any(|g| g["params"]["taskId"] == task_id.as_str()), "{gets:?}");
    // `status` names the task, for the person who settles it.
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains(&format!("accepted as MCP task {task_id}")), "{}", status.stdout);
    // So does the HTML report, with what asking about it found.
    ws.engine(&["report", "--html", "report.html", "--no-timestamp"]).expect(0, None);
    let html = ws.read("report.html");
    assert!(html.contains(&format!("accepted by the provider as MCP task {task_id}")), "the handle in the report");
    assert!(
        html.contains(&format!("asked the provider about MCP task {task_id}: unknown")),
        "the lookup in the report"
    );
}

#[test]
fn a_tool_without_task_support_is_called_plainly_beside_a_task_on_the_same_server() {
    // `trigger-long-running-operation` declares no task support: no
    // `params.task`, no handle, its answer the receipt; the research task
    // next to it still runs as a task, on the one server of the run.
    let ws = Ws::new();
    let long = json!({"ref": "L1", "title": "a long operation", "provider": "ev", "effect": "none",
                      "action": {"tool": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}}});
    let tasks = vec![long, research_task("T1", "tides")];
    ws.write_plan("plan.json", &plan(json!({"ev": stdio(&ws)}), tasks));
    ws.run().expect(0, None);
    let long_calls = calls_of(&ws, "trigger-long-running-operation");
    assert_eq!(long_calls.len(), 1, "{long_calls:?}");
    assert!(long_calls[0]["params"].get("task").is_none(), "not task-augmented: {}", long_calls[0]);
    let research = calls_of(&ws, "simulate-research-query");
    assert!(research[0]["params"]["task"]["ttl"].is_number(), "{}", research[0]);
    let by_ref = |r: &str| ws.attempts().into_iter().find(|a| a.task_ref == r).unwrap();
    let (l1, t1) = (by_ref("L1"), by_ref("T1"));
    assert_eq!((l1.state.as_str(), l1.handle.as_ref()), ("succeeded", None), "{l1:?}");
    assert_eq!(t1.state, "succeeded");
    assert!(t1.handle.is_some(), "{t1:?}");
    let answer = receipt_answer(&ws, l1.id).unwrap();
    assert!(answer.to_string().contains("Long running operation completed"), "{answer}");
    assert_eq!(starts(&ws).len(), 1, "one server for both");
}

/// The order the ledger saw, for two research tasks: the kinds of their
/// `dispatched` and `receipt_recorded` events, as `(kind, task)`.
fn dispatches_and_receipts(ws: &Ws) -> Vec<(String, String)> {
    ws.ledger()
        .events()
        .into_iter()
        .filter(|e| e.kind == "dispatched" || e.kind == "receipt_recorded")
        .map(|e| (e.kind, e.task_ref.unwrap_or_default()))
        .collect()
}

#[test]
fn calls_to_one_server_take_turns_unless_it_is_declared_concurrent() {
    for concurrent in [false, true] {
        let ev = Everything::start();
        let ws = Ws::new();
        let mut provider = json!({"kind": "mcp", "url": format!("http://127.0.0.1:{}/mcp", ev.port)});
        if concurrent {
            provider["concurrent"] = json!(true);
        }
        let tasks = vec![research_task("T1", "tides"), research_task("T2", "reefs")];
        ws.write_plan("plan.json", &plan(json!({"ev": provider}), tasks));
        ws.engine_json(&["run", "plan.json", "--jobs", "2"]).expect(0, None);
        let order = dispatches_and_receipts(&ws);
        let kinds: Vec<&str> = order.iter().map(|(k, _)| k.as_str()).collect();
        let want = match concurrent {
            // Both out at once: the second left before the first answered.
            true => ["dispatched", "dispatched", "receipt_recorded", "receipt_recorded"],
            // One request at a time, start to receipt.
            false => ["dispatched", "receipt_recorded", "dispatched", "receipt_recorded"],
        };
        assert_eq!(kinds, want, "concurrent: {concurrent}: {order:?}");
    }
}
