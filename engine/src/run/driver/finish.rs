//! The end of a run: the verdict (`decide::verdict`) over what the ledger
//! now holds, recorded, and the report the CLI renders.

use std::collections::HashMap;

use serde_json::json;

use super::scope::Scope;
use crate::decide::verdict::{self, Verdict};
use crate::error::Result;
use crate::ids::OperationId;
use crate::run::core::Closing;
use crate::run::report::{
    AcceptanceLine, Awaiting, AwaitingInput, ConstraintLine, HeldTask, RunReport, StopReport, TaskLine, UnknownOp,
};
use crate::state::{AttemptState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind};
use crate::store::evidence::{CheckScope, ChecksOf};
use crate::store::{Durability, LeaseGuard};

/// What a run leaves for a person or for later: its tasks' lines, the
/// outcomes nobody knows, the failures, and what waits on a person.
struct Left {
    tasks: Vec<TaskLine>,
    unknown: Vec<UnknownOp>,
    failed: Vec<String>,
    awaiting: Vec<Awaiting>,
    same_request: Vec<crate::run::report::SameRequestWait>,
    awaiting_input: Vec<AwaitingInput>,
    not_run: Vec<AttemptRecord>,
    /// The settled `not_run` tries no approval waits to send again.
    unretried: usize,
    held: Vec<HeldTask>,
}

/// What closing a run reads and writes.
pub struct Closer<'l, 'p> {
    pub ledger: &'l mut LeaseGuard,
    pub scope: &'l Scope<'p>,
    pub c: Closing,
}

impl Closer<'_, '_> {
    /// Every unknown outcome of the goal (this run's first, in the order
    /// they arose), with the last state each was known in.
    fn unknown_ops(&mut self) -> Result<Vec<UnknownOp>> {
        let mut unknown = std::mem::take(&mut self.c.unknown);
        let read = self.ledger.read();
        for a in read.attempts_in_state(&self.scope.goal_id, AttemptState::EffectUnknown)? {
            if !unknown.iter().any(|u| u.operation_id == a.operation_id && u.try_no == a.try_no) {
                let last_state = a.last_known_state(read.receipt(a.id)?.is_some());
                unknown.push(UnknownOp::of(&a, last_state, a.unknown_reason));
            }
        }
        Ok(unknown)
    }

    /// Each of the goal's constraints, with what this run verified of it.
    fn constraint_lines(&self) -> Result<Vec<ConstraintLine>> {
        let t = &self.c.tally;
        // `T1 attempt 2`: the attempt as its task numbers it.
        let read = self.ledger.read();
        let by = |list: &[(String, crate::ids::AttemptId)]| -> Result<Vec<String>> {
            list.iter().map(|(r, id)| Ok(format!("{r} attempt {}", read.attempt_number(*id)?))).collect()
        };
        self.scope
            .plan
            .goal()
            .constraints
            .iter()
            .map(|c| {
                Ok(match c.checked() {
                    None => ConstraintLine {
                        id: None,
                        statement: c.statement().to_string(),
                        protects: false,
                        attempts_judged: 0,
                        check_passed: None,
                        has_check: false,
                        violated_by: Vec::new(),
                    },
                    Some(k) => ConstraintLine {
                        id: Some(k.id.clone()),
                        statement: k.statement.clone(),
                        protects: !k.protect.is_empty(),
                        attempts_judged: if k.protect.is_empty() { 0 } else { t.attempts_judged },
                        check_passed: t.goal_checks.get(&k.id).copied(),
                        has_check: k.check.is_some(),
                        violated_by: by(t.violated_by.get(&k.id).map_or(&[][..], Vec::as_slice))?,
                    },
                })
            })
            .collect()
    }

