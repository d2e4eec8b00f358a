//! Turning what a provider or a check returned into ledger records:
//! receipts, evidence, claims, classifications and states — each outcome in
//! one transaction.

use providers::{BuiltinReceipt, Captured, CommandReceipt, ExitStatus, HttpReceipt, McpReceipt, Outcome, Receipt};
use serde_json::{json, Value};

use super::checks::CheckRun;
use super::look::Looked;
use super::outputs::{self, Kept};
use super::{AcceptanceLine, Runner, UnknownOp};
use crate::checkpoint::Checkpoint;
use crate::decide::classify::{self, Classification};
use crate::decide::spend;
use crate::error::Result;
use crate::evidence::{self, EngineErrorKind, Evidence, EvidenceSource, Output, Recorded, UnknownReason};
use crate::ids::{AttemptId, GoalId, Revision};
use crate::limits::{EXCERPT_BYTES_MAX, EXCERPT_LINES_MAX};
use crate::plan::{Effect, ProviderSpec, Task};
use crate::state::{AttemptState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::evidence::{CheckScope, NewCheckResult};
use crate::store::goals::TaskKey;
use crate::store::Durability;
use crate::store::LedgerTx;

/// What judged an attempt after its receipt: its validations, the goal's
/// constraint checks, and the evidence of its protected paths (empty when
/// nothing protected changed).
pub struct Judged {
    pub runs: Vec<CheckRun>,
    pub constraint_runs: Vec<CheckRun>,
    pub protected: Vec<Evidence>,
}

impl Judged {
    pub fn passed(&self) -> bool {
        self.runs.iter().chain(&self.constraint_runs).all(CheckRun::passed) && self.protected.is_empty()
    }
}

/// What the coordinator does next with an attempt.
pub enum Next {
    Validate,
    Done,
}

/// An answer that came by the request's handle, after it was lost: what
/// looking found, and why the engine had to look.
pub struct Via {
    pub looked: Looked,
    pub why: UnknownReason,
}

/// Store captured output as a blob and keep an excerpt beside it.
pub fn output(tx: &mut dyn LedgerTx, c: &Captured) -> Result<Output> {
    let blob = tx.put_blob(c.text.as_bytes())?;
    Ok(Output {
        blob,
        excerpt: evidence::excerpt(c, EXCERPT_LINES_MAX, EXCERPT_BYTES_MAX),
        total_bytes: c.total_bytes,
        kept_bytes: c.text.len() as u64,
        truncated: c.truncated,
        omitted: c.omitted,
    })
}

/// The agent's report: the last non-empty stdout line, a JSON object with
/// `status` of `done` or `failed`. Read from the tail the capture kept, so
/// an agent that talks more than the bound before it reports is still heard.
fn agent_report(stdout: &Captured) -> std::result::Result<Value, String> {
    let (_, tail) = stdout.parts();
    let line = tail.lines().rev().find(|l| !l.trim().is_empty()).ok_or("no report line on stdout")?;
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| format!("last stdout line is not JSON: {e}"))?;
    match v.get("status").and_then(Value::as_str) {
        Some("done") | Some("failed") => Ok(v),
        _ => Err("report has no `status` of \"done\" or \"failed\"".to_string()),
    }
}

/// Record evidence, each with its new id.
fn insert_all(
    tx: &mut dyn LedgerTx,
    goal_id: &GoalId,
    revision: Revision,
    attempt_id: AttemptId,
    list: Vec<Evidence>,
) -> Result<Vec<Recorded>> {
    let mut recorded = Vec::with_capacity(list.len());
    for e in list {
        let id = tx.insert_evidence(goal_id, revision, Some(attempt_id), &e)?;
        recorded.push(Recorded { id, evidence: e });
    }
    Ok(recorded)
}

/// Classify from evidence; the attempt's claims are listed beside it.
fn classify_attempt(tx: &dyn LedgerTx, attempt_id: AttemptId, evidence: &[Recorded]) -> Result<Classification> {
    Ok(classify::classify_with_claims(evidence, tx.claim_ids(attempt_id)?))
}

