//! `engine revise PLAN --reason TEXT [--raise NAME=VALUE]...`: a new plan
//! revision of the same goal, linked to the one before, within
//! `max_revisions` — and a person's raises of budgets, recorded as their
//! act (with the plan unchanged, the raises alone). Every task is
//! decided `reuse` or `run` (`decide::reuse`, with the first refusing
//! reason) before anything runs, and the table is shown.
//!
//! Two things stop a revision before anything is written: a task it drops
//! or renames whose operation is unknown or unsettled (`UNSETTLED_OPERATION`:
//! under another ref its work would be sent again), and anything it loosens
//! (`decide::loosening`) without `--approve-loosening`
//! (`LOOSENING_NEEDS_APPROVAL`, each loosening listed).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::owner_way_out;
use super::plan_watch::PlanWatch;
use super::register;
use crate::budgets;
use crate::checkpoint::{self, FileCache, FileState};
use crate::decide::budget::{BudgetName, Exhausted};
use crate::decide::loosening::{self, Loosening};
use crate::decide::people::{self, Act};
use crate::decide::raise::{self, Raise};
use crate::decide::reuse::{self, Candidate, Decision};
use crate::decide::tools::{self, Inventory};
use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::model::{Budgets, People};
use crate::plan::{Plan, PlanFile, Task};
use crate::run::progress::Sink;
use crate::run::{self, Asked, RunReport, Sandboxes};
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::events::{Event, EventKind};
use crate::store::goals::{GoalRecord, NewRevision, RevisionRecord, TaskKey};
use crate::store::{Durability, LeaseGuard, LedgerRead, LedgerTx};
use providers::sandbox::Sandbox;

