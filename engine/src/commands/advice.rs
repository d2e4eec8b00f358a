//! The facts `decide::advice` needs, read from the ledger. Every printer
//! (`status`, `explain`, `run`'s summary, the report) and every refusal
//! (`retry`, `repair`, `revise`) asks here, so they all name the same way
//! out of the same state.

use serde_json::{json, Value};

use crate::decide::advice::{self, Awaiting, Latest, Scope, Task, Way};
use crate::decide::budget::{BudgetName, Exhausted};
use crate::decide::gate::{stale_because, Now, OpenApproval};
use crate::error::{Code, Result};
use crate::ids::Revision;
use crate::state::{AttemptKind, AttemptState, GoalState};
use crate::store::acts::ApprovalRecord;
use crate::store::events::EventKind;
use crate::store::goals::{GoalRecord, TaskRecord};
use crate::store::LedgerRead;

/// Where a goal's commands apply, owned (the decision borrows it).
#[derive(Debug, Clone)]
pub struct Place {
    pub goal_id: String,
    pub goal_is_default: bool,
    pub plan_path: String,
}

impl Place {
    pub fn of(read: &dyn LedgerRead, g: &GoalRecord) -> Result<Place> {
        let latest = read.latest_goal()?;
        Ok(Place {
            goal_id: g.id.to_string(),
            goal_is_default: latest.is_some_and(|l| l.id == g.id),
            plan_path: read.revision(&g.id, g.active_revision)?.plan_path,
        })
    }

    pub fn scope(&self) -> Scope<'_> {
        Scope { goal_id: &self.goal_id, goal_is_default: self.goal_is_default, plan_path: &self.plan_path }
    }
}

/// A task's ways out, with the words that print them.
#[derive(Debug, Clone)]
pub struct Advised {
    /// `""` for the goal's own way out (a spent budget, a failed check of
    /// the goal), which `about` then says.
    pub task_ref: String,
    pub about: Option<String>,
    pub ways: Vec<Way>,
    plan_path: String,
}

impl Advised {
    /// `` `engine repair T` ``, or `` fix …, then `…`; or … ``.
    pub fn sentence(&self) -> String {
        advice::sentence(&self.ways, &self.plan_path, &self.task_ref)
    }

    pub fn plan_path(&self) -> &str {
        &self.plan_path
    }

    pub fn commands(&self) -> Vec<String> {
        advice::commands(&self.ways)
    }

    /// `{"task_ref", "about", "ways"}`: a task's (or, with `task_ref`
    /// null, the goal's) ways out, as `--json` lists them.
    pub fn entry(&self) -> Value {
        let task_ref = (!self.task_ref.is_empty()).then_some(self.task_ref.as_str());
        json!({"task_ref": task_ref, "about": self.about, "ways": self.json()})
    }

    /// `[{"first": words or null, "command": line}]`, as `--json` gives them.
    pub fn json(&self) -> Value {
        advice::json(&self.ways, &self.plan_path, &self.task_ref)
    }
}

