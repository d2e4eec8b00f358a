//! `engine status`: the goal, its active revision, every task's state,
//! operations waiting on a person, and budgets used.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::Output;
use providers::sandbox::{NetStatus, NsStatus, Record, Status};

use crate::clock::utc;
use crate::commands::advice::Advised;
use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::PlanFile;
use crate::state::{AttemptState, TaskState};
use crate::store::acts::{ActRef, ApprovalRecord};
use crate::store::attempts::{number_in, AttemptRecord};
use crate::store::goals::{GoalRecord, TaskRecord};
use crate::store::{Holder, LedgerRead, Store};

pub fn render(store: &Store, goal: Option<&GoalId>) -> Result<Output> {
    let view = store.read();
    let ledger: &dyn LedgerRead = &*view;
    let g = ledger.goal_or_latest(goal)?;
    let rev = ledger.revision(&g.id, g.active_revision)?;
    let plan = stored_plan(&rev.plan_json, store.path())?;
    let tasks = tasks_in_plan_order(ledger, &g, &plan)?;

    let machine = crate::run::sandboxes::machine_status()?;
    let not_checked = plan.goal.as_ref().map_or(0, |x| x.constraints.iter().filter(|c| c.checked().is_none()).count());
    let verdict = crate::decide::verdict::word(g.state, not_checked);
    let mut text = heading(&g, &plan, (verdict, not_checked), &machine, store.path());
    let plan_file_changed = crate::commands::plan_watch::changed_during(ledger, &g.id, g.active_revision)?;
    if let Some(run) = plan_file_changed {
        text.push_str(&plan_file_changed_words(run, &rev.plan_path, g.active_revision));
    }
    // Act rows the chain does not vouch for: said first, and never counted
    // as the acts they claim to be.
    let tampered = ledger.unvouched_acts(Some(&g.id))?;
    for t in &tampered {
        text.push_str(&format!("{}\n", t.words()));
    }
    if !tampered.is_empty() {
        text.push('\n');
    }
    let (forged, approvals) = open_approvals(ledger, &g.id, &tampered)?;
    let waiting = Waiting {
        plan_path: rev.plan_path.clone(),
        active: (g.active_revision, rev.plan_digest.clone()),
        costs: plan.tasks.iter().map(|t| (t.task_ref.clone(), t.cost())).collect(),
        approvals,
        forged,
        unknown: ledger.attempts_in_state(&g.id, AttemptState::EffectUnknown)?,
        in_doubt: ledger.attempts_in_doubt(&g.id)?,
        awaiting: tasks.iter().filter(|t| t.state == TaskState::AwaitingApproval).collect(),
        not_run: ledger.latest_attempts_in_state(&g.id, g.active_revision, AttemptState::SettledNotRun)?,
    };
    // A task whose approval was given keeps its ledger state until the call
    // spends it; its row says so, so `awaiting_approval` is not read as
    // "nobody approved".
    let approved = waiting.approved();
    let advised = crate::commands::advice::of_goal(ledger, &g, &tasks)?;
    let rows = task_table(ledger, &g, &plan, &tasks, &approved, &advised, &mut text)?;
    waiting.describe(&store.live_holder()?, &advised, &tasks, &mut text);
    let awaiting_input = awaiting_input(&tasks, &mut text);
    let held = held(ledger, &g.id, &tasks, &mut text)?;
    let acts = super::person_acts::of_goal(ledger, &g.id, &tampered, &mut text)?;
    let budgets = budgets(ledger, &g, &plan, &tasks, &mut text)?;
    let json = json!({
        "store": store.path(),
        "sandbox": machine,
        "acts": acts,
        "store_tampered": tampered,
        "goal": {"id": g.id, "state": g.state, "verdict": verdict, "constraints_not_checked": not_checked,
            "active_revision": g.active_revision},
        "tasks": rows,
        "effect_unknown": waiting.unknown_json(),
        "awaiting_approval": waiting.awaiting.iter().map(|t| waiting.awaiting_json(t, &advised)).collect::<Vec<_>>(),
        "awaiting_input": awaiting_input,
        "settled_not_run": waiting.not_run.iter().map(|a| json!({"operation_id": a.operation_id, "task_ref": a.task_ref, "try": a.try_no})).collect::<Vec<_>>(),
        "in_doubt": waiting.in_doubt_json(),
        "budgets": budgets,
        "next": advised.iter().map(Advised::entry).collect::<Vec<_>>(),
        "plan_file_changed_during_run": plan_file_changed,
        "held": held,
    });
    Ok(Output { text, json, exit_code: 0 })
}