/// What a provider's answer says, as evidence: whether it is a success on
/// the provider's own terms, and the evidence (a claim, for an agent).
struct Answer {
    ok: bool,
    evidence: Vec<Evidence>,
    claim: Option<Value>,
    receipt: Value,
}

impl Runner<'_> {
    pub(super) async fn outcome(&mut self, attempt_id: AttemptId, task: &Task, outcome: Outcome) -> Result<Next> {
        match outcome {
            Outcome::NotDispatched(nd) => {
                // Nothing was handed over: the call does not count against the budgets.
                let e = Evidence::EngineError { error: EngineErrorKind::from(nd.kind), message: nd.message };
                self.fail_with(attempt_id, task, None, vec![e], Durability::Full, true)?;
                self.hit_committed("after_receipt_commit");
                Ok(Next::Done)
            }
            Outcome::Lost { reason, detail } => self.lost(attempt_id, task, reason.into(), detail).await,
            Outcome::Received(receipt) => {
                // Judged now in case the answer is a failure (no validations
                // follow it, and the next attempt would start on whatever
                // this one left); an ok answer is judged after its validations.
                let protected = self.judge_protected(attempt_id, task).await?;
                self.received(attempt_id, task, receipt, None, protected).await
            }
        }
    }

    /// A provider's answer: the receipt, its evidence, and the verdict on
    /// the provider's own terms, with the evidence of its protected paths.
    /// `via`: it was fetched by the request's handle after the answer was
    /// lost.
    pub(super) async fn received(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        receipt: Receipt,
        via: Option<Via>,
        protected: Vec<Evidence>,
    ) -> Result<Next> {
        // A task without validations, in a goal without checkable
        // constraints, is judged by its receipt alone: its checkpoint is
        // observed now and its success committed with the receipt, one
        // transaction fewer per step (there is nothing to judge between the
        // two) — unless it changed a path the engine protects (`protected`,
        // judged with the receipt): then it fails here. A constraint's check
        // or protected paths still take the validation path, which runs and
        // judges them.
        // A task with declared outputs takes the validation path too: its
        // outputs are read after its receipt, then committed with its success.
        let unchecked = match task.validations.is_empty() && self.guard.judged_at_receipt() && task.outputs.is_empty() {
            true => Some(self.observe_checkpoint(task).await.map(|cp| cp.with_context(self.tool_context(task)))),
            false => None,
        };
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let intent = self.flight(attempt_id)?.intent;
        let agent_json = matches!(self.plan.provider_of(task), ProviderSpec::Command { protocol: Some(_), .. });
        // A builtin cut short did nothing outside the engine: a plain timeout.
        let timed_out = matches!(&receipt, Receipt::Command(r) if r.timed_out);
        let timed_out_unsafe = timed_out && task.effect == Effect::External && !task.safe_to_resend();
        let reported = match (agent_json, &receipt) {
            (true, Receipt::Command(r)) => agent_report(&r.stdout).ok().map(|report| spend::reported(&report)),
            _ => None,
        };
        let mut spent_to = None;
        let clean = protected.is_empty();
        let verdict = self.ledger.write(Durability::Full, |tx| {
            let mut answer = answer(tx, agent_json, &receipt)?;
            if let Some(via) = &via {
                resumed(tx, &goal_id, revision, &task.task_ref, attempt_id, via, &mut answer)?;
            }
            if let Some(report) = &answer.claim {
                // Everything an agent says is a claim, never a verdict.
                tx.insert_claim(attempt_id, "external_ai_message", report)?;
            }
            let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref };
            spent_to = spending(tx, key, attempt_id, task.may_spend, reported.as_ref(), &mut answer)?;
            tx.insert_receipt(intent, &answer.receipt)?;
            let recorded = insert_all(tx, &goal_id, revision, attempt_id, answer.evidence)?;
            let e = Event::goal(EventKind::ReceiptRecorded, &goal_id, revision, answer.receipt);
            tx.append_event(&e.task(&task.task_ref).attempt(attempt_id))?;
            if answer.ok && (unchecked.is_none() || clean) {
                let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref };
                return match &unchecked {
                    Some(observed) => succeeded_unchecked(tx, key, attempt_id, observed).map(|()| Verdict::Succeeded),
                    None => Ok(Verdict::Validate),
                };
            }
            if timed_out_unsafe {
                // The engine's deadline killed an external-effect command
                // part-way: unknown, in the receipt's own transaction (a
                // crash must not leave it looking like an ordinary receipt).
                let reason = UnknownReason::DeadlineAfterDispatch;
                let marker = vec![Evidence::EffectMarker { reason, safe_to_resend: false }];
                let attempt = tx.attempt(attempt_id)?;
                unknown_in_tx(tx, revision, &attempt, marker, reason)?;
                return Ok(Verdict::Unknown(Box::new(attempt)));
            }
            let mut recorded = recorded;
            recorded.extend(insert_all(tx, &goal_id, revision, attempt_id, protected.clone())?);
            let c = classify_attempt(tx, attempt_id, &recorded)?;
            finish_failed(tx, TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref }, attempt_id, &c)?;
            Ok(Verdict::Failed)
        })?;
        self.hit_committed("after_receipt_commit");
        if let Some(used) = spent_to {
            self.crossed_by_spending(task, attempt_id, used, reported.as_ref());
        }
        match verdict {
            Verdict::Validate => Ok(Next::Validate),
            Verdict::Succeeded => {
                self.states.insert(task.task_ref.clone(), TaskState::Succeeded);
                Ok(Next::Done)
            }
            Verdict::Unknown(attempt) => {
                let reason = UnknownReason::DeadlineAfterDispatch;
                self.note_unknown(&attempt, reason, AttemptState::ReceiptRecorded);
                Ok(Next::Done)
            }
            Verdict::Failed => {
                self.tally.judged(&task.task_ref, attempt_id, self.guard.goal_protects(), &protected);
                self.states.insert(task.task_ref.clone(), TaskState::Failed);
                Ok(Next::Done)
            }
        }
    }

    /// Spending a provider reported took the goal's cost past `max_cost`:
    /// the run stops dispatching, naming what was reported (the first
    /// crossing a run sees is the one it names). Work already in flight
    /// finishes and is recorded.
    fn crossed_by_spending(
        &mut self,
        task: &Task,
        attempt_id: AttemptId,
        used: crate::cost::Cost,
        reported: Option<&std::result::Result<Option<spend::Reported>, String>>,
    ) {
        let limit = self.budgets.max_cost();
        let Some(Ok(Some(r))) = reported else { return };
        if used <= limit || self.stops.budget.is_some() {
            return;
        }
        let items: Vec<String> = r.items.iter().map(evidence::SpentItem::words).collect();
        self.stops.budget = Some(crate::decide::budget::Exhausted {
            budget: crate::decide::budget::BudgetName::MaxCost,
            used: used.units(),
            limit: limit.units(),
            requested: 0.0,
            detail: Some(format!(
                "spending reported by task {}'s provider during attempt {attempt_id} (its word, not verified by the engine) took it past the limit: {} = {}",
                task.task_ref,
                items.join(" + "),
                r.total
            )),
        });
    }

    /// Record an operation whose effect nobody can tell: `effect_unknown`,
    /// with why, waiting on a person's settlement.
    pub(super) fn mark_unknown(
        &mut self,
        attempt_id: AttemptId,
        looked: Option<&Looked>,
        list: Vec<Evidence>,
        reason: UnknownReason,
    ) -> Result<()> {
        let revision = self.revision;
        let attempt = self.ledger.read().attempt(attempt_id)?;
        self.ledger.write(Durability::Full, |tx| {
            let mut all = looked.map(|l| l.evidence(tx)).transpose()?.unwrap_or_default();
            all.extend(list.clone());
            unknown_in_tx(tx, revision, &attempt, all, reason)
        })?;
        self.note_unknown(&attempt, reason, attempt.state);
        Ok(())
    }

    /// The runner's side of an unknown outcome, once it is committed.
    fn note_unknown(&mut self, attempt: &AttemptRecord, reason: UnknownReason, last_state: AttemptState) {
        self.states.insert(attempt.task_ref.clone(), TaskState::EffectUnknown);
        self.stops.unknown.push(UnknownOp::of(attempt, last_state, Some(reason)));
    }

    /// Record evidence (what looking found first), classify from all of
    /// the attempt's evidence, fail it.
    pub(super) fn fail_with(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        looked: Option<&Looked>,
        list: Vec<Evidence>,
        d: Durability,
        never_dispatched: bool,
    ) -> Result<()> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.ledger.write(d, |tx| {
            if never_dispatched {
                tx.uncount_call(attempt_id)?;
            }
            let mut all = looked.map(|l| l.evidence(tx)).transpose()?.unwrap_or_default();
            all.extend(list.clone());
            for e in &all {
                tx.insert_evidence(&goal_id, revision, Some(attempt_id), e)?;
            }
            let recorded = tx.evidence_of_attempt(attempt_id)?;
            let c = classify_attempt(tx, attempt_id, &recorded)?;
            finish_failed(tx, TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref }, attempt_id, &c)
        })?;
        self.states.insert(task.task_ref.clone(), TaskState::Failed);
        Ok(())
    }

    /// Record a task's validation results, judged against the checkpoint
    /// observed when they started, with the goal's constraint checks and
    /// its protected paths; the completion is reusable only if the inputs
    /// did not change while they ran.
    pub(super) fn record_validations(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        before: Option<Checkpoint>,
        after: std::result::Result<Checkpoint, String>,
        (judged, kept): (Judged, Option<Kept>),
    ) -> Result<()> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let refusal = kept.as_ref().and_then(Kept::refusal).cloned();
        let all_passed = judged.passed() && refusal.is_none();
        let checkpoint = before.as_ref().map(|c| c.digest.clone());
        let change = match (&before, &after) {
            (Some(b), Ok(a)) if b.digest == a.digest => None,
            (Some(b), Ok(a)) => Some(b.first_difference(a).unwrap_or_default()),
            (None, _) => Some("inputs could not be observed before validation".to_string()),
            (_, Err(e)) => Some(format!("inputs could not be observed after validation: {e}")),
        };
        let mut verdict_evidence = Vec::new();
        self.ledger.write(Durability::Normal, |tx| {
            if let Some(cp) = &before {
                tx.put_checkpoint(cp)?;
            }
            let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref };
            for run in &judged.runs {
                let e = check_evidence(tx, run, checkpoint.as_deref())?;
                let evidence_id = tx.insert_evidence(&goal_id, revision, Some(attempt_id), &e)?;
                tx.insert_check_result(&NewCheckResult {
                    goal_id: &goal_id,
                    revision,
                    scope: CheckScope::Validation,
                    task_ref: Some(&task.task_ref),
                    attempt_id: Some(attempt_id),
                    check_id: &run.id,
                    passed: run.passed(),
                    checkpoint: checkpoint.as_deref(),
                    evidence_id,
                })?;
            }
            let mut constraint_evidence = Vec::with_capacity(judged.constraint_runs.len() + 1);
            for run in &judged.constraint_runs {
                constraint_evidence.push(check_evidence(tx, run, None)?);
            }
            constraint_evidence.extend(judged.protected.iter().cloned());
            insert_all(tx, &goal_id, revision, attempt_id, constraint_evidence.clone())?;
            verdict_evidence = constraint_evidence;
            if all_passed {
                let passed: Vec<&str> = judged.runs.iter().map(|r| r.id.as_str()).collect();
                if let Some(kept) = &kept {
                    outputs::record(tx, (&goal_id, revision, &task.task_ref), attempt_id, kept)?;
                }
                succeeded(tx, key, attempt_id, checkpoint.as_deref(), &passed, change.as_deref())
            } else {
                if let Some(e) = &refusal {
                    tx.insert_evidence(&goal_id, revision, Some(attempt_id), e)?;
                }
                let recorded = tx.evidence_of_attempt(attempt_id)?;
                let c = classify_attempt(tx, attempt_id, &recorded)?;
                tx.set_attempt_checkpoint(attempt_id, checkpoint.as_deref(), false)?;
                finish_failed(tx, key, attempt_id, &c)
            }
        })?;
        self.tally.judged(&task.task_ref, attempt_id, self.guard.goal_protects(), &verdict_evidence);
        let state = if all_passed { TaskState::Succeeded } else { TaskState::Failed };
        self.states.insert(task.task_ref.clone(), state);
        Ok(())
    }

    /// The goal's constraint checks before the acceptance checks: evidence
    /// of the goal (no attempt), an event, and the tally's verdict.
    pub(super) fn record_goal_constraints(&mut self, runs: Vec<CheckRun>) -> Result<()> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.ledger.write(Durability::Normal, |tx| {
            let mut results = Vec::with_capacity(runs.len());
            for run in &runs {
                let e = check_evidence(tx, run, None)?;
                let evidence_id = tx.insert_evidence(&goal_id, revision, None, &e)?;
                results.push(json!({"constraint": run.id, "passed": run.passed(), "evidence_id": evidence_id}));
            }
            tx.append_event(&Event::goal(EventKind::ConstraintsChecked, &goal_id, revision, json!(results)))?;
            Ok(())
        })?;
        for run in &runs {
            self.tally.goal_checks.insert(run.id.clone(), run.passed());
        }
        Ok(())
    }

    pub(super) fn record_acceptance(&mut self, runs: Vec<CheckRun>) -> Result<Vec<AcceptanceLine>> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.ledger.write(Durability::Normal, |tx| {
            let mut lines = Vec::new();
            for run in &runs {
                let e = check_evidence(tx, run, None)?;
                let evidence_id = tx.insert_evidence(&goal_id, revision, None, &e)?;
                tx.insert_check_result(&NewCheckResult {
                    goal_id: &goal_id,
                    revision,
                    scope: CheckScope::Acceptance,
                    task_ref: None,
                    attempt_id: None,
                    check_id: &run.id,
                    passed: run.passed(),
                    checkpoint: None,
                    evidence_id,
                })?;
                lines.push(AcceptanceLine { id: run.id.clone(), passed: run.passed() });
            }
            let data = json!(lines.iter().map(|l| json!({"id": l.id, "passed": l.passed})).collect::<Vec<_>>());
            tx.append_event(&Event::goal(EventKind::AcceptanceChecked, &goal_id, revision, data))?;
            Ok(lines)
        })
    }
}

