//! The engine's types that either store keeps in a column, listed once:
//! each store makes its own column traits for exactly these (as a stable
//! word, a number, or text), so the two cannot come to differ.

/// `$m!` over the types kept as their stable words (`parse`, `as_str`).
macro_rules! word_columns {
    ($m:ident) => {
        $m!(
            AttemptState,
            TaskState,
            GoalState,
            FailureClass,
            AttemptKind,
            SettlementOutcome,
            EventKind,
            UnknownReason,
            Effect
        );
    };
}

/// `$m!` over the ids kept as numbers (`Name(i64)`).
macro_rules! number_columns {
    ($m:ident) => {
        $m!(Revision, AttemptId, EvidenceId, ApprovalId, Seq);
    };
}

/// `$m!` over the ids kept as text (`new`, `as_str`).
macro_rules! text_columns {
    ($m:ident) => {
        $m!(GoalId, OperationId, RequestDigest);
    };
}

pub(crate) use {number_columns, text_columns, word_columns};
