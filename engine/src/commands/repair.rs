//! `engine repair REF`: a new attempt of a failed task in the same plan
//! revision, with the failure evidence handed to its provider. Repair is
//! for fixing one task; changing the goal or the plan is `engine revise`.
//! Refused when it would only repeat (`decide::repair`).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use crate::checkpoint::{self, FileCache};
use crate::decide::advice;
use crate::decide::people::Act;
use crate::decide::repair::{failure_evidence, fingerprint, is_repetition, needs_force};
use crate::error::{Code, Error, Result};
use crate::ids::GoalId;
use crate::plan::{digests, Plan, Task};
use crate::run::progress::Sink;
use crate::run::{self, Asked, Repair, RunReport, Sandboxes};
use crate::state::{AttemptState, FailureClass, TaskState};
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::LedgerRead;
use crate::store::{Durability, LeaseGuard};

pub struct RepairRequest {
    pub goal: Option<GoalId>,
    pub task_ref: String,
    pub instruction: Option<String>,
    /// A provider named on the command line; only the plan's is allowed.
    pub provider: Option<String>,
    /// `--force --note TEXT`: a person's reason to repair a failure whose
    /// class does not suggest repair.
    pub force_note: Option<String>,
    pub jobs: usize,
    /// Where the run's progress goes (`run::progress`).
    pub progress: Arc<dyn Sink>,
}

/// May `person` repair a task of `goal` (the plan's `people.retry`)?
pub fn permitted(read: &dyn LedgerRead, goal: Option<&GoalId>, person: &Person) -> Result<()> {
    let g = read.goal_or_latest(goal)?;
    super::permitted(read, &g.id, Act::Retry, person)
}

pub fn repair(
    ledger: &mut LeaseGuard,
    req: RepairRequest,
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<RunReport> {
    let read = ledger.read();
    let g = read.goal_or_latest(req.goal.as_ref())?;
    let plan = super::recorded_plan(&*read, &g.id, g.active_revision)?;
    let task = plan.task(&req.task_ref).cloned().ok_or_else(|| {
        super::no_task(&g.id, g.active_revision, &req.task_ref, plan.file.tasks.iter().map(|t| t.task_ref.as_str()))
    })?;
    super::hold::refuse_if_held(&*read, &g.id, &task.task_ref, "repair")?;
    let place = super::advice::Place::of(&*read, &g)?;
    let next = |read: &dyn LedgerRead| -> Result<String> {
        let row = read.task(&g.id, g.active_revision, &task.task_ref)?;
        let ways = row.map(|r| super::advice::of_task(read, &g, &place, &r)).transpose()?;
        Ok(ways.filter(|a| !a.ways.is_empty()).map(|a| format!("; next: {}", a.sentence())).unwrap_or_default())
    };
    same_provider(&task, req.provider.as_deref())?;
    let attempts: Vec<AttemptRecord> = read
        .attempts_of_task(&g.id, &task.task_ref)?
        .into_iter()
        .filter(|a| a.revision == g.active_revision && a.state != AttemptState::Abandoned)
        .collect();
    let Some(last) = attempts.last().filter(|a| a.state == AttemptState::Failed).cloned() else {
        let state =
            attempts.last().map_or("no attempt".to_string(), |a| format!("its latest attempt is `{}`", a.state));
        return Err(Error::usage(format!(
            "task {} has not failed ({state}): repair is for a failed task{}",
            task.task_ref,
            next(&*read)?
        ))
        .at(task.task_ref.clone()));
    };
    let class = last.class().unwrap_or(FailureClass::Unclassified);
    if needs_force(class) && req.force_note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        return Err(Error::usage(format!(
            "task {} failed as `{class}`, which a repair is not expected to fix without a person's word (--force --note){}",
            task.task_ref,
            next(&*read)?
        ))
        .at(task.task_ref.clone()));
    }
    let sandboxes = Sandboxes::prepare(&plan, ledger.path())?;
    let said = Asking { instruction: req.instruction.as_deref(), place: &place };
    refuse_repetition(&*read, &plan, &task, &attempts, &last, &said, &sandboxes)?;

    let spec = plan.provider_of(&task);
    let request_digest = digests::request_digest(&task.provider, spec, &task.action, req.instruction.as_deref());
    let operation_id = digests::operation_id(g.id.as_str(), &task.task_ref, &request_digest);
    let evidence = read.evidence_of_attempt(last.id)?;
    let rep = Repair {
        operation_id: operation_id.clone(),
        request_digest,
        instruction: req.instruction.clone(),
        failed_attempt: last.id,
        classification: last.classification.clone(),
        evidence: json!(evidence.iter().map(|r| json!({"id": r.id, "evidence": r.evidence})).collect::<Vec<_>>()),
    };
    let key = TaskKey { goal_id: &g.id, revision: g.active_revision, task_ref: &task.task_ref };
    let said = Said { class, forced: req.force_note.as_deref(), person, request_id };
    sandboxes.hold_to_shared(ledger)?;
    record_request(ledger, key, &said, &rep)?;
    // Another task's rerun still asked for goes on as asked (`engine run`'s).
    let reruns = super::rerun::in_force(&*ledger.read(), &g.id, g.active_revision)?;
    let asked = Asked { repairs: HashMap::from([(task.task_ref.clone(), rep)]), reruns, ..Asked::default() };
    run::execute(ledger, &plan, g.active_revision, req.jobs, asked, sandboxes, req.progress)
}

/// A repair sends the task to its own provider: another one (`--provider`)
/// changes the plan, which is `engine revise`'s.
fn same_provider(task: &Task, asked: Option<&str>) -> Result<()> {
    match asked {
        Some(p) if p != task.provider => Err(Error::new(
            Code::ProviderChangeRequiresRevision,
            format!(
                "task {} is done by provider `{}`; switching to `{p}` changes the plan: use `engine revise`",
                task.task_ref, task.provider
            ),
        )
        .at(task.task_ref.clone())),
        _ => Ok(()),
    }
}

