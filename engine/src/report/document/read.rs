//! Every ledger read of `engine report`, in one place: this module builds
//! the `ReportDocument` from the ledger (one snapshot of it) and nothing
//! else in the report touches the ledger.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::model::*;
use super::{timeline, waiting, words};
use crate::decide::reuse::Decision;
use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, Revision};
use crate::plan::{Budgets as PlanBudgets, PlanFile, Task};
use crate::state::{AttemptState, TaskState};
use crate::store::acts::{ActRef, ApprovalRecord, SettlementRecord, Tampered};
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventKind;
use crate::store::evidence::{CheckResultRecord, CheckScope, ChecksOf, TimedEvidence};
use crate::store::goals::{GoalRecord, TaskRecord};
use crate::store::{LedgerRead, Store};

/// Which goal and revision to report, and the generation time to print
/// (`None`: no time, so the same ledger gives the same bytes).
pub struct Request<'a> {
    pub goal: Option<&'a str>,
    pub revision: Option<i64>,
    pub generated_at_ms: Option<i64>,
}

pub fn build(store: &Store, req: &Request) -> Result<ReportDocument> {
    store.snapshot(|l| build_in(l, req))
}

fn build_in(l: &dyn LedgerRead, req: &Request) -> Result<ReportDocument> {
    let goal = req.goal.map(GoalId::new);
    let g = l.goal_or_latest(goal.as_ref())?;
    let active = g.active_revision.get();
    let number = revision_asked(&g.id, active, req.revision)?;
    let rev = l.revision(&g.id, Revision(number))?;
    let plan = parse_plan(&rev.plan_json, number)?;
    let (revisions, lowest_max_revisions) = revisions(l, &g.id, active)?;
    let tampered = l.unvouched_acts(Some(&g.id))?;
    let tasks = tasks(l, &g.id, number, &plan, &tampered)?;
    let (acceptance, marks) = acceptance(l, &g.id, number, &plan)?;
    let timeline =
        timeline::timeline(tasks.iter().flat_map(|t| &t.report.attempts).filter(|a| a.revision == number), marks);
    let budgets = budgets(l, &g, &plan, &tasks, number, lowest_max_revisions, timeline.end_ms)?;
    let waiting = waiting_list(l, &g, number == active, number, &tasks)?;
    let goal_spec = plan.goal.as_ref();
    let unchecked: Vec<String> = acceptance.iter().filter(|a| a.check.is_none()).map(|a| a.id.clone()).collect();
    let constraints: Vec<ConstraintLine> =
        goal_spec.map(|x| x.constraints.iter().map(ConstraintLine::of).collect()).unwrap_or_default();
    let checks = acceptance.len() - unchecked.len();
    let plain = constraints.iter().any(|c| !c.checked_by_engine);
    let settled = settled_ok_tasks(&tasks, number);
    let not_checked = constraints.iter().filter(|c| !c.checked_by_engine).count();
    let state = crate::decide::verdict::word(g.state, not_checked);
    let (claims, does_not_claim) = words::goal_words(state, checks, &unchecked, plain, &settled);
    Ok(ReportDocument {
        format: FORMAT.into(),
        engine_version: crate::report::VERSION.into(),
        generated_at: req.generated_at_ms.map(rfc3339),
        goal: GoalSection {
            id: g.id.to_string(),
            statement: goal_spec.map(|x| x.statement.clone()).unwrap_or_default(),
            state: state.into(),
            claims,
            does_not_claim,
            active_revision: active,
            first_run_at_ms: g.first_run_at_ms,
            acceptance,
            constraints,
            revisions,
        },
        revision: RevisionSection {
            number,
            active: number == active,
            plan_path: rev.plan_path.clone(),
            plan_digest: rev.plan_digest.clone(),
            goal_contract_digest: rev.goal_contract.clone(),
            reason: rev.reason.clone(),
            runs: runs(l, &g.id, number)?,
        },
        budgets,
        tasks: tasks.into_iter().map(|t| t.report).collect(),
        waiting,
        timeline,
        store_tampered: tampered
            .iter()
            .map(|t| TamperedRow {
                code: t.code.to_string(),
                row: t.row.clone(),
                problem: t.problem.clone(),
                words: t.words(),
            })
            .collect(),
    })
}