    /// Each task's line, in plan order.
    fn task_lines(&self) -> Result<Vec<TaskLine>> {
        let order: HashMap<&str, usize> = self
            .scope
            .plan
            .order
            .iter()
            .enumerate()
            .map(|(pos, &i)| (self.scope.plan.file.tasks.get(i).map_or("", |t| t.task_ref.as_str()), pos))
            .collect();
        let read = self.ledger.read();
        let mut tasks = Vec::new();
        // Every task's completed attempt in one read, not two per task;
        // read only when a person settled an attempt of this revision `ok`
        // (otherwise no task's completed attempt can be such a one).
        let settled = read.attempts_in_state(&self.scope.goal_id, AttemptState::SettledOk)?;
        let completed = if settled.iter().any(|a| a.revision == self.scope.revision) {
            read.completed_attempts(&self.scope.goal_id, self.scope.revision)?
        } else {
            HashMap::new()
        };
        for r in read.task_summaries(&self.scope.goal_id, self.scope.revision)? {
            let settled_by_person = r.state == TaskState::Succeeded
                && completed.get(&r.task_ref).is_some_and(|&(_, state)| state == AttemptState::SettledOk);
            let rechecked = self.c.rechecked.get(&r.task_ref).cloned();
            tasks.push(TaskLine {
                rechecked,
                this_run: self.c.dispatched.contains(&r.task_ref)
                    || self.c.states_at_start.get(&r.task_ref) != Some(&r.state),
                task_ref: r.task_ref,
                state: r.state,
                operation_id: r.pending_operation.map_or(r.operation_id, OperationId::new),
                class: r.class,
                why: r.why,
                settled_by_person,
                upstream: None,
                read_back: None,
            });
        }
        let edges = self.scope.plan.file.tasks.iter().map(|t| (t.task_ref.as_str(), t.depends_on.as_slice()));
        let states: HashMap<&str, TaskState> = tasks.iter().map(|t| (t.task_ref.as_str(), t.state)).collect();
        let mut upstream = crate::decide::upstream::all(
            edges.filter_map(|(r, d)| states.get(r).map(|&s| (r, d, s))).collect::<Vec<_>>().into_iter(),
        );
        let mut read_back = self.read_back_completions()?;
        for t in &mut tasks {
            t.upstream = upstream.remove(&t.task_ref);
            t.read_back = read_back.remove(&t.task_ref).filter(|_| t.state == TaskState::Succeeded && t.this_run);
        }
        // Each task's place looked up once, not at every comparison.
        tasks.sort_by_cached_key(|t| order.get(t.task_ref.as_str()).copied().unwrap_or(usize::MAX));
        // A failed task's next step names the operation that failed (a
        // repair's own, when a repair failed): few tasks, one read each.
        for t in tasks.iter_mut().filter(|t| t.state == TaskState::Failed) {
            let attempts = self.ledger.read().attempts_of_task(&self.scope.goal_id, &t.task_ref)?;
            if let Some(a) = attempts.iter().rev().find(|a| a.revision == self.scope.revision) {
                t.operation_id = a.operation_id.clone();
            }
        }
        Ok(tasks)
    }

    /// The tasks whose completion is a read-back's (the answer was lost,
    /// the target read back as present): why the answer was lost, each.
    fn read_back_completions(&self) -> Result<HashMap<String, crate::evidence::UnknownReason>> {
        let read = self.ledger.read();
        let present = read.events_of_goal(&self.scope.goal_id, EventKind::ObservedEffectPresent)?;
        if present.is_empty() {
            return Ok(HashMap::new());
        }
        let completed = read.completed_attempts(&self.scope.goal_id, self.scope.revision)?;
        Ok(present
            .into_iter()
            .filter(|e| e.revision == Some(self.scope.revision))
            .filter_map(|e| {
                let task_ref = e.task_ref?;
                let (id, _) = completed.get(&task_ref)?;
                let why = serde_json::from_value(e.data.get("why_observed")?.clone()).ok()?;
                (e.attempt_id == Some(*id)).then_some((task_ref, why))
            })
            .collect())
    }

