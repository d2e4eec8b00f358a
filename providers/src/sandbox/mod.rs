//! The sandbox every provider process runs in: Landlock, applied by the
//! child between its creation and `exec` (`crate::spawn` for provider
//! processes; [`Sandbox::apply`], a `pre_exec` hook, for a
//! `std::process::Command`).
//!
//! A provider may read and execute anything the user can (toolchains live in
//! home folders), and write only in the workspace, the temporary folder, a
//! few devices ([`DEVICES`]) and the paths its plan declares. Paths the
//! caller protects (the store's folder) may never be writable; a policy that
//! would make one writable is refused when it is built.
//!
//! Use, in the parent:
//!
//! ```no_run
//! # use providers::sandbox::Policy;
//! let policy = Policy::builder("/work/proj").write("~/.npm").protect("/home/a/.local/state/x").build()?;
//! let sandbox = policy.prepare()?; // once per provider and run; cheap to clone
//! let mut cmd = std::process::Command::new("npm");
//! sandbox.apply(&mut cmd); // tokio: sandbox.apply(cmd.as_std_mut())
//! let status = sandbox.status(); // record it on the attempt
//! # Ok::<(), providers::sandbox::PolicyError>(())
//! ```
//!
//! Why the child makes raw syscalls instead of calling the `landlock`
//! crate's `RulesetCreated::restrict_self`: after `fork` in a multi-threaded
//! parent, only async-signal-safe work is allowed (another thread may have
//! held the allocator's lock at the fork). `restrict_self` consumes the
//! ruleset, so it could run once per built ruleset only, and nothing in the
//! crate promises it never allocates or locks (it is a general API that has
//! grown logging and thread-sync options). So the parent builds the ruleset
//! with the crate and keeps only its file descriptor; the child makes
//! exactly three syscalls, `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`,
//! `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self(fd, 0)`, and
//! builds its error from `errno` without allocating.

mod policy;
mod rules;
mod status;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;

pub use policy::{Origin, PolicyError, Writable, DEVICES};
pub use status::{kernel, Kernel, Right, Status, Unavailable};

/// What a provider process may write, and what it must never write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    mode: Mode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// The plan says `"sandbox": "none"`.
    Disabled,
    Confined {
        writable: Vec<Writable>,
        protected: Vec<PathBuf>,
    },
}

impl Policy {
    /// A confined policy for a provider working in `workspace`.
    pub fn builder(workspace: impl Into<PathBuf>) -> PolicyBuilder {
        PolicyBuilder {
            workspace: workspace.into(),
            temp: None,
            declared: Vec::new(),
            protected: Vec::new(),
            home: None,
        }
    }

    /// No confinement: the plan opted this provider out.
    pub fn disabled() -> Policy {
        Policy { mode: Mode::Disabled }
    }

    /// The writable paths, resolved; empty when disabled.
    pub fn writable(&self) -> &[Writable] {
        match &self.mode {
            Mode::Disabled => &[],
            Mode::Confined { writable, .. } => writable,
        }
    }

    /// The protected paths, resolved; empty when disabled.
    pub fn protected(&self) -> &[PathBuf] {
        match &self.mode {
            Mode::Disabled => &[],
            Mode::Confined { protected, .. } => protected,
        }
    }

    /// The status a process started under this policy gets on this machine.
    pub fn status(&self) -> Status {
        self.status_on(kernel())
    }

    /// The status under this policy on a given kernel.
    pub fn status_on(&self, kernel: Kernel) -> Status {
        match self.mode {
            Mode::Disabled => Status::Disabled,
            Mode::Confined { .. } => kernel.confined_status(),
        }
    }

    /// Make the sandbox ready to apply: on a kernel with Landlock, create
    /// missing declared folders, refuse a protected file with a second name
    /// (hard link), open every rule's path, check again what was opened, and
    /// build the ruleset. Allocates; call it in the parent, not per fork.
    pub fn prepare(&self) -> Result<Sandbox, PolicyError> {
        self.prepare_on(kernel())
    }

    /// [`prepare`](Policy::prepare) as if on `kernel`: a testing aid to show
    /// what happens where Landlock is missing (an unconfined sandbox whose
    /// status says so). With `Kernel::Landlock`, the ruleset is still built
    /// for the running kernel; only the reported status follows `kernel`.
    pub fn prepare_on(&self, kernel: Kernel) -> Result<Sandbox, PolicyError> {
        let status = self.status_on(kernel);
        let Mode::Confined { writable, protected } = &self.mode else {
            return Ok(Sandbox::disabled());
        };
        if !status.is_confined() {
            return Ok(Sandbox { ruleset: None, status });
        }
        rules::check_single_names(protected)?;
        for w in writable.iter().filter(|w| matches!(w.origin, Origin::Declared { .. })) {
            std::fs::create_dir_all(&w.path).map_err(|error| PolicyError::Io { path: w.path.clone(), error })?;
        }
        let fd = rules::build(writable, protected)?;
        Ok(Sandbox { ruleset: Some(Arc::new(fd)), status })
    }
}

