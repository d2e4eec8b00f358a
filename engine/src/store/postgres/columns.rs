//! How the engine's types sit in PostgreSQL columns: ids as `BIGINT` or
//! `TEXT`, states and kinds as their stable words. A word the engine does
//! not know is read as an error, never guessed.

use std::error::Error as StdError;

use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

use crate::evidence::UnknownReason;
use crate::ids::{ApprovalId, AttemptId, EvidenceId, GoalId, OperationId, RequestDigest, Revision, Seq};
use crate::plan::model::Effect;
use crate::state::{AttemptKind, AttemptState, FailureClass, GoalState, SettlementOutcome, TaskState};
use crate::store::events::EventKind;

type Boxed = Box<dyn StdError + Sync + Send>;

macro_rules! word_column {
    ($($name:ty),+) => {$(
        impl<'a> FromSql<'a> for $name {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Boxed> {
                let s = <&str as FromSql>::from_sql(ty, raw)?;
                <$name>::parse(s).ok_or_else(|| format!("unknown {} `{s}`", stringify!($name)).into())
            }
            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Boxed> {
                self.as_str().to_sql(ty, out)
            }
            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }
            to_sql_checked!();
        }
    )+};
}

crate::store::columns::word_columns!(word_column);

macro_rules! number_column {
    ($($name:ident),+) => {$(
        impl<'a> FromSql<'a> for $name {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Boxed> {
                Ok($name(i64::from_sql(ty, raw)?))
            }
            fn accepts(ty: &Type) -> bool {
                <i64 as FromSql>::accepts(ty)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Boxed> {
                self.0.to_sql(ty, out)
            }
            fn accepts(ty: &Type) -> bool {
                <i64 as ToSql>::accepts(ty)
            }
            to_sql_checked!();
        }
    )+};
}

crate::store::columns::number_columns!(number_column);

macro_rules! text_column {
    ($($name:ident),+) => {$(
        impl<'a> FromSql<'a> for $name {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Boxed> {
                Ok($name::new(<&str as FromSql>::from_sql(ty, raw)?))
            }
            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Boxed> {
                self.as_str().to_sql(ty, out)
            }
            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }
            to_sql_checked!();
        }
    )+};
}

crate::store::columns::text_columns!(text_column);
