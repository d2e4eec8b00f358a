//! Every completion of a revision at once (`LedgerRead::completions`): the
//! reuse decision of a re-run weighs every task, and five reads per task
//! (its row, its completed attempt, that attempt, its checkpoint, its
//! validations) were most of a no-op re-run's ledger time. Here: the task
//! rows, the completed attempts, their attempts' few columns, their
//! checkpoints and the validations of each revision they belong to — a
//! handful of queries per revision, whatever the number of tasks. The
//! maps in between hash with foldhash (a few thousand lookups a pass;
//! std's SipHash was a tenth of this read's instructions).

use std::collections::{BTreeSet, HashMap};

use foldhash::HashMap as FastMap;

use rusqlite::params;
use serde_json::Value;

use super::sql::{one_of, rows, Sql};
use crate::checkpoint::RecordedCheckpoint;
use crate::error::{Error, Result};
use crate::ids::{AttemptId, GoalId, Revision};
use crate::state::{AttemptState, TaskState};
use crate::store::evidence::{CheckResultRecord, CheckScope, CompletionRecord};
use crate::store::goals::reused_from_attempt;
use crate::store::LedgerRead;

const DONE: [AttemptState; 2] = [AttemptState::Succeeded, AttemptState::SettledOk];

/// The few columns of an attempt a completion needs.
struct Done {
    revision: Revision,
    state: AttemptState,
    checkpoint: Option<String>,
    reusable: Option<bool>,
}

/// One pass over the index `attempts_by_task` in task order: SQLite takes
/// a bare column (`state`) from the row whose `MAX(id)` it is.
pub(super) fn completed_sql() -> String {
    let done = one_of("a.state", &DONE, AttemptState::as_str);
    format!(
        "SELECT a.task_ref, MAX(a.id), a.state FROM attempts a WHERE a.goal_id = ?1 AND a.revision = ?2 AND {done}
           GROUP BY a.task_ref"
    )
}

/// `completed_attempt` for every task of the revision, with each
/// attempt's state: one query (the latest done attempt of each task).
pub(super) fn completed_attempts(
    sql: &Sql,
    goal: &GoalId,
    revision: Revision,
) -> Result<FastMap<String, (AttemptId, AttemptState)>> {
    let found = rows(sql.conn, &completed_sql(), params![goal, revision], |r| {
        Ok((r.get::<_, String>(0)?, (r.get::<_, AttemptId>(1)?, r.get::<_, AttemptState>(2)?)))
    })?;
    Ok(found.into_iter().collect())
}

/// `completion` for every task of the revision that has one.
pub(super) fn completions(sql: &Sql, goal: &GoalId, revision: Revision) -> Result<HashMap<String, CompletionRecord>> {
    let completed = completed_attempts(sql, goal, revision)?;
    // Each task's attempt, as `LedgerRead::completion` picks it.
    let mut picked = Vec::new();
    for task in task_rows(sql, goal, revision)? {
        let attempt_id = match task.state {
            TaskState::Succeeded => completed.get(&task.task_ref).map(|&(id, _)| id),
            TaskState::Reused => task.detail.as_ref().and_then(reused_from_attempt).map(AttemptId),
            _ => None,
        };
        if let Some(id) = attempt_id {
            picked.push((task, id));
        }
    }
    let attempts = attempts_by_id(sql, picked.iter().map(|(_, id)| *id))?;
    let digests: BTreeSet<&str> = attempts.values().filter_map(|a| a.checkpoint.as_deref()).collect();
    let mut checkpoints = checkpoints_by_digest(sql, &digests)?;
    // How many picked attempts name each checkpoint: the last to take one
    // moves it out instead of copying it.
    let mut uses: FastMap<&str, usize> = FastMap::default();
    for a in picked.iter().filter_map(|(_, id)| attempts.get(id)) {
        if let Some(d) = a.checkpoint.as_deref() {
            *uses.entry(d).or_default() += 1;
        }
    }
    let revisions: BTreeSet<Revision> = attempts.values().map(|a| a.revision).collect();
    let mut validations = FastMap::default();
    for r in revisions {
        validations.insert(r, validations_of_revision(sql, goal, r)?);
    }
    let mut out = HashMap::with_capacity(picked.len());
    for (task, attempt_id) in picked {
        // As `completion` reading it alone: an attempt a task names but
        // the ledger lacks is an error, never "no completion".
        let Some(a) = attempts.get(&attempt_id) else {
            return Err(Error::internal(format!(
                "store error: attempt {attempt_id} of task {} is not in the ledger",
                task.task_ref
            )));
        };
        if !DONE.contains(&a.state) {
            continue;
        }
        let checkpoint = a.checkpoint.as_deref().and_then(|d| {
            let left = uses.get_mut(d)?;
            *left -= 1;
            if *left == 0 {
                checkpoints.remove(d)
            } else {
                checkpoints.get(d).cloned()
            }
        });
        let of_task = validations.get(&a.revision).and_then(|v| v.get(&task.task_ref)).cloned().unwrap_or_default();
        let record = CompletionRecord {
            revision: a.revision,
            attempt_id,
            meaning: task.meaning,
            dependencies: task.dependencies,
            checkpoint,
            reusable: a.reusable.unwrap_or(false),
            validations: of_task,
        };
        out.insert(task.task_ref, record);
    }
    Ok(out)
}

