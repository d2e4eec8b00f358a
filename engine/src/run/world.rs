//! The world a run acts on besides its ledger and its workspace: the
//! providers (calls, looks, cancels, tool listings), the checks' processes,
//! a person's stop signals and the process groups they reach, time, and
//! the person watching. The driver asks; a world answers. `live` is the
//! real one (tokio, processes, sockets, signals, the clock); the
//! simulator makes one up from a seed (`sim`).

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use providers::sandbox::Record;

use super::check::CheckSpec;
use super::core::{Level, Msg, Sending, Validating, Wait, Wake};
use super::looked::Looked;
use super::progress::Update;
use crate::decide::tools::Inventory;
use crate::ids::AttemptId;
use crate::plan::{ProviderSpec, Task};
use crate::signals::StopSignal;
use crate::store::attempts::AttemptRecord;

/// A world's answer that may take a while.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Work for another thread, where the world has threads.
pub type Job = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;

pub trait World {
    /// Now, in milliseconds since the epoch.
    fn now_ms(&self) -> i64;

    /// How `task`'s processes are confined (recorded with each intent).
    fn sandbox_record(&self, task: &Task) -> Record;

    /// Run `job` off the coordinator's thread (`Err`: why that failed).
    fn off_thread(&mut self, job: Job) -> Fut<'_, std::result::Result<Box<dyn Any + Send>, String>>;

    /// Each of `named`'s tools, or why it could not be asked.
    fn list_tools<'a>(
        &'a mut self,
        named: &'a BTreeSet<String>,
    ) -> Fut<'a, BTreeMap<String, std::result::Result<Inventory, String>>>;

    /// Hand a call to its provider, with the W3C `traceparent` of its span
    /// when the run is traced; its progress and outcome come back as
    /// messages (`wait`).
    fn send(&mut self, call: &Sending, traceparent: Option<&str>);

    /// Look at an attempt of this revision without sending it again.
    fn look<'a>(&'a mut self, attempt: &'a AttemptRecord, ask_handle: bool, goal_left: Duration) -> Fut<'a, Looked>;

    /// Look at an earlier revision's attempt with that revision's task and
    /// provider (built for the look, ended after it).
    fn look_superseded<'a>(
        &'a mut self,
        then: (&'a Task, &'a ProviderSpec, &'a Path),
        attempt: &'a AttemptRecord,
        goal_left: Duration,
    ) -> Fut<'a, Looked>;

    /// Ask the provider to cancel a request it accepted (its answer comes
    /// as the call's own outcome).
    fn cancel(&mut self, attempt: &AttemptRecord);

    /// Stop waiting for an attempt's call or validations.
    fn abort(&mut self, attempt_id: AttemptId);

    /// Run an attempt's validations, then the goal's constraint checks; the
    /// results come back as a message.
    fn validate(&mut self, validating: Validating);

    /// Run the goal's constraint checks, then its acceptance checks; the
    /// results come back as `Wake::Accepted`.
    fn accept(&mut self, constraint_checks: Vec<CheckSpec>, checks: Vec<CheckSpec>);

    /// Stop waiting for the acceptance checks.
    fn abort_accept(&mut self);

    /// What comes next, of what `wait` listens for.
    fn wait(&mut self, wait: Wait) -> Fut<'_, Wake>;

    /// A message already waiting.
    fn try_message(&mut self) -> Option<Msg>;

    /// A stop signal beyond those acted on (the first one received).
    fn signal_pending(&mut self) -> Option<StopSignal>;

    /// Send `level`'s signal to every process group of the calls and
    /// checks in flight; the number reached. Arms the stop's timer.
    fn signal_groups(&mut self, level: Level, timer: Option<Duration>) -> usize;

    /// Tell the person watching.
    fn say(&mut self, update: &Update);

    /// A task this run started came to rest: how long since it started
    /// (`None`: this run did not start it, or already said so).
    fn ended(&mut self, task_ref: &str) -> Option<Duration>;

    /// A named crash point (`failpoint`).
    fn crashpoint(&mut self, name: &'static str);

    /// End what the providers keep for the run.
    fn shutdown(&mut self) -> Fut<'_, ()>;

    /// Did the engine's process die (a simulated crash)? Then the run
    /// stops where it is: nothing more is performed. A real death needs no
    /// asking.
    fn dead(&mut self) -> bool {
        false
    }
}

/// The simulator's world, when one is set on this thread (`sim`): every
/// run on the thread acts on it instead of the real one. Set only by
/// `engine::sim` (never by the `engine` binary: tests/e2e/tested_binary.rs);
/// unset, a run asks for it with one read of this thread's state.
pub mod simulated {
    use std::cell::RefCell;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use super::World;
    use crate::plan::Plan;

    /// Makes the world a run of `plan` acts on.
    pub type Maker = Box<dyn Fn(&Plan) -> Box<dyn World>>;

    thread_local! {
        static MAKER: RefCell<Option<Maker>> = const { RefCell::new(None) };
    }

    /// Set (or, with `None`, take away) this thread's simulated world.
    /// Never inlined: a caller keeps its symbol (tests/e2e/tested_binary.rs).
    #[inline(never)]
    pub fn set(maker: Option<Maker>) {
        MAKER.with(|m| *m.borrow_mut() = maker);
    }

    /// Whether this thread has a simulated world.
    pub fn active() -> bool {
        MAKER.with(|m| m.borrow().is_some())
    }

    /// The world for a run of `plan`, if the thread has one.
    pub fn world(plan: &Plan) -> Option<Box<dyn World>> {
        MAKER.with(|m| m.borrow().as_ref().map(|make| make(plan)))
    }

    struct Nudge;

    impl std::task::Wake for Nudge {
        fn wake(self: Arc<Self>) {}
    }

    /// Run `f` to its end on this thread: a simulated world answers every
    /// wait at once, so `f` never waits for anything outside. `None`: it did.
    pub fn block_on<T>(f: impl Future<Output = T>) -> Option<T> {
        let mut f = pin!(f);
        let waker = Waker::from(Arc::new(Nudge));
        match f.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }
}
