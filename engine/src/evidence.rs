//! Evidence: what the engine observed directly about an attempt. Typed, and
//! stored as JSON with a `kind` tag; the classifier reads these types, never
//! substrings of serialized JSON.

use providers::capture::Omitted;
use providers::{Captured, ExitStatus, LostReason, NotDispatchedKind};
use serde::{Deserialize, Serialize};

use crate::ids::EvidenceId;
use crate::state::FailureClass;
use crate::state::StopSignal;

/// A bounded excerpt of captured output plus the blob that holds all of
/// what was kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// BLAKE3 of the kept bytes (a row in `blobs`).
    pub blob: String,
    /// The last lines, for a person to read at a glance.
    pub excerpt: String,
    pub total_bytes: u64,
    pub kept_bytes: u64,
    pub truncated: bool,
    /// The middle of the stream that was not kept (the blob holds its
    /// head, then its tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// Why the engine does not know an operation's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownReason {
    /// The engine stopped (crash, kill) between intent and receipt.
    EngineRestarted,
    /// The connection broke after the request was written.
    ResponseLost,
    /// The engine's deadline fired after the request was handed over.
    DeadlineAfterDispatch,
    /// A person stopped the run (SIGINT, SIGTERM, SIGHUP) after the
    /// request was handed over.
    StoppedAfterDispatch,
}

impl From<LostReason> for UnknownReason {
    fn from(r: LostReason) -> Self {
        match r {
            LostReason::DeadlineAfterDispatch => UnknownReason::DeadlineAfterDispatch,
            LostReason::ResponseLost => UnknownReason::ResponseLost,
        }
    }
}

impl UnknownReason {
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownReason::EngineRestarted => "engine_restarted",
            UnknownReason::ResponseLost => "response_lost",
            UnknownReason::DeadlineAfterDispatch => "deadline_after_dispatch",
            UnknownReason::StoppedAfterDispatch => "stopped_after_dispatch",
        }
    }

    pub fn parse(s: &str) -> Option<UnknownReason> {
        [
            UnknownReason::EngineRestarted,
            UnknownReason::ResponseLost,
            UnknownReason::DeadlineAfterDispatch,
            UnknownReason::StoppedAfterDispatch,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who reported a provider error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    /// An HTTP status outside 2xx.
    Http,
    /// An MCP tool error (`isError`, or a JSON-RPC error).
    Tool,
    /// An agent's own report of `status: failed` (a claim, classified
    /// only as `unclassified`).
    AgentReport,
}

/// Engine-direct errors: the engine itself saw these happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineErrorKind {
    ExecutableMissing,
    PermissionDenied,
    BadRequest,
    ConnectionRefused,
    TimeoutBeforeDispatch,
    Other,
}

impl From<NotDispatchedKind> for EngineErrorKind {
    fn from(k: NotDispatchedKind) -> Self {
        match k {
            NotDispatchedKind::ExecutableMissing => EngineErrorKind::ExecutableMissing,
            NotDispatchedKind::PermissionDenied => EngineErrorKind::PermissionDenied,
            NotDispatchedKind::BadRequest => EngineErrorKind::BadRequest,
            NotDispatchedKind::ConnectionRefused => EngineErrorKind::ConnectionRefused,
            NotDispatchedKind::DeadlineBeforeDispatch => EngineErrorKind::TimeoutBeforeDispatch,
            NotDispatchedKind::Other => EngineErrorKind::Other,
        }
    }
}

