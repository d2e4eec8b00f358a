//! The world of a core-model seed: providers that answer, fail, refuse
//! before dispatch, or lose their answer after (or before) their effect;
//! a provider that can be read back, or asked by the request's handle; MCP
//! servers whose tools cannot always be read; validations and acceptance
//! checks that pass or fail; a person's stop. Every draw comes from the
//! seed. What each try did is kept by its operation and number, across the
//! engine's deaths, so a look after a restart finds what really happened.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use providers::{Captured, ExitStatus, HttpReceipt, LostReason, NotDispatched, NotDispatchedKind, Outcome};
use providers::{Progress, Receipt};

use crate::decide::in_doubt::Observed;
use crate::decide::tools::Inventory;
use crate::ids::AttemptId;
use crate::run::check::{CheckRun, CheckSpec};
use crate::run::core::{Level, Msg, Sending, Validating, Wait, Wake};
use crate::run::core::{Listed, StopWait};
use crate::run::looked::Looked;
use crate::sim::plan::Traits;
use crate::sim::rng::Rng;
use crate::state::StopSignal;

use super::checks::Try;

/// What one try did in the world.
#[derive(Debug, Clone, Copy)]
struct Done {
    /// Its effect took place.
    took: bool,
    /// The provider's answer (an HTTP status), if it gave one.
    answer: Option<u16>,
}

/// The world, across the engine's processes.
pub struct World {
    rng: Rng,
    done: BTreeMap<Try, Done>,
    /// Messages of the calls and validations of this process in flight.
    queue: BTreeMap<AttemptId, VecDeque<Msg>>,
    /// The acceptance checks' end, once they were started.
    accepting: Option<(Vec<CheckRun>, Vec<CheckRun>)>,
    /// The MCP providers whose tools this process read.
    pub listed: BTreeSet<String>,
    /// A person's stop comes at this look for a signal (this process).
    stop_at: Option<u64>,
    signal_checks: u64,
}

impl World {
    pub fn new(seed: u64) -> World {
        World {
            rng: Rng::new(seed),
            done: BTreeMap::new(),
            queue: BTreeMap::new(),
            accepting: None,
            listed: BTreeSet::new(),
            stop_at: None,
            signal_checks: 0,
        }
    }

    /// A new engine process: what the last one waited on is gone (what its
    /// calls did stays done); a person may stop this one.
    pub fn restart(&mut self) {
        self.queue.clear();
        self.accepting = None;
        self.listed.clear();
        self.signal_checks = 0;
        self.stop_at = self.rng.chance(12).then(|| self.rng.range(1, 6));
    }

    /// Each asked server's inventory (its one tool, `act`), or why not.
    pub fn list_tools(&mut self, named: BTreeSet<String>) -> Listed {
        let mut listed = Listed::new();
        for provider in named {
            if self.rng.chance(15) {
                listed.insert(provider, Err("the simulated server did not answer tools/list".into()));
                continue;
            }
            let tools = [("act".to_string(), "sim-schema".to_string())].into();
            let inventory = Inventory {
                server: None,
                protocol: "2025-06-18".into(),
                tools,
                annotations: BTreeMap::new(),
                digest: "sim-inventory".into(),
            };
            self.listed.insert(provider.clone());
            listed.insert(provider, Ok(inventory));
        }
        listed
    }

    /// A call handed over: what it does is drawn now, its messages queued.
    pub fn send(&mut self, call: &Sending, traits: &Traits) {
        let wrong = self.rng.chance(traits.flaky);
        let kind = if wrong { self.rng.weighted(&[1, 2, 2, 1]) } else { 4 };
        let (took, answer) = match kind {
            0 => (false, None),
            1 => (self.rng.chance(30), Some(500)),
            2 => (true, None),
            3 => (false, None),
            _ => (true, Some(200)),
        };
        let mut messages = VecDeque::new();
        let id = call.attempt_id;
        if kind != 0 && self.rng.chance(70) {
            let progress = Progress::Dispatched { detail: "handed over".into() };
            messages.push_back(Msg::Progress { attempt_id: id, progress });
        }
        let outcome = match (kind, answer) {
            (0, _) => Outcome::NotDispatched(NotDispatched {
                kind: NotDispatchedKind::ConnectionRefused,
                message: "the simulated service refused the connection".into(),
            }),
            (_, Some(status)) => Outcome::Received(http(status)),
            _ => {
                let reason = match self.rng.chance(50) {
                    true => LostReason::ResponseLost,
                    false => LostReason::DeadlineAfterDispatch,
                };
                Outcome::Lost { reason, detail: "the simulated answer was lost".into() }
            }
        };
        messages.push_back(Msg::Finished { attempt_id: id, outcome: Box::new(outcome), level: Level::None });
        self.done.insert((call.operation_id.clone(), call.try_no), Done { took, answer });
        self.queue.insert(id, messages);
    }

