//! The states of SPEC.md, as types, and the other closed vocabularies of the
//! ledger (attempt kinds, settlement outcomes). Each `as_str` is the stable
//! word stored in the ledger and printed to users. Which state may follow
//! which is `transitions`: one table that every state change goes through.

mod transitions;

pub use transitions::{Lifecycle, Refused};

use serde::{Deserialize, Serialize};

macro_rules! state_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some($name::$variant),)+ _ => None }
            }
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

    };
}

state_enum!(
    /// An attempt's state; see SPEC.md for exactly what each claims.
    AttemptState {
        IntentRecorded = "intent_recorded",
        Dispatched = "dispatched",
        ReceiptRecorded = "receipt_recorded",
        Succeeded = "succeeded",
        Failed = "failed",
        EffectUnknown = "effect_unknown",
        SettledOk = "settled_ok",
        SettledNotRun = "settled_not_run",
        /// Left without a receipt by a stopped engine and superseded by a new
        /// try, which is safe only because the effect is `none` (or the task
        /// is idempotent). Claims nothing about whether it ran.
        Abandoned = "abandoned",
        /// A person stopped the run (SIGINT, SIGTERM, SIGHUP) while this
        /// call was in flight, and its effect is `none` or `local`, or it
        /// was never handed over: its process group was ended. Not a
        /// failure; the task runs again on the next plain run.
        Cancelled = "cancelled",
        /// The provider's answer was a question for a person (an MCP
        /// server's `input_required` or elicitation), recorded with the
        /// receipt. Final: the call carrying a person's answer is a new
        /// attempt. Claims the server asked; not that it did nothing else.
        InputAsked = "input_asked",
    }
);

state_enum!(
    TaskState {
        Pending = "pending",
        Ready = "ready",
        Running = "running",
        Succeeded = "succeeded",
        Reused = "reused",
        Failed = "failed",
        Blocked = "blocked",
        EffectUnknown = "effect_unknown",
        AwaitingApproval = "awaiting_approval",
        /// A person stopped the run while the task was in flight. Not a
        /// failure; a plain run looks at it afresh.
        Cancelled = "cancelled",
        /// Its provider's server asked a person for input (MCP
        /// elicitation), recorded with the question; only `engine answer`
        /// moves it on (to `pending`: the next run sends the answer).
        AwaitingInput = "awaiting_input",
    }
);

state_enum!(
    GoalState {
        Open = "open",
        Satisfied = "satisfied",
        Failed = "failed",
        NeedsSettlement = "needs_settlement",
    }
);

state_enum!(
    /// Failure classes of SPEC.md.
    FailureClass {
        ValidationFailed = "validation_failed",
        ProviderRejected = "provider_rejected",
        ProviderUnavailable = "provider_unavailable",
        Timeout = "timeout",
        Killed = "killed",
        Environment = "environment",
        EffectUnknown = "effect_unknown",
        Unclassified = "unclassified",
        /// A goal constraint the engine checks was broken: a protected path
        /// changed, or a constraint's check failed.
        ConstraintViolated = "constraint_violated",
    }
);

state_enum!(
    /// Why an attempt was made: a plain run, a person's repair or retry.
    AttemptKind {
        Run = "run",
        Repair = "repair",
        Retry = "retry",
        /// A person's `engine rerun` of a succeeded task: a new operation.
        Rerun = "rerun",
    }
);

state_enum!(
    /// A person's settlement of an unknown outcome.
    SettlementOutcome {
        Ok = "ok",
        NotRun = "not_run",
    }
);

impl AttemptState {
    /// Between intent and receipt: the outcome is in doubt if the engine
    /// stopped here.
    pub fn in_doubt(self) -> bool {
        matches!(self, AttemptState::IntentRecorded | AttemptState::Dispatched)
    }

    /// A person settled its unknown outcome (`settled_ok`, `settled_not_run`).
    pub fn is_settled(self) -> bool {
        matches!(self, AttemptState::SettledOk | AttemptState::SettledNotRun)
    }
}

impl TaskState {
    /// Done for the purpose of its dependents.
    pub fn is_complete(self) -> bool {
        matches!(self, TaskState::Succeeded | TaskState::Reused)
    }
}

impl FailureClass {
    /// The next step SPEC.md offers for this class.
    pub fn next_step(self) -> &'static str {
        match self {
            FailureClass::ValidationFailed => "repair",
            FailureClass::ProviderRejected => "revise",
            FailureClass::ProviderUnavailable => "retry",
            FailureClass::Timeout => "retry or settle",
            FailureClass::Killed => "retry or repair",
            FailureClass::Environment => "fix the environment, then retry",
            FailureClass::EffectUnknown => "settle",
            FailureClass::Unclassified => "a person decides",
            FailureClass::ConstraintViolated => "repair",
        }
    }
}

/// A signal that stops a run, and the exit code it ends with (128 + its
/// number, as a shell reports a process ended by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopSignal {
    #[serde(rename = "SIGINT")]
    Interrupt,
    #[serde(rename = "SIGTERM")]
    Terminate,
    #[serde(rename = "SIGHUP")]
    Hangup,
}

impl StopSignal {
    pub const ALL: [StopSignal; 3] = [StopSignal::Interrupt, StopSignal::Terminate, StopSignal::Hangup];

    pub fn number(self) -> i32 {
        match self {
            StopSignal::Interrupt => libc::SIGINT,
            StopSignal::Terminate => libc::SIGTERM,
            StopSignal::Hangup => libc::SIGHUP,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }

    /// 130, 143, 129.
    pub fn exit_code(self) -> i32 {
        128 + self.number()
    }

    pub fn of_number(n: i32) -> Option<StopSignal> {
        StopSignal::ALL.into_iter().find(|s| s.number() == n)
    }
}

impl std::fmt::Display for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How durable a commit must be. `Full` survives power loss (intents,
/// receipts, settlements, approvals); `Normal` may lose the last commits on
/// power loss (never on a process crash): bookkeeping the engine can
/// re-derive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Normal,
    Full,
}

#[cfg(test)]
mod stop_signal_tests {
    use super::StopSignal;

    #[test]
    fn exit_codes_are_128_plus_the_signal() {
        let codes: Vec<(&str, i32)> = StopSignal::ALL.iter().map(|s| (s.name(), s.exit_code())).collect();
        assert_eq!(codes, vec![("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)]);
        assert_eq!(serde_json::to_value(StopSignal::Hangup).unwrap(), "SIGHUP");
        assert_eq!(StopSignal::of_number(libc::SIGUSR1), None);
    }
}
