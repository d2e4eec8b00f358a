//! One engine command, with a deadline, and a crash armed from inside
//! (`ENGINE_CRASH_AFTER_COMMITS`) or a SIGKILL sent from outside at a time.

use std::time::{Duration, Instant};

use super::process::Out;
use super::workspace::Ws;

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
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let mut cmd = ws.command(&all);
    if let Kill::AfterCommits(n) = kill {
        cmd.env("ENGINE_CRASH_AFTER_COMMITS", n.to_string());
    }
    let started = Instant::now();
    let mut running = ws.spawn(cmd);
    let (mut hung, mut killed_by_test) = (false, false);
    while running.alive() {
        let elapsed = started.elapsed();
        let due = matches!(kill, Kill::After(after) if elapsed >= after);
        if (due && !killed_by_test) || elapsed >= DEADLINE {
            hung = !due;
            killed_by_test = due;
            running.sigkill();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = running.wait(Duration::from_secs(10));
    // The output files are the test's; keep the temp dir small.
    running.remove_output();
    Ran { out, hung, killed_by_test, elapsed: started.elapsed() }
}
