//! A cgroup v2 per provider process: the one bookkeeping of a process tree
//! that a process cannot leave. A descendant that calls `setsid` leaves its
//! process group and its session, is re-parented when its parent exits, and
//! still stays in the cgroup its ancestor was started in; `cgroup.kill`
//! (Linux 5.14) ends every process in it at once, and `cgroup.events` says
//! whether any is left.
//!
//! The engine makes them under its own cgroup: the cgroup2 mount is found in
//! `/proc/self/mountinfo` (never assumed: `/sys/fs/cgroup` on a unified
//! system, `/sys/fs/cgroup/unified` on a hybrid one), the engine's place in
//! it in `/proc/self/cgroup`. Each is named `engine-PID-START-N` (the
//! engine's pid and start time, a counter), so a recorded path names one
//! engine's one process tree and nothing else; [`check_ours`] refuses any
//! other path before a later engine kills what it holds.
//!
//! Where one cannot be made (no cgroup2 mount, or no right to make a cgroup
//! beside the engine: an unprivileged user outside a delegated subtree;
//! or `ENGINE_CGROUP=unavailable`, a testing aid), [`parent`] says why,
//! once, and a provider process's tree is tracked as `process::adopted`
//! says, which the recorded process says (a `marker`, no `cgroup`).

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The name every cgroup the engine makes starts with.
const PREFIX: &str = "engine-";

/// `statfs` magic of a cgroup2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// `cgroup.procs` and `cgroup.events` are small; a bound on what is read.
const READ_BYTES_MAX: usize = 1 << 20;

/// How often to look whether a cgroup emptied.
const POLL: Duration = Duration::from_millis(10);

/// The folder this engine makes its cgroups in, or why it has none.
pub fn parent() -> Result<&'static Path, &'static str> {
    static PARENT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PARENT.get_or_init(find_parent).as_ref().map(PathBuf::as_path).map_err(String::as_str)
}

/// The testing aid that runs as if no cgroup could be made (the fallback,
/// `process::adopted`, on a machine that has cgroups): its one value.
pub const TESTING_AID: &str = "ENGINE_CGROUP";
pub const TESTING_AID_VALUE: &str = "unavailable";

fn find_parent() -> Result<PathBuf, String> {
    if std::env::var_os(TESTING_AID).is_some_and(|v| v == TESTING_AID_VALUE) {
        return Err(format!("{TESTING_AID}={TESTING_AID_VALUE}, a testing aid"));
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let (root, mount) = cgroup2_mount(&mountinfo).ok_or_else(|| "no cgroup2 file system is mounted".to_string())?;
    let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| "the engine is in no cgroup v2 (no 0:: line in /proc/self/cgroup)".to_string())?;
    let below = Path::new(path)
        .strip_prefix(&root)
        .map_err(|_| format!("the engine's cgroup {path} is outside the mounted part {}", root.display()))?;
    let dir = mount.join(below);
    sweep(&dir);
    keep_procs_inode(&dir);
    Ok(dir)
}

/// Keep the kernel's inode of `dir`'s `cgroup.procs` in memory for the
/// rest of the process: a descriptor held open (read-only, close-on-exec).
///
/// Why: `clone3(CLONE_INTO_CGROUP)` checks that the caller may write the
/// `cgroup.procs` of the new cgroup and of the common ancestor of the
/// caller's cgroup and the new one (`dir`, the engine's own cgroup, which
/// the cgroups are made in). The check builds the file's inode, and the
/// cgroup file system frees an inode nobody holds at once: each spawn
/// made and freed two inodes (bench/README.md, issue 38's twelfth round).
/// Nothing is lost if the open fails: the kernel builds the inode as before.
fn keep_procs_inode(dir: &Path) {
    static PROCS: OnceLock<Option<fs::File>> = OnceLock::new();
    PROCS.get_or_init(|| fs::File::open(dir.join("cgroup.procs")).ok());
}

/// Every cgroup file system mounted here (`cgroup2` and the v1 `cgroup`
/// hierarchies), by mount point: a process that may write one of them can
/// move itself out of its cgroup. Empty when `/proc/self/mountinfo`
/// cannot be read.
pub fn mounts() -> Vec<PathBuf> {
    fs::read_to_string("/proc/self/mountinfo").map(|m| cgroup_mounts(&m)).unwrap_or_default()
}

