//! One tool call through the session, as the engine sees it: an `Outcome`
//! (with a task handle reported on the way when the call is a task), a
//! read-back, a resume by handle, a cancel.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::inbound::{CallSide, Holding};
use super::input;
use super::jsonrpc::{self, Answer, RpcEnd};
use super::link::Link;
use super::output;
use super::revision::{self, ResultKind};
use super::session::{end_text, Live, TaskSupport, START_TIMEOUT};
use super::tasks::{self, TaskState, Waited};
use super::McpProvider;
use crate::observe::{McpObserve, Placeholders};
use crate::{
    Call, Cancelled, Captured, Handle, InputAnswers, InputAsk, LostReason, McpReceipt, NotDispatched,
    NotDispatchedKind, Outcome, Progress, ProgressSender, ReadBack, Receipt, Resumed,
};

/// Deadline for the read tool's answer in a read-back (after the server is up).
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on telling a server we gave up on a request.
const GIVE_UP_TIMEOUT: Duration = Duration::from_secs(2);

/// `{"tool": "name", "arguments": {...}}` → (tool, arguments).
pub(crate) fn parse_request(request: &Value) -> Result<(String, Value), String> {
    let tool = request.get("tool").and_then(Value::as_str).filter(|t| !t.is_empty());
    let Some(tool) = tool else {
        return Err(format!("mcp request needs {{\"tool\": name, \"arguments\": {{...}}}}, got {request}"));
    };
    let arguments = match request.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(other) => return Err(format!("mcp `arguments` must be an object, got {other}")),
    };
    Ok((tool.to_string(), arguments))
}

fn not_dispatched(kind: NotDispatchedKind, message: String) -> Outcome {
    Outcome::NotDispatched(NotDispatched { kind, message })
}

/// What came of a call before its stderr is attached: an answer (with a
/// tool error it does not carry itself, or the input its server asks
/// for), or an outcome without one.
enum Ended {
    Answer { answer: Answer, forced_error: Option<String>, input: Option<InputAsk> },
    Outcome(Outcome),
}

impl Ended {
    fn answer(answer: Answer, judged: Judged) -> Ended {
        Ended::Answer { answer, forced_error: judged.forced_error, input: judged.input }
    }
}

/// An answer read for what it is beyond its JSON-RPC shape.
#[derive(Default)]
struct Judged {
    forced_error: Option<String>,
    input: Option<InputAsk>,
}

/// The `progressToken` of a call: its operation and try (unique among the
/// calls in flight, and nothing the server does not see in `_meta` anyway).
fn progress_token(call: &Call) -> String {
    format!("{}#{}", call.operation_id, call.try_no)
}

impl McpProvider {
    /// How this call holds its server's questions open for a person, if
    /// its plan does (`ask.wait_seconds`) and the run has a person's side.
    fn holding(&self, call: &Call, deadline: Option<Instant>) -> Option<Holding> {
        let person = self.person.clone().filter(|_| self.holds_questions())?;
        let (operation_id, try_no, wait) = (call.operation_id.clone(), call.try_no, self.config.ask_wait);
        Some(Holding { person, operation_id, try_no, wait, deadline })
    }

    /// `tools/list` on the live server (started if needed), on our turn.
    pub(super) async fn list_tools_inner(&self, call: &Call) -> Result<crate::Inventory, String> {
        let deadline = call.timeout.map(|d| Instant::now() + d);
        let Some(_turn) = self.session.permit(deadline).await else {
            return Err("deadline passed while waiting for an earlier call to the same MCP server".into());
        };
        let live = self.session.live(call, deadline).await.map_err(|nd| redacted(nd, &call.secrets).message)?;
        let inventory = live.inventory(deadline).await;
        live.link.pump_stderr();
        inventory.map_err(|m| jsonrpc::redact_str(format!("{m}{}", self.session.hub.tail()), &call.secrets))
    }

