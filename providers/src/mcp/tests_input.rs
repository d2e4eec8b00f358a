//! Input a server asks for, against the fixture's `ask` tools (`--ask`):
//! never answered on anyone's behalf (the question comes back with the
//! receipt), and a person's answers carried by the call that resumes —
//! 2026-07-28 `inputResponses` with the `requestState` (stdio, Streamable
//! HTTP), a task's `tasks/update`, a 2025-11-25 server's question asked
//! again during the call — judged from what the server really received.
//! And progress: a `progressToken` sent, the server's notes reported.

use serde_json::{json, Value};

use super::tests::{env, go, receipt, Env};
use super::tests_modern::{received, HttpFixture};
use super::*;
use crate::{InputAnswers, InputAsk, InputResponse, Progress};

fn asked(r: &crate::McpReceipt) -> InputAsk {
    *r.input.clone().unwrap_or_else(|| panic!("the receipt asks nothing: {r:?}"))
}

/// The answer a person gives to every question of `ask`.
fn answered(ask: &InputAsk, result: Value) -> InputAnswers {
    InputAnswers {
        task_id: ask.task_id.clone(),
        request_state: ask.request_state.clone(),
        responses: ask
            .questions
            .iter()
            .map(|q| InputResponse { key: q.key.clone(), question: q.question.clone(), result: result.clone() })
            .collect(),
    }
}

fn with_answers(e: &Env, tool: &str, arguments: Value, answers: &InputAnswers) -> Call {
    let mut c = e.call(tool, arguments);
    c.try_no = 3;
    c.request["answers"] = json!(answers);
    c
}

fn accept() -> Value {
    json!({"action": "accept", "content": {"name": "Ada", "count": 2}})
}

/// The `tools/call`s the server received.
fn calls(e: &Env) -> Vec<Value> {
    received(&e.received()).into_iter().filter(|m| m["method"] == "tools/call").collect()
}

#[tokio::test]
async fn an_input_required_result_is_a_question_and_the_retry_carries_the_answer() {
    let e = env();
    let p = e.modern(&["--ask"]);
    let r = receipt(go(&p, &e.call("ask", json!({}))).await.0);
    assert_eq!(r.tool_error, None, "a question is not a tool error: {r:?}");
    let ask = asked(&r);
    assert_eq!(ask.questions.len(), 1);
    assert_eq!(ask.questions[0].key, "q");
    assert_eq!(ask.questions[0].question["mode"], "form");
    assert_eq!(ask.questions[0].question["requestedSchema"]["required"], json!(["name"]));
    assert!(ask.request_state.is_some());
    assert!(e.deliveries().is_empty(), "nothing was done");
    let (o, progress) = go(&p, &with_answers(&e, "ask", json!({}), &answered(&ask, accept()))).await;
    let r = receipt(o);
    assert_eq!((r.tool_error.as_deref(), r.input.as_ref()), (None, None), "{r:?}");
    let Some(Progress::Dispatched { detail }) = progress.first() else { panic!("{progress:?}") };
    assert!(detail.contains("with a person's answers to 1 question (q)"), "{detail}");
    let sent = calls(&e).pop().unwrap();
    assert_eq!(sent["params"]["inputResponses"]["q"], accept());
    assert_eq!(sent["params"]["requestState"].as_str(), ask.request_state.as_deref(), "echoed verbatim");
    let d = e.deliveries();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0]["try"].as_i64(), &d[0]["arguments"]["answer"]), (Some(3), &accept()["content"]));
}

#[tokio::test]
async fn over_streamable_http_too() {
    let e = env();
    let server = HttpFixture::start(&e, &["--ask"]);
    let p = McpProvider::new(McpConfig::http(&server.url));
    let ask = asked(&receipt(go(&p, &e.call("ask", json!({"mode": "url"}))).await.0));
    assert_eq!(ask.questions[0].question["mode"], "url");
    assert!(ask.questions[0].question["url"].as_str().unwrap().starts_with("https://consent.example.test/"));
    let declined = answered(&ask, json!({"action": "decline"}));
    let r = receipt(go(&p, &with_answers(&e, "ask", json!({"mode": "url"}), &declined)).await.0);
    assert!(r.tool_error.as_deref().unwrap_or("").contains("'decline'"), "{r:?}");
    assert!(e.deliveries().is_empty(), "a declined question does nothing");
    assert_eq!(calls(&e).pop().unwrap()["params"]["inputResponses"]["q"], json!({"action": "decline"}));
}