/// The identities `last`'s checkpoint recorded from its answer, as known
/// now (`run::identity::reported_context`).
fn reported_of(
    read: &dyn LedgerRead,
    plan: &Plan,
    task: &Task,
    last: &AttemptRecord,
) -> Result<std::collections::BTreeMap<String, String>> {
    let Some(digest) = &last.checkpoint else { return Ok(Default::default()) };
    let recorded = read.checkpoint(digest)?.map(crate::checkpoint::RecordedCheckpoint::from);
    let newest = run::identity::newest_reported(read, (&last.goal_id, last.revision), plan)?;
    Ok(run::identity::reported_context(plan, task, recorded.as_ref(), &newest))
}

/// Repetition: the last two failures alike, and nothing new since.
fn refuse_repetition(
    read: &dyn LedgerRead,
    plan: &Plan,
    task: &Task,
    attempts: &[AttemptRecord],
    last: &AttemptRecord,
    asked: &Asking,
    sandboxes: &Sandboxes,
) -> Result<()> {
    let instruction = asked.instruction;
    let failed: Vec<&AttemptRecord> = attempts.iter().filter(|a| a.state == AttemptState::Failed).collect();
    let fps: Vec<String> = failed
        .iter()
        .rev()
        .take(2)
        .map(|a| {
            let class = a.class().map_or("unclassified", FailureClass::as_str);
            Ok(fingerprint(class, &failure_evidence(a.classification.as_ref(), read.evidence_of_attempt(a.id)?)))
        })
        .collect::<Result<_>>()?;
    let mut cache = FileCache::from_states(read.file_states()?);
    // What its checkpoint carries besides the inputs (the tool's identity,
    // its upstream's outputs: `run::identity`), as the run recorded it.
    let upstream = run::identity::upstream_context(read, (&last.goal_id, last.revision), plan, task)?;
    // And what its last answer said of who did the work (an agent's model,
    // a service's version), as known now: without it no failed attempt
    // whose answer named one would ever match.
    let reported = reported_of(read, plan, task, last)?;
    let inputs_now =
        checkpoint::observe(&plan.workspace, task, &plan.file.secrets, &sandboxes.checks(), &mut cache).ok().map(|c| {
            let none = std::collections::BTreeMap::new();
            let programs = &mut run::identity::Programs::default();
            let mut context = run::identity::carried(plan, task, (none, upstream), (&mut cache, programs));
            context.extend(reported);
            c.with_context(context).digest
        });
    let inputs_then = last.checkpoint.clone().or_else(|| last.inputs_at_intent.clone());
    let pair = match fps.as_slice() {
        [a, b] => Some((a.as_str(), b.as_str())),
        _ => None,
    };
    if !is_repetition(pair, inputs_then.as_deref(), inputs_now.as_deref(), last.instruction.as_deref(), instruction) {
        return Ok(());
    }
    let class = last.class().unwrap_or(FailureClass::Unclassified);
    let fp = fps.first().map(String::as_str).unwrap_or_default();
    Err(Error::new(
        Code::RepeatedFailureWithoutNewEvidence,
        format!(
            "task {}'s last two failures are the same ({class}, fingerprint {}) and neither its inputs nor the instruction changed since; next: {}",
            task.task_ref,
            fp.get(..16).unwrap_or(fp),
            advice::sentence(
                &advice::after_repetition(&task.task_ref, class, &asked.place.scope()),
                &asked.place.plan_path,
                &task.task_ref
            )
        ),
    )
    .at(task.task_ref.clone())
    .with_details(json!({"fingerprint": fp, "attempts": failed.iter().rev().take(2).map(|a| a.id).collect::<Vec<_>>()})))
}

/// What a repair asks with, as the repetition check needs it.
struct Asking<'a> {
    instruction: Option<&'a str>,
    place: &'a super::advice::Place,
}

/// What the person asked, besides the repair itself.
struct Said<'a> {
    class: FailureClass,
    forced: Option<&'a str>,
    person: &'a Person,
    request_id: Option<&'a NewRequestId<'a>>,
}

/// The task goes back to pending, and the person's request is recorded
/// (on the act chain) and logged with why, in one transaction.
fn record_request(ledger: &mut LeaseGuard, key: TaskKey, said: &Said, rep: &Repair) -> Result<()> {
    ledger.write(Durability::Full, |tx| {
        tx.set_task_state(key, TaskState::Pending, &json!({"repair_of": rep.failed_attempt}))?;
        let what = json!({
            "failed_attempt": rep.failed_attempt, "class": said.class, "instruction": rep.instruction,
            "forced": said.forced,
        });
        let ask = NewAsk {
            kind: AskKind::Repair,
            goal_id: key.goal_id,
            revision: key.revision,
            task_ref: Some(key.task_ref),
            operation_id: Some(&rep.operation_id),
            person: said.person,
            data: &what,
        };
        let ask_id = tx.insert_ask(&ask)?;
        let p = said.person;
        let data = json!({
            "failed_attempt": rep.failed_attempt, "class": said.class, "instruction": rep.instruction,
            "forced": said.forced, "operation_id": rep.operation_id, "ask_id": ask_id,
            "actor": p.actor, "uid": p.uid, "user": p.user,
        });
        let e = Event::goal(EventKind::RepairRequested, key.goal_id, key.revision, data).task(key.task_ref);
        tx.append_event(&e)?;
        match said.request_id {
            Some(r) => tx.insert_request_id(r),
            None => Ok(()),
        }
    })
}
