//! How long after its last change a file's cached digest may be trusted
//! (the racy window), and the clock it is measured on.
//!
//! Linux stamps an inode's times from its coarse realtime clock
//! (`CLOCK_REALTIME_COARSE`), or, with multigrain timestamps, from a time
//! never before it. The cache reads that same clock (`coarse_now_ns`)
//! before it opens a file to hash it: so a write that begins after that
//! read stamps at least the hash time, however far the coarse clock lags
//! the fine one, as long as no one sets the clock back. The window covers
//! what that argument does not: coarse formats and remote servers (FAT's
//! 2 s grain, an NFS server's own clock, lagging this one by less than
//! 2 s), and a write already under way
//! when the file was hashed (its times were stamped when it began, before
//! its bytes were copied). No window covers a write that began longer ago
//! and is still copying; 2 s makes that a write lasting 2 s. (A narrower
//! window on known local file systems was tried in issue 38's twelfth
//! round and withdrawn: the run cannot yet tell that none of its own
//! processes, such as a stdio MCP server between calls or a tree left by a
//! timeout, is in the middle of such a write; bench/README.md says so.)

/// A file changed less than this long before it was hashed is hashed
/// again.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// A hash time no entry is trusted after, by this engine (which subtracts
/// the window saturating) nor by an older one reading it from the ledger
/// (which subtracted it plainly): the smallest time plus the window, so
/// neither subtraction wraps.
pub const UNTRUSTED: i64 = i64::MIN + RACY_WINDOW_NS;

/// Now on the clock the kernel stamps inode times from
/// (`CLOCK_REALTIME_COARSE`), in nanoseconds since the epoch; if it
/// cannot be read, `UNTRUSTED`.
pub fn coarse_now_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
        return UNTRUSTED;
    }
    #[allow(clippy::unnecessary_cast)]
    ns(ts.tv_sec as i64, ts.tv_nsec as i64)
}

/// Seconds and nanoseconds as nanoseconds, saturating (past 2262 a time
/// saturates rather than wraps: such a file is never trusted).
pub fn ns(secs: i64, nsecs: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsecs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write after the clock is read stamps at least what it read: the
    /// kernel stamps from this clock (or a finer time never before it).
    #[test]
    fn a_write_after_the_coarse_clock_is_read_stamps_at_least_its_time() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        for _ in 0..200 {
            let read = coarse_now_ns();
            std::fs::write(&f, "a").unwrap();
            let m = std::fs::metadata(&f).unwrap();
            assert!(ns(m.mtime(), m.mtime_nsec()) >= read && ns(m.ctime(), m.ctime_nsec()) >= read);
        }
    }

    #[test]
    fn times_past_2262_saturate() {
        assert_eq!(ns(1, 5), 1_000_000_005);
        assert_eq!(ns(i64::MAX / 1_000_000_000 + 1, 0), i64::MAX);
    }
}
