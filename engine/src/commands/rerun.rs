//! `engine rerun REF [--downstream] --reason WHY`: a person's act that
//! makes a succeeded task (and, with `--downstream`, every task that
//! depends on it, transitively) run again in a new attempt, keeping every
//! other completion. Each re-run call is a new operation (its request
//! digest binds the rerun's number), so an `external` or paid task's
//! re-run needs a person's approval like any new call (`decide::gate`: a
//! person's ask is a repeat). Never re-sends an unknown operation: a task
//! with an attempt whose outcome is unknown or in doubt is refused,
//! naming the settle command. `people.retry` says who may.
//!
//! The rerun stays asked for (`in_force`) until its call succeeds: a run
//! it stopped for an approval, or a person's stop, goes on with the same
//! operation at the next `engine run`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::decide::people::Act;
use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, OperationId, RequestDigest, Revision};
use crate::plan::{digests, Plan};
use crate::run::progress::Sink;
use crate::run::{self, Asked, Rerun, RunReport, Sandboxes};
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LeaseGuard, LedgerRead};

/// What a person asked.
pub struct RerunRequest {
    pub goal: Option<GoalId>,
    pub task_ref: String,
    pub downstream: bool,
    pub reason: String,
    pub jobs: usize,
    pub progress: Arc<dyn Sink>,
}

/// May `person` rerun a task of the goal (`people.retry`)?
pub fn permitted(read: &dyn LedgerRead, goal: Option<&GoalId>, person: &Person) -> Result<()> {
    let g = read.goal_or_latest(goal)?;
    super::permitted(read, &g.id, Act::Retry, person)
}

/// The task and, with `downstream`, its dependants (transitively), in
/// the plan's order.
fn targets(plan: &Plan, task_ref: &str, downstream: bool) -> Vec<String> {
    let mut chosen: BTreeSet<String> = BTreeSet::from([task_ref.to_string()]);
    let mut out = Vec::new();
    for &i in &plan.order {
        let Some(t) = plan.file.tasks.get(i) else { continue };
        let depends = downstream && t.depends_on.iter().any(|d| chosen.contains(d));
        let depends = depends || crate::failpoint::fault(crate::failpoint::Fault::RerunEverything);
        if t.task_ref == task_ref || depends {
            chosen.insert(t.task_ref.clone());
            out.push(t.task_ref.clone());
        }
    }
    out
}

/// The rerun's call of `task`: its request, bound to the rerun's number.
fn call(plan: &Plan, goal: &GoalId, task: &crate::plan::Task, number: i64, downstream: bool) -> Rerun {
    let marker = format!("engine rerun #{number}");
    let request_digest = digests::request_digest(&task.provider, plan.provider_of(task), &task.action, Some(&marker));
    let operation_id = digests::operation_id(goal.as_str(), &task.task_ref, &request_digest);
    Rerun { operation_id, request_digest, number, downstream }
}

/// Refused unless `r` succeeded (the one named) or is complete (a
/// dependant), is not held, and has no attempt whose outcome is unknown.
fn check(read: &dyn LedgerRead, goal: &GoalId, (r, state): (&str, TaskState), named: bool) -> Result<()> {
    if let Some((attempt, s)) = read.first_unsettled_attempt(goal, r)? {
        let a = read.attempt(attempt)?;
        let settle = match s {
            AttemptState::EffectUnknown => {
                format!("`engine settle {} --outcome ok|not_run --note TEXT`", a.operation_id)
            }
            _ => "a run reconciles it first (`engine run PLAN`)".to_string(),
        };
        return Err(Error::new(
            Code::ExternalEffectUnknown,
            format!(
                "task {r}'s operation {} (try {}) is {s}: nothing is sent again while its outcome is unknown; settle it first: {settle}",
                a.operation_id, a.try_no
            ),
        )
        .at(r.to_string()));
    }
    if named && !matches!(state, TaskState::Succeeded | TaskState::Reused) {
        return Err(Error::usage(format!(
            "task {r} is {state}: `engine rerun` runs a succeeded task again (a failed one: `engine repair {r}`)"
        ))
        .at(r.to_string()));
    }
    super::hold::refuse_if_held(read, goal, r, "rerun")
}

