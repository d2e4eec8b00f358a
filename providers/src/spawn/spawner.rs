//! The providers' spawner thread: what every confined child used to set
//! and drop before its `exec` — `no_new_privs` set, the capability
//! bounding set and the ambient set emptied, the seccomp filter installed —
//! done once, by one thread that then starts every confined child the
//! engine starts by `clone3(CLONE_INTO_CGROUP)` (x86-64, a cgroup made for
//! it, `clone3` not given up on). Any other confined child (no cgroup,
//! another architecture, after a refused `clone3`) is cloned by the thread
//! that asks for it, and drops everything itself.
//!
//! Why: each of these is an attribute of a thread, not of a process, and a
//! `clone` copies it from the thread that calls it. A child that dropped
//! them itself paid, while the engine waited for its `exec`, about 41
//! `PR_CAPBSET_DROP`s (each a new set of credentials) and the kernel's
//! check and translation of the filter (`bpf_prog_create_from_user`):
//! 1,335 of the spawn's 1,848 samples against the engine thread's 8,933 in
//! a 1,000-task chain (bench/README.md, issue 38's thirteenth round). Here
//! that is paid once per engine; a child shares the thread's filter.
//!
//! What the thread keeps: its permitted and effective capabilities. The
//! child still joins the run's namespaces and enters its working folder
//! with them, as it always did, and empties them itself (one `capset`,
//! `sandbox::drop_sets`) after it entered its Landlock domain — so it ends
//! with exactly what a child that dropped everything itself ends with (a
//! test compares the two). The thread is made while the engine prepares a
//! run's sandboxes, or else by the first thread that starts a confined
//! child (it shares that thread's namespaces,
//! folder and `umask`: every spawning thread of the engine shares the
//! process's), and lives as long as the engine: its children's
//! `PR_SET_PDEATHSIG` fires when it exits, so they die with the engine.
//! They also inherit its nice value, scheduling policy, I/O priority, CPU
//! affinity and
//! timer slack, fixed when it was made: a later `renice` or `taskset` of
//! the engine's pid does not reach them.
//! The bounding set is read back whole once made: a capability left in it
//! fails the set-up (an engine that is not root may not drop any: its set
//! stays as it was, as a child's own drop would leave it). Where the
//! thread cannot be made or cannot drop something, every child drops
//! everything itself, a refusal reported by the child's step, and the
//! engine says why before the run starts ([`unavailable`]).
//!
//! Fail closed: the spawner's `clone` alone names the child entry that
//! skips the drops ([`child_of_spawner`]), and that child checks it
//! inherited `no_new_privs`, a filter where one is due and the last
//! capability out of the bounding set before it skips them (`child.rs`): a
//! child cloned anywhere else drops everything.
//!
//! The hand-off: the spawning thread hands the child's `Shared` over
//! ([`launch`], one `futex` wake) and sleeps; the thread starts the child
//! with `clone3(CLONE_VFORK | CLONE_CHILD_CLEARTID | CLONE_PARENT_SETTID |
//! CLONE_PIDFD | CLONE_INTO_CGROUP)` (`clone3::clone_for`): the kernel
//! writes the child's pid and pidfd where the caller reads them, and wakes
//! the caller itself at the child's `exec` (the point where it ends the
//! `vfork`), so the thread's own wake-up is not on the caller's path. Only
//! a refused `clone3` is reported by the thread. One child at a time: the
//! child runs on the thread's stack (`stack.rs`) and shares its
//! thread-local `errno`, and the thread stays suspended until the `exec`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use super::child::child_of_spawner;
use super::clone3::{self, Report};
use super::stack::with_stack;
use super::Shared;

/// One child to start, on the caller's stack until the kernel (or the
/// thread, on a refusal) cleared `report.pending`.
struct Request {
    shared: *mut Shared,
    /// The folder of the cgroup to start it in.
    cgroup: RawFd,
    report: Report,
    /// The `clone3`'s errno where it was refused (0: it was not).
    error: AtomicI32,
}

