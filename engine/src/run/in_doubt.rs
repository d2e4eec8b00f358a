//! Applying `decide::in_doubt` to an attempt without a receipt: observe the
//! target first (where the provider can), ask the resolver, record its
//! answer. The same path serves a lost answer, a restart, and an attempt
//! of a superseded revision.

use providers::Observation;
use serde_json::json;

use super::record::Next;
use super::Runner;
use crate::decide::classify;
use crate::decide::in_doubt::{self, Facts, Observed, Resolution, Situation};
use crate::error::{Code, Error, Result};
use crate::evidence::{Evidence, UnknownReason};
use crate::failpoint;
use crate::limits::OUTPUT_BYTES_MAX;
use crate::plan::{PlanFile, Task};
use crate::state::{AttemptState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::Durability;
use crate::store::LedgerTx;

/// What an observation found, as the resolver weighs it.
pub(super) fn observed(o: Option<&Observation>) -> Observed {
    match o {
        Some(Observation::EffectPresent { .. }) => Observed::Present,
        Some(Observation::EffectAbsent { .. }) => Observed::Absent,
        Some(Observation::Inconclusive { .. }) => Observed::Inconclusive,
        None => Observed::NotObservable,
    }
}

impl Runner<'_> {
    /// Dispatched, no receipt: observe first; only an observation or a
    /// safe effect settles it, otherwise the outcome is unknown.
    pub(super) async fn lost(
        &mut self,
        attempt_id: crate::ids::AttemptId,
        task: &Task,
        reason: UnknownReason,
        detail: String,
    ) -> Result<Next> {
        let attempt = self.ledger.read().attempt(attempt_id)?;
        let observation = self.observe(&attempt, task).await;
        let resolution = resolve(Situation::AnswerLost, task, observation.as_ref());
        self.settle_lost(&attempt, task, resolution, reason, detail, observation)
    }

    /// Re-observe an attempt's operation with this revision's provider, if
    /// it can (`None` if not).
    pub(super) async fn observe(&self, attempt: &AttemptRecord, task: &Task) -> Option<Observation> {
        let call = self.call_for(task, &attempt.operation_id, attempt.try_no as u32, None);
        let provider = self.providers.get(&task.provider)?.clone();
        let fut = provider.observe(&call)?;
        Some(fut.await)
    }

    /// Record the resolution of an in-doubt attempt of this revision
    /// (`Abandoned` is the restart's own path, see `reconcile`).
    pub(super) fn settle_lost(
        &mut self,
        attempt: &AttemptRecord,
        task: &Task,
        resolution: Resolution,
        reason: UnknownReason,
        detail: String,
        observation: Option<Observation>,
    ) -> Result<Next> {
        let mut list: Vec<Evidence> =
            observation.iter().cloned().map(|o| Evidence::Observation { observation: o }).collect();
        match resolution {
            Resolution::Receipt { .. } => {
                self.receipt_from_observation(attempt, task, reason, detail, observation)?;
                failpoint::hit("after_receipt_commit");
                Ok(Next::Validate)
            }
            Resolution::Failed { marker } => {
                if marker {
                    list.push(Evidence::EffectMarker { reason, safe_to_resend: true });
                }
                self.fail_with(attempt.id, task, list, Durability::Full, false)?;
                Ok(Next::Done)
            }
            Resolution::Unknown | Resolution::Abandoned { .. } => {
                list.push(Evidence::EffectMarker { reason, safe_to_resend: false });
                self.mark_unknown(attempt.id, list, reason)?;
                Ok(Next::Done)
            }
        }
    }

    /// The target shows the effect: that is the receipt.
    fn receipt_from_observation(
        &mut self,
        attempt: &AttemptRecord,
        task: &Task,
        reason: UnknownReason,
        detail: String,
        observation: Option<Observation>,
    ) -> Result<()> {
        let Some(Observation::EffectPresent { evidence }) = observation else {
            return Err(Error::internal("a receipt from observation needs an observed effect"));
        };
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let intent = attempt.intent();
        self.ledger.write(Durability::Full, |tx| {
            let obs = Evidence::Observation { observation: Observation::EffectPresent { evidence: evidence.clone() } };
            tx.insert_evidence(&goal_id, revision, Some(attempt.id), &obs)?;
            let receipt =
                json!({"source": "observation", "lost": reason.as_str(), "detail": detail, "evidence": evidence});
            tx.insert_receipt(intent, &receipt)?;
            let data = json!({"why_observed": reason.as_str()});
            let e = Event::goal(EventKind::ObservedEffectPresent, &goal_id, revision, data);
            tx.append_event(&e.task(&task.task_ref).attempt(attempt.id)).map(|_| ())
        })
    }

    /// An attempt of an earlier revision left without a receipt. Its
    /// revision no longer runs, so it is never re-sent. Observed first,
    /// with that revision's provider, where it can be.
    pub(super) async fn superseded_in_doubt(&mut self, a: &AttemptRecord) -> Result<()> {
        let (effect, idempotent, observation) = self.observe_superseded(a).await?;
        let resolution = in_doubt::resolve(Facts {
            situation: Situation::Superseded,
            effect,
            idempotent,
            observed: observed(observation.as_ref()),
        });
        self.ledger.write(Durability::Full, |tx| record_superseded(tx, a, resolution, observation.as_ref()))
    }

    /// Observe an earlier revision's operation with that revision's
    /// provider; also its task's effect and idempotence then (an effect of
    /// `external` if the task is gone from that plan).
    async fn observe_superseded(&self, a: &AttemptRecord) -> Result<(crate::plan::Effect, bool, Option<Observation>)> {
        let row = self.ledger.read().revision(&self.goal_id, a.revision)?;
        let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
            Error::new(Code::StoreCorrupt, format!("stored plan of revision {} does not parse: {e}", a.revision))
        })?;
        let Some(task) = file.tasks.iter().find(|t| t.task_ref == a.task_ref) else {
            return Ok((a.effect, false, None));
        };
        let Some(spec) = file.providers.get(&task.provider) else { return Ok((a.effect, task.idempotent, None)) };
        let provider = super::provider::build(spec);
        let call = providers::Call {
            operation_id: a.operation_id.to_string(),
            try_no: a.try_no as u32,
            request: task.action.clone(),
            workspace: std::path::PathBuf::from(&row.workspace),
            timeout: None,
            output_bytes_max: OUTPUT_BYTES_MAX,
            stdin: None,
            env: Vec::new(),
            secrets: self.secrets.clone(),
            // That revision's provider, confined as this run confines the
            // provider of that name (or as its checks are, when it has none).
            sandbox: self.sandboxes.provider(&task.provider),
        };
        let observation = match provider.observe(&call) {
            Some(fut) => Some(fut.await),
            None => None,
        };
        Ok((a.effect, task.idempotent, observation))
    }
}

