//! Provider processes beyond one call: who they are (pid, process group and
//! start time, so a pid reused later is never taken for one; and the cgroup
//! their whole tree runs in, [`cgroup`]), and how a later engine ends the
//! ones a dead engine left running. (How one dies with the engine that
//! started it: `PR_SET_PDEATHSIG`, set by the child in `crate::spawn`. The
//! signal fires when the *thread* that spawned the child exits: the engine
//! spawns providers from its runtime's one thread, the thread that runs the
//! whole command, and confined ones started by `clone3` into their cgroup
//! from the providers' spawner thread, which lives as long as the engine
//! (`crate::spawn::spawner`), so that is when the engine exits. Only the direct child
//! is covered; what it started is ended by the next engine through the
//! recorded cgroup — every descendant, `setsid` or not — or, where there
//! was none, the recorded process group, `end_groups`.)
//!
//! Linux: identities come from `/proc/PID/stat` (a process this engine
//! spawns: from the clock around its `clone` where that names one tick,
//! [`clock`]); signals go through a pidfd
//! where the kernel has them, so a process that exits between the check
//! and the signal cannot be replaced by another one in between.

pub mod adopted;
pub mod cgroup;
pub(crate) mod clock;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A provider process as recorded at dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: u32,
    /// Its process group: the provider's own (the leader's pid), holding
    /// every process it started that did not leave the group.
    pub pgid: u32,
    /// Clock ticks after boot (`/proc/PID/stat` field 22).
    pub start_time: u64,
    /// The cgroup its whole tree runs in (none where the engine could not
    /// make one: then its process group and `marker` are what is tracked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
    /// Without a cgroup: the environment entries its call's processes
    /// carry (`adopted::marker`), which find a descendant that left the
    /// group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
}

impl ProcessId {
    /// The leader of a group just spawned with `process_group(0)`, its
    /// start time read from `/proc/PID/stat`.
    pub fn leader(pid: u32) -> Option<ProcessId> {
        Some(ProcessId::started(pid, stat(pid)?.start_time))
    }

    /// The leader of a group just spawned, started at `start_time` (as
    /// `crate::spawn::Child::start_time` knows it).
    pub fn started(pid: u32, start_time: u64) -> ProcessId {
        ProcessId { pid, pgid: pid, start_time, cgroup: None, marker: None }
    }

    /// The same process, its tree in `cgroup`, or (without one) marked
    /// by `marker`.
    pub fn tracked(self, cgroup: Option<PathBuf>, marker: String) -> ProcessId {
        let marker = cgroup.is_none().then_some(marker);
        ProcessId { cgroup, marker, ..self }
    }

    /// Without a cgroup: its tree as its marker finds it.
    pub fn marked(&self) -> Option<adopted::Marked> {
        match (&self.cgroup, &self.marker) {
            (None, Some(m)) => {
                Some(adopted::Marked { leader: self.pid, start_time: self.start_time, marker: m.clone() })
            }
            _ => None,
        }
    }

    /// Without a cgroup: the processes of its tree its marker finds.
    fn adopted(&self) -> Vec<u32> {
        self.marked().map(|m| m.tree(&crate::spawn::is_spawned)).unwrap_or_default()
    }

    /// Its recorded cgroup, when it is one the engine made.
    fn own_cgroup(&self) -> Option<&std::path::Path> {
        self.cgroup.as_deref().filter(|c| cgroup::check_ours(c).is_ok())
    }
}

/// The fields of `/proc/PID/stat` this module reads.
#[derive(Debug, Clone, Copy)]
struct Stat {
    state: char,
    ppid: u32,
    pgrp: u32,
    start_time: u64,
    /// A kernel thread (`PF_KTHREAD` in field 9): no memory, no
    /// environment, never a provider's.
    kernel_thread: bool,
}

/// `PF_KTHREAD` (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

fn stat(pid: u32) -> Option<Stat> {
    let mut buf = [0u8; STAT_BYTES_MAX];
    let text = read_small(&format!("/proc/{pid}/stat"), &mut buf)?;
    // The command name (field 2) may hold spaces and ')'; fields after the
    // last ')' are fixed: 3 state, 4 ppid, 5 pgrp, 9 flags, 22 starttime.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
        kernel_thread: fields.get(6)?.parse::<u64>().ok()? & PF_KTHREAD != 0,
    })
}

/// `/proc/PID/stat` is one line of 52 numbers and a name of at most 64
/// bytes; 1 KiB holds it (a longer one is refused, not cut).
const STAT_BYTES_MAX: usize = 1024;

