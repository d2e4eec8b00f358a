//! MCP tasks. 2025-11-25: a task-augmented `tools/call` is answered at
//! once with a task; we poll `tasks/get` until it ends, then fetch its
//! answer with `tasks/result`. 2026-07-28 (the `io.modelcontextprotocol/tasks`
//! extension): the server answers a task on its own (`resultType: "task"`),
//! `tasks/get` carries the result (or error) once the task ended, there is
//! no `tasks/result`. `tasks/cancel` asks to stop one (2026-07-28: only
//! acknowledged).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::jsonrpc::{self, Answer, RpcEnd};
use super::link::Link;
use super::session::end_text;

/// Bounds on the wait between two polls.
const POLL_MIN: Duration = Duration::from_millis(100);
const POLL_MAX: Duration = Duration::from_secs(5);
/// First wait between polls when the server suggests none; it doubles.
const POLL_FIRST: Duration = Duration::from_millis(250);
/// Bound on one `tasks/cancel`.
pub(crate) const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long we ask the server to keep a task (and its result) for us:
/// long enough to ask about it after a crash. The server may keep it less.
pub(crate) const TASK_TTL_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// A status this client does not know; polled like `working`.
    Other(String),
}

impl Status {
    fn parse(s: &str) -> Status {
        match s {
            "working" => Status::Working,
            "input_required" => Status::InputRequired,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            other => Status::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Other(s) => s,
        }
    }

    /// Time to ask for the answer: the task ended, or it waits for input
    /// (which `tasks/result` carries).
    fn answerable(&self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled | Status::InputRequired)
    }
}

/// A task as the server described it last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskState {
    pub id: String,
    pub status: Status,
    pub poll_ms: Option<u64>,
    pub message: Option<String>,
    /// The task object as the server gave it (2026-07-28: with its
    /// `result`, `error` or `inputRequests`).
    pub detail: Value,
}

impl TaskState {
    /// From a `Task` object (`CreateTaskResult.task`, or a `tasks/get` result).
    pub fn parse(v: &Value) -> Option<TaskState> {
        let id = v.get("taskId")?.as_str().filter(|s| !s.is_empty())?;
        Some(TaskState {
            id: id.to_string(),
            status: Status::parse(v.get("status")?.as_str()?),
            poll_ms: v.get("pollInterval").or_else(|| v.get("pollIntervalMs")).and_then(Value::as_u64),
            message: v.get("statusMessage").and_then(Value::as_str).map(str::to_string),
            detail: v.clone(),
        })
    }

    /// A 2026-07-28 task's answer, from what `tasks/get` carried: a
    /// completed task's `result`, a failed one's `error`; a cancelled one
    /// answers nothing (its receipt gets the forced error). `None` while
    /// it has none.
    pub fn inline_answer(&self) -> Option<Answer> {
        match self.status {
            Status::Completed => Some(Answer::Message(json!({"result": self.detail.get("result")?}))),
            Status::Failed => Some(Answer::Message(json!({"error": self.detail.get("error")?}))),
            Status::Cancelled => Some(Answer::Message(json!({"result": {"content": [], "isError": true}}))),
            // The task waits for input: its questions, as a multi round-trip
            // answer would carry them.
            Status::InputRequired => Some(Answer::Message(json!({"result": {
                "resultType": "input_required",
                "inputRequests": self.detail.get("inputRequests").cloned().unwrap_or(Value::Null)}}))),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match &self.message {
            Some(m) => format!("task {} {} ({m})", self.id, self.status.as_str()),
            None => format!("task {} {}", self.id, self.status.as_str()),
        }
    }

    /// A receipt's tool error the result itself may not carry: a cancelled
    /// task, or a failed one whose result does not say so.
    pub fn forced_error(&self, answer: &Answer) -> Option<String> {
        let says_error = answer.refusal().is_some()
            || answer.result().and_then(|r| r.get("isError")).and_then(Value::as_bool) == Some(true);
        match self.status {
            Status::Cancelled => Some(format!("the {} was cancelled", self.describe())),
            Status::Failed if !says_error => Some(format!("the {} failed", self.describe())),
            _ => None,
        }
    }
}

/// The wait before the next poll: the server's `pollInterval` when given,
/// else 250 ms doubling; always within [100 ms, 5 s].
pub(crate) fn poll_delay(hint_ms: Option<u64>, polls: u32) -> Duration {
    let d = match hint_ms {
        Some(ms) => Duration::from_millis(ms),
        None => POLL_FIRST.saturating_mul(1u32.checked_shl(polls.min(16)).unwrap_or(u32::MAX)),
    };
    d.clamp(POLL_MIN, POLL_MAX)
}

/// How waiting for a task ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// Time to fetch its answer.
    Answerable(TaskState),
    /// Still running when the deadline came (or after the one look asked).
    Running(TaskState),
    /// The server says it does not know the task (any more).
    Unknown(String),
    /// The server could not be asked.
    Broken(String),
}