    pub(super) async fn dispatch_inner(&self, call: &Call, progress: &ProgressSender) -> Outcome {
        let started = Instant::now();
        let (tool, arguments) = match parse_request(&call.request) {
            Ok(r) => r,
            Err(m) => return not_dispatched(NotDispatchedKind::BadRequest, m),
        };
        let answers = match input::answers_of(&call.request) {
            Ok(a) => a,
            Err(m) => return not_dispatched(NotDispatchedKind::BadRequest, m),
        };
        let deadline = call.timeout.map(|d| started + d);
        let Some(_turn) = self.session.permit(deadline).await else {
            let m = "deadline passed while waiting for an earlier call to the same MCP server; tools/call not sent";
            return not_dispatched(NotDispatchedKind::DeadlineBeforeDispatch, m.into());
        };
        // Attached once it is our turn, so an earlier call's stderr stays its own.
        let sink = self.session.hub.attach(call.output_bytes_max);
        let live = match self.session.live(call, deadline).await {
            Ok(l) => l,
            Err(nd) => return Outcome::NotDispatched(redacted(nd, &call.secrets)),
        };
        // Its progress and its server's questions come to it while it is out.
        let carried = answers.as_ref().map(|a| a.responses.clone()).unwrap_or_default();
        let side = CallSide::new(progress_token(call), progress.clone(), carried).holding(self.holding(call, deadline));
        let entered = self.session.inbound.enter(side);
        let ended = self.call_tool(&live, call, (&tool, arguments), answers.as_ref(), deadline, progress).await;
        let dismissed = entered.side.asked();
        drop(entered);
        live.link.pump_stderr();
        let mut stderr = sink.finish();
        stderr.redact(&call.secrets);
        match ended {
            Ended::Answer { answer, forced_error, input } => {
                // A question dismissed during the call (2025-11-25) makes
                // the call one that waits for a person, whatever it answered.
                let input = input.or_else(|| {
                    (!dismissed.is_empty()).then(|| InputAsk {
                        task_id: None,
                        request_state: None,
                        questions: dismissed,
                    })
                });
                let schema = live.tool(&tool).and_then(|t| t.output_schema.clone());
                Outcome::Received(judge_output(
                    receipt(answer, Judged { forced_error, input }, stderr, started, call),
                    schema.as_ref(),
                    call,
                ))
            }
            Ended::Outcome(Outcome::Lost { reason, detail }) => {
                let detail = jsonrpc::redact_str(format!("{detail}{}", self.session.hub.tail()), &call.secrets);
                Outcome::Lost { reason, detail }
            }
            Ended::Outcome(Outcome::NotDispatched(nd)) => Outcome::NotDispatched(redacted(nd, &call.secrets)),
            Ended::Outcome(o) => o,
        }
    }

    async fn call_tool(
        &self,
        live: &Live,
        call: &Call,
        (tool, arguments): (&str, Value),
        answers: Option<&InputAnswers>,
        deadline: Option<Instant>,
        progress: &ProgressSender,
    ) -> Ended {
        if let Err(nd) = self.session.authorize(live, tool, deadline).await {
            return Ended::Outcome(Outcome::NotDispatched(nd));
        }
        let modern = live.link.modern();
        if let (true, Some(a @ InputAnswers { task_id: Some(task_id), .. })) = (modern, answers) {
            return self.update_task(live, call, task_id, a, deadline, progress).await;
        }
        let support = match live.task_support(tool, deadline).await {
            Ok(s) => s,
            Err(m) => {
                return Ended::Outcome(not_dispatched(NotDispatchedKind::Other, format!("{m}; tools/call not sent")))
            }
        };
        // 2025-11-25 asks for a task per call; under 2026-07-28 the server
        // decides, and says so in its answer (`resultType: "task"`).
        let augment = !modern && matches!(support, TaskSupport::Required | TaskSupport::Optional);
        let mut params = json!({"name": tool, "arguments": arguments,
                                "_meta": {"operation_id": call.operation_id, "try": call.try_no,
                                          "progressToken": progress_token(call)}});
        if augment {
            params["task"] = json!({"ttl": tasks::TASK_TTL_MS});
        }
        if let Some(tp) = &call.traceparent {
            params["_meta"]["traceparent"] = json!(tp);
        }
        let answered = with_answers(&mut params, answers, modern);
        let hints = hints(live, tool);
        let detail = format!(
            "tools/call `{tool}`{} written to {} (MCP {}; _meta operation_id {}, try {}{answered}{hints})",
            if augment { " (as a task)" } else { "" },
            live.link.describe(),
            live.protocol,
            call.operation_id,
            call.try_no
        );
        let on_sent = || {
            let _ = progress.try_send(Progress::Dispatched { detail });
        };
        let end = live.link.request("tools/call", &params, deadline, on_sent).await;
        let task = match &end {
            RpcEnd::Answer(a) if augment => a.result().and_then(|r| r.get("task")).and_then(TaskState::parse),
            RpcEnd::Answer(a) if modern => {
                a.result().filter(|r| revision::result_kind(r) == ResultKind::Task).and_then(TaskState::parse)
            }
            _ => None,
        };
        match task {
            Some(task) => self.follow(live, task, deadline, progress).await,
            None => self.ended(live, end, tool).await,
        }
    }

