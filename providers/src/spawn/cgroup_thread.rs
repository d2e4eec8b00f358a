//! The cgroups of provider processes made ahead and removed behind, on a
//! thread of the providers' own.
//!
//! Why: in a fan-out the engine is one busy thread, and everything it does
//! is wall time. A cgroup's `mkdir` (with the opens of its folder and its
//! `cgroup.events`) and its `rmdir` (with the closes) are the dearest
//! system calls of a spawn after the `clone3` (bench/README.md, issue 38's
//! eleventh round), and none of them needs to be on that thread: the
//! spawning thread takes a cgroup made ahead ([`take`]) and hands an ended
//! one over ([`hand_over`]); this thread makes the next ones and removes
//! the ended ones, woken after a spawn when the ready ones run low
//! ([`after_spawn`]).
//!
//! What stays as it was: a fresh cgroup every spawn, never one a process
//! was in (a made one is only ever given to one spawn, and an ended one is
//! only removed); the proof that a tree ended is taken on the spawning
//! thread at its reap (`Cgroup::emptied`), before the hand-over; a cgroup
//! is removed only once empty (the kernel refuses otherwise; one refused
//! is tried again at the next pass); [`tidy`] waits for the thread's pass
//! and removes what it holds, so the engine's exit leaves nothing it made;
//! a crash leaves them to the next engine's sweep (`cgroup::sweep`). Where
//! the thread cannot be started, the same passes run on the caller's thread.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::process::cgroup::{self, Cgroup};

/// Cgroups kept made ahead (each an empty folder and two descriptors).
const READY_MAX: usize = 8;
/// The thread is woken once fewer than this many are ready: one wake-up
/// (a `futex` call) every `READY_MAX - READY_LOW + 1` spawns, and the ones
/// left cover the spawns made while it works.
const READY_LOW: usize = 3;

/// What the thread and the spawning threads share (under `STATE`).
struct State {
    /// Made, empty, never given to a spawn.
    ready: Vec<Cgroup>,
    /// To remove once empty: ended trees' (proven empty at their reap) and
    /// dropped children's (maybe still being killed).
    ended: Vec<Cgroup>,
    /// The thread has been asked for a pass since its last one.
    asked: bool,
    /// The thread holds cgroups outside `State` (in a pass).
    busy: bool,
    /// The thread waits for `WAKE` (so a wake-up is owed a `notify`).
    idle: bool,
    /// None yet; `Some(false)` where it could not be started.
    started: Option<bool>,
}

static STATE: Mutex<State> =
    Mutex::new(State { ready: Vec::new(), ended: Vec::new(), asked: false, busy: false, idle: false, started: None });
/// The thread waits on it for work.
static WAKE: Condvar = Condvar::new();
/// [`tidy`] waits on it for the end of a pass.
static PASSED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A cgroup made ahead, if one is ready (no system call).
pub(super) fn take() -> Option<Cgroup> {
    state().ready.pop()
}

/// An ended tree's cgroup, or a dropped child's: removed by the thread once
/// empty (at its next pass; or by [`tidy`]).
pub(super) fn hand_over(cgroup: Cgroup) {
    state().ended.push(cgroup);
}

/// How many cgroups a pass makes: up to `READY_MAX` ready, none once
/// cgroups were given up on.
fn to_make(ready: usize, refused: bool) -> usize {
    if refused {
        0
    } else {
        READY_MAX.saturating_sub(ready)
    }
}

/// Is a pass owed after a spawn: the ready ones ran low, or cgroups were
/// given up on and some made ahead are left to remove.
fn pass_owed(ready: usize, refused: bool) -> bool {
    if refused {
        ready > 0
    } else {
        ready < READY_LOW
    }
}