/// Builds a confined [`Policy`]; see [`PolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct PolicyBuilder {
    workspace: PathBuf,
    temp: Option<Vec<PathBuf>>,
    declared: Vec<String>,
    protected: Vec<PathBuf>,
    home: Option<PathBuf>,
}

impl PolicyBuilder {
    /// Replace the temporary folders (default: the system's, `$TMPDIR` and
    /// `/tmp`).
    pub fn temp_dirs(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.temp = Some(dirs.into_iter().collect());
        self
    }

    /// A path the plan declares writable, as written: absolute, `~` or
    /// `~/…`. A missing one is created as a folder by `prepare`.
    pub fn write(mut self, as_written: impl Into<String>) -> Self {
        self.declared.push(as_written.into());
        self
    }

    /// A path that must never be writable (it may not exist yet).
    pub fn protect(mut self, path: impl Into<PathBuf>) -> Self {
        self.protected.push(path.into());
        self
    }

    /// The folder `~` expands to (default: `$HOME`).
    pub fn home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// Resolve every path (symlinks followed) and refuse a protected path
    /// that is, contains or lies inside a writable one, naming both.
    pub fn build(self) -> Result<Policy, PolicyError> {
        let home = self.home.or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from));
        let workspace = policy::resolve(&self.workspace)?;
        if !workspace.is_dir() {
            let error = io::Error::new(io::ErrorKind::NotFound, "the workspace is not a folder");
            return Err(PolicyError::Io { path: self.workspace, error });
        }
        let mut writable = vec![Writable { path: workspace, origin: Origin::Workspace }];
        let temp = self.temp.unwrap_or_else(|| vec![std::env::temp_dir(), PathBuf::from("/tmp")]);
        let present = temp.iter().map(|t| (t.clone(), Origin::Temp));
        let devices = DEVICES.iter().map(|d| (PathBuf::from(d), Origin::Device));
        for (path, origin) in present.chain(devices) {
            if let Ok(path) = path.canonicalize() {
                push_new(&mut writable, Writable { path, origin });
            }
        }
        for as_written in self.declared {
            let path = policy::resolve(&policy::expand(&as_written, home.as_deref())?)?;
            push_new(&mut writable, Writable { path, origin: Origin::Declared { as_written } });
        }
        let protected = self.protected.iter().map(|p| policy::resolve(p)).collect::<Result<Vec<_>, _>>()?;
        if let Some((p, w)) = policy::overlap(&writable, &protected) {
            return Err(PolicyError::Overlap { protected: p.clone(), writable: w.clone() });
        }
        Ok(Policy { mode: Mode::Confined { writable, protected } })
    }
}

fn push_new(writable: &mut Vec<Writable>, w: Writable) {
    if !writable.iter().any(|x| x.path == w.path) {
        writable.push(w);
    }
}

/// A prepared sandbox: the ruleset's descriptor (none when unconfined) and
/// the status to record. Cloning shares the descriptor; one ruleset serves
/// any number of spawns, each child gets its own Landlock domain.
#[derive(Debug, Clone)]
pub struct Sandbox {
    ruleset: Option<Arc<OwnedFd>>,
    status: Status,
}

impl Sandbox {
    /// The sandbox of a provider the plan opts out (`"sandbox": "none"`):
    /// applies nothing, and says so.
    pub fn disabled() -> Sandbox {
        Sandbox { ruleset: None, status: Status::Disabled }
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The ruleset's descriptor, for a child to restrict itself with
    /// (`crate::spawn`); `None` when nothing is to be applied. Valid while
    /// this sandbox lives.
    pub(crate) fn ruleset_fd(&self) -> Option<RawFd> {
        self.ruleset.as_ref().map(|r| r.as_raw_fd())
    }

    /// Confine the process `cmd` will start (and everything it starts): a
    /// `pre_exec` hook that restricts the child before `exec`. If the kernel
    /// refuses, the spawn fails with that error rather than run unconfined.
    /// No-op when the sandbox is disabled or unavailable. For tokio, pass
    /// `cmd.as_std_mut()`.
    pub fn apply(&self, cmd: &mut std::process::Command) {
        let Some(ruleset) = self.ruleset.clone() else { return };
        // SAFETY: the hook runs in the forked child before exec. It reads an
        // integer from memory the child already has (no reference count is
        // touched) and makes two syscalls; it neither allocates nor takes a
        // lock, so it is async-signal-safe even in a multi-threaded parent.
        unsafe {
            cmd.pre_exec(move || confine_self(ruleset.as_raw_fd()));
        }
    }
}

/// The child's half. First mark every descriptor above stdio close-on-exec:
/// Landlock checks a file when it is *opened*, so a writable descriptor
/// inherited from the parent (say, a store opened without `O_CLOEXEC` by
/// some library) would pass straight through; the provider starts with its
/// standard input, output and error only (Linux 5.11+; Landlock needs 5.13).
/// Then no new privileges (required by Landlock for an unprivileged caller;
/// it also keeps set-uid programs from escaping), then enforce the ruleset
/// on this process and everything it starts.
fn confine_self(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: plain syscalls on integers; `last_os_error` reads errno and
    // does not allocate. The ruleset descriptor is itself close-on-exec.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