    /// The server accepted a task: report its id at once, wait for it,
    /// fetch its answer.
    async fn follow(
        &self,
        live: &Live,
        task: TaskState,
        deadline: Option<Instant>,
        progress: &ProgressSender,
    ) -> Ended {
        let handle = Handle::McpTask { task_id: task.id.clone(), session: live.link.session_id() };
        let detail = format!("{} accepted by {}", task.describe(), live.link.describe());
        let _ = progress.try_send(Progress::Handle { handle, detail });
        let lost = |detail: String| Ended::Outcome(Outcome::Lost { reason: LostReason::ResponseLost, detail });
        let state = match tasks::wait(&live.link, task, deadline, false).await {
            Waited::Answerable(s) => s,
            Waited::Running(s) => return self.task_deadline(live, &s).await,
            Waited::Unknown(m) | Waited::Broken(m) => return lost(m),
        };
        if let Some(ended) = waits_for_input(live, &state) {
            return ended;
        }
        match tasks::answer(&live.link, &state, deadline).await {
            RpcEnd::Answer(answer) => {
                let mut judged = judge(&answer);
                judged.forced_error = state.forced_error(&answer).or(judged.forced_error);
                Ended::answer(answer, judged)
            }
            RpcEnd::Deadline { .. } => self.task_deadline(live, &state).await,
            other => lost(format!("{}, then its answer could not be read: {}", state.describe(), end_text(&other))),
        }
    }

    /// A 2026-07-28 task that waited for input gets a person's answers
    /// (`tasks/update`, the call's request on the wire), then is followed
    /// as before: its id is the call's handle again.
    async fn update_task(
        &self,
        live: &Live,
        call: &Call,
        task_id: &str,
        answers: &InputAnswers,
        deadline: Option<Instant>,
        progress: &ProgressSender,
    ) -> Ended {
        let params = json!({"taskId": task_id, "inputResponses": input::input_responses(answers),
                            "_meta": {"operation_id": call.operation_id, "try": call.try_no}});
        let detail = format!(
            "tasks/update of task {task_id} written to {} (MCP {}; a person's answers to {}; _meta operation_id {}, try {})",
            live.link.describe(),
            live.protocol,
            keys(answers),
            call.operation_id,
            call.try_no
        );
        let on_sent = || {
            let _ = progress.try_send(Progress::Dispatched { detail });
        };
        match live.link.request("tasks/update", &params, deadline, on_sent).await {
            RpcEnd::Answer(a) if a.result().is_some() => {
                let task = TaskState {
                    id: task_id.to_string(),
                    status: tasks::Status::Working,
                    poll_ms: None,
                    message: None,
                    detail: json!({}),
                };
                self.follow(live, task, deadline, progress).await
            }
            RpcEnd::Answer(answer) => {
                let why = answer.refusal().unwrap_or_default();
                Ended::Answer {
                    answer,
                    forced_error: Some(format!("tasks/update of task {task_id}: {why}")),
                    input: None,
                }
            }
            other => self.ended(live, other, "tasks/update").await,
        }
    }