/// A marker recorded before `dispatched` existed was one of a dispatch.
fn recorded_before_the_field() -> bool {
    true
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// A provider answered with an error of its own (HTTP status, tool
    /// error, an agent's `status: failed` report).
    ProviderError {
        #[serde(skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u64>,
        source: EvidenceSource,
        excerpt: String,
    },
    /// The provider's output broke its protocol (e.g. no agent JSON report).
    ProviderOutputInvalid { message: String },
    /// The engine itself saw this go wrong, before or around dispatch.
    EngineError { error: EngineErrorKind, message: String },
    /// No receipt. `safe_to_resend`: the task's effect is `none` or it is
    /// declared idempotent. `dispatched`: the dispatch was recorded (false:
    /// the engine stopped between the intent and the dispatch mark, so the
    /// ledger never saw the request leave; markers recorded before the field
    /// existed were all written after a dispatch).
    EffectMarker {
        reason: UnknownReason,
        safe_to_resend: bool,
        #[serde(default = "recorded_before_the_field")]
        dispatched: bool,
    },
    /// How the provider's process ended, with its captured output.
    ProcessExit { exit: Option<ExitStatus>, timed_out: bool, duration_ms: u64, stdout: Output, stderr: Output },
    /// Processes the provider's process started still ran `grace_ms` after
    /// it exited (its cgroup was not empty): the engine ended them. Its
    /// work was cut short by the engine: never a success.
    DescendantsEnded { processes: Vec<providers::Descendant>, grace_ms: u64, ended: bool },
    /// An HTTP provider's answer. `body_cut`: its status line came, then
    /// the body was cut short (why, in words); the status is the answer.
    HttpResponse {
        status: u16,
        body: Output,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_cut: Option<String>,
    },
    /// An MCP tool call's answer: `body` is the JSON of its `result` (or
    /// JSON-RPC `error`); `stderr` is the server's.
    ToolResult { is_error: bool, body: Output, stderr: Output, duration_ms: u64 },
    /// The builtin provider's answer (`noop`, `sleep`): nothing left the
    /// engine; `timed_out` when the call's deadline cut a sleep short.
    BuiltinResult { op: providers::builtin::Op, timed_out: bool, duration_ms: u64 },
    /// An attempt that passed every check declared `outputs` the engine
    /// could not keep: over a bound of `limits.rs` (`limit` names it:
    /// `OUTPUT_FILES_MAX`, `OUTPUT_FILE_BYTES_MAX`, `OUTPUT_TASK_BYTES_MAX`),
    /// or a file that could not be read (`limit` is absent). The task fails
    /// on it: a success is never recorded without its outputs.
    OutputsNotKept {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
        message: String,
    },
    /// One validation or acceptance check.
    CheckResult {
        check_id: String,
        exit: Option<ExitStatus>,
        expect_exit: i32,
        timed_out: bool,
        passed: bool,
        /// The failing assertion line found in the output, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        failing_assertion: Option<String>,
        stdout: Output,
        stderr: Output,
        #[serde(skip_serializing_if = "Option::is_none")]
        checkpoint: Option<String>,
        /// A goal constraint's check (`check_id` is the constraint's id),
        /// not a task's validation.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        of_constraint: bool,
    },
    /// What the provider's report said it spent during the call (an agent's
    /// `spent`): every entry and their total, as reported — the provider's
    /// word, not verified by the engine — and whether the task declared it
    /// may spend (`may_spend`). Counted against `max_cost`; without
    /// `may_spend` it is a constraint violation (`spending_not_declared`).
    SpendingReported { items: Vec<SpentItem>, total_micros: i64, may_spend: bool },
    /// An MCP server refused the call for want of scope (`403` with
    /// `insufficient_scope`: by its answer it did nothing), asking for
    /// scope the kept token was not granted: `scope`, what a person's
    /// `engine login --scope` asks for.
    ScopeRefused { scope: String },
    /// Files under a goal constraint's protected paths that changed between
    /// the observation before an attempt and the one after it, its
    /// validations and the constraint checks — and that its task's
    /// `may_change` does not allow. Every such path, with both digests.
    ProtectedPathChanged { changes: Vec<PathChange> },
    /// The goal's protected paths could not be observed before or after an
    /// attempt, so whether it changed them cannot be told. Not an engine
    /// error of the call (the call was sent, and counts), not a violation
    /// (nothing was seen to change): the attempt is not judged clean.
    ProtectedPathsNotObserved { message: String },
    /// Files an attempt created, changed or removed in the workspace that
    /// its task does not declare (`outputs`, `may_change`), judged from the
    /// workspace before the attempt and after it (before its validations):
    /// the first `decide::declared::NAMED_MAX`, with both digests, and how
    /// many more. `outputs`: the task's `outputs` line with the paths that
    /// may be declared added (none when all lie in `.git`, `.hg`, `.jj` or
    /// `.engine`, which are never outputs).
    UndeclaredWrite {
        changes: Vec<PathChange>,
        #[serde(default)]
        more: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outputs: Option<Vec<String>>,
    },
    /// A re-observation of the target: its verdict and summary, and for a
    /// read-back the request, the answer and the rule that decided.
    Observation {
        observation: providers::Observation,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_back: Option<ReadBackRecord>,
    },
    /// The provider was asked about a request it had accepted, by the
    /// handle it gave (an MCP task id), without sending it again.
    HandleLookup { handle: providers::Handle, found: HandleFound, evidence: String },
    /// A person stopped the run (SIGINT, SIGTERM, SIGHUP) while this was in
    /// flight: a provider call, or a validation (`check_id`). Never a
    /// failure and never a pass; no classification rule reads it.
    Stopped {
        signal: StopSignal,
        what: StoppedWhat,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check_id: Option<String>,
        end: StopEnd,
    },
}

