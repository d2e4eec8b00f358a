//! Providers: the things that do a task's work (a local command, an HTTP
//! service, an MCP tool server, ...), behind one small trait.
//!
//! Architecture invariant: this crate knows nothing of the ledger. It never
//! sees the store path, never writes an approval or settlement, and reports
//! only what it observed: whether the request was handed over, and what came
//! back. Deciding what that *means* (success, failure class, unknown effect)
//! is the engine's job.

pub mod builtin;
pub mod capture;
pub mod command;
pub mod http;
pub mod mcp;
pub mod oauth;
pub mod observe;
pub mod process;
mod readback;
pub mod sandbox;
mod spawn;
#[cfg(test)]
mod test_support;
pub mod tls;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

pub use capture::Captured;
pub use observe::{ConfigError, Decider, Verdict};
pub use readback::ReadBack;
/// A process that installs a signal handler after it started a provider
/// process calls this, so the next one resets that signal before it
/// unblocks it (see `spawn::signals`).
pub use spawn::handlers_changed as signal_handlers_changed;
pub use spawn::tidy as tidy_processes;

/// A boxed future, so `Provider` stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One call to a provider: the exact request plus the idempotency identity
/// the provider receives (`operation_id`, `try`).
#[derive(Debug, Clone)]
pub struct Call {
    pub operation_id: String,
    /// 1, 2, ... — the try number of this operation.
    pub try_no: u32,
    /// The request as the plan states it (for a command: `{"run": [...]}`;
    /// for HTTP: `{"body": ..., "method": ..., "headers": ...}`; for MCP:
    /// `{"tool": ..., "arguments": {...}}`).
    pub request: serde_json::Value,
    /// Working directory for local work (the workspace).
    pub workspace: PathBuf,
    /// Engine deadline for this call; `None` means no deadline.
    pub timeout: Option<Duration>,
    /// Bound on each captured stream (stdout, stderr, HTTP body).
    pub output_bytes_max: usize,
    /// Bytes written to the provider's stdin (agent protocol), if any.
    pub stdin: Option<Vec<u8>>,
    /// Extra environment variables for a command (never the store path).
    pub env: Vec<(String, String)>,
    /// Literal secret values to redact from captured output.
    pub secrets: Vec<String>,
    /// The sandbox every process this call starts runs in. No default:
    /// whoever builds a call chooses (`Sandbox::disabled()` only where the
    /// plan opts out, or in a test of something else).
    pub sandbox: sandbox::Sandbox,
    /// The W3C `traceparent` of this call's span when the run exports a
    /// trace (`00-TRACE-SPAN-FLAGS`): sent as the `traceparent` header, in
    /// an MCP request's `params._meta`, as a command's `TRACEPARENT`.
    pub traceparent: Option<String>,
}

/// Where a provider reports progress: a bounded channel with room for
/// every message one call must send (at most a `Spawned`, a `Dispatched`
/// and a `Handle`), so a provider's `try_send` of those never waits and
/// never finds it full. A `Note` is sent only while more than
/// `PROGRESS_RESERVED` places are free (`note`): notes are dropped, never
/// the messages the ledger needs.
pub type ProgressSender = mpsc::Sender<Progress>;

/// The progress messages one call's channel holds (`progress_channel`).
pub const PROGRESS_MESSAGES_MAX: usize = 8;
/// The places a `Note` leaves free: one each for `Spawned`, `Dispatched`
/// and `Handle`.
pub const PROGRESS_RESERVED: usize = 3;

/// Send a progress note if it leaves the places the ledger's messages
/// need; otherwise drop it (a note is for the display only).
pub fn note(progress: &ProgressSender, note: Note) -> bool {
    progress.capacity() > PROGRESS_RESERVED && progress.try_send(Progress::Note(note)).is_ok()
}

/// A channel for one call's progress.
pub fn progress_channel() -> (ProgressSender, mpsc::Receiver<Progress>) {
    mpsc::channel(PROGRESS_MESSAGES_MAX)
}

