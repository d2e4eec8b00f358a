//! A person's stop: SIGINT (Ctrl-C), SIGTERM and SIGHUP, caught by the
//! commands that run work (`run`, `retry`, `repair`, `revise`) so that a
//! run ends its providers and records them instead of dying while they go
//! on. Providers run in process groups of their own: a terminal's Ctrl-C
//! reaches the engine alone, and the engine decides what happens to them.
//!
//! The handler only counts (an atomic add, async-signal-safe); the run loop
//! reads the count. Signals are caught from the start of the command, so one
//! that comes while the plan is loaded or the lease is taken is seen by the
//! run before it dispatches anything.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::error::{Error, Result};
pub use crate::state::StopSignal;

/// The first stop signal received (0: none yet), and how many came.
static FIRST: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static CAUGHT: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// How often a waiting run looks at the count.
const POLL: Duration = Duration::from_millis(20);

/// Catch SIGINT, SIGTERM and SIGHUP from now on, for the rest of the
/// process. Idempotent.
pub fn catch() -> Result<()> {
    CAUGHT
        .get_or_init(|| {
            for s in StopSignal::ALL {
                let n = s.number();
                // SAFETY: the action only touches atomics, which is
                // async-signal-safe; it allocates nothing and takes no lock.
                let registered = unsafe {
                    signal_hook::low_level::register(n, move || {
                        let _ = FIRST.compare_exchange(0, n, Ordering::SeqCst, Ordering::SeqCst);
                        COUNT.fetch_add(1, Ordering::SeqCst);
                    })
                };
                registered.map_err(|e| format!("cannot catch {s}: {e}"))?;
            }
            // A provider process resets these before it unblocks them.
            providers::signal_handlers_changed();
            Ok(())
        })
        .clone()
        .map_err(Error::internal)
}

/// The first stop signal this process received, if any.
pub fn received() -> Option<StopSignal> {
    StopSignal::of_number(FIRST.load(Ordering::SeqCst))
}

/// How many stop signals this process received so far.
pub fn count() -> usize {
    COUNT.load(Ordering::SeqCst)
}

/// Wait until more than `seen` stop signals have come; the new count.
pub async fn beyond(seen: usize) -> usize {
    loop {
        let now = count();
        if now > seen {
            return now;
        }
        tokio::time::sleep(POLL).await;
    }
}