/// Processes a command left running, in words: who, how long they were
/// given, and that the engine ended them (or could not).
pub fn descendants_text(processes: &[providers::Descendant], grace_ms: u64, ended: bool) -> String {
    let who: Vec<String> = processes.iter().map(|p| format!("{} (pid {})", p.name, p.pid)).collect();
    format!(
        "processes it started still ran {} ms after it exited: {}; {}",
        grace_ms,
        if who.is_empty() { "(not named)".to_string() } else { who.join(", ") },
        if ended {
            "the engine ended them (not a success)"
        } else {
            "the engine killed them, and some were still there"
        }
    )
}

/// A read-back as the ledger keeps it: what was asked (placeholders
/// filled), what came back (its JSON as a blob, an excerpt beside it; none
/// when nothing usable came back, and then why), and which rule decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadBackRecord {
    pub request: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Output>,
    pub decider: providers::Decider,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matched: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// What asking the provider about an accepted request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandleFound {
    /// The request ended and its answer was fetched: that is the receipt.
    Answered,
    /// The provider still works on it.
    Running,
    /// The provider does not know it (any more), or could not be asked.
    Unknown,
}

/// A provider's handle in words: `MCP task T (session S)`.
pub fn handle_words(h: &providers::Handle) -> String {
    match h {
        providers::Handle::McpTask { task_id, session: Some(s) } => format!("MCP task {task_id} (session {s})"),
        providers::Handle::McpTask { task_id, session: None } => format!("MCP task {task_id}"),
    }
}

impl HandleFound {
    pub fn as_str(self) -> &'static str {
        match self {
            HandleFound::Answered => "answered",
            HandleFound::Running => "running",
            HandleFound::Unknown => "unknown",
        }
    }
}

/// What a person's stop reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedWhat {
    ProviderCall,
    Validation,
}

/// How a stopped call or check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopEnd {
    /// Its process group got SIGTERM and ended within the grace.
    Terminated,
    /// Its process group got SIGKILL (the grace ran out, or a second signal
    /// cut it short).
    Killed,
    /// No process of its own (HTTP, MCP): the engine stopped waiting for
    /// its answer.
    Dropped,
    /// It had not started when the stop came.
    NotStarted,
    /// Its provider was asked to cancel it (an MCP task: `tasks/cancel`)
    /// and the call ended after that.
    CancelAsked,
}

impl StopEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            StopEnd::Terminated => "terminated",
            StopEnd::Killed => "killed",
            StopEnd::Dropped => "dropped",
            StopEnd::NotStarted => "not_started",
            StopEnd::CancelAsked => "cancel_asked",
        }
    }
}

