//! The cgroups of provider processes made ahead and removed behind, on a
//! thread of the providers' own.
//!
//! Why: in a fan-out the engine is one busy thread, and everything it does
//! is wall time. A cgroup's `mkdir` (with the opens of its folder, its
//! `cgroup.events` and its `cgroup.procs`) and its `rmdir` (with the closes) are the dearest
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
//! is tried again at the next passes, `REFUSALS_MAX` times, then left to
//! the next engine's sweep, `cgroup::sweep`); [`tidy`] stops the making,
//! waits (at most `TIDY_WAIT`) for a pass asked or under way and removes
//! what is held, so the engine's exit leaves nothing it made but a cgroup
//! still holding a process; a crash leaves them to the next engine's
//! sweep. Everything held is bounded: `READY_MAX` made ahead, `ENDED_MAX`
//! handed over (past it the caller removes its own). Where the thread
//! cannot be started, the same passes run on the caller's thread.
//!
//! What the spawning thread still pays: a `futex` wake when a hand-over
//! leaves `ENDED_WAKE` waiting and the thread is idle (about one in eight
//! reaps), and the `rmdir` and three `close`s of its own cgroup past
//! `ENDED_MAX` or once `tidy` began. A pass that outlasts `TIDY_WAIT` may
//! add what it made after `tidy` emptied the queue: those are left to the
//! next engine's sweep, as after a crash.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::process::cgroup::{self, Cgroup};

/// Cgroups kept made ahead (each an empty folder and three descriptors).
const READY_MAX: usize = 8;
/// The thread is woken once fewer than this many are ready: one wake-up
/// (a `futex` call) every `READY_MAX - READY_LOW + 1` spawns, and the ones
/// left cover the spawns made while it works.
const READY_LOW: usize = 3;
/// Ended cgroups held for the thread (three descriptors each): past it, a
/// hand-over removes its cgroup on the caller's thread.
const ENDED_MAX: usize = 64;
/// A hand-over asks the thread for a pass once this many ended ones wait
/// (where no spawn asks one, as at the end of a run).
const ENDED_WAKE: usize = READY_MAX;
/// Removals of one cgroup the kernel may refuse (a process still in it)
/// before it is given up on and left to the next engine's sweep.
const REFUSALS_MAX: u8 = 8;
/// How long [`tidy`] waits for a pass asked or under way (the thread could
/// be stuck or gone: the engine's exit is not held up by it).
const TIDY_WAIT: Duration = Duration::from_secs(2);

/// An ended cgroup, and how many times its removal was refused.
struct Ended {
    cgroup: Cgroup,
    refusals: u8,
}

/// What the thread and the spawning threads share (under `STATE`).
struct State {
    /// Made, empty, never given to a spawn.
    ready: Vec<Cgroup>,
    /// To remove once empty: ended trees' (proven empty at their reap) and
    /// dropped children's (maybe still being killed).
    ended: Vec<Ended>,
    /// The thread has been asked for a pass since its last one.
    asked: bool,
    /// Passes holding cgroups outside `State` (one, but for tests).
    busy: usize,
    /// The thread waits for `WAKE` (so a wake-up is owed a `notify`).
    idle: bool,
    /// [`tidy`] began: a pass makes no cgroup, a hand-over removes its own.
    closing: bool,
    /// None yet; `Some(false)` where it could not be started.
    started: Option<bool>,
}

static STATE: Mutex<State> = Mutex::new(State {
    ready: Vec::new(),
    ended: Vec::new(),
    asked: false,
    busy: 0,
    idle: false,
    closing: false,
    started: None,
});
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
/// empty (at its next pass; or by [`tidy`]). Past `ENDED_MAX`, or once
/// [`tidy`] began, removed here if empty, else left to the next engine's
/// sweep.
pub(super) fn hand_over(cgroup: Cgroup) {
    let mut s = state();
    if !held_for_the_thread(s.ended.len(), s.closing) {
        drop(s);
        cgroup::remove(cgroup.path(), Duration::ZERO);
        return;
    }
    s.ended.push(Ended { cgroup, refusals: 0 });
    if s.ended.len() >= ENDED_WAKE && !s.asked {
        ask(s);
    }
}

/// Is a handed-over cgroup held for the thread (else removed at once):
/// fewer than `ENDED_MAX` held, and [`tidy`] not begun.
fn held_for_the_thread(ended: usize, closing: bool) -> bool {
    !closing && ended < ENDED_MAX
}

