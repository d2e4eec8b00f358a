//! The whole interface: every read of every aggregate, and every write
//! inside one transaction. Read-model helpers that combine several reads
//! (a task's completion) are provided methods here, so a backend can
//! answer them in one query instead.

use std::collections::HashMap;

use super::acts::{ActRef, ActsRead, ActsWrite, Tampered};
use super::attempts::{AttemptsRead, AttemptsWrite};
use super::events::{EventsRead, EventsWrite};
use super::evidence::{CheckScope, ChecksOf, CompletionRecord, EvidenceRead, EvidenceWrite};
use super::goals::{GoalRecord, GoalsRead, GoalsWrite};
use super::outputs::{OutputsRead, OutputsWrite};
use super::Fence;
use crate::checkpoint::RecordedCheckpoint;
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, GoalId, Revision};
use crate::state::{AttemptState, TaskState};

/// Every read of the ledger.
pub trait LedgerRead: GoalsRead + AttemptsRead + EvidenceRead + OutputsRead + ActsRead + EventsRead {
    /// The goal a command names (`--goal`), or the one most recently run.
    fn goal_or_latest(&self, goal: Option<&GoalId>) -> Result<GoalRecord> {
        let row = match goal {
            Some(id) => self.goal(id)?,
            None => self.latest_goal()?,
        };
        row.ok_or_else(|| match goal {
            Some(id) => {
                let known = self.goal_summaries(crate::limits::GOALS_LISTED_MAX).unwrap_or_default();
                let hint = crate::plan::suggest::did_you_mean(id.as_str(), known.iter().map(|g| g.id.as_str()));
                Error::usage(format!("no goal `{id}` in this store{hint} (`engine goals` lists them)"))
            }
            None => Error::usage("this store has no goal yet: run `engine run PLAN` first"),
        })
    }

    /// An attempt's number among its task's attempts, every revision, in
    /// ledger order (1, 2, …): the number a person counts by (`engine
    /// explain`, `engine output --attempt N`, `engine log`). The ledger's
    /// store-wide id stays an id.
    fn attempt_number(&self, id: AttemptId) -> Result<i64> {
        let a = self.attempt(id)?;
        Ok(super::attempts::number_in(&self.attempts_of_task(&a.goal_id, &a.task_ref)?, id))
    }

    /// A settled attempt's settlement, vouched for by the act chain: a
    /// person's settlement is what lets the engine act on an unknown
    /// outcome, so an attempt marked settled without one (or with one off
    /// the chain) is `STORE_TAMPERED`.
    fn check_settled(&self, attempt: AttemptId) -> Result<()> {
        let settlements = self.settlements_of_attempt(attempt)?;
        if settlements.is_empty() {
            let row = format!("attempts row {attempt}");
            return Err(Error::new(
                Code::StoreTampered,
                format!("{row} is settled, but no person's settlement of it is recorded: it was written by something other than the engine; nothing acts on it"),
            )
            .at(row));
        }
        for s in settlements {
            self.check_on_chain(ActRef::Settlement(s.id))?;
        }
        Ok(())
    }

    /// The act rows of a goal (of every goal: `None`) that the act chain
    /// does not vouch for: what every view marks `STORE_TAMPERED`.
    fn unvouched_acts(&self, goal: Option<&GoalId>) -> Result<Vec<Tampered>> {
        let acts = match goal {
            None => self.every_act()?,
            Some(g) => {
                let approvals = self.approvals_of_goal(g)?.into_iter().map(|a| ActRef::Approval(a.id));
                let settlements = self.settlements_of_goal(g)?.into_iter().map(|s| ActRef::Settlement(s.id));
                let asks = self.asks_of_goal(g)?.into_iter().map(|a| ActRef::Ask(a.id));
                approvals.chain(settlements).chain(asks).collect()
            }
        };
        if acts.is_empty() {
            return Ok(Vec::new());
        }
        self.unvouched(&acts)
    }

    /// The completion of `task_ref` in `revision`, as a reuse decision
    /// needs it: its succeeded attempt (following a reuse's provenance to
    /// the original), the checkpoint its validations judged, and their
    /// latest results. `None`: the task did not complete in that revision.
    fn completion(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<CompletionRecord>> {
        let Some(task) = self.task(goal, revision, task_ref)? else { return Ok(None) };
        let attempt_id = match task.state {
            TaskState::Succeeded => self.completed_attempt(goal, revision, task_ref)?,
            TaskState::Reused => task.reused_from_attempt().map(AttemptId),
            _ => None,
        };
        let Some(attempt_id) = attempt_id else { return Ok(None) };
        let a = self.attempt(attempt_id)?;
        if !matches!(a.state, AttemptState::Succeeded | AttemptState::SettledOk) {
            return Ok(None);
        }
        let checkpoint = match &a.checkpoint {
            Some(digest) => self.checkpoint(digest)?.map(RecordedCheckpoint::from),
            None => None,
        };
        let validations = self.latest_check_results(ChecksOf {
            goal,
            revision: a.revision,
            scope: CheckScope::Validation,
            task_ref: Some(task_ref),
        })?;
        Ok(Some(CompletionRecord {
            revision: a.revision,
            attempt_id,
            meaning: task.meaning,
            dependencies: task.dependencies,
            checkpoint,
            reusable: a.reusable.unwrap_or(false),
            validations,
        }))
    }

    /// The latest succeeded (or settled-as-done) attempt of each task of
    /// `revision` that has one, by task ref, with its state:
    /// `completed_attempt` and `attempt` for every task, in as few reads
    /// as the backend can answer them.
    fn completed_attempts(
        &self,
        goal: &GoalId,
        revision: Revision,
    ) -> Result<HashMap<String, (AttemptId, AttemptState)>> {
        let mut out = HashMap::new();
        for t in self.tasks(goal, revision)? {
            if let Some(id) = self.completed_attempt(goal, revision, &t.task_ref)? {
                out.insert(t.task_ref, (id, self.attempt(id)?.state));
            }
        }
        Ok(out)
    }

    /// `completion` of every task of `revision` that has one, by task ref.
    /// A backend answers it with a few reads per revision instead of five
    /// per task (SQLite does); this default asks task by task.
    fn completions(&self, goal: &GoalId, revision: Revision) -> Result<HashMap<String, CompletionRecord>> {
        let mut out = HashMap::new();
        for t in self.tasks(goal, revision)? {
            if let Some(c) = self.completion(goal, revision, &t.task_ref)? {
                out.insert(t.task_ref, c);
            }
        }
        Ok(out)
    }
}

/// Every write of the ledger, inside one transaction begun under a fence.
pub trait LedgerTx:
    LedgerRead + GoalsWrite + AttemptsWrite + EvidenceWrite + OutputsWrite + ActsWrite + EventsWrite
{
    /// The right this transaction writes under (stamped on each intent).
    fn fence(&self) -> Fence;
}