/// The revision's plan as the store keeps it.
fn stored_plan(plan_json: &str, store: &std::path::Path) -> Result<PlanFile> {
    serde_json::from_str(plan_json).map_err(|e| {
        Error::new(crate::error::Code::StoreCorrupt, format!("stored plan does not parse: {e}"))
            .at(store.display().to_string())
    })
}

/// The status's first lines: the goal, its revision, its state in words,
/// the store and the sandbox.
fn heading(
    g: &GoalRecord,
    plan: &PlanFile,
    (verdict, not_checked): (&str, usize),
    machine: &impl std::fmt::Display,
    store: &std::path::Path,
) -> String {
    let state_words = match verdict {
        "completed" => format!("completed ({} not checked)", super::count(not_checked, "constraint")),
        word => word.to_string(),
    };
    format!(
        "goal      {}  ({})\nrevision  {}\nstate     {}\nstore     {}\nsandbox   {machine} on this machine\n\n",
        g.id,
        plan.goal.as_ref().map_or("", |x| x.statement.as_str()),
        g.active_revision,
        state_words,
        store.display()
    )
}

/// The goal's tasks in the plan's order (a task the plan no longer names
/// last).
fn tasks_in_plan_order(ledger: &dyn LedgerRead, g: &GoalRecord, plan: &PlanFile) -> Result<Vec<TaskRecord>> {
    let order: Vec<&str> = plan.tasks.iter().map(|t| t.task_ref.as_str()).collect();
    let mut tasks = ledger.tasks(&g.id, g.active_revision)?;
    let position: std::collections::HashMap<&str, usize> = order.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    tasks.sort_by_key(|t| position.get(t.task_ref.as_str()).copied().unwrap_or(usize::MAX));
    Ok(tasks)
}

/// The plan file was edited during `run`, not by `engine revise`.
fn plan_file_changed_words(run: u64, plan_path: &str, revision: Revision) -> String {
    format!(
        "plan file {} changed during run {run}, not by `engine revise`: runs execute revision {revision} as recorded; \
         `engine revise {} --reason TEXT` shows what the change loosens\n\n",
        super::escape::for_terminal(plan_path),
        super::escape::for_terminal(plan_path)
    )
}

/// The goal's approvals not spent nor voided: those whose rows the chain
/// does not vouch for (forged), and the others.
fn open_approvals(
    ledger: &dyn LedgerRead,
    goal: &GoalId,
    tampered: &[crate::store::acts::Tampered],
) -> Result<(Vec<ApprovalRecord>, Vec<ApprovalRecord>)> {
    let is_tampered = |a: &ApprovalRecord| tampered.iter().any(|t| t.act == ActRef::Approval(a.id));
    Ok(ledger
        .approvals_of_goal(goal)?
        .into_iter()
        .filter(|a| a.consumed_by.is_none() && a.voided_by.is_none())
        .partition(is_tampered))
}

/// What a task's MCP server asked a person, escaped, with the answer's
/// command: the words into `text`, the JSON returned.
fn awaiting_input(tasks: &[TaskRecord], text: &mut String) -> Vec<Value> {
    let mut awaiting_input = Vec::new();
    for t in tasks.iter().filter(|t| t.state == TaskState::AwaitingInput) {
        if let Some((words, json)) = super::question::waiting(&t.task_ref, &t.detail, "  ") {
            text.push_str(&words);
            awaiting_input.push(json);
        }
    }
    awaiting_input
}