/// The ways out of one task of `g`'s active revision.
pub fn of_task(read: &dyn LedgerRead, g: &GoalRecord, place: &Place, t: &TaskRecord) -> Result<Advised> {
    let attempts = read.attempts_of_task(&g.id, &t.task_ref)?;
    let latest = attempts.iter().rev().find(|a| a.revision == g.active_revision && a.state != AttemptState::Abandoned);
    let rule = latest.and_then(|a| a.classification.as_ref()).map(|c| c.rule.as_str());
    let awaiting = t.state == crate::state::TaskState::AwaitingApproval;
    let approvals = if awaiting { read.approvals_of_goal(&g.id)? } else { Vec::new() };
    let plan_digest = if awaiting { read.revision_plan_digest(&g.id, g.active_revision)? } else { String::new() };
    let instruction = match t.asked_by() {
        Some(AttemptKind::Repair) => repair_instruction(read, g, t)?,
        _ => None,
    };
    let op = t.pending_operation().unwrap_or(t.operation_id.as_str());
    let task = Task {
        task_ref: &t.task_ref,
        state: t.state,
        latest: latest.map(|a| Latest {
            operation_id: a.operation_id.as_str(),
            state: a.state,
            class: a.class(),
            rule,
        }),
        awaiting: Some(Awaiting {
            operation_id: op,
            approved: approval_given(&approvals, t, (g.active_revision, &plan_digest))
                .is_some_and(|(_, stale)| stale.is_empty()),
            asked_by: t.asked_by(),
            instruction: instruction.as_deref(),
        }),
        same_request: same_request_first(t),
    };
    let mut ways = advice::of_task(&task, &place.scope());
    if t.state == crate::state::TaskState::AwaitingInput {
        // What its MCP server asked decides the fields the command names.
        if let Some(a) = crate::run::AwaitingInput::of(&t.task_ref, &t.detail) {
            let goal = if place.scope().goal_is_default { String::new() } else { format!(" --goal {}", g.id) };
            ways = vec![advice::Way { before: None, command: format!("{}{goal}", a.answer_with) }];
        }
    }
    Ok(Advised { task_ref: t.task_ref.clone(), about: None, ways, plan_path: place.plan_path.clone() })
}

/// A task the gate blocked because its request is the same as another
/// operation's whose outcome is unknown: that operation (its detail,
/// written by the gate, says which).
fn same_request_first(t: &TaskRecord) -> Option<&str> {
    let first = t.detail.get("same_request")?;
    let unknown = first.get("state").and_then(Value::as_str) == Some(AttemptState::EffectUnknown.as_str());
    unknown.then(|| first.get("operation_id").and_then(Value::as_str)).flatten()
}

/// Every task of `g`'s active revision that waits on a person, in the
/// order given; then, for a goal that failed with no task to act on, the
/// way out of its failed check (as the task ref `""`).
pub fn of_goal(read: &dyn LedgerRead, g: &GoalRecord, tasks: &[TaskRecord]) -> Result<Vec<Advised>> {
    let place = Place::of(read, g)?;
    let mut out = Vec::new();
    for t in tasks {
        let a = of_task(read, g, &place, t)?;
        if !a.ways.is_empty() {
            out.push(a);
        }
    }
    if let Some((spent, ways)) = budget_spent(read, g, &place)? {
        let about = Some(format!("the last run stopped on a budget: {spent}"));
        out.push(Advised { task_ref: String::new(), about, ways, plan_path: place.plan_path.clone() });
    }
    if out.is_empty() && g.state == GoalState::Failed {
        out.push(Advised {
            task_ref: String::new(),
            about: Some("the goal's own check failed (an acceptance check, or a constraint's)".into()),
            ways: advice::of_goal_check(&place.scope()),
            plan_path: place.plan_path.clone(),
        });
    }
    Ok(out)
}

/// The way out of the budget the active revision's last run stopped on,
/// if it did and the limit in force is still the one it stopped at (a
/// raise since: a plain run goes on).
fn budget_spent(read: &dyn LedgerRead, g: &GoalRecord, place: &Place) -> Result<Option<(Exhausted, Vec<Way>)>> {
    let Some(e) = read.latest_event(&g.id, g.active_revision, EventKind::RunFinished)? else { return Ok(None) };
    if e.data.get("code").and_then(Value::as_str) != Some(Code::BudgetExhausted.as_str()) {
        return Ok(None);
    }
    let b = &e.data["budget"];
    let (Some(budget), Some(used), Some(limit)) =
        (b["budget"].as_str().and_then(BudgetName::parse), b["used"].as_f64(), b["limit"].as_f64())
    else {
        return Ok(None);
    };
    let requested = b["requested"].as_f64().unwrap_or(0.0);
    let detail = b["detail"].as_str().map(str::to_string);
    let spent = Exhausted { budget, used, limit, requested, detail };
    let plan = super::active_plan(read, &g.id)?;
    let now = crate::budgets::in_force(read, &g.id, g.active_revision, &plan.budgets)?;
    let limit_now = match budget {
        BudgetName::DeadlineSeconds => now.deadline_seconds as f64,
        BudgetName::MaxAttemptsPerTask => f64::from(now.max_attempts_per_task),
        BudgetName::MaxProviderCalls => now.max_provider_calls as f64,
        BudgetName::MaxCost => now.max_cost,
        BudgetName::MaxRevisions => f64::from(now.max_revisions),
    };
    let ways = match limit_now > limit {
        true => vec![Way { before: None, command: format!("engine run {}", advice::shell_word(&place.plan_path)) }],
        false => advice::of_budget(budget, &crate::decide::raise::suggested(&spent), &place.scope()),
    };
    Ok(Some((spent, ways)))
}

