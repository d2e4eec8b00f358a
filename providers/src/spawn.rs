//! Starting a provider process without copying the engine.
//!
//! `std::process::Command` forks as soon as it has a `pre_exec` hook, and a
//! provider needs three things done in the child before `exec`: die with the
//! engine (`PR_SET_PDEATHSIG`), enter its Landlock domain, and close every
//! descriptor above stderr. A fork copies the engine's page tables and marks
//! all its memory copy-on-write; the engine then takes a page fault on
//! every page it writes after each spawn, and the child's `exec` tears the
//! copy down again. At a thousand short tasks that was about 1 ms of CPU per
//! task, more than the engine's own bookkeeping (bench/README.md, "The performance log").
//!
//! So the child is started the way glibc's `posix_spawn` starts one (which
//! itself cannot be used: it has no way to set a death signal or enter a
//! Landlock domain): `clone(CLONE_VM | CLONE_VFORK)`. It shares the
//! engine's memory (nothing is copied) and the calling thread is suspended
//! until the child has called `execve` or exited.
//!
//! Why a user can accept hand-written code here: it buys about 1 ms of CPU
//! per provider process (a third of a short task's cost), and it keeps
//! every guarantee, each tested below and in `providers/tests/sandbox.rs`.
//! It is this file and its helpers; the child runs one function
//! ([`child`](child::child), or `child_of_spawner` from the spawner thread) that makes only system calls on data the parent prepared —
//! it allocates nothing, takes no lock, never unwinds, and writes to shared
//! memory only its own error number, the step that failed, which candidate
//! it tries, the path in the `/bin/sh` fallback's argv, and the clock it
//! read first (its start time, `process::clock`) — and it does
//! exactly what the `pre_exec` hooks did (`sandbox::confine_self`, and
//! `PR_SET_PDEATHSIG`), plus what the standard library does for a spawned
//! child (stdio, process group, working directory, a clean signal state,
//! the `PATH` search of `execvp`), plus what no hook did: it moves itself
//! into a cgroup of its own (`process::cgroup`: nothing it starts can leave
//! it) and joins the run's namespaces its sandbox names (no network; the
//! stores hidden).
//! All signals are blocked in the calling thread across the `clone`, so no
//! signal handler of the engine can run on the child's side of the shared
//! memory; the child resets every handled signal to its default before it
//! unblocks them (which ones: [`signals`], read by the parent). A child
//! that drops its privileges and is started by `clone3` into its cgroup
//! is cloned by the spawner thread ([`spawner`]), which holds most of them
//! dropped already: the child then only checks that and empties its
//! capability sets. Any other is cloned by the asking thread and drops
//! everything itself.
//!
//! What the parent prepares is cheap to prepare again: the environment is
//! the engine's, read once ([`environ`]), and the program's path is found
//! once per `PATH` and name ([`search`]).

mod cgroup_thread;
mod child;
mod clone3;
mod environ;
mod output;
mod registry;
mod search;
mod signals;
pub(crate) mod spawner;
mod stack;

use child::child;
pub(crate) use output::Output;
pub use registry::tidy;
use registry::{cgroups, live, new_cgroup, open_pidfd, orphans, prepare_next, reap, unregister, watched};
pub(crate) use registry::{is_spawned, kill_tree};
pub use signals::handlers_changed;
use stack::{with_stack, Stack};

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::process::cgroup::{self, Cgroup};
use crate::process::clock;
use crate::sandbox::Sandbox;

/// What a process to start is: argv (no shell), the variables set over
/// the minimal environment and its sandbox's (a name set twice keeps its
/// last value), its working folder, whether its stdin is a pipe (else
/// `/dev/null`), and the sandbox it runs in. Stdout and stderr are always
/// pipes.
pub(crate) struct Spec<'a> {
    pub argv: &'a [String],
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    pub piped_stdin: bool,
    pub sandbox: &'a Sandbox,
}

/// A started process: the leader of its own process group, dying with the
/// thread that cloned it (the asking thread, or the spawner thread, which
/// lives as long as the engine). Dropped before it was waited for, it is reaped
/// by a later spawn (no zombie piles up).
pub(crate) struct Child {
    pid: u32,
    /// Its start time, where the clock around its `clone` named one tick
    /// (`process::clock`).
    start_ticks: Option<u64>,
    /// The cgroup its whole tree runs in (none where the engine cannot
    /// make one, or once removed after its tree ended).
    cgroup: Option<Cgroup>,
    /// Readable once the process exited: made by the `clone` where
    /// `clone3` started the child, else opened by the first `wait` that
    /// finds it running (most children of a short task have exited by the
    /// time their output ended, and need none); registered with the
    /// reactor only by a `wait` that must wait. `Unavailable` on a kernel
    /// without `pidfd_open` (before 5.3), where `wait` polls.
    pidfd: Pidfd,
    status: Option<ExitStatus>,
    pub stdin: Option<pipe::Sender>,
    /// Registered with the reactor only once a read finds them empty
    /// (`output.rs`).
    pub stdout: Option<Output>,
    pub stderr: Option<Output>,
}

/// A child's pidfd, registered with the reactor once it is needed.
enum Pidfd {
    /// None yet: `pidfd_open` when a `wait` must wait.
    NotYet,
    /// Made by the `clone` (`CLONE_PIDFD`), not registered yet.
    Cloned(OwnedFd),
    Open(AsyncFd<OwnedFd>),
    Unavailable,
}

/// How often `wait` looks without a pidfd.
const POLL: Duration = Duration::from_millis(10);

