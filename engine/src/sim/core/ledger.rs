//! The ledger, modelled in memory: each task's state and each attempt, as
//! the run's transactions leave them. What is committed apart from a group
//! not yet committed (reads inside the group see it, another process does
//! not); what a `synchronous=FULL` commit flushed apart from what a power
//! loss may take (the `NORMAL` commits since the last flush: a prefix of
//! them survives, as on a real disk). Each transaction's durability is the
//! driver's (`decide::durability`, as the driver's `ledger.rs` asks it).
//!
//! The model keeps what the core's decisions read back and what the
//! invariants are judged on; what only the report or `engine verify` reads
//! (events' data, evidence, receipts' bodies) it does not keep.

use std::collections::{BTreeMap, BTreeSet};

use crate::cost::Cost;
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::plan::{Effect, Plan};
use crate::state::{AttemptKind, AttemptState, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::Durability;

/// One state of the ledger: what a reader sees after some commit.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub tasks: BTreeMap<String, TaskState>,
    pub attempts: BTreeMap<AttemptId, AttemptRecord>,
    /// The tasks a person holds (`engine hold`).
    pub held: BTreeSet<String>,
    /// Transactions committed (the log's length, for `run_started`).
    pub commits: i64,
}

impl State {
    /// Attempts of `task_ref`, oldest first.
    pub fn attempts_of<'a>(&'a self, task_ref: &'a str) -> impl Iterator<Item = &'a AttemptRecord> + 'a {
        self.attempts.values().filter(move |a| a.task_ref == task_ref)
    }

    /// The attempt `id`, if it is the try `(operation, try_no)`.
    pub fn try_of(&self, id: AttemptId, operation: &OperationId, try_no: i64) -> Option<&AttemptRecord> {
        self.attempts.get(&id).filter(|a| a.operation_id == *operation && a.try_no == try_no)
    }

    fn next_id(&self) -> AttemptId {
        AttemptId(self.attempts.keys().next_back().map_or(1, |id| id.0 + 1))
    }
}

/// The ledger: committed, flushed, and the group being gathered.
#[derive(Debug, Default)]
pub struct Ledger {
    /// What every reader sees.
    committed: State,
    /// What the last `FULL` commit flushed (or the ledger as it began).
    flushed: State,
    /// The states after each `NORMAL` commit since the last flush, oldest
    /// first: a power loss keeps the flushed state and a prefix of these.
    unflushed: Vec<State>,
    /// The open group's writes (its state as its own reads see it), and
    /// the durability its commit needs.
    group: Option<(State, Durability)>,
}

impl Ledger {
    /// A new ledger of `plan`'s tasks, each pending, `held` held by a person.
    pub fn new(plan: &Plan, held: BTreeSet<String>) -> Ledger {
        let tasks = plan.file.tasks.iter().map(|t| (t.task_ref.clone(), TaskState::Pending)).collect();
        let committed = State { tasks, held, ..State::default() };
        Ledger { flushed: committed.clone(), committed, ..Ledger::default() }
    }

    /// What another process reads: the committed state.
    pub fn committed(&self) -> &State {
        &self.committed
    }

    /// What the run's own reads see: its open group's writes included.
    pub fn current(&self) -> &State {
        self.group.as_ref().map_or(&self.committed, |(s, _)| s)
    }

    pub fn begin_group(&mut self) {
        if self.group.is_none() {
            self.group = Some((self.committed.clone(), Durability::Normal));
        }
    }

    pub fn commit_group(&mut self) {
        if let Some((state, durability)) = self.group.take() {
            self.commit(state, durability);
        }
    }

    /// One transaction: `change` applied, committed at `durability` (in the
    /// open group, if `grouped` and one is open: its commit then needs the
    /// stronger of the two).
    pub fn write<T>(&mut self, durability: Durability, grouped: bool, change: impl FnOnce(&mut State) -> T) -> T {
        if let (true, Some((state, d))) = (grouped, self.group.as_mut()) {
            if durability == Durability::Full {
                *d = Durability::Full;
            }
            return change(state);
        }
        let mut state = self.committed.clone();
        let answer = change(&mut state);
        self.commit(state, durability);
        answer
    }

    fn commit(&mut self, mut state: State, durability: Durability) {
        state.commits += 1;
        match durability {
            // A flush syncs the whole log: what came before it too.
            Durability::Full => {
                self.unflushed.clear();
                self.flushed = state.clone();
            }
            Durability::Normal => self.unflushed.push(state.clone()),
        }
        self.committed = state;
    }

    /// The engine died: the group it was gathering never committed. With
    /// `power_lost`, the disk keeps what was flushed and the first `kept`
    /// of the commits after it (the number is the caller's draw).
    pub fn crash(&mut self, power_lost: bool, kept: usize) {
        self.group = None;
        if power_lost {
            let survivor =
                kept.checked_sub(1).and_then(|k| self.unflushed.get(k.min(self.unflushed.len().saturating_sub(1))));
            self.committed = survivor.unwrap_or(&self.flushed).clone();
        }
        self.flushed = self.committed.clone();
        self.unflushed.clear();
    }

