//! Issue 27: input a server asks for is a person's act. The project's MCP
//! fixture (`server.py --ask`) asks for a name before its effect, in both
//! revisions: 2026-07-28's `input_required` result (stateless: the answer
//! comes back with the `requestState` on a new call) and 2025-11-25's
//! `elicitation/create` during the call (dismissed at once, asked again on
//! the call that carries the answer). Judged from the fixture's delivery
//! log: the effect happens once, with the person's answer, and never
//! before it.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

fn ask_plan(ws: &Ws, flags: &[&str], extra: Vec<Value>) {
    let command = mcp_server_command(&ws.mcp_log(), flags);
    let mut tasks = vec![json!({"ref": "T1", "title": "ask a person", "provider": "fx", "effect": "none",
                                "action": {"tool": "ask", "arguments": {"message": "Who is asking?\u{1b}[2J"}}})];
    tasks.extend(extra);
    ws.write_plan(
        "plan.json",
        &plan(json!({"fx": {"kind": "mcp", "command": command}, "sh": {"kind": "command"}}), tasks),
    );
}

fn task_state(ws: &Ws, task_ref: &str) -> String {
    let status = ws.json(&["status"], 0);
    let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
    let t = tasks.iter().find(|t| t["ref"] == task_ref).unwrap_or_else(|| panic!("{task_ref} in {status}"));
    t["state"].as_str().unwrap_or_default().to_string()
}

/// The whole round: asked, shown, a bad answer refused, the answer
/// recorded once, sent by the next run, the effect done once with it.
fn round(flags: &[&str]) {
    let ws = Ws::new();
    let other = json!({"ref": "T2", "title": "goes on", "provider": "sh", "effect": "local",
                       "action": {"run": ["true"]}});
    ask_plan(&ws, flags, vec![other]);
    let out = ws.run();
    out.expect(4, Some("INPUT_REQUIRED"));
    let report = out.json();
    assert_eq!(report["awaiting_input"][0]["task_ref"], "T1", "{report}");
    assert_eq!(report["awaiting_input"][0]["answer_with"], "engine answer T1 --field name=VALUE", "{report}");
    assert!(ws.mcp_deliveries().is_empty(), "no effect before a person answers");
    assert_eq!(task_state(&ws, "T1"), "awaiting_input");
    assert_eq!(task_state(&ws, "T2"), "succeeded", "other ready tasks go on");
    let status = ws.json(&["status"], 0);
    let t1 = status["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == "T1").unwrap().clone();
    assert_eq!(t1["next"][0]["command"], "engine answer T1 --field name=VALUE", "{t1}");
    assert_eq!(status["awaiting_input"][0]["task_ref"], "T1", "{status}");
    // The question is in the ledger and shown escaped.
    let asked = ws.events_of("input_requested");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let text = ws.engine(&["status"]);
    assert!(text.stdout.contains("Who is asking?\\x1b[2J") && !text.stdout.contains('\u{1b}'), "{}", text.stdout);
    assert!(text.stdout.contains("field name (string, required)"), "{}", text.stdout);
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("Who is asking?\\x1b[2J"), "{}", explain.stdout);
    // A bad answer names its field and records nothing.
    for (field, problem) in [("nmae=Ada", "nmae"), ("count=3", "name"), ("count=three", "count")] {
        let mut args = vec!["answer", "T1", "--field", field];
        if problem != "name" && field != "nmae=Ada" {
            args.extend(["--field", "name=Ada"]);
        }
        let out = ws.engine_json(&args);
        out.expect(2, Some("ANSWER_INVALID"));
        assert_eq!(out.json()["error"]["place"], format!("--field {problem}"), "{}", out.describe());
    }
    assert!(ws.events_of("input_answered").is_empty());
    // The answer, twice under one request id: recorded once. The task's
    // effect is `none`: the next run sends it, no approval first.
    assert_eq!(report["awaiting_input"][0]["approval_first"], false, "{report}");
    for _ in 0..2 {
        let said = ws.engine(&["answer", "T1", "--field", "name=Ada", "--field", "count=3", "--request-id", "a1"]);
        said.expect_code(0);
        assert!(said.stdout.contains("the next `engine run` sends them in a new call"), "{}", said.describe());
    }
    assert_eq!(ws.events_of("input_answered").len(), 1);
    assert_eq!(task_state(&ws, "T1"), "pending");
    ws.run().expect(0, None);
    let delivered = ws.mcp_deliveries();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["arguments"]["answer"], json!({"name": "Ada", "count": 3}), "{delivered:?}");
    ws.verify();
}