/// `report.pending` until the child exec'd or exited.
const PENDING: u32 = 1;

/// The hand-off between the spawning threads and the spawner thread.
struct Channel {
    /// Callers one at a time (the thread starts one child at a time).
    turn: Mutex<()>,
    request: AtomicPtr<Request>,
    /// 1: a request waits; the thread sleeps on it (a private futex).
    asked: AtomicU32,
}

static CHANNEL: Channel =
    Channel { turn: Mutex::new(()), request: AtomicPtr::new(std::ptr::null_mut()), asked: AtomicU32::new(0) };

/// The thread, made by the first confined spawn: `Err` why there is none.
static THREAD: OnceLock<Result<(), String>> = OnceLock::new();

/// Start the child `shared` describes in `cgroup` on the spawner thread,
/// which holds no new privileges, no bounding or ambient capability and
/// the seccomp filter (the entry it names, [`child_of_spawner`], checks
/// the child inherited them): its pid and its
/// pidfd, or the error `clone3` returned. `None` where there is no
/// spawner thread: the caller starts the child itself.
///
/// # Safety
/// `shared` must point to a `Shared` that the child may read and write
/// (as [`child_of_spawner`] does), alive and untouched by anything else
/// until this returns; only a `clone3` refused before any child exists
/// (as the tests' is) never reads it.
pub(super) unsafe fn launch(shared: *mut Shared, cgroup: RawFd) -> Option<io::Result<(libc::pid_t, Option<OwnedFd>)>> {
    if !usable() {
        return None;
    }
    let _turn = CHANNEL.turn.lock().unwrap_or_else(|e| e.into_inner());
    let request = Request {
        shared,
        cgroup,
        report: Report { pending: AtomicU32::new(PENDING), pid: AtomicI32::new(0), pidfd: AtomicI32::new(-1) },
        error: AtomicI32::new(0),
    };
    CHANNEL.request.store(&request as *const Request as *mut Request, Ordering::Release);
    CHANNEL.asked.store(1, Ordering::Release);
    futex(CHANNEL.asked.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    // Shared, not private: the kernel's wake at the child's exec is.
    while request.report.pending.load(Ordering::Acquire) != 0 {
        futex(request.report.pending.as_ptr(), libc::FUTEX_WAIT, PENDING);
    }
    let error = request.error.load(Ordering::Acquire);
    if error != 0 {
        return Some(Err(io::Error::from_raw_os_error(error)));
    }
    let pid = request.report.pid.load(Ordering::Acquire);
    let pidfd = request.report.pidfd.load(Ordering::Acquire);
    #[cfg(test)]
    tests::started(pid);
    // SAFETY: the child's new pidfd (`CLONE_PIDFD`), owned by nothing else.
    Some(Ok((pid, (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) }))))
}

/// Is there a spawner thread (made now if this is the first ask)?
fn usable() -> bool {
    #[cfg(test)]
    if tests::OFF.load(Ordering::Relaxed) {
        return false;
    }
    thread().is_ok()
}

/// The thread, made by the first ask: `Err` why there is none. Nothing is
/// printed here: the engine says why, with its other words on the
/// sandbox, before a run starts ([`unavailable`]).
fn thread() -> &'static Result<(), String> {
    THREAD.get_or_init(start)
}

/// Why confined children are started by the thread that asks for them
/// and drop everything themselves, where the spawner thread would start
/// them (a cgroup each, `clone3`) but could not be made; `None`
/// otherwise. Makes the thread if none was asked for yet.
pub(crate) fn unavailable() -> Option<String> {
    if crate::process::cgroup::unavailable().is_some() || !clone3::usable() {
        return None;
    }
    thread().as_ref().err().cloned()
}

/// Why there is no spawner thread, once one was asked for.
#[cfg(test)]
pub(super) fn refused() -> Option<&'static str> {
    THREAD.get().and_then(|t| t.as_ref().err()).map(String::as_str)
}

