//! What the checks share: the backend seen as rows of cells, the stored
//! plans parsed once, and how a check names what it found.

use std::collections::HashMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::plan::PlanFile;

/// What a failed check names.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The bad entry: `attempt 12 (op_…, try 2, task T1)`, `goal g1`, …
    pub entry: String,
    pub problem: String,
}

pub fn found(entry: impl Into<String>, problem: impl Into<String>) -> Option<Finding> {
    Some(Finding { entry: entry.into(), problem: problem.into() })
}

/// One value of a row, as either backend gives it (a PostgreSQL boolean
/// reads as 0 or 1, like SQLite's).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Cell {
    /// As a finding names it.
    pub fn text(&self) -> String {
        match self {
            Cell::Null => "NULL".into(),
            Cell::Int(i) => i.to_string(),
            Cell::Text(t) => t.clone(),
            Cell::Bytes(b) => format!("<{} bytes>", b.len()),
        }
    }

    pub fn opt_text(&self) -> Option<String> {
        match self {
            Cell::Null => None,
            c => Some(c.text()),
        }
    }

    pub fn int(&self) -> Result<i64> {
        match self {
            Cell::Int(i) => Ok(*i),
            c => Err(Error::internal(format!("a number was expected, the store holds {}", c.text()))),
        }
    }

    pub fn bytes(&self) -> Result<&[u8]> {
        match self {
            Cell::Bytes(b) => Ok(b),
            c => Err(Error::internal(format!("bytes were expected, the store holds {}", c.text()))),
        }
    }
}

/// A backend's own checks: what only it can tell, or not applicable there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Own {
    /// An interrupted rollback journal beside a SQLite file.
    HotJournal,
    /// The database file's own integrity check.
    Integrity,
    /// Every table and the append-only triggers are there.
    Schema,
    /// Every foreign key points at a row.
    ForeignKeys,
    /// Every value has its column's type, and text is UTF-8.
    ColumnTypes,
    /// No attempt written under a newer fence than the store knows.
    Generation,
    /// The act chain, entry by entry, and every act against its entry.
    ActChain,
}

/// A check's answer.
pub enum Verdict {
    /// Ran: the first bad entry, or none.
    Checked(Option<Finding>),
    /// Does not apply to this backend, and why (reported, never as passed).
    NotApplicable(&'static str),
}

/// A store as the checks read it.
pub trait VerifyDb {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    /// Every row of a query (one both backends read alike), as cells.
    fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Cell>>>;
    /// A check only the backend can make.
    fn own(&mut self, check: Own) -> Result<Verdict>;
    /// The first row of a query that returns (entry, problem), if any.
    fn first_row(&mut self, sql: &str) -> Result<Option<Finding>> {
        Ok(self.rows(sql)?.into_iter().next().map(|r| Finding { entry: col(&r, 0).text(), problem: col(&r, 1).text() }))
    }
}

/// What the checks share: the store, and each revision's plan parsed once
/// (by the first check that needs them).
pub struct Ctx<'d> {
    pub db: &'d mut dyn VerifyDb,
    pub plans: HashMap<(String, i64), PlanFile>,
    plans_loaded: bool,
}

impl<'d> Ctx<'d> {
    pub fn new(db: &'d mut dyn VerifyDb) -> Ctx<'d> {
        Ctx { db, plans: HashMap::new(), plans_loaded: false }
    }

    pub fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Cell>>> {
        self.db.rows(sql)
    }

    /// The first row of a query that returns (entry, problem), if any.
    pub fn first_row(&mut self, sql: &str) -> Result<Option<Finding>> {
        self.db.first_row(sql)
    }

    /// Parse the stored plans by (goal, revision), once; a finding names
    /// the first that does not parse.
    pub fn load_plans(&mut self) -> Result<Option<Finding>> {
        if self.plans_loaded {
            return Ok(None);
        }
        for r in self.rows("SELECT goal_id, revision, plan_json FROM revisions ORDER BY goal_id, revision")? {
            let (goal, revision, text) = (col(&r, 0).text(), col(&r, 1).int()?, col(&r, 2).text());
            match serde_json::from_str::<PlanFile>(&text) {
                Ok(p) => {
                    self.plans.insert((goal, revision), p);
                }
                Err(e) => {
                    return Ok(found(
                        format!("goal {goal} revision {revision}"),
                        format!("stored plan does not parse: {e}"),
                    ))
                }
            }
        }
        self.plans_loaded = true;
        Ok(None)
    }
}

/// Column `i` of a row (`NULL` past its end: a query's shape is the
/// check's own, never input's).
pub fn col(row: &[Cell], i: usize) -> &Cell {
    row.get(i).unwrap_or(&Cell::Null)
}

/// How the SQL checks name an attempt `a`.
pub const ATTEMPT: &str =
    "'attempt ' || a.id || ' (' || a.operation_id || ', try ' || a.try_no || ', task ' || a.task_ref || ')'";