    /// In debug builds, and where the tests ask for it (a testing aid,
    /// `ENGINE_CHECK_COUNTERS`, as they run the release binary): the
    /// budget counters equal the attempts they count.
    fn check_budget_counters(&self) -> Result<()> {
        if cfg!(debug_assertions) || std::env::var_os(crate::failpoint::CHECK_COUNTERS).is_some() {
            let read = self.ledger.read();
            let (counted, kept) =
                (read.recount_budget_use(&self.scope.goal_id)?, read.budget_use(&self.scope.goal_id)?);
            assert_eq!(counted, kept, "budget counters {kept:?} != recount {counted:?}");
        }
        Ok(())
    }

    /// On a shared store, the goal another worker already judged: its
    /// verdict as that worker recorded it (`run_finished`), nothing written.
    pub fn report_judged(&mut self) -> Result<RunReport> {
        let unknown = self.unknown_ops()?;
        let tasks = self.task_lines()?;
        // A person's stop of this worker still ends it as its signal would.
        let stopped = self.stop_report(&tasks)?;
        let read = self.ledger.read();
        let goal = read.goal_or_latest(Some(&self.scope.goal_id))?;
        let plan_path = read.revision(&self.scope.goal_id, self.scope.revision)?.plan_path;
        let finished = read.latest_event(&self.scope.goal_id, self.scope.revision, EventKind::RunFinished)?;
        let exit_code = match &stopped {
            Some(s) => s.signal.exit_code(),
            None => finished
                .as_ref()
                .and_then(|e| e.data.get("exit_code"))
                .and_then(|c| c.as_i64())
                .map_or(crate::error::EXIT_TASK_FAILED, |c| c as i32),
        };
        let code = finished
            .as_ref()
            .and_then(|e| e.data.get("code"))
            .and_then(|c| c.as_str())
            .and_then(crate::decide::verdict::code_named);
        let acceptance = read
            .latest_check_results(ChecksOf {
                goal: &self.scope.goal_id,
                revision: self.scope.revision,
                scope: CheckScope::Acceptance,
                task_ref: None,
            })?
            .into_iter()
            .map(|c| AcceptanceLine { id: c.check_id, passed: c.passed })
            .collect();
        let not_run =
            read.latest_attempts_in_state(&self.scope.goal_id, self.scope.revision, AttemptState::SettledNotRun)?;
        drop(read);
        let awaiting = self.awaiting_of(&tasks);
        let awaiting_input = self.awaiting_input(&tasks)?;
        let tasks_held: Vec<(String, TaskState)> = tasks.iter().map(|t| (t.task_ref.clone(), t.state)).collect();
        Ok(RunReport {
            goal_id: self.scope.goal_id.clone(),
            revision: self.scope.revision,
            plan_path,
            goal_state: goal.state,
            exit_code,
            code,
            failed: tasks.iter().filter(|t| t.state == TaskState::Failed).map(|t| t.task_ref.clone()).collect(),
            tasks,
            acceptance,
            unknown,
            same_request_unsettled: Vec::new(),
            budget: None,
            way_out: None,
            awaiting_approval: awaiting,
            awaiting_input,
            settled_not_run: not_run.iter().map(|a| a.operation_id.clone()).collect(),
            acceptance_unchecked: self.unchecked_acceptance(),
            acceptance_checks: self.acceptance_checks(),
            constraints: self.constraint_lines()?,
            stopped,
            verdict: crate::decide::verdict::word(goal.state, self.constraints_not_checked()),
            constraints_not_checked: self.constraints_not_checked(),
            plan_file_changed: None,
            held: self.held(&tasks_held)?,
        })
    }

    /// The incomplete tasks a person holds, with who holds each and the
    /// command that releases it.
    fn held(&self, tasks: &[(String, TaskState)]) -> Result<Vec<HeldTask>> {
        let holds = crate::run::holds::holds(&*self.ledger.read(), &self.scope.goal_id)?;
        let goal = crate::decide::advice::shell_word(self.scope.goal_id.as_str());
        Ok(tasks
            .iter()
            .filter(|(_, state)| !state.is_complete())
            .filter_map(|(r, _)| {
                let own = holds.tasks.get(r);
                let h = own.or(holds.goal.as_ref())?;
                let release = match own {
                    Some(_) => format!("engine release {}", crate::decide::advice::shell_word(r)),
                    None => format!("engine release --goal {goal}"),
                };
                let (by, reason) = (h.by.clone(), h.reason.clone());
                Some(HeldTask { task_ref: r.clone(), by, reason, goal: own.is_none(), release })
            })
            .collect())
    }