/// The holds in force (`engine hold`): each held task not yet complete,
/// who holds it and why, and the command that releases it.
fn held(ledger: &dyn LedgerRead, goal: &GoalId, tasks: &[TaskRecord], text: &mut String) -> Result<Value> {
    let holds = crate::run::holds::holds(ledger, goal)?;
    let mut out = Vec::new();
    if let Some(h) = &holds.goal {
        let release = format!("engine release --goal {}", crate::decide::advice::shell_word(goal.as_str()));
        out.push(json!({"task_ref": null, "by": h.by, "reason": h.reason, "since": utc(h.at_ms), "release": release}));
        text.push_str(&format!(
            "\nheld      the goal, by {}: {} (since {}; release with `{release}`)\n",
            super::escape::for_terminal(&h.by),
            super::escape::for_terminal(&h.reason),
            utc(h.at_ms)
        ));
    }
    for t in tasks.iter().filter(|t| !t.state.is_complete()) {
        let Some(h) = holds.tasks.get(&t.task_ref) else { continue };
        let release = format!("engine release {}", crate::decide::advice::shell_word(&t.task_ref));
        out.push(
            json!({"task_ref": t.task_ref, "by": h.by, "reason": h.reason, "since": utc(h.at_ms), "release": release}),
        );
        text.push_str(&format!(
            "\nheld      {}, by {}: {} (since {}; release with `{release}`)\n",
            super::escape::for_terminal(&t.task_ref),
            super::escape::for_terminal(&h.by),
            super::escape::for_terminal(&h.reason),
            utc(h.at_ms)
        ));
    }
    Ok(Value::Array(out))
}

/// One line per task (appended to `text`) and its JSON row; then, for each
/// succeeded or reused task, whether a later revision could reuse it.
fn task_table(
    ledger: &dyn LedgerRead,
    g: &GoalRecord,
    plan: &PlanFile,
    tasks: &[TaskRecord],
    approved: &[(&str, bool)],
    advised: &[Advised],
    text: &mut String,
) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    let mut standings = Vec::new();
    let width = tasks.iter().map(|t| t.task_ref.len()).max().unwrap_or(4).max(4);
    text.push_str(&format!("  {}  {:<18}  {:>8}  {}\n", super::pad("TASK", width), "STATE", "ATTEMPTS", "LAST"));
    let upstream = upstream_of(plan, tasks);
    let conditions = on_condition(ledger, g, tasks)?;
    for t in tasks {
        let all = ledger.attempts_of_task(&g.id, &t.task_ref)?;
        let attempts: Vec<_> = all.iter().filter(|a| a.revision == g.active_revision).collect();
        let last = attempts.last().copied();
        let last_text = match last {
            Some(a) => match a.class() {
                Some(c) => format!("{} ({c})", a.state),
                None => a.state.to_string(),
            },
            None => "-".into(),
        };
        // A sandbox weaker than enforced is said on the line itself.
        let sandbox = last.and_then(|a| a.sandbox.as_ref()).map(weaker).filter(|w| !w.is_empty());
        let last_text = match sandbox {
            Some(w) => format!("{last_text}  [{w}]"),
            None => last_text,
        };
        // Reused on condition: it waits on its upstreams' run, not stale.
        let condition = conditions.get(&t.task_ref);
        let up = upstream.get(&t.task_ref).filter(|_| condition.is_none());
        let note = match (approved.iter().find(|(r, _)| *r == t.task_ref), up, condition) {
            (Some((_, true)), _, _) => "  (approved, not spent yet)".to_string(),
            (Some((_, false)), _, _) => "  (its approval is stale)".to_string(),
            (None, Some(u), _) => format!("  ({})", u.reason()),
            (None, None, Some((_, words))) => format!("  (on condition: {words}; the next run decides)"),
            (None, None, None) => String::new(),
        };
        text.push_str(&format!(
            "  {}  {:<18}  {:>8}  {}{note}\n",
            super::pad(&t.task_ref, width),
            up.map_or(t.state.as_str(), |u| u.word()),
            attempts.len(),
            last_text
        ));
        let standing = super::standing::of_task(ledger, &g.id, g.active_revision, plan, &t.task_ref, t.state)?;
        let next = advised.iter().find(|a| a.task_ref == t.task_ref).map_or(json!([]), Advised::json);
        rows.push(json!({"ref": t.task_ref, "state": t.state, "attempts": attempts.len(), "operation_id": t.operation_id,
            "last_attempt": last.map(|a| json!({"id": a.id, "number": number_in(&all, a.id), "try": a.try_no, "state": a.state, "classification": a.classification,
                "sandbox": a.sandbox, "handle": a.handle})),
            "completion": standing.as_ref().map(|s| &s.json), "next": next, "upstream": up,
            "condition": condition.map(|(on, words)| json!({"early_cutoff_on": on, "words": words}))}));
        if let Some(s) = standing {
            standings.push(format!("  {}  {}\n", super::pad(&t.task_ref, width), s.text));
        }
    }
    if !standings.is_empty() {
        text.push_str("\ncompletions (what a later revision may reuse):\n");
        text.extend(standings);
    }
    Ok(rows)
}

