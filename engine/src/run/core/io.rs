//! The core's one typed door to the outside. A request goes out with the
//! reply its answer must come back through (`Reply<T>`, `T` the request's
//! own answer type, `action.rs`); the run's code is suspended, and it
//! resumes with that answer. The run loop is written as plain sequential
//! code over this door; the compiler turns it into the state machine `Core`
//! steps through (`mod.rs`). Nothing here does I/O: a request is only left
//! where the driver takes it.
//!
//! A driver answers a request only through its reply, and only with the
//! reply's type: answering a look with anything but a `Looked` does not
//! compile, so no answer is ever checked by hand or defaulted:
//!
//! ```compile_fail
//! use engine::run::core::{Action, Answered, WorldAction};
//! fn perform(action: Action) -> Option<Answered> {
//!     match action {
//!         // A look answered as if it were a request that says nothing.
//!         Action::World(WorldAction::Look { reply, .. }) => Some(reply.send(())),
//!         _ => None,
//!     }
//! }
//! ```
//!
//! while the same driver answering with a `Looked` does:
//!
//! ```
//! use engine::run::core::{Action, Answered, WorldAction};
//! use engine::run::looked::Looked;
//! fn perform(action: Action) -> Option<Answered> {
//!     match action {
//!         Action::World(WorldAction::Look { reply, .. }) => Some(reply.send(Looked::nothing())),
//!         _ => None,
//!     }
//! }
//! ```
//!
//! A driver that never answers leaves the run waiting on nothing: `Core`
//! ends it with an internal error, never with a made-up answer.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::action::{Action, CutoffAnswer, InDoubt, Listed, Observed, Read, Record, Say, Wait, WorldAction, Write};
use super::event::{Level, Msg, Opened, Wake};
use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::evidence::Evidence;
use crate::ids::{AttemptId, Seq};
use crate::run::looked::Looked;
use crate::run::outputs::Kept;
use crate::run::report::RunReport;
use crate::state::{StopSignal, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::Claimed;

/// Where a request's answer goes back to the core: only a `T` fits.
pub struct Reply<T>(Rc<RefCell<Option<T>>>);

impl<T> Reply<T> {
    /// Answer the request. The only way to an `Answered`.
    pub fn send(self, answer: T) -> Answered {
        *self.0.borrow_mut() = Some(answer);
        Answered(())
    }
}

#[cfg(test)]
impl<T> Reply<T> {
    /// A reply no one waits on: a request built only to be looked at.
    pub(super) fn detached() -> Reply<T> {
        Reply(Rc::new(RefCell::new(None)))
    }
}

impl<T> std::fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}

/// Proof that a request was answered: made by `Reply::send` alone, so a
/// driver's `perform` that returns one answered the request it was given.
#[derive(Debug)]
#[must_use]
pub struct Answered(());

/// The door, shared by the core's code and the `Core` that steps it:
/// the request waiting for the driver, if any.
#[derive(Clone, Default)]
pub struct Io(pub(super) Rc<RefCell<Option<Action>>>);

/// Suspends the core's code once: the driver has a request to perform.
struct Yield(bool);

impl Future for Yield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        Poll::Pending
    }
}