    /// The operations settled `not_run` and not re-sent, and how many of
    /// them stop the run as such: one whose re-send a person asked for
    /// (`engine retry`) and which now waits on an approval stops it as
    /// APPROVAL_REQUIRED (approving is what the person does next).
    fn settled_not_run(&self, awaiting: &[Awaiting]) -> Result<(Vec<AttemptRecord>, usize)> {
        let (goal_id, revision) = (&self.scope.goal_id, self.scope.revision);
        let not_run = self.ledger.read().latest_attempts_in_state(goal_id, revision, AttemptState::SettledNotRun)?;
        let unretried = not_run.iter().filter(|a| !awaiting.iter().any(|w| w.operation_id == a.operation_id)).count();
        Ok((not_run, unretried))
    }

    /// The calls waiting on an approval, as the tasks' states say, with
    /// what each would cost.
    fn awaiting_of(&self, tasks: &[TaskLine]) -> Vec<Awaiting> {
        tasks
            .iter()
            .filter(|t| t.state == TaskState::AwaitingApproval)
            .filter_map(|t| {
                let d = self.scope.plan.digests().tasks.get(&t.task_ref)?;
                Some(Awaiting {
                    operation_id: d.operation_id.clone(),
                    task_ref: t.task_ref.clone(),
                    request_digest: d.request.clone(),
                    stale: false,
                    cost: self.scope.plan.task(&t.task_ref).map(|t| t.cost()).unwrap_or_default(),
                })
            })
            .collect()
    }

    /// The tasks waiting on a person's answer, with the question each
    /// holds (from its detail, written with the receipt).
    fn awaiting_input(&self, tasks: &[TaskLine]) -> Result<Vec<AwaitingInput>> {
        let read = self.ledger.read();
        let mut out = Vec::new();
        for t in tasks.iter().filter(|t| t.state == TaskState::AwaitingInput) {
            if let Some(row) = read.task(&self.scope.goal_id, self.scope.revision, &t.task_ref)? {
                out.extend(match self.scope.plan.task(&t.task_ref) {
                    Some(task) => AwaitingInput::of_task(task, &row.detail),
                    None => AwaitingInput::of(&t.task_ref, &row.detail),
                });
            }
        }
        Ok(out)
    }

    /// The goal's constraints that are plain statements.
    fn constraints_not_checked(&self) -> usize {
        self.scope.plan.goal().constraints.iter().filter(|c| c.checked().is_none()).count()
    }

    fn unchecked_acceptance(&self) -> Vec<String> {
        self.scope.plan.goal().acceptance.iter().filter(|a| a.check.is_none()).map(|a| a.id.clone()).collect()
    }

    fn acceptance_checks(&self) -> usize {
        self.scope.plan.goal().acceptance.iter().filter(|a| a.check.is_some()).count()
    }

    /// Decide the goal's state and the exit code from what the ledger now
    /// holds (the latest result of everything, in ledger order).
    pub fn finish(&mut self, dirty: Vec<crate::checkpoint::FileState>) -> Result<RunReport> {
        let acceptance = self.c.acceptance.take();
        self.check_budget_counters()?;
        if self.c.budget.is_none() {
            self.c.budget = self.past_cost_budget()?;
        }
        let left = self.left()?;
        let verdict = self.verdict(&left, acceptance.as_deref());
        let stopped = self.stop_report(&left.tasks)?;
        self.record_finish(&dirty, &left, &verdict, stopped.as_ref())?;
        self.report(left, verdict, acceptance, stopped)
    }

