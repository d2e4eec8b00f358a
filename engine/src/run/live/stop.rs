//! A person's stop, as the world's processes live it (the phases are the
//! core's: `core::stopping`). `Groups` is what every call and check
//! registers its process group in while it runs (from the task that
//! watches it, before the coordinator hears of it), so a stop reaches even
//! a process that started a moment before.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use providers::process::{self, ProcessId};
use providers::{Call, Outcome, Progress, Provider};

use crate::run::core::Level;

/// The signal a stop's level sends.
fn signal_of(level: Level) -> Option<i32> {
    match level {
        Level::None => None,
        Level::Term => Some(libc::SIGTERM),
        Level::Kill => Some(libc::SIGKILL),
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
        let signalled = match signal_of(level) {
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
        let Some(sig) = signal_of(level) else { return 0 };
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
