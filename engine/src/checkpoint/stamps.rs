//! How long after its last change a file's cached digest may be trusted
//! (the racy window), by what its file system's timestamps are known to be.
//!
//! Linux stamps an inode's times from the coarse clock (one tick, at most
//! 10 ms at HZ >= 100), which lags the fine clock the cache reads by at
//! most one tick; so a file hashed at fine time T whose mtime and ctime are
//! both before T - W (W well above a tick) cannot be written after the hash
//! and keep both times: any later write stamps at least T - one tick. That
//! holds only where the kernel keeps the stamps it made to the nanosecond:
//! a local file system known to (`keeps_fine_stamps`), and a file whose
//! mtime or ctime has nanoseconds (all zero suggests whole-second stamps,
//! e.g. ext4 with 128-byte inodes). Everywhere else (NFS, FUSE, CIFS, 9p,
//! FAT, overlayfs whose upper layer cannot be told, anything unknown) a
//! server or a coarse format may keep a later write's times equal: the
//! wide window stays.

use std::path::Path;

/// The racy window where timestamps are not known to be fine-grained: a
/// file changed less than this long before it was hashed is hashed again.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// The racy window on a local file system keeping nanosecond stamps: ten
/// ticks at HZ = 100 (the coarsest Linux clock tick).
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

/// The `statfs` type of the file system holding `path` (`None`: it could
/// not be asked).
pub fn fs_type(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a valid NUL-terminated path and a buffer of the right size.
    if unsafe { libc::statfs(c.as_ptr(), buf.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: `statfs` returned 0, so it filled the buffer.
    let s = unsafe { buf.assume_init() };
    // `f_type`'s width differs between targets; the magic numbers are 32-bit.
    #[allow(clippy::unnecessary_cast)]
    Some(s.f_type as u64 & 0xFFFF_FFFF)
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
    fn the_file_system_of_a_folder_is_told() {
        let dir = tempfile::tempdir().unwrap();
        assert!(fs_type(dir.path()).is_some());
        assert_eq!(fs_type(&dir.path().join("absent/x")), None);
    }
}
