//! Turning what a provider or a check returned into ledger records:
//! receipts, evidence, claims, classifications and states — each outcome in
//! one transaction.

use providers::{Captured, Observation, Outcome, Receipt};
use rusqlite::Transaction;
use serde_json::{json, Value};

use super::checks::CheckRun;
use super::{safe_to_resend, AcceptanceLine, Runner, UnknownOp};
use crate::checkpoint::Checkpoint;
use crate::classify::{self, Classification};
use crate::error::Result;
use crate::evidence::{self, EngineErrorKind, Evidence, Output, UnknownReason};
use crate::failpoint;
use crate::plan::{Effect, ProviderSpec, Task};
use crate::state::{AttemptState, TaskState};
use crate::store::events::{self, Event};
use crate::store::{blobs, ledger, Durability};

/// What the coordinator does next with an attempt.
pub enum Next {
    Validate,
    Done,
}

const EXCERPT_LINES: usize = 20;
const EXCERPT_BYTES: usize = 2000;

/// Store captured output as a blob and keep an excerpt beside it.
pub fn output(tx: &Transaction, c: &Captured) -> Result<Output> {
    let blob = blobs::put(tx, c.text.as_bytes())?;
    Ok(Output {
        blob,
        excerpt: evidence::excerpt(c, EXCERPT_LINES, EXCERPT_BYTES),
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

pub async fn outcome(r: &mut Runner<'_>, attempt_id: i64, task: &Task, outcome: Outcome) -> Result<Next> {
    match outcome {
        Outcome::NotDispatched(nd) => {
            // Nothing was handed over: the call does not count against the budgets.
            let e = Evidence::EngineError { error: EngineErrorKind::from(nd.kind), message: nd.message };
            fail_with(
                r,
                attempt_id,
                task,
                vec![e],
                &[AttemptState::IntentRecorded, AttemptState::Dispatched],
                Durability::Full,
                true,
            )?;
            failpoint::hit("after_receipt_commit");
            Ok(Next::Done)
        }
        Outcome::Lost { reason, detail } => lost(r, attempt_id, task, reason.into(), detail).await,
        Outcome::Received(receipt) => received(r, attempt_id, task, receipt),
    }
}

/// Dispatched, no receipt: observe first; only an observation or a safe
/// effect settles it, otherwise the outcome is unknown.
pub async fn lost(
    r: &mut Runner<'_>,
    attempt_id: i64,
    task: &Task,
    reason: UnknownReason,
    detail: String,
) -> Result<Next> {
    let observation = observe(r, attempt_id, task).await?;
    settle_lost(r, attempt_id, task, reason, detail, observation).await
}

/// Re-observe an attempt's operation, if its provider can (`None` if not).
pub async fn observe(r: &mut Runner<'_>, attempt_id: i64, task: &Task) -> Result<Option<Observation>> {
    let attempt = ledger::attempt(r.store.conn(), attempt_id)?;
    let call = r.call_for(task, &attempt.operation_id, attempt.try_no as u32, None);
    let provider = r.providers[&task.provider].clone();
    let observation = match provider.observe(&call) {
        Some(fut) => Some(fut.await),
        None => None,
    };
    Ok(observation)
}

/// Settle a dispatched-without-receipt attempt from what observation found.
pub async fn settle_lost(
    r: &mut Runner<'_>,
    attempt_id: i64,
    task: &Task,
    reason: UnknownReason,
    detail: String,
    observation: Option<Observation>,
) -> Result<Next> {
    let from = [AttemptState::IntentRecorded, AttemptState::Dispatched];
    let intent = r.flight(attempt_id)?.intent;
    match observation {
        Some(Observation::EffectPresent { evidence }) => {
            // The target shows the effect: that is the receipt.
            let (goal_id, revision) = (r.goal_id.clone(), r.revision);
            r.store.write(Durability::Full, |tx| {
                let obs =
                    Evidence::Observation { observation: Observation::EffectPresent { evidence: evidence.clone() } };
                ledger::insert_evidence(tx, &goal_id, revision, Some(attempt_id), &obs)?;
                ledger::insert_receipt(
                    tx,
                    intent,
                    &json!({"source": "observation", "lost": reason.as_str(), "detail": detail, "evidence": evidence}),
                )?;
                events::append(
                    tx,
                    &Event::goal(
                        "observed_effect_present",
                        &goal_id,
                        revision,
                        json!({"why_observed": reason.as_str()}),
                    )
                    .task(&task.task_ref)
                    .attempt(attempt_id),
                )?;
                Ok(())
            })?;
            failpoint::hit("after_receipt_commit");
            Ok(Next::Validate)
        }
        Some(Observation::EffectAbsent { evidence }) => {
            let obs = Evidence::Observation { observation: Observation::EffectAbsent { evidence } };
            fail_with(r, attempt_id, task, vec![obs], &from, Durability::Full, false)?;
            Ok(Next::Done)
        }
        other => {
            let mut list = Vec::new();
            if let Some(o) = other {
                list.push(Evidence::Observation { observation: o });
            }
            let safe = safe_to_resend(task);
            list.push(Evidence::EffectMarker { reason, safe_to_resend: safe });
            if safe {
                fail_with(r, attempt_id, task, list, &from, Durability::Full, false)?;
            } else {
                mark_unknown(r, attempt_id, list, reason, &from)?;
            }
            Ok(Next::Done)
        }
    }
}

/// Record an operation whose effect nobody can tell: `effect_unknown`,
/// with why, waiting on a person's settlement.
pub fn mark_unknown(
    r: &mut Runner<'_>,
    attempt_id: i64,
    list: Vec<Evidence>,
    reason: UnknownReason,
    from: &[AttemptState],
) -> Result<()> {
    let (goal_id, revision) = (r.goal_id.clone(), r.revision);
    let attempt = ledger::attempt(r.store.conn(), attempt_id)?;
    r.store.write(Durability::Full, |tx| unknown_in_tx(tx, &goal_id, revision, &attempt, list, reason, from))?;
    note_unknown(r, &attempt, reason, attempt.state);
    Ok(())
}

/// The ledger side of an unknown outcome, inside the caller's transaction.
fn unknown_in_tx(
    tx: &Transaction,
    goal_id: &str,
    revision: i64,
    attempt: &ledger::AttemptRow,
    list: Vec<Evidence>,
    reason: UnknownReason,
    from: &[AttemptState],
) -> Result<()> {
    let mut recorded = Vec::new();
    for e in list {
        let id = ledger::insert_evidence(tx, goal_id, revision, Some(attempt.id), &e)?;
        recorded.push(evidence::Recorded { id, evidence: e });
    }
    let c = classify::classify_with_claims(&recorded, claim_ids(tx, attempt.id)?);
    let cj = json!(c);
    ledger::finish_attempt(tx, attempt.id, from, AttemptState::EffectUnknown, Some(&cj), Some(reason.as_str()))?;
    ledger::set_task_state(
        tx,
        goal_id,
        revision,
        &attempt.task_ref,
        TaskState::EffectUnknown,
        &json!({"attempt_id": attempt.id, "class": c.class, "why": reason.as_str(), "operation_id": attempt.operation_id}),
    )?;
    events::append(
        tx,
        &Event::goal(
            "effect_unknown",
            goal_id,
            revision,
            json!({
                "operation_id": attempt.operation_id, "try": attempt.try_no, "request_digest": attempt.request_digest, "reason": reason.as_str(),
            }),
        )
        .task(&attempt.task_ref)
        .attempt(attempt.id),
    )?;
    Ok(())
}

/// The runner's side of an unknown outcome, once it is committed.
fn note_unknown(r: &mut Runner<'_>, attempt: &ledger::AttemptRow, reason: UnknownReason, last_state: AttemptState) {
    r.states.insert(attempt.task_ref.clone(), TaskState::EffectUnknown);
    r.unknown.push(UnknownOp {
        operation_id: attempt.operation_id.clone(),
        task_ref: attempt.task_ref.clone(),
        request_digest: attempt.request_digest.clone(),
        try_no: attempt.try_no,
        state: AttemptState::EffectUnknown.to_string(),
        last_state: last_state.to_string(),
        reason: reason.as_str().to_string(),
    });
}

fn received(r: &mut Runner<'_>, attempt_id: i64, task: &Task, receipt: Receipt) -> Result<Next> {
    let (goal_id, revision) = (r.goal_id.clone(), r.revision);
    let intent = r.flight(attempt_id)?.intent;
    let agent = matches!(r.plan.provider_of(task), ProviderSpec::Command { protocol: Some(_) });
    let is_http = matches!(r.plan.provider_of(task), ProviderSpec::Http { .. });
    let is_mcp = matches!(r.plan.provider_of(task), ProviderSpec::Mcp { .. });
    let timed_out_unsafe = receipt.timed_out && task.effect == Effect::External && !safe_to_resend(task);
    let verdict = r.store.write(Durability::Full, |tx| {
        let mut list: Vec<Evidence> = Vec::new();
        let stdout = output(tx, &receipt.stdout)?;
        let stderr = output(tx, &receipt.stderr)?;
        let mut ok = true;
        if is_http {
            let status = receipt.http_status.unwrap_or(0);
            list.push(Evidence::HttpResponse { status, body: stdout.clone(), duration_ms: receipt.duration_ms });
            if !(200..300).contains(&status) {
                ok = false;
                list.push(Evidence::ProviderError {
                    http_status: Some(status),
                    retry_after_seconds: receipt.retry_after_seconds,
                    source: "http".into(),
                    excerpt: stdout.excerpt.clone(),
                });
            }
        } else if is_mcp {
            list.push(Evidence::ToolResult {
                is_error: receipt.tool_error.is_some(),
                body: stdout.clone(),
                stderr,
                duration_ms: receipt.duration_ms,
            });
            if let Some(message) = &receipt.tool_error {
                ok = false;
                list.push(Evidence::ProviderError {
                    http_status: None,
                    retry_after_seconds: None,
                    source: "tool".into(),
                    excerpt: evidence::excerpt(&Captured { text: message.clone(), ..Captured::default() }, EXCERPT_LINES, EXCERPT_BYTES),
                });
            }
        } else {
            list.push(Evidence::ProcessExit { exit: receipt.exit, timed_out: receipt.timed_out, duration_ms: receipt.duration_ms, stdout: stdout.clone(), stderr });
            ok = !receipt.timed_out && matches!(receipt.exit, Some(providers::ExitStatus::Code { code: 0 }));
        }
        if agent {
            match agent_report(&receipt.stdout) {
                Ok(report) => {
                    // Everything an agent says is a claim, never a verdict.
                    ledger::insert_claim(tx, attempt_id, "external_ai_message", &report)?;
                    if report.get("status").and_then(Value::as_str) == Some("failed") {
                        ok = false;
                        list.push(Evidence::ProviderError { http_status: None, retry_after_seconds: None, source: "agent_report".into(), excerpt: stdout.excerpt.clone() });
                    }
                }
                Err(message) => {
                    ok = false;
                    list.push(Evidence::ProviderOutputInvalid { message });
                }
            }
        }
        let mut receipt_json = json!({
            "exit": receipt.exit, "http_status": receipt.http_status, "timed_out": receipt.timed_out,
            "duration_ms": receipt.duration_ms, "stdout_blob": stdout.blob, "stdout_truncated": receipt.stdout.truncated,
            "stderr_truncated": receipt.stderr.truncated,
        });
        if let Some(t) = &receipt.tool_error {
            receipt_json["tool_error"] = json!(t);
        }
        ledger::insert_receipt(tx, intent, &receipt_json)?;
        let mut recorded = Vec::new();
        for e in list {
            let id = ledger::insert_evidence(tx, &goal_id, revision, Some(attempt_id), &e)?;
            recorded.push(evidence::Recorded { id, evidence: e });
        }
        events::append(tx, &Event::goal("receipt_recorded", &goal_id, revision, receipt_json).task(&task.task_ref).attempt(attempt_id))?;
        if ok {
            return Ok(None);
        }
        if timed_out_unsafe {
            // The engine's deadline killed an external-effect command
            // part-way: unknown, in the receipt's own transaction (a crash
            // must not leave it looking like an ordinary receipt).
            let marker = vec![Evidence::EffectMarker { reason: UnknownReason::DeadlineAfterDispatch, safe_to_resend: false }];
            let attempt = ledger::attempt(tx, attempt_id)?;
            unknown_in_tx(tx, &goal_id, revision, &attempt, marker, UnknownReason::DeadlineAfterDispatch, &[AttemptState::ReceiptRecorded])?;
            return Ok(Some(None));
        }
        let c = classify::classify_with_claims(&recorded, claim_ids(tx, attempt_id)?);
        finish_failed(tx, &goal_id, revision, attempt_id, task, &c, &[AttemptState::ReceiptRecorded])?;
        Ok(Some(Some(c)))
    })?;
    match verdict {
        None => {
            failpoint::hit("after_receipt_commit");
            Ok(Next::Validate)
        }
        Some(None) => {
            failpoint::hit("after_receipt_commit");
            let attempt = ledger::attempt(r.store.conn(), attempt_id)?;
            note_unknown(r, &attempt, UnknownReason::DeadlineAfterDispatch, AttemptState::ReceiptRecorded);
            Ok(Next::Done)
        }
        Some(Some(_)) => {
            r.states.insert(task.task_ref.clone(), TaskState::Failed);
            failpoint::hit("after_receipt_commit");
            Ok(Next::Done)
        }
    }
}

fn finish_failed(
    tx: &Transaction,
    goal_id: &str,
    revision: i64,
    attempt_id: i64,
    task: &Task,
    c: &Classification,
    from: &[AttemptState],
) -> Result<()> {
    let cj = json!(c);
    ledger::finish_attempt(tx, attempt_id, from, AttemptState::Failed, Some(&cj), None)?;
    ledger::set_task_state(
        tx,
        goal_id,
        revision,
        &task.task_ref,
        TaskState::Failed,
        &json!({"attempt_id": attempt_id, "class": c.class, "why": c.rule, "next": c.next}),
    )?;
    events::append(tx, &Event::goal("attempt_failed", goal_id, revision, cj).task(&task.task_ref).attempt(attempt_id))?;
    Ok(())
}

/// Record evidence, classify from all of the attempt's evidence, fail it.
fn fail_with(
    r: &mut Runner<'_>,
    attempt_id: i64,
    task: &Task,
    list: Vec<Evidence>,
    from: &[AttemptState],
    d: Durability,
    never_dispatched: bool,
) -> Result<()> {
    let (goal_id, revision) = (r.goal_id.clone(), r.revision);
    r.store.write(d, |tx| {
        if never_dispatched {
            ledger::uncount_call(tx, attempt_id)?;
        }
        for e in &list {
            ledger::insert_evidence(tx, &goal_id, revision, Some(attempt_id), e)?;
        }
        let recorded = ledger::evidence_of_attempt(tx, attempt_id)?;
        let c = classify::classify_with_claims(&recorded, claim_ids(tx, attempt_id)?);
        finish_failed(tx, &goal_id, revision, attempt_id, task, &c, from)
    })?;
    r.states.insert(task.task_ref.clone(), TaskState::Failed);
    Ok(())
}

fn check_evidence(tx: &Transaction, run: &CheckRun, checkpoint: Option<&str>) -> Result<Evidence> {
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
        failing_assertion: if run.passed() { None } else { classify::failing_assertion(&both) },
        stdout,
        stderr,
        checkpoint: checkpoint.map(str::to_string),
    })
}

/// Record a task's validation results, judged against the checkpoint
/// observed when they started; the completion is reusable only if the
/// inputs did not change while they ran.
pub fn validations(
    r: &mut Runner<'_>,
    attempt_id: i64,
    task: &Task,
    before: Option<Checkpoint>,
    after: std::result::Result<Checkpoint, String>,
    runs: Vec<CheckRun>,
) -> Result<()> {
    let (goal_id, revision) = (r.goal_id.clone(), r.revision);
    let all_passed = runs.iter().all(CheckRun::passed);
    let checkpoint = before.as_ref().map(|c| c.digest.clone());
    let change = match (&before, &after) {
        (Some(b), Ok(a)) if b.digest == a.digest => None,
        (Some(b), Ok(a)) => Some(b.first_difference(a).unwrap_or_default()),
        (None, _) => Some("inputs could not be observed before validation".to_string()),
        (_, Err(e)) => Some(format!("inputs could not be observed after validation: {e}")),
    };
    r.store.write(Durability::Normal, |tx| {
        if let Some(cp) = &before {
            ledger::put_checkpoint(tx, cp)?;
        }
        for run in &runs {
            let e = check_evidence(tx, run, checkpoint.as_deref())?;
            let evidence_id = ledger::insert_evidence(tx, &goal_id, revision, Some(attempt_id), &e)?;
            ledger::insert_check_result(tx, &ledger::NewCheckResult {
                goal_id: &goal_id,
                revision,
                scope: "validation",
                task_ref: Some(&task.task_ref),
                attempt_id: Some(attempt_id),
                check_id: &run.id,
                passed: run.passed(),
                checkpoint: checkpoint.as_deref(),
                evidence_id,
            })?;
        }
        // A person's `ok` settlement stands in for the receipt: the attempt
        // stays `settled_ok` (the engine did not verify the effect), while
        // the task is judged by its validations like any other.
        let settled = ledger::attempt(tx, attempt_id)?.state == AttemptState::SettledOk;
        if all_passed {
            let reusable = change.is_none();
            if !settled {
                ledger::finish_attempt(tx, attempt_id, &[AttemptState::ReceiptRecorded], AttemptState::Succeeded, None, None)?;
            }
            ledger::set_attempt_checkpoint(tx, attempt_id, checkpoint.as_deref(), reusable)?;
            ledger::set_task_state(tx, &goal_id, revision, &task.task_ref, TaskState::Succeeded,
                &json!({"attempt_id": attempt_id, "checkpoint": checkpoint, "reusable": reusable}))?;
            events::append(tx, &Event::goal("attempt_succeeded", &goal_id, revision, json!({
                "validations_passed": runs.iter().map(|r| &r.id).collect::<Vec<_>>(), "checkpoint": checkpoint,
            })).task(&task.task_ref).attempt(attempt_id))?;
            if let Some(path) = &change {
                events::append(tx, &Event::goal("completion_not_reusable", &goal_id, revision, json!({
                    "why": if path.starts_with("inputs could not be observed") { "inputs could not be observed around the validations" } else { "inputs changed while validations ran" },
                    "first_changed": path,
                })).task(&task.task_ref).attempt(attempt_id))?;
            }
        } else {
            let recorded = ledger::evidence_of_attempt(tx, attempt_id)?;
            let c = classify::classify_with_claims(&recorded, claim_ids(tx, attempt_id)?);
            ledger::set_attempt_checkpoint(tx, attempt_id, checkpoint.as_deref(), false)?;
            finish_failed(tx, &goal_id, revision, attempt_id, task, &c, &[AttemptState::ReceiptRecorded, AttemptState::SettledOk])?;
        }
        Ok(())
    })?;
    let state = if all_passed { TaskState::Succeeded } else { TaskState::Failed };
    r.states.insert(task.task_ref.clone(), state);
    Ok(())
}

pub fn acceptance(r: &mut Runner<'_>, runs: Vec<CheckRun>) -> Result<Vec<AcceptanceLine>> {
    let (goal_id, revision) = (r.goal_id.clone(), r.revision);
    r.store.write(Durability::Normal, |tx| {
        let mut lines = Vec::new();
        for run in &runs {
            let e = check_evidence(tx, run, None)?;
            let evidence_id = ledger::insert_evidence(tx, &goal_id, revision, None, &e)?;
            ledger::insert_check_result(
                tx,
                &ledger::NewCheckResult {
                    goal_id: &goal_id,
                    revision,
                    scope: "acceptance",
                    task_ref: None,
                    attempt_id: None,
                    check_id: &run.id,
                    passed: run.passed(),
                    checkpoint: None,
                    evidence_id,
                },
            )?;
            lines.push(AcceptanceLine { id: run.id.clone(), passed: run.passed() });
        }
        events::append(
            tx,
            &Event::goal(
                "acceptance_checked",
                &goal_id,
                revision,
                json!(lines.iter().map(|l| json!({"id": l.id, "passed": l.passed})).collect::<Vec<_>>()),
            ),
        )?;
        Ok(lines)
    })
}

fn claim_ids(conn: &rusqlite::Connection, attempt_id: i64) -> Result<Vec<i64>> {
    Ok(ledger::claims_of_attempt(conn, attempt_id)?.into_iter().map(|(id, _, _)| id).collect())
}
