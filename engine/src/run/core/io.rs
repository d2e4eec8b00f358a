//! The core's one door to the outside: an action goes out, the run's
//! code is suspended, and it resumes with the event that answers it. The
//! run loop is written as plain sequential code over this door; the
//! compiler turns it into the state machine `Core` steps through
//! (`mod.rs`). Nothing here does I/O: `ask` only leaves the action where
//! the driver takes it, and yields.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::action::{Action, Read, Say, Wait, Write};
use super::event::{Event, Facts, Level, Opened, Wake, Written};
use crate::checkpoint::Checkpoint;
use crate::decide::tools::Inventory;
use crate::error::{Error, Result};
use crate::evidence::Evidence;
use crate::ids::AttemptId;
use crate::run::looked::Looked;
use crate::run::outputs::Kept;
use crate::state::StopSignal;
use crate::store::Claimed;

/// Where an action waits for the driver, and its answer for the core.
#[derive(Default)]
pub(super) struct Exchange {
    pub action: Option<Action>,
    pub event: Option<Event>,
}

/// The door, shared by the core's code and the `Core` that steps it.
#[derive(Clone, Default)]
pub struct Io(pub(super) Rc<RefCell<Exchange>>);

/// Suspends the core's code once: the driver has an action to perform.
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

fn unexpected(asked: &str, got: Event) -> Error {
    Error::internal(format!("the run's driver answered {asked} with {got:?}"))
}

impl Io {
    /// Hand `action` to the driver; its answer.
    pub async fn ask(&self, action: Action) -> Event {
        self.0.borrow_mut().action = Some(action);
        Yield(false).await;
        self.0.borrow_mut().event.take().unwrap_or(Event::Done)
    }

    /// An action whose answer says nothing.
    pub async fn tell(&self, action: Action) {
        self.ask(action).await;
    }

    pub async fn open(&self) -> Result<Opened> {
        match self.ask(Action::Open).await {
            Event::Opened(o) => o,
            e => Err(unexpected("open", e)),
        }
    }

    pub async fn write(&self, w: Write) -> Result<Written> {
        self.written(Action::Write(w)).await
    }

    /// An action answered by a write's result.
    pub async fn written(&self, action: Action) -> Result<Written> {
        match self.ask(action).await {
            Event::Written(w) => w,
            e => Err(unexpected("a write", e)),
        }
    }

    /// A write whose answer is only that it committed.
    pub async fn write_done(&self, w: Write) -> Result<()> {
        self.write(w).await.map(|_| ())
    }

    pub async fn read(&self, r: Read) -> Result<Facts> {
        match self.ask(Action::Read(r)).await {
            Event::Read(f) => f,
            e => Err(unexpected("a read", e)),
        }
    }

    pub async fn attempt(&self, id: AttemptId) -> Result<crate::store::attempts::AttemptRecord> {
        match self.read(Read::Attempt(id)).await? {
            Facts::Attempt(a) => Ok(*a),
            f => Err(Error::internal(format!("attempt {id} read as {f:?}"))),
        }
    }

    pub async fn flag(&self, r: Read) -> Result<bool> {
        match self.read(r).await? {
            Facts::Flag(b) => Ok(b),
            f => Err(Error::internal(format!("a yes or no read as {f:?}"))),
        }
    }

    pub async fn attempts(&self, r: Read) -> Result<Vec<crate::store::attempts::AttemptRecord>> {
        match self.read(r).await? {
            Facts::Attempts(a) => Ok(a),
            f => Err(Error::internal(format!("attempts read as {f:?}"))),
        }
    }

    pub async fn refs(&self, r: Read) -> Result<HashSet<String>> {
        match self.read(r).await? {
            Facts::Refs(r) => Ok(r),
            f => Err(Error::internal(format!("task refs read as {f:?}"))),
        }
    }

    pub async fn claim(&self, task_ref: &str) -> Result<Claimed> {
        match self.ask(Action::Claim(task_ref.to_string())).await {
            Event::Claimed(c) => c,
            e => Err(unexpected("a claim", e)),
        }
    }

    pub async fn observe(
        &self,
        task_ref: &str,
        context: BTreeMap<String, String>,
        identity: bool,
    ) -> std::result::Result<Checkpoint, String> {
        match self.ask(Action::Observe { task_ref: task_ref.to_string(), context, identity }).await {
            Event::Observed(o) => o,
            e => Err(unexpected("an observation", e).to_string()),
        }
    }

    pub async fn baseline(&self, task_ref: &str) -> Result<Option<Checkpoint>> {
        match self.ask(Action::Baseline(task_ref.to_string())).await {
            Event::Baseline(b) => b,
            e => Err(unexpected("a baseline", e)),
        }
    }

    pub async fn judge_protected(
        &self,
        attempt_id: AttemptId,
        task_ref: &str,
        (before, writes): (Option<Checkpoint>, bool),
    ) -> Result<Vec<Evidence>> {
        match self.ask(Action::JudgeProtected { attempt_id, task_ref: task_ref.to_string(), before, writes }).await {
            Event::Protected(p) => p,
            e => Err(unexpected("the protected paths", e)),
        }
    }

    pub async fn collect_outputs(&self, task_ref: &str) -> Option<Kept> {
        match self.ask(Action::CollectOutputs(task_ref.to_string())).await {
            Event::Outputs(k) => k,
            _ => None,
        }
    }

    pub async fn list_tools(
        &self,
        named: BTreeSet<String>,
    ) -> BTreeMap<String, std::result::Result<Inventory, String>> {
        match self.ask(Action::ListTools(named)).await {
            Event::Tools(t) => t,
            _ => BTreeMap::new(),
        }
    }

    pub async fn look(&self, action: Action) -> Looked {
        match self.ask(action).await {
            Event::Looked(l) => *l,
            _ => Looked::nothing(),
        }
    }

    pub async fn wait(&self, w: Wait) -> Wake {
        match self.ask(Action::Wait(w)).await {
            Event::Woke(w) => w,
            _ => Wake::Closed,
        }
    }

    pub async fn try_message(&self) -> Wake {
        match self.ask(Action::TryMessage).await {
            Event::Woke(w) => w,
            _ => Wake::Nothing,
        }
    }

    pub async fn signal_pending(&self) -> Option<StopSignal> {
        match self.ask(Action::SignalPending).await {
            Event::Signal(s) => s,
            _ => None,
        }
    }

    pub async fn signal_groups(&self, level: Level, timer: Option<std::time::Duration>) -> usize {
        match self.ask(Action::SignalGroups { level, timer }).await {
            Event::Reached(n) => n,
            _ => 0,
        }
    }

    pub async fn say(&self, say: Say) {
        self.tell(Action::Say(say)).await
    }

    pub async fn crashpoint(&self, name: &'static str) {
        self.tell(Action::Crashpoint(name)).await
    }

    pub async fn report(&self, action: Action) -> Result<crate::run::report::RunReport> {
        match self.ask(action).await {
            Event::Report(r) => *r,
            e => Err(unexpected("the report", e)),
        }
    }
}
