//! A person's retry of an operation a read-back applies to (the task's
//! `observe`, else its provider's: an HTTP `observe`, an MCP
//! `observe_tool` or `observe`): the target is read back before anything
//! is sent again (`decide::retry::before_resend`), unless the person asked
//! to re-send without it (`engine retry --without-read-back`). Present: the effect is there, so the
//! retry's try is completed from that evidence — an intent and a receipt
//! from the observation, never dispatched, then the task's validations.
//! Absent (or nothing to read back): sent as asked. Inconclusive: nothing
//! sent, the operation stays unknown. Each outcome is one transaction
//! (`driver::ledger`).

use super::action::{FromReadBack, GateCall, Record, Write};
use super::state::{Flight, Run};
use crate::decide::retry::{self, BeforeResend};
use crate::error::Result;
use crate::plan::Task;
use crate::state::TaskState;

impl Run<'_> {
    /// `true`: handled here (completed from evidence, or left unknown);
    /// `false`: send it.
    pub async fn read_back_before_retry(&mut self, call: &GateCall, task: &Task) -> Result<bool> {
        let reads_back = task.observe.is_some() || self.plan.provider_of(task).reads_back();
        if !reads_back || self.asked.read_back_waived.contains(&call.operation_id) {
            return Ok(false);
        }
        let attempts = self.io.attempts_of(&task.task_ref).await?;
        let Some(latest) = attempts.into_iter().rev().find(|a| a.operation_id == call.operation_id) else {
            return Ok(false);
        };
        let looked = self.look(&latest, false).await;
        match retry::before_resend(looked.observed) {
            BeforeResend::Send => Ok(false),
            BeforeResend::Completed => {
                let from = FromReadBack {
                    task_ref: task.task_ref.clone(),
                    operation_id: call.operation_id.clone(),
                    request_digest: call.request_digest.clone(),
                    request: call.request.clone(),
                    try_no: latest.try_no + 1,
                    inputs_at_intent: call.inputs_at_intent.clone(),
                    protected: call.protected.clone(),
                    looked,
                    budgets: call.budgets.clone(),
                    began_ms: call.began_ms,
                };
                let intent = match self.io.record(|reply| Record::CompletedFromReadBack(Box::new(from), reply)).await? {
                    Ok(intent) => intent,
                    Err(exhausted) => {
                        // No room for the try in the budgets: nothing is
                        // recorded; the run stops on the budget, and the
                        // retry after a person's raise reads back again.
                        self.stops.budget = Some(exhausted);
                        return Ok(true);
                    }
                };
                let id = intent.attempt_id();
                let mut flight = Flight::new(intent, &task.task_ref);
                flight.protected = call.protected.clone();
                self.in_flight.insert(id, flight);
                self.states.insert(task.task_ref.clone(), TaskState::Running);
                self.start_validations(id, task).await?;
                Ok(true)
            }
            BeforeResend::StaysUnknown => {
                let (task_ref, operation_id) = (task.task_ref.clone(), call.operation_id.clone());
                self.io
                    .write_done(Write::RetryStaysUnknown { task_ref, operation_id, looked: Box::new(looked) })
                    .await?;
                self.states.insert(task.task_ref.clone(), TaskState::EffectUnknown);
                Ok(true)
            }
        }
    }
}
