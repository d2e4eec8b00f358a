//! Which tasks start next. Tasks are named by their position in the plan's
//! order (dependencies first). A task is a candidate when the run begins
//! and again whenever one of its dependencies completes; candidates start
//! in plan order. So each completion costs work in proportion to its
//! task's dependents, never a scan of the whole plan (a scan per completion
//! made a run quadratic in the number of tasks).

use std::collections::BTreeSet;

use crate::state::TaskState;

pub struct Scheduler {
    deps: Vec<Vec<usize>>,
    dependents: Vec<Vec<usize>>,
    candidates: BTreeSet<usize>,
    started: Vec<bool>,
}

/// What the scheduler asks of each candidate.
pub trait Candidates {
    fn state(&self, p: usize) -> TaskState;
    /// A person settled its latest try as not run: only `engine retry`
    /// sends it again, never a plain run.
    fn waits_for_retry(&self, p: usize) -> bool;
}

impl Scheduler {
    /// `deps[p]`: the positions task `p` depends on.
    pub fn new(deps: Vec<Vec<usize>>) -> Scheduler {
        let n = deps.len();
        let mut dependents = vec![Vec::new(); n];
        for (p, ds) in deps.iter().enumerate() {
            for &d in ds {
                if let Some(list) = dependents.get_mut(d) {
                    list.push(p);
                }
            }
        }
        Scheduler { deps, dependents, candidates: (0..n).collect(), started: vec![false; n] }
    }

    /// The next task to start, in plan order, if any candidate may start
    /// now: not yet started by this run, pending (or awaiting an approval
    /// that may have come), not waiting for a person's retry, and every
    /// dependency complete. A candidate that may not start is dropped: it
    /// comes back when one of its dependencies completes.
    pub fn next(&mut self, c: &impl Candidates) -> Option<usize> {
        while let Some(p) = self.candidates.pop_first() {
            if self.started[p] || !matches!(c.state(p), TaskState::Pending | TaskState::AwaitingApproval) {
                continue;
            }
            if c.waits_for_retry(p) || !self.deps[p].iter().all(|&d| c.state(d).is_complete()) {
                continue;
            }
            self.started[p] = true;
            return Some(p);
        }
        None
    }

    /// Task `p` was started elsewhere (an earlier look of the same run):
    /// not a candidate any more.
    pub fn mark_started(&mut self, p: usize) {
        if let Some(s) = self.started.get_mut(p) {
            *s = true;
        }
    }

    /// Task `p` completed: its dependents are candidates again.
    pub fn completed(&mut self, p: usize) {
        if let Some(list) = self.dependents.get(p) {
            self.candidates.extend(list.iter().copied());
        }
    }

    /// The dependencies of `p` that are not complete.
    pub fn waits_on(&self, p: usize, c: &impl Candidates) -> Vec<usize> {
        self.deps[p].iter().copied().filter(|&d| !c.state(d).is_complete()).collect()
    }
}

/// A task's state as a new run looks at it: one that stopped earlier on a
/// dependency, was left running by a stopped engine, or was cancelled by a
/// person's stop, is pending again
/// (unless this run is already working on it: `busy`); one held back by an
/// earlier unknown try goes on once a person settled that try.
pub fn afresh(state: TaskState, busy: bool, waited_try_settled: bool) -> TaskState {
    match state {
        TaskState::EffectUnknown if waited_try_settled => TaskState::Pending,
        // A task a person's stop cancelled runs again (its effect is one a
        // new try may repeat, or the gate asks a person first).
        TaskState::Blocked | TaskState::Ready | TaskState::Running | TaskState::Cancelled if !busy => {
            TaskState::Pending
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskState::*;

    struct Plan {
        states: Vec<TaskState>,
        retry: Vec<bool>,
    }

    impl Candidates for Plan {
        fn state(&self, p: usize) -> TaskState {
            self.states[p]
        }
        fn waits_for_retry(&self, p: usize) -> bool {
            self.retry[p]
        }
    }

    fn plan(states: &[TaskState]) -> Plan {
        Plan { states: states.to_vec(), retry: vec![false; states.len()] }
    }

    #[test]
    fn a_chain_starts_one_task_at_a_time_as_each_completes() {
        let mut s = Scheduler::new(vec![vec![], vec![0], vec![1]]);
        let mut p = plan(&[Pending, Pending, Pending]);
        assert_eq!(s.next(&p), Some(0));
        assert_eq!(s.next(&p), None, "t1 waits on t0 and is dropped until t0 completes");
        p.states[0] = Succeeded;
        s.completed(0);
        assert_eq!(s.next(&p), Some(1));
        assert_eq!(s.next(&p), None);
        p.states[1] = Reused;
        s.completed(1);
        assert_eq!(s.next(&p), Some(2));
    }

    #[test]
    fn a_fan_out_starts_leaves_in_plan_order() {
        let mut s = Scheduler::new(vec![vec![], vec![0], vec![0], vec![0]]);
        let mut p = plan(&[Succeeded, Pending, Pending, Pending]);
        assert_eq!([s.next(&p), s.next(&p), s.next(&p), s.next(&p)], [Some(1), Some(2), Some(3), None]);
        p.states[0] = Pending;
        assert_eq!(s.next(&p), None, "a task starts once per run");
    }

    #[test]
    fn only_pending_or_awaiting_approval_tasks_start() {
        for state in TaskState::ALL {
            let mut s = Scheduler::new(vec![vec![]]);
            let started = s.next(&plan(&[*state])).is_some();
            assert_eq!(started, matches!(state, Pending | AwaitingApproval), "{state}");
        }
    }

    #[test]
    fn a_task_settled_not_run_waits_for_a_persons_retry() {
        let mut s = Scheduler::new(vec![vec![], vec![]]);
        let mut p = plan(&[Pending, Pending]);
        p.retry[0] = true;
        assert_eq!(s.next(&p), Some(1));
        assert_eq!(s.next(&p), None);
    }

    #[test]
    fn what_a_task_waits_on_is_its_incomplete_dependencies() {
        let s = Scheduler::new(vec![vec![], vec![], vec![0, 1]]);
        assert_eq!(s.waits_on(2, &plan(&[Succeeded, Failed, Pending])), vec![1]);
        assert_eq!(s.waits_on(2, &plan(&[Reused, Succeeded, Pending])), Vec::<usize>::new());
    }

    #[test]
    fn a_new_run_looks_at_stopped_tasks_afresh() {
        assert_eq!(afresh(Blocked, false, false), Pending);
        assert_eq!(afresh(Running, false, false), Pending);
        assert_eq!(afresh(Running, true, false), Running, "its validations were resumed");
        assert_eq!(afresh(Cancelled, false, false), Pending, "a person stopped it: it runs again");
        assert_eq!(afresh(Cancelled, true, false), Cancelled, "its kept receipt is being judged");
        assert_eq!(afresh(EffectUnknown, false, false), EffectUnknown);
        assert_eq!(afresh(EffectUnknown, false, true), Pending, "the try it waited on was settled");
        for done in [Succeeded, Reused, Failed, AwaitingApproval, Pending] {
            assert_eq!(afresh(done, false, true), done);
        }
    }
}
