//! Stable error codes and the exit codes they map to (SPEC.md "Error codes",
//! "Exit codes"). Every error a user sees carries its code and, where there is
//! one, the exact place: a JSON path, a file, a task ref.

use serde::Serialize;
use std::fmt;

/// SPEC.md's exit code of a run that satisfied its goal.
pub const EXIT_SATISFIED: i32 = 0;

/// SPEC.md's exit code of a run stopped on a classified task failure (or
/// one that did not satisfy its goal for no reason a code names).
pub const EXIT_TASK_FAILED: i32 = 1;

/// The stable strings of SPEC.md. Never rename one: scripts match on them.
/// Serialized as `as_str`, so stderr and `--json` always agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    GoalRequired,
    PlanInvalid,
    PlanCycle,
    UnknownDependency,
    DuplicateTaskRef,
    UnknownProvider,
    InputOutsideWorkspace,
    PlanChanged,
    ExternalEffectUnknown,
    GoalOutcomeUnproven,
    ApprovalRequired,
    ApprovalStale,
    BudgetExhausted,
    RepeatedFailureWithoutNewEvidence,
    ProviderChangeRequiresRevision,
    OperationConflict,
    SettlementInvalid,
    StoreLocked,
    StaleGeneration,
    StoreCorrupt,
    SchemaTooNew,
    /// SPEC's additions: the store's disk (or quota, or file size limit) is
    /// full; the transaction that did not fit was rolled back whole.
    StoreFull,
    /// SPEC's additions: a worker's claim on a task expired and another
    /// worker took it over; this worker writes nothing more about it.
    StaleClaim,
    /// SPEC's additions: a person's act in the store is not on the act
    /// chain (inserted or edited by anything but the engine); the row is
    /// named and nothing acts on it.
    StoreTampered,
    /// SPEC's additions: a `--request-id` already used for another command.
    RequestIdConflict,
    /// SPEC's additions: the plan's `people` does not list this operating
    /// system user for this act; nothing is recorded.
    NotPermitted,
    /// SPEC's additions: a task names an MCP tool its provider's `tools`
    /// allow-list does not name (`engine check`).
    ToolNotAllowed,
    /// SPEC's additions: a task names an MCP tool its server does not offer
    /// (its `tools/list`, before the run's first intent).
    UnknownTool,
    /// Issue 24: `engine approve` of an operation that waits on no
    /// approval (unknown, never asked for, or already done); nothing is
    /// recorded.
    NothingToApprove,
    /// SPEC's additions: an MCP server's `tools/list` could not be read:
    /// no call is made to it.
    ToolInventoryUnavailable,
    /// SPEC's additions: a revision loosens what the engine enforces
    /// (sandbox, network, env, budgets, constraints, protected paths,
    /// `people`, a tool allow-list) and no person approved it
    /// (`--approve-loosening`); nothing is recorded.
    LooseningNeedsApproval,
    /// SPEC's additions: a revision drops or renames a task whose operation
    /// is unknown or unsettled; nothing is recorded until it is settled.
    UnsettledOperation,
    /// Issue 27: an MCP server wants an OAuth token and none is usable (none
    /// kept, a refresh refused, a 401 after a refresh): nothing was sent;
    /// a person authorizes with `engine login PLAN PROVIDER`.
    AuthorizationRequired,
    /// Issue 27: `engine login` stopped: a redirect whose `state` is not
    /// this login's, an authorization server's error, no redirect in time.
    /// No token is kept.
    OauthRefused,
    /// Issue 27: OAuth metadata that is not to be trusted: a resource that
    /// is not the server (another audience), an endpoint not on the
    /// issuer, no PKCE S256. No token is asked for.
    OauthMetadataInvalid,
    /// Issue 27: a run stops because an MCP server asks a person for input
    /// (`awaiting_input`); `engine answer` gives it. Exit 4, as a run that
    /// waits on a person's approval.
    InputRequired,
    /// Issue 27: `engine answer` whose fields do not fit the question the
    /// server asked (an unknown field, a required one missing, a value of
    /// the wrong type); the field is named and nothing is recorded.
    AnswerInvalid,
    /// Issue 27: `engine answer` of a task that waits on no answer;
    /// nothing is recorded.
    NothingToAnswer,
    /// SPEC's additions: a `--store` path (or `ENGINE_STORE`) where there
    /// is no store, for every command but `run` (the one that makes one);
    /// the path is named and nothing is made.
    StoreNotFound,
    /// SPEC's additions: a provider's declared write rule covers (or lies
    /// inside) a cgroup tree, a stores folder or the engine's state; the
    /// rule is named at its JSON path (`engine check` and `run` alike).
    SandboxRuleRefused,
    /// Issue 36: a new operation whose request fingerprint (provider
    /// target, tool or endpoint, body) equals an unknown or unsettled one
    /// of any task or goal in the store: not sent until that one is settled.
    SameRequestUnsettled,
    /// SPEC's additions (issue 42): a run ends with only work a person
    /// holds (`engine hold`) left, and what waits on it; `engine release`
    /// lets it go on. Exit 4, as a run waiting on a person's act.
    Held,
    /// Not in SPEC's list: a command used wrongly (unknown ref, no goal yet).
    UsageError,
    /// Not in SPEC's list: a bug or an I/O failure the engine cannot explain.
    Internal,
}

