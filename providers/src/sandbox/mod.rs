//! The sandbox every provider process runs in, applied by the child
//! between its creation and `exec` (`crate::spawn` for provider processes;
//! [`Sandbox::apply`], a `pre_exec` hook, for a `std::process::Command`,
//! which applies the file and network rules only).
//!
//! A provider may read and execute anything the user can (toolchains live in
//! home folders), and write only in the workspace, the temporary folder, a
//! few devices ([`DEVICES`]) and the paths its plan declares. Paths the
//! caller protects (the store's folder) may never be writable; a policy that
//! would make one writable is refused when it is built. Besides the files:
//!
//! - its **network** is what the plan declares ([`network`]): none at all (a
//!   network namespace of the run's, with only a loopback), or TCP to the
//!   declared ports (Landlock);
//! - the **stores** are out of its sight ([`namespaces`]): it joins the run's
//!   mount namespace, where each stores folder is an empty read-only folder;
//! - its **environment** is a minimal set ([`MINIMAL_ENV`]) and the variables
//!   the plan names ([`Sandbox::with_env`]), nothing else of the engine's.
//!
//! Use, in the parent:
//!
//! ```no_run
//! # use providers::sandbox::{Namespaces, Network, Policy};
//! let namespaces = Namespaces::make(&["/home/a/.local/state/engine/stores".into()]); // once per run
//! let policy = Policy::builder("/work/proj").write("~/.npm").protect("/home/a/.local/state/x")
//!     .network(Network::None).build()?;
//! let sandbox = policy.prepare_in(&namespaces)?.with_env(&["NPM_TOKEN".to_string()]); // once per provider and run
//! let record = sandbox.record(); // record it on the attempt
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

mod filter;
pub mod namespaces;
pub mod network;
mod own_environ;
mod policy;
mod privileges;
mod record;
mod rules;
mod status;

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;

pub use namespaces::{Namespaces, NsStatus};
pub use network::{Endpoint, NetBy, NetStatus, Network, Port};
pub use own_environ::hide_engine_environment;
pub use privileges::Privileges;
pub(crate) use privileges::{drop_bounding, drop_privileges, drop_sets, install_filter, last_cap, program, Fprog};

/// A declared write path as the sandbox takes it: `~` expanded to `HOME`,
/// symlinks resolved as far as the path exists (what `PolicyBuilder::build`
/// makes writable), for the engine to judge before it builds a policy.
pub fn declared_path(as_written: &str) -> Result<std::path::PathBuf, PolicyError> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(std::path::PathBuf::from);
    policy::resolve(&policy::expand(as_written, home.as_deref())?)
}

/// `path` with its symlinks resolved as far as it exists.
pub fn resolved(path: &std::path::Path) -> Result<std::path::PathBuf, PolicyError> {
    policy::resolve(path)
}
pub use policy::{Origin, PolicyError, Writable, DEVICES};
pub use record::{AfterOnly, Record, WriteRule, Writes, WritesBy};
pub use status::{kernel, Kernel, Right, Status, Unavailable};

/// The temporary folders a confined process may write by default (the
/// system's, `$TMPDIR`, and `/tmp`), as configured (not resolved).
pub fn temp_dirs() -> Vec<PathBuf> {
    vec![std::env::temp_dir(), PathBuf::from("/tmp")]
}

/// The engine's environment variables every process gets (when the engine
/// has them); any other must be named by the plan (`env`).
pub const MINIMAL_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// The first Landlock ABI with network rules (TCP bind and connect).
const NET_ABI: u32 = 4;

/// What a provider process may write, and what it must never write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    mode: Mode,
}