/// How a receipt's transaction ended.
enum Verdict {
    Validate,
    /// No validations: succeeded with the receipt.
    Succeeded,
    Unknown(Box<AttemptRecord>),
    Failed,
}

/// What an agent's report says it spent, recorded in its receipt's
/// transaction: kept as evidence (the provider's word: shown as reported,
/// never verified), counted in the goal's cost, announced in the log. A
/// report of spending from a task not declared to spend fails the attempt
/// (`spending_not_declared`); a `spent` the engine cannot read fails it as
/// a broken report. The goal's cost used after it, when it spent.
fn spending(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    attempt_id: AttemptId,
    may_spend: bool,
    reported: Option<&std::result::Result<Option<spend::Reported>, String>>,
    answer: &mut Answer,
) -> Result<Option<crate::cost::Cost>> {
    let r = match reported {
        Some(Ok(Some(r))) => r,
        Some(Err(message)) => {
            answer.ok = false;
            answer.evidence.push(Evidence::ProviderOutputInvalid { message: format!("the report's {message}") });
            return Ok(None);
        }
        Some(Ok(None)) | None => return Ok(None),
    };
    let total_micros = r.total.micros();
    answer.evidence.push(Evidence::SpendingReported { items: r.items.clone(), total_micros, may_spend });
    if !may_spend && !r.total.is_zero() {
        answer.ok = false;
    }
    tx.record_spending(attempt_id, r.total)?;
    let data = json!({"total": r.total, "items": r.items, "may_spend": may_spend, "authority": "external_ai_message"});
    let e = Event::goal(EventKind::SpendingReported, key.goal_id, key.revision, data).task(key.task_ref);
    tx.append_event(&e.attempt(attempt_id))?;
    Ok(Some(tx.budget_use(key.goal_id)?.cost))
}

