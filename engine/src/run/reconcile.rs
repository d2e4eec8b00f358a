//! Reconciliation on start: before anything new runs, every attempt left
//! between intent and receipt goes through the in-doubt resolver (observed
//! first, where the provider can); then every receipt not yet judged is
//! judged. Never re-sent blindly.

use serde_json::json;

use super::in_doubt::resolve;
use super::look::Looked;
use super::record::Next;
use super::{InFlight, Runner};
use crate::decide::in_doubt::{Resolution, Situation};
use crate::error::Result;
use crate::evidence::UnknownReason;
use crate::state::{AttemptState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::Durability;
use crate::store::LedgerTx;

impl Runner<'_> {
    pub(super) async fn reconcile(&mut self) -> Result<()> {
        self.reconcile_where(None).await
    }

    /// Reconcile the attempts of one task (`only`) or of every task. On a
    /// shared store, only those of tasks no other live worker holds, each
    /// under its task's claim (taken over from a dead worker if need be);
    /// attempts this run has in flight are its own business.
    pub(super) async fn reconcile_where(&mut self, only: Option<&str>) -> Result<()> {
        let skip = self.ledger.held_elsewhere(&self.goal_id)?;
        let in_doubt = self.ledger.read().attempts_in_doubt(&self.goal_id)?;
        for a in in_doubt {
            let mine = only.is_none_or(|t| t == a.task_ref);
            if !mine || skip.contains(&a.task_ref) || self.in_flight.contains_key(&a.id) {
                continue;
            }
            if !self.claim_for(&a.task_ref)? {
                continue;
            }
            self.forget_first_look();
            if a.revision != self.revision {
                self.superseded_in_doubt(&a).await?;
            } else {
                self.restarted(&a).await?;
            }
            if only.is_none() {
                self.release_if_idle(&a.task_ref)?;
            }
        }
        self.judge_unjudged(only, &skip).await
    }

    /// An attempt of this revision the engine stopped in the middle of.
    async fn restarted(&mut self, a: &AttemptRecord) -> Result<()> {
        let Some(task) = self.plan.task(&a.task_ref).cloned() else { return Ok(()) };
        // Looking comes before any re-send, even of a safe effect: the
        // provider's answer by the request's handle, or the effect read
        // back, is the receipt.
        let looked = self.look(a, &task, true).await;
        let resolution = resolve(Situation::Restarted, &task, &looked);
        if let Resolution::Abandoned { .. } = resolution {
            let revision = self.revision;
            self.ledger.write(Durability::Full, |tx| abandon(tx, revision, a, &looked))?;
            self.states.insert(a.task_ref.clone(), TaskState::Pending);
            return Ok(());
        }
        let data = json!({
            "operation_id": a.operation_id, "last_state": a.state, "why": UnknownReason::EngineRestarted.as_str(),
        });
        self.write_event(Durability::Normal, EventKind::Reconciling, Some(&a.task_ref), Some(a.id), data)?;
        self.in_flight.insert(a.id, InFlight::new(a.intent(), &a.task_ref));
        let detail = format!("engine restarted; last state {}", a.state);
        match self.settle_lost(a, &task, resolution, UnknownReason::EngineRestarted, detail, looked).await? {
            Next::Validate => self.start_validations(a.id, &task).await?,
            Next::Done => {
                self.in_flight.remove(&a.id);
            }
        }
        Ok(())
    }

    /// A receipt was committed (or a person settled `ok`) but validations
    /// never finished: judge now — once: an attempt already being judged
    /// (its receipt just came from an observation) is not judged twice.
    async fn judge_unjudged(&mut self, only: Option<&str>, skip: &std::collections::HashSet<String>) -> Result<()> {
        let read = self.ledger.read();
        let mut to_validate = read.attempts_in_state(&self.goal_id, AttemptState::ReceiptRecorded)?;
        for a in read.latest_attempts_in_state(&self.goal_id, self.revision, AttemptState::SettledOk)? {
            let waiting = matches!(self.states.get(&a.task_ref), Some(TaskState::Running | TaskState::Cancelled));
            if !read.is_judged(a.id)? && waiting {
                // The engine goes on only on a settlement the act chain
                // vouches for (STORE_TAMPERED otherwise: nothing runs).
                read.check_settled(a.id)?;
                to_validate.push(a);
            }
        }
        for a in to_validate {
            if a.revision != self.revision || self.in_flight.contains_key(&a.id) {
                continue;
            }
            if only.is_some_and(|t| t != a.task_ref) || skip.contains(&a.task_ref) || !self.claim_for(&a.task_ref)? {
                continue;
            }
            let Some(task) = self.plan.task(&a.task_ref).cloned() else { continue };
            self.forget_first_look();
            if self.state(&a.task_ref) != TaskState::Running {
                // A person's stop ended its validations: judged now.
                let detail = json!({"attempt_id": a.id, "why": "judging the receipt a stopped run kept"});
                self.set_task(&a.task_ref, TaskState::Running, detail)?;
            }
            self.in_flight.insert(a.id, InFlight::new(a.intent(), &a.task_ref));
            self.states.insert(a.task_ref.clone(), TaskState::Running);
            self.start_validations(a.id, &task).await?;
        }
        Ok(())
    }
}

/// Given up for a new try: safe, because the effect is `none` or the task
/// idempotent (and observation did not find it); the try keeps counting.
fn abandon(tx: &mut dyn LedgerTx, revision: crate::ids::Revision, a: &AttemptRecord, looked: &Looked) -> Result<()> {
    for e in looked.evidence(tx)? {
        tx.insert_evidence(&a.goal_id, revision, Some(a.id), &e)?;
    }
    tx.finish_attempt(a.id, AttemptState::Abandoned, None, Some(UnknownReason::EngineRestarted))?;
    let key = TaskKey { goal_id: &a.goal_id, revision, task_ref: &a.task_ref };
    tx.set_task_state(key, TaskState::Pending, &json!({"rerun_of": a.id}))?;
    let data = json!({
        "operation_id": a.operation_id, "try": a.try_no, "last_state": a.state,
        "why": "no receipt; the effect is none or idempotent, so a new try is safe",
    });
    let e = Event::goal(EventKind::RerunAfterRestart, &a.goal_id, revision, data);
    tx.append_event(&e.task(&a.task_ref).attempt(a.id)).map(|_| ())
}
