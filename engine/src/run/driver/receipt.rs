//! Turning what a provider or a check returned into ledger records:
//! receipts, evidence, claims, classifications and states — each outcome
//! in one transaction, inside the caller's `LedgerTx`.

use providers::{BuiltinReceipt, Captured, CommandReceipt, ExitStatus, HttpReceipt, McpReceipt, ReadBack, Receipt};
use serde_json::{json, Value};

use super::scope::Scope;
use crate::checkpoint::Checkpoint;
use crate::decide::classify::{self, Classification};
use crate::decide::receipt::{self as receipt_verdict, Judgement};
use crate::decide::spend;
use crate::error::Result;
use crate::evidence::{self, Evidence, EvidenceSource, Output, ReadBackRecord, Recorded, UnknownReason};
use crate::ids::{AttemptId, GoalId, Revision};
use crate::limits::{EXCERPT_BYTES_MAX, EXCERPT_LINES_MAX};
use crate::run::check::CheckRun;
use crate::run::core::{Receiving, Spent, Validations, Verdict, Via};
use crate::run::looked::Looked;
use crate::run::outputs::{self, Kept};
use crate::run::report::AcceptanceLine;
use crate::state::{AttemptState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::evidence::{CheckScope, NewCheckResult};
use crate::store::goals::TaskKey;
use crate::store::LedgerTx;

/// A provider's answer: the receipt, its evidence, and the verdict on the
/// provider's own terms (a task judged by its receipt alone succeeds with
/// it; an unsafe external call cut by the deadline is unknown; a failure
/// is classified).
pub fn receipt(tx: &mut dyn LedgerTx, scope: &Scope, r: &Receiving) -> Result<(Verdict, Option<Spent>)> {
    let (goal_id, revision, attempt_id) = (&scope.goal_id, scope.revision, r.attempt_id);
    let task_ref = r.task_ref.as_str();
    let reported = match (r.agent_json, &r.receipt) {
        (true, Receipt::Command(c)) => {
            crate::decide::receipt::agent_report(c.stdout.parts().1).ok().map(|report| spend::reported(&report))
        }
        _ => None,
    };
    let mut answer = answer(tx, r.agent_json, &r.receipt)?;
    held_to_pin(scope.plan.file.providers.get(&scope.task(task_ref)?.provider), &mut answer);
    if let Some(via) = &r.via {
        resumed(tx, goal_id, revision, task_ref, attempt_id, via, &mut answer)?;
    }
    if let Some(report) = &answer.claim {
        // Everything an agent says is a claim, never a verdict.
        tx.insert_claim(attempt_id, "external_ai_message", report)?;
    }
    let may_spend = scope.task(task_ref)?.may_spend;
    let used = spending(tx, scope.key(task_ref), attempt_id, may_spend, reported.as_ref(), &mut answer)?;
    let spent = match (used, reported) {
        (Some(used), Some(Ok(Some(rep)))) => Some(Spent { used, items: rep.items, total: rep.total }),
        _ => None,
    };
    tx.insert_receipt(r.intent, &answer.receipt)?;
    let recorded = insert_all(tx, goal_id, revision, attempt_id, answer.evidence)?;
    let e = Event::goal(EventKind::ReceiptRecorded, goal_id, revision, answer.receipt);
    tx.append_event(&e.task(task_ref).attempt(attempt_id))?;
    let facts = receipt_verdict::Facts {
        question: match &r.receipt {
            Receipt::Mcp(McpReceipt { input: Some(ask), .. }) => Some(ask),
            _ => None,
        },
        step_up_scope: match &r.receipt {
            Receipt::Mcp(McpReceipt { step_up_scope: Some(wanted), .. }) => Some(wanted.as_str()),
            _ => None,
        },
        ok: answer.ok,
        unchecked: r.unchecked.as_ref(),
        protected_changed: !r.protected.is_empty(),
        timed_out_unsafe: r.timed_out_unsafe,
    };
    Ok((judged(tx, scope, r, receipt_verdict::judge(facts), recorded)?, spent))
}

/// The receipt's verdict (`decide::receipt`), recorded in its transaction.
fn judged(
    tx: &mut dyn LedgerTx,
    scope: &Scope,
    r: &Receiving,
    judgement: Judgement<&Box<providers::InputAsk>, &str, &std::result::Result<Checkpoint, String>>,
    recorded: Vec<Recorded>,
) -> Result<Verdict> {
    let (goal_id, revision, attempt_id) = (&scope.goal_id, scope.revision, r.attempt_id);
    let task_ref = r.task_ref.as_str();
    match judgement {
        Judgement::AwaitingInput(ask) => {
            // A question for a person: neither a success nor a failure.
            super::question::asked(tx, scope, (attempt_id, task_ref), ask)?;
            Ok(Verdict::AwaitingInput)
        }
        Judgement::AwaitsLogin(wanted) => {
            // Refused for want of scope: the attempt failed, the task waits
            // for a person's login and the run that follows it.
            let c = classify_attempt(tx, attempt_id, &recorded)?;
            tx.finish_attempt(attempt_id, AttemptState::Failed, Some(&c), None)?;
            let detail = json!({"attempt_id": attempt_id, "class": c.class, "why": c.rule, "scope": wanted,
                                "waits_on": "a person's engine login with that scope"});
            tx.set_task_state(scope.key(task_ref), TaskState::Pending, &detail)?;
            let e = Event::goal(EventKind::AttemptFailed, goal_id, revision, json!(c));
            tx.append_event(&e.task(task_ref).attempt(attempt_id))?;
            Ok(Verdict::AwaitsLogin { scope: wanted.to_string() })
        }
        Judgement::Succeeded(observed) => {
            succeeded_unchecked(tx, scope.key(task_ref), attempt_id, observed).map(|()| Verdict::Succeeded)
        }
        Judgement::Validate => Ok(Verdict::Validate),
        Judgement::Unknown => {
            // A receipt came: the call had left.
            let reason = UnknownReason::DeadlineAfterDispatch;
            let marker = vec![Evidence::EffectMarker { reason, safe_to_resend: false, dispatched: true }];
            let attempt = tx.attempt(attempt_id)?;
            unknown_in_tx(tx, revision, &attempt, marker, reason)?;
            Ok(Verdict::Unknown(Box::new(attempt)))
        }
        Judgement::Failed => {
            let mut recorded = recorded;
            recorded.extend(insert_all(tx, goal_id, revision, attempt_id, r.protected.clone())?);
            let c = classify_attempt(tx, attempt_id, &recorded)?;
            finish_failed(tx, scope.key(task_ref), attempt_id, &c)?;
            Ok(Verdict::Failed)
        }
    }
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

/// An operation whose effect nobody can tell: what looking found first,
/// then `list`; `effect_unknown`, with why.
pub fn unknown(
    tx: &mut dyn LedgerTx,
    revision: Revision,
    attempt: &AttemptRecord,
    looked: Option<&Looked>,
    list: &[Evidence],
    reason: UnknownReason,
) -> Result<()> {
    let mut all = looked.map(|l| looked_evidence(tx, l)).transpose()?.unwrap_or_default();
    all.extend(list.iter().cloned());
    unknown_in_tx(tx, revision, attempt, all, reason)
}

/// Record evidence (what looking found first), classify from all of the
/// attempt's evidence, fail it (`never_dispatched`: the call does not
/// count against the budgets).
pub fn failed(
    tx: &mut dyn LedgerTx,
    scope: &Scope,
    (attempt_id, task_ref): (AttemptId, &str),
    looked: Option<&Looked>,
    list: &[Evidence],
    never_dispatched: bool,
) -> Result<()> {
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    if never_dispatched {
        tx.uncount_call(attempt_id)?;
    }
    let mut all = looked.map(|l| looked_evidence(tx, l)).transpose()?.unwrap_or_default();
    all.extend(list.iter().cloned());
    for e in &all {
        tx.insert_evidence(goal_id, revision, Some(attempt_id), e)?;
    }
    let recorded = tx.evidence_of_attempt(attempt_id)?;
    let c = classify_attempt(tx, attempt_id, &recorded)?;
    finish_failed(tx, scope.key(task_ref), attempt_id, &c)
}

/// A task's validation results, judged against the checkpoint observed
/// when they started, with the goal's constraint checks and its protected
/// paths; the completion is reusable only if the inputs did not change
/// while they ran. The evidence of the goal's constraints it recorded.
pub fn validations(tx: &mut dyn LedgerTx, scope: &Scope, v: &Validations) -> Result<Vec<Evidence>> {
    let (goal_id, revision, attempt_id) = (&scope.goal_id, scope.revision, v.attempt_id);
    let task_ref = v.task_ref.as_str();
    let refusal = v.kept.as_ref().and_then(Kept::refusal).cloned();
    let judged = &v.judged;
    let all_passed = judged.passed() && refusal.is_none();
    let checkpoint = v.before.as_ref().map(|c| c.digest.clone());
    let change = match (&v.before, &v.after) {
        (Some(b), Ok(a)) if b.digest == a.digest => None,
        (Some(b), Ok(a)) => Some(b.first_difference(a).unwrap_or_default()),
        (None, _) => Some("inputs could not be observed before validation".to_string()),
        (_, Err(e)) => Some(format!("inputs could not be observed after validation: {e}")),
    };
    if let Some(cp) = &v.before {
        tx.put_checkpoint(cp)?;
    }
    let key = scope.key(task_ref);
    for run in &judged.runs {
        let e = check_evidence(tx, run, checkpoint.as_deref())?;
        let evidence_id = tx.insert_evidence(goal_id, revision, Some(attempt_id), &e)?;
        tx.insert_check_result(&NewCheckResult {
            goal_id,
            revision,
            scope: CheckScope::Validation,
            task_ref: Some(task_ref),
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
    insert_all(tx, goal_id, revision, attempt_id, constraint_evidence.clone())?;
    if all_passed {
        let passed: Vec<&str> = judged.runs.iter().map(|r| r.id.as_str()).collect();
        if let Some(kept) = &v.kept {
            outputs::record(tx, (goal_id, revision, task_ref), attempt_id, kept)?;
        }
        let settled_ok = tx.attempt_state(attempt_id)? == AttemptState::SettledOk;
        succeeded(tx, key, (attempt_id, settled_ok), checkpoint.as_deref(), &passed, change.as_deref())?;
    } else {
        if let Some(e) = &refusal {
            tx.insert_evidence(goal_id, revision, Some(attempt_id), e)?;
        }
        let recorded = tx.evidence_of_attempt(attempt_id)?;
        let c = classify_attempt(tx, attempt_id, &recorded)?;
        tx.set_attempt_checkpoint(attempt_id, checkpoint.as_deref(), false)?;
        finish_failed(tx, key, attempt_id, &c)?;
    }
    Ok(constraint_evidence)
}

/// The goal's constraint checks before the acceptance checks: evidence of
/// the goal (no attempt), and an event.
pub fn goal_constraints(tx: &mut dyn LedgerTx, scope: &Scope, runs: &[CheckRun]) -> Result<()> {
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    let mut results = Vec::with_capacity(runs.len());
    for run in runs {
        let e = check_evidence(tx, run, None)?;
        let evidence_id = tx.insert_evidence(goal_id, revision, None, &e)?;
        results.push(json!({"constraint": run.id, "passed": run.passed(), "evidence_id": evidence_id}));
    }
    tx.append_event(&Event::goal(EventKind::ConstraintsChecked, goal_id, revision, json!(results)))?;
    Ok(())
}

/// The goal's acceptance checks, each with its evidence and result.
pub fn acceptance(tx: &mut dyn LedgerTx, scope: &Scope, runs: &[CheckRun]) -> Result<Vec<AcceptanceLine>> {
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    let mut lines = Vec::new();
    for run in runs {
        let e = check_evidence(tx, run, None)?;
        let evidence_id = tx.insert_evidence(goal_id, revision, None, &e)?;
        tx.insert_check_result(&NewCheckResult {
            goal_id,
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
    tx.append_event(&Event::goal(EventKind::AcceptanceChecked, goal_id, revision, data))?;
    Ok(lines)
}

/// The target shows the effect: that is the receipt.
pub fn observed_receipt(
    tx: &mut dyn LedgerTx,
    scope: &Scope,
    attempt: &AttemptRecord,
    (reason, detail): (UnknownReason, &str),
    looked: &Looked,
) -> Result<()> {
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    for e in looked_evidence(tx, looked)? {
        tx.insert_evidence(goal_id, revision, Some(attempt.id), &e)?;
    }
    let receipt = json!({"source": "observation", "lost": reason.as_str(), "detail": detail,
                         "evidence": looked.summary(), "read_back": looked.decided()});
    tx.insert_receipt(attempt.intent(), &receipt)?;
    let data = json!({"why_observed": reason.as_str(), "read_back": looked.summary()});
    let e = Event::goal(EventKind::ObservedEffectPresent, goal_id, revision, data);
    tx.append_event(&e.task(&attempt.task_ref).attempt(attempt.id)).map(|_| ())
}

/// The looks as evidence (an answer read back is kept as a blob, with an
/// excerpt beside it).
pub fn looked_evidence(tx: &mut dyn LedgerTx, looked: &Looked) -> Result<Vec<Evidence>> {
    let mut list = Vec::new();
    if let Some((handle, found, evidence)) = &looked.by_handle {
        list.push(Evidence::HandleLookup { handle: handle.clone(), found: *found, evidence: evidence.clone() });
    }
    if let (Some(rb), Some(observation)) = (&looked.read_back, looked.observation()) {
        list.push(Evidence::Observation { observation, read_back: Some(read_back_record(tx, rb)?) });
    }
    Ok(list)
}

/// A read-back as the ledger keeps it.
fn read_back_record(tx: &mut dyn LedgerTx, rb: &ReadBack) -> Result<ReadBackRecord> {
    let answer = match &rb.answer {
        Value::Null => None,
        v => {
            let text = serde_json::to_string(v).unwrap_or_default();
            let total = text.len() as u64;
            Some(output(tx, &Captured { text, total_bytes: total, truncated: false, omitted: None })?)
        }
    };
    Ok(ReadBackRecord {
        request: rb.request.clone(),
        answer,
        decider: rb.decider,
        matched: rb.matched.clone(),
        failure: rb.failure.clone(),
    })
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
    let looks = looked_evidence(tx, &via.looked)?;
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
pub fn answer_kept(tx: &mut dyn LedgerTx, a: &AttemptRecord, looked: &Looked) -> Result<AttemptState> {
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

/// An agent whose provider pins `model`: a report that names another
/// model, or none, fails the attempt (`provider_output_invalid`) — the
/// work was not done by the model the plan holds it to. The report is a
/// claim: this only ever refuses.
fn held_to_pin(spec: Option<&crate::plan::ProviderSpec>, answer: &mut Answer) {
    let Some(crate::plan::ProviderSpec::Command { protocol: Some(_), model: Some(pin), .. }) = spec else { return };
    let Some(report) = &answer.claim else { return };
    let message = match report.get("model").and_then(Value::as_str) {
        Some(m) if m == pin => return,
        Some(m) => format!("the agent's report names model {m:?}; the plan pins `model` {pin:?}"),
        None => format!("the agent's report names no model; the plan pins `model` {pin:?}"),
    };
    answer.ok = false;
    answer.evidence.push(Evidence::ProviderOutputInvalid { message });
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
        // Read from the tail the capture kept, so an agent that talks more
        // than the bound before it reports is still heard.
        match crate::decide::receipt::agent_report(r.stdout.parts().1) {
            Ok(report) => {
                if crate::decide::receipt::agent_failed(&report) {
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
    let ok = crate::decide::receipt::command_ok(r);
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
    let mut receipt =
        receipt_record(None, Some(r.status), false, r.duration_ms, (&body, &r.body), &Captured::default());
    if let Some(cut) = &r.body_cut {
        receipt["body_cut"] = json!(cut);
    }
    let mut list = vec![Evidence::HttpResponse {
        status: r.status,
        body: body.clone(),
        duration_ms: r.duration_ms,
        body_cut: r.body_cut.clone(),
    }];
    let ok = crate::decide::receipt::http_ok(r.status);
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
    if let Some(ask) = &r.input {
        // The server's question, as it asked it (shown escaped).
        receipt["input"] = json!(ask);
    }
    if let Some(scope) = &r.step_up_scope {
        receipt["step_up_scope"] = json!(scope);
        list.push(Evidence::ScopeRefused { scope: scope.to_string() });
    }
    let ok = crate::decide::receipt::mcp_ok(r);
    Ok(Answer { ok, evidence: list, claim: None, receipt })
}

/// The builtin provider's answer: no output to keep, so no blob; the
/// receipt says which op ran and how long it took.
fn builtin_answer(r: &BuiltinReceipt) -> Answer {
    let receipt = json!({
        "builtin": r.op, "exit": null, "http_status": null, "timed_out": r.timed_out, "duration_ms": r.duration_ms,
    });
    let evidence = vec![Evidence::BuiltinResult { op: r.op, timed_out: r.timed_out, duration_ms: r.duration_ms }];
    Answer { ok: crate::decide::receipt::builtin_ok(r), evidence, claim: None, receipt }
}

/// The ledger side of an unknown outcome, inside the caller's transaction.
pub fn unknown_in_tx(
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
    (attempt_id, settled_ok): (AttemptId, bool),
    checkpoint: Option<&str>,
    passed: &[&str],
    change: Option<&str>,
) -> Result<()> {
    let reusable = change.is_none();
    if !settled_ok {
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

/// A task without validations succeeds on its receipt, with the checkpoint observed at the
/// receipt (reusable only if observed); not `settled_ok`: `insert_receipt` just moved it.
fn succeeded_unchecked(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    attempt_id: AttemptId,
    observed: &std::result::Result<Checkpoint, String>,
) -> Result<()> {
    let known = (attempt_id, false);
    match observed {
        Ok(cp) => {
            tx.put_checkpoint(cp)?;
            succeeded(tx, key, known, Some(&cp.digest), &[], None)
        }
        Err(_) => succeeded(tx, key, known, None, &[], Some("inputs could not be observed before validation")),
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