/// The tasks `engine revise` reused on condition that no run has decided
/// yet (`decide::reuse::cutoff::waits_on`): what each waits on, in words.
fn on_condition(
    ledger: &dyn LedgerRead,
    g: &GoalRecord,
    tasks: &[TaskRecord],
) -> Result<HashMap<String, (Vec<String>, String)>> {
    use crate::decide::reuse::cutoff;
    if !tasks.iter().any(|t| t.state == TaskState::Reused && t.detail.get("early_cutoff_on").is_some()) {
        return Ok(HashMap::new());
    }
    let kept: std::collections::HashSet<String> = ledger
        .events_of_goal(&g.id, crate::store::events::EventKind::CompletionKept)?
        .into_iter()
        .filter(|e| e.revision == Some(g.active_revision))
        .filter_map(|e| e.task_ref)
        .collect();
    Ok(tasks
        .iter()
        .filter(|t| t.state == TaskState::Reused)
        .filter_map(|t| {
            let on = cutoff::waits_on(&t.detail, kept.contains(&t.task_ref))?;
            let words = cutoff::condition_words(&on)?;
            Some((t.task_ref.clone(), (on, words)))
        })
        .collect())
}

/// Each completed task whose dependency failed since or runs again.
fn upstream_of(plan: &PlanFile, tasks: &[TaskRecord]) -> HashMap<String, crate::decide::upstream::Upstream> {
    let states: HashMap<&str, TaskState> = tasks.iter().map(|t| (t.task_ref.as_str(), t.state)).collect();
    let rows: Vec<(&str, &[String], TaskState)> = plan
        .tasks
        .iter()
        .filter_map(|t| states.get(t.task_ref.as_str()).map(|&s| (t.task_ref.as_str(), t.depends_on.as_slice(), s)))
        .collect();
    crate::decide::upstream::all(rows.into_iter())
}

/// The operations that wait on a person or on the next run.
struct Waiting<'t> {
    /// The plan file of the active revision (the command that spends an
    /// approval given for a plain run names it).
    plan_path: String,
    /// The goal's active revision and its plan digest: what an approval
    /// must still bind to pay for a call.
    active: (Revision, String),
    /// Each task's cost per call in the active plan.
    costs: HashMap<String, Cost>,
    /// Approvals given and not yet spent or voided.
    approvals: Vec<ApprovalRecord>,
    /// Open approval rows the act chain does not vouch for: no approval.
    forged: Vec<ApprovalRecord>,
    unknown: Vec<AttemptRecord>,
    in_doubt: Vec<AttemptRecord>,
    awaiting: Vec<&'t TaskRecord>,
    not_run: Vec<AttemptRecord>,
}