fn cgroup_mounts(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            matches!(right.split_whitespace().next()?, "cgroup2" | "cgroup").then_some(())?;
            Some(PathBuf::from(unescape(left.split_whitespace().nth(4)?)))
        })
        .collect()
}

/// The first cgroup2 mount in `mountinfo`: (its root in the hierarchy, its
/// mount point).
fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        Some((PathBuf::from(unescape(fields.get(3)?)), PathBuf::from(unescape(fields.get(4)?))))
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| std::str::from_utf8(d).ok());
        match octal.and_then(|d| u8::from_str_radix(d, 8).ok()) {
            Some(c) if b == b'\\' => {
                out.push(c);
                i += 4;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This engine's name part: `engine-PID-START-`.
fn own_prefix() -> &'static str {
    static OWN: OnceLock<String> = OnceLock::new();
    OWN.get_or_init(|| {
        let pid = std::process::id();
        let start = super::ProcessId::leader(pid).map_or(0, |p| p.start_time);
        format!("{PREFIX}{pid}-{start}-")
    })
}

/// Remove the empty cgroups a dead engine left beside this one (a crash
/// between making one and recording it); never one that holds a process.
fn sweep(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten().take(10_000) {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        let engine = rest.split('-').nth(1).and_then(|s| s.parse::<u64>().ok());
        let alive = super::ProcessId::leader(pid).is_some_and(|p| Some(p.start_time) == engine);
        if !alive {
            let _ = fs::remove_dir(e.path()); // refused (EBUSY) while it holds a process
        }
    }
}

/// Why cgroups were given up on in this process (the first failure to make
/// or join one), if they were.
pub(crate) fn refused() -> Option<&'static String> {
    REFUSED.get()
}

/// Give cgroups up for the rest of this process, for `why`.
pub(crate) fn refuse(why: String) {
    let _ = REFUSED.set(why);
}

static REFUSED: OnceLock<String> = OnceLock::new();

/// Why this engine's provider processes run without a cgroup of their own,
/// or `None` when each gets one: asked once, by making (and removing) one
/// if none was made yet.
pub fn unavailable() -> Option<String> {
    if let Err(why) = parent() {
        return Some(why.to_owned());
    }
    if let Some(why) = refused() {
        return Some(why.clone());
    }
    match Cgroup::create() {
        Ok(c) => {
            remove(c.path(), Duration::ZERO);
            None
        }
        Err(e) => {
            let why = format!("cannot make a cgroup beside the engine's: {e}");
            refuse(why.clone());
            Some(why)
        }
    }
}

/// A cgroup made for one process tree: its folder, opened, for the child
/// to be started in (`clone3`'s `CLONE_INTO_CGROUP`); its `cgroup.events`,
/// opened when it is made, so that whether its tree ended is one read
/// ([`Cgroup::emptied`]); and its `cgroup.procs`, opened for writing when
/// it is made (so `clone3`'s write check finds the file's inode built),
/// for the child to move itself in before `exec` where `clone3` cannot be
/// used.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    dir: OwnedFd,
    events: OwnedFd,
    procs: OnceLock<OwnedFd>,
}