/// Make the thread and wait until it dropped what it drops (or failed to).
fn start() -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    // Unnamed: a child carries the name of the thread that cloned it until
    // its `exec`, the engine's.
    let made = std::thread::Builder::new().spawn(move || {
        // SAFETY: system calls on this thread's own attributes.
        match unsafe { set_up() } {
            Ok(()) => {
                let _ = tx.send(Ok(()));
                serve()
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
    });
    made.map_err(|e| format!("making the spawner thread: {e}"))?;
    rx.recv().map_err(|_| "the spawner thread ended".to_string())?
}

/// Every signal blocked for good (no handler of the engine runs here, nor
/// on a child's side of the shared memory before it set them back), then
/// what every confined child drops, in the order it dropped them.
unsafe fn set_up() -> Result<(), String> {
    let mut all: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    let blocked = libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    if blocked != 0 {
        return Err(format!("blocking the spawner thread's signals: {}", io::Error::from_raw_os_error(blocked)));
    }
    let said =
        |what: &str, e: libc::c_int| format!("{what} on the spawner thread: {}", io::Error::from_raw_os_error(e));
    let last = crate::sandbox::last_cap();
    crate::sandbox::drop_bounding(i64::from(last)).map_err(|e| said("dropping the capabilities", e))?;
    bounding_dropped(last)?;
    // The filter every confined child gets (none where this machine has
    // none: `Privileges::Partial`, and the children install none either).
    if let Ok(program) = crate::sandbox::program() {
        crate::sandbox::install_filter(&program).map_err(|e| said("installing the seccomp filter", e))?;
    }
    Ok(())
}

/// Every capability `0..=last` out of this thread's bounding set, each
/// read back, or the thread may not drop it (no `CAP_SETPCAP`: an engine
/// that is not root, whose set stays as it was, as a child's would): what
/// a child's one read of `last` (`child.rs`) cannot prove by itself.
unsafe fn bounding_dropped(last: u32) -> Result<(), String> {
    for cap in 0..=last as libc::c_ulong {
        let read = libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0);
        // A read refused for another reason than "no such capability"
        // proves nothing: no thread-wide drop is trusted then.
        if read < 0 && errno() != libc::EINVAL {
            return Err(format!("capability {cap} of the spawner thread's bounding set cannot be read back"));
        }
        let held = read > 0;
        if held && !(libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno() == libc::EPERM) {
            return Err(format!("capability {cap} is still in the spawner thread's bounding set"));
        }
    }
    Ok(())
}

fn errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Start each child asked for, one at a time.
fn serve() -> ! {
    loop {
        while CHANNEL.asked.swap(0, Ordering::Acquire) == 0 {
            futex(CHANNEL.asked.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, 0);
        }
        // SAFETY: the caller's request, alive until its `pending` is
        // cleared, which only the kernel (at the child's exec or exit) or
        // `clone_asked` (on a refusal) does.
        unsafe { clone_asked(CHANNEL.request.load(Ordering::Acquire)) };
    }
}

/// Clone the child `request` asks for. Once the `clone3` returned a child,
/// `request` is never touched again: the kernel woke its caller at the
/// child's exec, and the caller may have returned.
unsafe fn clone_asked(request: *const Request) {
    let shared = (*request).shared as *mut libc::c_void;
    let cgroup = (*request).cgroup;
    let report = std::ptr::addr_of!((*request).report);
    // SAFETY: `child_of_spawner` only makes system calls on what `shared` points to,
    // which outlives the call (its caller waits for the exec); the stack
    // is this thread's and unused (one child at a time, and this thread is
    // suspended until the child left it); signals are blocked here.
    let started = with_stack(|stack| unsafe {
        #[cfg(test)]
        if tests::REFUSE.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        clone3::clone_for(stack.above_guard(), stack.usable_bytes(), cgroup, child_of_spawner, shared, report)
    });
    if let Err(e) = started {
        // No child: its caller still waits, until the store below (after
        // which the wake only names the address: at worst a spurious one).
        let pending = (*report).pending.as_ptr();
        (*request).error.store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Relaxed);
        (*report).pending.store(0, Ordering::Release);
        futex(pending, libc::FUTEX_WAKE, 1);
    }
}