/// The revision `--revision` names (the active one without it), if the
/// goal has it.
fn revision_asked(goal: &GoalId, active: i64, asked: Option<i64>) -> Result<i64> {
    let number = asked.unwrap_or(active);
    if !(1..=active).contains(&number) {
        return Err(Error::usage(format!("goal `{goal}` has revisions 1 to {active}; there is no revision {number}"))
            .at(format!("--revision {number}")));
    }
    Ok(number)
}

fn rfc3339(ms: i64) -> String {
    format!("{}Z", crate::clock::utc(ms).replace(' ', "T"))
}

fn parse_plan(json: &str, number: i64) -> Result<PlanFile> {
    serde_json::from_str(json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("the stored plan of revision {number} does not parse: {e}"))
    })
}

/// Every revision of the goal, and the lowest `max_revisions` any set.
fn revisions(l: &dyn LedgerRead, goal_id: &GoalId, active: i64) -> Result<(Vec<RevisionLine>, i64)> {
    let (mut out, mut lowest) = (Vec::new(), i64::MAX);
    for number in 1..=active {
        let r = l.revision(goal_id, Revision(number))?;
        lowest = lowest.min(parse_plan(&r.plan_json, number)?.budgets.max_revisions as i64);
        out.push(RevisionLine {
            revision: number,
            parent: r.parent.map(Revision::get),
            reason: r.reason,
            plan_digest: r.plan_digest,
        });
    }
    Ok((out, lowest))
}

fn runs(l: &dyn LedgerRead, goal_id: &GoalId, number: i64) -> Result<Vec<RunLine>> {
    Ok(l.events_of_goal(goal_id, EventKind::RunStarted)?
        .into_iter()
        .filter(|e| e.revision == Some(Revision(number)))
        .map(|e| RunLine { started_at_ms: e.at_ms, jobs: e.data.get("jobs").and_then(Value::as_i64) })
        .collect())
}

/// The tasks that succeeded only on a person's `settled_ok`: their latest
/// attempt of the revision is the settlement.
fn settled_ok_tasks(tasks: &[Task2], number: i64) -> Vec<String> {
    tasks
        .iter()
        .filter(|t| t.report.state == "succeeded")
        .filter(|t| t.report.attempts.iter().rfind(|a| a.revision == number).is_some_and(|a| a.state == "settled_ok"))
        .map(|t| t.report.task_ref.clone())
        .collect()
}

/// A task's report with what the waiting list needs from its ledger row.
struct Task2 {
    report: TaskReport,
    awaiting_op: Option<String>,
    row: TaskRecord,
}

fn tasks(
    l: &dyn LedgerRead,
    goal_id: &GoalId,
    number: i64,
    plan: &PlanFile,
    tampered: &[Tampered],
) -> Result<Vec<Task2>> {
    let rows: HashMap<String, TaskRecord> =
        l.tasks(goal_id, Revision(number))?.into_iter().map(|t| (t.task_ref.clone(), t)).collect();
    let mut reuse = reuse_decisions(l, goal_id, number)?;
    let mut approvals: HashMap<String, Vec<ApprovalLine>> = HashMap::new();
    for a in l.approvals_of_goal(goal_id)? {
        let marked = marked(tampered, ActRef::Approval(a.id));
        approvals.entry(a.task_ref.clone()).or_default().push(approval_line(a, marked));
    }
    let mut settlements: HashMap<i64, SettlementLine> = l
        .settlements_of_goal(goal_id)?
        .into_iter()
        .map(|s| (s.attempt_id.get(), settlement_line(marked(tampered, ActRef::Settlement(s.id)), s)))
        .collect();
    let mut out = Vec::with_capacity(plan.tasks.len());
    for t in &plan.tasks {
        let row = rows.get(&t.task_ref).ok_or_else(|| {
            Error::new(Code::StoreCorrupt, format!("task {} of revision {number} is not in the ledger", t.task_ref))
        })?;
        let mut attempts = Vec::new();
        for (a, number) in l.attempts_of_task(goal_id, &t.task_ref)?.into_iter().zip(1..) {
            let settlement = settlements.remove(&a.id.get());
            attempts.push(attempt_report(l, a, number, settlement)?);
        }
        let report = task_report(t, row, attempts, reuse.remove(&t.task_ref), approvals.remove(&t.task_ref), number);
        let awaiting_op = row.pending_operation().map(str::to_string);
        out.push(Task2 { report, awaiting_op, row: row.clone() });
    }
    let mut upstream = crate::decide::upstream::all(
        out.iter()
            .map(|t| (t.report.task_ref.as_str(), t.report.depends_on.as_slice(), t.row.state))
            .collect::<Vec<_>>()
            .into_iter(),
    );
    for t in &mut out {
        if let Some(u) = upstream.remove(&t.report.task_ref) {
            t.report.why = Some(match t.report.why.take() {
                Some(w) => format!("{}; {w}", u.words()),
                None => u.words(),
            });
            t.report.upstream = Some(u);
        }
    }
    Ok(out)
}

