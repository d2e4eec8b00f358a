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
const ENVIRON_BYTES_MAX: usize = 4 << 20;

/// Processes scanned at most (a bound on the `/proc` walk).
const PROCESSES_MAX: usize = 1 << 16;

/// A call's tree as the engine finds it without a cgroup: its leader (the
/// process the engine started, which may have exited) and the marks its
/// processes carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    pub leader: u32,
    /// The leader's start (`/proc/PID/stat` field 22): nothing of the tree
    /// started before it, and a pid reused since is not the leader.
    pub start_time: u64,
    pub marker: String,
}

impl Marked {
    /// The live processes of the tree but its leader: the leader's
    /// descendants by parent (while the same leader lives), and every
    /// process started since that carries the marker in its environment,
    /// with its own descendants, wherever it was re-parented (this engine
    /// as the subreaper, `init`, or a subreaper above a dead engine).
    /// `spawned`: pids this engine started itself (never counted).
    pub fn tree(&self, spawned: &dyn Fn(u32) -> bool) -> Vec<u32> {
        let all: Vec<(u32, super::Stat)> =
            processes().into_iter().filter(|(_, s)| s.start_time >= self.start_time).collect();
        let leader_lives = all.iter().any(|(pid, _)| *pid == self.leader);
        let mut found: Vec<u32> = all
            .iter()
            .map(|(pid, _)| *pid)
            .filter(|&pid| pid != self.leader && !spawned(pid) && has_marker(pid, &self.marker))
            .collect();
        let mut next: Vec<u32> = found.clone();
        if leader_lives {
            next.push(self.leader);
        }
        while let Some(parent) = next.pop() {
            for (pid, _) in all.iter().filter(|(_, s)| s.ppid == parent) {
                if *pid != self.leader && !found.contains(pid) && found.len() < PROCESSES_MAX {
                    found.push(*pid);
                    next.push(*pid);
                }
            }
        }
        found.sort_unstable();
        found
    }

    /// Is `pid` (still) of the tree: started since its leader, and carrying
    /// the marker or descending from the (same) leader? Asked again once a
    /// process is pinned for a signal.
    pub(crate) fn holds(&self, pid: u32) -> bool {
        let Some(s) = super::stat(pid) else { return false };
        if s.start_time < self.start_time || s.state == 'Z' || s.state == 'X' {
            return false;
        }
        if has_marker(pid, &self.marker) {
            return true;
        }
        let leader_lives = super::stat(self.leader).is_some_and(|l| l.start_time == self.start_time);
        let mut p = s.ppid;
        for _ in 0..DEPTH_MAX {
            if p == self.leader {
                return leader_lives;
            }
            match super::stat(p) {
                Some(s) if s.ppid > 1 => p = s.ppid,
                _ => return false,
            }
        }
        false
    }

    /// SIGKILL every process of the tree (each pinned by a pidfd and asked
    /// again before the signal); the pids signalled.
    pub(crate) fn kill(&self, spawned: &dyn Fn(u32) -> bool) -> Vec<u32> {
        self.tree(spawned)
            .into_iter()
            .filter(|&pid| super::signal_pinned(pid, libc::SIGKILL, || self.holds(pid)))
            .collect()
    }
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

/// Every live process and its stat, zombies and kernel threads left out.
fn processes() -> Vec<(u32, super::Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .take(PROCESSES_MAX)
        .filter_map(|pid| {
            let s = super::stat(pid)?;
            (s.state != 'Z' && s.state != 'X' && !s.kernel_thread).then_some((pid, s))
        })
        .collect()
}

/// Does `pid`'s environment hold every entry of `marker`? A process caught
/// in `exec` reads as an empty environment (the read finds its old memory
/// released, or its new environment not yet laid out): it is looked at
/// again, a few times, before an empty read counts as "unmarked" — one
/// false "no" would end the wait for a call's tree early.
fn has_marker(pid: u32, marker: &str) -> bool {
    let mut pause = EMPTY_LOOK_PAUSE_FIRST;
    for look in 1..=EMPTY_LOOKS_MAX {
        match environ(pid) {
            Some(env) if !env.is_empty() => {
                let entries: Vec<&[u8]> = env.split(|b| *b == 0).collect();
                return marker.split(' ').all(|m| entries.contains(&m.as_bytes()));
            }
            Some(_) if look < EMPTY_LOOKS_MAX => {
                std::thread::sleep(pause);
                pause *= 2;
            }
            _ => return false,
        }
    }
    false
}

/// Looks at an empty environment before it counts, pausing 0.25 ms, then
/// twice as long each time (32 ms in all): an `exec` ends within them
/// even on a loaded machine. A process that truly has none (`env -i`; kernel
/// threads are never looked at) costs only these pauses.
const EMPTY_LOOKS_MAX: u32 = 8;
const EMPTY_LOOK_PAUSE_FIRST: std::time::Duration = std::time::Duration::from_micros(250);

/// `/proc/PID/environ`, bounded; `None` if it cannot be read (the process
/// is gone, or another user's). Read in *one* `read` from the start: the
/// kernel holds the process's memory for one call only, and a second read
/// after an `exec` in between finds nothing more — a cut environment that
/// may have lost the marks. A buffer the environment fills is doubled and
/// the read made again.
fn environ(pid: u32) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(Path::new(&format!("/proc/{pid}/environ"))).ok()?;
    let mut size = ENVIRON_BYTES_FIRST;
    loop {
        let mut env = vec![0u8; size];
        let n = file.read_at(&mut env, 0).ok()?;
        if n < size || size >= ENVIRON_BYTES_MAX {
            env.truncate(n);
            return Some(env);
        }
        size *= 2;
    }
}

