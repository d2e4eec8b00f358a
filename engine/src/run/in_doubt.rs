//! Applying `decide::in_doubt` to an attempt without a receipt: look first
//! (its handle, then its read-back rule: `look`), ask the resolver, record
//! its answer. The same path serves a lost answer, a restart, and an
//! attempt of a superseded revision.

use std::time::Duration;

use serde_json::json;

use super::look::{self, Looked};
use super::record::Next;
use super::Runner;
use crate::clock::now_ms;
use crate::decide::classify;
use crate::decide::in_doubt::{self, Facts, Resolution, Situation};
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

impl Runner<'_> {
    /// Dispatched, no receipt: look first; only a look or a safe effect
    /// settles it, otherwise the outcome is unknown. A request whose
    /// deadline passed was cancelled by its provider (an MCP task gets
    /// `tasks/cancel`): asking about it by its handle would only hear that.
    pub(super) async fn lost(
        &mut self,
        attempt_id: crate::ids::AttemptId,
        task: &Task,
        reason: UnknownReason,
        detail: String,
    ) -> Result<Next> {
        let attempt = self.ledger.read().attempt(attempt_id)?;
        let ask_handle = reason != UnknownReason::DeadlineAfterDispatch;
        let looked = self.look(&attempt, task, ask_handle).await;
        let resolution = resolve(Situation::AnswerLost, task, &looked);
        self.settle_lost(&attempt, task, resolution, reason, detail, looked).await
    }

    /// Look at an attempt's operation with this revision's provider.
    pub(super) async fn look(&self, attempt: &AttemptRecord, task: &Task, ask_handle: bool) -> Looked {
        let Some(provider) = self.providers.get(&task.provider).cloned() else { return Looked::nothing() };
        let mut call = self.call_for(task, &attempt.operation_id, attempt.try_no as u32, None);
        let goal_left = self.goal_time_left();
        call.timeout = look::resume_wait(call.timeout, attempt.dispatched_at_ms, goal_left, now_ms());
        let handle = attempt.handle.as_ref().filter(|_| ask_handle);
        look::look(provider.as_ref(), &call, handle, task.observe.as_ref()).await
    }

    /// What is left of this run of work's wall-clock budget
    /// (`deadline_seconds` from the start of the command, raises included).
    fn goal_time_left(&self) -> Duration {
        let used_ms = (now_ms() - self.began_ms).max(0) as u64;
        Duration::from_secs(self.budgets.deadline_seconds).saturating_sub(Duration::from_millis(used_ms))
    }

    /// Record the resolution of an in-doubt attempt of this revision
    /// (`Abandoned` is the restart's own path, see `reconcile`).
    pub(super) async fn settle_lost(
        &mut self,
        attempt: &AttemptRecord,
        task: &Task,
        resolution: Resolution,
        reason: UnknownReason,
        detail: String,
        looked: Looked,
    ) -> Result<Next> {
        match resolution {
            Resolution::Answer { .. } => self.answered(attempt, task, reason, looked).await,
            Resolution::Receipt { .. } => {
                self.receipt_from_observation(attempt, task, reason, detail, &looked)?;
                failpoint::hit("after_receipt_commit");
                Ok(Next::Validate)
            }
            Resolution::Failed { marker } => {
                let list = match marker {
                    true => vec![Evidence::EffectMarker { reason, safe_to_resend: true }],
                    false => Vec::new(),
                };
                self.fail_with(attempt.id, task, Some(&looked), list, Durability::Full, false)?;
                Ok(Next::Done)
            }
            Resolution::Unknown | Resolution::Abandoned { .. } => {
                let list = vec![Evidence::EffectMarker { reason, safe_to_resend: false }];
                self.mark_unknown(attempt.id, Some(&looked), list, reason)?;
                Ok(Next::Done)
            }
        }
    }

    /// The provider's own answer, fetched by the handle: the receipt, judged
    /// like any answer (its protected paths too).
    async fn answered(
        &mut self,
        attempt: &AttemptRecord,
        task: &Task,
        reason: UnknownReason,
        looked: Looked,
    ) -> Result<Next> {
        let Some(receipt) = looked.answer.clone() else {
            return Err(Error::internal("an answer by handle needs the answer"));
        };
        let protected = self.judge_protected(attempt.id, task).await?;
        let via = super::record::Via { looked, why: reason };
        self.received(attempt.id, task, receipt, Some(via), protected).await
    }

    /// The target shows the effect: that is the receipt.
    fn receipt_from_observation(
        &mut self,
        attempt: &AttemptRecord,
        task: &Task,
        reason: UnknownReason,
        detail: String,
        looked: &Looked,
    ) -> Result<()> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let intent = attempt.intent();
        self.ledger.write(Durability::Full, |tx| {
            for e in looked.evidence(tx)? {
                tx.insert_evidence(&goal_id, revision, Some(attempt.id), &e)?;
            }
            let receipt = json!({"source": "observation", "lost": reason.as_str(), "detail": detail,
                                 "evidence": looked.summary(), "read_back": looked.decided()});
            tx.insert_receipt(intent, &receipt)?;
            let data = json!({"why_observed": reason.as_str(), "read_back": looked.summary()});
            let e = Event::goal(EventKind::ObservedEffectPresent, &goal_id, revision, data);
            tx.append_event(&e.task(&task.task_ref).attempt(attempt.id)).map(|_| ())
        })
    }

    /// An attempt of an earlier revision left without a receipt. Its
    /// revision no longer runs, so it is never re-sent. Looked at first,
    /// with that revision's provider and rule, where it can be.
    pub(super) async fn superseded_in_doubt(&mut self, a: &AttemptRecord) -> Result<()> {
        let (effect, idempotent, looked) = self.look_superseded(a).await?;
        let resolution = in_doubt::resolve(Facts {
            situation: Situation::Superseded,
            effect,
            idempotent,
            observed: looked.observed,
        });
        self.ledger.write(Durability::Full, |tx| record_superseded(tx, a, resolution, &looked))
    }

    /// Look at an earlier revision's operation with that revision's
    /// provider (built for this look, shut down after it) and task rule;
    /// also its task's effect and idempotence then (an effect of `external`
    /// if the task is gone from that plan).
    async fn look_superseded(&self, a: &AttemptRecord) -> Result<(crate::plan::Effect, bool, Looked)> {
        let row = self.ledger.read().revision(&self.goal_id, a.revision)?;
        let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
            Error::new(Code::StoreCorrupt, format!("stored plan of revision {} does not parse: {e}", a.revision))
        })?;
        let Some(task) = file.tasks.iter().find(|t| t.task_ref == a.task_ref) else {
            return Ok((a.effect, false, Looked::nothing()));
        };
        let Some(spec) = file.providers.get(&task.provider) else {
            return Ok((a.effect, task.idempotent, Looked::nothing()));
        };
        let workspace = std::path::PathBuf::from(&row.workspace);
        // A provider that no longer builds (its CA file gone) cannot look.
        let Ok(provider) = crate::plan::adapters::build(&task.provider, spec, &workspace) else {
            return Ok((a.effect, task.idempotent, Looked::nothing()));
        };
        let call = providers::Call {
            operation_id: a.operation_id.to_string(),
            try_no: a.try_no as u32,
            request: task.action.clone(),
            workspace,
            timeout: look::resume_wait(
                task.timeout_seconds.map(Duration::from_secs),
                a.dispatched_at_ms,
                self.goal_time_left(),
                now_ms(),
            ),
            output_bytes_max: OUTPUT_BYTES_MAX,
            stdin: None,
            env: Vec::new(),
            secrets: self.secrets.clone(),
            // That revision's provider, confined as this run confines the
            // provider of that name (or as its checks are, when it has none).
            sandbox: self.sandboxes.task(task),
        };
        let looked = look::look(provider.as_ref(), &call, a.handle.as_ref(), task.observe.as_ref()).await;
        provider.shutdown().await;
        Ok((a.effect, task.idempotent, looked))
    }
}

