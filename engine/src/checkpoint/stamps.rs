//! How long after its last change a file's cached digest may be trusted
//! (the racy window), by what its file system's timestamps are known to be.
//!
//! Linux stamps an inode's times from its coarse realtime clock
//! (`CLOCK_REALTIME_COARSE`), or, with multigrain timestamps, from a time
//! never before it. The cache reads that same clock (`coarse_now_ns`)
//! before it opens a file to hash it: so a write that begins after that
//! read stamps at least the hash time, however far the coarse clock lags
//! the fine one (no bound on the lag is needed), as long as no one sets
//! the clock back (a leap second inserted by stepping the clock sets it
//! back 1 s: beyond the narrow window, within the wide one). A write
//! already under way at the read stamped its times when it began, and
//! nothing bounds how long copying its bytes takes. So an entry is trusted
//! only when the file was hashed with none of the run's attempts in
//! flight, its size, times and inode unchanged across the hash, and its
//! mtime and ctime before the hash time less W (`cache::hash_seen`). A
//! writer outside the run still copying when the file is hashed is
//! covered only if its write began less than W before the hash: one that
//! began earlier and is still copying is not (with 2 s it had to last
//! 2 s; with 100 ms, 100 ms). The narrow W needs the stamps the kernel
//! made kept to the nanosecond: a local file system known to
//! (`keeps_fine_stamps`, asked on the open file), and a file whose mtime
//! or ctime has nanoseconds (all zero suggests whole-second stamps, e.g.
//! ext4 with 128-byte inodes). Everywhere else (NFS, FUSE, CIFS, 9p, FAT,
//! overlayfs whose upper layer cannot be told, anything unknown) a
//! server's clock (which may lag this one by any amount: 2 s covers a lag
//! under 2 s only) or a coarse format (FAT's 2 s grain) may keep a later
//! write's times before the hash time: the wide window stays.

/// The racy window where timestamps are not known to be fine-grained: a
/// file changed less than this long before it was hashed is hashed again.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// The racy window on a local file system keeping nanosecond stamps (ten
/// ticks at HZ = 100, the coarsest Linux clock tick): a write by no
/// attempt of the run, begun less than this before the hash, keeps the
/// entry from being trusted; one begun earlier and still copying does not.
pub const FINE_RACY_WINDOW_NS: i64 = 100_000_000;

/// `statfs` magic numbers (linux/magic.h) of the local file systems that
/// stamp inode times to the nanosecond from the kernel's clock.
const FINE_STAMPED: [u64; 5] = [
    0xEF53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683E, // btrfs
    0x0102_1994, // tmpfs
    0xF2F5_2010, // f2fs
];

/// Does the file system of `statfs` type `f_type` keep nanosecond stamps
/// made from the kernel's clock? Overlayfs is not in the list: its times
/// are its upper layer's, which cannot be told from here.
pub fn keeps_fine_stamps(f_type: u64) -> bool {
    FINE_STAMPED.contains(&f_type)
}

/// The racy window for a file on a file system of type `f_type` (`None`:
/// not known) whose mtime and ctime have these nanosecond parts.
pub fn racy_window_ns(f_type: Option<u64>, mtime_nsec: i64, ctime_nsec: i64) -> i64 {
    let fine_fs = f_type.is_some_and(keeps_fine_stamps);
    if fine_fs && (mtime_nsec != 0 || ctime_nsec != 0) {
        FINE_RACY_WINDOW_NS
    } else {
        RACY_WINDOW_NS
    }
}

/// The `statfs` type of the file system holding the open `file` (`None`:
/// it could not be asked): asked on the file hashed, not by a path that
/// may name another file by then.
pub fn fs_type(file: &std::fs::File) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: an open descriptor and a buffer of the right size.
    if unsafe { libc::fstatfs(file.as_raw_fd(), buf.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: `fstatfs` returned 0, so it filled the buffer.
    let s = unsafe { buf.assume_init() };
    // `f_type`'s width differs between targets; the magic numbers are 32-bit.
    #[allow(clippy::unnecessary_cast)]
    Some(s.f_type as u64 & 0xFFFF_FFFF)
}

/// Now on the clock the kernel stamps inode times from
/// (`CLOCK_REALTIME_COARSE`), in nanoseconds since the epoch; `i64::MIN`
/// if it cannot be read (no entry hashed then is ever trusted).
pub fn coarse_now_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
        return i64::MIN;
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

    #[test]
    fn a_known_local_file_system_with_nanoseconds_gets_the_narrow_window() {
        for t in FINE_STAMPED {
            assert_eq!(racy_window_ns(Some(t), 123, 0), FINE_RACY_WINDOW_NS);
            assert_eq!(racy_window_ns(Some(t), 0, 456), FINE_RACY_WINDOW_NS);
            assert_eq!(racy_window_ns(Some(t), 1, 1), FINE_RACY_WINDOW_NS);
        }
    }

    #[test]
    fn whole_second_stamps_keep_the_wide_window_even_on_a_known_file_system() {
        for t in FINE_STAMPED {
            assert_eq!(racy_window_ns(Some(t), 0, 0), RACY_WINDOW_NS);
        }
    }

    #[test]
    fn remote_fuse_fat_overlay_and_unknown_file_systems_keep_the_wide_window() {
        let others: [u64; 9] = [
            0x6969,      // nfs
            0x6573_5546, // fuse
            0xFF53_4D42, // cifs
            0xFE53_4D42, // smb2
            0x0102_1997, // v9fs
            0x4d44,      // vfat
            0x2011_BAB0, // exfat
            0x794C_7630, // overlayfs
            0x1234_5678, // anything else
        ];
        for t in others {
            assert!(!keeps_fine_stamps(t), "{t:#x}");
            assert_eq!(racy_window_ns(Some(t), 123, 456), RACY_WINDOW_NS, "{t:#x}");
        }
        assert_eq!(racy_window_ns(None, 123, 456), RACY_WINDOW_NS, "not known");
    }

    #[test]
    fn the_narrow_window_is_well_above_a_tick_and_below_the_wide_one() {
        // One tick is at most 10 ms (HZ >= 100).
        const TICK_NS_MAX: i64 = 10_000_000;
        const { assert!(FINE_RACY_WINDOW_NS >= 10 * TICK_NS_MAX && FINE_RACY_WINDOW_NS < RACY_WINDOW_NS) };
    }

    #[test]
    fn the_file_system_of_an_open_file_is_told() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "a").unwrap();
        assert!(fs_type(&std::fs::File::open(dir.path().join("a")).unwrap()).is_some());
    }

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