impl Child {
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// The cgroup its tree runs in.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(Cgroup::path)
    }

    /// Its start time (clock ticks after boot, `/proc/PID/stat` field 22):
    /// from the clock around its `clone` where that named one tick, else
    /// read from `/proc` (`None` if that failed).
    pub fn start_time(&self) -> Option<u64> {
        self.start_ticks.or_else(|| crate::process::ProcessId::leader(self.pid).map(|p| p.start_time))
    }

    /// Once it was reaped: if nothing runs in its cgroup any more, hand
    /// the cgroup over to be removed. Whether its whole tree ended is one
    /// read of the cgroup's `cgroup.events` (`Cgroup::emptied`: the count
    /// the kernel's `rmdir` checks, so it proves what the removal at this
    /// point proved in issue 38's tenth round); the `rmdir` itself, and
    /// the closes of the cgroup's descriptors, are made on the providers'
    /// cgroup thread (`cgroup_thread`; bench/README.md, issue 38's
    /// eleventh round). True when it ended; its tree then has no cgroup to
    /// watch, kill or record.
    pub fn remove_cgroup_if_ended(&mut self) -> bool {
        let Some(cg) = self.cgroup.as_ref().filter(|_| self.status.is_some()) else { return false };
        if !cg.emptied() {
            return false;
        }
        if let Some(cg) = self.cgroup.take() {
            cgroup_thread::hand_over(cg);
        }
        unregister(self.pid);
        true
    }

    /// Has it been reaped (its status taken)? Its pid, which is also its
    /// process group's number, may then be given to another process.
    pub fn reaped(&self) -> bool {
        self.status.is_some()
    }

    /// Wait for the process to exit; the status is kept, so waiting again
    /// (after a timeout, a kill) returns it. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.wait_for_exit(true).await
    }

    /// As `wait`. `look_first`: look whether it exited (`wait4`) before
    /// its pidfd is watched. Without it a pidfd the `clone` made is watched
    /// at once: for a child the caller believes to be running (its output
    /// has not ended) the look finds nothing most often, a system call
    /// spent for nothing; the pidfd's registration reports an exit that
    /// came before it (`epoll` looks at the file as it adds it).
    pub async fn wait_for_exit(&mut self, look_first: bool) -> io::Result<ExitStatus> {
        let mut look = look_first || matches!(self.pidfd, Pidfd::NotYet | Pidfd::Unavailable);
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            if look {
                if let Some(status) = self.try_wait()? {
                    return Ok(status);
                }
            }
            look = true;
            if let Err(e) = self.watch_exit() {
                // A failed registration says nothing of an exit that came
                // before it: a look first, so the error is only returned
                // for a child still running.
                return self.try_wait()?.ok_or(e);
            }
            match &self.pidfd {
                Pidfd::Open(fd) => fd.readable().await?.clear_ready(),
                _ => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Its pidfd registered with the reactor (opened first where the
    /// `clone` made none); `Unavailable` stays so.
    fn watch_exit(&mut self) -> io::Result<()> {
        self.pidfd = match std::mem::replace(&mut self.pidfd, Pidfd::NotYet) {
            Pidfd::NotYet => open_pidfd(self.pid)?,
            // On a failed registration the pidfd is closed: `NotYet` then
            // opens another.
            Pidfd::Cloned(fd) => watched(fd)?,
            kept => kept,
        };
        Ok(())
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = reap(self.pid)?;
        }
        Ok(self.status)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() && !matches!(reap(self.pid), Ok(Some(_))) {
            orphans().push(self.pid);
        }
        live().remove(&self.pid);
        if let Some(cg) = self.cgroup.take() {
            unregister(self.pid);
            // Removed by the cgroup thread after a later spawn (or by
            // `tidy` at the engine's exit), once empty: never with a
            // process in it.
            cgroup_thread::hand_over(cg);
        }
    }
}

/// Start `spec`. Must be called within a tokio runtime, and its pipes read
/// within it (the pidfd, and a pipe once a read finds it empty, are
/// registered with its reactor; a pipe read outside one reports an error). An error means nothing runs: the
/// program was not found or not executable, or the sandbox or
/// `PR_SET_PDEATHSIG` was refused.
pub(crate) fn spawn(spec: Spec<'_>) -> io::Result<Child> {
    let cgroup = new_cgroup();
    let started = spawn_once(&spec, cgroup);
    prepare_next();
    started
}

fn spawn_once(spec: &Spec<'_>, cgroup: Option<Cgroup>) -> io::Result<Child> {
    match spawn_in(spec, cgroup) {
        // Made but not joinable (a cgroup the engine may not move a process
        // into): never again, and this process without one.
        Err(Failure { step: Step::Cgroup, error }) => {
            cgroup::refuse(format!("cannot move a process into a cgroup: {error}"));
            crate::process::adopted::become_subreaper();
            spawn_in(spec, None).map_err(Failure::into_error)
        }
        started => started.map_err(Failure::into_error),
    }
}

/// A spawn that failed: the child's step that was refused, and the error.
struct Failure {
    step: Step,
    error: io::Error,
}

impl Failure {
    fn parent(error: io::Error) -> Failure {
        Failure { step: Step::Parent, error }
    }

    /// The error, naming the step when it was one of the sandbox's.
    fn into_error(self) -> io::Error {
        let what = match self.step {
            Step::Parent | Step::Exec | Step::Setup => return self.error,
            Step::Cgroup => "moving into its cgroup",
            Step::NetNs => "joining the run's network namespace",
            Step::MntNs => "joining the run's mount namespace",
            Step::Landlock => "entering its Landlock domain",
            Step::Privileges => "dropping its capabilities",
            Step::Held => "holding the spawner thread's dropped privileges",
            Step::Seccomp => "installing its seccomp filter",
        };
        io::Error::new(self.error.kind(), format!("{what}: {}", self.error))
    }
}

/// The child's steps before `exec`, as it reports which one failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Step {
    /// Before the child ran (the parent's own preparation).
    Parent = 0,
    /// Signals, group, death signal, stdio, folder, descriptors.
    Setup = 1,
    Cgroup = 2,
    NetNs = 3,
    MntNs = 4,
    Landlock = 5,
    Privileges = 6,
    Seccomp = 7,
    Exec = 8,
    Held = 9, // a spawner thread's child's check (`child.rs`)
}

impl Step {
    fn of(n: u32) -> Step {
        [
            Step::Setup,
            Step::Cgroup,
            Step::NetNs,
            Step::MntNs,
            Step::Landlock,
            Step::Privileges,
            Step::Seccomp,
            Step::Exec,
            Step::Held,
        ]
        .into_iter()
        .find(|s| *s as u32 == n)
        .unwrap_or(Step::Parent)
    }
}