/// After a spawn: ask the thread for a pass if one is owed (a `futex` wake
/// only when it waits), starting it at the first need.
pub(super) fn after_spawn() {
    let mut s = state();
    if !pass_owed(s.ready.len(), cgroup::refused().is_some()) {
        return;
    }
    s.asked = true;
    match s.started {
        Some(true) if s.idle => WAKE.notify_one(),
        Some(true) => {}
        Some(false) => {
            drop(s);
            pass();
        }
        None => {
            let spawned = std::thread::Builder::new().name("cgroups".into()).stack_size(256 * 1024).spawn(run);
            s.started = Some(spawned.is_ok());
            if spawned.is_err() {
                drop(s);
                pass();
            }
        }
    }
}

/// The thread: a pass each time it is asked, for the rest of the process.
/// `SCHED_BATCH`: its wake-up never preempts the thread that woke it (the
/// engine's); where none is ready yet a spawn makes its own cgroup.
fn run() {
    // SAFETY: a plain system call on this thread, with a local parameter.
    let batch = libc::sched_param { sched_priority: 0 };
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &batch) };
    loop {
        let mut s = state();
        while !s.asked {
            s.idle = true;
            s = WAKE.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.idle = false;
        drop(s);
        pass();
    }
}

/// One pass: remove the ended cgroups that are empty (and, once cgroups
/// were given up on, the ready ones), then make the ready ones up to
/// `READY_MAX`. The system calls are made outside the lock.
fn pass() {
    let (ended, make) = {
        let mut s = state();
        s.asked = false;
        s.busy = true;
        let refused = cgroup::refused().is_some();
        let mut ended = std::mem::take(&mut s.ended);
        if refused {
            ended.append(&mut s.ready);
        }
        (ended, to_make(s.ready.len(), refused))
    };
    let kept = remove_empty(ended);
    let made: Vec<Cgroup> = (0..make).map_while(|_| Cgroup::create().ok()).collect();
    let mut s = state();
    s.ended.extend(kept);
    s.ready.extend(made);
    s.busy = false;
    PASSED.notify_all();
}

/// Remove each cgroup that is empty; those the kernel refused (a process is
/// still in it) are returned, to be tried again.
fn remove_empty(cgroups: Vec<Cgroup>) -> Vec<Cgroup> {
    cgroups.into_iter().filter(|c| !cgroup::remove(c.path(), Duration::ZERO)).collect()
}

/// Before the engine exits: wait for the thread's pass, then remove every
/// cgroup made ahead and every ended one that is empty (a crash leaves
/// them to the next engine's sweep; one still busy is left to it too).
pub(super) fn tidy() {
    let (ready, ended) = {
        let mut s = state();
        while s.busy {
            s = PASSED.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        (std::mem::take(&mut s.ready), std::mem::take(&mut s.ended))
    };
    let kept = remove_empty(ready.into_iter().chain(ended).collect());
    state().ended.extend(kept);
}

/// `f` on the path of each cgroup made ahead now, under the lock (for
/// tests: none is given to a spawn meanwhile).
#[cfg(test)]
pub(super) fn each_ready(mut f: impl FnMut(&std::path::Path)) {
    state().ready.iter().for_each(|c| f(c.path()));
}

/// Wait until the thread has no pass asked or under way (for tests).
#[cfg(test)]
pub(super) fn settle() {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let s = state();
        if !s.asked && !s.busy {
            return;
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_fills_the_ready_ones_up_and_makes_none_once_cgroups_were_given_up() {
        assert_eq!(to_make(0, false), READY_MAX);
        assert_eq!(to_make(READY_MAX - 1, false), 1);
        assert_eq!(to_make(READY_MAX, false), 0);
        assert_eq!(to_make(0, true), 0);
    }

    #[test]
    fn the_thread_is_woken_when_few_are_ready_or_made_ones_are_left_after_a_refusal() {
        assert!(pass_owed(0, false) && pass_owed(READY_LOW - 1, false));
        assert!(!pass_owed(READY_LOW, false) && !pass_owed(READY_MAX, false));
        assert!(pass_owed(1, true), "made ahead, then cgroups given up on: removed");
        assert!(!pass_owed(0, true));
    }
}