/// Progress a provider reports while a call is in flight. The engine records
/// `Dispatched` in the ledger as soon as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A provider process was started (sent before its `Dispatched`): who
    /// it is, so that an engine taking over after a crash can end its
    /// process group.
    Spawned { process: process::ProcessId },
    /// The request was handed to the provider (a process spawned with this
    /// pid, or the HTTP request fully written). Not a claim of receipt.
    Dispatched { detail: String },
    /// The provider accepted the request and named it: the handle to ask
    /// about it later (`Provider::resume`, `Provider::cancel`), also after a
    /// crash. Always sent after `Dispatched`, before the outcome; commit it
    /// at once. Claims the provider accepted the request, not that it did
    /// the work.
    Handle { handle: Handle, detail: String },
    /// What the provider says of its own progress (an MCP server's
    /// `notifications/progress`): for the live display only, never
    /// recorded as evidence and never a verdict. Bounded and rate-limited
    /// by the provider; dropped when the channel is short of room.
    Note(Note),
}

/// A provider's word on how far a call has come.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub progress: f64,
    pub total: Option<f64>,
    /// Bounded (`NOTE_CHARS_MAX`), as the provider said it: the engine
    /// escapes it before showing it.
    pub message: Option<String>,
}

/// Bound on a progress note's message.
pub const NOTE_CHARS_MAX: usize = 200;

/// A provider's own name for a request it accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Handle {
    /// An MCP task (2025-11-25 tasks): the server's task id, and for a
    /// Streamable HTTP server the `Mcp-Session-Id` the task lives in.
    McpTask {
        task_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
    },
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ExitStatus {
    Code { code: i32 },
    Signal { signal: i32 },
}

/// What the provider answered, by provider kind. A receipt says an answer
/// was received and stored; it does not say the answer means success.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Receipt {
    Command(CommandReceipt),
    Http(HttpReceipt),
    Mcp(McpReceipt),
    Builtin(BuiltinReceipt),
}

/// The builtin provider's answer: what it did, and whether the call's
/// deadline cut a sleep short.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuiltinReceipt {
    pub op: builtin::Op,
    pub timed_out: bool,
    pub duration_ms: u64,
}

/// A local program's end: how it exited and what it printed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CommandReceipt {
    /// `None` only if waiting for it failed; never mistaken for success.
    pub exit: Option<ExitStatus>,
    pub stdout: Captured,
    pub stderr: Captured,
    /// The engine's deadline fired and the process group was killed.
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Processes it started still ran when it exited, past a grace: the
    /// engine ended them. Never a success while they ran. (Boxed: rare,
    /// and a receipt travels in every run message.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descendants: Option<Box<Descendants>>,
}

/// What a command left running when it exited (its cgroup was not empty
/// after `command::DESCENDANT_GRACE`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Descendants {
    /// Who they were (the first few), read before they were ended.
    pub processes: Vec<Descendant>,
    /// How long they were given after the command exited.
    pub grace_ms: u64,
    /// All gone after `cgroup.kill` (false: some were still there when the
    /// engine stopped waiting).
    pub ended: bool,
}

/// One process left running: its pid and name (`/proc/PID/comm`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Descendant {
    pub pid: u32,
    pub name: String,
}

/// An HTTP service's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HttpReceipt {
    pub status: u16,
    /// The `Retry-After` header in seconds, if any.
    pub retry_after_seconds: Option<u64>,
    pub body: Captured,
    pub duration_ms: u64,
    /// The status line came, then the body was cut short (the connection
    /// broke in it, a close without TLS `close_notify`, the deadline): why,
    /// in words. The status is the answer all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_cut: Option<String>,
    /// The value of the provider's `version_header` in the answer, when
    /// it declares one and the answer carries it (the service's own word
    /// on its version: the tool's identity a completion records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An MCP tool call's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct McpReceipt {
    /// The JSON of the call's `result` (or of its JSON-RPC `error`).
    pub result: Captured,
    /// The tool reported an error (`isError: true`, with the text of its
    /// content), the server answered with a JSON-RPC `error` (code and
    /// message), an answer over the bound, an HTTP error status, or a task
    /// that failed or was cancelled.
    pub tool_error: Option<String>,
    /// The server's stderr (a stdio server's).
    pub stderr: Captured,
    /// A Streamable HTTP server's error status, and its `Retry-After`.
    pub http_status: Option<u16>,
    pub retry_after_seconds: Option<u64>,
    pub duration_ms: u64,
    /// The result does not match the `outputSchema` the server declared
    /// for the tool: the first mismatch, with its JSON path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_invalid: Option<String>,
    /// The server asks for input before it answers (MCP elicitation: a
    /// 2026-07-28 `input_required` result or task, a 2025-11-25
    /// `elicitation/create` during the call, which the provider dismissed):
    /// a person's answer is needed. Never answered on anyone's behalf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Box<InputAsk>>,
    /// The server refused the call for want of scope (`403` with
    /// `insufficient_scope`), and the token was not granted all of it: the
    /// scope a person's `engine login --scope` must ask for. The server's
    /// refusal says it did nothing; the call may go again once a person
    /// logged in. Boxed: rare, and a receipt travels in every outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up_scope: Option<Box<String>>,
}