impl Evidence {
    pub fn kind(&self) -> &'static str {
        match self {
            Evidence::ProviderError { .. } => "provider_error",
            Evidence::ProviderOutputInvalid { .. } => "provider_output_invalid",
            Evidence::EngineError { .. } => "engine_error",
            Evidence::EffectMarker { .. } => "effect_marker",
            Evidence::ProcessExit { .. } => "process_exit",
            Evidence::DescendantsEnded { .. } => "descendants_ended",
            Evidence::HttpResponse { .. } => "http_response",
            Evidence::ToolResult { .. } => "tool_result",
            Evidence::BuiltinResult { .. } => "builtin_result",
            Evidence::OutputsNotKept { .. } => "outputs_not_kept",
            Evidence::CheckResult { .. } => "check_result",
            Evidence::ProtectedPathChanged { .. } => "protected_path_changed",
            Evidence::ProtectedPathsNotObserved { .. } => "protected_paths_not_observed",
            Evidence::UndeclaredWrite { .. } => "undeclared_write",
            Evidence::Observation { .. } => "observation",
            Evidence::Stopped { .. } => "stopped",
            Evidence::HandleLookup { .. } => "handle_lookup",
            Evidence::SpendingReported { .. } => "spending_reported",
            Evidence::ScopeRefused { .. } => "scope_refused",
        }
    }
}

/// One entry of a provider's report of what it spent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpentItem {
    /// In micro-units, as every cost.
    pub amount_micros: i64,
    /// What it paid for, in the provider's words (bounded).
    pub what: String,
}

impl SpentItem {
    /// `1.5 (render 2)`.
    pub fn words(&self) -> String {
        format!("{} ({})", crate::cost::Cost::from_micros(self.amount_micros), self.what)
    }
}

/// One protected file that changed in an attempt's window: its content
/// digest before and after (`None`: absent — so a creation has no `before`,
/// a deletion no `after`), and the constraints whose `protect` covers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathChange {
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
    pub constraints: Vec<String>,
}

impl PathChange {
    /// `changed`, `created` or `deleted`.
    pub fn what(&self) -> &'static str {
        match (&self.before, &self.after) {
            (None, Some(_)) => "created",
            (Some(_), None) => "deleted",
            _ => "changed",
        }
    }
}

/// Evidence with its ledger id, as the classifier receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub id: EvidenceId,
    pub evidence: Evidence,
}

/// What the classifier concluded from an attempt's evidence: the class,
/// the rule that decided it and the evidence it used; the attempt's claims
/// are listed beside it, never an input to it. Stored in typed columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    pub class: FailureClass,
    /// The name of the rule in `classify::RULES` that matched.
    pub rule: String,
    pub evidence_ids: Vec<EvidenceId>,
    /// Claims recorded for the attempt (ids), kept beside the class: never
    /// an input to it.
    #[serde(default)]
    pub claims: Vec<i64>,
    pub next: String,
}

/// Keep the last `lines_max` lines and at most `bytes_max` bytes, from the
/// stream's tail; when that is all of the tail, the gap before it is
/// marked.
pub fn excerpt(captured: &Captured, lines_max: usize, bytes_max: usize) -> String {
    let (_, tail) = captured.parts();
    let last = last_lines(tail, lines_max, bytes_max);
    match captured.omitted {
        Some(o) if last.len() == tail.trim_matches('\n').len() => {
            format!("[… {} bytes not kept …]\n{last}", o.bytes)
        }
        _ => last,
    }
}

fn last_lines(text: &str, lines_max: usize, bytes_max: usize) -> String {
    let text = text.trim_end();
    let mut start = text.len();
    let mut lines = 0;
    for (i, c) in text.char_indices().rev() {
        if c == '\n' {
            lines += 1;
            if lines == lines_max {
                break;
            }
        }
        if text.len() - i > bytes_max {
            break;
        }
        start = i;
    }
    text[start..].trim_start_matches('\n').to_string()
}