/// An answer fetched by the request's handle: what looking found goes in
/// first, the receipt says how it came, and the event names the handle.
fn resumed(
    tx: &mut dyn LedgerTx,
    goal_id: &GoalId,
    revision: Revision,
    task_ref: &str,
    attempt_id: AttemptId,
    via: &Via,
    answer: &mut Answer,
) -> Result<()> {
    let looks = via.looked.evidence(tx)?;
    insert_all(tx, goal_id, revision, attempt_id, looks)?;
    let handle = via.looked.by_handle.as_ref().map(|(h, ..)| json!(h));
    answer.receipt["source"] = json!("handle");
    answer.receipt["lost"] = json!(via.why.as_str());
    answer.receipt["handle"] = handle.clone().unwrap_or(Value::Null);
    let data = json!({"handle": handle, "why_asked": via.why.as_str()});
    let e = Event::goal(EventKind::AnsweredByHandle, goal_id, revision, data);
    tx.append_event(&e.task(task_ref).attempt(attempt_id)).map(|_| ())
}

/// A superseded revision's attempt whose answer came by its handle: the
/// receipt is kept (its revision no longer runs, so it is not judged); an
/// answer that is a failure on the provider's own terms fails it.
pub(super) fn answer_kept(tx: &mut dyn LedgerTx, a: &AttemptRecord, looked: &Looked) -> Result<AttemptState> {
    let Some(receipt) = &looked.answer else { return Err(crate::error::Error::internal("no answer to keep")) };
    let mut answer = answer(tx, false, receipt)?;
    answer.receipt["source"] = json!("handle");
    answer.receipt["lost"] = json!(UnknownReason::EngineRestarted.as_str());
    tx.insert_receipt(a.intent(), &answer.receipt)?;
    let recorded = insert_all(tx, &a.goal_id, a.revision, a.id, answer.evidence)?;
    if answer.ok {
        return Ok(AttemptState::ReceiptRecorded);
    }
    let c = classify_attempt(tx, a.id, &recorded)?;
    tx.finish_attempt(a.id, AttemptState::Failed, Some(&c), None)?;
    Ok(AttemptState::Failed)
}