/// The resolver's answer for an in-doubt attempt of this revision's task.
pub(super) fn resolve(situation: Situation, task: &Task, looked: &Looked) -> Resolution {
    in_doubt::resolve(Facts { situation, effect: task.effect, idempotent: task.idempotent, observed: looked.observed })
}

/// A superseded revision's in-doubt attempt, resolved, in one transaction.
fn record_superseded(tx: &mut dyn LedgerTx, a: &AttemptRecord, resolution: Resolution, looked: &Looked) -> Result<()> {
    for e in looked.evidence(tx)? {
        tx.insert_evidence(&a.goal_id, a.revision, Some(a.id), &e)?;
    }
    let reason = UnknownReason::EngineRestarted;
    let now = match resolution {
        Resolution::Answer { .. } => super::record::answer_kept(tx, a, looked)?,
        Resolution::Receipt { .. } => {
            let receipt = json!({"source": "observation", "lost": reason.as_str(), "evidence": looked.summary(),
                                 "read_back": looked.decided()});
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
        "observed": looked.looked(),
        "why": "left without a receipt by a stopped engine; its revision is no longer active, so it is never re-sent",
    });
    let e = Event::goal(EventKind::SupersededAttemptReconciled, &a.goal_id, a.revision, data);
    tx.append_event(&e.task(&a.task_ref).attempt(a.id)).map(|_| ())
}