impl Waiting<'_> {
    /// The operations whose outcome no one knows, for `--json`.
    fn unknown_json(&self) -> Vec<Value> {
        let one = |a: &AttemptRecord| {
            json!({"operation_id": a.operation_id, "task_ref": a.task_ref, "try": a.try_no,
                "request_digest": a.request_digest, "reason": a.unknown_reason, "handle": a.handle})
        };
        self.unknown.iter().map(one).collect()
    }

    /// The operations in doubt, for `--json`.
    fn in_doubt_json(&self) -> Vec<Value> {
        let one = |a: &AttemptRecord| {
            json!({"operation_id": a.operation_id, "task_ref": a.task_ref, "try": a.try_no, "state": a.state,
                "handle": a.handle})
        };
        self.in_doubt.iter().map(one).collect()
    }

    /// Each in words, with the commands that act on it (`report::next`):
    /// what waits on an approval, a re-send, a settlement, a decision on
    /// a failure; and what waits on an engine (in doubt).
    fn describe(&self, live: &Option<Holder>, advised: &[Advised], tasks: &[TaskRecord], text: &mut String) {
        if !self.unknown.is_empty() || !self.in_doubt.is_empty() || !advised.is_empty() {
            text.push_str("\nwaiting on a person or on the next run:\n");
        }
        let next = |task_ref: &str, text: &mut String| {
            if let Some(a) = advised.iter().find(|a| a.task_ref == task_ref) {
                text.push_str(&super::next::of(a, "    "));
            }
        };
        for t in &self.awaiting {
            text.push_str(&self.approval_line(t));
            if self.forged_for(t).is_none() {
                next(&t.task_ref, text);
            }
        }
        for a in &self.not_run {
            text.push_str(&format!("  {}  task {}  settled not_run, not re-sent\n", a.operation_id, a.task_ref));
            next(&a.task_ref, text);
        }
        for a in &self.unknown {
            text.push_str(&format!(
                "  {}  task {}  try {}  effect_unknown ({}){}\n",
                a.operation_id,
                a.task_ref,
                a.try_no,
                a.unknown_reason.map_or("?", |r| r.as_str()),
                accepted_as(a),
            ));
            // An older revision's unknown outcome is settled all the same.
            let ways = crate::decide::advice::settle(a.operation_id.as_str());
            text.push_str(&super::next::lines(&ways, &self.plan_path, &a.task_ref, "    "));
        }
        for t in tasks.iter().filter(|t| t.state == TaskState::Failed) {
            let class = match (t.class(), t.why()) {
                (Some(c), Some(rule)) => format!(": {c} (rule {rule})"),
                (Some(c), None) => format!(": {c}"),
                _ => String::new(),
            };
            text.push_str(&format!("  {}  failed{class}\n", t.task_ref));
            next(&t.task_ref, text);
        }
        self.describe_others(advised, tasks, text);
        for a in &self.in_doubt {
            let note = in_doubt_note(a, live);
            text.push_str(&format!(
                "  {}  task {}  try {}  {}{} ({note})\n",
                a.operation_id,
                a.task_ref,
                a.try_no,
                a.state,
                accepted_as(a)
            ));
        }
    }

    /// Any other task a way waits on: a stopped run's, a settlement `ok`
    /// whose validations have not run yet; and what the goal waits on.
    fn describe_others(&self, advised: &[Advised], tasks: &[TaskRecord], text: &mut String) {
        let shown = |r: &str| {
            self.awaiting.iter().any(|t| t.task_ref == r)
                || self.not_run.iter().any(|a| a.task_ref == r)
                || self.unknown.iter().any(|a| a.task_ref == r)
                || tasks.iter().any(|t| t.task_ref == r && t.state == TaskState::Failed)
        };
        for a in advised.iter().filter(|a| !a.task_ref.is_empty() && !shown(&a.task_ref)) {
            let state = tasks.iter().find(|t| t.task_ref == a.task_ref).map(|t| t.state);
            let words = match state {
                Some(TaskState::Running) => "settled by a person; its validations have not run yet".to_string(),
                Some(state) => state.to_string(),
                None => String::new(),
            };
            text.push_str(&format!("  {}  {words}\n", a.task_ref));
            text.push_str(&super::next::of(a, "    "));
        }
        for goal in advised.iter().filter(|a| a.task_ref.is_empty()) {
            text.push_str(&format!("  goal: {}\n", goal.about.as_deref().unwrap_or_default()));
            text.push_str(&super::next::of(goal, "    "));
        }
    }
}