/// The columns of a task row a completion needs.
struct TaskRow {
    task_ref: String,
    state: TaskState,
    meaning: String,
    dependencies: String,
    /// Only a reused task's (it names the attempt its result is from):
    /// no other row's JSON is parsed.
    detail: Option<Value>,
}

/// The task rows of the revision, as `GoalsRead::tasks` reads them but
/// only the columns a completion needs.
fn task_rows(sql: &Sql, goal: &GoalId, revision: Revision) -> Result<Vec<TaskRow>> {
    rows(
        sql.conn,
        "SELECT task_ref, state, meaning, dependencies, CASE WHEN state = ?3 THEN detail END FROM tasks
         WHERE goal_id = ?1 AND revision = ?2",
        params![goal, revision, TaskState::Reused.as_str()],
        |r| {
            let detail: Option<String> = r.get(4)?;
            Ok(TaskRow {
                task_ref: r.get(0)?,
                state: r.get(1)?,
                meaning: r.get(2)?,
                dependencies: r.get(3)?,
                detail: detail.map(|d| serde_json::from_str(&d).unwrap_or(Value::Null)),
            })
        },
    )
}

/// The attempts `ids` name (one query: the ids as a JSON array).
fn attempts_by_id(sql: &Sql, ids: impl Iterator<Item = AttemptId>) -> Result<FastMap<AttemptId, Done>> {
    let ids: Vec<i64> = ids.map(|id| id.0).collect();
    let list = serde_json::Value::from(ids).to_string();
    let found = rows(
        sql.conn,
        "SELECT id, revision, state, checkpoint, reusable FROM attempts WHERE id IN (SELECT value FROM json_each(?1))",
        [list],
        |r| {
            let done = Done { revision: r.get(1)?, state: r.get(2)?, checkpoint: r.get(3)?, reusable: r.get(4)? };
            Ok((r.get::<_, AttemptId>(0)?, done))
        },
    )?;
    Ok(found.into_iter().collect())
}

/// The checkpoints of `digests` (one query). One that does not parse is
/// absent, as `checkpoint` has it; one that does is checked, not parsed
/// (reuse compares its digest, and reads its files only on a difference).
fn checkpoints_by_digest(sql: &Sql, digests: &BTreeSet<&str>) -> Result<FastMap<String, RecordedCheckpoint>> {
    let list = serde_json::Value::from(digests.iter().copied().collect::<Vec<&str>>()).to_string();
    let found = rows(
        sql.conn,
        "SELECT digest, data FROM checkpoints WHERE digest IN (SELECT value FROM json_each(?1))",
        [list],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )?;
    Ok(found.into_iter().filter_map(|(d, data)| Some((d, RecordedCheckpoint::from_json(data)?))).collect())
}

/// The latest result of each validation of each task of `revision`, by
/// task ref, ordered by check id (as `latest_check_results` gives them).
fn validations_of_revision(
    sql: &Sql,
    goal: &GoalId,
    revision: Revision,
) -> Result<FastMap<String, Vec<CheckResultRecord>>> {
    let found = rows(
        sql.conn,
        "SELECT c.task_ref, c.id, c.check_id, c.passed, c.attempt_id, c.checkpoint, c.evidence_id FROM check_results c
         WHERE c.goal_id = ?1 AND c.revision = ?2 AND c.scope = ?3 AND c.task_ref IS NOT NULL
           AND c.id = (SELECT MAX(id) FROM check_results d WHERE d.goal_id = c.goal_id AND d.revision = c.revision
                       AND d.scope = c.scope AND d.task_ref IS c.task_ref AND d.check_id = c.check_id)
         ORDER BY c.task_ref, c.check_id",
        params![goal, revision, CheckScope::Validation.as_str()],
        |r| {
            let record = CheckResultRecord {
                id: r.get(1)?,
                check_id: r.get(2)?,
                passed: r.get(3)?,
                attempt_id: r.get(4)?,
                checkpoint: r.get(5)?,
                evidence_id: r.get(6)?,
            };
            Ok((r.get::<_, String>(0)?, record))
        },
    )?;
    let mut out: FastMap<String, Vec<CheckResultRecord>> = FastMap::default();
    for (task_ref, record) in found {
        out.entry(task_ref).or_default().push(record);
    }
    Ok(out)
}

impl LedgerRead for Sql<'_> {
    fn completed_attempts(
        &self,
        goal: &GoalId,
        revision: Revision,
    ) -> Result<HashMap<String, (AttemptId, AttemptState)>> {
        Ok(completed_attempts(self, goal, revision)?.into_iter().collect())
    }

    fn completions(&self, goal: &GoalId, revision: Revision) -> Result<HashMap<String, CompletionRecord>> {
        completions(self, goal, revision)
    }
}