fn task_report(
    t: &Task,
    row: &TaskRecord,
    attempts: Vec<AttemptReport>,
    reuse: Option<ReuseLine>,
    approvals: Option<Vec<ApprovalLine>>,
    number: i64,
) -> TaskReport {
    let class = (row.state == TaskState::Failed)
        .then(|| {
            let latest = attempts.iter().rev().filter(|a| a.revision == number).find_map(|a| a.classification.as_ref());
            latest.map(|c| c.class.clone()).or_else(|| row.class().map(str::to_string))
        })
        .flatten();
    TaskReport {
        task_ref: t.task_ref.clone(),
        title: t.title.clone(),
        provider: t.provider.clone(),
        effect: t.effect.as_str().into(),
        cost: t.cost(),
        depends_on: t.depends_on.clone(),
        state: row.state.as_str().into(),
        class,
        why: why(&row.detail),
        upstream: None,
        operation_id: row.operation_id.to_string(),
        request_digest: row.request_digest.to_string(),
        reuse,
        attempts,
        approvals: approvals.unwrap_or_default(),
    }
}

/// What the engine recorded about why a task waits or stopped.
fn why(detail: &Value) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(w) = detail.get("why").and_then(Value::as_str) {
        parts.push(w.to_string());
    }
    if let Some(list) = detail.get("waits_on").and_then(Value::as_array) {
        let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        parts.push(format!("waits on {}", names.join(", ")));
    }
    if let Some(code) = detail.get("stale").and_then(Value::as_str) {
        let more = detail.get("detail").and_then(Value::as_str).unwrap_or("");
        parts.push(format!("completion stale, run again: {code} {more}").trim_end().to_string());
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn evidence_item(e: TimedEvidence) -> EvidenceItem {
    EvidenceItem { id: e.id.get(), at_ms: e.at_ms, evidence: e.evidence }
}

fn attempt_report(
    l: &dyn LedgerRead,
    a: AttemptRecord,
    number: i64,
    settlement: Option<SettlementLine>,
) -> Result<AttemptReport> {
    let evidence = l.timed_evidence_of_attempt(a.id)?.into_iter().map(evidence_item).collect();
    let claims = l
        .claims_of_attempt(a.id)?
        .into_iter()
        .map(|c| ClaimLine { id: c.id, authority: c.authority, data: c.data, verified: false })
        .collect();
    Ok(AttemptReport {
        id: a.id.get(),
        number,
        revision: a.revision.get(),
        try_no: a.try_no,
        kind: a.kind.as_str().into(),
        state: a.state.as_str().into(),
        operation_id: a.operation_id.to_string(),
        request_digest: a.request_digest.to_string(),
        effect: a.effect.as_str().into(),
        cost: a.cost.units(),
        intent_at_ms: a.intent_at_ms,
        dispatched_at_ms: a.dispatched_at_ms,
        receipt_at_ms: l.receipt_at(a.id)?,
        finished_at_ms: a.finished_at_ms,
        dispatch_detail: a.dispatch_detail,
        handle: a.handle,
        handle_at_ms: a.handle_at_ms,
        unknown_reason: a.unknown_reason.map(|r| r.as_str().into()),
        instruction: a.instruction,
        classification: a.classification.map(|c| Classification {
            class: c.class.as_str().into(),
            rule: c.rule,
            evidence_ids: c.evidence_ids.into_iter().map(|id| id.get()).collect(),
            next: c.next,
        }),
        evidence,
        claims,
        settlement,
    })
}

/// The chain's verdict on one act row, in words (`None`: it vouches for it).
fn marked(tampered: &[Tampered], act: ActRef) -> Option<String> {
    tampered.iter().find(|t| t.act == act).map(Tampered::words)
}

fn approval_line(a: ApprovalRecord, store_tampered: Option<String>) -> ApprovalLine {
    let now = crate::clock::now_ms();
    let unspent = a.consumed_by.is_none() && a.voided_by.is_none();
    ApprovalLine {
        id: a.id.get(),
        operation_id: a.operation_id.to_string(),
        revision: a.revision.get(),
        request_digest: a.request_digest.to_string(),
        actor: a.actor,
        note: a.note,
        at_ms: a.at_ms,
        consumed_by: a.consumed_by.map(|id| id.get()),
        voided_by: a.voided_by.map(|id| id.get()),
        store_tampered,
        expires_at_ms: a.expires_at_ms,
        expired: unspent && a.expires_at_ms.is_some_and(|at| now >= at),
        expires_in: a.expires_at_ms.filter(|&at| unspent && now < at).map(|at| crate::decide::expiry::words(at, now)),
    }
}

fn settlement_line(store_tampered: Option<String>, s: SettlementRecord) -> SettlementLine {
    SettlementLine {
        outcome: s.outcome.as_str().into(),
        actor: s.actor,
        note: s.note,
        at_ms: s.at_ms,
        evidence_blob: s.evidence_blob,
        verified_by_engine: false,
        store_tampered,
    }
}

/// The reuse decisions `engine revise` recorded for this revision.
fn reuse_decisions(l: &dyn LedgerRead, goal_id: &GoalId, number: i64) -> Result<HashMap<String, ReuseLine>> {
    #[derive(Deserialize)]
    struct Recorded {
        task_ref: String,
        #[serde(flatten)]
        decision: Decision,
        /// A reuse on condition: the upstreams whose outputs it waits on.
        #[serde(default)]
        early_cutoff_on: Vec<String>,
    }
    let Some(event) = l
        .events_of_goal(goal_id, EventKind::RevisionRecorded)?
        .into_iter()
        .rfind(|e| e.revision == Some(Revision(number)))
    else {
        return Ok(HashMap::new());
    };
    let recorded: Vec<Recorded> = event.data.get("decisions").cloned().map_or_else(
        || Ok(Vec::new()),
        |d| {
            serde_json::from_value(d).map_err(|e| {
                Error::new(Code::StoreCorrupt, format!("the reuse decisions of revision {number} do not parse: {e}"))
            })
        },
    )?;
    recorded.into_iter().map(|r| Ok((r.task_ref, reuse_line(l, r.decision, &r.early_cutoff_on)?))).collect()
}

/// A decision's line; a reuse on condition (early cutoff) says what it
/// waited on (the run that decided it shows in the task's re-checks).
fn reuse_line(l: &dyn LedgerRead, d: Decision, on: &[String]) -> Result<ReuseLine> {
    let condition = crate::decide::reuse::cutoff::condition_words(on).map(|w| format!(", on condition: {w}"));
    Ok(match d {
        Decision::Reuse { provenance: p } => ReuseLine {
            decision: "reuse".into(),
            reason: None,
            detail: format!(
                "reused from revision {} attempt {}{}",
                p.revision,
                l.attempt_number(p.attempt_id)?,
                condition.unwrap_or_default()
            ),
            provenance: Some(Provenance {
                revision: p.revision.get(),
                attempt_id: p.attempt_id.get(),
                attempt: l.attempt_number(p.attempt_id)?,
                checkpoint: p.checkpoint,
                evidence_ids: p.evidence_ids.into_iter().map(|id| id.get()).collect(),
            }),
        },
        Decision::Run { refusal } => ReuseLine {
            decision: "run".into(),
            reason: Some(refusal.code().into()),
            detail: refusal.detail(),
            provenance: None,
        },
    })
}

/// The goal's acceptance criteria with their latest results in this
/// revision, and those results as timeline marks.
fn acceptance(
    l: &dyn LedgerRead,
    goal_id: &GoalId,
    number: i64,
    plan: &PlanFile,
) -> Result<(Vec<AcceptanceLine>, Vec<CheckMark>)> {
    let latest: HashMap<String, CheckResultRecord> = l
        .latest_check_results(ChecksOf {
            goal: goal_id,
            revision: Revision(number),
            scope: CheckScope::Acceptance,
            task_ref: None,
        })?
        .into_iter()
        .map(|r| (r.check_id.clone(), r))
        .collect();
    let (mut lines, mut marks) = (Vec::new(), Vec::new());
    for a in plan.goal.iter().flat_map(|g| &g.acceptance) {
        let row = latest.get(&a.id);
        let evidence = match row {
            Some(r) => l.evidence_by_id(r.evidence_id)?,
            None => None,
        };
        if let (Some(r), Some(e)) = (row, &evidence) {
            marks.push(CheckMark { check_id: a.id.clone(), passed: r.passed, at_ms: e.at_ms, evidence_id: e.id.get() });
        }
        let result = match (&a.check, row) {
            (None, _) => "no_check",
            (Some(_), None) => "not_run",
            (Some(_), Some(r)) if r.passed => "passed",
            (Some(_), Some(_)) => "failed",
        };
        lines.push(AcceptanceLine {
            id: a.id.clone(),
            statement: a.statement.clone(),
            check: a.check.as_ref().map(|c| c.run.clone()),
            expect_exit: a.check.as_ref().map(|c| c.expect_exit),
            result: result.into(),
            evidence: evidence.map(evidence_item),
        });
    }
    Ok((lines, marks))
}

fn budgets(
    l: &dyn LedgerRead,
    g: &GoalRecord,
    plan: &PlanFile,
    tasks: &[Task2],
    number: i64,
    lowest_max_revisions: i64,
    last_activity_at_ms: Option<i64>,
) -> Result<Budgets> {
    let raises = crate::budgets::raises(l, &g.id)?;
    let b = &crate::decide::raise::in_force(&plan.budgets, &raises);
    let lowest_max_revisions = crate::decide::raise::in_force(
        &PlanBudgets { max_revisions: u32::try_from(lowest_max_revisions).unwrap_or(u32::MAX), ..plan.budgets.clone() },
        &raises,
    )
    .max_revisions
    .into();
    let last_run_at_ms = runs(l, &g.id, number)?.last().map(|r| r.started_at_ms);
    let most = tasks
        .iter()
        .map(|t| t.report.attempts.iter().filter(|a| a.revision == number).count() as i64)
        .max()
        .unwrap_or(0);
    let limit_seconds = i64::try_from(b.deadline_seconds).unwrap_or(i64::MAX);
    let used = l.budget_use(&g.id)?;
    Ok(Budgets {
        provider_calls: Used {
            used: i64::try_from(used.calls).unwrap_or(i64::MAX),
            limit: i64::try_from(b.max_provider_calls).unwrap_or(i64::MAX),
        },
        cost: Used { used: used.cost.units(), limit: b.max_cost },
        attempts_per_task: Used { used: most, limit: b.max_attempts_per_task.into() },
        revisions: Used { used: g.active_revision.get() - 1, limit: lowest_max_revisions },
        deadline: Deadline {
            limit_seconds,
            last_run_at_ms,
            ends_at_ms: last_run_at_ms.map(|t| t.saturating_add(limit_seconds.saturating_mul(1000))),
            last_activity_at_ms,
        },
    })
}

/// What waits on a person: unknown outcomes (goal-wide, whatever the
/// revision), then, for the active revision, approvals, re-sends and
/// failures with their ways out (`commands::advice`, as `engine status`
/// names them), then attempts left in doubt.
fn waiting_list(
    l: &dyn LedgerRead,
    g: &GoalRecord,
    active: bool,
    number: i64,
    tasks: &[Task2],
) -> Result<Vec<Waiting>> {
    let goal_id = &g.id;
    let mut out: Vec<Waiting> = l
        .attempts_in_state(goal_id, AttemptState::EffectUnknown)?
        .iter()
        .map(|a| waiting::settle(&a.task_ref, a.operation_id.as_str(), a.try_no, a.unknown_reason.map(|r| r.as_str())))
        .collect();
    if active {
        let place = crate::commands::advice::Place::of(l, g)?;
        let mut per_task = Vec::new();
        for t in tasks {
            let commands = crate::commands::advice::of_task(l, g, &place, &t.row)?.commands();
            per_task.extend(waiting::of_task(&t.report, number, t.awaiting_op.as_deref(), commands));
        }
        // What a task's MCP server asked a person, with the answer's command.
        for t in tasks.iter().filter(|t| t.row.state == crate::state::TaskState::AwaitingInput) {
            per_task.extend(waiting::answer(&t.row.task_ref, &t.row.detail));
        }
        for kind in ["approve", "answer", "retry", "failed"] {
            out.extend(per_task.iter().filter(|w| w.kind == kind).cloned());
        }
    }
    out.extend(
        l.attempts_in_doubt(goal_id)?
            .iter()
            .map(|a| waiting::in_doubt(&a.task_ref, a.operation_id.as_str(), a.try_no, a.state.as_str())),
    );
    Ok(out)
}
