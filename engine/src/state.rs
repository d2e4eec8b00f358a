//! The states of SPEC.md, as types. Each `as_str` is the stable word stored
//! in the ledger and printed to users.

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
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
                let s = v.as_str()?;
                $name::parse(s).ok_or_else(|| rusqlite::types::FromSqlError::Other(
                    format!("unknown {} `{s}`", stringify!($name)).into()))
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(self.as_str().into())
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
    }
);

impl AttemptState {
    /// Between intent and receipt: the outcome is in doubt if the engine
    /// stopped here.
    pub fn in_doubt(self) -> bool {
        matches!(self, AttemptState::IntentRecorded | AttemptState::Dispatched)
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
        }
    }
}