    /// What the run leaves, read from the ledger (and what the core kept).
    fn left(&mut self) -> Result<Left> {
        let unknown = self.unknown_ops()?;
        let tasks = self.task_lines()?;
        let failed = tasks.iter().filter(|t| t.state == TaskState::Failed).map(|t| t.task_ref.clone()).collect();
        let awaiting = std::mem::take(&mut self.c.awaiting);
        let same_request = std::mem::take(&mut self.c.same_request);
        let awaiting_input = self.awaiting_input(&tasks)?;
        let (not_run, unretried) = self.settled_not_run(&awaiting)?;
        let held = self.held(&tasks.iter().map(|t| (t.task_ref.clone(), t.state)).collect::<Vec<_>>())?;
        Ok(Left { tasks, unknown, failed, awaiting, same_request, awaiting_input, not_run, unretried, held })
    }

    /// The goal's state and the exit code (`decide::verdict`) over what the
    /// run leaves.
    fn verdict(&self, left: &Left, acceptance: Option<&[AcceptanceLine]>) -> Verdict {
        let mut unknown_count = left.unknown.len();
        if crate::failpoint::fault(crate::failpoint::Fault::SatisfiedOverUnknown) {
            // Planted fault: the verdict forgets the unknown outcomes.
            unknown_count = 0;
        }
        verdict::verdict(&verdict::Facts {
            unknown: unknown_count,
            same_request: left.same_request.len(),
            settled_not_run: left.unretried,
            awaiting_approval: left.awaiting.len(),
            approval_stale: left.awaiting.iter().any(|a| a.stale),
            awaiting_input: left.awaiting_input.len(),
            budget_exhausted: self.c.budget.is_some(),
            failed_tasks: left.failed.len(),
            constraints_violated: self.c.tally.goal_checks.values().filter(|passed| !**passed).count(),
            acceptance_passed: acceptance.map(|a| a.iter().all(|l| l.passed)),
            held: left.held.len(),
            stopped: self.c.signal,
        })
    }

    /// The end in one transaction: the files' states, the stop, the
    /// summary and the goal's state.
    fn record_finish(
        &mut self,
        dirty: &[crate::checkpoint::FileState],
        left: &Left,
        v: &Verdict,
        stopped: Option<&StopReport>,
    ) -> Result<()> {
        let summary = json!({
            "goal_state": v.goal_state, "exit_code": v.exit_code, "code": v.code, "failed": left.failed,
            "unknown": left.unknown.iter().map(|u| &u.operation_id).collect::<Vec<_>>(),
            "same_request_unsettled": left.same_request.iter().map(|w| (&w.task_ref, &w.first.operation_id)).collect::<Vec<_>>(),
            "awaiting_approval": left.awaiting.iter().map(|u| &u.operation_id).collect::<Vec<_>>(),
            "awaiting_input": left.awaiting_input.iter().map(|u| &u.task_ref).collect::<Vec<_>>(),
            "held": left.held.iter().map(|h| &h.task_ref).collect::<Vec<_>>(),
            "budget": self.c.budget,
        });
        let (goal_id, revision, goal_state) = (self.scope.goal_id.clone(), self.scope.revision, v.goal_state);
        let stop_event = stopped.map(|s| json!(s));
        self.ledger.write(Durability::Normal, |tx| {
            tx.put_file_states(dirty)?;
            if let Some(data) = &stop_event {
                tx.append_event(&Event::goal(EventKind::RunStopped, &goal_id, revision, data.clone()))?;
            }
            let seq = tx.append_event(&Event::goal(EventKind::RunFinished, &goal_id, revision, summary.clone()))?;
            tx.set_goal_state(&goal_id, goal_state, seq)
        })
    }