/// The resolver's answer for an in-doubt attempt of this revision's task.
pub(super) fn resolve(situation: Situation, task: &Task, observation: Option<&Observation>) -> Resolution {
    in_doubt::resolve(Facts {
        situation,
        effect: task.effect,
        idempotent: task.idempotent,
        observed: observed(observation),
    })
}

/// A superseded revision's in-doubt attempt, resolved, in one transaction.
fn record_superseded(
    tx: &mut dyn LedgerTx,
    a: &AttemptRecord,
    resolution: Resolution,
    observation: Option<&Observation>,
) -> Result<()> {
    if let Some(o) = observation {
        tx.insert_evidence(&a.goal_id, a.revision, Some(a.id), &Evidence::Observation { observation: o.clone() })?;
    }
    let reason = UnknownReason::EngineRestarted;
    let now = match resolution {
        Resolution::Receipt { .. } => {
            let evidence = match observation {
                Some(Observation::EffectPresent { evidence }) => evidence.clone(),
                _ => String::new(),
            };
            let receipt = json!({"source": "observation", "lost": reason.as_str(), "evidence": evidence});
            tx.insert_receipt(a.intent(), &receipt)?;
            AttemptState::ReceiptRecorded
        }
        Resolution::Failed { .. } => {
            let c = classify::classify_with_claims(&tx.evidence_of_attempt(a.id)?, tx.claim_ids(a.id)?);
            tx.finish_attempt(a.id, AttemptState::Failed, Some(&c), None)?;
            AttemptState::Failed
        }
        Resolution::Abandoned { .. } | Resolution::Unknown => {
            let unknown = resolution == Resolution::Unknown;
            let marker = Evidence::EffectMarker { reason, safe_to_resend: resolution.safe_to_resend() };
            tx.insert_evidence(&a.goal_id, a.revision, Some(a.id), &marker)?;
            let to = if unknown { AttemptState::EffectUnknown } else { AttemptState::Abandoned };
            tx.finish_attempt(a.id, to, None, Some(reason))?;
            if unknown {
                let key = TaskKey { goal_id: &a.goal_id, revision: a.revision, task_ref: &a.task_ref };
                let detail = json!({"attempt_id": a.id, "why": reason.as_str(), "operation_id": a.operation_id});
                tx.set_task_state(key, TaskState::EffectUnknown, &detail)?;
            }
            to
        }
    };
    let data = json!({
        "operation_id": a.operation_id, "try": a.try_no, "last_state": a.state, "now": now,
        "observed": observation.is_some(),
        "why": "left without a receipt by a stopped engine; its revision is no longer active, so it is never re-sent",
    });
    let e = Event::goal(EventKind::SupersededAttemptReconciled, &a.goal_id, a.revision, data);
    tx.append_event(&e.task(&a.task_ref).attempt(a.id)).map(|_| ())
}
