//! Provider processes beyond one call: who they are (pid, process group and
//! start time, so a pid reused later is never taken for one), and how a
//! later engine ends the ones a dead engine left running. (How one dies
//! with the engine that started it: `PR_SET_PDEATHSIG`, set by the child in
//! `crate::spawn`. The signal fires when the *thread* that spawned the
//! child exits: the engine spawns providers from its runtime's one thread,
//! the thread that runs the whole command, so that is when the engine
//! exits. Only the direct child is covered; what it started is ended by
//! the next engine through the recorded process group, `end_groups`.)
//!
//! Linux: identities come from `/proc/PID/stat`; signals go through a pidfd
//! where the kernel has them, so a process that exits between the check
//! and the signal cannot be replaced by another one in between.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A provider process as recorded at dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: u32,
    /// Its process group: the provider's own (the leader's pid), holding
    /// every process it started that did not leave the group.
    pub pgid: u32,
    /// Clock ticks after boot (`/proc/PID/stat` field 22).
    pub start_time: u64,
}

impl ProcessId {
    /// The leader of a group just spawned with `process_group(0)`.
    pub fn leader(pid: u32) -> Option<ProcessId> {
        Some(ProcessId { pid, pgid: pid, start_time: stat(pid)?.start_time })
    }
}

/// The fields of `/proc/PID/stat` this module reads.
#[derive(Debug, Clone, Copy)]
struct Stat {
    state: char,
    pgrp: u32,
    start_time: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let mut buf = [0u8; STAT_BYTES_MAX];
    let text = read_small(&format!("/proc/{pid}/stat"), &mut buf)?;
    // The command name (field 2) may hold spaces and ')'; fields after the
    // last ')' are fixed: 3 state, 5 pgrp, 22 starttime.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
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
/// to exit, then SIGKILL to whatever is left. A member is a live process
/// in the recorded group, started no earlier than the recorded leader; if
/// the leader's pid now names a process with another start time, the
/// group is not touched at all.
pub fn end_groups(groups: &[ProcessId], grace: Duration) -> Vec<GroupEnd> {
    let mut signalled: Vec<Vec<u32>> = vec![Vec::new(); groups.len()];
    let mut ends: Vec<Option<GroupEnd>> = groups.iter().map(reused).collect();
    for (i, g) in groups.iter().enumerate() {
        if ends[i].is_none() {
            signalled[i] = signal_members(g, libc::SIGTERM);
        }
    }
    let live = |i: usize, g: &ProcessId| ends[i].is_none() && !members(g).is_empty();
    wait_until(grace, || groups.iter().enumerate().all(|(i, g)| !live(i, g)));
    let mut killed = vec![false; groups.len()];
    for (i, g) in groups.iter().enumerate() {
        if live(i, g) {
            signalled[i].extend(signal_members(g, libc::SIGKILL));
            killed[i] = true;
        }
    }
    wait_until(KILL_WAIT, || groups.iter().enumerate().all(|(i, g)| !live(i, g)));
    for (i, g) in groups.iter().enumerate() {
        if ends[i].is_some() {
            continue;
        }
        let left = members(g);
        let mut pids = std::mem::take(&mut signalled[i]);
        pids.sort_unstable();
        pids.dedup();
        ends[i] = Some(if !left.is_empty() {
            GroupEnd::StillRunning { pids: left }
        } else if pids.is_empty() {
            GroupEnd::NotRunning
        } else {
            GroupEnd::Ended { pids, killed: killed[i] }
        });
    }
    ends.into_iter().map(|e| e.unwrap_or(GroupEnd::NotRunning)).collect()
}

/// Send `signal` to every live member of a group this engine started and
/// still watches (a person stopped the run); the pids signalled. A member
/// is checked through a pidfd like `end_groups`' are, so a pid reused
/// since is never signalled.
pub fn signal_group(g: &ProcessId, signal: i32) -> Vec<u32> {
    signal_members(g, signal)
}

/// Does any member of the group still run?
pub fn group_running(g: &ProcessId) -> bool {
    !members(g).is_empty()
}

/// `Some(Reused)` when the recorded pid is in use by another process.
fn reused(g: &ProcessId) -> Option<GroupEnd> {
    let s = stat(g.pid)?;
    (s.start_time != g.start_time).then_some(GroupEnd::Reused { pid: g.pid, start_time: s.start_time })
}

fn is_member(g: &ProcessId, s: &Stat) -> bool {
    s.pgrp == g.pgid && s.start_time >= g.start_time && s.state != 'Z' && s.state != 'X'
}

/// The group's live members, by a scan of `/proc`.
fn members(g: &ProcessId) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|s| is_member(g, &s)))
        .collect()
}

/// Signal each member, checked again once the process is pinned.
fn signal_members(g: &ProcessId, signal: i32) -> Vec<u32> {
    members(g).into_iter().filter(|&pid| signal_if(pid, signal, |s| is_member(g, s))).collect()
}

/// Send `signal` to `pid` only if it (still) passes `check`. With a pidfd
/// the check and the signal concern the same process: if it exits after
/// the check, the signal fails rather than reaching whoever gets the pid.
fn signal_if(pid: u32, signal: i32, check: impl Fn(&Stat) -> bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscalls on integers; the fd is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
        if fd >= 0 {
            let sent = stat(pid).is_some_and(|s| check(&s))
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
    stat(pid).is_some_and(|s| check(&s)) && unsafe { libc::kill(pid as libc::pid_t, signal) } == 0
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
        let end = end_groups(&[id], Duration::from_millis(300));
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
        let recorded = ProcessId { start_time: real.start_time - 1, ..real };
        let end = end_groups(&[recorded], Duration::from_millis(100));
        assert_eq!(end, vec![GroupEnd::Reused { pid, start_time: real.start_time }]);
        assert!(!crate::test_support::gone(pid as i32), "the unrelated process still runs");
        let _ = other.kill();
        let _ = other.wait();
    }
}
