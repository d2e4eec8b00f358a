//! The event log in PostgreSQL; a trigger refuses any change to a written
//! event. An event about a task is a write about it: fenced like one.

use tokio_postgres::Row;

use super::client::p;
use super::sql::{get, json, PgSql};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::ids::{GoalId, Revision, Seq};
use crate::store::events::{Event, EventKind, EventRecord, EventsRead, EventsWrite};

const EVENT_COLUMNS: &str = "seq, at_ms, goal_id, revision, task_ref, attempt_id, kind, data";

pub(super) fn event_from_row(r: &Row) -> Result<EventRecord> {
    Ok(EventRecord {
        seq: get(r, 0)?,
        at_ms: get(r, 1)?,
        goal_id: get(r, 2)?,
        revision: get(r, 3)?,
        task_ref: get(r, 4)?,
        attempt_id: get(r, 5)?,
        kind: get(r, 6)?,
        data: json(get(r, 7)?),
    })
}

impl EventsRead for PgSql<'_> {
    fn events_since(&self, after: Seq, limit: i64) -> Result<Vec<EventRecord>> {
        let rows = self
            .q(&format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"), p![after, limit])?;
        rows.iter().map(event_from_row).collect()
    }

    fn goal_events_since(&self, goal: &GoalId, after: Seq, limit: i64) -> Result<Vec<EventRecord>> {
        let rows = self.q(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"),
            p![goal.clone(), after, limit],
        )?;
        rows.iter().map(event_from_row).collect()
    }

    fn latest_event(&self, goal: &GoalId, revision: Revision, kind: EventKind) -> Result<Option<EventRecord>> {
        self.q1(
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = $1 AND revision = $2 AND kind = $3 ORDER BY seq DESC LIMIT 1"
            ),
            p![goal.clone(), revision, kind],
        )?
        .map(|r| event_from_row(&r))
        .transpose()
    }

    fn events_of_goal(&self, goal: &GoalId, kind: EventKind) -> Result<Vec<EventRecord>> {
        let rows = self.q(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = $1 AND kind = $2 ORDER BY seq"),
            p![goal.clone(), kind],
        )?;
        rows.iter().map(event_from_row).collect()
    }
}

impl EventsWrite for PgSql<'_> {
    fn append_event(&mut self, e: &Event) -> Result<Seq> {
        if let (Some(goal), Some(task_ref)) = (e.goal_id, e.task_ref) {
            self.fence_task(goal, task_ref)?;
        }
        self.v(
            "INSERT INTO events (at_ms, goal_id, revision, task_ref, attempt_id, kind, data) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq",
            p![
                now_ms(),
                e.goal_id.cloned(),
                e.revision,
                e.task_ref.map(str::to_string),
                e.attempt_id,
                e.kind,
                e.data.to_string()
            ],
        )?
        .ok_or_else(|| Error::internal("an insert returned no sequence number"))
    }
}
