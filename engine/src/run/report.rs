//! The end of a run: the verdict (`decide::verdict`) over what the ledger
//! now holds, recorded, and the report the CLI renders.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::json;

use super::Runner;
use crate::decide::budget::Exhausted;
use crate::decide::verdict::{self, Verdict};
use crate::error::{Code, Result};
use crate::evidence::UnknownReason;
use crate::ids::{GoalId, OperationId, RequestDigest, Revision};
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::evidence::CheckScope;
use crate::store::Durability;

/// An operation whose outcome a person must settle.
#[derive(Debug, Clone, Serialize)]
pub struct UnknownOp {
    pub operation_id: OperationId,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    pub try_no: i64,
    pub state: AttemptState,
    /// The last state the engine knew before the outcome became unknown
    /// (`intent_recorded`, `dispatched` or `receipt_recorded`).
    pub last_state: AttemptState,
    /// Why nobody can tell (`""` if the ledger does not say).
    #[serde(serialize_with = "reason_word")]
    pub reason: Option<UnknownReason>,
}

fn reason_word<S: serde::Serializer>(r: &Option<UnknownReason>, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(r.map_or("", UnknownReason::as_str))
}

impl UnknownOp {
    pub fn of(a: &AttemptRecord, last_state: AttemptState, reason: Option<UnknownReason>) -> UnknownOp {
        UnknownOp {
            operation_id: a.operation_id.clone(),
            task_ref: a.task_ref.clone(),
            request_digest: a.request_digest.clone(),
            try_no: a.try_no,
            state: AttemptState::EffectUnknown,
            last_state,
            reason,
        }
    }

    pub fn reason_text(&self) -> &'static str {
        self.reason.map_or("", UnknownReason::as_str)
    }
}

