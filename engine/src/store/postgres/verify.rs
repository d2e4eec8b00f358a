//! `engine verify` on a PostgreSQL store: every shared check
//! (`store::verify`) over one `REPEATABLE READ READ ONLY` transaction (a
//! consistent snapshot, taken beside live workers, writing nothing), and
//! PostgreSQL's answers to the backend's own checks: the schema's tables
//! and enabled append-only triggers, each attempt's generation against
//! its task's claim, the act chain. A SQLite file's checks (its rollback
//! journal, `PRAGMA integrity_check`, `PRAGMA foreign_key_check`) are
//! reported as not applicable, not as passed.

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::client::p;
use super::sql::{get, PgSql};
use super::Pg;
use crate::error::{Error, Result};
use crate::store::verify::{self as checks, found, Cell, Finding, Own, Verdict, Verified, VerifyDb};

/// Run every check on the ledger at `url`.
pub fn verify(url: &str) -> Result<Verified> {
    let pg = Pg::open_ro(url)?.ok_or_else(|| {
        Error::usage(format!("no store at {}: the engine made no tables there", super::redact(url)))
            .at(super::redact(url))
    })?;
    pg.conn.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
    let verified = checks::run(&mut PgVerify { db: pg.reader() }, pg.place());
    let _ = pg.conn.rollback();
    verified
}

struct PgVerify<'c> {
    db: PgSql<'c>,
}

/// The tables of PostgreSQL's alone, beside the ledger's (`checks::tables`).
const OWN_TABLES: &[&str] = &["schema_meta", "workers", "task_claims", "commit_tokens"];
const TRIGGERS: &[(&str, &str)] = &[("events", "events_append_only"), ("act_chain", "act_chain_append_only")];

impl VerifyDb for PgVerify<'_> {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Cell>>> {
        self.db.q(sql, p![])?.iter().map(|r| (0..r.len()).map(|i| cell(r, i)).collect()).collect()
    }

    fn own(&mut self, check: Own) -> Result<Verdict> {
        let found = match check {
            Own::HotJournal | Own::Integrity => {
                return Ok(Verdict::NotApplicable(
                    "a check of a SQLite file; PostgreSQL keeps and checks its own storage (its `amcheck` extension checks its indexes)",
                ))
            }
            Own::ForeignKeys => {
                return Ok(Verdict::NotApplicable(
                    "PostgreSQL checks every foreign key as a row is written; it is not checked again here",
                ))
            }
            Own::ColumnTypes => {
                return Ok(Verdict::NotApplicable(
                    "PostgreSQL's columns are typed and its text is UTF-8: a value of another type is refused as it is written",
                ))
            }
            Own::Schema => self.schema()?,
            Own::Generation => self.first_row(&format!(
                "SELECT {}, 'was written by generation ' || a.generation || ', newer than its task''s claim''s '
                        || COALESCE(CAST(c.generation AS TEXT), 'none')
                 FROM attempts a LEFT JOIN task_claims c ON c.goal_id = a.goal_id AND c.task_ref = a.task_ref
                 WHERE a.generation > COALESCE(c.generation, 0)
                 ORDER BY a.id LIMIT 1",
                checks::ATTEMPT
            ))?,
            Own::ActChain => super::chain::first_problem(&self.db)?.and_then(|(entry, problem)| found(entry, problem)),
        };
        Ok(Verdict::Checked(found))
    }
}

impl PgVerify<'_> {
    /// Every table, and the append-only triggers present and enabled (the
    /// schema version was checked when the store was opened).
    fn schema(&mut self) -> Result<Option<Finding>> {
        for t in crate::store::verify::tables(OWN_TABLES) {
            let present: Option<bool> = self.db.v("SELECT to_regclass($1) IS NOT NULL", p![t.to_string()])?;
            if present != Some(true) {
                return Ok(found(format!("table {t}"), "is missing"));
            }
        }
        for (table, trigger) in TRIGGERS {
            let enabled: Option<bool> = self.db.v(
                "SELECT EXISTS(SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2 AND tgenabled <> 'D')",
                p![table.to_string(), trigger.to_string()],
            )?;
            if enabled != Some(true) {
                return Ok(found(
                    format!("trigger {trigger}"),
                    "is missing or disabled: the event log or the act chain is no longer append-only",
                ));
            }
        }
        Ok(None)
    }
}

/// One column as a cell (a boolean as 0 or 1, as SQLite holds it).
fn cell(r: &Row, i: usize) -> Result<Cell> {
    let Some(column) = r.columns().get(i) else { return Ok(Cell::Null) };
    let t = column.type_();
    let cell = if *t == Type::INT8 {
        get::<Option<i64>>(r, i)?.map(Cell::Int)
    } else if *t == Type::INT4 {
        get::<Option<i32>>(r, i)?.map(|v| Cell::Int(v.into()))
    } else if *t == Type::INT2 {
        get::<Option<i16>>(r, i)?.map(|v| Cell::Int(v.into()))
    } else if *t == Type::BOOL {
        get::<Option<bool>>(r, i)?.map(|v| Cell::Int(v.into()))
    } else if *t == Type::TEXT || *t == Type::VARCHAR || *t == Type::NAME || *t == Type::BPCHAR {
        get::<Option<String>>(r, i)?.map(Cell::Text)
    } else if *t == Type::BYTEA {
        get::<Option<Vec<u8>>>(r, i)?.map(Cell::Bytes)
    } else {
        return Err(Error::internal(format!("verify reads no column of type {t} (column {})", column.name())));
    };
    Ok(cell.unwrap_or(Cell::Null))
}