/// Read a provider's answer by its kind: a process's exit, an HTTP status,
/// an MCP tool result; an agent's report on top of a command's.
fn answer(tx: &mut dyn LedgerTx, agent_json: bool, receipt: &Receipt) -> Result<Answer> {
    let mut answer = match receipt {
        Receipt::Command(r) => command_answer(tx, r)?,
        Receipt::Http(r) => http_answer(tx, r)?,
        Receipt::Mcp(r) => mcp_answer(tx, r)?,
        Receipt::Builtin(r) => builtin_answer(r),
    };
    if let (true, Receipt::Command(r)) = (agent_json, receipt) {
        let excerpt = evidence::excerpt(&r.stdout, EXCERPT_LINES_MAX, EXCERPT_BYTES_MAX);
        match agent_report(&r.stdout) {
            Ok(report) => {
                if report.get("status").and_then(Value::as_str) == Some("failed") {
                    answer.ok = false;
                    answer.evidence.push(Evidence::ProviderError {
                        http_status: None,
                        retry_after_seconds: None,
                        source: EvidenceSource::AgentReport,
                        excerpt,
                    });
                }
                answer.claim = Some(report);
            }
            Err(message) => {
                answer.ok = false;
                answer.evidence.push(Evidence::ProviderOutputInvalid { message });
            }
        }
    }
    Ok(answer)
}

