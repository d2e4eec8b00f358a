//! `engine run PLAN --dry-run`: the run's own decisions, asked against
//! the ledger as it stands, with nothing performed. Each task of the plan,
//! in its order, is `kept` (its completion stands: the reuse pass's
//! `decide::reuse`), `reused` (a revision kept an earlier completion),
//! `would run` (the call-site gate, `decide::gate`, says go: with the call
//! and cost it would spend), `would wait for approval` (the gate asks a
//! person first, with the cost) or `blocked` (a hold, a dependency that
//! would not complete, an unknown outcome, a failure, a budget: named).
//!
//! Starts no process (a checkpoint with a context command is not
//! observed: named `not_observed`), opens no connection (an MCP server's
//! tool inventory is not read, so `TOOL_CHANGED` is not known), writes
//! nothing: the ledger is read through a read-only view.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;
use serde_json::{json, Value};

use super::gate::{self as call_site, Projected};
use super::refresh::{self, Starts};
use super::scope::Scope;
use crate::checkpoint::FileCache;
use crate::cost::Cost;
use crate::decide::gate::{self, ApprovalFacts, Decision};
use crate::decide::hold::Holds;
use crate::decide::scheduler;
use crate::error::Result;
use crate::ids::{GoalId, Revision};
use crate::plan::{Budgets, Plan, Task};
use crate::run::core::GateCall;
use crate::state::{AttemptKind, AttemptState, TaskState};
use crate::store::LedgerRead;

/// One task's line.
#[derive(Debug, Clone, Serialize)]
pub struct DryTask {
    pub task_ref: String,
    /// `kept`, `reused`, `would run`, `would wait for approval`, `blocked`.
    pub verdict: &'static str,
    /// Why, or by what (`CHECKPOINT_CHANGED: ...`, `held by ann: ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// What it would spend: provider calls and cost.
    pub provider_calls: u64,
    pub cost: Cost,
}

/// What a run of the plan would do now.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    pub goal_id: GoalId,
    /// The goal's active revision (`None`: the goal is not registered yet;
    /// the run would register it as revision 1).
    pub revision: Option<Revision>,
    pub tasks: Vec<DryTask>,
    /// What the run would spend in all, and the budgets it spends from
    /// (used before, limit).
    pub provider_calls: u64,
    pub cost: Cost,
    pub budgets: Value,
    /// The acceptance checks that would run (every task would complete),
    /// else `None`.
    pub acceptance_checks: Option<usize>,
    /// Complete tasks whose checkpoint was not observed: it runs a context
    /// command, and a dry run starts no process.
    pub not_observed: Vec<String>,
}

/// What the ledger holds of the goal, read once.
struct Standing {
    revision: Revision,
    states: HashMap<String, TaskState>,
    stale: HashMap<String, Value>,
    holds: Holds,
    waits_for_retry: HashSet<String>,
    budgets: Budgets,
    used: (u64, Cost),
}

/// The walk. `read`: the ledger, when the goal is registered in it (and
/// the plan is its active revision: the caller checked).
pub fn walk(read: Option<&dyn LedgerRead>, plan: &Plan, now_ms: i64) -> Result<DryRun> {
    let goal_id = GoalId::new(&plan.goal().id);
    let standing = match read {
        Some(read) => Some(standing(read, plan, &goal_id)?),
        None => None,
    };
    let revision = standing.as_ref().map_or(Revision::FIRST, |s| s.revision);
    let scope = Scope { plan, goal_id: goal_id.clone(), revision };
    let budgets = standing.as_ref().map_or_else(|| plan.file.budgets.clone(), |s| s.budgets.clone());
    let mut done: HashSet<String> = HashSet::new();
    let mut spent = Projected::default();
    let mut tasks = Vec::new();
    for &i in &plan.order {
        let Some(task) = plan.file.tasks.get(i) else { continue };
        let line = line(read, standing.as_ref(), (&scope, task, &budgets), (&done, spent), now_ms)?;
        if matches!(line.verdict, "kept" | "reused" | "would run") {
            done.insert(task.task_ref.clone());
        }
        spent.provider_calls += line.provider_calls;
        spent.cost = spent.cost.plus(line.cost);
        tasks.push(line);
    }
    let all_done = tasks.iter().all(|t| done.contains(&t.task_ref));
    let (used_calls, used_cost) = standing.as_ref().map_or((0, Cost::ZERO), |s| s.used);
    Ok(DryRun {
        goal_id,
        revision: standing.as_ref().map(|s| s.revision),
        provider_calls: spent.provider_calls,
        cost: spent.cost,
        budgets: json!({
            "max_provider_calls": {"used": used_calls, "would_use": spent.provider_calls, "limit": budgets.max_provider_calls},
            "max_cost": {"used": used_cost, "would_use": spent.cost, "limit": budgets.max_cost()},
        }),
        acceptance_checks: all_done.then(|| plan.goal().acceptance.iter().filter(|a| a.check.is_some()).count()),
        not_observed: standing
            .map(|s| s.stale.into_iter().filter(|(_, v)| v.get("not_observed").is_some()).map(|(r, _)| r).collect())
            .unwrap_or_default(),
        tasks,
    })
}