    /// The report the CLI renders.
    fn report(
        &mut self,
        left: Left,
        v: Verdict,
        acceptance: Option<Vec<AcceptanceLine>>,
        stopped: Option<StopReport>,
    ) -> Result<RunReport> {
        let plan_path = self.ledger.read().revision(&self.scope.goal_id, self.scope.revision)?.plan_path;
        Ok(RunReport {
            goal_id: self.scope.goal_id.clone(),
            revision: self.scope.revision,
            plan_path,
            goal_state: v.goal_state,
            exit_code: v.exit_code,
            code: v.code,
            tasks: left.tasks,
            acceptance: acceptance.unwrap_or_default(),
            unknown: left.unknown,
            same_request_unsettled: left.same_request,
            failed: left.failed,
            budget: self.c.budget.clone(),
            way_out: self.way_out()?,
            awaiting_approval: left.awaiting,
            awaiting_input: left.awaiting_input,
            settled_not_run: left.not_run.iter().map(|a| a.operation_id.clone()).collect(),
            acceptance_unchecked: self.unchecked_acceptance(),
            acceptance_checks: self.acceptance_checks(),
            constraints: self.constraint_lines()?,
            stopped,
            verdict: crate::decide::verdict::word(v.goal_state, self.constraints_not_checked()),
            constraints_not_checked: self.constraints_not_checked(),
            plan_file_changed: None,
            held: left.held,
        })
    }

    /// A goal past its cost budget (spending its providers reported took
    /// it there, or a revision lowered the limit) ends every run on
    /// `BUDGET_EXHAUSTED` until a person raises it, even a run that had
    /// nothing left to send: it is never satisfied on the way.
    fn past_cost_budget(&self) -> Result<Option<crate::decide::budget::Exhausted>> {
        let used = self.ledger.read().budget_use(&self.scope.goal_id)?.cost;
        let limit = self.c.budgets.max_cost();
        Ok((used > limit).then(|| crate::decide::budget::Exhausted {
            budget: crate::decide::budget::BudgetName::MaxCost,
            used: used.units(),
            limit: limit.units(),
            requested: 0.0,
            detail: Some(crate::decide::budget::PAST_COST_BUDGET.into()),
        }))
    }

    /// The way out of an exhausted budget, if one stopped the run.
    fn way_out(&self) -> Result<Option<String>> {
        let Some(exhausted) = &self.c.budget else { return Ok(None) };
        let plan_path = self.ledger.read().revision(&self.scope.goal_id, self.scope.revision)?.plan_path;
        Ok(Some(crate::decide::raise::way_out(exhausted, &plan_path)))
    }

    /// What a person's stop did, if one came.
    fn stop_report(&mut self, tasks: &[TaskLine]) -> Result<Option<StopReport>> {
        let Some(signal) = self.c.signal else { return Ok(None) };
        let plan_path = self.ledger.read().revision(&self.scope.goal_id, self.scope.revision)?.plan_path;
        Ok(Some(StopReport {
            signal,
            grace_cut: self.c.grace_cut,
            cancelled: tasks.iter().filter(|t| t.state == TaskState::Cancelled).map(|t| t.task_ref.clone()).collect(),
            acceptance_stopped: std::mem::take(&mut self.c.acceptance_stopped),
            next: self.next_after_stop(tasks, &plan_path),
        }))
    }

    /// The command that goes on after a person's stop: a stopped repair
    /// left its task the failure it was, and only `engine repair` runs it
    /// again; otherwise a plain run.
    fn next_after_stop(&self, tasks: &[TaskLine], plan_path: &str) -> String {
        let stopped_repair = tasks
            .iter()
            .filter(|t| t.state == TaskState::Failed)
            .find_map(|t| self.c.repairs.iter().find(|(r, _)| *r == t.task_ref));
        match stopped_repair {
            Some((task_ref, forced)) => {
                let say = crate::decide::advice::SAY;
                let task_ref = crate::decide::advice::shell_word(task_ref);
                format!(
                    "engine repair {task_ref}{}",
                    if *forced { format!(" --force --note {say}") } else { String::new() }
                )
            }
            None => format!("engine run {}", crate::decide::advice::shell_word(plan_path)),
        }
    }
}