/// A small file read whole into `buf`: an `open`, a `read` (a `/proc` file
/// is made whole at its first read), another only if the first one filled
/// the buffer, and a `close`; `None` if it does not fit or is not UTF-8.
fn read_small<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b str> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut len = 0;
    loop {
        let n = file.read(buf.get_mut(len..)?).ok()?;
        len += n;
        if n == 0 || buf.get(len - 1) == Some(&b'\n') {
            break;
        }
        if len == buf.len() {
            return None;
        }
    }
    std::str::from_utf8(buf.get(..len)?).ok()
}

/// What ending one recorded group found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum GroupEnd {
    /// Nothing of the group runs any more.
    NotRunning,
    /// These processes were signalled and are gone; `killed`: SIGTERM was
    /// not enough within the grace, SIGKILL followed.
    Ended { pids: Vec<u32>, killed: bool },
    /// The recorded pid belongs to another process now (another start
    /// time): the group is long gone, and nothing was signalled.
    Reused { pid: u32, start_time: u64 },
    /// Signalled with SIGKILL and still there (e.g. stuck in the kernel).
    StillRunning { pids: Vec<u32> },
}

/// How long `end_groups` waits for the SIGKILLed to be gone.
const KILL_WAIT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);

/// End each recorded group: SIGTERM to its members, up to `grace` for them
/// to exit, then SIGKILL to whatever is left, and its cgroup removed once
/// empty. A member is a live process in the recorded cgroup (every
/// descendant of the provider, `setsid` or not), or in the recorded process
/// group and started no earlier than the recorded leader. If the leader's
/// pid now names a process with another start time, the process group is
/// not touched (the cgroup, which only this tree was ever in, still is).
pub fn end_groups(groups: &[ProcessId], grace: Duration) -> Vec<GroupEnd> {
    let reused: Vec<Option<GroupEnd>> = groups.iter().map(reused).collect();
    let by_group = |i: usize| reused[i].is_none();
    let mut signalled: Vec<Vec<u32>> =
        groups.iter().enumerate().map(|(i, g)| signal_tree(g, libc::SIGTERM, by_group(i))).collect();
    let live = |i: usize, g: &ProcessId| running(g, by_group(i));
    wait_until(grace, || groups.iter().enumerate().all(|(i, g)| !live(i, g)));
    let mut killed = vec![false; groups.len()];
    for (i, g) in groups.iter().enumerate() {
        if live(i, g) {
            signalled[i].extend(signal_tree(g, libc::SIGKILL, by_group(i)));
            if let Some(c) = g.own_cgroup() {
                cgroup::kill(c, Duration::ZERO);
            }
            killed[i] = true;
        }
    }
    wait_until(KILL_WAIT, || groups.iter().enumerate().all(|(i, g)| !live(i, g)));
    let mut ends = Vec::with_capacity(groups.len());
    for (i, g) in groups.iter().enumerate() {
        let left = members(g, by_group(i));
        if left.is_empty() {
            if let Some(c) = g.own_cgroup() {
                cgroup::remove(c, KILL_WAIT);
            }
        }
        let mut pids = std::mem::take(&mut signalled[i]);
        pids.sort_unstable();
        pids.dedup();
        ends.push(match &reused[i] {
            _ if !left.is_empty() => GroupEnd::StillRunning { pids: left },
            Some(r) if pids.is_empty() => r.clone(),
            _ if pids.is_empty() => GroupEnd::NotRunning,
            _ => GroupEnd::Ended { pids, killed: killed[i] },
        });
    }
    ends
}

/// Send `signal` to every live member of a tree this engine started and
/// still watches (a person stopped the run); the pids signalled. A member
/// is checked through a pidfd like `end_groups`' are, so a pid reused
/// since is never signalled.
pub fn signal_group(g: &ProcessId, signal: i32) -> Vec<u32> {
    signal_tree(g, signal, true)
}

/// Does any member of the tree still run?
pub fn group_running(g: &ProcessId) -> bool {
    running(g, true)
}

/// SIGKILL a whole tree this engine started and watches: its cgroup (every
/// descendant) and its process group.
pub fn kill_tree(pgid: u32, cgroup: Option<&std::path::Path>) {
    if let Some(c) = cgroup {
        cgroup::kill(c, Duration::ZERO);
    }
    // SAFETY: plain syscall. Negative pid = the whole process group.
    unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
}

/// `Some(Reused)` when the recorded pid is in use by another process.
fn reused(g: &ProcessId) -> Option<GroupEnd> {
    let s = stat(g.pid)?;
    (s.start_time != g.start_time).then_some(GroupEnd::Reused { pid: g.pid, start_time: s.start_time })
}

fn is_member(g: &ProcessId, s: &Stat) -> bool {
    s.pgrp == g.pgid && s.start_time >= g.start_time && s.state != 'Z' && s.state != 'X'
}

