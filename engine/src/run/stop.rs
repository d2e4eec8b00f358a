//! A person's stop, as the run loop lives it. The first SIGINT, SIGTERM or
//! SIGHUP stops new dispatches and sends SIGTERM to the process group of
//! every provider call and check in flight; after `STOP_GRACE` (or at a
//! second signal) what is left gets SIGKILL, and calls without a process
//! of their own (HTTP, MCP) are no longer waited for; after
//! `STOP_DRAIN_MAX` more, whatever has not reported is recorded as stopped
//! without an answer.
//!
//! `Groups` is what every call and check registers its process group in
//! while it runs (from the task that watches it, before the coordinator
//! hears of it), so a stop reaches even a process that started a moment
//! before. The coordinator records the outcomes (`run::stopped`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use providers::process::{self, ProcessId};
use providers::{Call, Outcome, Progress, Provider};
use tokio::time::Instant;

use crate::evidence::StopEnd;
use crate::limits::{STOP_DRAIN_MAX, STOP_GRACE};
use crate::signals::{self, StopSignal};

/// How far a stop has gone: the signal last sent to every group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Level {
    #[default]
    None,
    Term,
    Kill,
}

impl Level {
    fn signal(self) -> Option<i32> {
        match self {
            Level::None => None,
            Level::Term => Some(libc::SIGTERM),
            Level::Kill => Some(libc::SIGKILL),
        }
    }

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

#[derive(Default)]
struct Live {
    level: Level,
    next: u64,
    /// Each group in flight, and the strongest signal it was sent.
    groups: HashMap<u64, (ProcessId, Level)>,
}

/// The process groups of the calls and checks in flight.
#[derive(Clone, Default)]
pub struct Groups(Arc<Mutex<Live>>);

/// A registered group, to remove when its process has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(u64);

impl Groups {
    fn live(&self) -> MutexGuard<'_, Live> {
        // A panic elsewhere cannot leave the map half-changed: every change
        // is one insert or remove.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Watch a group; one that starts after a stop began gets that stop's
    /// signal at once.
    pub fn add(&self, p: ProcessId) -> Key {
        let mut live = self.live();
        let key = live.next;
        live.next += 1;
        let level = live.level;
        let signalled = match level.signal() {
            Some(sig) if !process::signal_group(&p, sig).is_empty() => level,
            _ => Level::None,
        };
        live.groups.insert(key, (p, signalled));
        Key(key)
    }

    /// Stop watching a group whose process ended: how far a stop reached it.
    pub fn remove(&self, key: Key) -> Level {
        self.live().groups.remove(&key.0).map_or(Level::None, |(_, level)| level)
    }

    /// Send `level`'s signal to every live member of every group; the
    /// number of groups that had a member to signal.
    pub fn signal_all(&self, level: Level) -> usize {
        let mut live = self.live();
        live.level = live.level.max(level);
        let Some(sig) = level.signal() else { return 0 };
        let mut reached = 0;
        for (p, got) in live.groups.values_mut() {
            if !process::signal_group(p, sig).is_empty() {
                *got = (*got).max(level);
                reached += 1;
            }
        }
        reached
    }