/// The provider's own name for the request, when it accepted one (so a
/// person settling it can ask the provider about it).
fn accepted_as(a: &AttemptRecord) -> String {
    a.handle.as_ref().map(|h| format!(", accepted as {}", crate::evidence::handle_words(h))).unwrap_or_default()
}

impl Waiting<'_> {
    /// The tasks whose call an approval was given for, and whether it
    /// still pays for the call (`false`: stale).
    fn approved(&self) -> Vec<(&str, bool)> {
        let given = |t: &TaskRecord| self.approval_for(t).map(|(_, stale)| stale.is_empty());
        self.awaiting.iter().filter_map(|t| given(t).map(|fresh| (t.task_ref.as_str(), fresh))).collect()
    }

    /// The line of a call waiting on an approval: its cost, and the
    /// approval given for it (waiting to be spent, or stale), if any.
    fn approval_line(&self, t: &TaskRecord) -> String {
        let op = t.pending_operation().unwrap_or(t.operation_id.as_str());
        let cost = self.cost_of(t);
        match self.approval_for(t) {
            // The gate refuses to dispatch past a row the chain does
            // not vouch for: approving again does not help.
            _ if self.forged_for(t).is_some() => format!(
                "  {op}  task {}  awaiting_approval; approvals row {} claims to approve it but is STORE_TAMPERED: nothing is dispatched past it  -> engine verify\n",
                t.task_ref,
                self.forged_for(t).map_or(0, |a| a.id.get()),
            ),
            Some((a, stale)) if stale.is_empty() => format!(
                "  {op}  task {}  cost {cost}  approved by {} (approval #{}, {}), not spent yet: the call that spends it is next\n",
                t.task_ref,
                super::escape::for_terminal(&a.actor),
                a.id,
                utc(a.at_ms),
            ),
            Some((a, stale)) => format!(
                "  {op}  task {}  cost {cost}  awaiting_approval: approval #{} by {} is stale ({}); a new approval is needed\n",
                t.task_ref,
                a.id,
                super::escape::for_terminal(&a.actor),
                stale.join("; "),
            ),
            None => format!(
                "  {op}  task {}  cost {cost}  awaiting_approval ({})\n",
                t.task_ref,
                t.why().unwrap_or("approval required")
            ),
        }
    }

    /// The approval given for the request `t` waits on, not spent yet,
    /// and why it is stale (empty: it pays for the call).
    fn approval_for(&self, t: &TaskRecord) -> Option<(&ApprovalRecord, Vec<String>)> {
        crate::commands::advice::approval_given(&self.approvals, t, (self.active.0, &self.active.1))
    }

    /// What the call `t` waits on costs, as the active plan declares it.
    fn cost_of(&self, t: &TaskRecord) -> Cost {
        self.costs.get(&t.task_ref).copied().unwrap_or(Cost::ZERO)
    }

    /// An open approval row of the request `t` waits on that the act
    /// chain does not vouch for.
    fn forged_for(&self, t: &TaskRecord) -> Option<&ApprovalRecord> {
        let op = t.pending_operation().unwrap_or(t.operation_id.as_str());
        self.forged.iter().find(|a| a.operation_id.as_str() == op)
    }

    /// The command whose call spends the approval: the one that asked.
    fn awaiting_json(&self, t: &TaskRecord, advised: &[Advised]) -> Value {
        let approval = self.approval_for(t);
        let next = advised.iter().find(|a| a.task_ref == t.task_ref).and_then(|a| a.commands().into_iter().next());
        json!({
            "task_ref": t.task_ref,
            "operation_id": t.detail.get("operation_id").cloned().unwrap_or(json!(t.operation_id)),
            "why": t.detail.get("why"),
            "cost": self.cost_of(t),
            "approval": approval.map(|(a, stale)| json!({"id": a.id, "actor": a.actor, "at": utc(a.at_ms),
                "stale": (!stale.is_empty()).then(|| stale.join("; "))})),
            "store_tampered": self.forged_for(t).map(|a| format!("approvals row {}", a.id)),
            "next": match self.forged_for(t) {
                Some(_) => Some("engine verify".to_string()),
                None => next,
            },
        })
    }
}