    /// Our deadline passed while a task ran: cancel it (as a command's group
    /// is killed); its effect is unknown.
    async fn task_deadline(&self, live: &Live, state: &TaskState) -> Ended {
        let cancelled = match tasks::cancel(&live.link, &state.id).await {
            Ok(Some(s)) => format!("tasks/cancel answered {}", s.status.as_str()),
            Ok(None) => "tasks/cancel acknowledged".to_string(),
            Err(m) => m,
        };
        let detail = format!("deadline passed with {} ; {cancelled}", state.describe());
        Ended::Outcome(Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, detail })
    }

    async fn ended(&self, live: &Live, end: RpcEnd, tool: &str) -> Ended {
        match end {
            RpcEnd::Answer(answer) => {
                let judged = judge(&answer);
                Ended::answer(answer, judged)
            }
            RpcEnd::NotSent(nd) => Ended::Outcome(Outcome::NotDispatched(nd)),
            RpcEnd::Lost(m) => Ended::Outcome(Outcome::Lost { reason: LostReason::ResponseLost, detail: m }),
            RpcEnd::Deadline { sent: false, .. } => Ended::Outcome(not_dispatched(
                NotDispatchedKind::DeadlineBeforeDispatch,
                format!("deadline passed before tools/call `{tool}` was written"),
            )),
            RpcEnd::Deadline { sent: true, id } => {
                let what = self.give_up(live, id).await;
                let detail = format!("no answer to tools/call `{tool}` before the deadline; {what}");
                Ended::Outcome(Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, detail })
            }
        }
    }

    /// After a deadline on request `id`: a stdio server serving one call at
    /// a time is killed (restarted for the next call), as a command's group
    /// would be; otherwise the server is told we gave up.
    async fn give_up(&self, live: &Live, id: u64) -> String {
        if matches!(live.link, Link::Stdio(_)) && !self.session.concurrent() {
            live.link.kill();
            return format!("{} killed", live.link.describe());
        }
        if matches!(live.link, Link::Http(_)) && live.link.modern() {
            // Its response stream is closed already: under 2026-07-28 that
            // is the cancellation, and no notification is expected.
            return "the response stream was closed (the 2026-07-28 way to cancel)".into();
        }
        let params = json!({"requestId": id, "reason": "the engine's deadline passed"});
        match tokio::time::timeout(GIVE_UP_TIMEOUT, live.link.notify("notifications/cancelled", Some(&params))).await {
            Ok(Ok(())) => "notifications/cancelled sent".into(),
            Ok(Err(m)) => format!("notifications/cancelled not sent: {m}"),
            Err(_) => "notifications/cancelled not sent in time".into(),
        }
    }

    /// Call the rule's read tool and judge its result.
    pub(super) async fn read_back_with(&self, rule: &McpObserve, call: &Call) -> ReadBack {
        let ph = Placeholders::of(call);
        let arguments = ph.fill_json(&rule.arguments);
        let request = json!({"tool": rule.tool, "arguments": arguments});
        let failed =
            |why: String| ReadBack::failed(request.clone(), Value::Null, jsonrpc::redact_str(why, &call.secrets));
        let start_by = Some(Instant::now() + START_TIMEOUT);
        let Some(_turn) = self.session.permit(start_by).await else {
            return failed("waited too long for an earlier call to the same server".into());
        };
        let live = match self.session.live(call, start_by).await {
            Ok(l) => l,
            Err(nd) => return failed(nd.message),
        };
        let params = json!({"name": rule.tool, "arguments": arguments});
        let by = Some(Instant::now() + OBSERVE_TIMEOUT);
        let end = live.link.request("tools/call", &params, by, || {}).await;
        let answer = match end {
            RpcEnd::Answer(a) => a,
            RpcEnd::Deadline { sent, id } => {
                let what = if sent { self.give_up(&live, id).await } else { "not sent".into() };
                return failed(format!(
                    "no answer within {}s; {what}{}",
                    OBSERVE_TIMEOUT.as_secs(),
                    self.session.hub.tail()
                ));
            }
            other => return failed(format!("{}{}", end_text(&other), self.session.hub.tail())),
        };
        let Some(result) = answer.result() else {
            let why = answer.refusal().unwrap_or_default();
            let shown = match &answer {
                Answer::Message(m) => json!({"error": m.get("error")}),
                _ => Value::Null,
            };
            return ReadBack::failed(request, shown, jsonrpc::redact_str(why, &call.secrets));
        };
        let decision = rule.decide(result, &ph);
        ReadBack::decided(request, json!({"result": redacted_json(result, call)}), decision)
    }

    /// Ask about a task after a crash (or to go on waiting for it).
    pub(super) async fn resume_inner(&self, call: &Call, handle: &Handle) -> Resumed {
        let Handle::McpTask { task_id, session } = handle;
        let started = Instant::now();
        let deadline = call.timeout.map(|d| started + d);
        let start_by = deadline.or(Some(started + START_TIMEOUT));
        let inconclusive = |m: String| Resumed::Inconclusive { evidence: jsonrpc::redact_str(m, &call.secrets) };
        let Some(_turn) = self.session.permit(start_by).await else {
            return inconclusive("waited too long for an earlier call to the same server".into());
        };
        let sink = self.session.hub.attach(call.output_bytes_max);
        let live = match self.session.live(call, start_by).await {
            Ok(l) => l,
            Err(nd) => return inconclusive(format!("could not ask about task {task_id}: {}", nd.message)),
        };
        let side = session.as_deref().and_then(|s| self.session.other_session(&live, s));
        let link = side.as_ref().unwrap_or(&live.link);
        let first = match tasks::get(link, task_id, start_by).await {
            Ok(s) => s,
            Err(tasks::GetEnd::Deadline) => return inconclusive(format!("no answer to tasks/get {task_id}")),
            Err(tasks::GetEnd::Unknown(m) | tasks::GetEnd::Broken(m)) => return inconclusive(m),
        };
        let state = match tasks::wait(link, first, deadline, deadline.is_none()).await {
            Waited::Answerable(s) => s,
            Waited::Running(s) => return Resumed::Running { evidence: s.describe() },
            Waited::Unknown(m) | Waited::Broken(m) => return inconclusive(m),
        };
        // A task that waits for a person's input: its questions are the
        // answer to record (the task goes on once they are answered).
        if let Some(Ended::Answer { answer, forced_error, input }) = waits_for_input(&live, &state) {
            link.pump_stderr();
            let mut stderr = sink.finish();
            stderr.redact(&call.secrets);
            return Resumed::Receipt(receipt(answer, Judged { forced_error, input }, stderr, started, call));
        }
        let answer = match tasks::answer(link, &state, start_by).await {
            RpcEnd::Answer(a) => a,
            other => {
                return inconclusive(format!(
                    "{}, then its answer could not be read: {}",
                    state.describe(),
                    end_text(&other)
                ))
            }
        };
        link.pump_stderr();
        let mut stderr = sink.finish();
        stderr.redact(&call.secrets);
        let mut judged = judge(&answer);
        judged.forced_error = state.forced_error(&answer).or(judged.forced_error);
        // Judged as the call's own answer would have been: by the schema
        // its server lists now (a listing failure leaves it unjudged).
        let tool = parse_request(&call.request).map(|(t, _)| t).unwrap_or_default();
        let schema = match live.inventory(start_by).await {
            Ok(inv) => inv.tools.into_iter().find(|t| t.name == tool).and_then(|t| t.output_schema),
            Err(_) => None,
        };
        Resumed::Receipt(judge_output(receipt(answer, judged, stderr, started, call), schema.as_ref(), call))
    }

    pub(super) async fn cancel_inner(&self, call: &Call, handle: &Handle) -> Cancelled {
        let Handle::McpTask { task_id, session } = handle;
        let by = Some(Instant::now() + START_TIMEOUT);
        let no = |evidence: String| Cancelled { confirmed: false, evidence };
        let live = match self.session.live(call, by).await {
            Ok(l) => l,
            Err(nd) => return no(format!("could not ask to cancel task {task_id}: {}", nd.message)),
        };
        let side = session.as_deref().and_then(|s| self.session.other_session(&live, s));
        let link = side.as_ref().unwrap_or(&live.link);
        match tasks::cancel(link, task_id).await {
            Ok(Some(s)) => Cancelled { confirmed: s.status == tasks::Status::Cancelled, evidence: s.describe() },
            Ok(None) => no(format!("tasks/cancel {task_id} acknowledged (the server may still finish it)")),
            Err(m) => no(m),
        }
    }
}