/// The receipt as the ledger records it (the same fields for every kind).
fn receipt_record(
    exit: Option<ExitStatus>,
    http_status: Option<u16>,
    timed_out: bool,
    duration_ms: u64,
    out: (&Output, &Captured),
    err: &Captured,
) -> Value {
    json!({
        "exit": exit, "http_status": http_status, "timed_out": timed_out,
        "duration_ms": duration_ms, "stdout_blob": out.0.blob, "stdout_truncated": out.1.truncated,
        "stderr_truncated": err.truncated,
    })
}

fn command_answer(tx: &mut dyn LedgerTx, r: &CommandReceipt) -> Result<Answer> {
    let stdout = output(tx, &r.stdout)?;
    let stderr = output(tx, &r.stderr)?;
    let mut receipt = receipt_record(r.exit, None, r.timed_out, r.duration_ms, (&stdout, &r.stdout), &r.stderr);
    let ok = !r.timed_out && r.descendants.is_none() && matches!(r.exit, Some(ExitStatus::Code { code: 0 }));
    let exit =
        Evidence::ProcessExit { exit: r.exit, timed_out: r.timed_out, duration_ms: r.duration_ms, stdout, stderr };
    let mut evidence = vec![exit];
    if let Some(d) = &r.descendants {
        receipt["descendants"] = json!(d);
        evidence.push(Evidence::DescendantsEnded {
            processes: d.processes.clone(),
            grace_ms: d.grace_ms,
            ended: d.ended,
        });
    }
    Ok(Answer { ok, evidence, claim: None, receipt })
}