pub struct ReviseRequest {
    pub plan_path: PathBuf,
    pub reason: String,
    pub no_run: bool,
    pub jobs: usize,
    /// Budgets a person raises with this revision (`--raise NAME=VALUE`).
    pub raises: Vec<Raise>,
    /// The person approves what this revision loosens
    /// (`--approve-loosening`).
    pub approve_loosening: bool,
    /// `--people`: the store's owner changes `people` (and nothing else)
    /// though the lists in force do not name them (`owner_way_out`).
    pub as_store_owner: bool,
    /// Where the run's progress goes (`run::progress`).
    pub progress: Arc<dyn Sink>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskDecision {
    pub task_ref: String,
    #[serde(flatten)]
    pub decision: Decision,
    /// A reuse on condition (early cutoff): the upstreams that run again,
    /// whose outputs must come out byte-identical for it to be kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub early_cutoff_on: Vec<String>,
}

/// A budget a person raised: from the limit in force to the new one.
#[derive(Debug, Clone, Serialize)]
pub struct Raised {
    pub budget: BudgetName,
    pub from: f64,
    pub to: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReviseReport {
    pub goal_id: GoalId,
    pub from_revision: Revision,
    /// The new revision; `from_revision` itself when only budgets were
    /// raised (the plan is the same).
    pub revision: Revision,
    pub reason: String,
    pub goal_contract_changed: bool,
    pub goal_contract_digest: String,
    pub decisions: Vec<TaskDecision>,
    pub person: Person,
    /// The plan file the revision was recorded from.
    pub plan_path: String,
    pub raised: Vec<Raised>,
    /// What this revision loosens, approved by `person`
    /// (`--approve-loosening`); empty when it loosens nothing.
    pub loosened: Vec<Loosening>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunReport>,
}

/// May `person` record this revision? One the lists in force name in
/// `people.revise` (when there is one), and only one they allow may change
/// who may act (`people`) — or, with `--people`, the owner of the store at
/// `owner_of` (`Some` only then; `owner_way_out`).
pub fn permitted(read: &dyn LedgerRead, plan: &Plan, person: &Person, owner_of: Option<&Path>) -> Result<()> {
    let goal_id = GoalId::new(&plan.goal().id);
    if read.goal(&goal_id)?.is_none() {
        return match owner_of {
            Some(_) => Err(Error::usage(format!(
                "goal `{goal_id}` is not in this store: --people changes a recorded goal's `people`"
            ))),
            None => Ok(()),
        };
    }
    let active = super::active_plan(read, &goal_id)?;
    if let Some(store) = owner_of {
        return owner_way_out::permitted(store, &active, &plan.file, person);
    }
    let now = active.people;
    people::permitted(now.as_ref(), Act::Revise, &person.user)
        .and_then(|_| people::may_change(now.as_ref(), plan.file.people.as_ref(), &person.user))
        .map_err(|r| owner_way_out::named(super::not_permitted(r)))
}

/// Record revision n+1 of the plan's goal (with the person's request and
/// `request_id` in the same transaction), then run it unless `no_run`.
pub fn revise(
    ledger: &mut LeaseGuard,
    plan: Plan,
    req: ReviseRequest,
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<ReviseReport> {
    if req.reason.trim().is_empty() {
        return Err(Error::usage("a revision needs a reason (--reason TEXT)"));
    }
    let goal_id = GoalId::new(&plan.goal().id);
    let sandboxes = Sandboxes::prepare(&plan, ledger.path())?;
    if !req.no_run {
        // Before the revision is recorded: a run this engine would refuse
        // records nothing either.
        sandboxes.hold_to_shared(ledger)?;
    }
    let read = ledger.read();
    let g = read
        .goal(&goal_id)?
        .ok_or_else(|| Error::usage(format!("goal `{goal_id}` is not in this store: `engine run` registers it")))?;
    let prev = read.revision(&goal_id, g.active_revision)?;
    let raised = raised(&*read, &g, &plan, &req.raises)?;
    let same_plan = prev.plan_digest == plan.digests().plan;
    if same_plan && raised.is_empty() {
        return Err(nothing_to_revise(&*read, &g)?);
    }
    let prev_file = stored_plan(&prev)?;
    no_unsettled_dropped(&*read, &goal_id, &prev_file, &plan)?;
    let in_force = budgets::in_force(&*read, &goal_id, g.active_revision, &prev_file.budgets)?;
    let loosened = loosened(&*read, &g, (&prev_file, &in_force), &plan, &req.raises)?;
    // The owner's `--people` approves its own change (`permitted` made
    // sure `people` is all the revision changes).
    let by_owner = req.as_store_owner && loosened.iter().all(|l| l.kind == loosening::Kind::People);
    if !loosened.is_empty() && !req.approve_loosening && !by_owner {
        return Err(needs_approval(&loosened, &req.plan_path));
    }
    let mut report = ReviseReport {
        goal_id: goal_id.clone(),
        from_revision: g.active_revision,
        revision: g.active_revision,
        reason: req.reason.clone(),
        goal_contract_changed: false,
        goal_contract_digest: prev.goal_contract.clone(),
        decisions: Vec::new(),
        person: person.clone(),
        plan_path: req.plan_path.display().to_string(),
        raised,
        loosened,
        run: None,
    };
    if same_plan {
        // Budgets raised, the plan unchanged: no new revision.
        let (raised, reason) = (&report.raised, req.reason.as_str());
        ledger.write(Durability::Full, |tx| {
            raises_alone(tx, (&goal_id, g.active_revision), raised, reason, (person, request_id))
        })?;
    } else {
        let who = (person, request_id);
        record_new_revision(ledger, (&req, &plan, &sandboxes), &g, &prev, who, &mut report)?;
    }
    if !req.no_run {
        let (revision, progress, watch) = (report.revision, req.progress.clone(), PlanWatch::now(&req.plan_path));
        let asked = Asked { reruns: super::rerun::in_force(&*ledger.read(), &goal_id, revision)?, ..Asked::default() };
        let mut run = run::execute(ledger, &plan, revision, req.jobs, asked, sandboxes, progress)?;
        watch.finish(ledger, &mut run)?;
        report.run = Some(run);
    }
    Ok(report)
}

/// The raises of a revision that changes nothing else, and the person's
/// request id, in the caller's transaction.
fn raises_alone(
    tx: &mut dyn LedgerTx,
    (goal_id, revision): (&GoalId, Revision),
    raised: &[Raised],
    reason: &str,
    (person, request_id): (&Person, Option<&NewRequestId>),
) -> Result<()> {
    record_raises(tx, goal_id, revision, raised, reason, person)?;
    match request_id {
        Some(r) => tx.insert_request_id(r),
        None => Ok(()),
    }
}

/// The plan is the active revision's and no budget is raised: what the
/// goal waits on instead.
fn nothing_to_revise(read: &dyn LedgerRead, g: &GoalRecord) -> Result<Error> {
    let waiting = super::advice::besides_revising(read, g)?;
    let waiting = if waiting.is_empty() { String::new() } else { format!("; or, with the plan as it is: {waiting}") };
    Ok(Error::usage(format!(
        "the plan is the same as goal `{}`'s active revision {}: nothing to revise; \
         edit the plan first (or raise a budget: --raise NAME=VALUE){waiting}",
        g.id, g.active_revision
    )))
}

/// Decide every task against the active revision, then record the new
/// revision, its decisions and the raises that come with it in one
/// transaction.
fn record_new_revision(
    ledger: &mut LeaseGuard,
    (req, plan, sandboxes): (&ReviseRequest, &Plan, &Sandboxes),
    g: &GoalRecord,
    prev: &RevisionRecord,
    (person, request_id): (&Person, Option<&NewRequestId>),
    report: &mut ReviseReport,
) -> Result<()> {
    let read = ledger.read();
    let prev_file = within_max_revisions(&*read, g, plan, prev, &report.raised, &req.plan_path)?;
    let goal_changed = prev.goal_contract != plan.digests().goal_contract;
    let mut cache = FileCache::from_states(read.file_states()?);
    let secrets: Vec<String> =
        plan.file.secrets.iter().filter_map(|n| std::env::var(n).ok()).filter(|v| !v.is_empty()).collect();
    let listed = run::list_tools_now(plan, &secrets, sandboxes)?;
    // On a shared store no plain run decides a reuse on condition: none.
    let early_cutoff = !ledger.shared();
    let prev = Previous { revision: g.active_revision, file: &prev_file, goal_changed, early_cutoff };
    let decisions = decide_all(&*read, plan, &g.id, prev, &listed, &sandboxes.checks(), &mut cache)?;
    let revision = g.active_revision.next();
    let new = NewRevision {
        goal_id: &g.id,
        revision,
        parent: Some(g.active_revision),
        plan_digest: &plan.digests().plan,
        goal_contract: &plan.digests().goal_contract,
        plan_json: &register::plan_json(plan)?,
        plan_path: &req.plan_path.display().to_string(),
        workspace: &plan.workspace.display().to_string(),
        reason: Some(&req.reason),
    };
    let dirty = cache.take_dirty();
    let (raises, loosened) = (&report.raised, &report.loosened);
    ledger.write(Durability::Full, |tx| {
        record_raises(tx, &g.id, revision, raises, &req.reason, person)?;
        let by_owner = req.as_store_owner.then_some((prev_file.people.as_ref(), plan.file.people.as_ref()));
        record(tx, plan, &new, (goal_changed, person, loosened, by_owner.is_some()), &decisions, &dirty)?;
        record_ask(tx, &new, person, (&report.loosened, request_id), by_owner)?;
        match request_id {
            Some(r) => tx.insert_request_id(r),
            None => Ok(()),
        }
    })?;
    (report.revision, report.goal_contract_changed, report.decisions) = (revision, goal_changed, decisions);
    report.goal_contract_digest = plan.digests().goal_contract.clone();
    Ok(())
}

/// The person's request for the revision, on the act chain: with what it
/// loosens (the person approved each) and the request id it came under;
/// `by_owner`: the `people` lists before and after, when the store's owner
/// changed them with `--people` (so the chain says who used the way out).
fn record_ask(
    tx: &mut dyn LedgerTx,
    new: &NewRevision,
    person: &Person,
    (loosened, request_id): (&[Loosening], Option<&NewRequestId>),
    by_owner: Option<(Option<&People>, Option<&People>)>,
) -> Result<()> {
    let mut said = json!({"reason": new.reason, "parent": new.parent, "plan_digest": new.plan_digest,
        "loosened": loosened, "request_id": request_id.map(|r| r.request_id)});
    if let Some((from, to)) = by_owner {
        said["people_by_store_owner"] = json!({"from": from, "to": to});
    }
    let ask = NewAsk {
        kind: AskKind::Revise,
        goal_id: new.goal_id,
        revision: new.revision,
        task_ref: None,
        operation_id: None,
        person,
        data: &said,
    };
    tx.insert_ask(&ask).map(|_| ())
}

/// A recorded revision's plan file.
fn stored_plan(row: &RevisionRecord) -> Result<PlanFile> {
    serde_json::from_str(&row.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of revision {} does not parse: {e}", row.revision))
    })
}

/// `UNSETTLED_OPERATION` when the new plan drops (or renames: the old ref
/// is gone) a task of the active revision whose operation is unknown or in
/// doubt: under another ref its work would be sent again at once.
fn no_unsettled_dropped(read: &dyn LedgerRead, goal_id: &GoalId, prev: &PlanFile, plan: &Plan) -> Result<()> {
    for t in prev.tasks.iter().filter(|t| plan.task(&t.task_ref).is_none()) {
        let Some((attempt_id, state)) = read.first_unsettled_attempt(goal_id, &t.task_ref)? else { continue };
        let op = read.attempt(attempt_id)?.operation_id;
        let number = read.attempt_number(attempt_id)?;
        let way = if state == AttemptState::EffectUnknown {
            format!("settle it first: `engine settle {op} --outcome ok|not_run --note TEXT`")
        } else {
            "a run of the active revision reconciles it first (`engine run` with the plan as recorded)".to_string()
        };
        return Err(Error::new(
            Code::UnsettledOperation,
            format!(
                "this revision drops or renames task {} whose operation {op} is {state} (its attempt {number}): \
                 under another ref its work would be sent again; nothing is recorded; {way}",
                t.task_ref
            ),
        )
        .at(t.task_ref.clone())
        .with_details(json!({"task_ref": t.task_ref, "operation_id": op, "attempt_id": attempt_id,
            "attempt": number, "state": state, "settle": format!("engine settle {op} --outcome ok|not_run --note TEXT")})));
    }
    Ok(())
}

/// What the new plan loosens against the revision in force, with what
/// the ledger says of each task it drops: whether it completed, whether a
/// call of it may have been sent.
fn loosened(
    read: &dyn LedgerRead,
    g: &GoalRecord,
    (prev, in_force): (&PlanFile, &Budgets),
    plan: &Plan,
    raises: &[Raise],
) -> Result<Vec<Loosening>> {
    let mut dropped = BTreeMap::new();
    for t in prev.tasks.iter().filter(|t| plan.task(&t.task_ref).is_none()) {
        let state = read.task(&g.id, g.active_revision, &t.task_ref)?.map(|r| r.state);
        let done = matches!(state, Some(TaskState::Succeeded | TaskState::Reused));
        let sent = read.prior_dispatch(&g.id, &t.task_ref)?;
        dropped.insert(t.task_ref.clone(), loosening::Standing { done, sent });
    }
    let before = loosening::Before { file: prev, in_force, dropped: &dropped };
    Ok(loosening::loosenings(&before, &plan.file, raises))
}

/// `LOOSENING_NEEDS_APPROVAL`: what the revision loosens, one line each,
/// and the command that approves it.
fn needs_approval(loosened: &[Loosening], plan_path: &std::path::Path) -> Error {
    let lines: Vec<String> = loosened.iter().map(|l| format!("  - {}", l.line())).collect();
    let command = format!("engine revise {} --reason TEXT --approve-loosening", plan_path.display());
    Error::new(
        Code::LooseningNeedsApproval,
        format!(
            "this revision loosens what the engine enforces; nothing is recorded; a person who may revise approves \
             it with `{command}`:\n{}",
            lines.join("\n")
        ),
    )
    .with_details(json!({"loosened": loosened, "approve": command}))
}

/// The raises asked for, each checked against the limit in force (with
/// the new plan's budgets): a raise must go above it.
fn raised(read: &dyn LedgerRead, g: &GoalRecord, plan: &Plan, asked: &[Raise]) -> Result<Vec<Raised>> {
    let mut in_force = budgets::in_force(read, &g.id, g.active_revision, &plan.file.budgets)?;
    let mut out = Vec::with_capacity(asked.len());
    for r in asked {
        raise::check(&in_force, r).map_err(Error::usage)?;
        out.push(Raised { budget: r.budget, from: raise::limit_of(&in_force, r.budget), to: r.to });
        in_force = raise::in_force(&in_force, std::slice::from_ref(r));
    }
    Ok(out)
}

/// A person's raises, as events of the goal (read back by
/// `budgets::raises`), with who raised them and why.
fn record_raises(
    tx: &mut dyn LedgerTx,
    goal_id: &GoalId,
    revision: Revision,
    raised: &[Raised],
    reason: &str,
    person: &Person,
) -> Result<()> {
    for r in raised {
        let data = json!({"budget": r.budget, "from": r.from, "to": r.to, "reason": reason,
            "actor": person.actor, "uid": person.uid, "user": person.user});
        tx.append_event(&Event::goal(EventKind::BudgetRaised, goal_id, revision, data))?;
    }
    Ok(())
}

/// The active revision's plan file, if a new revision may follow it within
/// `max_revisions`: the lowest any recorded revision set, or a person's
/// raise (recorded, or asked for now) above it.
fn within_max_revisions(
    read: &dyn LedgerRead,
    g: &GoalRecord,
    plan: &Plan,
    prev: &RevisionRecord,
    raised: &[Raised],
    plan_path: &std::path::Path,
) -> Result<PlanFile> {
    let prev_file: PlanFile = serde_json::from_str(&prev.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of revision {} does not parse: {e}", g.active_revision))
    })?;
    let now: Vec<Raise> = raised.iter().map(|r| Raise { budget: r.budget, to: r.to }).collect();
    let in_force = raise::in_force(&budgets::in_force(read, &g.id, g.active_revision, &plan.file.budgets)?, &now);
    let used = (g.active_revision.get() - 1).max(0) as u64;
    let limit = u64::from(in_force.max_revisions);
    if used >= limit {
        let budget = BudgetName::MaxRevisions;
        let exhausted = Exhausted { budget, used: used as f64, limit: limit as f64, requested: 1.0, detail: None };
        let out = raise::way_out(&exhausted, &plan_path.display().to_string());
        return Err(Error::new(
            Code::BudgetExhausted,
            format!("{budget}: used {used} of {limit}; no new revision is recorded; {out}"),
        )
        .with_details(json!({"budget": budget, "used": used, "limit": limit, "way_out": out})));
    }
    Ok(prev_file)
}

/// The new revision, its tasks as decided, the event with the decisions,
/// and the goal moved onto it, in one transaction.
fn record(
    tx: &mut dyn LedgerTx,
    plan: &Plan,
    new: &NewRevision,
    (goal_changed, person, loosened, by_owner): (bool, &Person, &[Loosening], bool),
    decisions: &[TaskDecision],
    dirty: &[FileState],
) -> Result<()> {
    let (goal_id, revision) = (new.goal_id, new.revision);
    tx.insert_revision(new)?;
    register::insert_tasks(tx, plan, revision)?;
    for d in decisions {
        let (state, detail) = match &d.decision {
            Decision::Reuse { provenance } if !d.early_cutoff_on.is_empty() => {
                (TaskState::Reused, json!({"reused_from": provenance, "early_cutoff_on": d.early_cutoff_on}))
            }
            Decision::Reuse { provenance } => (TaskState::Reused, json!({"reused_from": provenance})),
            Decision::Run { refusal } => {
                (TaskState::Pending, json!({"reuse_refused": refusal.code(), "detail": refusal.detail()}))
            }
        };
        tx.set_task_state(TaskKey { goal_id, revision, task_ref: &d.task_ref }, state, &detail)?;
    }
    let data = json!({
        "parent": new.parent, "reason": new.reason, "plan_digest": plan.digests().plan,
        "goal_contract_digest": plan.digests().goal_contract, "goal_contract_changed": goal_changed,
        "decisions": decisions, "actor": person.actor, "uid": person.uid, "user": person.user,
        "loosened": loosened, "people_by_store_owner": by_owner,
    });
    let seq = tx.append_event(&Event::goal(EventKind::RevisionRecorded, goal_id, revision, data))?;
    tx.put_file_states(dirty)?;
    tx.set_active_revision(goal_id, revision)?;
    // A new plan settles nothing: an unknown outcome still waits on a person.
    let state = if tx.unknown_count(goal_id)? > 0 { GoalState::NeedsSettlement } else { GoalState::Open };
    tx.set_goal_state(goal_id, state, seq)
}

/// The revision a new one is decided against.
pub struct Previous<'a> {
    pub revision: Revision,
    pub file: &'a PlanFile,
    /// Its goal contract differs from the new plan's.
    pub goal_changed: bool,
    /// May a reuse wait on an upstream's outputs (a run decides it)? Not
    /// on a shared store, whose plain runs re-check no completion.
    pub early_cutoff: bool,
}

