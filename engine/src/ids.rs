//! Identities as types, so one cannot stand in for another: an attempt id
//! is not a revision, a request digest is not an operation id. Each
//! serializes as the bare value it wraps (`#[serde(transparent)]`), so the
//! ledger and `--json` see exactly what they saw before these types.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! text_id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Self {
                $name(value.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
    };
}

macro_rules! number_id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl $name {
            pub fn get(self) -> i64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

text_id!(
    /// A goal's id, as the plan file names it.
    GoalId
);
text_id!(
    /// `op_` + 24 hex digits: one logical operation (goal, task, request),
    /// stable across its tries.
    OperationId
);
text_id!(
    /// The digest of the exact request sent to a provider.
    RequestDigest
);
text_id!(
    /// A request known by its content (`plan::digests::request_fingerprint`):
    /// where it goes and what it carries, whatever task or goal sends it.
    RequestFingerprint
);
number_id!(
    /// A plan revision of a goal: 1, 2, ...
    Revision
);
number_id!(
    /// An attempt's row id: born with its intent.
    AttemptId
);
number_id!(
    /// A piece of evidence's row id.
    EvidenceId
);
number_id!(
    /// A person's approval's row id.
    ApprovalId
);
number_id!(
    /// An event's place in the ledger's own order.
    Seq
);

impl Revision {
    pub const FIRST: Revision = Revision(1);

    pub fn next(self) -> Revision {
        Revision(self.0 + 1)
    }
}