fn http_answer(tx: &mut dyn LedgerTx, r: &HttpReceipt) -> Result<Answer> {
    let body = output(tx, &r.body)?;
    let receipt = receipt_record(None, Some(r.status), false, r.duration_ms, (&body, &r.body), &Captured::default());
    let mut list = vec![Evidence::HttpResponse { status: r.status, body: body.clone(), duration_ms: r.duration_ms }];
    let ok = (200..300).contains(&r.status);
    if !ok {
        list.push(Evidence::ProviderError {
            http_status: Some(r.status),
            retry_after_seconds: r.retry_after_seconds,
            source: EvidenceSource::Http,
            excerpt: body.excerpt,
        });
    }
    Ok(Answer { ok, evidence: list, claim: None, receipt })
}

fn mcp_answer(tx: &mut dyn LedgerTx, r: &McpReceipt) -> Result<Answer> {
    let result = output(tx, &r.result)?;
    let stderr = output(tx, &r.stderr)?;
    let mut receipt = receipt_record(None, None, false, r.duration_ms, (&result, &r.result), &r.stderr);
    let mut list = vec![Evidence::ToolResult {
        is_error: r.tool_error.is_some(),
        body: result,
        stderr,
        duration_ms: r.duration_ms,
    }];
    if let Some(message) = &r.tool_error {
        receipt["tool_error"] = json!(message);
        let text = Captured { text: message.clone(), ..Captured::default() };
        list.push(Evidence::ProviderError {
            http_status: None,
            retry_after_seconds: None,
            source: EvidenceSource::Tool,
            excerpt: evidence::excerpt(&text, EXCERPT_LINES_MAX, EXCERPT_BYTES_MAX),
        });
    }
    if let Some(message) = &r.output_invalid {
        receipt["output_invalid"] = json!(message);
        list.push(Evidence::ProviderOutputInvalid { message: message.clone() });
    }
    let ok = r.tool_error.is_none() && r.output_invalid.is_none();
    Ok(Answer { ok, evidence: list, claim: None, receipt })
}

/// The builtin provider's answer: no output to keep, so no blob; the
/// receipt says which op ran and how long it took.
fn builtin_answer(r: &BuiltinReceipt) -> Answer {
    let receipt = json!({
        "builtin": r.op, "exit": null, "http_status": null, "timed_out": r.timed_out, "duration_ms": r.duration_ms,
    });
    let evidence = vec![Evidence::BuiltinResult { op: r.op, timed_out: r.timed_out, duration_ms: r.duration_ms }];
    Answer { ok: !r.timed_out, evidence, claim: None, receipt }
}

/// The ledger side of an unknown outcome, inside the caller's transaction.
pub(super) fn unknown_in_tx(
    tx: &mut dyn LedgerTx,
    revision: Revision,
    attempt: &AttemptRecord,
    list: Vec<Evidence>,
    reason: UnknownReason,
) -> Result<()> {
    let recorded = insert_all(tx, &attempt.goal_id, revision, attempt.id, list)?;
    let c = classify_attempt(tx, attempt.id, &recorded)?;
    tx.finish_attempt(attempt.id, AttemptState::EffectUnknown, Some(&c), Some(reason))?;
    let key = TaskKey { goal_id: &attempt.goal_id, revision, task_ref: &attempt.task_ref };
    let detail = json!({"attempt_id": attempt.id, "class": c.class, "why": reason.as_str(), "operation_id": attempt.operation_id});
    tx.set_task_state(key, TaskState::EffectUnknown, &detail)?;
    let data = json!({
        "operation_id": attempt.operation_id, "try": attempt.try_no, "request_digest": attempt.request_digest, "reason": reason.as_str(),
    });
    let e = Event::goal(EventKind::EffectUnknown, &attempt.goal_id, revision, data);
    tx.append_event(&e.task(&attempt.task_ref).attempt(attempt.id))?;
    Ok(())
}