/// An answer that is not the tool's answer yet: the server asks for input
/// (`input_required`, or a 2025-11-25 `-32042` URL elicitation error),
/// which waits for a person — or, when no person can answer it
/// (sampling, roots, past a bound), a tool error naming it —; or a
/// `resultType` this client does not know (a tool error).
fn judge(answer: &Answer) -> Judged {
    let error = match answer {
        Answer::Message(m) => m.get("error"),
        _ => None,
    };
    if let Some(ask) = error.and_then(input::ask_of_error) {
        return Judged { forced_error: None, input: Some(ask) };
    }
    let Some(result) = answer.result() else { return Judged::default() };
    match revision::result_kind(result) {
        ResultKind::Complete | ResultKind::Task => Judged::default(),
        ResultKind::InputRequired => match input::ask_of(result, None) {
            Ok(ask) => Judged { forced_error: None, input: Some(ask) },
            Err(why) => Judged {
                forced_error: Some(format!(
                    "the MCP server asks for input before it answers (input_required: {}), and no person can \
                     answer it here: {why}",
                    revision::input_requests_words(result)
                )),
                input: None,
            },
        },
        ResultKind::Other(k) => Judged {
            forced_error: Some(format!("an answer of resultType `{k}`, which this client does not know")),
            input: None,
        },
    }
}