/// What a server asks a person before it answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InputAsk {
    /// A 2026-07-28 task waiting for input: the answers go to it
    /// (`tasks/update`) instead of a new `tools/call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// A 2026-07-28 `requestState`, echoed verbatim with the answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Each question, at most `mcp::input::QUESTIONS_MAX`.
    pub questions: Vec<Question>,
}

/// One question (an `elicitation/create`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Question {
    /// The server's key for it (`inputRequests`); for a 2025-11-25
    /// server, which names none, `q1`, `q2`, … in the order asked.
    pub key: String,
    /// The question as put: `method`, `mode` (`form` or `url`),
    /// `message`, and the `requestedSchema` (form) or the `url` (url). The
    /// server's `elicitationId` is kept apart: a server may name each
    /// asking anew, and the question is the same.
    pub question: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
}

/// A person's answers, carried by the call that resumes an operation
/// whose server asked (the engine puts them in the request, under
/// `answers`): `inputResponses` (with the `requestState`), a task's
/// `tasks/update`, or the replies to a 2025-11-25 server's questions,
/// matched by the question.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InputAnswers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    pub responses: Vec<InputResponse>,
}

/// One answer: the question it answers and the `ElicitResult` sent back
/// (`{"action": "accept", "content": {…}}` or `{"action": "decline"}`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InputResponse {
    pub key: String,
    pub question: serde_json::Value,
    pub result: serde_json::Value,
}

/// A person who may answer, during the call, a question its server puts
/// (an MCP `elicitation/create`), when the plan holds such questions open
/// (an MCP provider's `ask.wait_seconds`). The engine's side shows the
/// question and waits, at most `Held::wait`, for a person's answer
/// recorded from another terminal; this crate never learns where (the
/// ledger stays the engine's). `None`: no answer in time, or the engine
/// cannot hold the question (the server then gets `cancel`, as without a
/// wait).
pub trait Person: Send + Sync {
    fn ask(&self, held: Held) -> BoxFuture<'static, Option<serde_json::Value>>;
}

/// A question held open during a call: the call (its operation and try),
/// the question as a person answers it (`Question`), and how long it may
/// wait (the plan's wait, never past the call's deadline).
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub operation_id: String,
    pub try_no: u32,
    pub question: Question,
    pub wait: Duration,
}

/// Why a call ended without a receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LostReason {
    /// The deadline fired after the request was handed over.
    DeadlineAfterDispatch,
    /// The connection broke after the request was written.
    ResponseLost,
}

/// A failure before anything was handed to the provider: nothing happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotDispatched {
    pub kind: NotDispatchedKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotDispatchedKind {
    /// The executable does not exist.
    ExecutableMissing,
    /// Permission denied starting it.
    PermissionDenied,
    /// The request is malformed for this provider (e.g. empty argv).
    BadRequest,
    /// The service refused the connection before any byte was sent.
    ConnectionRefused,
    /// The engine's deadline passed before any byte was sent.
    DeadlineBeforeDispatch,
    /// Any other error before dispatch.
    Other,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    NotDispatched(NotDispatched),
    Received(Receipt),
    /// Dispatched, and no receipt: the effect may or may not have happened.
    Lost {
        reason: LostReason,
        detail: String,
    },
}

/// What re-observing an operation found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Observation {
    EffectPresent { evidence: String },
    EffectAbsent { evidence: String },
    Inconclusive { evidence: String },
}