/// Each task's state as a new run would look at it, the completions that
/// went stale (the reuse pass), the holds, and the budgets in force.
fn standing(read: &dyn LedgerRead, plan: &Plan, goal_id: &GoalId) -> Result<Standing> {
    let g = read.goal_or_latest(Some(goal_id))?;
    let revision = g.active_revision;
    let mut states = HashMap::new();
    for (r, s) in read.task_states(goal_id, revision)? {
        let settled = s == TaskState::EffectUnknown && read.first_unsettled_attempt(goal_id, &r)?.is_none();
        states.insert(r, scheduler::afresh(s, false, settled));
    }
    let scope = Scope { plan, goal_id: goal_id.clone(), revision };
    let list: Vec<(String, TaskState)> = {
        let mut l: Vec<_> = states.iter().map(|(r, s)| (r.clone(), *s)).collect();
        l.sort_by(|a, b| a.0.cmp(&b.0));
        l
    };
    let sandbox = providers::sandbox::Sandbox::disabled();
    let mut cache = FileCache::default();
    let asked = (list.as_slice(), &BTreeMap::new(), false, &BTreeSet::new());
    let pass = refresh::stale_in(read, &scope, asked, (&mut cache, &sandbox), (HashMap::new(), None), Starts::Nothing)?;
    let stale = pass.stale;
    let waits_for_retry = read
        .latest_attempts_in_state(goal_id, revision, AttemptState::SettledNotRun)?
        .into_iter()
        .filter(|a| states.get(&a.task_ref) != Some(&TaskState::AwaitingApproval))
        .map(|a| a.task_ref)
        .collect();
    let used = read.budget_use(goal_id)?;
    Ok(Standing {
        revision,
        states,
        stale: stale.into_iter().collect(),
        holds: crate::run::holds::holds(read, goal_id)?,
        waits_for_retry,
        budgets: crate::decide::raise::in_force(&plan.file.budgets, &crate::budgets::raises(read, goal_id)?),
        used: (used.calls, used.cost),
    })
}

fn said(task: &Task, verdict: &'static str, why: Option<String>) -> DryTask {
    DryTask { task_ref: task.task_ref.clone(), verdict, why, provider_calls: 0, cost: Cost::ZERO }
}

