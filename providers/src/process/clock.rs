//! A spawned process's start time known without reading `/proc/PID/stat`.
//!
//! The kernel stamps a new process in `clone` (`copy_process`:
//! `start_boottime = ktime_get_boottime_ns()`), and `/proc/PID/stat` field
//! 22 shows that stamp in clock ticks: `nsec_to_clock_t`, the nanoseconds
//! divided by `NSEC_PER_SEC / USER_HZ`, offset by the reader's time
//! namespace. `CLOCK_BOOTTIME` read by the spawning thread just before its
//! `clone` and by the child as the first thing it does (the vDSO reads the
//! same timekeeper, in the same time namespace; no system call) brackets
//! that stamp. When both reads fall in one tick, the child's start time is
//! that tick, exactly: the value `/proc/PID/stat` gives, which recovery
//! compares for equality (`process::end_groups`). When they straddle a
//! tick boundary (the bracket is a fraction of a 10 ms tick, unless the
//! child waited long for a CPU), it is read from `/proc` as before.
//!
//! The saving is an `open`, a `read` and a `close` of a `/proc` file a
//! spawn, and the wait that read could have on the child's `exec`
//! (bench/README.md, issue 38's tenth round).

use std::sync::OnceLock;

const NANOS: u64 = 1_000_000_000;

/// `CLOCK_BOOTTIME` now, in nanoseconds (no system call where the vDSO
/// has it).
pub(crate) fn boottime_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a local the call fills.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    // Checked: the child calls this too, where nothing may panic.
    u64::try_from(ts.tv_sec).ok()?.checked_mul(NANOS)?.checked_add(u64::try_from(ts.tv_nsec).ok()?)
}

/// The length of a clock tick in nanoseconds, where the kernel's
/// conversion is that plain division (`USER_HZ` divides a second: 100 on
/// every common architecture); `None` elsewhere, where the start time is
/// always read.
fn tick_ns() -> Option<u64> {
    static TICK: OnceLock<Option<u64>> = OnceLock::new();
    *TICK.get_or_init(|| {
        // SAFETY: plain libc call (glibc answers from the auxiliary vector).
        let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
        (hz > 0 && NANOS % hz == 0).then(|| NANOS / hz)
    })
}

/// The start time (clock ticks after boot) of a process cloned between
/// `before` and `after` (`CLOCK_BOOTTIME` nanoseconds), when that bracket
/// names one tick.
pub(crate) fn start_ticks(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    within_one_tick(before?, after?, tick_ns()?)
}

fn within_one_tick(before: u64, after: u64, tick: u64) -> Option<u64> {
    (before <= after && before / tick == after / tick).then_some(before / tick)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bracket_within_one_tick_names_it_and_one_across_a_boundary_names_none() {
        let tick = 10_000_000;
        assert_eq!(within_one_tick(1_230_000_000, 1_239_999_999, tick), Some(123));
        assert_eq!(within_one_tick(1_230_000_000, 1_230_000_000, tick), Some(123));
        assert_eq!(within_one_tick(1_239_999_999, 1_240_000_000, tick), None);
        assert_eq!(within_one_tick(1_235_000_000, 1_234_000_000, tick), None, "a clock that went back");
        assert_eq!(start_ticks(None, Some(1)), None);
    }
}