impl From<ReadBack> for Observation {
    fn from(r: ReadBack) -> Self {
        let evidence = r.summary();
        match r.verdict {
            Verdict::Present => Observation::EffectPresent { evidence },
            Verdict::Absent => Observation::EffectAbsent { evidence },
            Verdict::Inconclusive => Observation::Inconclusive { evidence },
        }
    }
}

/// What asking about a handle found (`Provider::resume`).
#[derive(Debug, Clone, PartialEq)]
pub enum Resumed {
    /// The request ended and its answer was fetched: the receipt (with
    /// `tool_error` set when it failed or was cancelled).
    Receipt(Receipt),
    /// The provider still works on it (the deadline passed, or none was
    /// given and one look found it unfinished).
    Running { evidence: String },
    /// Cannot tell: the provider does not know the handle (any more), or
    /// could not be asked.
    Inconclusive { evidence: String },
}

/// A tool a provider offers (an MCP server's `tools/list`): its name, the
/// JSON Schema of its arguments and of its structured result as the server
/// declared them, and its annotations (hints, never permission).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub input_schema: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

/// Who a server says it is (MCP `serverInfo`): self-reported, recorded so
/// that another server behind the same command is noticed, never trusted
/// for anything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

/// What a provider's server offers: who it says it is, the protocol
/// revision spoken with it, and its tools sorted by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub server: Option<ServerInfo>,
    pub protocol: String,
    pub tools: Vec<Tool>,
}

/// What `Provider::cancel` got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    /// The provider confirmed the request is cancelled (not that nothing of
    /// it happened).
    pub confirmed: bool,
    pub evidence: String,
}

/// A provider. Implementations must report `Progress::Dispatched` the moment
/// the request is handed over, and never retry on their own.
pub trait Provider: Send + Sync {
    /// Stable identity of this provider and its configuration (part of a
    /// task's meaning digest).
    fn identity(&self) -> serde_json::Value;

    fn dispatch<'a>(&'a self, call: &'a Call, progress: ProgressSender) -> BoxFuture<'a, Outcome>;

    /// Check a task's declared read-back rule (its `observe` JSON) at plan
    /// check time; the error's path is inside the rule.
    fn check_observe(&self, _rule: &serde_json::Value) -> Result<(), ConfigError> {
        Err(ConfigError::new("", "this provider cannot observe"))
    }

    /// Read back the effect of `call` without re-sending it: by the task's
    /// rule when given (as `check_observe` accepted it), else by the
    /// provider's default. `None`: no rule to observe with.
    fn read_back<'a>(
        &'a self,
        _call: &'a Call,
        _rule: Option<&'a serde_json::Value>,
    ) -> Option<BoxFuture<'a, ReadBack>> {
        None
    }

    /// `read_back` by the provider's default rule, as an `Observation`.
    fn observe<'a>(&'a self, call: &'a Call) -> Option<BoxFuture<'a, Observation>> {
        let fut = self.read_back(call, None)?;
        Some(Box::pin(async move { Observation::from(fut.await) }))
    }

    /// Ask about a request the provider accepted under `handle` (after a
    /// crash, or to go on waiting), without re-sending it. Waits for its end
    /// up to `call.timeout`; without one, looks once. `None`: this provider
    /// has no handles.
    fn resume<'a>(&'a self, _call: &'a Call, _handle: &'a Handle) -> Option<BoxFuture<'a, Resumed>> {
        None
    }

    /// A person stopped the run: cancel the request accepted under
    /// `handle`. `None`: this provider has no handles.
    fn cancel<'a>(&'a self, _call: &'a Call, _handle: &'a Handle) -> Option<BoxFuture<'a, Cancelled>> {
        None
    }

    /// The tools this provider offers and who offers them (an MCP
    /// server's `serverInfo` and `tools/list`, starting the server if
    /// needed; nothing of any call is sent). `call`
    /// gives the workspace, the deadline and the secrets, as for a call.
    /// `None`: this provider has no tool inventory.
    fn list_tools<'a>(&'a self, _call: &'a Call) -> Option<BoxFuture<'a, Result<Inventory, String>>> {
        None
    }

    /// End what the provider keeps for a run (an MCP server: stdin closed,
    /// its process group killed after a grace). Call once, at the end.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