impl Io {
    /// Hand the request `make` builds around its reply to the driver; its
    /// answer. Unanswered, the code stays suspended (and `Core` ends the run).
    pub async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Action) -> T {
        let slot = Rc::new(RefCell::new(None));
        *self.0.borrow_mut() = Some(make(Reply(slot.clone())));
        loop {
            Yield(false).await;
            if let Some(answer) = slot.borrow_mut().take() {
                return answer;
            }
        }
    }

    /// A transaction whose answer says more than that it committed.
    pub async fn record<T>(&self, make: impl FnOnce(Reply<T>) -> Record) -> T {
        self.ask(|reply| Action::Record(make(reply))).await
    }

    /// A request of the world.
    pub async fn world<T>(&self, make: impl FnOnce(Reply<T>) -> WorldAction) -> T {
        self.ask(|reply| Action::World(make(reply))).await
    }

    pub async fn open(&self) -> Result<Opened> {
        self.ask(Action::Open).await
    }

    /// A transaction whose answer is only that it committed.
    pub async fn write_done(&self, w: Write) -> Result<()> {
        self.ask(|reply| Action::Write(w, reply)).await
    }

    pub async fn read<T>(&self, make: impl FnOnce(Reply<Result<T>>) -> Read) -> Result<T> {
        self.ask(|reply| Action::Read(make(reply))).await
    }

    pub async fn attempt(&self, id: AttemptId) -> Result<AttemptRecord> {
        self.read(|reply| Read::Attempt(id, reply)).await
    }

    pub async fn in_doubt(&self) -> Result<InDoubt> {
        self.read(Read::InDoubt).await
    }

    pub async fn unjudged(&self, waiting: HashSet<String>) -> Result<Vec<AttemptRecord>> {
        self.read(|reply| Read::Unjudged { waiting, reply }).await
    }

    pub async fn attempts_of(&self, task_ref: &str) -> Result<Vec<AttemptRecord>> {
        self.read(|reply| Read::AttemptsOf(task_ref.to_string(), reply)).await
    }

    pub async fn waited_try_settled(&self, task_ref: &str) -> Result<bool> {
        self.read(|reply| Read::WaitedTrySettled(task_ref.to_string(), reply)).await
    }

    pub async fn settled_not_run(&self) -> Result<Vec<AttemptRecord>> {
        self.read(Read::SettledNotRun).await
    }

    pub async fn tasks(&self) -> Result<Vec<(String, TaskState)>> {
        self.read(Read::Tasks).await
    }

    pub async fn held_elsewhere(&self) -> Result<HashSet<String>> {
        self.read(Read::HeldElsewhere).await
    }

    pub async fn task_now(&self, task_ref: &str) -> Result<Option<TaskState>> {
        self.read(|reply| Read::TaskNow(task_ref.to_string(), reply)).await
    }

    pub async fn finished_since(&self, started: Seq) -> Result<bool> {
        self.read(|reply| Read::FinishedSince(started, reply)).await
    }

    pub async fn begin_group(&self) {
        self.ask(Action::BeginGroup).await
    }

    pub async fn commit_group(&self) -> Result<()> {
        self.ask(Action::CommitGroup).await
    }

    pub async fn claim(&self, task_ref: &str) -> Result<Claimed> {
        self.ask(|reply| Action::Claim(task_ref.to_string(), reply)).await
    }

    pub async fn release(&self, task_ref: &str) -> Result<()> {
        self.ask(|reply| Action::Release(task_ref.to_string(), reply)).await
    }

    pub async fn materialize(&self, task_ref: Option<&str>) -> Result<()> {
        self.ask(|reply| Action::Materialize(task_ref.map(str::to_string), reply)).await
    }

    pub async fn observe(&self, task_ref: &str, context: BTreeMap<String, String>, identity: bool) -> Observed {
        self.ask(|reply| Action::Observe { task_ref: task_ref.to_string(), context, identity, reply }).await
    }

    pub async fn cutoff(&self, task_ref: &str, context: BTreeMap<String, String>) -> Result<CutoffAnswer> {
        self.ask(|reply| Action::Cutoff { task_ref: task_ref.to_string(), context, reply }).await
    }

    pub async fn baseline(&self, task_ref: &str, in_flight: Option<Vec<AttemptId>>) -> Result<Option<Checkpoint>> {
        self.ask(|reply| Action::Baseline(task_ref.to_string(), in_flight, reply)).await
    }

    pub async fn judge_protected(
        &self,
        attempt_id: AttemptId,
        task_ref: &str,
        (before, writes, others): (Option<Checkpoint>, bool, Option<Vec<AttemptId>>),
    ) -> Result<Vec<Evidence>> {
        let task_ref = task_ref.to_string();
        self.ask(|reply| Action::JudgeProtected { attempt_id, task_ref, before, writes, others, reply }).await
    }

    pub async fn collect_outputs(&self, task_ref: &str) -> Option<Kept> {
        self.ask(|reply| Action::CollectOutputs(task_ref.to_string(), reply)).await
    }

    pub async fn forget(&self) {
        self.ask(Action::Forget).await
    }

    pub async fn list_tools(&self, named: BTreeSet<String>) -> Listed {
        self.world(|reply| WorldAction::ListTools(named, reply)).await
    }

    pub async fn wait(&self, w: Wait) -> Wake {
        self.world(|reply| WorldAction::Wait(w, reply)).await
    }

    pub async fn try_message(&self) -> Option<Msg> {
        self.world(WorldAction::TryMessage).await
    }

    pub async fn signal_pending(&self) -> Option<StopSignal> {
        self.world(WorldAction::SignalPending).await
    }

    pub async fn signal_groups(&self, level: Level, timer: Option<std::time::Duration>) -> usize {
        self.world(|reply| WorldAction::SignalGroups { level, timer, reply }).await
    }

    pub async fn say(&self, say: Say) {
        self.world(|reply| WorldAction::Say(say, reply)).await
    }

    pub async fn crashpoint(&self, name: &'static str) {
        self.world(|reply| WorldAction::Crashpoint(name, reply)).await
    }

    pub async fn ended(&self, task_ref: &str, state: TaskState) -> Result<()> {
        self.world(|reply| WorldAction::Ended { task_ref: task_ref.to_string(), state, reply }).await
    }

    pub async fn look(
        &self,
        attempt: Box<AttemptRecord>,
        ask_handle: bool,
        deadline: super::action::Deadline,
    ) -> Looked {
        self.world(|reply| WorldAction::Look { attempt, ask_handle, deadline, reply }).await
    }

    pub async fn report(&self, make: impl FnOnce(Reply<Result<RunReport>>) -> Action) -> Result<RunReport> {
        self.ask(make).await
    }
}
