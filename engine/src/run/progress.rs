//! What a run tells a person while it goes on: typed updates, sent by the
//! coordinator to a `Sink` as things happen. The run loop never prints; a
//! renderer (`report::progress`: a live view on a terminal, plain lines
//! elsewhere, nothing with `--quiet`) decides what a person sees.

use std::time::Duration;

use crate::ids::{GoalId, Revision};
use crate::signals::StopSignal;
use crate::state::{FailureClass, TaskState};

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Update<'a> {
    /// The run began: `total` tasks in the revision, `complete` of them
    /// already succeeded or reused.
    Began { goal: &'a GoalId, revision: Revision, total: usize, complete: usize },
    /// A provider call of a task was handed to its provider's adapter.
    TaskStarted { task_ref: &'a str, title: &'a str, try_no: i64 },
    /// The provider answered and the task's validations run.
    Validating { task_ref: &'a str },
    /// What a task's provider says of its progress (an MCP server's
    /// `notifications/progress`): its word, shown, never recorded.
    Note { task_ref: &'a str, progress: f64, total: Option<f64>, message: Option<&'a str> },
    /// A task this run started came to rest: its state now, its failure
    /// class if it failed, and how long since it started.
    TaskEnded { task_ref: &'a str, title: &'a str, state: TaskState, class: Option<FailureClass>, took: Duration },
    /// The goal's acceptance checks run (`checks` of them).
    Accepting { checks: usize },
    /// A person's stop began: no new dispatch; `groups` process groups got
    /// SIGTERM; the rest get SIGKILL after `grace` (or a second signal).
    Stopping { signal: StopSignal, in_flight: usize, groups: usize, grace: Duration },
    /// What was left got SIGKILL (`by_signal`: a second signal cut the
    /// grace short).
    Killing { groups: usize, by_signal: bool },
    /// The run is over; the summary follows (on stdout).
    Ended,
}

/// Where a run's updates go. Called from the coordinator only, in order.
pub trait Sink: Send + Sync {
    fn update(&self, update: &Update);
}

/// Shows nothing (`--quiet`, and runs nobody watches).
pub struct Silent;

impl Sink for Silent {
    fn update(&self, _: &Update) {}
}