    /// Look at a try without sending it: by its handle (its provider's own
    /// answer, if it gave one), else by reading the effect back.
    pub fn look(&mut self, at: &Try, traits: &Traits, ask_handle: bool) -> Looked {
        let done = self.done.get(at).copied().unwrap_or(Done { took: false, answer: None });
        if let (true, true, Some(status)) = (traits.handles, ask_handle, done.answer) {
            let answer = Some(http(status));
            return Looked { observed: Observed::Answered, answer, ..Looked::nothing() };
        }
        if !traits.observable {
            return Looked::nothing();
        }
        let observed = match (self.rng.chance(10), done.took) {
            (true, _) => Observed::Inconclusive,
            (false, true) => Observed::Present,
            (false, false) => Observed::Absent,
        };
        Looked { observed, ..Looked::nothing() }
    }

    /// Run an attempt's validations (each passes as often as its task's
    /// traits say), then the goal's constraint checks.
    pub fn validate(&mut self, v: Validating, passes: u64) {
        let runs = v.checks.into_iter().map(|c| self.check(c, passes)).collect();
        let constraint_runs = v.constraint_checks.into_iter().map(|c| self.check(c, passes)).collect();
        let msg = Msg::Validated { attempt_id: v.attempt_id, runs, constraint_runs };
        self.queue.entry(v.attempt_id).or_default().push_back(msg);
    }

    pub fn accept(&mut self, constraint_checks: Vec<CheckSpec>, checks: Vec<CheckSpec>) {
        let constraint = constraint_checks.into_iter().map(|c| self.check(c, 100)).collect();
        let runs = checks.into_iter().map(|c| self.check(c, 90)).collect();
        self.accepting = Some((constraint, runs));
    }

    pub fn abort_accept(&mut self) {
        self.accepting = None;
    }

    fn check(&mut self, spec: CheckSpec, passes: u64) -> CheckRun {
        let code = if self.rng.chance(passes) { spec.expect_exit } else { spec.expect_exit + 1 };
        CheckRun { exit: Some(ExitStatus::Code { code }), ..CheckRun::empty(spec, None, None) }
    }

    /// Stop waiting for an attempt: what it would still say is dropped.
    pub fn abort(&mut self, id: AttemptId) {
        self.queue.remove(&id);
    }

    /// What comes next: a message of what is in flight (in an order drawn),
    /// the acceptance checks' end, or the stop's timer.
    pub fn wait(&mut self, w: Wait) -> Wake {
        let timer = matches!(w.stop, StopWait::SignalOrTimer | StopWait::Timer);
        if timer && (self.queue.is_empty() || self.rng.chance(40)) {
            return Wake::Timer;
        }
        if let Some(msg) = self.next_message(w.messages) {
            return Wake::Message(msg);
        }
        match (w.accepted, self.accepting.take()) {
            (true, Some(runs)) => Wake::Accepted(Some(runs)),
            _ => Wake::Closed,
        }
    }

    /// A message already waiting, now and then.
    pub fn try_message(&mut self) -> Option<Msg> {
        match self.rng.chance(30) {
            true => self.next_message(true),
            false => None,
        }
    }

    fn next_message(&mut self, messages: bool) -> Option<Msg> {
        if !messages || self.queue.is_empty() {
            return None;
        }
        let pick = self.rng.below(self.queue.len() as u64) as usize;
        let id = *self.queue.keys().nth(pick)?;
        let queue = self.queue.get_mut(&id)?;
        let msg = queue.pop_front();
        if queue.is_empty() {
            self.queue.remove(&id);
        }
        msg
    }

    /// Has a person's stop come?
    pub fn signal_pending(&mut self) -> Option<StopSignal> {
        self.signal_checks += 1;
        (self.stop_at == Some(self.signal_checks)).then_some(StopSignal::Interrupt)
    }
}

/// An HTTP answer of `status`.
fn http(status: u16) -> Receipt {
    Receipt::Http(HttpReceipt {
        status,
        retry_after_seconds: None,
        body: Captured::default(),
        duration_ms: 1,
        body_cut: None,
        version: None,
    })
}
