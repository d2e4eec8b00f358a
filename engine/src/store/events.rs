//! The append-only event log. `seq` is the ledger's own order.

use rusqlite::{params, Connection};
use serde::Serialize;
use serde_json::Value;

use super::now_ms;
use crate::error::Result;

#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub kind: &'a str,
    pub goal_id: Option<&'a str>,
    pub revision: Option<i64>,
    pub task_ref: Option<&'a str>,
    pub attempt_id: Option<i64>,
    pub data: Value,
}

impl<'a> Event<'a> {
    /// An event about the store itself (lease, migration).
    pub fn store(kind: &'a str, data: Value) -> Self {
        Event { kind, goal_id: None, revision: None, task_ref: None, attempt_id: None, data }
    }

    pub fn goal(kind: &'a str, goal_id: &'a str, revision: i64, data: Value) -> Self {
        Event { kind, goal_id: Some(goal_id), revision: Some(revision), task_ref: None, attempt_id: None, data }
    }

    pub fn task(mut self, task_ref: &'a str) -> Self {
        self.task_ref = Some(task_ref);
        self
    }

    pub fn attempt(mut self, attempt_id: i64) -> Self {
        self.attempt_id = Some(attempt_id);
        self
    }
}

pub fn append(conn: &Connection, e: &Event) -> Result<i64> {
    crate::store::exec(conn,
        "INSERT INTO events (at_ms, goal_id, revision, task_ref, attempt_id, kind, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![now_ms(), e.goal_id, e.revision, e.task_ref, e.attempt_id, e.kind, e.data.to_string()],
    )?;
    Ok(conn.last_insert_rowid())
}

#[derive(Debug, Clone, Serialize)]
pub struct EventRow {
    pub seq: i64,
    pub at_ms: i64,
    pub goal_id: Option<String>,
    pub revision: Option<i64>,
    pub task_ref: Option<String>,
    pub attempt_id: Option<i64>,
    pub kind: String,
    pub data: Value,
}

/// Events after `after_seq`, oldest first, at most `limit`.
pub fn since(conn: &Connection, after_seq: i64, limit: i64) -> Result<Vec<EventRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, at_ms, goal_id, revision, task_ref, attempt_id, kind, data FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![after_seq, limit], |r| {
        let data: String = r.get(7)?;
        Ok(EventRow {
            seq: r.get(0)?,
            at_ms: r.get(1)?,
            goal_id: r.get(2)?,
            revision: r.get(3)?,
            task_ref: r.get(4)?,
            attempt_id: r.get(5)?,
            kind: r.get(6)?,
            data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A goal's events of one kind, oldest first (a report reads the reuse
/// decisions of `revision_recorded` and the runs' `run_started`).
pub fn of_goal(conn: &Connection, goal_id: &str, kind: &str) -> Result<Vec<EventRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, at_ms, goal_id, revision, task_ref, attempt_id, kind, data FROM events
         WHERE goal_id = ?1 AND kind = ?2 ORDER BY seq",
    )?;
    let rows = stmt.query_map(params![goal_id, kind], |r| {
        let data: String = r.get(7)?;
        Ok(EventRow {
            seq: r.get(0)?,
            at_ms: r.get(1)?,
            goal_id: r.get(2)?,
            revision: r.get(3)?,
            task_ref: r.get(4)?,
            attempt_id: r.get(5)?,
            kind: r.get(6)?,
            data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