/// One task's line: its standing first (complete, held, waiting on a
/// person, a dependency), then the gate.
fn line(
    read: Option<&dyn LedgerRead>,
    standing: Option<&Standing>,
    (scope, task, budgets): (&Scope, &Task, &Budgets),
    (done, spent): (&HashSet<String>, Projected),
    now_ms: i64,
) -> Result<DryTask> {
    let r = task.task_ref.as_str();
    let state = standing.and_then(|s| s.states.get(r).copied()).unwrap_or(TaskState::Pending);
    let stale = standing.and_then(|s| s.stale.get(r));
    let stale_code = stale.and_then(|v| v.get("stale")).and_then(Value::as_str);
    if state.is_complete() && stale_code.is_none() {
        let why = stale
            .map(|_| "its checkpoint runs a context command: not observed (a dry run starts no process)".to_string());
        return Ok(said(task, if state == TaskState::Reused { "reused" } else { "kept" }, why));
    }
    if let Some(h) = standing.and_then(|s| s.holds.of(r)) {
        return Ok(said(task, "blocked", Some(format!("held by {}: {}", h.by, h.reason))));
    }
    if let Some(why) = waits_on_person(state, standing.is_some_and(|s| s.waits_for_retry.contains(r)), r) {
        return Ok(said(task, "blocked", Some(why)));
    }
    let waiting: Vec<&str> = task.depends_on.iter().filter(|d| !done.contains(*d)).map(String::as_str).collect();
    if !waiting.is_empty() {
        return Ok(said(task, "blocked", Some(format!("waits on {}", waiting.join(", ")))));
    }
    let reran = stale_code.map(|c| format!("{c}: {}", stale.and_then(|v| v["detail"].as_str()).unwrap_or_default()));
    // Put off for early cutoff (`core::cutoff`): the run keeps it instead
    // if its upstream's outputs come out byte-identical.
    let reran = match stale.and_then(|v| v.get("defer")).and_then(Value::as_bool) {
        Some(true) => reran.map(|w| format!("{w}; kept instead if its upstream's outputs come out byte-identical")),
        _ => reran,
    };
    let decision = match read {
        Some(read) => call_site::decision(read, scope, &call(scope, task, budgets, now_ms)?, (now_ms, spent))?,
        None => fresh(scope, task, budgets, spent),
    };
    Ok(match decision {
        Decision::Go { .. } => {
            DryTask { task_ref: r.to_string(), verdict: "would run", why: reran, provider_calls: 1, cost: task.cost() }
        }
        Decision::AwaitApproval(missing) => {
            let why = format!("cost {}; {}", task.cost(), missing.why());
            DryTask {
                task_ref: r.to_string(),
                verdict: "would wait for approval",
                why: Some(why),
                provider_calls: 0,
                cost: task.cost(),
            }
        }
        Decision::Budget(e) => said(task, "blocked", Some(format!("BUDGET_EXHAUSTED: {e}"))),
        Decision::AnswerExpired { .. } => {
            said(task, "blocked", Some(format!("its person's answer expired: `engine answer {}` again", task.task_ref)))
        }
        Decision::Unsettled { state, .. } => {
            said(task, "blocked", Some(format!("an earlier attempt is {state}: a person settles it first")))
        }
        Decision::SameRequest(first) => said(task, "blocked", Some(first.why())),
        Decision::Conflict { recorded } => said(
            task,
            "blocked",
            Some(format!("OPERATION_CONFLICT: its operation was recorded with request {recorded}")),
        ),
        Decision::PlanMoved { active } => {
            said(task, "blocked", Some(format!("PLAN_CHANGED: the goal is at revision {active}")))
        }
    })
}

/// A task a plain run does not start: it waits on a person's act.
fn waits_on_person(state: TaskState, settled_not_run: bool, r: &str) -> Option<String> {
    let r = crate::decide::advice::shell_word(r);
    match state {
        TaskState::Failed => Some(format!("failed earlier: a plain run does not run it again (`engine repair {r}`)")),
        TaskState::EffectUnknown => Some("its outcome is unknown: a person settles it first (`engine status`)".into()),
        TaskState::AwaitingInput => Some(format!("waits on a person's answer (`engine answer {r}`)")),
        _ if settled_not_run => Some(format!("settled not_run: only `engine retry {r}` sends it again")),
        _ => None,
    }
}

/// The call the run's gate would weigh (a plain run's: no repair, no retry).
fn call(scope: &Scope, task: &Task, budgets: &Budgets, now_ms: i64) -> Result<GateCall> {
    let d = scope
        .plan
        .digests()
        .tasks
        .get(&task.task_ref)
        .ok_or_else(|| crate::error::Error::internal(format!("task {} has no digests", task.task_ref)))?;
    let spec = scope.plan.provider_of(task);
    Ok(GateCall {
        task_ref: task.task_ref.clone(),
        operation_id: d.operation_id.clone(),
        request_digest: d.request.clone(),
        fingerprint: crate::plan::digests::request_fingerprint(spec, task, None, None),
        repair: None,
        asked_repeat: false,
        kind: AttemptKind::Run,
        request: json!({}),
        inputs_at_intent: None,
        protected: None,
        budgets: budgets.clone(),
        began_ms: now_ms,
        answer_expires: None,
    })
}

/// A goal not registered yet: the gate's decision with nothing recorded
/// (no attempt, no approval, no use).
fn fresh(scope: &Scope, task: &Task, budgets: &Budgets, spent: Projected) -> Decision {
    let (always, paid_or_external) = ApprovalFacts::of_task(task);
    let digest = crate::ids::RequestDigest::new("");
    let facts = gate::Facts {
        revision: scope.revision,
        active_revision: scope.revision,
        plan_digest: "",
        active_plan_digest: "",
        unsettled: None,
        same_request: None,
        conflict: None,
        request_digest: &digest,
        budgets,
        usage: crate::decide::budget::Usage {
            attempts_of_task: 0,
            provider_calls: spent.provider_calls,
            cost: spent.cost,
            elapsed_seconds: 0,
        },
        call_cost: task.cost(),
        may_spend: task.may_spend,
        approval: ApprovalFacts { always, paid_or_external, asked_repeat: false, prior_dispatch: false, open: &[] },
        now_ms: 0,
    };
    gate::decide(&facts)
}
