//! What the driver answers the core with: the answers' types, each named
//! by the request it answers (`action.rs`); `Wake` brings what the world
//! did meanwhile — a provider's progress or answer, checks that ended, a
//! person's signal, a timer.

use std::collections::HashMap;

use providers::{Outcome, Progress};

use crate::decide::gate::Decision;
use crate::evidence::StopEnd;
use crate::ids::AttemptId;
use crate::run::check::CheckRun;
use crate::state::StopSignal;
use crate::state::TaskState;
use crate::store::attempts::{AttemptRecord, Intent};

/// The run's first look.
#[derive(Debug)]
pub struct Opened {
    pub states: HashMap<String, TaskState>,
    /// The tasks a person holds (`engine hold`): never started by this run.
    pub held: std::collections::BTreeSet<String>,
    /// Now, on the world's clock: this run of work begins.
    pub now_ms: i64,
}

/// What the gate's answer left to do outside its transaction.
#[derive(Debug)]
pub enum Applied {
    Go { intent: Intent, try_no: i64 },
    Stopped(Decision),
}

/// Spending a provider reported with its answer (its word, never
/// verified), counted in the goal's cost: the cost used after it.
#[derive(Debug)]
pub struct Spent {
    pub used: crate::cost::Cost,
    pub items: Vec<crate::evidence::SpentItem>,
    pub total: crate::cost::Cost,
}

/// How a receipt's transaction ended.
#[derive(Debug)]
pub enum Verdict {
    Validate,
    /// No validations: succeeded with the receipt.
    Succeeded,
    Unknown(Box<AttemptRecord>),
    Failed,
    /// The provider's answer is a question for a person: the task waits
    /// `awaiting_input` (no failure, no class).
    AwaitingInput,
    /// The server refused the call for want of scope: the attempt failed,
    /// the task is pending again, and the run stops `AUTHORIZATION_REQUIRED`
    /// for a person's login with `scope`.
    AwaitsLogin {
        scope: String,
    },
}

/// What the world did while the core waited.
#[derive(Debug)]
pub enum Wake {
    Message(Msg),
    /// The messages' channel closed (nothing can answer any more).
    Closed,
    /// The acceptance checks ended (`None`: their task failed).
    Accepted(Option<(Vec<CheckRun>, Vec<CheckRun>)>),
    /// A stop signal beyond those the run acted on.
    Signal(StopSignal),
    /// The stop's timer.
    Timer,
    /// Time to look at a shared ledger again.
    Poll,
}

/// A message from in-flight work.
#[derive(Debug)]
pub enum Msg {
    Progress {
        attempt_id: AttemptId,
        progress: Progress,
    },
    /// The call's outcome (boxed: a receipt is large, the other messages
    /// small), and how far a person's stop reached its process.
    Finished {
        attempt_id: AttemptId,
        outcome: Box<Outcome>,
        level: Level,
    },
    /// An attempt's validations ran, then the goal's constraint checks.
    Validated {
        attempt_id: AttemptId,
        runs: Vec<CheckRun>,
        constraint_runs: Vec<CheckRun>,
    },
}

impl Msg {
    pub fn attempt_id(&self) -> AttemptId {
        match self {
            Msg::Progress { attempt_id, .. } | Msg::Finished { attempt_id, .. } | Msg::Validated { attempt_id, .. } => {
                *attempt_id
            }
        }
    }
}

/// How far a stop has gone: the signal last sent to every process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Level {
    #[default]
    None,
    Term,
    Kill,
}

impl Level {
    /// How a process group that got this far ended (`None`: never
    /// signalled, it ended on its own).
    pub fn end(self) -> Option<StopEnd> {
        match self {
            Level::None => None,
            Level::Term => Some(StopEnd::Terminated),
            Level::Kill => Some(StopEnd::Killed),
        }
    }
}