/// Who is answerable for an attempt without a receipt.
fn in_doubt_note(a: &AttemptRecord, live: &Option<Holder>) -> String {
    match live {
        // Only the engine that wrote the intent (same lease generation)
        // can still be waiting on its answer.
        Some(h) if h.generation == a.generation => format!("in flight: engine pid {} on {} is running it", h.pid, h.host),
        Some(h) => format!(
            "no receipt; written by lease generation {}, the store is now held by pid {} (generation {}), which reconciles it",
            a.generation, h.pid, h.generation
        ),
        None => "no receipt, and no engine is running: the next `engine run` reconciles it".to_string(),
    }
}

/// The budgets used (appended to `text`) and their JSON.
fn budgets(
    ledger: &dyn LedgerRead,
    g: &GoalRecord,
    plan: &PlanFile,
    tasks: &[TaskRecord],
    text: &mut String,
) -> Result<Value> {
    let b = &crate::budgets::in_force(ledger, &g.id, g.active_revision, &plan.budgets)?;
    let used = ledger.budget_use(&g.id)?;
    let (calls, cost) = (used.calls, used.cost);
    let mut max_attempts_used = 0;
    for t in tasks {
        max_attempts_used = max_attempts_used.max(ledger.attempt_count(&g.id, g.active_revision, &t.task_ref)?);
    }
    text.push_str(&format!(
        "\nbudgets\n  provider calls        {calls} of {}\n  cost                  {cost} of {}\n  attempts (most/task)  {max_attempts_used} of {}\n  revisions             {} of {}\n  deadline              {}s per run (from the start of each run, repair, retry or revise)\n",
        b.max_provider_calls, b.max_cost, b.max_attempts_per_task, g.active_revision.get() - 1, b.max_revisions, b.deadline_seconds
    ));
    Ok(json!({
        "max_provider_calls": {"used": calls, "limit": b.max_provider_calls},
        "max_cost": {"used": cost, "limit": b.max_cost},
        "max_attempts_per_task": {"used": max_attempts_used, "limit": b.max_attempts_per_task},
        "max_revisions": {"used": g.active_revision.get() - 1, "limit": b.max_revisions},
        "deadline_seconds": {"limit": b.deadline_seconds, "per": "run"},
    }))
}

/// What of an attempt's sandbox is weaker than its plan asked: files not
/// fully confined, a network not restricted, stores not hidden, no seccomp
/// filter. Empty when nothing is.
fn weaker(r: &Record) -> String {
    let mut parts = Vec::new();
    if !matches!(r.files, Status::Enforced { .. }) {
        parts.push(format!("sandbox {}", r.files));
    }
    if let Some(NetStatus::Unavailable { .. }) = r.network {
        parts.push("network not restricted".to_string());
    }
    if let Some(NsStatus::Unavailable { .. }) = r.stores {
        parts.push("stores not hidden".to_string());
    }
    if let Some(providers::sandbox::Privileges::Partial { .. }) = r.privileges {
        parts.push("no seccomp filter".to_string());
    }
    parts.join("; ")
}