impl Cgroup {
    /// A new, empty cgroup beside the engine.
    pub fn create() -> io::Result<Cgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let parent = parent().map_err(|why| io::Error::new(io::ErrorKind::Unsupported, why))?;
        loop {
            let path = parent.join(format!("{}{}", own_prefix(), NEXT.fetch_add(1, Ordering::Relaxed)));
            match fs::create_dir(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let opened = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_CLOEXEC | libc::O_DIRECTORY)
                .open(&path)
                .map(OwnedFd::from)
                .and_then(|dir| Ok((open_at(&dir, c"cgroup.events", libc::O_RDONLY)?, dir)));
            let (events, dir) = opened.inspect_err(|_| {
                let _ = fs::remove_dir(&path);
            })?;
            // Opened now (off the spawning thread where the cgroups' thread
            // makes it), it keeps the file's inode for `clone3`'s check
            // (`keep_procs_inode`); where it cannot be, the classic path
            // opens it at its first need, as before.
            let procs = OnceLock::new();
            if let Ok(fd) = open_at(&dir, c"cgroup.procs", libc::O_WRONLY) {
                let _ = procs.set(fd);
            }
            return Ok(Cgroup { path, dir, events, procs });
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder's descriptor, which `clone3` starts a child in.
    pub(crate) fn dir_fd(&self) -> RawFd {
        self.dir.as_raw_fd()
    }

    /// The descriptor a child writes `0` to, to move itself in (opened when
    /// the cgroup was made, else at the first need).
    pub(crate) fn procs_fd(&self) -> io::Result<RawFd> {
        if let Some(fd) = self.procs.get() {
            return Ok(fd.as_raw_fd());
        }
        let fd = open_at(&self.dir, c"cgroup.procs", libc::O_WRONLY)?;
        Ok(self.procs.get_or_init(|| fd).as_raw_fd())
    }

    /// Has every process that was ever in it exited (`populated 0` in its
    /// `cgroup.events`, which counts its descendants' cgroups too)? One
    /// `pread` of the descriptor opened when it was made. It is the count
    /// the kernel's `rmdir` checks before it removes a cgroup
    /// (`cgroup_is_populated`), so it proves what a removal proved (issue
    /// 38's tenth round), without the removal's cost on the caller's
    /// thread; once it says so, nothing of the tree can come back (no
    /// process is left to start one in it). False when it cannot be read.
    pub fn emptied(&self) -> bool {
        let mut buf = [0u8; 128];
        // SAFETY: reads into a local buffer of the length given.
        let n = unsafe { libc::pread(self.events.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let Some(read) = usize::try_from(n).ok().and_then(|n| buf.get(..n)) else { return false };
        says_emptied(read)
    }
}

/// `cgroup.events` says `populated 0` (and so never `populated 1`).
fn says_emptied(events: &[u8]) -> bool {
    events.split(|&b| b == b'\n').any(|line| line == b"populated 0")
}

/// `openat(dir, name, flags | O_CLOEXEC)`.
fn open_at(dir: &OwnedFd, name: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name relative to a folder we hold open.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Refuse a path that is not a cgroup this engine's kind makes: its name
/// must start with `engine-` and it must be a folder of a cgroup2 file
/// system. A later engine checks a recorded path so before it kills what
/// the cgroup holds (a damaged record could name the root cgroup).
pub fn check_ours(path: &Path) -> io::Result<()> {
    let named = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX));
    if !named || !path.is_absolute() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a cgroup the engine made"));
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path and a zeroed struct the kernel fills.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.f_type as i64 != CGROUP2_SUPER_MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not on a cgroup2 file system"));
    }
    Ok(())
}

fn read_small(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    fs::File::open(path)?.take(READ_BYTES_MAX as u64).read_to_string(&mut text)?;
    Ok(text)
}

/// The pids in the cgroup now (none if it is gone).
pub fn pids(path: &Path) -> Vec<u32> {
    read_small(&path.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Does any process remain in it (`populated 1` in `cgroup.events`)? A
/// cgroup that is gone holds none.
pub fn populated(path: &Path) -> bool {
    match read_small(&path.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l.trim() == "populated 1"),
        Err(_) => false,
    }
}

/// End every process in it: `cgroup.kill` where the kernel has it, else
/// SIGKILL to each pid it lists, again until it is empty (bounded by
/// `wait`). Then wait up to `wait` for it to empty. True when it is empty.
pub fn kill(path: &Path, wait: Duration) -> bool {
    let killed = fs::OpenOptions::new().write(true).open(path.join("cgroup.kill")).and_then(|mut f| f.write_all(b"1"));
    let start = Instant::now();
    loop {
        if !populated(path) {
            return true;
        }
        if killed.is_err() {
            signal(path, libc::SIGKILL);
        }
        if start.elapsed() >= wait {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Send `sig` to every process in it; the pids signalled. A process that
/// left the cgroup (it cannot: only by exiting) is not signalled: each pid
/// is pinned by a pidfd and checked to be in it still.
pub fn signal(path: &Path, sig: i32) -> Vec<u32> {
    let member = |pid: u32| {
        read_small(Path::new(&format!("/proc/{pid}/cgroup")))
            .map(|t| t.lines().filter_map(|l| l.strip_prefix("0::")).any(|p| path.ends_with(p.trim_start_matches('/'))))
            .unwrap_or(false)
    };
    pids(path).into_iter().filter(|&pid| super::signal_pinned(pid, sig, || member(pid))).collect()
}

/// Remove an empty cgroup; waits up to `wait` for its last processes to be
/// gone (a killed process leaves it a moment later). True when removed (or
/// already gone).
pub fn remove(path: &Path, wait: Duration) -> bool {
    let start = Instant::now();
    loop {
        match fs::remove_dir(path) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(_) if start.elapsed() < wait => std::thread::sleep(POLL),
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files this process holds open, by the path they name.
    fn open_files() -> Vec<PathBuf> {
        fs::read_dir("/proc/self/fd").unwrap().flatten().filter_map(|e| fs::read_link(e.path()).ok()).collect()
    }

    #[test]
    fn the_cgroup_procs_files_clone3_checks_are_held_open() {
        let Ok(made) = Cgroup::create() else {
            eprintln!("no cgroup can be made here ({:?}): nothing to check", parent().err());
            return;
        };
        let held = open_files();
        let parent = parent().unwrap();
        assert!(held.contains(&parent.join("cgroup.procs")), "the common ancestor's, for the process's life");
        assert!(held.contains(&made.path().join("cgroup.procs")), "the new cgroup's, from its making");
        let procs = made.procs.get().expect("opened when made").as_raw_fd();
        // SAFETY: reads a descriptor's flags.
        let flags = unsafe { libc::fcntl(procs, libc::F_GETFL) };
        assert_eq!(flags & libc::O_ACCMODE, libc::O_WRONLY, "the classic path's child writes it");
        assert_eq!(made.procs_fd().unwrap(), procs, "no second open");
        remove(made.path(), Duration::ZERO);
    }

    #[test]
    fn only_populated_0_says_a_cgroup_emptied() {
        assert!(says_emptied(b"populated 0\nfrozen 0\n"));
        assert!(!says_emptied(b"populated 1\nfrozen 0\n"));
        assert!(!says_emptied(b"frozen 0\n"), "no count: not proven");
        assert!(!says_emptied(b"populated 01\n") && !says_emptied(b""));
    }

    #[test]
    fn every_cgroup_hierarchy_is_found_v1_and_v2() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n\
                      32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
                      50 1 0:40 / /mnt/a\\040b rw - cgroup2 none rw\n";
        let found: Vec<PathBuf> =
            ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified", "/mnt/a b"].map(PathBuf::from).into();
        assert_eq!(cgroup_mounts(hybrid), found);
    }

    #[test]
    fn the_cgroup2_mount_is_found_wherever_it_is() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_mount(hybrid), Some((PathBuf::from("/"), PathBuf::from("/sys/fs/cgroup/unified"))));
        let unified = "30 22 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(cgroup2_mount(unified), Some((PathBuf::from("/"), PathBuf::from("/sys/fs/cgroup"))));
        let spaced = "30 22 0:26 /a\\040b /mnt/c\\134g rw - cgroup2 none rw\n";
        assert_eq!(cgroup2_mount(spaced), Some((PathBuf::from("/a b"), PathBuf::from("/mnt/c\\g"))));
        assert_eq!(cgroup2_mount("31 23 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"), None);
    }

    #[test]
    fn only_a_cgroup_named_by_the_engine_on_a_cgroup2_file_system_is_ours() {
        assert!(check_ours(Path::new("/sys/fs/cgroup")).is_err(), "the root");
        assert!(check_ours(Path::new("engine-1-2-3")).is_err(), "relative");
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("engine-1-2-3");
        fs::create_dir(&fake).unwrap();
        assert!(check_ours(&fake).is_err(), "not a cgroup2 file system");
        if let Ok(cg) = Cgroup::create() {
            check_ours(cg.path()).unwrap();
            assert!(!populated(cg.path()) && pids(cg.path()).is_empty());
            assert!(cg.emptied(), "a new cgroup holds no process");
            assert!(remove(cg.path(), Duration::ZERO));
        }
    }
}