    /// A new process begins: a group the last one left open (it ended
    /// without committing it) is gone. Was there one?
    pub fn drop_group(&mut self) -> bool {
        self.group.take().is_some()
    }

    /// Commits a power loss could take now.
    pub fn unflushed(&self) -> usize {
        self.unflushed.len()
    }

    /// A person acts between two runs (`engine hold`/`release`): committed durably.
    pub fn person(&mut self, change: impl FnOnce(&mut State)) {
        self.write(Durability::Full, false, change);
    }
}

/// A new attempt's row: its intent recorded.
pub fn intent(
    state: &mut State,
    plan: &Plan,
    call: (&str, &OperationId, &RequestDigest),
    kind: AttemptKind,
) -> AttemptRecord {
    let (task_ref, operation_id, request_digest) = call;
    let try_no = state.attempts.values().filter(|a| a.operation_id == *operation_id).count() as i64 + 1;
    let task = plan.task(task_ref);
    let id = state.next_id();
    let record = AttemptRecord {
        id,
        goal_id: GoalId::new(plan.goal().id.clone()),
        revision: Revision(1),
        task_ref: task_ref.to_string(),
        operation_id: operation_id.clone(),
        try_no,
        kind,
        request_digest: request_digest.clone(),
        effect: task.map_or(Effect::External, |t| t.effect),
        cost: task.map_or(Cost::ZERO, |t| t.cost()),
        state: AttemptState::IntentRecorded,
        generation: 1,
        intent_at_ms: 0,
        dispatched_at_ms: None,
        dispatch_detail: None,
        finished_at_ms: None,
        classification: None,
        unknown_reason: None,
        reusable: None,
        checkpoint: None,
        inputs_at_intent: None,
        instruction: None,
        sandbox: None,
        handle: None,
        handle_at_ms: None,
        protected_at_intent: None,
    };
    state.attempts.insert(id, record.clone());
    state.tasks.insert(task_ref.to_string(), TaskState::Running);
    record
}

/// Move attempt `id` to `to` (and its task to `task`, if given).
pub fn settle(state: &mut State, id: AttemptId, to: AttemptState, task: Option<TaskState>) {
    let Some(a) = state.attempts.get_mut(&id) else { return };
    a.state = to;
    if to == AttemptState::Dispatched {
        a.dispatched_at_ms.get_or_insert(1);
    }
    if let Some(t) = task {
        state.tasks.insert(a.task_ref.clone(), t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        let mut l = Ledger::default();
        l.committed.tasks.insert("T1".into(), TaskState::Pending);
        l.flushed = l.committed.clone();
        l
    }

    fn set(l: &mut Ledger, d: Durability, grouped: bool, s: TaskState) {
        l.write(d, grouped, |st| st.tasks.insert("T1".into(), s));
    }

    fn t1(l: &Ledger) -> Option<TaskState> {
        l.committed().tasks.get("T1").copied()
    }

    #[test]
    fn a_group_is_seen_by_its_own_reads_and_by_no_one_else_until_it_commits() {
        let mut l = ledger();
        l.begin_group();
        set(&mut l, Durability::Normal, true, TaskState::Running);
        assert_eq!(l.current().tasks.get("T1"), Some(&TaskState::Running));
        assert_eq!(t1(&l), Some(TaskState::Pending));
        l.commit_group();
        assert_eq!(t1(&l), Some(TaskState::Running));
    }

    #[test]
    fn a_crash_drops_the_group_it_was_gathering() {
        let mut l = ledger();
        l.begin_group();
        set(&mut l, Durability::Full, true, TaskState::Running);
        l.crash(false, 0);
        assert_eq!(t1(&l), Some(TaskState::Pending));
    }

    #[test]
    fn a_power_loss_keeps_what_was_flushed_and_a_prefix_of_what_followed() {
        let mut l = ledger();
        set(&mut l, Durability::Full, false, TaskState::Running);
        set(&mut l, Durability::Normal, false, TaskState::Failed);
        set(&mut l, Durability::Normal, false, TaskState::Pending);
        assert_eq!(l.unflushed(), 2);
        l.crash(true, 1);
        assert_eq!(t1(&l), Some(TaskState::Failed), "the first unflushed commit kept");
        let mut l = ledger();
        set(&mut l, Durability::Full, false, TaskState::Running);
        set(&mut l, Durability::Normal, false, TaskState::Failed);
        l.crash(true, 0);
        assert_eq!(t1(&l), Some(TaskState::Running), "back to the flush");
        // A flush syncs what came before it: nothing is left to lose.
        let mut l = ledger();
        set(&mut l, Durability::Normal, false, TaskState::Failed);
        set(&mut l, Durability::Full, false, TaskState::Succeeded);
        l.crash(true, 0);
        assert_eq!(t1(&l), Some(TaskState::Succeeded));
    }

    #[test]
    fn a_full_write_makes_its_whole_group_durable() {
        let mut l = ledger();
        l.begin_group();
        set(&mut l, Durability::Normal, true, TaskState::Running);
        set(&mut l, Durability::Full, true, TaskState::Failed);
        l.commit_group();
        l.crash(true, 0);
        assert_eq!(t1(&l), Some(TaskState::Failed));
    }
}