impl Code {
    /// Every code, in SPEC's order then the engine's own.
    pub const ALL: &'static [Code] = &[
        Code::GoalRequired,
        Code::PlanInvalid,
        Code::PlanCycle,
        Code::UnknownDependency,
        Code::DuplicateTaskRef,
        Code::UnknownProvider,
        Code::InputOutsideWorkspace,
        Code::PlanChanged,
        Code::ExternalEffectUnknown,
        Code::GoalOutcomeUnproven,
        Code::ApprovalRequired,
        Code::ApprovalStale,
        Code::BudgetExhausted,
        Code::RepeatedFailureWithoutNewEvidence,
        Code::ProviderChangeRequiresRevision,
        Code::OperationConflict,
        Code::SettlementInvalid,
        Code::StoreLocked,
        Code::StaleGeneration,
        Code::StoreCorrupt,
        Code::SchemaTooNew,
        Code::StoreFull,
        Code::StaleClaim,
        Code::StoreTampered,
        Code::RequestIdConflict,
        Code::NotPermitted,
        Code::ToolNotAllowed,
        Code::UnknownTool,
        Code::NothingToApprove,
        Code::ToolInventoryUnavailable,
        Code::LooseningNeedsApproval,
        Code::UnsettledOperation,
        Code::AuthorizationRequired,
        Code::OauthRefused,
        Code::OauthMetadataInvalid,
        Code::InputRequired,
        Code::AnswerInvalid,
        Code::NothingToAnswer,
        Code::StoreNotFound,
        Code::SandboxRuleRefused,
        Code::SameRequestUnsettled,
        Code::Held,
        Code::UsageError,
        Code::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::GoalRequired => "GOAL_REQUIRED",
            Code::PlanInvalid => "PLAN_INVALID",
            Code::PlanCycle => "PLAN_CYCLE",
            Code::UnknownDependency => "UNKNOWN_DEPENDENCY",
            Code::DuplicateTaskRef => "DUPLICATE_TASK_REF",
            Code::UnknownProvider => "UNKNOWN_PROVIDER",
            Code::InputOutsideWorkspace => "INPUT_OUTSIDE_WORKSPACE",
            Code::PlanChanged => "PLAN_CHANGED",
            Code::ExternalEffectUnknown => "EXTERNAL_EFFECT_UNKNOWN",
            Code::GoalOutcomeUnproven => "GOAL_OUTCOME_UNPROVEN",
            Code::ApprovalRequired => "APPROVAL_REQUIRED",
            Code::ApprovalStale => "APPROVAL_STALE",
            Code::BudgetExhausted => "BUDGET_EXHAUSTED",
            Code::RepeatedFailureWithoutNewEvidence => "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE",
            Code::ProviderChangeRequiresRevision => "PROVIDER_CHANGE_REQUIRES_REVISION",
            Code::OperationConflict => "OPERATION_CONFLICT",
            Code::SettlementInvalid => "SETTLEMENT_INVALID",
            Code::StoreLocked => "STORE_LOCKED",
            Code::StaleGeneration => "STALE_GENERATION",
            Code::StoreCorrupt => "STORE_CORRUPT",
            Code::SchemaTooNew => "SCHEMA_TOO_NEW",
            Code::StoreFull => "STORE_FULL",
            Code::StaleClaim => "STALE_CLAIM",
            Code::StoreTampered => "STORE_TAMPERED",
            Code::RequestIdConflict => "REQUEST_ID_CONFLICT",
            Code::NotPermitted => "NOT_PERMITTED",
            Code::ToolNotAllowed => "TOOL_NOT_ALLOWED",
            Code::UnknownTool => "UNKNOWN_TOOL",
            Code::NothingToApprove => "NOTHING_TO_APPROVE",
            Code::ToolInventoryUnavailable => "TOOL_INVENTORY_UNAVAILABLE",
            Code::LooseningNeedsApproval => "LOOSENING_NEEDS_APPROVAL",
            Code::UnsettledOperation => "UNSETTLED_OPERATION",
            Code::SameRequestUnsettled => "SAME_REQUEST_UNSETTLED",
            Code::AuthorizationRequired => "AUTHORIZATION_REQUIRED",
            Code::OauthRefused => "OAUTH_REFUSED",
            Code::OauthMetadataInvalid => "OAUTH_METADATA_INVALID",
            Code::InputRequired => "INPUT_REQUIRED",
            Code::AnswerInvalid => "ANSWER_INVALID",
            Code::NothingToAnswer => "NOTHING_TO_ANSWER",
            Code::StoreNotFound => "STORE_NOT_FOUND",
            Code::SandboxRuleRefused => "SANDBOX_RULE_REFUSED",
            Code::Held => "HELD",
            Code::UsageError => "USAGE_ERROR",
            Code::Internal => "INTERNAL_ERROR",
        }
    }

    /// SPEC.md's exit code for a command that stops with this error.
    ///
    /// `STORE_FULL`, `STORE_CORRUPT` and `STORE_TAMPERED` are 2: not a bug
    /// (70 is for those), not one of the named stops (3–6); like
    /// `SCHEMA_TOO_NEW` each is a condition of the store a person must see
    /// to before anything more can run (what ran before it is in the
    /// ledger: a failed transaction is rolled back whole).
    pub fn exit_code(self) -> i32 {
        match self {
            // A settlement first: the revision waits on it, like a run.
            Code::ExternalEffectUnknown
            | Code::GoalOutcomeUnproven
            | Code::UnsettledOperation
            | Code::SameRequestUnsettled => 3,
            Code::ApprovalRequired
            | Code::ApprovalStale
            | Code::LooseningNeedsApproval
            | Code::InputRequired
            | Code::Held => 4,
            Code::BudgetExhausted => 5,
            Code::StoreLocked => 6,
            Code::StaleGeneration | Code::StaleClaim | Code::Internal => 70,
            Code::StoreCorrupt
            | Code::RepeatedFailureWithoutNewEvidence
            | Code::ProviderChangeRequiresRevision
            | Code::OperationConflict
            | Code::SettlementInvalid
            | Code::SchemaTooNew
            | Code::StoreFull
            | Code::StoreTampered
            | Code::RequestIdConflict
            | Code::NotPermitted
            | Code::ToolNotAllowed
            | Code::UnknownTool
            | Code::NothingToApprove
            | Code::AnswerInvalid
            | Code::NothingToAnswer
            | Code::ToolInventoryUnavailable
            | Code::AuthorizationRequired
            | Code::OauthRefused
            | Code::OauthMetadataInvalid
            | Code::GoalRequired
            | Code::PlanInvalid
            | Code::PlanCycle
            | Code::UnknownDependency
            | Code::DuplicateTaskRef
            | Code::UnknownProvider
            | Code::InputOutsideWorkspace
            | Code::PlanChanged
            | Code::StoreNotFound
            | Code::SandboxRuleRefused
            | Code::UsageError => 2,
        }
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with its stable code, a message a person can act on, and the
/// place it concerns (JSON path, file, task ref), if any.
#[derive(Debug, Clone, Serialize, thiserror::Error)]
pub struct Error {
    pub code: Code,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
    /// Structured details for `--json` (the cycle, the budget, ...).
    /// Boxed: errors travel in every `Result`, so they stay small.
    #[serde(skip_serializing_if = "is_null")]
    pub details: Box<serde_json::Value>,
}

fn is_null(v: &serde_json::Value) -> bool {
    v.is_null()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Some(place) => write!(f, "{}: {} (at {})", self.code, self.message, place),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), place: None, details: Box::new(serde_json::Value::Null) }
    }

    pub fn at(mut self, place: impl Into<String>) -> Self {
        self.place = Some(place.into());
        self
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Box::new(details);
        self
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(Code::Internal, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Error::new(Code::UsageError, message)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::internal(format!("I/O error: {e}"))
    }
}