/// Decide every task of `plan` against the previous revision, in
/// dependency order; `listed`: the MCP servers' tool inventories now.
/// A task whose upstream runs again is decided as a plain run decides it
/// (early cutoff): when each such upstream can cut off (it declares
/// `outputs`, its effect is not external) or is itself put off, and its
/// completion would stand otherwise, it is reused on condition
/// (`early_cutoff_on`): the run keeps it only if those upstreams' outputs
/// come out byte-identical (`run::core::cutoff`), else runs it.
pub fn decide_all(
    ledger: &dyn LedgerRead,
    plan: &Plan,
    goal_id: &GoalId,
    prev: Previous,
    listed: &BTreeMap<String, Inventory>,
    sandbox: &Sandbox,
    cache: &mut FileCache,
) -> Result<Vec<TaskDecision>> {
    let Previous { revision: prev_revision, file: prev_file, goal_changed, early_cutoff } = prev;
    let (mut runs, mut put_off): (HashSet<String>, HashSet<String>) = (HashSet::new(), HashSet::new());
    let mut out = Vec::with_capacity(plan.order.len());
    let then: std::collections::HashMap<&str, &Task> =
        prev_file.tasks.iter().map(|t| (t.task_ref.as_str(), t)).collect();
    let newest = crate::run::identity::newest_reported(ledger, (goal_id, prev_revision), plan)?;
    for &i in &plan.order {
        let task = &plan.file.tasks[i];
        let Some(d) = plan.digests().tasks.get(&task.task_ref) else { continue };
        let completion = if goal_changed {
            None
        } else {
            let then = then.get(task.task_ref.as_str()).map(|t| (*t, prev_file.providers.get(&t.provider)));
            run::completion(ledger, goal_id, prev_revision, then, &task.task_ref)?
        };
        let candidate =
            Candidate { task, meaning: &d.meaning, meaning_core: &d.meaning_core, dependencies: &d.dependencies };
        let moving: Vec<String> =
            task.depends_on.iter().filter(|dep| runs.contains(*dep) || put_off.contains(*dep)).cloned().collect();
        let recorded = completion.as_ref().and_then(|c| c.checkpoint.as_ref());
        let reported = crate::run::identity::reported_context(plan, task, recorded, &newest);
        let observe = || {
            let cp = observed(ledger, plan, (goal_id, prev_revision), task, (listed, sandbox, &mut *cache))?;
            Ok(cp.with_context(reported))
        };
        let decision = match moving.first() {
            None => reuse::decide(goal_changed, completion.as_ref(), &candidate, None, observe),
            Some(first) => {
                let unobserved = || Err("not observed".to_string());
                match reuse::decide(goal_changed, completion.as_ref(), &candidate, Some(first), unobserved) {
                    Decision::Run { refusal: reuse::Refusal::UpstreamNotReused { .. } } if early_cutoff => {
                        match reuse::cutoff::no_cutoff(moving.iter().filter(|d| !put_off.contains(*d)), |r| {
                            plan.task(r)
                        }) {
                            Some(refusal) => Decision::Run { refusal },
                            None => reuse::decide(goal_changed, completion.as_ref(), &candidate, None, observe),
                        }
                    }
                    other => other,
                }
            }
        };
        // A changed upstream output reads as that upstream's run again.
        let decision = match decision {
            Decision::Run { refusal } => Decision::Run { refusal: reuse::cutoff::named(refusal) },
            reuse => reuse,
        };
        let early_cutoff_on = if decision.is_reuse() { moving } else { Vec::new() };
        match (decision.is_reuse(), early_cutoff_on.is_empty()) {
            (false, _) => runs.insert(task.task_ref.clone()),
            (true, false) => put_off.insert(task.task_ref.clone()),
            (true, true) => false,
        };
        out.push(TaskDecision { task_ref: task.task_ref.clone(), decision, early_cutoff_on });
    }
    Ok(out)
}

/// A task's checkpoint now, with what its completion's carries beside its
/// inputs: its tools, its upstreams' outputs as that completion saw them
/// (the earlier revision's), its own tool's identity.
fn observed(
    ledger: &dyn LedgerRead,
    plan: &Plan,
    (goal_id, prev_revision): (&GoalId, Revision),
    task: &Task,
    (listed, sandbox, cache): (&BTreeMap<String, Inventory>, &Sandbox, &mut FileCache),
) -> std::result::Result<checkpoint::Checkpoint, String> {
    use crate::run::identity;
    let cp = checkpoint::observe(&plan.workspace, task, &plan.file.secrets, sandbox, cache)?;
    let upstream =
        identity::upstream_context(ledger, (goal_id, prev_revision), plan, task).map_err(|e| e.to_string())?;
    let tools = tools::context_of(&plan.file, task, listed);
    Ok(cp.with_context(identity::carried(plan, task, (tools, upstream), (cache, &mut identity::Programs::default()))))
}
