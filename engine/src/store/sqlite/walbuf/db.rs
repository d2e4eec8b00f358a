//! The main database file of a connection through the VFS: unix's own, every
//! method passed on, but for one thing: when SQLite releases the WAL's write
//! lock (`xShmLock`, always on this file), the frames the connection's WAL
//! file still holds are dropped.
//!
//! Why (SQLite 3.46's wal.c): a rolled-back transaction's spilled frames
//! lie past the published end of the WAL; `sqlite3WalUndo` and
//! `sqlite3WalEndWriteTransaction` make no call on the WAL file, so some of
//! them could stay gathered once the lock is released; another connection
//! then commits at those offsets, and writing them later would put them over
//! its committed frames. At the release nothing gathered is committed (a
//! commit frame's page writes the gathered bytes at once, its error failing
//! the commit), so dropping them is exact and costs no I/O.
//!
//! The two files are linked in the WAL's xOpen (`sqlite3_database_file_object`
//! with the name SQLite passed) and unlinked in either's xClose. Both belong
//! to one connection's pager: SQLite calls their methods from the thread
//! using that connection, one at a time, so the link needs no lock.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use rusqlite::ffi;

use super::{WalFile, INNER_AT};

/// The WAL's write lock, its slot in the shared-memory locks (wal.c's
/// `WAL_WRITE_LOCK`).
const WAL_WRITE_LOCK: c_int = 0;

/// Our database file: SQLite's `sqlite3_file` first (its methods ours), the
/// linked WAL file, then unix's file in the same allocation.
#[repr(C)]
pub(super) struct DbFile {
    base: ffi::sqlite3_file,
    wal: *mut WalFile,
    inner: *mut ffi::sqlite3_file,
}

/// xOpen of a main database file: unix's file at `INNER_AT`, ours over it
/// (unix's methods are version 3: shared memory, what WAL needs).
///
/// SAFETY (caller): `file` holds INNER_AT + unix's szOsFile bytes, aligned
/// to 8; `unix_open` and `unix` are unix's.
pub(super) unsafe fn open(
    unix_open: unsafe extern "C" fn(
        *mut ffi::sqlite3_vfs,
        *const c_char,
        *mut ffi::sqlite3_file,
        c_int,
        *mut c_int,
    ) -> c_int,
    unix: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: as the caller promises; our fields are written before SQLite
    // reads them and `inner` points inside the allocation.
    unsafe {
        let db = file.cast::<DbFile>();
        let inner = file.cast::<u8>().add(INNER_AT).cast::<ffi::sqlite3_file>();
        (*inner).pMethods = ptr::null();
        let rc = unix_open(unix, name, inner, flags, out_flags);
        (*db).base.pMethods = ptr::null();
        if (*inner).pMethods.is_null() {
            return rc;
        }
        if (*(*inner).pMethods).iVersion < 3 {
            // Not a version SQLite's WAL can use ("unix" is 3): unix's file
            // opened again at the start, unwrapped, as other files are.
            if let Some(close) = (*(*inner).pMethods).xClose {
                close(inner);
            }
            return unix_open(unix, name, file, flags, out_flags);
        }
        (*db).wal = ptr::null_mut();
        (*db).inner = inner;
        (*db).base.pMethods = &DB_METHODS;
        rc
    }
}

/// Link a WAL file to its connection's database file, if ours.
///
/// SAFETY (caller): `db` is what `sqlite3_database_file_object` returned
/// for the WAL's name, `wal` the WAL file being opened.
pub(super) unsafe fn link(db: *mut ffi::sqlite3_file, wal: *mut WalFile) {
    // SAFETY: `db` is the pager's open database file; its methods tell ours.
    unsafe {
        if db.is_null() || !ptr::eq((*db).pMethods, &DB_METHODS) {
            return;
        }
        let db = db.cast::<DbFile>();
        (*db).wal = wal;
        (*wal).db = db;
    }
}

/// Undo `link` (either file closing).
///
/// SAFETY (caller): `wal` is a WAL file `open` set up, not yet freed.
pub(super) unsafe fn unlink(wal: *mut WalFile) {
    // SAFETY: a linked `db` is open until its xClose, which unlinks first.
    unsafe {
        if let Some(db) = (*wal).db.as_mut() {
            db.wal = ptr::null_mut();
        }
        (*wal).db = ptr::null_mut();
    }
}

