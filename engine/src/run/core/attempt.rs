//! One attempt from its provider's answer to its rest: the receipt and
//! its verdict on the provider's own terms, the validations that judge it,
//! or the failure or unknown outcome it ends in — each recorded in one
//! transaction (`driver::ledger`), the core keeping what follows from it.

use providers::{Handle, Receipt};

use super::action::{Judged, Receiving, Record, Validating, Validations, Via, WorldAction, Write};
use super::event::{Spent, Verdict};
use super::state::Run;
use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::evidence::{Evidence, UnknownReason};
use crate::ids::AttemptId;
use crate::plan::{Effect, ProviderSpec, Task};
use crate::run::check::CheckSpec;
use crate::run::looked::Looked;
use crate::run::outputs::Kept;
use crate::state::{AttemptState, TaskState};
use crate::store::Durability;

/// What the core does next with an attempt.
pub(super) enum Next {
    Validate,
    Done,
}

impl Run<'_> {
    /// A provider's answer: the receipt, its evidence, and the verdict on
    /// the provider's own terms, with the evidence of its protected paths.
    /// `via`: it was fetched by the request's handle after the answer was
    /// lost.
    pub async fn received(
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
        // judged with the receipt): then it fails there. A constraint's check
        // or protected paths still take the validation path, which runs and
        // judges them.
        // A task with declared outputs takes the validation path too: its
        // outputs are read after its receipt, then committed with its success.
        let reported = self.reported(task, &receipt);
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.reported = reported.clone();
        }
        let unchecked = match task.validations.is_empty() && self.guard.judged_at_receipt() && task.outputs.is_empty() {
            true => Some(self.observe_checkpoint(task, reported.as_ref()).await),
            false => None,
        };
        let intent = self.flight(attempt_id)?.intent;
        let agent_json = matches!(self.plan.provider_of(task), ProviderSpec::Command { protocol: Some(_), .. });
        // A builtin cut short did nothing outside the engine: a plain timeout.
        let timed_out = matches!(&receipt, Receipt::Command(r) if r.timed_out);
        let timed_out_unsafe = timed_out && task.effect == Effect::External && !task.safe_to_resend();
        let receiving = Receiving {
            attempt_id,
            intent,
            task_ref: task.task_ref.clone(),
            receipt,
            via,
            protected: protected.clone(),
            unchecked,
            agent_json,
            timed_out_unsafe,
        };
        let (verdict, spent) = self.io.record(|reply| Record::Receipt(Box::new(receiving), reply)).await?;
        self.hit_committed("after_receipt_commit").await;
        if let Some(spent) = spent {
            self.crossed_by_spending(task, attempt_id, &spent);
        }
        Ok(self.after_verdict(attempt_id, task, verdict, &protected))
    }

    /// Who did the work, as the answer said: an HTTP service's declared
    /// version header, an agent's reported model (`decide::reuse::tool`).
    fn reported(&self, task: &Task, receipt: &Receipt) -> Option<(String, String)> {
        let spec = self.plan.provider_of(task);
        let report = match receipt {
            Receipt::Command(r) if matches!(spec, ProviderSpec::Command { protocol: Some(_), .. }) => {
                crate::decide::receipt::agent_report(r.stdout.parts().1).ok()
            }
            _ => None,
        };
        crate::decide::reuse::tool::reported(spec, &task.provider, receipt, report.as_ref())
    }

    /// What the receipt's verdict leaves the task in, and what comes next.
    fn after_verdict(&mut self, attempt_id: AttemptId, task: &Task, verdict: Verdict, protected: &[Evidence]) -> Next {
        match verdict {
            Verdict::Validate => Next::Validate,
            Verdict::Succeeded => {
                self.states.insert(task.task_ref.clone(), TaskState::Succeeded);
                Next::Done
            }
            Verdict::Unknown(attempt) => {
                let reason = UnknownReason::DeadlineAfterDispatch;
                self.note_unknown(&attempt, reason, AttemptState::ReceiptRecorded);
                Next::Done
            }
            Verdict::AwaitingInput => {
                self.states.insert(task.task_ref.clone(), TaskState::AwaitingInput);
                Next::Done
            }
            Verdict::AwaitsLogin { scope } => {
                // Nothing more starts; what is in flight drains, then the
                // run stops naming the login.
                self.states.insert(task.task_ref.clone(), TaskState::Pending);
                let plan = self.plan.source.as_deref();
                self.stops.login.get_or_insert_with(|| super::tools::step_up_required(task, &scope, plan));
                Next::Done
            }
            Verdict::Failed => {
                self.tally.judged(&task.task_ref, attempt_id, self.guard.goal_protects(), protected);
                self.states.insert(task.task_ref.clone(), TaskState::Failed);
                Next::Done
            }
        }
    }

    /// Spending a provider reported took the goal's cost past `max_cost`:
    /// the run stops dispatching, naming what was reported (the first
    /// crossing a run sees is the one it names). Work already in flight
    /// finishes and is recorded.
    fn crossed_by_spending(&mut self, task: &Task, attempt_id: AttemptId, spent: &Spent) {
        let limit = self.budgets.max_cost();
        if spent.used <= limit || self.stops.budget.is_some() {
            return;
        }
        let items: Vec<String> = spent.items.iter().map(crate::evidence::SpentItem::words).collect();
        self.stops.budget = Some(crate::decide::budget::Exhausted {
            budget: crate::decide::budget::BudgetName::MaxCost,
            used: spent.used.units(),
            limit: limit.units(),
            requested: 0.0,
            detail: Some(format!(
                "spending reported by task {}'s provider during attempt {attempt_id} (its word, not verified by the engine) took it past the limit: {} = {}",
                task.task_ref,
                items.join(" + "),
                spent.total
            )),
        });
    }

    /// Record an operation whose effect nobody can tell: `effect_unknown`,
    /// with why, waiting on a person's settlement.
    pub async fn mark_unknown(
        &mut self,
        attempt_id: AttemptId,
        looked: Option<&Looked>,
        evidence: Vec<Evidence>,
        reason: UnknownReason,
    ) -> Result<()> {
        let looked = looked.cloned().map(Box::new);
        let attempt = self.io.record(|reply| Record::Unknown { attempt_id, looked, evidence, reason, reply }).await?;
        self.note_unknown(&attempt, reason, attempt.state);
        Ok(())
    }

    /// Record evidence (what looking found first), classify from all of
    /// the attempt's evidence, fail it.
    pub async fn fail_with(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        looked: Option<&Looked>,
        evidence: Vec<Evidence>,
        (durability, never_dispatched): (Durability, bool),
    ) -> Result<()> {
        let task_ref = task.task_ref.clone();
        let looked = looked.cloned().map(Box::new);
        let failed = Write::Failed { attempt_id, task_ref, looked, evidence, durability, never_dispatched };
        self.io.write_done(failed).await?;
        self.states.insert(task.task_ref.clone(), TaskState::Failed);
        Ok(())
    }

    /// Record a task's validation results, judged against the checkpoint
    /// observed when they started, with the goal's constraint checks and
    /// its protected paths; the completion is reusable only if the inputs
    /// did not change while they ran.
    pub async fn record_validations(
        &mut self,
        attempt_id: AttemptId,
        task: &Task,
        (before, after): (Option<Checkpoint>, std::result::Result<Checkpoint, String>),
        (judged, kept): (Judged, Option<Kept>),
    ) -> Result<()> {
        let refused = kept.as_ref().is_some_and(|k| k.refusal().is_some());
        let all_passed = judged.passed() && !refused;
        let task_ref = task.task_ref.clone();
        let validations = Validations { attempt_id, task_ref, before, after, judged, kept };
        // What the tally weighs: the evidence of the goal's constraints the
        // transaction recorded (its checks' and the protected paths').
        let verdict_evidence = self.io.record(|reply| Record::Validations(Box::new(validations), reply)).await?;
        self.tally.judged(&task.task_ref, attempt_id, self.guard.goal_protects(), &verdict_evidence);
        let state = if all_passed { TaskState::Succeeded } else { TaskState::Failed };
        self.states.insert(task.task_ref.clone(), state);
        Ok(())
    }

    /// The provider accepted the request and named it: committed durably,
    /// on its own, the moment it arrives — an engine restarted after a
    /// crash asks the provider about it by this name.
    pub async fn record_handle(&mut self, attempt_id: AttemptId, handle: &Handle, detail: &str) -> Result<()> {
        let flight = self.flight(attempt_id)?;
        let (task_ref, intent) = (flight.task_ref.clone(), flight.intent);
        let (handle_kept, detail) = (handle.clone(), detail.to_string());
        self.io.write_done(Write::Handle { attempt_id, intent, task_ref, handle: handle_kept, detail }).await?;
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.handle = Some(handle.clone());
        }
        self.io.crashpoint("after_handle").await;
        Ok(())
    }

    /// Observe the checkpoint the validations will judge, then run them,
    /// then the goal's constraint checks (on the same path).
    pub async fn start_validations(&mut self, attempt_id: AttemptId, task: &Task) -> Result<()> {
        let reported = self.flight(attempt_id)?.reported.clone();
        let before = self.observe_checkpoint(task, reported.as_ref()).await.ok();
        self.io.say(super::action::Say::Validating(task.task_ref.clone())).await;
        let checks = task.validations.iter().map(CheckSpec::of_validation).collect();
        let constraint_checks = self.guard.checks.clone();
        let validating = Validating { attempt_id, task_ref: task.task_ref.clone(), checks, constraint_checks };
        self.io.world(|reply| WorldAction::Validate(validating, reply)).await;
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.before = before;
            f.validating = true;
        }
        Ok(())
    }
}
