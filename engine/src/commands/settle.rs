//! `engine settle`: a person's settlement of an operation whose effect the
//! engine could not establish. Records who, when, the note and optional
//! evidence; runs nothing. `ok` lets the task go on to its validations at
//! the next `engine run`; `not_run` makes the operation retryable with
//! `engine retry`.

use std::path::Path;

use serde::Serialize;
use serde_json::json;

use crate::decide::advice::{self, Latest};
use crate::decide::people::Act;
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, GoalId, OperationId};
use crate::limits::EVIDENCE_BYTES_MAX;
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::acts::{NewRequestId, NewSettlement, Person};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LeaseGuard, LedgerRead, LedgerTx};

pub use crate::state::SettlementOutcome as Outcome;

#[derive(Debug, Clone, Serialize)]
pub struct Settled {
    pub operation_id: OperationId,
    pub attempt_id: AttemptId,
    /// The attempt's number among its task's attempts (`engine explain`'s).
    pub attempt: i64,
    pub task_ref: String,
    pub goal_id: GoalId,
    pub outcome: Outcome,
    pub person: Person,
    pub next: String,
}

/// May `person` settle `operation_id` (`NOT_PERMITTED` otherwise)?
pub fn permitted(read: &dyn LedgerRead, operation_id: &OperationId, person: &Person) -> Result<()> {
    let a = target(read, operation_id)?;
    super::permitted(read, &a.goal_id, Act::Settle, person)
}

/// What a person says in `engine settle`.
pub struct Said<'a> {
    pub outcome: Outcome,
    pub note: &'a str,
    pub person: &'a Person,
    pub evidence: Option<&'a Path>,
}

pub fn settle(
    ledger: &mut LeaseGuard,
    operation_id: &OperationId,
    said: Said,
    request_id: Option<&NewRequestId>,
) -> Result<Settled> {
    let Said { outcome, note, person, evidence } = said;
    if note.trim().is_empty() {
        return Err(Error::new(
            Code::SettlementInvalid,
            "a settlement needs a note (--note TEXT): say what you checked",
        ));
    }
    let a = target(&*ledger.read(), operation_id)?;
    let evidence_bytes = evidence.map(read_evidence).transpose()?;
    let read = ledger.read();
    let active =
        read.goal(&a.goal_id)?.ok_or_else(|| Error::internal(format!("goal {} vanished", a.goal_id)))?.active_revision;
    let (to, task_state, next) = if a.revision != active {
        // An old revision's task keeps its state: nothing judges it any more.
        let kept = read.task(&a.goal_id, a.revision, &a.task_ref)?.map_or(TaskState::EffectUnknown, |t| t.state);
        let next = format!("its revision {} is no longer active (now {active}): nothing more runs for it", a.revision);
        (settled(outcome), kept, next)
    } else {
        // The command that goes on, as `decide::advice` names it.
        let g = read.goal_or_latest(Some(&a.goal_id))?;
        let place = super::advice::Place::of(&*read, &g)?;
        let (state, task_state) = match outcome {
            Outcome::Ok => (AttemptState::SettledOk, TaskState::Running),
            Outcome::NotRun => (AttemptState::SettledNotRun, TaskState::Pending),
        };
        let latest = Latest { operation_id: operation_id.as_str(), state, class: None, rule: None };
        let task = advice::Task {
            task_ref: &a.task_ref,
            state: task_state,
            latest: Some(latest),
            awaiting: None,
            same_request: None,
        };
        let ways = advice::of_task(&task, &place.scope());
        let command = ways.first().map_or(String::new(), |w| w.command.clone());
        let next = match outcome {
            Outcome::Ok => format!("`{command}` runs the task's validations"),
            Outcome::NotRun => format!("re-send with `{command}`"),
        };
        (settled(outcome), task_state, next)
    };
    let act = Recorded { operation_id, outcome, person, note, evidence: evidence_bytes.as_deref() };
    ledger.write(Durability::Full, |tx| {
        record(tx, &a, &act, to, task_state, &next)?;
        match request_id {
            Some(r) => tx.insert_request_id(r),
            None => Ok(()),
        }
    })?;
    let attempt = ledger.read().attempt_number(a.id)?;
    Ok(Settled {
        operation_id: operation_id.clone(),
        attempt_id: a.id,
        attempt,
        task_ref: a.task_ref,
        goal_id: a.goal_id,
        outcome,
        person: person.clone(),
        next,
    })
}

/// The attempt a settlement of `operation_id` settles: its latest try,
/// which must be an unknown outcome.
fn target(read: &dyn LedgerRead, operation_id: &OperationId) -> Result<AttemptRecord> {
    let a = read.settlement_target(operation_id)?.ok_or_else(|| {
        Error::new(Code::SettlementInvalid, format!("no operation {operation_id} in this store"))
            .at(operation_id.to_string())
    })?;
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
    Ok(a)
}

fn settled(outcome: Outcome) -> AttemptState {
    match outcome {
        Outcome::Ok => AttemptState::SettledOk,
        Outcome::NotRun => AttemptState::SettledNotRun,
    }
}

/// What the person said, as recorded.
struct Recorded<'a> {
    operation_id: &'a OperationId,
    outcome: Outcome,
    person: &'a Person,
    note: &'a str,
    evidence: Option<&'a [u8]>,
}

/// The settlement, the attempt's and the task's new states and the event,
/// in one transaction; the goal reopens once nothing is unknown.
fn record(
    tx: &mut dyn LedgerTx,
    a: &AttemptRecord,
    act: &Recorded,
    to: AttemptState,
    task_state: TaskState,
    next: &str,
) -> Result<()> {
    let blob = act.evidence.map(|b| tx.put_blob(b)).transpose()?;
    tx.insert_settlement(&NewSettlement {
        attempt_id: a.id,
        operation_id: act.operation_id,
        outcome: act.outcome,
        person: act.person,
        note: act.note,
        evidence_blob: blob.as_deref(),
    })?;
    tx.settle_attempt(a.id, to)?;
    let key = TaskKey { goal_id: &a.goal_id, revision: a.revision, task_ref: &a.task_ref };
    let detail = json!({"attempt_id": a.id, "settled": act.outcome.as_str(), "by": act.person.actor, "next": next});
    tx.set_task_state(key, task_state, &detail)?;
    let data = json!({
        "operation_id": act.operation_id, "try": a.try_no, "outcome": act.outcome.as_str(), "actor": act.person.actor,
        "uid": act.person.uid, "user": act.person.user, "note": act.note, "evidence_blob": blob, "verified_by_engine": false,
    });
    let seq = tx
        .append_event(&Event::goal(EventKind::Settled, &a.goal_id, a.revision, data).task(&a.task_ref).attempt(a.id))?;
    if tx.unknown_count(&a.goal_id)? == 0 {
        tx.set_goal_state(&a.goal_id, GoalState::Open, seq)?;
    }
    Ok(())
}

/// A file a person hands in as evidence, bounded like captured output.
fn read_evidence(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::usage(format!("cannot read evidence file: {e}")).at(path.display().to_string()))?;
    if meta.len() > EVIDENCE_BYTES_MAX {
        return Err(Error::usage(format!("evidence file is {} bytes; the limit is {EVIDENCE_BYTES_MAX}", meta.len()))
            .at(path.display().to_string()));
    }
    Ok(std::fs::read(path)?)
}
