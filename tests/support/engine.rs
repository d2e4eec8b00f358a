//! One engine command, with a deadline, and a crash armed from inside
//! (`ENGINE_CRASH_AFTER_COMMITS`) or a SIGKILL sent from outside at a time.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Out, Ws};

/// No engine command of a reference plan takes anywhere near this long;
/// one that does has hung.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How this command is to be stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kill {
    Never,
    /// The engine SIGKILLs itself right after its N-th commit.
    AfterCommits(u64),
    /// The test SIGKILLs it this long after it started (if still running).
    After(Duration),
}

/// What one command did.
#[derive(Debug)]
pub struct Ran {
    pub out: Out,
    /// Still running at the deadline (then killed).
    pub hung: bool,
    /// Killed by the test's own SIGKILL (`Kill::After`).
    pub killed_by_test: bool,
    pub elapsed: Duration,
}

impl Ran {
    /// Died of the SIGKILL this command was armed with.
    pub fn crashed_as_armed(&self, kill: Kill) -> bool {
        self.out.killed()
            && match kill {
                Kill::Never => false,
                Kill::AfterCommits(_) => self.out.stderr.contains("ENGINE_CRASH_AFTER_COMMITS="),
                Kill::After(_) => self.killed_by_test,
            }
    }
}

/// Run `engine --json ARGS` in the workspace (no `ENGINE_*` variable from
/// the test's own environment), stopped as `kill` says.
pub fn run(ws: &Ws, args: &[&str], kill: Kill) -> Ran {
    let (mut cmd, out, err): (Command, _, _) = ws.command(args, None);
    if let Kill::AfterCommits(n) = kill {
        cmd.env("ENGINE_CRASH_AFTER_COMMITS", n.to_string());
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("the engine starts");
    let (mut hung, mut killed_by_test) = (false, false);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait on the engine") {
            break status;
        }
        let elapsed = started.elapsed();
        let due = matches!(kill, Kill::After(after) if elapsed >= after);
        if (due && !killed_by_test) || elapsed >= DEADLINE {
            hung = !due;
            killed_by_test = due;
            // SAFETY: signalling our own child by its pid.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let ran = Ran {
        out: Out { status, stdout: read(&out), stderr: read(&err) },
        hung,
        killed_by_test,
        elapsed: started.elapsed(),
    };
    // The output files are the workspace's; keep it tidy.
    let _ = (std::fs::remove_file(&out), std::fs::remove_file(&err));
    ran
}
