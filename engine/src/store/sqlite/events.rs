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
        Ok(qrow(self.conn, &latest_sql(kind), params![goal, revision], event_from_row).optional()?)
    }

    fn events_of_goal(&self, goal: &GoalId, kind: EventKind) -> Result<Vec<EventRecord>> {
        rows(self.conn, &of_goal_sql(kind), params![goal], event_from_row)
    }
}

// The kinds looked up by goal (`latest_event`, `events_of_goal`: budget
// raises, runs started and finished, revisions recorded) are read once per
// run or per report, never per step. Each has a partial index (schema 12)
// holding only its own rows: the lookup reads those few rows instead of the
// whole log, and no other event costs an index page when it is written.
// The kind is written into the SQL, not bound: SQLite picks a partial
// index only when the statement's own text implies the index's `WHERE`.
// Kinds are the enum's fixed snake_case names (a test holds them to it).

fn latest_sql(kind: EventKind) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = ?1 AND kind = '{}' AND revision = ?2 ORDER BY seq DESC LIMIT 1",
        kind.as_str()
    )
}

fn of_goal_sql(kind: EventKind) -> String {
    format!("SELECT {EVENT_COLUMNS} FROM events WHERE goal_id = ?1 AND kind = '{}' ORDER BY seq", kind.as_str())
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

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    /// The kinds read by goal, each with its partial index (schema 12).
    const LOOKED_UP: [(EventKind, &str); 4] = [
        (EventKind::BudgetRaised, "events_budget_raised"),
        (EventKind::RunStarted, "events_run_started"),
        (EventKind::RunFinished, "events_run_finished"),
        (EventKind::RevisionRecorded, "events_revision_recorded"),
    ];

    fn plan_of(conn: &Connection, sql: &str) -> String {
        let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let values = ["g", "1"];
        let bound = rusqlite::params_from_iter(&values[..st.parameter_count()]);
        let steps: Vec<String> = st.query_map(bound, |r| r.get(3)).unwrap().map(|r| r.unwrap()).collect();
        steps.join("; ")
    }

    #[test]
    fn a_lookup_by_kind_reads_its_partial_index_not_the_log() {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        for (kind, index) in LOOKED_UP {
            for sql in [latest_sql(kind), of_goal_sql(kind)] {
                let plan = plan_of(&conn, &sql);
                assert!(plan.contains(&format!("USING INDEX {index}")), "{sql}: {plan}");
                assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
            }
        }
    }

    #[test]
    fn every_kind_is_safe_to_write_into_sql() {
        for kind in EventKind::ALL {
            assert!(kind.as_str().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{}", kind.as_str());
        }
    }

    #[test]
    fn a_lookup_by_kind_finds_what_a_scan_finds() {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        // Two goals, two revisions, the looked-up kinds among others.
        let kinds = ["run_started", "dispatched", "run_finished", "budget_raised", "revision_recorded", "run_finished"];
        for i in 0..60usize {
            conn.execute(
                "INSERT INTO events (at_ms, goal_id, revision, kind, data) VALUES (?1, ?2, ?3, ?4, '{}')",
                params![i as i64, ["g", "h"][i % 2], 1 + (i / 30) as i64, kinds[i % kinds.len()]],
            )
            .unwrap();
        }
        let seqs = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Vec<i64> {
            let mut st = conn.prepare(sql).unwrap();
            st.query_map(p, |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect()
        };
        for (kind, _) in LOOKED_UP {
            for goal in ["g", "h"] {
                let scan = seqs(
                    "SELECT seq FROM events NOT INDEXED WHERE goal_id = ?1 AND kind = ?2 ORDER BY seq",
                    &[&goal, &kind.as_str()],
                );
                assert_eq!(seqs(&of_goal_sql(kind), &[&goal]), scan, "{} of {goal}", kind.as_str());
                for revision in [1i64, 2] {
                    let scan = seqs(
                        "SELECT seq FROM events NOT INDEXED WHERE goal_id = ?1 AND kind = ?2 AND revision = ?3 ORDER BY seq DESC LIMIT 1",
                        &[&goal, &kind.as_str(), &revision],
                    );
                    assert_eq!(seqs(&latest_sql(kind), &[&goal, &revision]), scan);
                }
            }
        }
    }
}