#[test]
fn a_2026_07_28_input_required_waits_for_a_persons_answer() {
    round(&["--era", "modern", "--ask"]);
}

#[test]
fn a_2025_11_25_elicitation_waits_for_a_persons_answer() {
    round(&["--ask"]);
}

/// A provider cannot answer: a task's command runs `engine answer` with
/// the store's path, and tries to write the store file itself, from
/// inside the sandbox. Nothing is recorded; the task still waits.
#[test]
fn a_provider_cannot_answer() {
    let ws = Ws::new();
    let store = ws.store();
    let script = format!(
        "{engine} --store {s} answer T1 --field name=Mallory; echo tampered >> {s}; {engine} --store {s} answer T1 --field name=Mallory --json; exit 0",
        engine = sh_quote(crate::support::process::ENGINE),
        s = sh_quote(&store)
    );
    let mallory = json!({"ref": "T2", "title": "tries to answer", "provider": "sh", "effect": "local",
                         "action": {"run": ["sh", "-c", script]}});
    ask_plan(&ws, &["--era", "modern", "--ask"], vec![mallory]);
    ws.run().expect(4, Some("INPUT_REQUIRED"));
    assert!(ws.events_of("input_answered").is_empty(), "no answer recorded by a provider");
    assert_eq!(task_state(&ws, "T1"), "awaiting_input");
    ws.verify();
}

// ------------------------------------------------------------ server-everything