/// An operation waiting on a person's approval.
#[derive(Debug, Clone, Serialize)]
pub struct Awaiting {
    pub operation_id: OperationId,
    pub task_ref: String,
    pub request_digest: RequestDigest,
    /// An approval exists but was for another request or plan.
    pub stale: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskLine {
    pub task_ref: String,
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AcceptanceLine {
    pub id: String,
    pub passed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub goal_id: GoalId,
    pub revision: Revision,
    pub goal_state: GoalState,
    pub exit_code: i32,
    /// The stable code of the stop, when the run did not satisfy the goal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Code>,
    pub tasks: Vec<TaskLine>,
    pub acceptance: Vec<AcceptanceLine>,
    pub unknown: Vec<UnknownOp>,
    pub failed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Exhausted>,
    pub awaiting_approval: Vec<Awaiting>,
    /// Operations a person settled as not run and nobody has re-sent.
    pub settled_not_run: Vec<OperationId>,
    /// Acceptance criteria with no `check`: stated, never verified.
    pub acceptance_unchecked: Vec<String>,
}

impl Runner<'_> {
    /// Every unknown outcome of the goal (this run's first, in the order
    /// they arose), with the last state each was known in.
    fn unknown_ops(&mut self) -> Result<Vec<UnknownOp>> {
        let mut unknown = std::mem::take(&mut self.stops.unknown);
        let read = self.ledger.read();
        for a in read.attempts_in_state(&self.goal_id, AttemptState::EffectUnknown)? {
            if !unknown.iter().any(|u| u.operation_id == a.operation_id && u.try_no == a.try_no) {
                let last_state = a.last_known_state(read.receipt(a.id)?.is_some());
                unknown.push(UnknownOp::of(&a, last_state, a.unknown_reason));
            }
        }
        Ok(unknown)
    }

    /// Each task's line, in plan order.
    fn task_lines(&self) -> Result<Vec<TaskLine>> {
        let order: HashMap<&str, usize> = self
            .plan
            .order
            .iter()
            .enumerate()
            .map(|(pos, &i)| (self.plan.file.tasks[i].task_ref.as_str(), pos))
            .collect();
        let mut tasks: Vec<TaskLine> = self
            .ledger
            .read()
            .tasks(&self.goal_id, self.revision)?
            .iter()
            .map(|r| TaskLine {
                task_ref: r.task_ref.clone(),
                state: r.state,
                class: r.class().map(str::to_string),
                why: r.why().map(str::to_string),
            })
            .collect();
        tasks.sort_by_key(|t| order.get(t.task_ref.as_str()).copied().unwrap_or(usize::MAX));
        Ok(tasks)
    }

    /// In debug builds: the budget counters equal the attempts they count.
    fn check_budget_counters(&self) -> Result<()> {
        if cfg!(debug_assertions) {
            let read = self.ledger.read();
            let (counted, kept) = (read.recount_budget_use(&self.goal_id)?, read.budget_use(&self.goal_id)?);
            assert_eq!(counted, kept, "budget counters {kept:?} != recount {counted:?}");
        }
        Ok(())
    }

    /// On a shared store, the goal another worker already judged: its
    /// verdict as that worker recorded it (`run_finished`), nothing written.
    pub(super) fn report_judged(&mut self) -> Result<RunReport> {
        let unknown = self.unknown_ops()?;
        let tasks = self.task_lines()?;
        let read = self.ledger.read();
        let goal = read.goal_or_latest(Some(&self.goal_id))?;
        let finished = read.latest_event(&self.goal_id, self.revision, EventKind::RunFinished)?;
        let exit_code = finished
            .as_ref()
            .and_then(|e| e.data.get("exit_code"))
            .and_then(|c| c.as_i64())
            .map_or(crate::error::EXIT_TASK_FAILED, |c| c as i32);
        let code = finished
            .as_ref()
            .and_then(|e| e.data.get("code"))
            .and_then(|c| c.as_str())
            .and_then(crate::decide::verdict::code_named);
        let acceptance = read
            .latest_check_results(&self.goal_id, self.revision, CheckScope::Acceptance, None)?
            .into_iter()
            .map(|c| AcceptanceLine { id: c.check_id, passed: c.passed })
            .collect();
        let not_run = read.latest_attempts_in_state(&self.goal_id, self.revision, AttemptState::SettledNotRun)?;
        let awaiting = tasks
            .iter()
            .filter(|t| t.state == TaskState::AwaitingApproval)
            .filter_map(|t| {
                let d = self.plan.digests.tasks.get(&t.task_ref)?;
                Some(Awaiting {
                    operation_id: d.operation_id.clone(),
                    task_ref: t.task_ref.clone(),
                    request_digest: d.request.clone(),
                    stale: false,
                })
            })
            .collect();
        Ok(RunReport {
            goal_id: self.goal_id.clone(),
            revision: self.revision,
            goal_state: goal.state,
            exit_code,
            code,
            failed: tasks.iter().filter(|t| t.state == TaskState::Failed).map(|t| t.task_ref.clone()).collect(),
            tasks,
            acceptance,
            unknown,
            budget: None,
            awaiting_approval: awaiting,
            settled_not_run: not_run.iter().map(|a| a.operation_id.clone()).collect(),
            acceptance_unchecked: self.unchecked_acceptance(),
        })
    }

    fn unchecked_acceptance(&self) -> Vec<String> {
        self.plan.goal().acceptance.iter().filter(|a| a.check.is_none()).map(|a| a.id.clone()).collect()
    }

    /// Decide the goal's state and the exit code from what the ledger now
    /// holds (the latest result of everything, in ledger order).
    pub(super) fn finish(&mut self, acceptance: Option<Vec<AcceptanceLine>>) -> Result<RunReport> {
        self.check_budget_counters()?;
        let unknown = self.unknown_ops()?;
        let tasks = self.task_lines()?;
        let failed: Vec<String> =
            tasks.iter().filter(|t| t.state == TaskState::Failed).map(|t| t.task_ref.clone()).collect();
        let awaiting = std::mem::take(&mut self.stops.awaiting);
        let not_run =
            self.ledger.read().latest_attempts_in_state(&self.goal_id, self.revision, AttemptState::SettledNotRun)?;
        // A settled-not-run operation whose re-send a person asked for
        // (`engine retry`) and which now waits on an approval stops the run
        // as APPROVAL_REQUIRED: approving is what the person does next.
        let unretried = not_run.iter().filter(|a| !awaiting.iter().any(|w| w.operation_id == a.operation_id)).count();
        let Verdict { goal_state, code, exit_code } = verdict::verdict(&verdict::Facts {
            unknown: unknown.len(),
            settled_not_run: unretried,
            awaiting_approval: awaiting.len(),
            approval_stale: awaiting.iter().any(|a| a.stale),
            budget_exhausted: self.stops.budget.is_some(),
            failed_tasks: failed.len(),
            acceptance_passed: acceptance.as_ref().map(|a| a.iter().all(|l| l.passed)),
        });
        let summary = json!({
            "goal_state": goal_state, "exit_code": exit_code, "code": code, "failed": failed,
            "unknown": unknown.iter().map(|u| &u.operation_id).collect::<Vec<_>>(),
            "awaiting_approval": awaiting.iter().map(|u| &u.operation_id).collect::<Vec<_>>(),
            "budget": self.stops.budget,
        });
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let dirty = self.cache.take_dirty();
        self.ledger.write(Durability::Normal, |tx| {
            tx.put_file_states(&dirty)?;
            let seq = tx.append_event(&Event::goal(EventKind::RunFinished, &goal_id, revision, summary.clone()))?;
            tx.set_goal_state(&goal_id, goal_state, seq)
        })?;
        Ok(RunReport {
            goal_id: self.goal_id.clone(),
            revision: self.revision,
            goal_state,
            exit_code,
            code,
            tasks,
            acceptance: acceptance.unwrap_or_default(),
            unknown,
            failed,
            budget: self.stops.budget.clone(),
            awaiting_approval: awaiting,
            settled_not_run: not_run.iter().map(|a| a.operation_id.clone()).collect(),
            acceptance_unchecked: self.unchecked_acceptance(),
        })
    }
}
