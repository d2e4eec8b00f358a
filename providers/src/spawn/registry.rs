//! The children this engine started and has not reaped: their pids and
//! cgroups (so a tree can be killed by its leader's pid), the orphans of
//! dropped children, and reaping them.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use super::{cgroup_thread, Pidfd};
use crate::process::cgroup::{self, Cgroup};

/// The cgroups of the children alive, by leader pid: `kill_tree` ends a
/// whole tree by its leader's pid (the MCP transport knows only that).
pub(super) fn cgroups() -> std::sync::MutexGuard<'static, std::collections::HashMap<u32, std::path::PathBuf>> {
    static CGROUPS: OnceLock<Mutex<std::collections::HashMap<u32, std::path::PathBuf>>> = OnceLock::new();
    CGROUPS.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn unregister(pid: u32) {
    cgroups().remove(&pid);
}

/// The pids of the children this engine started and has not dropped (or
/// still reaps): never taken for an adopted orphan.
pub(super) fn live() -> std::sync::MutexGuard<'static, std::collections::HashSet<u32>> {
    static LIVE: OnceLock<Mutex<std::collections::HashSet<u32>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// Did this engine start `pid` itself (a provider process it watches or
/// will reap)?
pub(crate) fn is_spawned(pid: u32) -> bool {
    live().contains(&pid) || orphans().contains(&pid)
}

/// SIGKILL the tree led by `pgid`: its cgroup (every descendant, `setsid`
/// or not) and its process group.
pub(crate) fn kill_tree(pgid: u32) {
    let cgroup = cgroups().get(&pgid).cloned();
    crate::process::kill_tree(pgid, cgroup.as_deref());
}

/// `waitpid(pid, WNOHANG)`: the status once the process exited.
pub(super) fn reap(pid: u32) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    loop {
        // SAFETY: plain syscall on an integer and a local.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
        match r {
            0 => return Ok(None),
            r if r > 0 => return Ok(Some(ExitStatus::from_raw(status))),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// A pidfd for a child not reaped yet (so its pid cannot name another
/// process), registered with the reactor.
pub(super) fn open_pidfd(pid: u32) -> io::Result<Pidfd> {
    // SAFETY: plain syscall on an integer.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as libc::c_int;
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS) => Ok(Pidfd::Unavailable),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    watched(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A child's pidfd registered with the reactor.
pub(super) fn watched(fd: OwnedFd) -> io::Result<Pidfd> {
    // SAFETY: the pidfd is open and owned by the AsyncFd from here on.
    let registered = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
    Ok(Pidfd::Open(registered.map_err(|e| e.into_parts().1)?))
}

/// Children dropped while they still ran.
pub(super) fn orphans() -> std::sync::MutexGuard<'static, Vec<u32>> {
    static ORPHANS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    ORPHANS.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn reap_orphans() {
    orphans().retain(|&pid| matches!(reap(pid), Ok(None)));
    if cgroup::refused().is_some() {
        reap_adopted();
    }
}

/// After a child started, while it runs: reap what ended, and ask for the
/// next children's cgroups to be made ahead and the ended ones removed, on
/// the providers' own thread (`cgroup_thread`; none made once cgroups were
/// given up on). A fresh cgroup every time, never one a process was in: a
/// recorded cgroup names one call's tree only.
pub(super) fn prepare_next() {
    reap_orphans();
    cgroup_thread::after_spawn();
}

/// Before the engine exits: remove every cgroup made ahead and every
/// emptied one left, once the cgroups' thread finished its pass (a crash
/// leaves them to the next engine's sweep).
pub fn tidy() {
    cgroup_thread::tidy();
    reap_orphans();
}

/// As the subreaper of its providers (no cgroups here), reap the adopted
/// orphans that ended: at most once a second (it walks `/proc`).
pub(crate) fn reap_adopted() {
    static LAST: Mutex<Option<std::time::Instant>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
        return;
    }
    *last = Some(std::time::Instant::now());
    crate::process::adopted::reap(&is_spawned);
}

/// A cgroup for the next child, unless cgroups cannot be made or joined
/// here (the first failure is kept, and no cgroup is tried again).
pub(super) fn new_cgroup() -> Option<Cgroup> {
    if cgroup::refused().is_none() {
        if let Some(made) = cgroup_thread::take() {
            return Some(made);
        }
        match Cgroup::create() {
            Ok(c) => return Some(c),
            Err(e) => cgroup::refuse(e.to_string()),
        }
    }
    // No cgroup: the engine adopts what its providers orphan.
    crate::process::adopted::become_subreaper();
    None
}
