//! Crash points for tests: the engine SIGKILLs itself at a named point, so
//! a test can restart it and check what survived. Testing aids, documented
//! in docs/testing.md. Provider processes never see the variables (the command
//! provider, which also starts MCP servers and checks, drops `ENGINE_*`).
//!
//! - `ENGINE_FAILPOINT=<name>`: at one of the named points of an attempt.
//! - `ENGINE_CRASH_AFTER_COMMITS=N`: right after this process's N-th
//!   committed `Store::write` transaction (counted per process; the lease's
//!   own acquire and release are not `Store::write`s), so a test can sweep
//!   N = 1, 2, … and crash after every commit a run makes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The named points, in the order an attempt passes them; then the points
/// of a new store's creation (built under its temporary name; linked into
/// place; in place, before its mark exists).
pub const POINTS: &[&str] = &[
    "after_intent",
    "after_dispatch",
    "after_handle",
    "after_receipt",
    "after_receipt_commit",
    "store_built",
    "store_linked",
    "store_placed",
];

/// The variable that arms the commit counter.
pub const CRASH_AFTER_COMMITS: &str = "ENGINE_CRASH_AFTER_COMMITS";

pub fn hit(name: &str) {
    debug_assert!(POINTS.contains(&name), "unknown failpoint {name}");
    if std::env::var("ENGINE_FAILPOINT").is_ok_and(|v| v == name) {
        die(&format!("failpoint {name}"));
    }
}

/// Called by `Store::write` after each commit.
pub fn committed() {
    let Some(limit) = crash_after_commits() else { return };
    let n = COMMITS.fetch_add(1, Ordering::SeqCst) + 1;
    if n == limit {
        die(&format!("{CRASH_AFTER_COMMITS}={limit}: commit {n} done"));
    }
}

static COMMITS: AtomicU64 = AtomicU64::new(0);

/// `N` from the environment, read once (`None`: unset, 0, or not a number —
/// the last said once on stderr, so a typo does not look like a clean run).
fn crash_after_commits() -> Option<u64> {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let raw = std::env::var(CRASH_AFTER_COMMITS).ok()?;
        match raw.trim().parse::<u64>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                eprintln!("engine: ignoring {CRASH_AFTER_COMMITS}={raw:?}: not a whole number");
                None
            }
        }
    })
}

fn die(why: &str) -> ! {
    eprintln!("engine: {why}: killing this process (SIGKILL)");
    // SAFETY: sending a signal to ourselves has no memory-safety effect.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught; this line is never reached.
    std::process::abort();
}