/// The first read's buffer: most environments fit.
const ENVIRON_BYTES_FIRST: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A process that keeps exec'ing carries its marks all along: a look
    /// that catches it mid-`exec` (its old memory released, or its new
    /// environment not yet laid out, both read as an empty `environ`) must
    /// not say "unmarked" — one such "no" ended the wait for a call's tree
    /// early, and a `setsid` escapee (which execs `setsid`, `sh`, `sleep`
    /// right as its leader exits) went unseen under load.
    #[test]
    fn a_process_caught_mid_exec_still_carries_its_marks() {
        let dir = std::env::temp_dir().join(format!("adopted-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("reexec.sh");
        std::fs::write(&script, "[ \"$1\" -gt 0 ] && exec /bin/sh \"$0\" $(($1 - 1))\nexec sleep 30\n").unwrap();
        let mut child = Command::new("/bin/sh")
            .arg(&script)
            .arg("1500")
            .env("ENGINE_OPERATION_ID", "op_test_exec")
            .env("ENGINE_TRY", "1")
            .spawn()
            .unwrap();
        let pid = child.id();
        let mark = marker("op_test_exec", 1);
        let (mut looks, mut unmarked) = (0u32, 0u32);
        let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        while comm().trim() != "sleep" && looks < 200_000 {
            looks += 1;
            if !has_marker(pid, &mark) {
                unmarked += 1;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(looks > 100, "too few looks to mean anything: {looks}");
        assert_eq!(unmarked, 0, "{unmarked} of {looks} looks found no marks on a process that carried them");
    }

    /// A leader that leaves a `setsid` grandchild and is killed: the
    /// grandchild is found by its parent chain first, by its environment
    /// once orphaned (re-parented to this process, the subreaper), never
    /// by another call's marks; and the tree's kill ends it.
    #[test]
    fn an_orphan_is_found_by_the_mark_it_carries() {
        assert!(become_subreaper(), "the kernel refused PR_SET_CHILD_SUBREAPER");
        let mut leader = Command::new("sh")
            .args(["-c", "setsid sh -c 'echo $$; exec sleep 30' & wait"])
            .env("ENGINE_OPERATION_ID", "op_test_adopted")
            .env("ENGINE_TRY", "3")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let start_time = super::super::ProcessId::leader(leader.id()).unwrap().start_time;
        let call = Marked { leader: leader.id(), start_time, marker: marker("op_test_adopted", 3) };
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(leader.stdout.take().unwrap()), &mut line).unwrap();
        let orphan: u32 = line.trim().parse().unwrap();
        let none = |_| false;
        assert!(call.tree(&none).contains(&orphan), "by its parent chain");
        leader.kill().unwrap();
        leader.wait().unwrap();
        let ppid = super::super::stat(orphan).map(|s| s.ppid);
        assert_eq!(ppid, Some(std::process::id()), "re-parented to the subreaper");
        assert!(call.tree(&none).contains(&orphan), "by its mark, once orphaned");
        let other = Marked { marker: marker("op_other", 3), ..call.clone() };
        assert!(!other.tree(&none).contains(&orphan), "another call's mark");
        assert!(!other.holds(orphan), "another call's mark");
        assert_eq!(call.kill(&none), vec![orphan]);
        let ended = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            super::super::stat(orphan).is_none_or(|s| s.state == 'Z')
        });
        assert!(ended, "the orphan (pid {orphan}) outlived the kill");
        // SAFETY: reaping the adopted child (this process is its subreaper;
        // another test's reaping may have been first).
        unsafe { libc::waitpid(orphan as i32, std::ptr::null_mut(), libc::WNOHANG) };
    }
}
