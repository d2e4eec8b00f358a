//! Time as the ledger records it: milliseconds since the Unix epoch, and
//! the one way it is shown to people (UTC, `YYYY-MM-DD HH:MM:SS`).

/// Now, in milliseconds since the epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    if let Some(now) = sim::now_ms() {
        return now;
    }
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Format milliseconds since the epoch as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The simulator's clock (`sim`): while set on a thread, the engine's
/// time on that thread is the simulation's, moved only by the simulator.
/// Set only by `engine::sim` (never by the `engine` binary: its
/// symbol is not in it, tests/e2e/tested_binary.rs); unset, `now_ms` reads
/// the system clock after one read of this thread's state.
pub mod sim {
    use std::cell::Cell;

    thread_local! {
        static NOW_MS: Cell<Option<i64>> = const { Cell::new(None) };
    }

    pub fn now_ms() -> Option<i64> {
        NOW_MS.with(Cell::get)
    }

    /// Set (or, with `None`, give back to the system) this thread's clock.
    /// Never inlined: a caller keeps its symbol (tests/e2e/tested_binary.rs).
    #[inline(never)]
    pub fn set(now_ms: Option<i64>) {
        NOW_MS.with(|n| n.set(now_ms));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_795_000_000_000), "2026-11-18 11:06:40");
    }
}
