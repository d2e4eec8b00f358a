//! The child's side of a spawn: what runs on the child's stack in the
//! engine's memory between `clone` and `execve` — system calls only, on
//! data the parent prepared (`Shared`), no allocation, no lock, no unwind.

use super::{signals, Shared, Step};

/// The child, on its own stack in the engine's memory, until `execve`.
/// System calls only (glibc's wrappers, which may set the shared `errno`;
/// the parent never reads it): no allocation, no lock, no unwinding.
/// Returns (exits with) 127 after writing its errno into `error`. It drops
/// every privilege itself: the entry of every `clone` but the spawner
/// thread's.
pub(super) extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    run(arg, false)
}

/// [`child`] cloned by the spawner thread (`spawner.rs`), the only `clone`
/// that names this entry: it inherits that thread's `no_new_privs`,
/// bounding and ambient sets (emptied, each capability read back once by
/// the thread; left as they were where the engine may not drop them) and
/// seccomp filter, checks the inheritance cheaply ([`held_from_spawner`]),
/// and only empties its other capability sets.
pub(super) extern "C" fn child_of_spawner(arg: *mut libc::c_void) -> libc::c_int {
    run(arg, true)
}

/// The child's body: `by_spawner` says which entry the `clone` named.
fn run(arg: *mut libc::c_void, by_spawner: bool) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Shared`, alive and untouched while the
    // parent is suspended.
    let shared = unsafe { &mut *(arg as *mut Shared) };
    // First: the upper bound of the bracket around the kernel's stamp of
    // this process's start (`process::clock`; the vDSO, no system call).
    let now = crate::process::clock::boottime_ns().unwrap_or(0);
    // SAFETY: as above; read by the parent once we exec'd or exited.
    unsafe { std::ptr::write_volatile(&mut shared.cloned_ns, now) };
    // SAFETY: system calls on integers and on memory the parent prepared.
    let error = unsafe {
        match prepare(shared, by_spawner) {
            Ok(()) => {
                std::ptr::write_volatile(&mut shared.step, Step::Exec as u32);
                exec(shared)
            }
            Err(e) => e,
        }
    };
    // SAFETY: as above; read by the parent after we exit.
    unsafe { std::ptr::write_volatile(&mut shared.error, error.max(1)) };
    127
}

fn errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Signals, process group, death signal, stdio, cgroup, namespaces, folder,
/// descriptors, sandbox: the child's state before `exec`; `Err(errno)` on a
/// refusal, with the step in `s.step`. `by_spawner`: cloned by the spawner
/// thread, which dropped most privileges for it.
unsafe fn prepare(s: &mut Shared, by_spawner: bool) -> Result<(), libc::c_int> {
    let check = |r: libc::c_int| if r < 0 { Err(errno()) } else { Ok(()) };
    let step = |s: &mut Shared, step: Step| std::ptr::write_volatile(&mut s.step, step as u32);
    step(s, Step::Setup);
    default_signals(s.reset_signals);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    check(libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()))?;
    // Own process group, so a timeout or a cancel ends the whole tree.
    check(libc::setpgid(0, 0))?;
    // Die with the thread that started us (the engine's runtime thread, or
    // the spawner thread, which lives as long as the engine).
    check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
    if libc::getppid() != s.engine {
        return Err(libc::ESRCH); // the engine died before prctl
    }
    for (to, &from) in s.fds.iter().enumerate() {
        check(libc::dup2(from, to as libc::c_int))?;
    }
    // Into its own cgroup before anything of it can start a process.
    if s.cgroup >= 0 {
        step(s, Step::Cgroup);
        if libc::write(s.cgroup, b"0".as_ptr() as *const libc::c_void, 1) != 1 {
            return Err(errno());
        }
    }
    if s.netns >= 0 {
        step(s, Step::NetNs);
        check(libc::setns(s.netns, libc::CLONE_NEWNET))?;
    }
    // Joining a mount namespace sets the working folder to its root: the
    // folder is entered after.
    if s.mntns >= 0 {
        step(s, Step::MntNs);
        check(libc::setns(s.mntns, libc::CLONE_NEWNS))?;
    }
    step(s, Step::Setup);
    check(libc::chdir(s.cwd))?;
    // Only stdin, stdout and stderr survive exec (docs/sandbox.md).
    check(libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) as libc::c_int)?;
    if s.ruleset >= 0 {
        step(s, Step::Landlock);
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        check(libc::syscall(libc::SYS_landlock_restrict_self, s.ruleset, 0u32) as libc::c_int)?;
    }
    if s.last_cap >= 0 {
        step(s, Step::Privileges);
        if by_spawner {
            step(s, Step::Held);
            held_from_spawner(s.last_cap, !s.seccomp.is_null())?;
            step(s, Step::Privileges);
            crate::sandbox::drop_sets()?;
        } else {
            crate::sandbox::drop_privileges(s.last_cap)?;
        }
    }
    // Started by the spawner thread, it holds that thread's filter
    // (checked above).
    if !s.seccomp.is_null() && !by_spawner {
        step(s, Step::Seccomp);
        crate::sandbox::install_filter(s.seccomp)?;
    }
    Ok(())
}

/// Fail closed: a child that skips the drops refuses (`EPERM`) unless it
/// holds `no_new_privs`, a seccomp filter where one is due, and a bounding
/// set without `last_cap` — or one this thread may not drop it from (no
/// `CAP_SETPCAP`: nor could the child, `drop_bounding` stops at `EPERM`);
/// a capability the kernel does not know (`EINVAL`) is in no set. The one
/// read is an inheritance check: that every capability left the set was
/// verified once by the spawner thread (`spawner::bounding_dropped`).
/// Which filter the mode does not say (a container's counts): that it is
/// ours rests on this entry being the spawner's `clone`'s only.
unsafe fn held_from_spawner(last_cap: i64, filter: bool) -> Result<(), libc::c_int> {
    let cap = last_cap as libc::c_ulong;
    let read = libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0);
    let bounded = read == 0
        || (read < 0 && errno() == libc::EINVAL)
        || (libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno() == libc::EPERM);
    let nnp = libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
    let filtered = !filter || libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) == 2;
    if bounded && nnp && filtered {
        Ok(())
    } else {
        Err(libc::EPERM)
    }
}

/// The signals of `mask` (every one the engine handles, and SIGPIPE) back
/// to their default. The child has its own copy of the handlers (no
/// CLONE_SIGHAND).
unsafe fn default_signals(mask: u64) {
    let mut dfl: libc::sigaction = std::mem::zeroed();
    dfl.sa_sigaction = libc::SIG_DFL;
    for sig in 1..signals::NSIG {
        if mask & (1u64 << (sig - 1)) != 0 {
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
    }
}

/// Try each candidate as `execvp` does: go on past a missing one, remember
/// a refused one; a file that is not an executable format runs with
/// `/bin/sh`. The one that executed last time is tried first; if it fails
/// as a search would go on past it, the whole search is made. Returns only
/// on failure, with the errno to report.
unsafe fn exec(s: &mut Shared) -> libc::c_int {
    if s.found < s.paths_len {
        if let Failed::Stop(e) = exec_one(s, s.found) {
            return e;
        }
    }
    let mut denied = false;
    let mut last = libc::ENOENT;
    for i in 0..s.paths_len {
        match exec_one(s, i) {
            Failed::GoOn(e) => {
                denied |= e == libc::EACCES;
                last = e;
            }
            Failed::Stop(e) => return e,
        }
    }
    if denied {
        libc::EACCES
    } else {
        last
    }
}

/// How one candidate failed to execute: a search goes on past it (the
/// file or a folder is missing, or refused), or stops with this errno.
enum Failed {
    GoOn(libc::c_int),
    Stop(libc::c_int),
}

/// `execve` candidate `i` (with `/bin/sh` when the kernel cannot execute
/// it); returns only when it failed.
unsafe fn exec_one(s: &mut Shared, i: usize) -> Failed {
    let path = *s.paths.add(i);
    std::ptr::write_volatile(&mut s.ran, i);
    libc::execve(path, s.argv, s.envp);
    match errno() {
        libc::ENOEXEC => {
            *s.sh_argv.add(1) = path;
            libc::execve(*s.sh_argv, s.sh_argv as *const *const libc::c_char, s.envp);
            Failed::Stop(errno())
        }
        e @ (libc::EACCES | libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT) => {
            Failed::GoOn(e)
        }
        e => Failed::Stop(e),
    }
}

#[cfg(test)]
mod tests {
    use super::held_from_spawner;

    /// `held_from_spawner` on a fresh thread after `set` set that thread's
    /// attributes (each case its own thread: they cannot be undone).
    fn held_after(set: fn(i64) -> bool) -> Option<Result<(), libc::c_int>> {
        let last = i64::from(crate::sandbox::last_cap());
        // SAFETY: prctl and seccomp calls on this thread's own attributes.
        std::thread::spawn(move || set(last).then(|| unsafe { held_from_spawner(last, true) })).join().unwrap()
    }

    /// The test process started with `no_new_privs` (and maybe a filter):
    /// the cases below cannot set up a thread without them.
    /// Already under no_new_privs or a seccomp filter (a container's
    /// default profile installs one without no_new_privs): the checks'
    /// conditions cannot be set apart here.
    fn started_held() -> bool {
        // SAFETY: reads this thread's attributes.
        let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1;
        // SAFETY: as above.
        let filtered = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } == 2;
        if nnp || filtered {
            eprintln!("this process holds no_new_privs or a seccomp filter already: nothing to check");
        }
        nnp || filtered
    }

    fn filter_installed() -> bool {
        match crate::sandbox::program() {
            // SAFETY: the filter built for the children, on this thread.
            Ok(program) => unsafe { crate::sandbox::install_filter(&program) }.is_ok(),
            Err(_) => false,
        }
    }

    #[test]
    fn a_child_of_the_spawner_without_the_filter_due_refuses() {
        if started_held() {
            return;
        }
        // SAFETY: this thread's own no_new_privs and bounding set.
        let held = held_after(|last| unsafe { crate::sandbox::drop_bounding(last) }.is_ok());
        assert_eq!(held, Some(Err(libc::EPERM)), "no filter: it must not skip the drops");
    }

    #[test]
    fn a_child_of_the_spawner_with_a_capability_left_in_the_bounding_set_refuses() {
        // SAFETY: reads this thread's bounding set.
        let last = crate::sandbox::last_cap() as libc::c_ulong;
        let in_set = unsafe { libc::prctl(libc::PR_CAPBSET_READ, last, 0, 0, 0) } == 1;
        // SAFETY: as above.
        let root = unsafe { libc::geteuid() } == 0;
        if started_held() || !root || !in_set || crate::sandbox::program().is_err() {
            eprintln!("not root with capability {last} in the bounding set, or no filter: nothing to check");
            return;
        }
        // SAFETY: this thread's own no_new_privs.
        let held =
            held_after(|_| unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 && filter_installed());
        assert_eq!(held, Some(Err(libc::EPERM)), "a capability left: it must not skip the drops");
    }

    #[test]
    fn a_child_of_the_spawner_holding_everything_dropped_passes() {
        if started_held() || crate::sandbox::program().is_err() {
            return;
        }
        // SAFETY: this thread's own no_new_privs and bounding set.
        let held = held_after(|last| unsafe { crate::sandbox::drop_bounding(last) }.is_ok() && filter_installed());
        assert_eq!(held, Some(Ok(())));
    }
}