/// How a process's network is to be restricted, once prepared on a kernel
/// and in a run's namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NetPlan {
    /// Join the run's network namespace.
    namespace: bool,
    /// Landlock's TCP rules: `Some(ports)` handles connect (and bind when
    /// `ports` is empty, no network being declared); `None`: none.
    landlock: Option<Vec<u16>>,
    status: NetStatus,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// The plan says `"sandbox": "none"`.
    Disabled,
    Confined {
        writable: Vec<Writable>,
        protected: Vec<PathBuf>,
        network: Network,
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
            network: Network::None,
            only_beneath: None,
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

    /// What the plan lets this policy's processes connect to (`None` when
    /// disabled: unconfined).
    pub fn network(&self) -> Option<&Network> {
        match &self.mode {
            Mode::Disabled => None,
            Mode::Confined { network, .. } => Some(network),
        }
    }

    /// [`prepare_in`](Policy::prepare_in) without namespaces: no network is
    /// then restricted by Landlock alone, and the stores are not hidden.
    pub fn prepare(&self) -> Result<Sandbox, PolicyError> {
        self.prepare_in(&Namespaces::unavailable("no namespaces were made for this sandbox"))
    }

    /// Make the sandbox ready to apply in a run's `namespaces`: on a kernel
    /// with Landlock, create missing declared folders, refuse a protected
    /// file with a second name (hard link), open every rule's path, check
    /// again what was opened, and build the ruleset (file and network
    /// rules). Allocates; call it in the parent, not per fork.
    pub fn prepare_in(&self, namespaces: &Namespaces) -> Result<Sandbox, PolicyError> {
        self.prepare_on(kernel(), namespaces)
    }

    /// [`prepare_in`](Policy::prepare_in) as if on `kernel`: a testing aid
    /// to show what happens where Landlock is missing (no Landlock rules,
    /// and a status that says so). With `Kernel::Landlock`, the ruleset is
    /// still built for the running kernel; only the reported status follows
    /// `kernel`.
    pub fn prepare_on(&self, kernel: Kernel, namespaces: &Namespaces) -> Result<Sandbox, PolicyError> {
        let status = self.status_on(kernel);
        let Mode::Confined { writable, protected, network } = &self.mode else {
            return Ok(Sandbox::disabled());
        };
        let net = net_plan(network, kernel, namespaces);
        // A namespace holds only while the process cannot leave it: root
        // can (setns through /proc/1/ns, umount) unless Landlock binds it.
        // Without Landlock it still joins them, and the status claims none.
        let unbound = |what: &str| format!("without Landlock a privileged process can leave the {what}");
        let network = match net.status {
            NetStatus::Enforced { .. } if !status.is_confined() => {
                NetStatus::Unavailable { reason: unbound("network namespace") }
            }
            s => s,
        };
        let stores = match namespaces.stores_status() {
            NsStatus::Hidden if !status.is_confined() => NsStatus::Unavailable { reason: unbound("mount namespace") },
            s => s,
        };
        let mut sandbox = Sandbox {
            ruleset: None,
            netns: if net.namespace { namespaces.net_fd() } else { None },
            mntns: namespaces.mnt_fd(),
            env: Arc::new(Vec::new()),
            status,
            network,
            stores,
            privileges: Privileges::here(),
            writes: None,
        };
        if !sandbox.status.is_confined() {
            return Ok(sandbox);
        }
        rules::check_single_names(protected)?;
        for w in writable.iter().filter(|w| matches!(w.origin, Origin::Declared { .. })) {
            std::fs::create_dir_all(&w.path).map_err(|error| PolicyError::Io { path: w.path.clone(), error })?;
        }
        let fd = rules::build(writable, protected, net.landlock.as_deref())?;
        sandbox.ruleset = Some(Arc::new(fd));
        Ok(sandbox)
    }
}