/// What waits on a person in `g`'s active revision, in words, leaving out
/// the ways that revise the plan (for `engine revise` given the very plan
/// in force: nothing to revise). Empty when nothing waits.
pub fn besides_revising(read: &dyn LedgerRead, g: &GoalRecord) -> Result<String> {
    let tasks = read.tasks(&g.id, g.active_revision)?;
    let mut parts = Vec::new();
    for mut a in of_goal(read, g, &tasks)? {
        a.ways.retain(|w| !w.command.starts_with("engine revise "));
        if !a.ways.is_empty() {
            parts.push(a.sentence());
        }
    }
    Ok(parts.join("; or "))
}

/// The approval given for the request `t` waits on, not spent or voided,
/// with why it is stale for that call in `active` (its goal's active
/// revision and plan digest; empty: it pays for the call), as the gate
/// will weigh it (`decide::gate::stale_because`).
pub fn approval_given<'a>(
    approvals: &'a [ApprovalRecord],
    t: &TaskRecord,
    active: (Revision, &str),
) -> Option<(&'a ApprovalRecord, Vec<String>)> {
    let op = t.pending_operation().unwrap_or(t.operation_id.as_str());
    let request = t.detail.get("request_digest").and_then(Value::as_str);
    let a = approvals.iter().rev().find(|a| {
        a.consumed_by.is_none()
            && a.voided_by.is_none()
            && a.operation_id.as_str() == op
            && request.is_none_or(|r| a.request_digest.as_str() == r)
    })?;
    Some((a, stale(a, active)))
}

/// Why an open approval is stale in `active` (the goal's active revision
/// and its plan digest): empty when it still pays for its call.
pub fn stale(a: &ApprovalRecord, active: (Revision, &str)) -> Vec<String> {
    let open = OpenApproval {
        id: a.id,
        request_digest: a.request_digest.clone(),
        plan_digest: a.plan_digest.clone(),
        revision: a.revision,
        cost: a.cost,
        expires_at_ms: a.expires_at_ms,
    };
    let (revision, plan_digest) = active;
    let mut why = stale_because(&open, &Now { request_digest: None, revision, plan_digest, call_cost: None });
    if let Some(at) = a.expires_at_ms.filter(|_| open.expired(crate::clock::now_ms())) {
        why.push(format!("expired at {} UTC: it pays for no call; a new approval is needed", crate::clock::utc(at)));
    }
    why
}

/// The instruction of the repair whose call waits on an approval: part of
/// its request, so the command that spends the approval repeats it.
fn repair_instruction(read: &dyn LedgerRead, g: &GoalRecord, t: &TaskRecord) -> Result<Option<String>> {
    let Some(e) = read.latest_event(&g.id, g.active_revision, EventKind::RepairRequested)? else { return Ok(None) };
    let same_task = e.task_ref.as_deref() == Some(t.task_ref.as_str());
    let same_op = e.data.get("operation_id").and_then(Value::as_str) == t.pending_operation();
    Ok(match same_task && same_op {
        true => e.data.get("instruction").and_then(Value::as_str).map(str::to_string),
        false => None,
    })
}