/// The official `@modelcontextprotocol/server-everything` (pinned): its
/// `trigger-elicitation-request` sends `elicitation/create` during the
/// call (2025-11-25), a form whose only required field is `name`. The
/// engine replies `cancel` at once (the person is not there), the task
/// waits; the answer goes on the next call, where the server asks the same
/// question again and gets it: its result names the person's answer and
/// the form's defaults for the fields the person left out.
fn everything_round(ws: &Ws, provider: Value) {
    let task = json!({"ref": "T1", "title": "ask a person", "provider": "ev", "effect": "none",
                      "action": {"tool": "trigger-elicitation-request", "arguments": {}}});
    ws.write_plan("plan.json", &plan(json!({"ev": provider}), vec![task]));
    let out = ws.run();
    out.expect(4, Some("INPUT_REQUIRED"));
    let first = receipt_answer(ws, 1).expect("the first call's result is kept");
    assert!(first.to_string().contains("cancel"), "the engine replied cancel, never an invented answer: {first}");
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("Please provide inputs for the following fields:"), "{}", status.stdout);
    assert!(status.stdout.contains("field name (string, required)"), "{}", status.stdout);
    // An array field cannot be typed on the command line: refused, named.
    let out = ws.engine_json(&["answer", "T1", "--field", "name=Ada", "--field", "untitledMultipleSelectEnum=Piano"]);
    out.expect(2, Some("ANSWER_INVALID"));
    ws.engine_json(&["answer", "T1", "--field", "name=Ada Lovelace", "--field", "integer=7"]).expect_code(0);
    ws.run().expect(0, None);
    let answered = receipt_answer(ws, 2).expect("the answered call's result");
    let text = answered.to_string();
    assert!(text.contains("Name: Ada Lovelace") && text.contains("Favorite Integer: 7"), "{text}");
    // The form's defaults (SEP-1034) filled what the person left out; a
    // field given (`integer`, default 42) won over its default.
    assert!(text.contains("Favorite Number: 3.14"), "the number's default: {text}");
    assert!(text.contains(r#"\"firstLine\": \"It was a dark and stormy night.\""#), "a string's default: {text}");
    assert!(!text.contains("Favorite Integer: 42"), "{text}");
    ws.verify();
}

#[test]
fn server_everything_asks_over_stdio_and_a_person_answers() {
    let ws = Ws::new();
    let index = node_server("server-everything");
    everything_round(&ws, json!({"kind": "mcp", "command": ["node", index.to_string_lossy(), "stdio"]}));
}

#[test]
fn server_everything_asks_over_streamable_http_and_a_person_answers() {
    let ev = Everything::start();
    let ws = Ws::new();
    everything_round(&ws, json!({"kind": "mcp", "url": format!("http://127.0.0.1:{}/mcp", ev.port)}));
}

// ------------------------------------------------------------ a question held open for a person

/// server-everything's question held open in the call (`ask.wait_seconds`):
/// the run shows it and the exact command, a person answers from another
/// terminal (a second process) while the call waits, and the server gets
/// `accept` with the answer and the form's defaults in that very call —
/// one call, one attempt, the task done in one run.
fn held_round(ws: &Ws, mut provider: Value) {
    provider["ask"] = json!({"wait_seconds": 60});
    let task = json!({"ref": "T1", "title": "ask a person", "provider": "ev", "effect": "none",
                      "timeout_seconds": 90,
                      "action": {"tool": "trigger-elicitation-request", "arguments": {}}});
    ws.write_plan("plan.json", &plan(json!({"ev": provider}), vec![task]));
    let mut run = ws.spawn_run();
    let command = "answer from another terminal: engine answer T1 --field name=VALUE";
    let shown = wait_for(Duration::from_secs(60), || {
        std::fs::read_to_string(run.stderr_path()).ok().filter(|e| e.contains(command))
    })
    .unwrap_or_else(|| {
        panic!("the run shows the question and the command while it waits: {}", run.wait(RUN_DEADLINE).describe())
    });
    assert!(shown.contains("field name (string, required)"), "{shown}");
    assert!(shown.contains("counted in the task's deadline"), "{shown}");
    assert!(run.alive(), "the run waits for the person");
    // The same checks as any answer: a bad one names its field, records nothing.
    let out = ws.engine_json(&["answer", "T1", "--field", "nmae=Ada"]);
    out.expect(2, Some("ANSWER_INVALID"));
    assert!(ws.events_of("input_answered").is_empty());
    let said = ws.engine_json(&["answer", "T1", "--field", "name=Ada Lovelace", "--field", "integer=7"]);
    said.expect_code(0);
    assert!(said.json()["answer"]["held_until"].is_string(), "{}", said.describe());
    let out = run.wait(RUN_DEADLINE);
    out.expect(0, None);
    assert_eq!(ws.attempt_count(), 1, "one call: the answer went to the call that asked");
    let text = receipt_answer(ws, 1).expect("the call's result").to_string();
    assert!(text.contains("Name: Ada Lovelace") && text.contains("Favorite Integer: 7"), "{text}");
    assert!(text.contains("Favorite Number: 3.14"), "the form's default for what the person left out: {text}");
    assert!(!text.contains("cancel"), "{text}");
    assert_eq!(ws.events_of("input_held").len(), 1);
    let answered = ws.events_of("input_answered");
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(answered[0].2["held"].is_i64(), "{answered:?}");
    assert!(ws.events_of("input_requested").is_empty(), "nothing left to ask");
    ws.verify();
}

#[test]
fn server_everythings_question_over_streamable_http_is_held_open_and_answered_from_another_terminal() {
    let ev = Everything::start();
    let ws = Ws::new();
    held_round(&ws, json!({"kind": "mcp", "url": format!("http://127.0.0.1:{}/mcp", ev.port)}));
}

#[test]
fn server_everythings_question_over_stdio_is_held_open_and_answered_from_another_terminal() {
    let ws = Ws::new();
    let index = node_server("server-everything");
    held_round(&ws, json!({"kind": "mcp", "command": ["node", index.to_string_lossy(), "stdio"]}));
}

/// Nobody answers in time: the server gets `cancel` when the wait ends,
/// and nothing else — one `tools/call`, one reply, as the server's own
/// input (through `tee`) shows; the question is recorded and the task
/// waits for `engine answer`, with the same advice as without a wait.
#[test]
fn a_held_question_nobody_answers_in_time_is_cancelled_and_the_task_waits() {
    let ws = Ws::new();
    let index = node_server("server-everything");
    let provider = json!({"kind": "mcp", "ask": {"wait_seconds": 2}, "command": [
        "sh", "-c", r#"tee -a "$1/stdin.log" | node "$2" stdio"#, "sh",
        ws.side.to_string_lossy(), index.to_string_lossy()]});
    let task = json!({"ref": "T1", "title": "ask a person", "provider": "ev", "effect": "none",
                      "timeout_seconds": 60,
                      "action": {"tool": "trigger-elicitation-request", "arguments": {}}});
    ws.write_plan("plan.json", &plan(json!({"ev": provider}), vec![task]));
    let started = std::time::Instant::now();
    let out = ws.run();
    out.expect(4, Some("INPUT_REQUIRED"));
    assert!(started.elapsed() >= Duration::from_secs(2), "the call waited for the person");
    assert!(out.stderr.contains("engine answer T1 --field name=VALUE"), "{}", out.describe());
    assert_eq!(out.json()["awaiting_input"][0]["answer_with"], "engine answer T1 --field name=VALUE");
    let first = receipt_answer(&ws, 1).expect("the call's result").to_string();
    assert!(first.contains("cancel"), "{first}");
    let sent = read_json_lines(&ws.side.join("stdin.log"));
    let calls: Vec<&Value> = sent.iter().filter(|m| m["method"] == "tools/call").collect();
    let replies: Vec<&Value> = sent.iter().filter(|m| m["result"].get("action").is_some()).collect();
    assert_eq!(calls.len(), 1, "{sent:?}");
    assert_eq!(replies.len(), 1, "one reply to the one question: {sent:?}");
    assert_eq!(replies[0]["result"], json!({"action": "cancel"}), "{sent:?}");
    assert_eq!(ws.events_of("input_held").len(), 1);
    assert!(ws.events_of("input_answered").is_empty());
    assert_eq!(ws.attempt_count(), 1);
    // The person answers after the run: recorded for the next run, as always.
    let said = ws.engine_json(&["answer", "T1", "--field", "name=Ada"]);
    said.expect_code(0);
    assert!(said.json()["answer"].get("held_until").is_none(), "{}", said.describe());
    ws.verify();
}

// ------------------------------------------------------------ 2026-07-28 over Streamable HTTP, URL mode, decline

/// `fixtures/mcp/http_server.py --ask` on a loopback port; killed on drop.
struct HttpAsk {
    child: std::process::Child,
    url: String,
}

impl HttpAsk {
    fn start(ws: &Ws) -> HttpAsk {
        let port_file = ws.side.join("port");
        let child = std::process::Command::new("python3")
            .arg(repo_root().join("fixtures/mcp/http_server.py"))
            .arg("--log")
            .arg(ws.mcp_log())
            .arg("--port-file")
            .arg(&port_file)
            .arg("--ask")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 starts http_server.py");
        let port = wait_until(std::time::Duration::from_secs(20), "http_server.py listening", || {
            std::fs::read_to_string(&port_file).ok()
        });
        HttpAsk { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpAsk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_url_question_over_streamable_http_is_shown_escaped_and_accepted_by_a_person() {
    let ws = Ws::new();
    let server = HttpAsk::start(&ws);
    let task = json!({"ref": "T1", "title": "consent", "provider": "fx", "effect": "none",
                      "action": {"tool": "ask", "arguments": {"mode": "url"}}});
    ws.write_plan("plan.json", &plan(json!({"fx": {"kind": "mcp", "url": server.url}}), vec![task]));
    let out = ws.run();
    out.expect(4, Some("INPUT_REQUIRED"));
    assert_eq!(out.json()["awaiting_input"][0]["answer_with"], "engine answer T1 --accept");
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("go to: https://consent.example.test/grant?op=1"), "{}", status.stdout);
    assert!(status.stdout.contains("grant access\\x1b[31m") && !status.stdout.contains('\u{1b}'), "{}", status.stdout);
    // The HTML report's "Waiting on a person" names the question, escaped.
    let page = ws.path("report.html");
    ws.engine(&["report", "--html", page.to_str().unwrap()]).expect_code(0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("grant access\\x1b[31m") && !html.contains('\u{1b}'), "the question, escaped, in the report");
    assert!(html.contains("engine answer T1 --accept"), "the command, in the report");
    let explained = ws.json(&["explain", "T1"], 0);
    assert_eq!(explained["awaiting_input"]["questions"][0]["question"]["mode"], "url", "{explained}");
    // Without --accept nothing is recorded: the URL question is named.
    let out = ws.engine_json(&["answer", "T1"]);
    out.expect(2, Some("ANSWER_INVALID"));
    assert_eq!(out.json()["error"]["place"], "--field q", "{}", out.describe());
    assert!(ws.mcp_deliveries().is_empty());
    ws.engine_json(&["answer", "T1", "--accept"]).expect_code(0);
    ws.run().expect(0, None);
    assert_eq!(ws.mcp_deliveries().len(), 1, "the effect once, after the person's answer");
}

#[test]
fn a_declined_question_is_the_servers_to_judge_and_nothing_is_done() {
    let ws = Ws::new();
    ask_plan(&ws, &["--era", "modern", "--ask"], vec![]);
    ws.run().expect(4, Some("INPUT_REQUIRED"));
    let out = ws.engine_json(&["answer", "T1", "--decline", "--field", "name=x"]);
    out.expect(2, Some("ANSWER_INVALID"));
    ws.engine_json(&["answer", "T1", "--decline"]).expect_code(0);
    // The server answers a decline with a tool error: a failure on its terms.
    ws.run().expect(1, None);
    assert!(ws.mcp_deliveries().is_empty(), "declined: no effect");
    // A task that waits on nothing cannot be answered.
    ws.engine_json(&["answer", "T1", "--field", "name=Ada"]).expect(2, Some("NOTHING_TO_ANSWER"));
}

/// An external task's call that carries the answer is a repeat of
/// external work: the gate asks a person's approval for it, as for any
/// repeat; approved, it goes, with the answer, once.
#[test]
fn an_external_tasks_answered_call_needs_an_approval_as_any_repeat() {
    let ws = Ws::new();
    let command = mcp_server_command(&ws.mcp_log(), &["--era", "modern", "--ask"]);
    let task = json!({"ref": "T1", "title": "ask a person", "provider": "fx", "effect": "external",
                      "action": {"tool": "ask", "arguments": {}}});
    ws.write_plan("plan.json", &plan(json!({"fx": {"kind": "mcp", "command": command}}), vec![task]));
    // Every word says what the next run does: it stops for the approval first.
    let asked = ws.engine(&["run", "plan.json", "--jobs", "1"]);
    asked.expect_code(4);
    let said = format!("{}{}", asked.stdout, asked.stderr);
    assert!(said.contains("first stops APPROVAL_REQUIRED"), "{}", asked.describe());
    let said = ws.engine(&["answer", "T1", "--field", "name=Ada", "--request-id", "r1"]);
    said.expect_code(0);
    assert!(
        said.stdout.contains("stops APPROVAL_REQUIRED until a person approves it")
            && !said.stdout.contains("next `engine run` sends them"),
        "{}",
        said.describe()
    );
    let answered = ws.engine_json(&["answer", "T1", "--field", "name=Ada", "--request-id", "r1"]);
    answered.expect_code(0);
    assert_eq!(answered.json()["answer"]["approval_first"], true, "{}", answered.describe());
    let op = answered.json()["answer"]["operation_id"].as_str().unwrap().to_string();
    let out = ws.run();
    out.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(out.json()["awaiting_approval"][0]["operation_id"], op.as_str(), "{}", out.describe());
    assert!(ws.mcp_deliveries().is_empty(), "nothing sent before the approval");
    ws.engine_json(&["approve", &op, "--note", "the answer may go"]).expect_code(0);
    ws.run().expect(0, None);
    let delivered = ws.mcp_deliveries();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["arguments"]["answer"], json!({"name": "Ada"}));
}

/// Issue 42: an answer given `--for` a time is never sent past it — the
/// task asks again (awaiting_input, the same question), status and
/// explain say `expired`, and only a new answer goes to the server.
#[test]
fn an_answer_past_its_time_is_expired_and_never_sent() {
    let ws = Ws::new();
    ask_plan(&ws, &["--era", "modern", "--ask"], vec![]);
    ws.run().expect(4, Some("INPUT_REQUIRED"));
    let said = ws.engine_json(&["answer", "T1", "--field", "name=Ada", "--for", "1s"]);
    said.expect_code(0);
    assert!(said.json()["answer"]["expires_at_ms"].is_i64(), "{}", said.describe());
    std::thread::sleep(Duration::from_millis(1_500));
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("expired at") && status.stdout.contains("never sent"), "{}", status.stdout);

    // Past its time: no call carries it; the task waits on its question again.
    let out = ws.run();
    out.expect(4, Some("INPUT_REQUIRED"));
    assert_eq!(out.json()["awaiting_input"][0]["task_ref"], "T1", "{}", out.describe());
    assert!(ws.mcp_deliveries().is_empty(), "an expired answer is never sent");
    assert_eq!(ws.attempt_count(), 1, "only the call that asked");
    assert_eq!(task_state(&ws, "T1"), "awaiting_input");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("expired at"), "{}", explain.stdout);

    // A new answer, with time left: status says how long; the run sends it.
    ws.engine_json(&["answer", "T1", "--field", "name=Grace", "--for", "10m"]).expect_code(0);
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("expires in 10 min"), "{}", status.stdout);
    ws.run().expect(0, None);
    let delivered = ws.mcp_deliveries();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["arguments"]["answer"]["name"], "Grace", "{delivered:?}");
    ws.verify();
    // verify finds an answer sent after its end (the call's time moved
    // two hours on by hand, past the ten minutes it was given for).
    ws.tamper("UPDATE attempts SET intent_at_ms = intent_at_ms + 7200000 WHERE id = (SELECT MAX(id) FROM attempts)");
    let v = ws.engine(&["verify"]);
    assert_ne!(v.code(), 0, "{}", v.describe());
    assert!(v.describe().contains("answers_in_time") && v.describe().contains("after it expired"), "{}", v.describe());
}