fn spawn_in(spec: &Spec<'_>, cgroup: Option<Cgroup>) -> Result<Child, Failure> {
    // Until a process runs in it, a failure removes the cgroup made for it
    // (else it would wait for the next engine's sweep).
    let unmade = |e: Failure| {
        if let Some(c) = &cgroup {
            cgroup::remove(c.path(), Duration::ZERO);
        }
        e
    };
    let parent = |e: io::Error| unmade(Failure::parent(e));
    let plan = Plan::new(spec).map_err(parent)?;
    // The child's stdin: a pipe's read end, or the process's one
    // `/dev/null` (the child `dup2`s it; the parent keeps its own).
    let (stdin_child, stdin_parent) = if spec.piped_stdin {
        let (r, w) = pipe_pair().map_err(parent)?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    let stdin_fd = match &stdin_child {
        Some(r) => r.as_raw_fd(),
        None => dev_null().map_err(parent)?,
    };
    let (out_parent, out_child) = pipe_pair().map_err(parent)?;
    let (err_parent, err_child) = pipe_pair().map_err(parent)?;
    let fds = [stdin_fd, out_child.as_raw_fd(), err_child.as_raw_fd()];
    let started = start(plan, fds, cgroup.as_ref());
    drop((stdin_child, out_child, err_child));
    let (pid, start_ticks, pidfd) = started.map_err(unmade)?;
    if let Some(c) = &cgroup {
        cgroups().insert(pid, c.path().to_path_buf());
    }
    live().insert(pid);
    let mut child = Child { pid, start_ticks, cgroup, pidfd, status: None, stdin: None, stdout: None, stderr: None };
    // From here on the process runs: a failure to watch it still returns
    // the error, and `Drop` reaps it once it exits.
    let watch = |child: &mut Child| -> io::Result<()> {
        child.stdout = Some(Output::new(nonblocking(out_parent)?));
        child.stderr = Some(Output::new(nonblocking(err_parent)?));
        if let Some(w) = stdin_parent {
            child.stdin = Some(pipe::Sender::from_owned_fd_unchecked(nonblocking(w)?)?);
        }
        Ok(())
    };
    watch(&mut child).map_err(Failure::parent)?;
    Ok(child)
}

/// A pipe, both ends close-on-exec and above stderr (so the child's `dup2`
/// onto 0–2 never overwrites one of them): (read end, write end).
fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl on a descriptor we own; the new one is ours.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

/// `/dev/null` for a child's stdin, opened once (close-on-exec, above
/// stderr) and kept open for the rest of the process.
fn dev_null() -> io::Result<RawFd> {
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let file = std::fs::File::open("/dev/null")?;
    let fd = above_stdio(OwnedFd::from(file))?;
    Ok(NULL.get_or_init(|| fd).as_raw_fd())
}

/// The parent's end of a pipe just made: its only status flag is
/// `O_NONBLOCK` (the child's end stays blocking).
fn nonblocking(fd: OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Everything the child reads, prepared (and allocated) by the parent.
/// The child only reads it, and writes `error` and `ran`.
struct Plan {
    /// Where to look for the program (the `PATH` search).
    program: search::Program,
    argv: Vec<CString>,
    env: environ::Environ,
    cwd: CString,
    /// `/bin/sh` and the arguments, for a file the kernel cannot execute
    /// (`ENOEXEC`: a script without `#!`), as `execvp` does; slot 1 is the
    /// path tried.
    sh: CString,
    ruleset: Option<RawFd>,
    /// The run's namespaces to join: network, mount.
    netns: Option<RawFd>,
    mntns: Option<RawFd>,
    engine: libc::pid_t,
    /// Drop every privilege (`sandbox::privileges`): every capability up to
    /// this kernel's last, and the seccomp filter where there is one.
    privileges: Option<(u32, Option<crate::sandbox::Fprog>)>,
}

impl Plan {
    fn new(spec: &Spec<'_>) -> io::Result<Plan> {
        let prog = spec.argv.first().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut set = spec.sandbox.env().to_vec();
        set.extend(spec.env.iter().cloned());
        let env = environ::Environ::new(&set)?;
        let (netns, mntns) = spec.sandbox.namespace_fds();
        Ok(Plan {
            program: search::Program::new(prog, env.get(b"PATH"))?,
            argv: spec.argv.iter().map(|a| cstring(a.clone().into_bytes())).collect::<io::Result<_>>()?,
            env,
            cwd: cstring(spec.cwd.as_os_str().as_bytes().to_vec())?,
            sh: cstring(b"/bin/sh".to_vec())?,
            ruleset: spec.sandbox.ruleset_fd(),
            netns,
            mntns,
            engine: engine_pid(),
            privileges: spec
                .sandbox
                .drops_privileges()
                .then(|| (crate::sandbox::last_cap(), crate::sandbox::program().ok())),
        })
    }
}

/// This process's pid, asked once (a `getpid` per spawn otherwise): it
/// never forks a process that goes on to start providers.
fn engine_pid() -> libc::pid_t {
    static PID: OnceLock<libc::pid_t> = OnceLock::new();
    *PID.get_or_init(|| std::process::id() as libc::pid_t)
}

fn cstring(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument"))
}

/// The raw pointers the child passes to `execve`, and where it reports.
#[repr(C)]
struct Shared {
    paths: *const *const libc::c_char,
    paths_len: usize,
    /// The path to try first (the one that executed last time), or
    /// `paths_len` for none.
    found: usize,
    /// The index in `paths` of the file the child tried last: the one that
    /// executed, once it did.
    ran: usize,
    argv: *const *const libc::c_char,
    /// `[sh, (path), argv[1..], NULL]`; the child fills slot 1.
    sh_argv: *mut *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    fds: [RawFd; 3],
    ruleset: RawFd,
    netns: RawFd,
    mntns: RawFd,
    /// The `cgroup.procs` to write `0` to (-1: none, or the child was
    /// started in its cgroup).
    cgroup: RawFd,
    engine: libc::pid_t,
    /// Drop every capability up to this one (-1: keep them all).
    last_cap: i64,
    /// The seccomp filter to install (null: none).
    seccomp: *const crate::sandbox::Fprog,
    /// The signals to set back to their default (bit `n - 1`: signal `n`).
    reset_signals: u64,
    /// The child's errno when it could not exec; 0 when it did.
    error: libc::c_int,
    /// The step that failed (a `Step`), with `error`.
    step: u32,
    /// `CLOCK_BOOTTIME` as the child first read it (0: unread), the upper
    /// bound of its start (`process::clock`).
    cloned_ns: u64,
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// Clone the child and wait (the kernel does) until it exec'd or failed:
/// its pid, where the clock around the `clone` names it its start time,
/// and its pidfd as the `clone` made it (`Pidfd::NotYet` where it made
/// none); or its error. The file that executed is remembered.
fn start(plan: Plan, fds: [RawFd; 3], cgroup: Option<&Cgroup>) -> Result<(u32, Option<u64>, Pidfd), Failure> {
    let candidates = plan.program.candidates.clone();
    let paths = pointers(&candidates);
    let argv = pointers(&plan.argv);
    let envp = plan.env.pointers();
    let mut sh_argv: Vec<*const libc::c_char> = vec![plan.sh.as_ptr(), std::ptr::null()];
    sh_argv.extend(argv.iter().skip(1));
    let mut shared = Shared {
        paths: paths.as_ptr(),
        paths_len: candidates.len(),
        found: plan.program.found.unwrap_or(candidates.len()),
        ran: candidates.len(),
        argv: argv.as_ptr(),
        sh_argv: sh_argv.as_mut_ptr(),
        envp: envp.as_ptr(),
        cwd: plan.cwd.as_ptr(),
        fds,
        ruleset: plan.ruleset.unwrap_or(-1),
        netns: plan.netns.unwrap_or(-1),
        mntns: plan.mntns.unwrap_or(-1),
        cgroup: -1,
        engine: plan.engine,
        last_cap: plan.privileges.as_ref().map_or(-1, |(last, _)| i64::from(*last)),
        seccomp: plan
            .privileges
            .as_ref()
            .and_then(|(_, f)| f.as_ref())
            .map_or(std::ptr::null(), |f| f as *const crate::sandbox::Fprog),
        reset_signals: signals::to_reset(),
        error: 0,
        step: Step::Parent as u32,
        cloned_ns: 0,
    };
    let before = clock::boottime_ns();
    let (pid, pidfd) = with_stack(|stack| Ok(launch(stack, &mut shared, cgroup))).map_err(Failure::parent)??;
    // SAFETY: the child has exec'd or exited (CLONE_VFORK); nothing else
    // writes `error`, `step`, `ran` or `cloned_ns` any more.
    let (error, step, ran, cloned) = unsafe {
        (
            std::ptr::read_volatile(&shared.error),
            std::ptr::read_volatile(&shared.step),
            std::ptr::read_volatile(&shared.ran),
            std::ptr::read_volatile(&shared.cloned_ns),
        )
    };
    plan.program.remember((error == 0).then_some(ran));
    if error != 0 {
        // It exited: reap it now, so no zombie is left.
        let _ = wait_blocking(pid);
        return Err(Failure { step: Step::of(step), error: io::Error::from_raw_os_error(error) });
    }
    // Stamped by the kernel between the read before the `clone` and the
    // child's first read.
    let pidfd = pidfd.map_or(Pidfd::NotYet, Pidfd::Cloned);
    Ok((pid as u32, clock::start_ticks(before, (cloned > 0).then_some(cloned)), pidfd))
}

/// Clone the child into its cgroup, if it has one: started there by
/// `clone3` where the kernel can (`clone3.rs`: it spares the child's move,
/// the dearest step of a spawn, and makes its pidfd), else moving itself
/// in before anything of it runs (the child's write of `0` to
/// `cgroup.procs`). Its pid, and its pidfd where the `clone` made one.
fn launch(
    stack: &Stack,
    shared: &mut Shared,
    cgroup: Option<&Cgroup>,
) -> Result<(libc::pid_t, Option<OwnedFd>), Failure> {
    if let Some(cg) = cgroup {
        match launch_clone3(stack, shared, cg) {
            Ok(started) => return Ok(started),
            // The classic way below names the step the kernel refuses.
            Err(e) => clone3::failed(&e),
        }
        shared.cgroup = cg.procs_fd().map_err(|error| Failure { step: Step::Cgroup, error })?;
    }
    clone_blocked(stack, shared).map(|pid| (pid, None)).map_err(Failure::parent)
}

/// `clone3` into `cg`: a child that drops its privileges by the spawner
/// thread, which holds most of them dropped already (`spawner.rs`), else
/// by this thread. `ENOSYS` where `clone3` is given up on.
fn launch_clone3(stack: &Stack, shared: &mut Shared, cg: &Cgroup) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    if !clone3::usable() {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    if shared.last_cap >= 0 {
        // SAFETY: `shared` outlives the call, which returns once the child
        // exec'd or exited (or none was started).
        match unsafe { spawner::launch(shared, cg.dir_fd()) } {
            Some(Ok(started)) => return Ok(started),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    let arg = shared as *mut Shared as *mut libc::c_void;
    // SAFETY: as `clone_blocked`'s `clone`: `child` only makes system
    // calls on what `shared` points to, which outlives the call
    // (CLONE_VFORK); the stack is this thread's and unused.
    signals_blocked(|| unsafe {
        clone3::clone_into(stack.above_guard(), stack.usable_bytes(), cg.dir_fd(), child, arg)
    })
}

/// `f` with every signal blocked in this thread: no handler of the engine
/// can run on a child's side of the shared memory.
fn signals_blocked<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: sigset operations on locals; the mask is restored below.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    let out = f();
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    out
}

/// `clone(CLONE_VM | CLONE_VFORK)` with every signal blocked in this
/// thread across it.
fn clone_blocked(stack: &Stack, shared: &mut Shared) -> io::Result<libc::pid_t> {
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let arg = shared as *mut Shared as *mut libc::c_void;
    // SAFETY: `child` only makes system calls on what `shared` points to,
    // which outlives the call: with CLONE_VFORK this thread is suspended
    // until the child exec'd or exited. The stack is ours and unused.
    let pid = signals_blocked(|| unsafe { libc::clone(child, stack.top(), flags, arg) });
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

fn wait_blocking(pid: libc::pid_t) -> io::Result<()> {
    let mut status = 0;
    // SAFETY: plain syscall.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// `sh -c script` in this process's working folder, unconfined, stdin
/// piped: for tests.
#[cfg(test)]
pub(crate) fn sh(script: &str) -> Child {
    let argv = ["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let cwd = std::env::current_dir().unwrap();
    let spec = Spec { argv: &argv, env: Vec::new(), cwd: &cwd, piped_stdin: true, sandbox: &Sandbox::disabled() };
    spawn(spec).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tokio::io::AsyncReadExt;

    async fn output(mut child: Child) -> (ExitStatus, String, String) {
        let (mut out, mut err) = (String::new(), String::new());
        let (mut o, mut e) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (_, _, status) = tokio::join!(o.read_to_string(&mut out), e.read_to_string(&mut err), child.wait());
        (status.unwrap(), out, err)
    }

    fn spec<'a>(argv: &'a [String], cwd: &'a Path, sandbox: &'a Sandbox) -> Spec<'a> {
        Spec { argv, env: Vec::new(), cwd, piped_stdin: false, sandbox }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn the_child_leads_its_own_group_with_a_clean_signal_state() {
        fn mask(file: &str, name: &str) -> u64 {
            let status = std::fs::read_to_string(file).unwrap();
            let line = status.lines().find(|l| l.starts_with(name)).unwrap().to_owned();
            u64::from_str_radix(line.rsplit('\t').next().unwrap(), 16).unwrap()
        }
        let blocked = mask("/proc/thread-self/status", "SigBlk");
        let ignored = mask("/proc/self/status", "SigIgn");
        let pipe = 1u64 << (libc::SIGPIPE - 1);
        assert_ne!(ignored & pipe, 0, "the Rust runtime ignores SIGPIPE");
        let dir = std::env::current_dir().unwrap();
        let none = Sandbox::disabled();
        let grep = strings(&["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]);
        let (status, out, _) = output(spawn(spec(&grep, &dir, &none)).unwrap()).await;
        assert!(status.success());
        // Every signal was blocked across the clone; the provider starts
        // with none blocked, and with SIGPIPE at its default. What the
        // engine itself was started ignoring stays ignored, as with exec.
        assert!(out.contains("SigBlk:\t0000000000000000"), "{out}");
        assert!(out.contains(&format!("SigIgn:\t{:016x}", ignored & !pipe)), "{out}");
        let cat = strings(&["cat", "/proc/self/stat"]);
        let (_, stat, _) = output(spawn(spec(&cat, &dir, &none)).unwrap()).await;
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        assert_eq!(stat.split_whitespace().next(), Some(fields[2]), "its own group (pgid = pid): {stat}");
        assert_eq!(mask("/proc/thread-self/status", "SigBlk"), blocked, "the parent's mask is restored");
    }

    /// What a confined child ends with: its capability sets, `no_new_privs`,
    /// seccomp, its blocked and ignored signals, its speculation
    /// mitigation, its namespaces, and whether Landlock refuses a write
    /// outside its workspace (`$0`). Read by the shell's builtins: a `sh`
    /// waiting for a command it started blocks every signal for a moment.
    async fn confined_state(sandbox: &Sandbox, ws: &Path, outside: &Path) -> (u32, String) {
        let script =
            "while read -r l; do case $l in Cap*|NoNewPrivs*|Seccomp*|SigBlk*|SigIgn*|Speculation_Store_Bypass*) \
                      echo \"$l\";; esac; done < /proc/$$/status; ls -l /proc/$$/ns | sed 's/.* -> //'; \
                      echo x > \"$0/y\" 2>/dev/null && echo wrote || echo refused";
        let argv = strings(&["sh", "-c", script, outside.to_str().unwrap()]);
        let child = spawn(spec(&argv, ws, sandbox)).unwrap();
        let pid = child.id();
        let (status, out, err) = output(child).await;
        assert!(status.success(), "{err}");
        (pid, out)
    }

    /// A workspace and a folder outside it under `root`, and a sandbox
    /// confining to the workspace (with the namespaces it names).
    fn confined_to(root: &Path) -> (PathBuf, PathBuf, crate::sandbox::Namespaces, Sandbox) {
        let (ws, outside) = (root.join("ws"), root.join("outside"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let namespaces = crate::sandbox::Namespaces::make(&[]);
        let policy = crate::sandbox::Policy::builder(&ws).temp_dirs([]).build().unwrap();
        let sandbox = policy.prepare_in(&namespaces).unwrap();
        (ws, outside, namespaces, sandbox)
    }

    #[tokio::test]
    #[allow(clippy::await_holding_lock)] // a test's, on its one thread
    async fn a_child_of_the_spawner_thread_ends_as_confined_as_one_that_dropped_everything_itself() {
        let _lock = cgroup_thread::test_lock();
        let root = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
        let (ws, outside, _namespaces, sandbox) = confined_to(root.path());
        let (pid, by_thread) = confined_state(&sandbox, &ws, &outside).await;
        if !spawner::tests::started_by_it(pid) {
            eprintln!(
                "no spawner thread here ({:?}, a cgroup: {}): nothing to compare",
                spawner::refused(),
                cgroup::refused().is_none()
            );
            return;
        }
        spawner::tests::OFF.store(true, std::sync::atomic::Ordering::Relaxed);
        let (pid, by_itself) = confined_state(&sandbox, &ws, &outside).await;
        spawner::tests::OFF.store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(!spawner::tests::started_by_it(pid));
        assert_eq!(by_thread, by_itself, "the same state, dropped by the thread or by the child");
        let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let filters: u32 =
            own.lines().find_map(|l| l.strip_prefix("Seccomp_filters:")).unwrap().trim().parse().unwrap();
        let mut want = vec!["CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000"];
        want.extend(["CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"]);
        // Not the spawner thread's mask, which blocks every signal.
        want.push("SigBlk:\t0000000000000000");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            want.push("CapBnd:\t0000000000000000");
        }
        let filters = format!("Seccomp_filters:\t{}", filters + 1);
        for line in want.iter().copied().chain([filters.as_str()]) {
            assert!(by_thread.lines().any(|l| l == line), "{line} missing: {by_thread}");
        }
        if sandbox.status().is_confined() {
            assert!(by_thread.ends_with("refused\n"), "Landlock refused the write: {by_thread}");
        }
        // The run's network namespace, not the engine's.
        if sandbox.namespace_fds().0.is_some() {
            let net = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
            assert!(!by_thread.contains(net.to_str().unwrap()), "{by_thread}");
        }
    }

    #[tokio::test]
    #[allow(clippy::await_holding_lock)] // a test's, on its one thread
    async fn a_child_cloned_by_its_caller_after_the_spawner_was_refused_drops_everything_itself() {
        let _lock = cgroup_thread::test_lock();
        let root = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
        let (ws, outside, _namespaces, sandbox) = confined_to(root.path());
        let (pid, by_thread) = confined_state(&sandbox, &ws, &outside).await;
        assert!(spawner::tests::started_by_it(pid) || no_spawner_here(), "{:?}", spawner::refused());
        spawner::tests::REFUSE.store(true, std::sync::atomic::Ordering::Relaxed);
        let fallback = confined_state(&sandbox, &ws, &outside).await;
        spawner::tests::REFUSE.store(false, std::sync::atomic::Ordering::Relaxed);
        // The refusal gave `clone3` up (EINVAL); the next tests take it again.
        clone3::force_classic(false);
        let (pid, by_caller) = fallback;
        assert!(!spawner::tests::started_by_it(pid), "the spawner refused it");
        assert_eq!(by_caller, by_thread, "the same state, cloned by the spawner or by its caller");
    }

    /// Is there, as only a machine without cgroups or clone3 may lack, no
    /// spawner thread's child to look at?
    fn no_spawner_here() -> bool {
        let why = (spawner::refused(), cgroup::refused(), clone3::usable());
        eprintln!("no spawner thread's child here ({why:?}): nothing to compare");
        why.0.is_some() || why.1.is_some() || !why.2
    }

    #[test]
    fn two_threads_start_confined_children_at_once_each_its_own() {
        let _lock = cgroup_thread::test_lock();
        let root = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
        let (ws, _, _namespaces, sandbox) = confined_to(root.path());
        let argv = strings(&["sh", "-c", "echo $$"]);
        let each = |_| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let mut pids = Vec::new();
                for _ in 0..24 {
                    let child = spawn(spec(&argv, &ws, &sandbox)).unwrap();
                    let pid = child.id();
                    let (status, out, err) = output(child).await;
                    assert!(status.success(), "{err}");
                    assert_eq!(out.trim(), pid.to_string(), "its own pid, its own output");
                    pids.push(pid);
                }
                pids
            })
        };
        let pids: Vec<u32> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..2).map(|i| scope.spawn(move || each(i))).collect();
            threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
        });
        let distinct: std::collections::HashSet<u32> = pids.iter().copied().collect();
        assert_eq!(distinct.len(), pids.len(), "{pids:?}");
        let by_spawner = pids.iter().filter(|&&p| spawner::tests::started_by_it(p)).count();
        assert!(by_spawner == pids.len() || no_spawner_here(), "{by_spawner} of {}", pids.len());
    }

    #[tokio::test]
    async fn only_stdio_is_inherited() {
        let file = tempfile::tempfile().unwrap();
        // SAFETY: fcntl on a descriptor we own: inheritable, as a careless
        // library might leave one.
        assert_eq!(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0) }, 0);
        let fd = file.as_raw_fd();
        let (status, out, err) = output(sh(&format!("test -e /proc/$$/fd/{fd} && echo open || echo closed"))).await;
        assert!(status.success(), "{err}");
        assert_eq!(out, "closed\n", "descriptor {fd} leaked into the child");
        // The same probe sees a descriptor that is meant to be there.
        let (_, out, _) = output(sh("test -e /proc/$$/fd/2 && echo open || echo closed")).await;
        assert_eq!(out, "open\n");
    }

    #[tokio::test]
    async fn the_program_is_found_as_execvp_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        let none = Sandbox::disabled();
        // In the env's PATH, after a missing folder and a non-executable file of the same name.
        let (bin, noexec) = (dir.path().join("bin"), dir.path().join("noexec"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&noexec).unwrap();
        std::fs::write(noexec.join("hello"), "#!/bin/sh\necho wrong\n").unwrap();
        // No `#!`: run with /bin/sh, as execvp does.
        std::fs::write(bin.join("hello"), "echo hello \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("hello"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = strings(&["hello", "a b"]);
        let mut s = spec(&argv, dir.path(), &none);
        let path = format!("{0}/absent:{0}/noexec:{0}/bin", dir.path().display());
        s.env.push(("PATH".into(), path.into()));
        let (status, out, _) = output(spawn(s).unwrap()).await;
        assert!(status.success());
        assert_eq!(out, "hello a b\n");

        let missing = strings(&["no-such-program-here"]);
        let e = spawn(spec(&missing, dir.path(), &none)).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let refused = strings(&[noexec.join("hello").to_str().unwrap()]);
        let e = spawn(spec(&refused, dir.path(), &none)).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        let gone = dir.path().join("gone");
        let e = spawn(spec(&strings(&["true"]), &gone, &none)).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "a missing working folder: {e}");
    }

    fn program(dir: &Path, name: &str, says: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), format!("#!/bin/sh\necho {says}\n")).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// What `prog` prints when started under `path`, or the spawn's error.
    async fn run_under(prog: &str, path: &str, cwd: &Path) -> io::Result<String> {
        let argv = strings(&[prog]);
        let none = Sandbox::disabled();
        let mut s = spec(&argv, cwd, &none);
        s.env.push(("PATH".into(), path.into()));
        Ok(output(spawn(s)?).await.1)
    }

    #[tokio::test]
    async fn the_file_found_is_remembered_and_searched_again_once_it_fails() {
        let dir = tempfile::tempdir().unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|d| dir.path().join(d));
        let path = format!("{}:{}:{}", a.display(), b.display(), c.display());
        program(&a, "prog", "a", 0o644); // not executable: skipped, as execvp does
        program(&b, "prog", "b", 0o755);
        assert_eq!(run_under("prog", &path, dir.path()).await.unwrap(), "b\n", "found in the second folder");
        let remembered = search::Program::new("prog", Some(path.as_bytes())).unwrap();
        assert_eq!(remembered.found, Some(1), "the second candidate executed");
        // Made executable since, the earlier file is not seen while the
        // remembered one executes (a shell's command hash does the same).
        program(&a, "prog", "a", 0o755);
        assert_eq!(run_under("prog", &path, dir.path()).await.unwrap(), "b\n");
        // The remembered file gone: the whole search again.
        std::fs::remove_file(b.join("prog")).unwrap();
        program(&c, "prog", "c", 0o755);
        assert_eq!(run_under("prog", &path, dir.path()).await.unwrap(), "a\n");
        // Refused, and nothing else to run: EACCES, as execvp reports it,
        // each time.
        program(&a, "prog", "a", 0o644);
        std::fs::remove_file(c.join("prog")).unwrap();
        for _ in 0..2 {
            let e = run_under("prog", &path, dir.path()).await.err().unwrap();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        }
        assert_eq!(search::Program::new("prog", Some(path.as_bytes())).unwrap().found, None);
        let e = run_under("prog", &format!("{}", c.display()), dir.path()).await.err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        // A name with a `/` is not searched: relative to the working folder.
        program(&c, "prog", "c", 0o755);
        assert_eq!(run_under("c/prog", &path, dir.path()).await.unwrap(), "c\n");
        assert_eq!(run_under("./prog", &path, &c).await.unwrap(), "c\n");
        let e = run_under("b/prog", &path, dir.path()).await.err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        let _lock = cgroup_thread::test_lock();
        // PR_SET_PDEATHSIG: when the starting thread (the engine's runtime
        // thread) ends, for instance because the engine was SIGKILLed, the
        // provider is killed.
        let pid = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async { sh("sleep 30").id() as i32 })
        })
        .join()
        .unwrap();
        let start = std::time::Instant::now();
        while !crate::test_support::gone(pid) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(crate::test_support::gone(pid), "{pid} outlived the thread that started it");
        tidy();
    }

    #[tokio::test]
    #[allow(clippy::await_holding_lock)] // a test's, on its one thread
    async fn a_child_runs_in_its_cgroup_started_there_or_moving_in() {
        let _lock = cgroup_thread::test_lock();
        let dir = std::env::current_dir().unwrap();
        let none = Sandbox::disabled();
        let argv = strings(&["cat", "/proc/self/cgroup"]);
        // The classic path (the child's own write to `cgroup.procs`), then
        // `clone3(CLONE_INTO_CGROUP)` where the kernel has it.
        for classic in [true, false] {
            clone3::force_classic(classic);
            let child = spawn(spec(&argv, &dir, &none)).unwrap();
            let Some(cg) = child.cgroup().map(Path::to_path_buf) else {
                eprintln!("no cgroup can be made here ({:?}): nothing to check", cgroup::refused());
                clone3::force_classic(false);
                return;
            };
            let (status, out, err) = output(child).await;
            assert!(status.success(), "{err}");
            let own = out.lines().find_map(|l| l.strip_prefix("0::")).expect("a cgroup v2 line");
            let name = cg.file_name().unwrap().to_str().unwrap();
            assert!(own.ends_with(&format!("/{name}")), "classic {classic}: the child ran in {own}, not in {name}");
            tidy();
            assert!(!cg.exists(), "its cgroup is removed once it exited, was waited for and tidied");
        }
        if !clone3::usable() {
            eprintln!("this kernel refused clone3(CLONE_INTO_CGROUP): both rounds took the classic path");
        }
    }

    #[tokio::test]
    async fn the_start_time_known_from_the_clock_is_the_one_proc_gives() {
        // Each child waits on its stdin, so its `/proc/PID/stat` is read
        // while it runs; every start time taken from the clock must equal
        // it (recovery compares them for equality).
        let dir = std::env::current_dir().unwrap();
        let none = Sandbox::disabled();
        let cat = strings(&["cat"]);
        let mut from_clock = 0;
        for _ in 0..200 {
            let mut child = spawn(Spec { piped_stdin: true, ..spec(&cat, &dir, &none) }).unwrap();
            let read = crate::process::ProcessId::leader(child.id()).unwrap().start_time;
            if let Some(ticks) = child.start_ticks {
                assert_eq!(ticks, read, "pid {}", child.id());
                from_clock += 1;
            }
            assert_eq!(child.start_time(), Some(read));
            drop(child.stdin.take());
            assert!(output(child).await.0.success());
        }
        assert!(from_clock > 0, "no spawn's start time came from the clock");
    }

    #[tokio::test]
    #[allow(clippy::await_holding_lock)] // a test's, on its one thread
    async fn a_reaped_childs_cgroup_is_removed_only_once_nothing_runs_in_it() {
        let _lock = cgroup_thread::test_lock();
        let mut child = sh("sleep 30 & echo $!; exec cat");
        let Some(cg) = child.cgroup().map(Path::to_path_buf) else {
            eprintln!("no cgroup can be made here ({:?}): nothing to check", cgroup::refused());
            return;
        };
        assert!(!child.remove_cgroup_if_ended(), "not reaped yet: it runs");
        let mut line = String::new();
        let mut out = child.stdout.take().unwrap();
        let mut byte = [0u8; 1];
        while !line.ends_with('\n') {
            assert_eq!(out.read(&mut byte).await.unwrap(), 1);
            line.push(byte[0] as char);
        }
        let sleeper: i32 = line.trim().parse().unwrap();
        drop(child.stdin.take());
        assert!(child.wait().await.unwrap().success());
        assert!(!child.remove_cgroup_if_ended() && cg.exists(), "its descendant still runs in it");
        assert!(child.cgroup().is_some());
        // SAFETY: plain syscall on a pid this test started (it runs).
        assert_eq!(unsafe { libc::kill(sleeper, libc::SIGKILL) }, 0);
        assert!(crate::test_support::wait_gone(sleeper, Duration::from_secs(5)).await);
        let start = std::time::Instant::now();
        while !child.remove_cgroup_if_ended() && start.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(child.cgroup().is_none() && !cgroups().contains_key(&child.id()));
        drop(child);
        tidy();
        assert!(!cg.exists(), "emptied: removed, by the cgroup thread or by `tidy` after its pass");
    }

    #[tokio::test]
    #[allow(clippy::await_holding_lock)] // a test's, on its one thread
    async fn each_spawn_takes_a_fresh_cgroup_made_ahead_and_tidy_leaves_none() {
        let _lock = cgroup_thread::test_lock();
        let (dir, none) = (std::env::current_dir().unwrap(), Sandbox::disabled());
        let argv = strings(&["true"]);
        let mut given = Vec::new();
        for _ in 0..12 {
            let child = spawn(spec(&argv, &dir, &none)).unwrap();
            let Some(cg) = child.cgroup().map(Path::to_path_buf) else {
                eprintln!("no cgroup can be made here ({:?}): nothing to check", cgroup::refused());
                return;
            };
            assert!(!given.contains(&cg), "{} given to two spawns", cg.display());
            given.push(cg);
            let mut child = child;
            assert!(output_of(&mut child).await.success());
            cgroup_thread::settle();
            // Under the lock: none of them can be given to a spawn meanwhile.
            cgroup_thread::each_ready(|ready| {
                assert!(!given.iter().any(|g| g == ready), "{} made ahead again after it was given", ready.display());
                assert!(cgroup::check_ours(ready).is_ok() && !cgroup::populated(ready), "made ahead, empty");
            });
        }
        cgroup_thread::settle();
        let mut ahead = Vec::new();
        cgroup_thread::each_ready(|ready| ahead.push(ready.to_path_buf()));
        assert!(!ahead.is_empty(), "the thread made the next cgroups ahead");
        tidy();
        for cg in given.iter().chain(&ahead) {
            assert!(!cg.exists(), "{} left after tidy", cg.display());
        }
    }

    /// Drain and wait, keeping the child (its cgroup then ends as a reap
    /// finds it).
    async fn output_of(child: &mut Child) -> ExitStatus {
        let (mut o, mut e) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (_, _, status) = tokio::join!(o.read_to_end(&mut out), e.read_to_end(&mut err), child.wait());
        let status = status.unwrap();
        assert!(child.remove_cgroup_if_ended(), "`true` leaves nothing running");
        status
    }

    #[tokio::test]
    async fn a_child_flooding_its_output_lets_the_engines_thread_run_and_its_timeout_fire() {
        // `yes` keeps the pipe full and each read takes a little: no read
        // finds it empty, so it is never registered; its reads must still
        // spend the task's budget (a current-thread runtime, as the
        // engine's), or the drain never yields and a timeout never fires.
        let mut child = sh("exec yes");
        let mut out = child.stdout.take().unwrap();
        // Once `yes` waits on its full pipe, no read can find it empty.
        let wchan = format!("/proc/{}/wchan", child.id());
        for _ in 0..500 {
            if std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("pipe_write")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
        let mut chunk = Vec::with_capacity(16);
        let mut reads = 0;
        while !ran.load(std::sync::atomic::Ordering::SeqCst) && reads < 10_000 {
            chunk.clear();
            assert!(out.read_buf(&mut chunk).await.unwrap() > 0);
            reads += 1;
        }
        assert!(ran.load(std::sync::atomic::Ordering::SeqCst), "{reads} reads and the drain never yielded");
        assert!(!out.watched(), "the pipe was never found empty (else it was waited for by readiness)");
        // The engine's shape: a drain under a timeout is reported timed out
        // (the cap only ends a drain that would never yield).
        let drain = async {
            for _ in 0..1_000_000 {
                chunk.clear();
                out.read_buf(&mut chunk).await.unwrap();
            }
        };
        assert!(tokio::time::timeout(Duration::from_millis(20), drain).await.is_err(), "the drain outran its timeout");
        // SAFETY: plain syscall on a pid this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        assert!(!child.wait().await.unwrap().success());
    }

    #[tokio::test]
    async fn a_pipe_is_registered_with_the_reactor_only_once_a_read_finds_it_empty() {
        // Written and ended before the first read: read to its end without
        // a registration (no `epoll_ctl`). Another test's child, cloned
        // from this process before its exec, may briefly hold a copy of
        // the pipe's write end: then the end is not seen at once and the
        // pipe is rightly registered. So a few tries, one of which must
        // read to the end unregistered.
        let mut unregistered = false;
        for _ in 0..5 {
            let mut child = sh("printf early; printf err >&2");
            drop(child.stdin.take());
            assert!(child.wait().await.unwrap().success());
            let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            let (mut o, mut e) = (String::new(), String::new());
            out.read_to_string(&mut o).await.unwrap();
            err.read_to_string(&mut e).await.unwrap();
            assert_eq!((o.as_str(), e.as_str()), ("early", "err"));
            unregistered = !out.watched() && !err.watched();
            if unregistered {
                break;
            }
        }
        assert!(unregistered, "read without waiting: never registered");
        // Empty at the first read: registered, and what comes later is read.
        let mut child = sh("read line; printf 'late %s' \"$line\"");
        let mut out = child.stdout.take().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut byte = [0u8; 1];
        let waited = tokio::time::timeout(Duration::from_millis(50), out.read(&mut byte)).await;
        assert!(waited.is_err(), "nothing written yet");
        assert!(out.watched(), "an empty pipe is waited for by readiness");
        tokio::io::AsyncWriteExt::write_all(&mut stdin, b"one\n").await.unwrap();
        drop(stdin);
        let mut text = String::new();
        out.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "late one");
        assert!(child.wait().await.unwrap().success());
    }

    /// The pid a pidfd names (`/proc/self/fdinfo`).
    fn pid_of_pidfd(fd: &OwnedFd) -> Option<u32> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
        info.lines().find_map(|l| l.strip_prefix("Pid:")).and_then(|p| p.trim().parse().ok())
    }

    /// Block until `pid` exited, without reaping it (`WNOWAIT`).
    fn exited_unreaped(pid: u32) {
        // SAFETY: a local siginfo; `WNOWAIT` leaves the child a zombie.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
    }

    #[tokio::test]
    #[allow(clippy::await_holding_lock)] // a test's, on its one thread
    async fn a_child_started_by_clone3_comes_with_its_pidfd_and_a_wait_without_a_look_reaps_it() {
        let _lock = cgroup_thread::test_lock();
        for classic in [false, true] {
            clone3::force_classic(classic);
            // Still running when waited for: its exit is seen by the pidfd.
            let mut child = sh("read line; exit 0");
            let cloned = match &child.pidfd {
                Pidfd::Cloned(fd) => {
                    assert_eq!(pid_of_pidfd(fd), Some(child.id()), "the clone's pidfd names the child");
                    true
                }
                Pidfd::NotYet => false,
                _ => panic!("a pidfd registered before any wait"),
            };
            if !classic && child.cgroup().is_some() && clone3::usable() {
                assert!(cloned, "clone3 started it: the clone made its pidfd");
            }
            assert!(!(classic && cloned), "the classic path makes no pidfd");
            drop(child.stdin.take());
            let waited = tokio::time::timeout(Duration::from_secs(30), child.wait_for_exit(false)).await;
            assert!(waited.expect("its exit seen").unwrap().success());
            // Exited (a zombie) before the wait: the registration that
            // comes after the exit still reports it.
            let mut child = sh("exit 3");
            exited_unreaped(child.id());
            let waited = tokio::time::timeout(Duration::from_secs(30), child.wait_for_exit(false)).await;
            assert_eq!(waited.expect("an exit before the registration seen").unwrap().code(), Some(3));
            // SAFETY: plain syscall: no child of that pid is left to reap.
            let left = unsafe { libc::waitpid(child.id() as i32, std::ptr::null_mut(), libc::WNOHANG) };
            assert!(child.reaped() && left == -1, "reaped by the wait");
            assert_eq!(child.wait().await.unwrap().code(), Some(3), "the status is kept");
        }
        clone3::force_classic(false);
        tidy();
    }

    #[tokio::test]
    async fn a_dropped_child_is_reaped_later() {
        let pid = sh("exit 0").id();
        let start = std::time::Instant::now();
        while !crate::test_support::gone(pid as i32) && start.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A zombie now; the next spawn reaps it.
        let (status, _, _) = output(sh("true")).await;
        assert!(status.success());
        // SAFETY: signal 0 only checks for existence.
        assert_ne!(unsafe { libc::kill(pid as i32, 0) }, 0, "{pid} is still a zombie");
    }
}