/// Does anything of the tree run: its cgroup populated, or (`by_group`) a
/// member of its process group alive?
fn running(g: &ProcessId, by_group: bool) -> bool {
    g.own_cgroup().is_some_and(cgroup::populated)
        || (by_group && !group_members(g).is_empty())
        || !g.adopted().is_empty()
}

/// The tree's live members: its cgroup's, and (`by_group`) its process
/// group's, by a scan of `/proc`.
fn members(g: &ProcessId, by_group: bool) -> Vec<u32> {
    let mut all = g.own_cgroup().map(cgroup::pids).unwrap_or_default();
    if by_group {
        all.extend(group_members(g));
    }
    all.extend(g.adopted());
    all.sort_unstable();
    all.dedup();
    all
}

fn group_members(g: &ProcessId) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|s| is_member(g, &s)))
        .collect()
}

/// Signal each member of the cgroup and (`by_group`) of the process group,
/// each checked again once the process is pinned.
fn signal_tree(g: &ProcessId, signal: i32, by_group: bool) -> Vec<u32> {
    let mut sent = g.own_cgroup().map(|c| cgroup::signal(c, signal)).unwrap_or_default();
    if let (libc::SIGKILL, Some(c)) = (signal, g.own_cgroup()) {
        // And what forked since the list was read: the kernel ends the
        // whole cgroup at once.
        cgroup::kill(c, Duration::ZERO);
    }
    if by_group {
        sent.extend(group_members(g).into_iter().filter(|&pid| signal_if(pid, signal, |s| is_member(g, s))));
    }
    if let Some(m) = g.marked() {
        sent.extend(
            m.tree(&crate::spawn::is_spawned).into_iter().filter(|&pid| signal_pinned(pid, signal, || m.holds(pid))),
        );
    }
    sent.sort_unstable();
    sent.dedup();
    sent
}

/// Send `signal` to `pid` only if it (still) passes `check`.
fn signal_if(pid: u32, signal: i32, check: impl Fn(&Stat) -> bool) -> bool {
    signal_pinned(pid, signal, || stat(pid).is_some_and(|s| check(&s)))
}

/// Send `signal` to `pid` only if `check` passes once the process is
/// pinned. With a pidfd the check and the signal concern the same process:
/// if it exits after the check, the signal fails rather than reaching
/// whoever gets the pid.
fn signal_pinned(pid: u32, signal: i32, check: impl Fn() -> bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscalls on integers; the fd is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
        if fd >= 0 {
            let sent = check()
                // SAFETY: a pidfd we own; no siginfo.
                && unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd, signal, std::ptr::null::<u8>(), 0) } == 0;
            // SAFETY: closing the fd opened above.
            unsafe { libc::close(fd) };
            return sent;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return false; // gone
        }
    }
    // SAFETY: plain syscall; the check just passed.
    check() && unsafe { libc::kill(pid as libc::pid_t, signal) } == 0
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() && start.elapsed() < limit {
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn group_leader(script: &str) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        Command::new("sh").args(["-c", script]).process_group(0).stdout(Stdio::piped()).spawn().unwrap()
    }

    fn read_pid(child: &mut std::process::Child) -> u32 {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        line.trim().parse().unwrap()
    }

    #[test]
    fn a_group_is_ended_grandchildren_included() {
        // The leader ignores SIGTERM; its background grandchild does not.
        let mut leader = group_leader("trap '' TERM; sleep 30 & echo $!; wait; sleep 30");
        let grandchild = read_pid(&mut leader);
        let id = ProcessId::leader(leader.id()).unwrap();
        let end = end_groups(std::slice::from_ref(&id), Duration::from_millis(300));
        let _ = leader.wait();
        match &end[0] {
            GroupEnd::Ended { pids, killed } => {
                assert!(pids.contains(&leader.id()) && pids.contains(&grandchild), "{pids:?}");
                assert!(*killed, "the leader ignored SIGTERM");
            }
            other => panic!("{other:?}"),
        }
        assert!(crate::test_support::gone(grandchild as i32));
        assert_eq!(end_groups(&[id], Duration::from_millis(100)), vec![GroupEnd::NotRunning]);
    }

    #[test]
    fn a_reused_pid_is_never_signalled() {
        let mut other = group_leader("echo $$; exec sleep 30");
        let pid = read_pid(&mut other);
        let real = ProcessId::leader(pid).unwrap();
        // The record says an earlier process had this pid.
        let recorded = ProcessId { start_time: real.start_time - 1, ..real.clone() };
        let end = end_groups(&[recorded], Duration::from_millis(100));
        assert_eq!(end, vec![GroupEnd::Reused { pid, start_time: real.start_time }]);
        assert!(!crate::test_support::gone(pid as i32), "the unrelated process still runs");
        let _ = other.kill();
        let _ = other.wait();
    }
}