/// Does this I/O error mean "no room" — a full disk, an exhausted quota,
/// or a file size limit (`RLIMIT_FSIZE`)?
pub fn is_no_room(errno: i32) -> bool {
    errno == libc::ENOSPC || errno == libc::EDQUOT || errno == libc::EFBIG
}

/// An I/O failure on the store's files, with the code it has: no room is
/// `STORE_FULL`; the system refusing this process (a read-only file
/// system, a permission, a sandbox) or a path that cannot be a store's (a
/// file where a folder should be, a name too long, a symlink loop) is a
/// usage error saying so — with `details.reason` `store_not_writable` when
/// `writing` was refused —; only what the engine cannot explain is
/// internal.
pub fn store_io(e: &std::io::Error, what: &str, writing: bool) -> Error {
    let errno = e.raw_os_error().unwrap_or(0);
    if is_no_room(errno) {
        return Error::new(Code::StoreFull, format!("{what}: {e}"));
    }
    match errno {
        libc::EROFS | libc::EACCES | libc::EPERM => {
            let why = if errno == libc::EROFS {
                "it is on a read-only file system"
            } else {
                "the system refuses it to this process (its permissions, or a sandbox such as Landlock: is this \
                 engine running as another engine's provider?)"
            };
            let e = Error::usage(format!(
                "{what}: {e}: {why}. Nothing was written; give the engine a store it may write (--store PATH)"
            ));
            match writing {
                true => e.with_details(serde_json::json!({"reason": "store_not_writable"})),
                false => e,
            }
        }
        libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG | libc::EISDIR | libc::ENOENT => {
            Error::usage(format!("{what}: {e}: the path cannot hold a store"))
        }
        _ => Error::new(Code::Internal, format!("{what}: {e}")),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Code;

    /// `ALL` lists every variant: the match below has no wildcard, so a new
    /// variant fails to compile here until it is placed, and the count
    /// catches one left out of the list.
    #[test]
    fn all_lists_every_code_once() {
        let position = |c: Code| match c {
            Code::GoalRequired => 0,
            Code::PlanInvalid => 1,
            Code::PlanCycle => 2,
            Code::UnknownDependency => 3,
            Code::DuplicateTaskRef => 4,
            Code::UnknownProvider => 5,
            Code::InputOutsideWorkspace => 6,
            Code::PlanChanged => 7,
            Code::ExternalEffectUnknown => 8,
            Code::GoalOutcomeUnproven => 9,
            Code::ApprovalRequired => 10,
            Code::ApprovalStale => 11,
            Code::BudgetExhausted => 12,
            Code::RepeatedFailureWithoutNewEvidence => 13,
            Code::ProviderChangeRequiresRevision => 14,
            Code::OperationConflict => 15,
            Code::SettlementInvalid => 16,
            Code::StoreLocked => 17,
            Code::StaleGeneration => 18,
            Code::StoreCorrupt => 19,
            Code::SchemaTooNew => 20,
            Code::StoreFull => 21,
            Code::StaleClaim => 22,
            Code::StoreTampered => 23,
            Code::RequestIdConflict => 24,
            Code::NotPermitted => 25,
            Code::ToolNotAllowed => 26,
            Code::UnknownTool => 27,
            Code::NothingToApprove => 28,
            Code::ToolInventoryUnavailable => 29,
            Code::LooseningNeedsApproval => 30,
            Code::UnsettledOperation => 31,
            Code::AuthorizationRequired => 32,
            Code::OauthRefused => 33,
            Code::OauthMetadataInvalid => 34,
            Code::InputRequired => 35,
            Code::AnswerInvalid => 36,
            Code::NothingToAnswer => 37,
            Code::StoreNotFound => 38,
            Code::SandboxRuleRefused => 39,
            Code::SameRequestUnsettled => 40,
            Code::Held => 41,
            Code::UsageError => 42,
            Code::Internal => 43,
        };
        for (i, &c) in Code::ALL.iter().enumerate() {
            assert_eq!(position(c), i, "{c} out of place in Code::ALL");
        }
        assert_eq!(Code::ALL.len(), 44);
    }
}