/// `futex(word, op, value)`: a wait while `word` holds `value`, or a wake
/// of up to `value` waiters. A failed wait (`EAGAIN`: it no longer held
/// it; `EINTR`) is looked at again by the caller's loop.
fn futex(word: *const u32, op: libc::c_int, value: u32) {
    // SAFETY: the kernel only reads the word at this address for a wait
    // (made on a word alive: the caller's) and only names it for a wake;
    // no timeout is given.
    unsafe {
        libc::syscall(libc::SYS_futex, word, op, value, std::ptr::null::<libc::timespec>());
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Every child starts the old way: each drops everything itself.
    pub(in crate::spawn) static OFF: AtomicBool = AtomicBool::new(false);

    /// The pids of the children this thread started.
    static STARTED: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

    pub(super) fn started(pid: libc::pid_t) {
        STARTED.lock().unwrap().push(pid);
    }

    /// Did the spawner thread start `pid`?
    pub(in crate::spawn) fn started_by_it(pid: u32) -> bool {
        STARTED.lock().unwrap().contains(&(pid as libc::pid_t))
    }

    /// The spawner's `clone3` refused (`EINVAL`), as a kernel may: the
    /// caller then clones the child itself.
    pub(in crate::spawn) static REFUSE: AtomicBool = AtomicBool::new(false);

    /// `launch` on a helper thread: its answer, or the test process ended
    /// (not a hang) where the caller is left waiting: that caller holds
    /// `CHANNEL.turn`, and every later spawn of the process would hang.
    fn launch_bounded(fd: RawFd) -> Option<io::Result<(libc::pid_t, Option<OwnedFd>)>> {
        let (tx, rx) = std::sync::mpsc::channel();
        // SAFETY: the kernel refuses this `clone3` before any child exists
        // (no cgroup's folder), so `shared` is never read.
        std::thread::spawn(move || tx.send(unsafe { launch(std::ptr::null_mut(), fd) }));
        rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| {
            eprintln!("the caller of the spawner thread was left waiting (60 s): the test process ends");
            std::process::abort()
        })
    }

    #[test]
    fn set_up_refuses_a_bounding_set_with_a_capability_left_and_passes_an_emptied_one() {
        let last = crate::sandbox::last_cap();
        // SAFETY: reads of this thread's bounding set.
        let in_set = |cap: u32| unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } == 1;
        // SAFETY: as above.
        if unsafe { libc::geteuid() } != 0 || !in_set(0) {
            eprintln!("not root with capability 0 in the bounding set: nothing to check");
            return;
        }
        // On threads of their own: the check and the drop change theirs.
        // SAFETY: prctl calls on this thread's own attributes.
        let left = std::thread::spawn(move || unsafe { bounding_dropped(last) }).join().unwrap();
        assert!(left.as_ref().is_err_and(|e| e.contains("capability 0 ")), "{left:?}");
        // SAFETY: as above.
        let emptied = std::thread::spawn(move || unsafe {
            crate::sandbox::drop_bounding(i64::from(last)).unwrap();
            bounding_dropped(last)
        });
        assert_eq!(emptied.join().unwrap(), Ok(()));
    }

    #[test]
    fn a_refused_clone3_is_reported_and_its_caller_not_left_waiting() {
        let _lock = super::super::cgroup_thread::test_lock();
        // A descriptor that is no cgroup's folder: the kernel refuses the
        // `clone3` before any child exists (so `shared` is never read).
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let Some(started) = launch_bounded(fd) else {
            eprintln!("no spawner thread here ({:?}): nothing to refuse", refused());
            return;
        };
        let error = started.expect_err("no child started");
        assert!(matches!(error.raw_os_error(), Some(libc::EBADF | libc::EINVAL | libc::ENOTDIR)), "{error}");
        // The thread serves the next caller.
        let Err(again) = launch_bounded(fd).unwrap() else { panic!("a child started") };
        assert_eq!(again.raw_os_error(), error.raw_os_error());
    }
}
