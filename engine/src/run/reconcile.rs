//! Reconciliation on start: before anything new runs, every attempt left
//! between intent and receipt is settled as far as evidence allows —
//! observed where the provider can observe (always before any re-send),
//! re-run where the effect is `none` (or idempotent) and observation did
//! not find it, otherwise `effect_unknown`. Never re-sent blindly.

use providers::Observation;
use serde_json::json;

use super::{record, InFlight, Runner};
use crate::error::Result;
use crate::evidence::{Evidence, UnknownReason};
use crate::state::{AttemptState, TaskState};
use crate::store::events::{self, Event};
use crate::store::{ledger, Durability};

pub async fn reconcile(r: &mut Runner<'_>) -> Result<()> {
    // Read before anything below commits a receipt: an attempt this pass
    // settles from observation starts its validations there, and must not
    // be picked up (and judged) a second time by the resume below.
    let unjudged = unjudged_receipts(r)?;
    for a in ledger::attempts_in_doubt(r.store.conn(), &r.goal_id)? {
        if a.revision != r.revision {
            superseded_in_doubt(r, &a).await?;
        } else {
            in_doubt(r, &a).await?;
        }
    }
    for a in unjudged {
        resume_validations(r, &a)?;
    }
    Ok(())
}

/// Attempts of the active revision whose receipt was committed (or which a
/// person settled `ok`) but whose validations never finished.
fn unjudged_receipts(r: &Runner<'_>) -> Result<Vec<ledger::AttemptRow>> {
    let mut out = ledger::attempts_in_state(r.store.conn(), &r.goal_id, AttemptState::ReceiptRecorded)?;
    for a in ledger::latest_attempts_in_state(r.store.conn(), &r.goal_id, r.revision, AttemptState::SettledOk)? {
        let judged: bool = r.store.conn().query_row(
            "SELECT EXISTS(SELECT 1 FROM check_results WHERE attempt_id = ?1)",
            [a.id],
            |row| row.get(0),
        )?;
        if !judged && r.states.get(&a.task_ref) == Some(&TaskState::Running) {
            out.push(a);
        }
    }
    out.retain(|a| a.revision == r.revision);
    Ok(out)
}

/// Judge a receipt now: run the task's validations.
fn resume_validations(r: &mut Runner<'_>, a: &ledger::AttemptRow) -> Result<()> {
    let Some(task) = r.plan.task(&a.task_ref).cloned() else { return Ok(()) };
    if r.in_flight.contains_key(&a.id) {
        // Already being judged: one attempt gets one set of results.
        return Ok(());
    }
    r.in_flight.insert(a.id, InFlight::new(a.intent(), &a.task_ref));
    r.states.insert(a.task_ref.clone(), TaskState::Running);
    r.start_validations(a.id, &task)
}

/// An attempt of the active revision left between intent and receipt.
async fn in_doubt(r: &mut Runner<'_>, a: &ledger::AttemptRow) -> Result<()> {
    let Some(task) = r.plan.task(&a.task_ref).cloned() else { return Ok(()) };
    // Observation comes before any re-send, even of a safe effect: if
    // the target shows the effect, that is the receipt (below).
    let observation = record::observe(r, a.id, &task).await?;
    let present = matches!(observation, Some(Observation::EffectPresent { .. }));
    if super::safe_to_resend(&task) && !present {
        return rerun_after_restart(r, a, observation);
    }
    r.write_event(
        Durability::Normal,
        "reconciling",
        Some(&a.task_ref),
        Some(a.id),
        json!({
            "operation_id": a.operation_id, "last_state": a.state, "why": UnknownReason::EngineRestarted.as_str(),
        }),
    )?;
    r.in_flight.insert(a.id, InFlight::new(a.intent(), &a.task_ref));
    let detail = format!("engine restarted; last state {}", a.state);
    match record::settle_lost(r, a.id, &task, UnknownReason::EngineRestarted, detail, observation).await? {
        record::Next::Validate => r.start_validations(a.id, &task)?,
        record::Next::Done => {
            r.in_flight.remove(&a.id);
        }
    }
    Ok(())
}

/// A safe effect (none, or idempotent) not found by observation: abandon
/// the try and let the task run again as a new one.
fn rerun_after_restart(r: &mut Runner<'_>, a: &ledger::AttemptRow, observation: Option<Observation>) -> Result<()> {
    let (goal_id, revision) = (r.goal_id.clone(), r.revision);
    r.store.write(Durability::Full, |tx| {
        if let Some(o) = &observation {
            ledger::insert_evidence(
                tx,
                &goal_id,
                revision,
                Some(a.id),
                &Evidence::Observation { observation: o.clone() },
            )?;
        }
        ledger::finish_attempt(
            tx,
            a.id,
            &[AttemptState::IntentRecorded, AttemptState::Dispatched],
            AttemptState::Abandoned,
            None,
            Some(UnknownReason::EngineRestarted.as_str()),
        )?;
        ledger::set_task_state(tx, &goal_id, revision, &a.task_ref, TaskState::Pending, &json!({"rerun_of": a.id}))?;
        events::append(
            tx,
            &Event::goal(
                "rerun_after_restart",
                &goal_id,
                revision,
                json!({
                    "operation_id": a.operation_id, "try": a.try_no, "last_state": a.state,
                    "why": "no receipt; the effect is none or idempotent, so a new try is safe",
                }),
            )
            .task(&a.task_ref)
            .attempt(a.id),
        )?;
        Ok(())
    })?;
    r.states.insert(a.task_ref.clone(), TaskState::Pending);
    Ok(())
}