/// Poll `tasks/get` until the task can answer, the deadline, or trouble.
/// `look_once`: return after the first state instead of waiting.
pub(crate) async fn wait(link: &Link, mut state: TaskState, deadline: Option<Instant>, look_once: bool) -> Waited {
    let mut polls = 0u32;
    loop {
        if state.status.answerable() {
            return Waited::Answerable(state);
        }
        if look_once {
            return Waited::Running(state);
        }
        let delay = poll_delay(state.poll_ms, polls);
        let wake = Instant::now() + delay;
        if deadline.is_some_and(|at| wake >= at) {
            if let Some(at) = deadline {
                tokio::time::sleep_until(at.into()).await;
            }
            return Waited::Running(state);
        }
        tokio::time::sleep_until(wake.into()).await;
        polls = polls.saturating_add(1);
        state = match get(link, &state.id, deadline).await {
            Ok(s) => s,
            Err(GetEnd::Deadline) => return Waited::Running(state),
            Err(GetEnd::Unknown(m)) => return Waited::Unknown(m),
            Err(GetEnd::Broken(m)) => return Waited::Broken(m),
        };
    }
}

pub(crate) enum GetEnd {
    Deadline,
    Unknown(String),
    Broken(String),
}

/// One `tasks/get`.
pub(crate) async fn get(link: &Link, task_id: &str, deadline: Option<Instant>) -> Result<TaskState, GetEnd> {
    let end = link.request("tasks/get", &json!({"taskId": task_id}), deadline, || {}).await;
    match end {
        RpcEnd::Answer(a) => match a.result().and_then(TaskState::parse) {
            Some(s) => Ok(s),
            None if jsonrpc::error_code(&a) == Some(-32602) => {
                Err(GetEnd::Unknown(format!("the server does not know task {task_id}: {}", end_text_of(&a))))
            }
            None if matches!(a, Answer::HttpStatus { status: 404, .. }) => {
                Err(GetEnd::Unknown(format!("the server's session of task {task_id} is gone: {}", end_text_of(&a))))
            }
            None => Err(GetEnd::Broken(format!("tasks/get {task_id}: {}", end_text_of(&a)))),
        },
        RpcEnd::Deadline { .. } => Err(GetEnd::Deadline),
        other => Err(GetEnd::Broken(format!("tasks/get {task_id}: {}", end_text(&other)))),
    }
}

fn end_text_of(a: &Answer) -> String {
    a.refusal().unwrap_or_else(|| "malformed task".into())
}

/// `tasks/result`: the answer of the original request.
pub(crate) async fn fetch_result(link: &Link, task_id: &str, deadline: Option<Instant>) -> RpcEnd {
    link.request("tasks/result", &json!({"taskId": task_id}), deadline, || {}).await
}

