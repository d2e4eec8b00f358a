//! An attempt without a receipt, through `decide::in_doubt`: look first
//! (its handle, then its read-back rule), ask the resolver, record its
//! answer. The same path serves a lost answer, a restart (reconciliation
//! before anything new runs: never re-sent blindly), and an attempt of a
//! superseded revision; then every receipt not yet judged is judged.

use std::collections::HashSet;

use serde_json::json;

use super::action::{Via, WorldAction, Write};
use super::attempt::Next;
use super::state::{Flight, Run};
use crate::decide::in_doubt::{self, Facts as InDoubt, Resolution, Situation};
use crate::error::{Error, Result};
use crate::evidence::{Evidence, UnknownReason};
use crate::ids::AttemptId;
use crate::plan::Task;
use crate::run::constraints::starts_process;
use crate::run::looked::Looked;
use crate::state::TaskState;
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventKind;
use crate::store::Durability;

/// The resolver's answer for an in-doubt attempt of this revision's task.
fn resolve(situation: Situation, task: &Task, looked: &Looked) -> Resolution {
    in_doubt::resolve(InDoubt {
        situation,
        effect: task.effect,
        idempotent: task.idempotent,
        observed: looked.observed,
    })
}

impl Run<'_> {
    /// Dispatched, no receipt: look first; only a look or a safe effect
    /// settles it, otherwise the outcome is unknown. A request whose
    /// deadline passed was cancelled by its provider (an MCP task gets
    /// `tasks/cancel`): asking about it by its handle would only hear that.
    pub async fn lost(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        reason: UnknownReason,
        detail: String,
    ) -> Result<Next> {
        let attempt = self.io.attempt(attempt_id).await?;
        let ask_handle = reason != UnknownReason::DeadlineAfterDispatch;
        let looked = self.look(&attempt, ask_handle).await;
        let resolution = resolve(Situation::AnswerLost, task, &looked);
        self.settle_lost(&attempt, task, resolution, (reason, detail), looked).await
    }

    /// Record the resolution of an in-doubt attempt of this revision
    /// (`Abandoned` is the restart's own path, see `restarted`).
    async fn settle_lost(
        &mut self,
        attempt: &AttemptRecord,
        task: &Task,
        resolution: Resolution,
        (reason, detail): (UnknownReason, String),
        looked: Looked,
    ) -> Result<Next> {
        let dispatched = attempt.dispatched_at_ms.is_some();
        match resolution {
            Resolution::Answer { .. } => self.answered(attempt, task, reason, looked).await,
            Resolution::Receipt { .. } => {
                let attempt = Box::new(attempt.clone());
                let looked = Box::new(looked);
                self.io.write_done(Write::ObservedReceipt { attempt, reason, detail, looked }).await?;
                self.io.crashpoint("after_receipt_commit").await;
                Ok(Next::Validate)
            }
            Resolution::Failed { marker } => {
                let list = match marker {
                    true => vec![Evidence::EffectMarker { reason, safe_to_resend: true, dispatched }],
                    false => Vec::new(),
                };
                self.fail_with(attempt.id, task, Some(&looked), list, (Durability::Full, false)).await?;
                Ok(Next::Done)
            }
            Resolution::Unknown | Resolution::Abandoned { .. } => {
                let list = vec![Evidence::EffectMarker { reason, safe_to_resend: false, dispatched }];
                self.mark_unknown(attempt.id, Some(&looked), list, reason).await?;
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
        why: UnknownReason,
        looked: Looked,
    ) -> Result<Next> {
        let Some(receipt) = looked.answer.clone() else {
            return Err(Error::internal("an answer by handle needs the answer"));
        };
        let protected = self.judge_protected(attempt.id, task).await?;
        self.note_writes(attempt.id, &protected);
        self.received(attempt.id, task, receipt, Some(Via { looked, why }), protected).await
    }

    /// The protected paths after an attempt, against the state it was
    /// judged against (empty when nothing protected changed).
    pub async fn judge_protected(&self, attempt_id: AttemptId, task: &Task) -> Result<Vec<Evidence>> {
        if !self.guard.protects(starts_process(self.plan.provider_of(task))) {
            return Ok(Vec::new());
        }
        let flight = self.in_flight.get(&attempt_id);
        let before = flight.and_then(|f| f.protected.clone());
        // Its writes judged at its receipt already: not looked at again.
        let writes = flight.is_none_or(|f| f.writes.is_none());
        let others = self.beside(Some(attempt_id));
        self.io.judge_protected(attempt_id, &task.task_ref, (before, writes, others)).await
    }

    /// The attempts in flight (but `except`) whose calls may still write
    /// the workspace (until their receipt is judged: `writes`), for a look
    /// that may stand as a later baseline while they all still are; `None`
    /// while any of them runs validations or constraint checks: what those
    /// write is no attempt's (their own attempt's writes are the ones
    /// judged at its receipt), so a look taken meanwhile stands for
    /// nothing (a later attempt would answer for what they write before
    /// its start).
    pub(super) fn beside(&self, except: Option<AttemptId>) -> Option<Vec<AttemptId>> {
        let others = || self.in_flight.iter().filter(move |(id, _)| Some(**id) != except);
        if others().any(|(_, f)| f.validating && self.runs_checks(f)) {
            return None;
        }
        Some(others().filter(|(_, f)| f.writes.is_none()).map(|(id, _)| *id).collect())
    }

    /// Does `f`'s validation start a process: a validation of its task's,
    /// or one of the goal's constraint checks? (Of none, nothing runs.)
    fn runs_checks(&self, f: &Flight) -> bool {
        self.plan.task(&f.task_ref).is_none_or(|t| !t.validations.is_empty()) || !self.guard.checks.is_empty()
    }

    /// Reconcile the attempts of one task (`only`) or of every task. On a
    /// shared store, only those of tasks no other live worker holds, each
    /// under its task's claim (taken over from a dead worker if need be);
    /// attempts this run has in flight are its own business.
    pub async fn reconcile_where(&mut self, only: Option<&str>) -> Result<()> {
        let found = self.io.in_doubt().await?;
        let (skip, in_doubt) = (found.skip, found.attempts);
        for a in in_doubt {
            let mine = only.is_none_or(|t| t == a.task_ref);
            if !mine || skip.contains(&a.task_ref) || self.in_flight.contains_key(&a.id) {
                continue;
            }
            if !self.claim_for(&a.task_ref).await? {
                continue;
            }
            self.io.forget().await;
            if a.revision != self.revision {
                self.superseded_in_doubt(&a).await?;
            } else {
                self.restarted(&a).await?;
            }
            if only.is_none() {
                self.release_if_idle(&a.task_ref).await?;
            }
        }
        self.judge_unjudged(only, &skip).await
    }

    /// An attempt of this revision the engine stopped in the middle of.
    async fn restarted(&mut self, a: &AttemptRecord) -> Result<()> {
        let Some(task) = self.plan.task(&a.task_ref) else { return Ok(()) };
        // Looking comes before any re-send, even of a safe effect: the
        // provider's answer by the request's handle, or the effect read
        // back, is the receipt.
        let looked = self.look(a, true).await;
        let mut resolution = resolve(Situation::Restarted, task, &looked);
        if crate::failpoint::fault(crate::failpoint::Fault::ResendOnRestart)
            && matches!(resolution, Resolution::Unknown | Resolution::Failed { .. })
        {
            // Planted fault: an attempt nobody can settle given up for a
            // new try, whatever its effect.
            resolution = Resolution::Abandoned { rerun: true, marker: false };
        }
        if let Resolution::Abandoned { .. } = resolution {
            let abandon = Write::Abandon { attempt: Box::new(a.clone()), looked: Box::new(looked) };
            self.io.write_done(abandon).await?;
            self.states.insert(a.task_ref.clone(), TaskState::Pending);
            return Ok(());
        }
        let data = json!({
            "operation_id": a.operation_id, "last_state": a.state, "why": UnknownReason::EngineRestarted.as_str(),
        });
        self.write_event(Durability::Normal, EventKind::Reconciling, Some(&a.task_ref), Some(a.id), data).await?;
        self.in_flight.insert(a.id, Flight::new(a.intent(), &a.task_ref));
        let detail = format!("engine restarted; last state {}", a.state);
        let why = (UnknownReason::EngineRestarted, detail);
        match self.settle_lost(a, task, resolution, why, looked).await? {
            Next::Validate => self.start_validations(a.id, task).await?,
            Next::Done => {
                self.in_flight.remove(&a.id);
            }
        }
        Ok(())
    }

    /// An attempt of an earlier revision left without a receipt. Its
    /// revision no longer runs, so it is never re-sent. Looked at first,
    /// with that revision's provider and rule, where it can be.
    async fn superseded_in_doubt(&mut self, a: &AttemptRecord) -> Result<()> {
        let attempt = Box::new(a.clone());
        let deadline = self.deadline();
        let (effect, idempotent, looked) =
            self.io.world(|reply| WorldAction::LookSuperseded { attempt, deadline, reply }).await?;
        let facts = InDoubt { situation: Situation::Superseded, effect, idempotent, observed: looked.observed };
        let resolution = in_doubt::resolve(facts);
        let superseded = Write::Superseded { attempt: Box::new(a.clone()), resolution, looked };
        self.io.write_done(superseded).await
    }

    /// A receipt was committed (or a person settled `ok`) but validations
    /// never finished: judge now — once: an attempt already being judged
    /// (its receipt just came from an observation) is not judged twice.
    async fn judge_unjudged(&mut self, only: Option<&str>, skip: &HashSet<String>) -> Result<()> {
        let waiting: HashSet<String> = self
            .states
            .iter()
            .filter(|(_, s)| matches!(s, TaskState::Running | TaskState::Cancelled))
            .map(|(r, _)| r.clone())
            .collect();
        let to_validate = self.io.unjudged(waiting).await?;
        for a in to_validate {
            if a.revision != self.revision || self.in_flight.contains_key(&a.id) {
                continue;
            }
            if only.is_some_and(|t| t != a.task_ref)
                || skip.contains(&a.task_ref)
                || !self.claim_for(&a.task_ref).await?
            {
                continue;
            }
            let Some(task) = self.plan.task(&a.task_ref) else { continue };
            self.io.forget().await;
            if self.state(&a.task_ref) != TaskState::Running {
                // A person's stop ended its validations: judged now.
                let detail = json!({"attempt_id": a.id, "why": "judging the receipt a stopped run kept"});
                self.set_task(&a.task_ref, TaskState::Running, detail).await?;
            }
            self.in_flight.insert(a.id, Flight::new(a.intent(), &a.task_ref));
            self.states.insert(a.task_ref.clone(), TaskState::Running);
            self.start_validations(a.id, task).await?;
        }
        Ok(())
    }
}
