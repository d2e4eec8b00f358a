//! Starting the child inside its cgroup: `clone3` with `CLONE_INTO_CGROUP`
//! (Linux 5.7).
//!
//! Why: a child that moves itself into its cgroup (a write of `0` to
//! `cgroup.procs`) makes the kernel take the cgroup threadgroup lock for
//! writing, which waits for an RCU grace period. On the 2-core machine of
//! `bench/README.md` that write took 64 µs at the median but 8.5 ms at the
//! 90th percentile (1.6 ms on average), and the engine's thread waits for
//! all of it (`CLONE_VFORK`). A child started in the cgroup is placed there
//! by the `clone` itself, under the read side of that lock: it is never
//! outside its cgroup, not even before `exec`.
//!
//! `clone3` has no glibc wrapper that runs a function on a new stack, so the
//! few instructions around the system call are written here: the child
//! starts on the stack the parent made for it (`spawn::stack::Stack`), calls the
//! child entry it is given (`child::child`, the classic path's, or
//! `child::child_of_spawner` from the spawner thread), and exits with its value,
//! never returning into the parent's frames. Only x86-64 has this path;
//! elsewhere, and where the kernel refuses `clone3` or
//! `CLONE_INTO_CGROUP` (older kernels, a container's seccomp filter), the
//! classic path runs and the child moves itself.
//!
//! The same call asks for the child's pidfd (`CLONE_PIDFD`, Linux 5.2,
//! so on every kernel with `CLONE_INTO_CGROUP`): made by the `clone`
//! itself, it needs no `pidfd_open` later, and it names the child from
//! its start (no window in which the pid could name another process).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// `CLONE_INTO_CGROUP` (linux/sched.h).
#[cfg(target_arch = "x86_64")]
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, 88 bytes).
#[cfg(target_arch = "x86_64")]
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Given up on for the rest of the process (the kernel has no `clone3`,
/// or no `CLONE_INTO_CGROUP`).
static UNSUPPORTED: AtomicBool = AtomicBool::new(!cfg!(target_arch = "x86_64"));

/// May the next child be started in its cgroup?
pub(super) fn usable() -> bool {
    !UNSUPPORTED.load(Ordering::Relaxed)
}

/// Use the classic path (`true`) or `clone3` where it works (`false`), for
/// the next children: the tests try both.
#[cfg(test)]
pub(super) fn force_classic(classic: bool) {
    UNSUPPORTED.store(classic || !cfg!(target_arch = "x86_64"), Ordering::Relaxed);
}

/// A `clone3` that failed: the next child is started the classic way (this
/// one too: the classic path then names the step the kernel refuses). An
/// error that says the kernel lacks the call or the flag is never tried
/// again.
pub(super) fn failed(error: &io::Error) {
    if matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL | libc::EPERM)) {
        UNSUPPORTED.store(true, Ordering::Relaxed);
    }
}

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PIDFD)`: the
/// child runs `child(arg)` on `[stack, stack + size)` in the cgroup of the
/// folder `cgroup`, and exits with what it returns; this thread is
/// suspended until the child exec'd or exited. Its pid and its pidfd
/// (close-on-exec, as the kernel makes every pidfd; `None` should a kernel
/// accept the call without writing one). Signals must be blocked by the
/// caller.
///
/// # Safety
/// As `libc::clone` with `CLONE_VM | CLONE_VFORK`: `child` may only make
/// system calls on memory that outlives the call, and the stack must be
/// unused and this thread's alone.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn clone_into(
    stack: *mut libc::c_void,
    size: usize,
    cgroup: RawFd,
    child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    let mut pidfd: libc::c_int = -1;
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_INTO_CGROUP,
        pidfd: &mut pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: size as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    let pid = call(&args, child, arg)?;
    // SAFETY: a local the kernel wrote through the pointer in `args`.
    let pidfd = unsafe { std::ptr::read_volatile(&pidfd) };
    // SAFETY: the child's new pidfd (`CLONE_PIDFD`), owned by nothing else.
    Ok((pid, (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) })))
}

/// Where the kernel reports a child started for another thread
/// ([`clone_for`]): all three written by the kernel itself, so the thread
/// that made the `clone` never touches this memory once the child runs.
#[repr(C)]
pub(super) struct Report {
    /// Non-zero until the child exec'd or exited: then the kernel sets it
    /// to 0 and wakes one waiter (`CLONE_CHILD_CLEARTID`, a shared futex),
    /// at the same point where it ends a `vfork`.
    pub pending: std::sync::atomic::AtomicU32,
    /// The child's pid (`CLONE_PARENT_SETTID`), before the child runs.
    pub pid: std::sync::atomic::AtomicI32,
    /// Its pidfd (`CLONE_PIDFD`), before the child runs; -1 for none.
    /// Meaningless where the `clone3` was refused (the kernel may have
    /// written a number it then released): never read then.
    pub pidfd: std::sync::atomic::AtomicI32,
}

/// [`clone_into`] on behalf of another thread, which waits on
/// `report.pending` (the spawner thread, `spawner.rs`): the kernel writes
/// the child's pid and pidfd into `report` before the child runs, and
/// clears `report.pending` when it exec'd or exited. Returns its pid.
///
/// # Safety
/// As [`clone_into`]; and `report` must outlive the child's `exec`.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn clone_for(
    stack: *mut libc::c_void,
    size: usize,
    cgroup: RawFd,
    child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
    report: *const Report,
) -> io::Result<libc::pid_t> {
    let flags =
        libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::CLONE_CHILD_CLEARTID | libc::CLONE_PARENT_SETTID;
    let args = CloneArgs {
        flags: flags as u64 | CLONE_INTO_CGROUP,
        pidfd: (*report).pidfd.as_ptr() as u64,
        child_tid: (*report).pending.as_ptr() as u64,
        parent_tid: (*report).pid.as_ptr() as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: size as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    call(&args, child, arg)
}

/// The `clone3` system call with `args`; in the child, `child(arg)` and
/// an exit with its value.
#[cfg(target_arch = "x86_64")]
unsafe fn call(
    args: &CloneArgs,
    child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<libc::pid_t> {
    let ret: i64;
    // SAFETY: the parent comes out of `syscall` with the child's pid or an
    // error in rax and goes on (rcx, r11 clobbered, as by any system call).
    // The child comes out with 0 in rax on its own stack (the kernel set
    // rsp to its top, 16-byte aligned: the `call` keeps the ABI's
    // alignment), calls `child(arg)` (kept in r12 and r13, which the kernel
    // copies to the child) and exits with its value: it never reaches the
    // code after the block.
    core::arch::asm!(
        "syscall",
        "test rax, rax",
        "jnz 2f",
        "xor ebp, ebp",
        "mov rdi, r13",
        "call r12",
        "mov edi, eax",
        "mov eax, {exit}",
        "syscall",
        "ud2",
        "2:",
        exit = const libc::SYS_exit,
        inlateout("rax") libc::SYS_clone3 => ret,
        in("rdi") args as *const CloneArgs,
        in("rsi") std::mem::size_of::<CloneArgs>(),
        in("r12") child,
        in("r13") arg,
        lateout("rcx") _,
        lateout("r11") _,
        options(nostack),
    );
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret as i32));
    }
    Ok(ret as libc::pid_t)
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn clone_into(
    _stack: *mut libc::c_void,
    _size: usize,
    _cgroup: RawFd,
    _child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn clone_for(
    _stack: *mut libc::c_void,
    _size: usize,
    _cgroup: RawFd,
    _child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
    _report: *const Report,
) -> io::Result<libc::pid_t> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}
