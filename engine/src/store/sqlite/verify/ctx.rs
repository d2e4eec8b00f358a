//! What the checks share: the connection, the stored plans parsed once,
//! and how a check names what it found.

use std::collections::HashMap;
use std::path::PathBuf;

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use crate::error::Result;
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

/// What the checks share: the connection, and each revision's plan parsed
/// once (by the first check that needs them).
pub struct Ctx {
    pub path: PathBuf,
    pub conn: Connection,
    pub plans: HashMap<(String, i64), PlanFile>,
    pub plans_loaded: bool,
}

impl Ctx {
    /// Parse the stored plans by (goal, revision), once; a finding names
    /// the first that does not parse.
    pub fn load_plans(&mut self) -> Result<Option<Finding>> {
        if self.plans_loaded {
            return Ok(None);
        }
        let mut stmt =
            self.conn.prepare("SELECT goal_id, revision, plan_json FROM revisions ORDER BY goal_id, revision")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let (goal, revision, text): (String, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
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

/// The first row of a query that returns (entry, problem), if any.
pub fn first_row(conn: &Connection, sql: &str) -> Result<Option<Finding>> {
    Ok(conn.query_row(sql, [], |r| Ok(Finding { entry: r.get(0)?, problem: r.get(1)? })).optional()?)
}

/// How the SQL checks name an attempt `a`.
pub const ATTEMPT: &str =
    "'attempt ' || a.id || ' (' || a.operation_id || ', try ' || a.try_no || ', task ' || a.task_ref || ')'";