/// A task's answer once it ended: 2026-07-28 from what `tasks/get`
/// carried, 2025-11-25 by `tasks/result`.
pub(crate) async fn answer(link: &Link, state: &TaskState, deadline: Option<Instant>) -> RpcEnd {
    if !link.modern() {
        return fetch_result(link, &state.id, deadline).await;
    }
    match state.inline_answer() {
        Some(a) => RpcEnd::Answer(a),
        None => RpcEnd::Lost(format!("{} without its result or error in tasks/get", state.describe())),
    }
}

/// `tasks/cancel`: `Ok(Some(state))` the server reports, `Ok(None)` when
/// it only acknowledged (2026-07-28), or why not.
pub(crate) async fn cancel(link: &Link, task_id: &str) -> Result<Option<TaskState>, String> {
    let by = Instant::now() + CANCEL_TIMEOUT;
    match link.request("tasks/cancel", &json!({"taskId": task_id}), Some(by), || {}).await {
        RpcEnd::Answer(a) => match a.result() {
            Some(r) if link.modern() => Ok(TaskState::parse(r)),
            Some(r) => TaskState::parse(r).map(Some).ok_or_else(|| format!("tasks/cancel {task_id}: malformed task")),
            None => Err(format!("tasks/cancel {task_id}: {}", end_text_of(&a))),
        },
        other => Err(format!("tasks/cancel {task_id}: {}", end_text(&other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_delays_follow_the_server_within_bounds() {
        assert_eq!(poll_delay(Some(1000), 0), Duration::from_secs(1));
        assert_eq!(poll_delay(Some(1), 0), POLL_MIN);
        assert_eq!(poll_delay(Some(600_000), 0), POLL_MAX);
        let ms: Vec<u128> = (0..7).map(|n| poll_delay(None, n).as_millis()).collect();
        assert_eq!(ms, vec![250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(poll_delay(None, u32::MAX), POLL_MAX);
    }

    #[test]
    fn task_states() {
        let t = TaskState::parse(&json!({"taskId": "t1", "status": "working", "pollInterval": 1000,
                                         "statusMessage": "Gathering"}))
        .unwrap();
        assert_eq!((t.status.clone(), t.poll_ms), (Status::Working, Some(1000)));
        assert_eq!(t.describe(), "task t1 working (Gathering)");
        assert!(TaskState::parse(&json!({"taskId": "", "status": "working"})).is_none());
        assert!(TaskState::parse(&json!({"status": "working"})).is_none());
        let odd = TaskState::parse(&json!({"taskId": "t", "status": "paused"})).unwrap();
        assert!(!odd.status.answerable());
        let ok = Answer::Message(json!({"result": {"content": []}}));
        let err = Answer::Message(json!({"result": {"content": [], "isError": true}}));
        // 2026-07-28: tasks/get carries the end.
        let done = TaskState::parse(&json!({"taskId": "t", "status": "completed", "pollIntervalMs": 5000,
                                            "result": {"content": []}}))
        .unwrap();
        assert_eq!(done.poll_ms, Some(5000));
        assert_eq!(done.inline_answer(), Some(Answer::Message(json!({"result": {"content": []}}))));
        let failed = TaskState::parse(&json!({"taskId": "t", "status": "failed", "error": {"code": -1}})).unwrap();
        assert_eq!(failed.inline_answer().unwrap().refusal().unwrap(), "JSON-RPC error -1: ");
        let bare = TaskState::parse(&json!({"taskId": "t", "status": "completed"})).unwrap();
        assert_eq!(bare.inline_answer(), None, "no result: no answer");
        let mut s = t.clone();
        s.status = Status::Completed;
        assert_eq!(s.forced_error(&ok), None);
        s.status = Status::Failed;
        assert!(s.forced_error(&ok).unwrap().contains("failed"));
        assert_eq!(s.forced_error(&err), None, "the result says it itself");
        s.status = Status::Cancelled;
        assert!(s.forced_error(&ok).unwrap().contains("cancelled"));
    }
}