pub fn rerun(
    ledger: &mut LeaseGuard,
    req: RerunRequest,
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<RunReport> {
    if req.reason.trim().is_empty() {
        return Err(Error::usage("a rerun needs a reason (--reason WHY): say why the result is not trusted"));
    }
    let read = ledger.read();
    let g = read.goal_or_latest(req.goal.as_ref())?;
    let plan = super::recorded_plan(&*read, &g.id, g.active_revision)?;
    if plan.task(&req.task_ref).is_none() {
        let refs = plan.file.tasks.iter().map(|t| t.task_ref.as_str());
        return Err(super::no_task(&g.id, g.active_revision, &req.task_ref, refs));
    }
    let states: HashMap<String, TaskState> = read.task_states(&g.id, g.active_revision)?.into_iter().collect();
    let targets = targets(&plan, &req.task_ref, req.downstream);
    for r in &targets {
        let state = states.get(r).copied().unwrap_or(TaskState::Pending);
        check(&*read, &g.id, (r, state), *r == req.task_ref)?;
    }
    let number = read.asks_of_goal(&g.id)?.iter().filter(|a| a.kind == AskKind::Rerun).count() as i64 + 1;
    drop(read);
    let reruns: HashMap<String, Rerun> = targets
        .iter()
        .filter_map(|r| plan.task(r).map(|t| (r.clone(), call(&plan, &g.id, t, number, req.downstream))))
        .collect();
    let sandboxes = Sandboxes::prepare(&plan, ledger.path())?;
    sandboxes.hold_to_shared(ledger)?;
    let said = (person, req.reason.as_str(), request_id);
    record(ledger, (&g.id, g.active_revision), &targets, &reruns, said)?;
    let answers = super::answer::in_force(&*ledger.read(), &g.id, g.active_revision)?;
    let asked = Asked { reruns, answers, ..Asked::default() };
    run::execute(ledger, &plan, g.active_revision, req.jobs, asked, sandboxes, req.progress)
}

/// The person's rerun, one transaction: one ask per task on the act chain
/// (with its new operation), each task pending again, the event, and the
/// goal no longer satisfied (open, or waiting on a settlement): a process
/// that dies right after it leaves no satisfied goal over a pending task
/// (`engine verify`'s `goal_verdicts`; found by the simulator).
fn record(
    ledger: &mut LeaseGuard,
    (goal_id, revision): (&GoalId, Revision),
    targets: &[String],
    reruns: &HashMap<String, Rerun>,
    (person, reason, request_id): (&Person, &str, Option<&NewRequestId>),
) -> Result<()> {
    ledger.write(Durability::Full, |tx| {
        for r in targets {
            let Some(rr) = reruns.get(r) else { continue };
            let key = TaskKey { goal_id, revision, task_ref: r };
            tx.set_task_state(key, TaskState::Pending, &json!({"rerun": rr.number, "operation_id": rr.operation_id}))?;
            let data = json!({"reason": reason, "number": rr.number, "downstream": rr.downstream,
                "request_digest": rr.request_digest, "of": targets.first()});
            let ask = NewAsk {
                kind: AskKind::Rerun,
                goal_id,
                revision,
                task_ref: Some(r),
                operation_id: Some(&rr.operation_id),
                person,
                data: &data,
            };
            let ask_id = tx.insert_ask(&ask)?;
            let data = json!({"ask_id": ask_id, "operation_id": rr.operation_id, "number": rr.number, "reason": reason,
                "downstream": rr.downstream, "actor": person.actor, "uid": person.uid, "user": person.user});
            let seq = tx.append_event(&Event::goal(EventKind::RerunRequested, goal_id, revision, data).task(r))?;
            let state = if tx.unknown_count(goal_id)? > 0 { GoalState::NeedsSettlement } else { GoalState::Open };
            tx.set_goal_state(goal_id, state, seq)?;
        }
        match request_id {
            Some(r) => tx.insert_request_id(r),
            None => Ok(()),
        }
    })
}

/// The reruns in force for a revision's tasks: per task, a person's
/// latest rerun, until an attempt of its operation succeeded.
pub fn in_force(read: &dyn LedgerRead, goal: &GoalId, revision: Revision) -> Result<HashMap<String, Rerun>> {
    let mut out = HashMap::new();
    for ask in read.asks_of_goal(goal)?.into_iter().filter(|a| a.kind == AskKind::Rerun && a.revision == revision) {
        let (Some(task_ref), Some(operation_id)) = (ask.task_ref.clone(), ask.operation_id.clone()) else { continue };
        let Some(request_digest) = ask.data.get("request_digest").and_then(Value::as_str) else { continue };
        let done = read
            .attempts_of_task(goal, &task_ref)?
            .iter()
            .any(|a| a.operation_id == operation_id && a.state == AttemptState::Succeeded);
        if done {
            out.remove(&task_ref);
            continue;
        }
        let rerun = Rerun {
            operation_id: OperationId::new(operation_id.as_str()),
            request_digest: RequestDigest::new(request_digest.to_string()),
            number: ask.data.get("number").and_then(Value::as_i64).unwrap_or(0),
            downstream: ask.data.get("downstream").and_then(Value::as_bool).unwrap_or(false),
        };
        out.insert(task_ref, rerun);
    }
    Ok(out)
}
