//! The fallback where the engine can make no cgroup (an unprivileged user
//! outside a delegated subtree, no cgroup2 mount): the engine becomes the
//! *subreaper* of everything it starts (`PR_SET_CHILD_SUBREAPER`), so an
//! orphaned descendant of a provider — one whose parent exited, `setsid` or
//! not — is re-parented to the engine instead of to `init`, and a provider
//! call's tree is found by two marks a process carries without trying:
//!
//! - its parent chain, up to the call's leader while the leader lives;
//! - its environment: every process of a call gets `ENGINE_OPERATION_ID`
//!   and `ENGINE_TRY`, and what it starts inherits them.
//!
//! What this does not find (where a cgroup would): a descendant that
//! cleared its environment *and* whose parent chain to the leader broke; and
//! after the engine itself was SIGKILLed, orphans go to `init`: the next
//! engine finds them by their environment only. Each attempt's process
//! record says which tracking it had (a `cgroup`, or a `marker`).

use std::path::Path;
use std::sync::OnceLock;

/// Make this process the subreaper of its descendants (once per process);
/// false when the kernel refused.
pub fn become_subreaper() -> bool {
    static DONE: OnceLock<bool> = OnceLock::new();
    // SAFETY: prctl on integers; changes only this process's attribute.
    *DONE.get_or_init(|| unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0)
}

/// The environment entries that mark a call's processes, space-separated
/// (an operation id has no space).
pub fn marker(operation_id: &str, try_no: u32) -> String {
    format!("ENGINE_OPERATION_ID={operation_id} ENGINE_TRY={try_no}")
}

/// `environ` is bounded: a process's environment is at most a few MiB.
const ENVIRON_BYTES_MAX: u64 = 4 << 20;

/// Processes scanned at most (a bound on the `/proc` walk).
const PROCESSES_MAX: usize = 1 << 16;

/// The live processes of a call's tree but its leader: the leader's
/// descendants by parent, and every process (with its own descendants)
/// whose parent is this engine or `init` and whose environment carries
/// `marker`. `spawned`: pids this engine started itself (never counted).
pub fn tree(leader: u32, marker: &str, spawned: &dyn Fn(u32) -> bool) -> Vec<u32> {
    let engine = std::process::id();
    let all = processes();
    let carries = |pid: u32| has_marker(pid, marker);
    let mut roots: Vec<u32> = vec![leader];
    roots.extend(
        all.iter()
            .filter(|(pid, ppid)| (*ppid == engine || *ppid == 1) && *pid != leader && !spawned(*pid) && carries(*pid))
            .map(|(pid, _)| *pid),
    );
    let mut found = Vec::new();
    let mut next = roots.clone();
    while let Some(parent) = next.pop() {
        for (pid, _) in all.iter().filter(|(_, ppid)| *ppid == parent) {
            if !found.contains(pid) && !roots[..1].contains(pid) && found.len() < PROCESSES_MAX {
                found.push(*pid);
                next.push(*pid);
            }
        }
    }
    found.extend(roots.into_iter().skip(1));
    found.sort_unstable();
    found.dedup();
    found
}

/// Is `pid` (still) of the call's tree: does it carry `marker`, or descend
/// from `leader`? (Asked again once a process is pinned for a signal.)
pub(crate) fn belongs(pid: u32, leader: u32, marker: &str) -> bool {
    if has_marker(pid, marker) {
        return true;
    }
    let mut p = pid;
    for _ in 0..DEPTH_MAX {
        match super::stat(p) {
            Some(s) if s.ppid == leader => return true,
            Some(s) if s.ppid > 1 => p = s.ppid,
            _ => return false,
        }
    }
    false
}

/// SIGKILL `pid` if it (still) belongs to the call's tree, pinned by a
/// pidfd; then reap what the engine adopted.
pub(crate) fn kill(pid: u32, leader: u32, marker: &str) {
    super::signal_pinned(pid, libc::SIGKILL, || belongs(pid, leader, marker));
}

/// Parent links followed at most, from a process up to a call's leader.
const DEPTH_MAX: usize = 256;

/// Zombies among this engine's adopted children (not started by it): reap
/// them, so orphans that ended do not pile up while the engine runs.
pub(crate) fn reap(spawned: &dyn Fn(u32) -> bool) {
    let engine = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else { return };
    let zombies = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .take(PROCESSES_MAX)
        .filter(|&pid| super::stat(pid).is_some_and(|s| s.ppid == engine && s.state == 'Z') && !spawned(pid));
    for pid in zombies {
        let mut status = 0;
        // SAFETY: waitpid on one pid, a child of this process.
        unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    }
}

/// Every live process: (pid, parent pid), zombies left out.
fn processes() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .take(PROCESSES_MAX)
        .filter_map(|pid| {
            let s = super::stat(pid)?;
            (s.state != 'Z' && s.state != 'X').then_some((pid, s.ppid))
        })
        .collect()
}

/// Does `pid`'s environment hold every entry of `marker`?
fn has_marker(pid: u32, marker: &str) -> bool {
    use std::io::Read;
    let mut env = Vec::new();
    let read = std::fs::File::open(Path::new(&format!("/proc/{pid}/environ")))
        .and_then(|f| f.take(ENVIRON_BYTES_MAX).read_to_end(&mut env));
    if read.is_err() {
        return false;
    }
    let entries: Vec<&[u8]> = env.split(|b| *b == 0).collect();
    marker.split(' ').all(|m| entries.contains(&m.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A leader that leaves a `setsid` grandchild and exits: the grandchild
    /// is found by its environment once orphaned, and by its parent before.
    #[test]
    fn an_orphan_is_found_by_the_mark_it_carries() {
        assert!(become_subreaper(), "the kernel refused PR_SET_CHILD_SUBREAPER");
        let mark = marker("op_test_adopted", 3);
        let mut leader = Command::new("sh")
            .args(["-c", "setsid sh -c 'echo $$; exec sleep 30' & wait"])
            .env("ENGINE_OPERATION_ID", "op_test_adopted")
            .env("ENGINE_TRY", "3")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(leader.stdout.take().unwrap()), &mut line).unwrap();
        let orphan: u32 = line.trim().parse().unwrap();
        let none = |_| false;
        assert!(tree(leader.id(), &mark, &none).contains(&orphan), "by its parent chain");
        // The leader ends (its `wait` returns when the grandchild... not
        // yet): kill it; the grandchild is re-parented to this process.
        leader.kill().unwrap();
        leader.wait().unwrap();
        assert!(tree(leader.id(), &mark, &none).contains(&orphan), "by its mark, once orphaned");
        assert!(!tree(leader.id(), &marker("op_other", 3), &none).contains(&orphan), "another call's mark");
        // SAFETY: plain syscall on a pid this test started.
        unsafe { libc::kill(orphan as i32, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: reaping the adopted child (this process is its subreaper).
        unsafe { libc::waitpid(orphan as i32, &mut status, 0) };
    }
}
