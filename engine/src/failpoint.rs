//! Crash points for tests: `ENGINE_FAILPOINT=<name>` makes the engine
//! SIGKILL itself at that point, so a test can restart it and check what
//! survived. A testing aid; documented in the README. Provider processes
//! never see the variable (the command provider drops `ENGINE_*`).

/// The named points, in the order an attempt passes them; then the points
/// of a new store's creation (built under its temporary name; linked into
/// place; in place, before its mark exists).
pub const POINTS: &[&str] = &[
    "after_intent",
    "after_dispatch",
    "after_receipt",
    "after_receipt_commit",
    "store_built",
    "store_linked",
    "store_placed",
];

pub fn hit(name: &str) {
    debug_assert!(POINTS.contains(&name), "unknown failpoint {name}");
    if std::env::var("ENGINE_FAILPOINT").is_ok_and(|v| v == name) {
        eprintln!("engine: failpoint {name}: killing this process (SIGKILL)");
        // SAFETY: sending a signal to ourselves has no memory-safety effect.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        // SIGKILL cannot be caught; this line is never reached.
        std::process::abort();
    }
}