fn finish_failed(tx: &mut dyn LedgerTx, key: TaskKey, attempt_id: AttemptId, c: &Classification) -> Result<()> {
    tx.finish_attempt(attempt_id, AttemptState::Failed, Some(c), None)?;
    let detail = json!({"attempt_id": attempt_id, "class": c.class, "why": c.rule, "next": c.next});
    tx.set_task_state(key, TaskState::Failed, &detail)?;
    let e = Event::goal(EventKind::AttemptFailed, key.goal_id, key.revision, json!(c));
    tx.append_event(&e.task(key.task_ref).attempt(attempt_id))?;
    Ok(())
}

/// Every validation passed: the attempt succeeded (a person's `ok`
/// settlement stays `settled_ok`: the engine did not verify the effect,
/// while the task is judged by its validations like any other).
fn succeeded(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    attempt_id: AttemptId,
    checkpoint: Option<&str>,
    passed: &[&str],
    change: Option<&str>,
) -> Result<()> {
    let reusable = change.is_none();
    if tx.attempt_state(attempt_id)? != AttemptState::SettledOk {
        tx.succeed_attempt(attempt_id, checkpoint, reusable)?;
    } else {
        tx.set_attempt_checkpoint(attempt_id, checkpoint, reusable)?;
    }
    let detail = json!({"attempt_id": attempt_id, "checkpoint": checkpoint, "reusable": reusable});
    tx.set_task_state(key, TaskState::Succeeded, &detail)?;
    let event = |kind, data| Event::goal(kind, key.goal_id, key.revision, data).task(key.task_ref).attempt(attempt_id);
    let data = json!({"validations_passed": passed, "checkpoint": checkpoint});
    tx.append_event(&event(EventKind::AttemptSucceeded, data))?;
    if let Some(path) = change {
        let why = if path.starts_with("inputs could not be observed") {
            "inputs could not be observed around the validations"
        } else {
            "inputs changed while validations ran"
        };
        tx.append_event(&event(EventKind::CompletionNotReusable, json!({"why": why, "first_changed": path})))?;
    }
    Ok(())
}

/// A task without validations succeeds on its receipt, with the
/// checkpoint observed at the receipt (reusable only if it was observed).
fn succeeded_unchecked(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    attempt_id: AttemptId,
    observed: &std::result::Result<Checkpoint, String>,
) -> Result<()> {
    match observed {
        Ok(cp) => {
            tx.put_checkpoint(cp)?;
            succeeded(tx, key, attempt_id, Some(&cp.digest), &[], None)
        }
        Err(_) => succeeded(tx, key, attempt_id, None, &[], Some("inputs could not be observed before validation")),
    }
}

fn check_evidence(tx: &mut dyn LedgerTx, run: &CheckRun, checkpoint: Option<&str>) -> Result<Evidence> {
    let stdout = output(tx, &run.stdout)?;
    let mut stderr = output(tx, &run.stderr)?;
    if let Some(msg) = &run.not_started {
        stderr.excerpt = format!("could not start: {msg}");
    }
    let both = format!("{}\n{}", run.stdout.text, run.stderr.text);
    Ok(Evidence::CheckResult {
        check_id: run.id.clone(),
        exit: run.exit,
        expect_exit: run.expect_exit,
        timed_out: run.timed_out,
        passed: run.passed(),
        failing_assertion: match &run.descendants {
            Some(d) => Some(crate::evidence::descendants_text(&d.processes, d.grace_ms, d.ended)),
            None if run.passed() => None,
            None => classify::failing_assertion(&both),
        },
        stdout,
        stderr,
        checkpoint: checkpoint.map(str::to_string),
        of_constraint: run.of_constraint,
    })
}