/// A 2026-07-28 task that waits for input: its questions, as the call's
/// answer (`None`: it does not wait, or is a 2025-11-25 task, whose
/// questions come as requests during `tasks/result`).
fn waits_for_input(live: &Live, state: &TaskState) -> Option<Ended> {
    if state.status != tasks::Status::InputRequired || !live.link.modern() {
        return None;
    }
    let answer = Answer::Message(json!({"result": state.detail}));
    Some(match input::ask_of(&state.detail, Some(&state.id)) {
        Ok(ask) => Ended::Answer { answer, forced_error: None, input: Some(ask) },
        Err(why) => Ended::Answer {
            answer,
            forced_error: Some(format!("{} asks for input no person can answer here: {why}", state.describe())),
            input: None,
        },
    })
}

/// The keys of the questions a call answers, in words.
fn keys(a: &InputAnswers) -> String {
    let keys: Vec<&str> = a.responses.iter().map(|r| r.key.as_str()).collect();
    format!("{} question{} ({})", keys.len(), if keys.len() == 1 { "" } else { "s" }, keys.join(", "))
}

fn excerpt(s: &str, chars_max: usize) -> String {
    let mut out: String = s.chars().take(chars_max).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

fn redacted(mut nd: NotDispatched, secrets: &[String]) -> NotDispatched {
    nd.message = jsonrpc::redact_str(nd.message, secrets);
    nd
}

/// A result for evidence: secrets redacted, kept as JSON when it still parses.
fn redacted_json(result: &Value, call: &Call) -> Value {
    let mut c = jsonrpc::captured_json(result, call.output_bytes_max);
    c.redact(&call.secrets);
    match (c.truncated, serde_json::from_str::<Value>(&c.text)) {
        (false, Ok(v)) => v,
        _ => json!({"text": c.text, "truncated": c.truncated, "total_bytes": c.total_bytes}),
    }
}

/// An answer as a receipt: `stdout` holds the JSON of the result (or
/// error); `tool_error` is set for `isError`, a JSON-RPC error, an answer
/// over the bound, an HTTP error status, or a task that failed or was
/// cancelled.
fn receipt(answer: Answer, judged: Judged, stderr: Captured, started: Instant, call: &Call) -> Receipt {
    let Judged { forced_error, input } = judged;
    let max = call.output_bytes_max;
    let step_up_scope = match &answer {
        Answer::HttpStatus { step_up, .. } => step_up.clone().map(Box::new),
        _ => None,
    };
    let (mut stdout, tool_error, http_status, retry_after_seconds) = match answer {
        Answer::Truncated { kept, total } => (
            Captured::from_bytes(kept, total, true),
            Some(format!("the answer was {total} bytes, over the {max}-byte bound: truncated, not read")),
            None,
            None,
        ),
        Answer::HttpStatus { status, retry_after_seconds, body, .. } => {
            let text = format!("the MCP server answered HTTP {status}: {}", body.text.trim());
            (body, Some(text), Some(status), retry_after_seconds)
        }
        Answer::Message(m) => match (m.get("result"), m.get("error")) {
            (_, Some(e)) => (jsonrpc::captured_json(e, max), Some(jsonrpc::rpc_error_text(e)), None, None),
            (Some(r), None) => {
                let is_error = r.get("isError").and_then(Value::as_bool) == Some(true);
                let te = is_error.then(|| {
                    let text = crate::observe::content_text(r);
                    if text.is_empty() {
                        "the tool reported an error (isError) without text".to_string()
                    } else {
                        text
                    }
                });
                (jsonrpc::captured_json(r, max), te, None, None)
            }
            (None, None) => (
                jsonrpc::captured_json(&m, max),
                Some("malformed JSON-RPC answer: neither result nor error".to_string()),
                None,
                None,
            ),
        },
    };
    stdout.redact(&call.secrets);
    let tool_error = forced_error.or(tool_error);
    Receipt::Mcp(McpReceipt {
        result: stdout,
        tool_error: tool_error.map(|t| jsonrpc::redact_str(t, &call.secrets)),
        stderr,
        http_status,
        retry_after_seconds,
        duration_ms: started.elapsed().as_millis() as u64,
        output_invalid: None,
        input: input.map(Box::new),
        step_up_scope,
    })
}

/// Judge a receipt's result against the tool's declared `outputSchema`
/// (only a result that is the tool's successful answer, not a question).
fn judge_output(mut receipt: Receipt, schema: Option<&Value>, call: &Call) -> Receipt {
    if let Receipt::Mcp(r) = &mut receipt {
        if r.tool_error.is_none() && r.input.is_none() && !r.result.truncated {
            if let Ok(result) = serde_json::from_str::<Value>(&r.result.text) {
                r.output_invalid = output::mismatch(schema, &result).map(|m| jsonrpc::redact_str(m, &call.secrets));
            }
        }
    }
    receipt
}

/// The same request again, with a person's answers to what the server
/// asked (2026-07-28; a 2025-11-25 server gets them when it asks again,
/// from `inbound`): what the dispatch line says of them.
fn with_answers(params: &mut Value, answers: Option<&InputAnswers>, modern: bool) -> String {
    match answers {
        Some(a) if modern => {
            params["inputResponses"] = input::input_responses(a);
            if let Some(state) = &a.request_state {
                params["requestState"] = json!(state);
            }
            format!("; with a person's answers to {}", keys(a))
        }
        Some(a) => format!("; carrying a person's answers to {}", keys(a)),
        None => String::new(),
    }
}

/// The server's annotations of `tool`, shown as what they are: its hints,
/// never a permission nor the task's declared effect.
fn hints(live: &Live, tool: &str) -> String {
    match live.tool(tool).and_then(|t| t.annotations.as_ref()) {
        Some(a) => format!("; the server's annotations, hints only: {}", excerpt(&a.to_string(), 200)),
        None => String::new(),
    }
}