    /// Has a stop begun?
    pub fn stopping(&self) -> bool {
        self.live().level != Level::None
    }
}

/// Run one provider call, keeping its process group (if it starts one) in
/// `groups` while it runs and handing every progress message to `forward`.
/// With the outcome: how far a person's stop reached it.
pub async fn watched<F, Fut>(provider: &dyn Provider, call: &Call, groups: &Groups, mut forward: F) -> (Outcome, Level)
where
    F: FnMut(Progress) -> Fut,
    Fut: Future<Output = ()>,
{
    let (ptx, mut prx) = providers::progress_channel();
    let fut = provider.dispatch(call, ptx);
    tokio::pin!(fut);
    let mut key = None;
    let note = |p: &Progress, key: &mut Option<Key>| {
        if let Progress::Spawned { process } = p {
            *key = Some(groups.add(process.clone()));
        }
    };
    let outcome = loop {
        tokio::select! {
            Some(progress) = prx.recv() => {
                note(&progress, &mut key);
                forward(progress).await;
            }
            outcome = &mut fut => break outcome,
        }
    };
    // Progress sent just before completion must still come first.
    while let Ok(progress) = prx.try_recv() {
        note(&progress, &mut key);
        forward(progress).await;
    }
    let level = key.map_or(Level::None, |k| groups.remove(k));
    (outcome, level)
}

/// Where the stop stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// SIGTERM sent; SIGKILL at `until`, or at the next signal.
    Grace {
        until: Instant,
    },
    /// SIGKILL sent; what has not reported by `until` is given up.
    Draining {
        until: Instant,
    },
    Over,
}

/// What the coordinator must do next about a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopEvent {
    /// The first signal: stop dispatching, SIGTERM every group.
    Begin(StopSignal),
    /// SIGKILL every group; stop waiting for calls without a process.
    /// `by_signal`: a second signal cut the grace short.
    Kill { by_signal: bool },
    /// Record whatever has not reported as stopped without an answer.
    GiveUp,
}

/// A run's stop: the signal that began it and where it stands.
pub struct Stop {
    pub groups: Groups,
    signal: Option<StopSignal>,
    /// Signals already acted on.
    seen: usize,
    phase: Phase,
    /// A second signal cut the grace short.
    pub grace_cut: bool,
}

impl Stop {
    pub fn new(groups: Groups) -> Stop {
        // A signal caught before the run began (while the plan loaded, the
        // lease was taken) is acted on at once: `seen` starts at zero.
        Stop { groups, signal: None, seen: 0, phase: Phase::Running, grace_cut: false }
    }

    /// The signal that stopped this run, once it is acted on.
    pub fn signal(&self) -> Option<StopSignal> {
        self.signal
    }

    pub fn active(&self) -> bool {
        self.signal.is_some()
    }

    /// Has a signal come that the run has not acted on yet?
    pub fn pending(&self) -> bool {
        self.phase == Phase::Running && signals::count() > self.seen
    }

    /// The next thing to do; waits as long as there is nothing.
    pub async fn next(&self) -> StopEvent {
        match self.phase {
            Phase::Running => {
                signals::beyond(self.seen).await;
                StopEvent::Begin(signals::received().unwrap_or(StopSignal::Interrupt))
            }
            Phase::Grace { until } => {
                tokio::select! {
                    _ = signals::beyond(self.seen) => StopEvent::Kill { by_signal: true },
                    _ = tokio::time::sleep_until(until) => StopEvent::Kill { by_signal: false },
                }
            }
            Phase::Draining { until } => {
                tokio::time::sleep_until(until).await;
                StopEvent::GiveUp
            }
            Phase::Over => std::future::pending().await,
        }
    }

    /// Act on the first signal: SIGTERM every group; the groups reached.
    pub fn begin(&mut self, signal: StopSignal) -> usize {
        self.signal = Some(signal);
        self.seen = signals::count();
        self.phase = Phase::Grace { until: Instant::now() + STOP_GRACE };
        self.groups.signal_all(Level::Term)
    }

    /// SIGKILL every group; the groups reached.
    pub fn kill(&mut self, by_signal: bool) -> usize {
        self.grace_cut |= by_signal;
        self.seen = signals::count();
        self.phase = Phase::Draining { until: Instant::now() + STOP_DRAIN_MAX };
        self.groups.signal_all(Level::Kill)
    }

    pub fn give_up(&mut self) {
        self.phase = Phase::Over;
    }

    /// Is the grace over (calls without a process are no longer waited for)?
    pub fn past_grace(&self) -> bool {
        matches!(self.phase, Phase::Draining { .. } | Phase::Over)
    }
}