/// How many cgroups a pass makes: up to `READY_MAX` ready, none once
/// cgroups were given up on or [`tidy`] began.
fn to_make(ready: usize, refused: bool, closing: bool) -> usize {
    if refused || closing {
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
    let s = state();
    if pass_owed(s.ready.len(), cgroup::refused().is_some()) {
        ask(s);
    }
}

/// Ask the thread for a pass (a `futex` wake only when it waits), starting
/// it at the first need; where it cannot be started, the pass runs here.
fn ask(mut s: MutexGuard<'static, State>) {
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
    let batch = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain system call on this thread, with a local parameter.
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
/// `READY_MAX` (none once [`tidy`] began). The system calls are made
/// outside the lock.
fn pass() {
    let (ended, make) = {
        let mut s = state();
        s.asked = false;
        s.busy += 1;
        let refused = cgroup::refused().is_some();
        let mut ended = std::mem::take(&mut s.ended);
        if refused {
            ended.extend(s.ready.drain(..).map(|cgroup| Ended { cgroup, refusals: 0 }));
        }
        (ended, to_make(s.ready.len(), refused, s.closing))
    };
    let kept = remove_empty(ended);
    let made: Vec<Cgroup> = (0..make).map_while(|_| Cgroup::create().ok()).collect();
    let mut s = state();
    s.ended.extend(kept);
    s.ready.extend(made);
    s.busy -= 1;
    PASSED.notify_all();
}

/// Remove each cgroup that is empty; those the kernel refused (a process is
/// still in it) are returned, to be tried again, unless refused
/// `REFUSALS_MAX` times: then left to the next engine's sweep.
fn remove_empty(cgroups: Vec<Ended>) -> Vec<Ended> {
    let mut kept = Vec::new();
    for mut e in cgroups {
        if !cgroup::remove(e.cgroup.path(), Duration::ZERO) {
            e.refusals += 1;
            if e.refusals < REFUSALS_MAX {
                kept.push(e);
            }
        }
    }
    kept
}

/// Before the engine exits: no cgroup is made from now on; wait (up to
/// `TIDY_WAIT`) for a pass asked or under way, then remove every cgroup
/// made ahead and every ended one that is empty (a crash leaves them to
/// the next engine's sweep; one still busy is left to it too).
pub(super) fn tidy() {
    let (ready, ended) = {
        let mut s = state();
        s.closing = true;
        let start = std::time::Instant::now();
        while (s.busy > 0 || (s.asked && s.started == Some(true))) && start.elapsed() < TIDY_WAIT {
            let left = TIDY_WAIT.saturating_sub(start.elapsed());
            s = PASSED.wait_timeout(s, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        (std::mem::take(&mut s.ready), std::mem::take(&mut s.ended))
    };
    let all = ready.into_iter().map(|cgroup| Ended { cgroup, refusals: 0 }).chain(ended);
    let kept = remove_empty(all.collect());
    state().ended.extend(kept);
}

/// `f` on the path of each cgroup made ahead now, under the lock (for
/// tests: none is given to a spawn meanwhile).
#[cfg(test)]
pub(super) fn each_ready(mut f: impl FnMut(&std::path::Path)) {
    state().ready.iter().for_each(|c| f(c.path()));
}

/// Held by the tests that look at or empty the shared cgroups (the ready
/// ones, the ended ones, [`tidy`]); each begins with no [`tidy`] begun.
#[cfg(test)]
pub(super) fn test_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    state().closing = false;
    lock
}

/// Wait until the thread has no pass asked or under way (for tests).
#[cfg(test)]
pub(super) fn settle() {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let s = state();
        if !s.asked && s.busy == 0 {
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
        assert_eq!(to_make(0, false, false), READY_MAX);
        assert_eq!(to_make(READY_MAX - 1, false, false), 1);
        assert_eq!(to_make(READY_MAX, false, false), 0);
        assert_eq!(to_make(0, true, false), 0);
        assert_eq!(to_make(0, false, true), 0, "tidy began: none made");
    }

    #[test]
    fn the_thread_is_woken_when_few_are_ready_or_made_ones_are_left_after_a_refusal() {
        assert!(pass_owed(0, false) && pass_owed(READY_LOW - 1, false));
        assert!(!pass_owed(READY_LOW, false) && !pass_owed(READY_MAX, false));
        assert!(pass_owed(1, true), "made ahead, then cgroups given up on: removed");
        assert!(!pass_owed(0, true));
    }

    #[test]
    fn ended_ones_are_held_up_to_their_limit_and_not_once_tidy_began() {
        assert!(held_for_the_thread(0, false) && held_for_the_thread(ENDED_MAX - 1, false));
        assert!(!held_for_the_thread(ENDED_MAX, false), "past the limit: removed by the caller");
        assert!(!held_for_the_thread(0, true), "tidy began: removed by the caller");
    }

    /// Is `path` among the ended ones held for the thread?
    fn held(path: &std::path::Path) -> bool {
        state().ended.iter().any(|e| e.cgroup.path() == path)
    }

    #[test]
    fn tidy_waits_a_bounded_time_and_no_pass_makes_a_cgroup_once_it_began() {
        let _lock = test_lock();
        let Ok(probe) = Cgroup::create() else { return };
        cgroup::remove(probe.path(), Duration::ZERO);
        ask(state());
        settle();
        // A pass asked and not begun as tidy begins (here the thread is not
        // even woken: a stuck thread, which tidy waits for only so long).
        state().asked = true;
        tidy();
        assert!(state().ready.is_empty(), "tidy removed the ones made ahead");
        WAKE.notify_one();
        settle();
        let left: Vec<_> = state().ready.iter().map(|c| c.path().to_path_buf()).collect();
        tidy();
        assert!(left.is_empty(), "the pass asked before tidy made {left:?} after it");
    }

    #[test]
    fn a_handed_over_cgroup_still_holding_a_process_is_kept_retried_and_removed_later() {
        let _lock = test_lock();
        let Ok(cg) = Cgroup::create() else { return };
        let path = cg.path().to_path_buf();
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(path.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
        hand_over(cg);
        ask(state());
        settle();
        assert!(path.exists() && held(&path), "refused while the process runs: kept");
        ask(state());
        settle();
        assert!(path.exists() && held(&path), "tried again, refused again: kept");
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        let start = std::time::Instant::now();
        while cgroup::populated(&path) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        ask(state());
        settle();
        assert!(!path.exists() && !held(&path), "removed at the pass after it emptied");
    }
}
