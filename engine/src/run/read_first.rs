//! A person's retry of an operation whose task declares `observe`: the
//! target is read back before anything is sent again
//! (`decide::retry::before_resend`). Present: the effect is there, so the
//! retry's try is completed from that evidence — an intent and a receipt
//! from the observation, never dispatched, then the task's validations.
//! Absent (or nothing to read back): sent as asked. Inconclusive: nothing
//! sent, the operation stays unknown.

use serde_json::{json, Value};

use super::Runner;
use crate::checkpoint::Checkpoint;
use crate::cost::Cost;
use crate::decide::retry::{self, BeforeResend};
use crate::error::Result;
use crate::ids::{AttemptId, OperationId, RequestDigest};
use crate::plan::Task;
use crate::state::{AttemptKind, TaskState};
use crate::store::attempts::NewIntent;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::Durability;
use providers::sandbox::Record;

/// The retry's call as the call site would send it.
pub(super) struct Asked<'a> {
    pub task: &'a Task,
    pub operation_id: &'a OperationId,
    pub request_digest: &'a RequestDigest,
    pub request: &'a Value,
    pub inputs_at_intent: Option<&'a Checkpoint>,
    pub protected: Option<&'a Checkpoint>,
    pub sandbox: &'a Record,
}

impl Runner<'_> {
    /// `true`: handled here (completed from evidence, or left unknown);
    /// `false`: send it.
    pub(super) async fn read_back_before_retry(&mut self, asked: Asked<'_>) -> Result<bool> {
        let Asked { task, operation_id, .. } = asked;
        if task.observe.is_none() {
            return Ok(false);
        }
        let attempts = self.ledger.read().attempts_of_task(&self.goal_id, &task.task_ref)?;
        let Some(latest) = attempts.into_iter().rev().find(|a| a.operation_id == *operation_id) else {
            return Ok(false);
        };
        let looked = self.look(&latest, task, false).await;
        match retry::before_resend(looked.observed) {
            BeforeResend::Send => Ok(false),
            BeforeResend::Completed => {
                let id = self.completed_from_read_back(&asked, latest.try_no + 1, &looked)?;
                self.start_validations(id, task).await?;
                Ok(true)
            }
            BeforeResend::StaysUnknown => {
                let why = format!(
                    "retry of {operation_id}: the read-back before sending again could not tell whether it took \
                     effect ({}); nothing was sent",
                    looked.summary()
                );
                let (goal_id, revision) = (self.goal_id.clone(), self.revision);
                let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref };
                self.ledger.write(Durability::Full, |tx| {
                    let detail = json!({"operation_id": operation_id, "why": why});
                    tx.set_task_state(key, TaskState::EffectUnknown, &detail)?;
                    let data = json!({"operation_id": operation_id, "why": why, "read_back": looked.summary()});
                    let e = Event::goal(EventKind::CallRefused, &goal_id, revision, data).task(&task.task_ref);
                    tx.append_event(&e).map(|_| ())
                })?;
                self.states.insert(task.task_ref.clone(), TaskState::EffectUnknown);
                Ok(true)
            }
        }
    }

    /// The retry's try, recorded without a dispatch: its intent (cost 0:
    /// nothing paid was sent; the read-back counts as the call), the
    /// read-back as its receipt, then its validations.
    fn completed_from_read_back(
        &mut self,
        asked: &Asked<'_>,
        try_no: i64,
        looked: &super::look::Looked,
    ) -> Result<AttemptId> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let task = asked.task;
        let intent = self.ledger.write(Durability::Full, |tx| {
            let intent = tx.insert_intent(&NewIntent {
                goal_id: &goal_id,
                revision,
                task_ref: &task.task_ref,
                operation_id: asked.operation_id,
                try_no,
                kind: AttemptKind::Retry,
                request_digest: asked.request_digest,
                request_json: asked.request,
                effect: task.effect,
                cost: Cost::ZERO,
                inputs_at_intent: asked.inputs_at_intent.map(|c| c.digest.as_str()),
                instruction: None,
                sandbox: asked.sandbox,
                protected_at_intent: asked.protected.map(|c| c.digest.as_str()),
            })?;
            for cp in asked.inputs_at_intent.iter().chain(asked.protected.iter()) {
                tx.put_checkpoint(cp)?;
            }
            let id = intent.attempt_id();
            for e in looked.evidence(tx)? {
                tx.insert_evidence(&goal_id, revision, Some(id), &e)?;
            }
            let receipt = json!({"source": "observation", "before": "retry", "evidence": looked.summary(),
                                 "read_back": looked.decided()});
            tx.insert_receipt(intent, &receipt)?;
            let key = TaskKey { goal_id: &goal_id, revision, task_ref: &task.task_ref };
            tx.set_task_state(key, TaskState::Running, &json!({"attempt_id": id}))?;
            let data = json!({"operation_id": asked.operation_id, "try": try_no, "read_back": looked.summary()});
            let e = Event::goal(EventKind::CompletedFromReadBack, &goal_id, revision, data);
            tx.append_event(&e.task(&task.task_ref).attempt(id))?;
            Ok(intent)
        })?;
        let id = intent.attempt_id();
        let mut flight = super::InFlight::new(intent, &task.task_ref);
        flight.protected = asked.protected.cloned();
        self.in_flight.insert(id, flight);
        self.states.insert(task.task_ref.clone(), TaskState::Running);
        Ok(id)
    }
}
