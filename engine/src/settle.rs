//! `engine settle`: a person's settlement of an operation whose effect the
//! engine could not establish. Records who, when, the note and optional
//! evidence; runs nothing. `ok` lets the task go on to its validations at
//! the next `engine run`; `not_run` makes the operation retryable with
//! `engine retry`.

use std::path::Path;

use rusqlite::params;
use serde::Serialize;
use serde_json::json;

use crate::error::{Code, Error, Result};
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::events::{self, Event};
use crate::store::{blobs, ledger, now_ms, Durability, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    #[value(name = "ok")]
    Ok,
    #[value(name = "not_run")]
    NotRun,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::NotRun => "not_run",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Settled {
    pub operation_id: String,
    pub attempt_id: i64,
    pub task_ref: String,
    pub goal_id: String,
    pub outcome: Outcome,
    pub actor: String,
    pub next: String,
}

/// Evidence files are bounded like captured output.
pub const EVIDENCE_BYTES_MAX: u64 = 16 * 1024 * 1024;

pub fn settle(
    store: &mut Store,
    operation_id: &str,
    outcome: Outcome,
    note: &str,
    actor: &str,
    evidence: Option<&Path>,
) -> Result<Settled> {
    if note.trim().is_empty() {
        return Err(Error::new(
            Code::SettlementInvalid,
            "a settlement needs a note (--note TEXT): say what you checked",
        ));
    }
    let conn = store.conn();
    // The unknown try of the operation if there is one (a later try may
    // exist beside it), else its latest, for the refusal to name.
    let attempt = conn
        .query_row(
            "SELECT id FROM attempts WHERE operation_id = ?1 ORDER BY state = 'effect_unknown' DESC, id DESC LIMIT 1",
            [operation_id],
            |r| r.get::<_, i64>(0),
        )
        .map_err(|_| {
            Error::new(Code::SettlementInvalid, format!("no operation {operation_id} in this store"))
                .at(operation_id.to_string())
        })?;
    let a = ledger::attempt(conn, attempt)?;
    if a.state != AttemptState::EffectUnknown {
        return Err(Error::new(
            Code::SettlementInvalid,
            format!(
                "operation {operation_id} try {} is `{}`, not `effect_unknown`: only an unknown outcome can be settled",
                a.try_no, a.state
            ),
        )
        .at(operation_id.to_string()));
    }
    let evidence_bytes = match evidence {
        Some(path) => {
            let meta = std::fs::metadata(path)
                .map_err(|e| Error::usage(format!("cannot read evidence file: {e}")).at(path.display().to_string()))?;
            if meta.len() > EVIDENCE_BYTES_MAX {
                return Err(Error::usage(format!(
                    "evidence file is {} bytes; the limit is {EVIDENCE_BYTES_MAX}",
                    meta.len()
                ))
                .at(path.display().to_string()));
            }
            Some(std::fs::read(path)?)
        }
        None => None,
    };
    let active: i64 = conn.query_row("SELECT active_revision FROM goals WHERE id = ?1", [&a.goal_id], |r| r.get(0))?;
    let superseded = a.revision != active;
    let (to, task_state, next) = match outcome {
        // An old revision's task keeps its state: nothing judges it any more.
        _ if superseded => (
            if outcome == Outcome::Ok { AttemptState::SettledOk } else { AttemptState::SettledNotRun },
            ledger::tasks_one(conn, &a.goal_id, a.revision, &a.task_ref)?.map_or(TaskState::EffectUnknown, |t| t.state),
            format!("its revision {} is no longer active (now {active}): nothing more runs for it", a.revision),
        ),
        Outcome::Ok => (
            AttemptState::SettledOk,
            TaskState::Running,
            "the next `engine run` runs the task's validations".to_string(),
        ),
        Outcome::NotRun => {
            (AttemptState::SettledNotRun, TaskState::Pending, format!("re-send with `engine retry {operation_id}`"))
        }
    };
    store.write(Durability::Full, |tx| {
        let blob = evidence_bytes.as_deref().map(|b| blobs::put(tx, b)).transpose()?;
        tx.execute(
            "INSERT INTO settlements (attempt_id, operation_id, outcome, actor, note, evidence_blob, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![a.id, operation_id, outcome.as_str(), actor, note, blob, now_ms()],
        )?;
        ledger::transition(tx, a.id, &[AttemptState::EffectUnknown], to)?;
        ledger::set_task_state(tx, &a.goal_id, a.revision, &a.task_ref, task_state,
            &json!({"attempt_id": a.id, "settled": outcome.as_str(), "by": actor, "next": next}))?;
        let seq = events::append(tx, &Event::goal("settled", &a.goal_id, a.revision, json!({
            "operation_id": operation_id, "try": a.try_no, "outcome": outcome.as_str(), "actor": actor, "note": note,
            "evidence_blob": blob, "verified_by_engine": false,
        })).task(&a.task_ref).attempt(a.id))?;
        let unknown_left: i64 = tx.query_row(
            "SELECT COUNT(*) FROM attempts WHERE goal_id = ?1 AND state = 'effect_unknown'", [&a.goal_id], |r| r.get(0))?;
        if unknown_left == 0 {
            ledger::set_goal_state(tx, &a.goal_id, GoalState::Open, seq)?;
        }
        Ok(())
    })?;
    Ok(Settled {
        operation_id: operation_id.into(),
        attempt_id: a.id,
        task_ref: a.task_ref,
        goal_id: a.goal_id,
        outcome,
        actor: actor.into(),
        next,
    })
}