#[tokio::test]
async fn a_legacy_servers_question_is_dismissed_then_answered_when_asked_again() {
    let e = env();
    let p = McpProvider::stdio(e.command(&["--ask", "--received", e.received().to_str().unwrap()]), None);
    let r = receipt(go(&p, &e.call("ask", json!({"mode": "url"}))).await.0);
    let ask = asked(&r);
    assert_eq!((ask.questions[0].key.as_str(), ask.task_id.as_ref()), ("q1", None));
    let first_id = ask.questions[0].elicitation_id.clone();
    assert!(first_id.is_some());
    // The server got a dismissal (nobody chose), and did nothing.
    let replies: Vec<Value> = received(&e.received()).into_iter().filter(|m| m.get("method").is_none()).collect();
    assert_eq!(replies.last().unwrap()["result"], json!({"action": "cancel"}));
    assert!(e.deliveries().is_empty());
    let done = answered(&ask, json!({"action": "accept"}));
    let (o, progress) = go(&p, &with_answers(&e, "ask", json!({"mode": "url"}), &done)).await;
    let r = receipt(o);
    assert_eq!((r.tool_error.as_deref(), r.input.as_ref()), (None, None), "{r:?}");
    let Some(Progress::Dispatched { detail }) = progress.first() else { panic!("{progress:?}") };
    assert!(detail.contains("carrying a person's answers to 1 question (q1)"), "{detail}");
    // Asked again with another elicitation id: the same question, answered.
    let replies: Vec<Value> = received(&e.received()).into_iter().filter(|m| m.get("method").is_none()).collect();
    assert_eq!(replies.last().unwrap()["result"], json!({"action": "accept"}));
    assert_eq!(e.deliveries().len(), 1);
    // A question the answers do not cover is dismissed again, and reported.
    let other = InputAnswers {
        responses: vec![InputResponse { question: json!({"other": 1}), ..done.responses[0].clone() }],
        ..done
    };
    let r = receipt(go(&p, &with_answers(&e, "ask", json!({}), &other)).await.0);
    assert_eq!(asked(&r).questions[0].question["mode"], "form");
    assert_eq!(e.deliveries().len(), 1);
}

#[tokio::test]
async fn a_task_waiting_for_input_gets_its_answers_by_tasks_update() {
    let e = env();
    let p = e.modern(&["--ask", "--tasks"]);
    let (o, progress) = go(&p, &e.call("ask_later", json!({"ms": 100}))).await;
    let ask = asked(&receipt(o));
    let task_id = ask.task_id.clone().expect("the task waits");
    assert!(matches!(&progress[..], [Progress::Dispatched { .. }, Progress::Handle { .. }]), "{progress:?}");
    let (o, progress) = go(&p, &with_answers(&e, "ask_later", json!({"ms": 100}), &answered(&ask, accept()))).await;
    let r = receipt(o);
    assert_eq!((r.tool_error.as_deref(), r.input.as_ref()), (None, None), "{r:?}");
    let Some(Progress::Dispatched { detail }) = progress.first() else { panic!("{progress:?}") };
    assert!(detail.contains(&format!("tasks/update of task {task_id}")), "{detail}");
    assert!(
        matches!(progress.get(1), Some(Progress::Handle { handle: Handle::McpTask { task_id: t, .. }, .. }) if *t == task_id)
    );
    let methods: Vec<String> =
        received(&e.received()).iter().filter_map(|m| m["method"].as_str().map(str::to_string)).collect();
    assert_eq!(methods.iter().filter(|m| *m == "tools/call").count(), 1, "no second tools/call: {methods:?}");
    assert!(methods.contains(&"tasks/update".to_string()));
    assert_eq!(e.deliveries().len(), 1);
}

#[tokio::test]
async fn a_request_no_person_can_answer_stays_a_tool_error() {
    let e = env();
    let p = e.modern(&["--ask"]);
    // An answer carried for a tool that asks nothing changes nothing it does.
    let r = receipt(go(&p, &e.call("render", json!({}))).await.0);
    assert_eq!((r.tool_error.as_ref(), r.input.as_ref()), (None, None));
    // Answers that are not the engine's shape are refused before anything is sent.
    let mut bad = e.call("render", json!({}));
    bad.request["answers"] = json!("yes");
    assert!(
        matches!(go(&p, &bad).await.0, Outcome::NotDispatched(ref nd) if nd.kind == crate::NotDispatchedKind::BadRequest)
    );
    assert_eq!(e.deliveries().len(), 1);
}

#[tokio::test]
async fn progress_notes_come_to_the_call_that_sent_the_token() {
    for http in [false, true] {
        let e = env();
        let server = http.then(|| HttpFixture::start(&e, &[]));
        let p = match &server {
            Some(s) => McpProvider::new(McpConfig::http(&s.url)),
            None => e.modern(&[]),
        };
        let (o, progress) = go(&p, &e.call("steps", json!({"steps": 3, "ms": 150}))).await;
        let r = receipt(o);
        let result: Value = serde_json::from_str(&r.result.text).unwrap();
        assert_eq!(result["structuredContent"]["token"], "op-7#2", "http {http}");
        let notes: Vec<&crate::Note> =
            progress.iter().filter_map(|m| if let Progress::Note(n) = m { Some(n) } else { None }).collect();
        // Over stdio they come 150 ms apart; the HTTP fixture sends its
        // stream at once, and notes closer than 100 ms are dropped (the
        // last one kept).
        assert_eq!(notes.len(), if http { 2 } else { 3 }, "http {http}: {progress:?}");
        let last = notes.last().unwrap();
        assert_eq!((last.progress, last.total), (3.0, Some(3.0)));
        assert_eq!(notes[0].message.as_deref(), Some("step 1 of 3\u{1b}[2J"), "as said: escaped where shown");
    }
}
