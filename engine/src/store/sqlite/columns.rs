//! How the engine's types sit in SQLite columns: ids as integers or text,
//! states and kinds as their stable words. A word the engine does not know
//! is read as an error, never guessed.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::evidence::UnknownReason;
use crate::ids::{ApprovalId, AttemptId, EvidenceId, GoalId, OperationId, RequestDigest, Revision, Seq};
use crate::plan::model::Effect;
use crate::state::{AttemptKind, AttemptState, FailureClass, GoalState, SettlementOutcome, TaskState};
use crate::store::events::EventKind;

macro_rules! word_column {
    ($($name:ty),+) => {$(
        impl FromSql for $name {
            fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
                let s = v.as_str()?;
                <$name>::parse(s).ok_or_else(|| {
                    FromSqlError::Other(format!("unknown {} `{s}`", stringify!($name)).into())
                })
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }
    )+};
}

crate::store::columns::word_columns!(word_column);

macro_rules! number_column {
    ($($name:ident),+) => {$(
        impl FromSql for $name {
            fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
                Ok($name(v.as_i64()?))
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(self.0.into())
            }
        }
    )+};
}

crate::store::columns::number_columns!(number_column);

macro_rules! text_column {
    ($($name:ident),+) => {$(
        impl FromSql for $name {
            fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
                Ok($name::new(v.as_str()?))
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }
    )+};
}

crate::store::columns::text_columns!(text_column);