/// How `network` is restricted on `kernel` in `namespaces`: no network by
/// the run's network namespace where there is one, else by Landlock's TCP
/// rules (connect and bind refused); declared ports by Landlock's TCP
/// connect rules; a `*` port restricts nothing.
fn net_plan(network: &Network, kernel: Kernel, namespaces: &Namespaces) -> NetPlan {
    let landlock_abi = match kernel {
        Kernel::Landlock { abi } if abi >= NET_ABI => Ok(abi),
        Kernel::Landlock { abi } => Err(format!("Landlock ABI {abi} has no network rules (ABI 4, Linux 6.7)")),
        Kernel::Unavailable(reason) => Err(reason.to_string()),
    };
    let by_landlock = |ports: Vec<u16>| match &landlock_abi {
        Ok(_) => NetPlan {
            namespace: false,
            landlock: Some(ports.clone()),
            status: NetStatus::Partial { by: NetBy::Landlock, tcp_connect_ports: ports },
        },
        Err(reason) => {
            NetPlan { namespace: false, landlock: None, status: NetStatus::Unavailable { reason: reason.clone() } }
        }
    };
    match network.ports() {
        None => NetPlan { namespace: false, landlock: None, status: NetStatus::Open },
        Some(ports) if !ports.is_empty() => by_landlock(ports),
        Some(_) => match namespaces.net() {
            Ok(_) => NetPlan { namespace: true, landlock: None, status: NetStatus::Enforced { by: NetBy::Namespace } },
            Err(no_namespace) => {
                let mut plan = by_landlock(Vec::new());
                if let NetStatus::Unavailable { reason } = &mut plan.status {
                    // One reason said once (a simulation names itself in both).
                    if !reason.starts_with(no_namespace) {
                        *reason = format!("{no_namespace}; {reason}");
                    }
                }
                plan
            }
        },
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
    network: Network,
    /// `Some`: of the workspace, only these paths are writable (each with
    /// the declared output it serves); `None`: the whole workspace.
    only_beneath: Option<Vec<(PathBuf, String)>>,
}

impl PolicyBuilder {
    /// Of the workspace, only `rules` are writable (absolute paths inside
    /// it, each with the declared `outputs` line it serves): a folder with
    /// everything beneath it, a file in place. The rest of the workspace
    /// is read-only, `.git` and the plan file included. A path that does
    /// not exist or resolves outside the workspace gets no rule (default
    /// deny: Landlock binds a rule to an existing inode).
    pub fn only_beneath(mut self, rules: impl IntoIterator<Item = (PathBuf, String)>) -> Self {
        self.only_beneath = Some(rules.into_iter().collect());
        self
    }

    /// What its processes may connect to (default: nothing).
    pub fn network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

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
        let mut writable = match self.only_beneath {
            None => vec![Writable { path: workspace, origin: Origin::Workspace }],
            Some(rules) => beneath_workspace(&workspace, rules),
        };
        let temp = self.temp.unwrap_or_else(temp_dirs);
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
        Ok(Policy { mode: Mode::Confined { writable, protected, network: self.network } })
    }
}

/// The rules of [`PolicyBuilder::only_beneath`] that exist and lie inside
/// the (resolved) `workspace`, resolved.
fn beneath_workspace(workspace: &std::path::Path, rules: Vec<(PathBuf, String)>) -> Vec<Writable> {
    let mut writable = Vec::new();
    for (path, output) in rules {
        let Ok(path) = path.canonicalize() else { continue };
        if path.starts_with(workspace) && path != workspace {
            push_new(&mut writable, Writable { path, origin: Origin::Output { output } });
        }
    }
    writable
}

fn push_new(writable: &mut Vec<Writable>, w: Writable) {
    if !writable.iter().any(|x| x.path == w.path) {
        writable.push(w);
    }
}

/// A prepared sandbox: the ruleset's descriptor (none when unconfined),
/// the run's namespaces a process joins, the environment it gets, and the
/// statuses to record. Cloning shares the descriptors; one ruleset serves
/// any number of spawns, each child gets its own Landlock domain.
#[derive(Debug, Clone)]
pub struct Sandbox {
    ruleset: Option<Arc<OwnedFd>>,
    /// The run's network namespace, for a process with no network.
    netns: Option<Arc<OwnedFd>>,
    /// The run's mount namespace, where the stores are hidden.
    mntns: Option<Arc<OwnedFd>>,
    /// The variables the plan names, with the engine's values (names it
    /// does not have are left out).
    env: Arc<Vec<(OsString, OsString)>>,
    status: Status,
    network: NetStatus,
    stores: NsStatus,
    /// What its processes keep of the engine's privileges: nothing, unless
    /// the plan opts the provider out.
    privileges: Privileges,
    /// How a task's declared outputs hold its writes in the workspace
    /// (recorded on its attempts); `None` for a provider's or a check's.
    writes: Option<Arc<Writes>>,
}

