//! The event log in SQLite; triggers refuse any change to a written event.

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use super::sql::{exec, json_text, qrow, rows, Sql};
use crate::clock::now_ms;
use crate::error::Result;
use crate::ids::{GoalId, Revision, Seq};
use crate::store::events::{Event, EventKind, EventRecord, EventsRead, EventsWrite};

const EVENT_COLUMNS: &str = "seq, at_ms, goal_id, revision, task_ref, attempt_id, kind, data";

fn event_from_row(r: &rusqlite::Row) -> rusqlite::Result<EventRecord> {
    let data: String = r.get(7)?;
    Ok(EventRecord {
        seq: r.get(0)?,
        at_ms: r.get(1)?,
        goal_id: r.get(2)?,
        revision: r.get(3)?,
        task_ref: r.get(4)?,
        attempt_id: r.get(5)?,
        kind: r.get(6)?,
        data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
    })
}

impl EventsRead for Sql<'_> {
    fn events_since(&self, after: Seq, limit: i64) -> Result<Vec<EventRecord>> {
        rows(
            self.conn,
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2"),
            params![after, limit],
            event_from_row,
        )
    }

    fn goal_events_since(&self, goal: &GoalId, after: Seq, limit: i64) -> Result<Vec<EventRecord>> {
        rows(
            self.conn,
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"),
            params![goal, after, limit],
            event_from_row,
        )
    }

    fn latest_event(&self, goal: &GoalId, revision: Revision, kind: EventKind) -> Result<Option<EventRecord>> {
        Ok(qrow(
            self.conn,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = ?1 AND revision = ?2 AND kind = ?3 ORDER BY seq DESC LIMIT 1"
            ),
            params![goal, revision, kind],
            event_from_row,
        )
        .optional()?)
    }

    fn events_of_goal(&self, goal: &GoalId, kind: EventKind) -> Result<Vec<EventRecord>> {
        rows(
            self.conn,
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = ?1 AND kind = ?2 ORDER BY seq"),
            params![goal, kind],
            event_from_row,
        )
    }
}

impl EventsWrite for Sql<'_> {
    fn append_event(&mut self, e: &Event) -> Result<Seq> {
        append(self.conn, e)
    }
}

/// Append outside a `Sql` (the lease's own transaction).
pub(super) fn append(conn: &rusqlite::Connection, e: &Event) -> Result<Seq> {
    exec(conn,
        "INSERT INTO events (at_ms, goal_id, revision, task_ref, attempt_id, kind, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![now_ms(), e.goal_id, e.revision, e.task_ref, e.attempt_id, e.kind, json_text("event data", &e.data)?],
    )?;
    Ok(Seq(conn.last_insert_rowid()))
}