/// An attempt of an earlier revision left without a receipt. Its revision
/// no longer runs, so it is never re-sent. Observed first, with that
/// revision's provider, where it can be: present is a receipt (from
/// observation), absent a failure; otherwise an effect of `none` is
/// abandoned and anything else is `effect_unknown` until a person settles
/// it (and the goal cannot be satisfied over it).
async fn superseded_in_doubt(r: &mut Runner<'_>, a: &ledger::AttemptRow) -> Result<()> {
    let observation = observe_superseded(r, a).await?;
    let goal_id = r.goal_id.clone();
    let from = [AttemptState::IntentRecorded, AttemptState::Dispatched];
    r.store.write(Durability::Full, |tx| {
        if let Some(o) = &observation {
            ledger::insert_evidence(tx, &goal_id, a.revision, Some(a.id), &Evidence::Observation { observation: o.clone() })?;
        }
        let now = match &observation {
            Some(Observation::EffectPresent { evidence }) => {
                ledger::insert_receipt(tx, a.intent(), &json!({"source": "observation", "lost": "engine_restarted", "evidence": evidence}))?;
                AttemptState::ReceiptRecorded
            }
            Some(Observation::EffectAbsent { .. }) => {
                let c = crate::classify::classify(&ledger::evidence_of_attempt(tx, a.id)?);
                ledger::finish_attempt(tx, a.id, &from, AttemptState::Failed, Some(&json!(c)), None)?;
                AttemptState::Failed
            }
            _ => {
                let unknown = a.effect != "none";
                let marker = Evidence::EffectMarker { reason: UnknownReason::EngineRestarted, safe_to_resend: !unknown };
                ledger::insert_evidence(tx, &goal_id, a.revision, Some(a.id), &marker)?;
                let to = if unknown { AttemptState::EffectUnknown } else { AttemptState::Abandoned };
                ledger::finish_attempt(tx, a.id, &from, to, None, Some(UnknownReason::EngineRestarted.as_str()))?;
                if unknown {
                    ledger::set_task_state(
                        tx,
                        &goal_id,
                        a.revision,
                        &a.task_ref,
                        TaskState::EffectUnknown,
                        &json!({"attempt_id": a.id, "why": UnknownReason::EngineRestarted.as_str(), "operation_id": a.operation_id}),
                    )?;
                }
                to
            }
        };
        events::append(
            tx,
            &Event::goal(
                "superseded_attempt_reconciled",
                &goal_id,
                a.revision,
                json!({
                    "operation_id": a.operation_id, "try": a.try_no, "last_state": a.state, "now": now,
                    "observed": observation.is_some(),
                    "why": "left without a receipt by a stopped engine; its revision is no longer active, so it is never re-sent",
                }),
            )
            .task(&a.task_ref)
            .attempt(a.id),
        )?;
        Ok(())
    })
}

/// Observe an earlier revision's operation with that revision's provider
/// (`None`: it cannot observe, or the task is gone from that plan).
async fn observe_superseded(r: &Runner<'_>, a: &ledger::AttemptRow) -> Result<Option<Observation>> {
    let row = ledger::revision(r.store.conn(), &r.goal_id, a.revision)?;
    let file: crate::plan::PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
        crate::error::Error::new(
            crate::error::Code::StoreCorrupt,
            format!("stored plan of revision {} does not parse: {e}", a.revision),
        )
    })?;
    let Some(task) = file.tasks.iter().find(|t| t.task_ref == a.task_ref) else { return Ok(None) };
    let Some(spec) = file.providers.get(&task.provider) else { return Ok(None) };
    let provider = super::provider::build(spec);
    let call = providers::Call {
        operation_id: a.operation_id.clone(),
        try_no: a.try_no as u32,
        request: task.action.clone(),
        workspace: std::path::PathBuf::from(&row.workspace),
        timeout: None,
        output_bytes_max: super::OUTPUT_BYTES_MAX,
        stdin: None,
        env: Vec::new(),
        secrets: r.secrets.clone(),
    };
    let observation = match provider.observe(&call) {
        Some(fut) => Some(fut.await),
        None => None,
    };
    Ok(observation)
}