impl Sandbox {
    /// The sandbox of a provider the plan opts out (`"sandbox": "none"`):
    /// applies nothing, and says so. Its processes still get only the
    /// minimal environment (and what [`with_env`](Sandbox::with_env) adds).
    pub fn disabled() -> Sandbox {
        Sandbox {
            ruleset: None,
            netns: None,
            mntns: None,
            env: Arc::new(Vec::new()),
            status: Status::Disabled,
            network: NetStatus::Disabled,
            stores: NsStatus::Disabled,
            privileges: Privileges::Disabled,
            writes: None,
        }
    }

    /// The same sandbox, recording how a task's declared outputs hold its
    /// writes in the workspace.
    pub fn with_writes(mut self, writes: Writes) -> Sandbox {
        self.writes = Some(Arc::new(writes));
        self
    }

    /// The same sandbox, whose processes also get the engine's `names`
    /// (the plan's `env`), read now; a name the engine does not have is
    /// left out.
    pub fn with_env(mut self, names: &[String]) -> Sandbox {
        let env = names
            .iter()
            .filter(|n| !MINIMAL_ENV.contains(&n.as_str()))
            .filter_map(|n| std::env::var_os(n).map(|v| (OsString::from(n), v)))
            .collect();
        self.env = Arc::new(env);
        self
    }

    /// The files' status (Landlock).
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The network's status.
    pub fn network(&self) -> &NetStatus {
        &self.network
    }

    /// Whether the stores are hidden.
    pub fn stores(&self) -> &NsStatus {
        &self.stores
    }

    /// What its processes keep of the engine's privileges.
    pub fn privileges(&self) -> &Privileges {
        &self.privileges
    }

    /// Do its processes drop every privilege before `exec` (`crate::spawn`)?
    pub(crate) fn drops_privileges(&self) -> bool {
        self.privileges != Privileges::Disabled
    }

    /// Everything to record on an attempt: the files', the network's and
    /// the stores' status, and the names of the variables passed (never
    /// their values).
    pub fn record(&self) -> Record {
        let mut env: Vec<String> =
            MINIMAL_ENV.iter().filter(|n| std::env::var_os(n).is_some()).map(|n| n.to_string()).collect();
        env.extend(self.env.iter().map(|(n, _)| n.to_string_lossy().into_owned()));
        Record {
            files: self.status.clone(),
            network: Some(self.network.clone()),
            stores: Some(self.stores.clone()),
            env: Some(env),
            privileges: Some(self.privileges.clone()),
            writes: self.writes.as_deref().cloned(),
        }
    }

    /// The plan's variables with the engine's values.
    pub(crate) fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The ruleset's descriptor, for a child to restrict itself with
    /// (`crate::spawn`); `None` when nothing is to be applied. Valid while
    /// this sandbox lives.
    pub(crate) fn ruleset_fd(&self) -> Option<RawFd> {
        self.ruleset.as_ref().map(|r| r.as_raw_fd())
    }

    /// The namespaces a child joins: (network, mount).
    pub(crate) fn namespace_fds(&self) -> (Option<RawFd>, Option<RawFd>) {
        (self.netns.as_ref().map(|f| f.as_raw_fd()), self.mntns.as_ref().map(|f| f.as_raw_fd()))
    }

    /// Confine the process `cmd` will start (and everything it starts): a
    /// `pre_exec` hook that restricts the child before `exec` (the file and
    /// network rules; namespaces and the environment are `crate::spawn`'s).
    /// If the kernel refuses, the spawn fails with that error rather than
    /// run unconfined. No-op when the sandbox is disabled or unavailable.
    /// For tokio, pass `cmd.as_std_mut()`.
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
