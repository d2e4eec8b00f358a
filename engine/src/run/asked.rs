//! What a person asked of a run, beyond running the plan: operations to
//! re-send (`engine retry`), tasks to repair (`engine repair`) and to
//! run again (`engine rerun`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::evidence::Classification;
use crate::ids::{AttemptId, OperationId, RequestDigest};

/// What a person asked of this run, beyond running the plan.
#[derive(Debug, Default)]
pub struct Asked {
    /// Operations a person asked to re-send (`engine retry`).
    pub retry: HashSet<OperationId>,
    /// Of those, the ones a person asked to re-send without reading them
    /// back first (`engine retry --without-read-back`): settled `not_run`,
    /// their read-back could not answer.
    pub read_back_waived: HashSet<OperationId>,
    /// Tasks a person asked to repair (`engine repair`), by ref.
    pub repairs: HashMap<String, Repair>,
    /// Tasks a person answered (`engine answer`), by ref: the call that
    /// resumes each carries the answers.
    pub answers: HashMap<String, Answering>,
    /// A person's `engine run --reuse-across-tool-change`: completions
    /// stale by their tool alone (`TOOL_CHANGED`) are kept, each with an
    /// event naming the person and the act.
    pub across_tool_change: Option<AcrossToolChange>,
    /// Tasks a person asked to run again (`engine rerun`), by ref: each
    /// call is a new operation of its own.
    pub reruns: HashMap<String, Rerun>,
}

/// A person's `engine run --reuse-across-tool-change`, as the act chain
/// records it (`commands::run::across_tool_change`).
#[derive(Debug, Clone)]
pub struct AcrossToolChange {
    pub person: crate::store::acts::Person,
    /// The act's row among the person's requests.
    pub ask_id: i64,
}

/// What a rerun sends: the task's request, as a new operation (its
/// request digest binds the rerun's number).
#[derive(Debug, Clone)]
pub struct Rerun {
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    /// The rerun's number among the task's reruns (1, 2, …).
    pub number: i64,
    /// Its dependants run again with it (`--downstream`); otherwise their
    /// completions stand.
    pub downstream: bool,
}

/// What a call that carries a person's answers sends: a new request (the
/// answers are part of it), with its own operation id.
#[derive(Debug, Clone)]
pub struct Answering {
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    /// `providers::InputAnswers`, as recorded with the person's act.
    pub answers: Value,
    /// When the answer expires (`engine answer --for`): past it, the call
    /// that carries it is never made (`decide::gate`).
    pub expires: Option<AnswerExpiry>,
}

/// An answer's end, and the question to ask again once it has passed.
#[derive(Debug, Clone)]
pub struct AnswerExpiry {
    pub ask_id: i64,
    pub at_ms: i64,
    /// The task's detail while it waited (`awaiting_input`).
    pub question: Value,
}

/// What a repair sends: a new request (the instruction is part of it) with
/// the failure evidence handed to the provider.
#[derive(Debug, Clone)]
pub struct Repair {
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    pub instruction: Option<String>,
    pub failed_attempt: AttemptId,
    pub classification: Option<Classification>,
    pub evidence: Value,
}