static DB_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 3 as unix's: shared memory (the WAL's locks) and the map.
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// Unix's file and its methods.
///
/// SAFETY (callers): `file` is a database file `open` wrapped, not closed.
unsafe fn inner<'a>(file: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, &'a ffi::sqlite3_io_methods) {
    // SAFETY: as the caller promises; unix's methods are set and static.
    unsafe {
        let inner = (*file.cast::<DbFile>()).inner;
        (inner, &*(*inner).pMethods)
    }
}

/// A method passed on to unix's, whatever it returns when unix has none.
macro_rules! passed {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty, $none:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> $ret {
            // SAFETY: SQLite's database file (see `inner`), arguments passed on.
            let (inner, methods) = unsafe { inner(file) };
            match methods.$method {
                Some(m) => unsafe { m(inner, $($arg),*) },
                None => $none,
            }
        }
    };
}

passed!(read, xRead, (buf: *mut c_void, amount: c_int, offset: i64) -> c_int, ffi::SQLITE_IOERR_READ);
passed!(write, xWrite, (buf: *const c_void, amount: c_int, offset: i64) -> c_int, ffi::SQLITE_IOERR_WRITE);
passed!(truncate, xTruncate, (size: i64) -> c_int, ffi::SQLITE_IOERR_TRUNCATE);
passed!(sync, xSync, (flags: c_int) -> c_int, ffi::SQLITE_IOERR_FSYNC);
passed!(file_size, xFileSize, (size: *mut i64) -> c_int, ffi::SQLITE_IOERR_FSTAT);
passed!(lock, xLock, (level: c_int) -> c_int, ffi::SQLITE_IOERR_LOCK);
passed!(unlock, xUnlock, (level: c_int) -> c_int, ffi::SQLITE_IOERR_UNLOCK);
passed!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int) -> c_int, ffi::SQLITE_IOERR_CHECKRESERVEDLOCK);
passed!(file_control, xFileControl, (op: c_int, arg: *mut c_void) -> c_int, ffi::SQLITE_NOTFOUND);
passed!(sector_size, xSectorSize, () -> c_int, 0);
passed!(device_characteristics, xDeviceCharacteristics, () -> c_int, 0);
passed!(shm_map, xShmMap, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int, ffi::SQLITE_IOERR_SHMMAP);
passed!(shm_lock_through, xShmLock, (offset: c_int, n: c_int, flags: c_int) -> c_int, ffi::SQLITE_IOERR_SHMLOCK);
passed!(shm_barrier, xShmBarrier, () -> (), ());
passed!(shm_unmap, xShmUnmap, (delete: c_int) -> c_int, ffi::SQLITE_OK);
passed!(fetch, xFetch, (offset: i64, amount: c_int, out: *mut *mut c_void) -> c_int, ffi::SQLITE_OK);
passed!(unfetch, xUnfetch, (offset: i64, page: *mut c_void) -> c_int, ffi::SQLITE_OK);

/// Does this shared-memory call release the WAL's write lock?
fn releases_write_lock(offset: c_int, n: c_int, flags: c_int) -> bool {
    flags == ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_EXCLUSIVE
        && offset <= WAL_WRITE_LOCK
        && WAL_WRITE_LOCK < offset + n
}

unsafe extern "C" fn shm_lock(file: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int) -> c_int {
    if releases_write_lock(offset, n, flags) {
        // SAFETY: SQLite's database file (see `inner`); a linked WAL is
        // open (its xClose unlinks) and not in a call (one at a time).
        unsafe {
            let wal = (*file.cast::<DbFile>()).wal;
            if let Some(gathered) = wal.as_ref().and_then(|w| w.gathered.as_mut()) {
                gathered.discard();
            }
        }
    }
    // SAFETY: as `passed!`.
    unsafe { shm_lock_through(file, offset, n, flags) }
}

/// xClose: unlinked from its WAL, unix's file closed.
unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite's database file, closed once; a linked WAL is open.
    unsafe {
        let db = file.cast::<DbFile>();
        if let Some(wal) = (*db).wal.as_mut() {
            wal.db = ptr::null_mut();
        }
        (*db).wal = ptr::null_mut();
        let (inner, methods) = inner(file);
        let rc = methods.xClose.map_or(ffi::SQLITE_OK, |m| m(inner));
        (*db).base.pMethods = ptr::null();
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_release_of_the_write_lock_discards() {
        let release = ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_EXCLUSIVE;
        assert!(releases_write_lock(0, 1, release));
        assert!(!releases_write_lock(1, 7, release));
        assert!(!releases_write_lock(0, 1, ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_EXCLUSIVE));
        assert!(!releases_write_lock(3, 1, ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_SHARED));
    }
}
