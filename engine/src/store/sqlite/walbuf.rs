//! The ledger's connections write each commit's WAL frames in one write.
//!
//! SQLite's `walWriteOneFrame` writes a frame's 24-byte header and its page
//! with two `pwrite64` each; a chain task's two commits write about 17
//! frames, 34 calls whose cost is mostly ext4's per call (the inode lock,
//! the mtime, write_begin/end). This is a VFS over SQLite's own "unix" one,
//! registered as [`VFS_NAME`] and named by `open::connect`: every file it
//! opens is unix's own, untouched, but for the main database file (every
//! method passed on: `db.rs`) and the WAL (`SQLITE_OPEN_WAL`), whose
//! appended frames (a 24-byte header, then its page, contiguous, at
//! or past the end of what this file has written in the current write
//! transaction) are gathered in a buffer and written with one `xWrite` of
//! unix's (one `pwrite64`) when the frame whose header marks a commit is
//! complete (its "database size" field not zero: SQLite's WAL format),
//! before any other call on the file (read, sync, truncate, size, lock,
//! file control, close), before a write that is not the next frame, and
//! before the next frame would pass [`WAL_GATHER_BYTES_MAX`] (unix's most a
//! write, 0x1ffff bytes). A write below that end rewrites a frame (a page
//! written again, the checksums `walRewriteChecksums` recomputes after a
//! transaction spilled): it is written as it comes, after what is gathered.
//! When SQLite releases the WAL's write lock (on the database file, which
//! this VFS also wraps: `db.rs`), whatever is still gathered is dropped.
//!
//! What it relies on (SQLite 3.46's wal.c, `walFrames`, checked against
//! its source): a transaction's new frames are appended in order at the
//! end of the WAL, written only while this connection holds the write
//! lock; a commit's last frame is always a new one carrying the commit
//! mark, written after every other frame of it, before the checksum
//! rewrite, the padding and sync of `synchronous=FULL`, the wal-index and
//! its published header (`walIndexWriteHdr`); a rewrite touches only this
//! transaction's frames; the WAL header (offset 0) is written first when
//! the WAL starts again; the write lock is released with an unlocking
//! `xShmLock` of slot 0 on the database file (not so in
//! `locking_mode=EXCLUSIVE`, which the engine never sets: there no other
//! connection writes, and what is held is written before this one's next
//! write, in the order SQLite gave it).
//!
//! What follows: the commit frame's own `xWrite` writes every gathered
//! frame of the commit before it returns, and its failure (a full disk)
//! fails the commit as a failed `pwrite` does without the gathering; every
//! write after it in the same commit goes straight to the file; so when
//! the header is published, and when a process is killed after that, the
//! file holds every byte SQLite wrote. What is held at any moment is only
//! frames of a transaction not yet committed (pages spilled from the
//! cache), past the published header: a process killed then leaves a WAL
//! without some of them, as a kill a moment earlier would, and recovery
//! keeps only commits whose frames are whole; a rolled-back transaction's
//! are dropped when the lock is released, never written over another
//! connection's commit. The simulator's disk (`sim::disk`), which reads
//! the file after each commit, and a power loss see the bytes they saw
//! before this module.
//!
//! Hand-written over `libsqlite3-sys` (rusqlite's `ffi`): the Rust VFS
//! crates (`sqlite-vfs`, `sqlite-plugin`) implement a whole VFS of their
//! own — its locks, its shared memory — where this needs unix's, and one
//! write gathered on one kind of file.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use crate::limits::WAL_GATHER_BYTES_MAX;

/// The VFS's name, as connections name it when they open.
pub(super) const VFS_NAME: &str = "engine-walbuf";
const VFS_C_NAME: &CStr = c"engine-walbuf";

/// A frame's header in the WAL (SQLite's WAL format).
const FRAME_HEADER_BYTES: usize = 24;

/// What a WAL write does with the gathered frames.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Gathered; written now when it completes a commit frame.
    Gather { flush: bool },
    /// Not a frame being appended: written as it comes, after the frames
    /// gathered before it.
    Direct,
}

/// The frames gathered for one write, contiguous from `start`.
#[derive(Default)]
struct Gathered {
    start: i64,
    bytes: Vec<u8>,
    /// Where the bytes written through this file end, gathered ones
    /// included, since its write transaction began (or it opened): a
    /// write below it rewrites a frame (the checksums a commit recomputes,
    /// a page written again), so it goes as it comes, never held past
    /// the commit that makes it.
    high: i64,
    /// The last write was a frame's header: the next contiguous one is its page.
    header_open: bool,
    /// That header marks a commit.
    commit: bool,
}

impl Gathered {
    fn end(&self) -> i64 {
        self.start + self.bytes.len() as i64
    }

    /// Does a write at `offset` go on from the gathered bytes?
    fn continues(&self, offset: i64) -> bool {
        self.bytes.is_empty() || offset == self.end()
    }

    /// Where a write of `data` at `offset` goes (the gathered bytes are
    /// empty or end at `offset`): a decision, nothing written.
    fn step(&mut self, data: &[u8], offset: i64) -> Step {
        if offset < self.high || (!self.header_open && data.len() != FRAME_HEADER_BYTES) {
            return Step::Direct;
        }
        self.high = offset + data.len() as i64;
        if self.bytes.is_empty() {
            self.start = offset;
        }
        if self.header_open {
            // The page of the frame whose header came last.
            self.bytes.extend_from_slice(data);
            self.header_open = false;
            // Written before another frame of this size would not fit.
            let full = self.bytes.len() + FRAME_HEADER_BYTES + data.len() > WAL_GATHER_BYTES_MAX;
            return Step::Gather { flush: self.commit || full };
        }
        // Bytes 4..8: the database size after a commit, zero otherwise.
        // (`data` is a whole header here: the length was checked above.)
        self.commit = data.get(4..8).is_some_and(|size| size != [0, 0, 0, 0]);
        self.header_open = true;
        self.bytes.extend_from_slice(data);
        Step::Gather { flush: false }
    }

    /// A write made as it came (`Direct`): the WAL's header at 0 starts
    /// the file again, its frames from 32 on are appends.
    fn wrote(&mut self, offset: i64, len: usize) {
        let end = offset + len as i64;
        self.high = if offset == 0 { end } else { self.high.max(end) };
    }

    /// The file cut to `size`: nothing of it is left past `size`.
    fn truncated(&mut self, size: i64) {
        self.high = self.high.min(size);
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.header_open = false;
        self.commit = false;
    }

    /// The write lock released: what is gathered then is a rolled-back
    /// transaction's (a commit frame's page always writes, see `flush`),
    /// dropped, and the next transaction's frames are its own.
    fn discard(&mut self) {
        self.clear();
        self.high = 0;
    }
}

/// Our file: SQLite's `sqlite3_file` first (its methods ours), the
/// gathered frames, then unix's file in the same allocation.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    gathered: *mut Gathered,
    inner: *mut ffi::sqlite3_file,
    /// The database file of the same connection (`db.rs`), null if none.
    db: *mut db::DbFile,
}

/// Where unix's file starts in ours: after `WalFile` or `DbFile`, aligned to 8.
const INNER_AT: usize = max(std::mem::size_of::<WalFile>(), std::mem::size_of::<db::DbFile>()).next_multiple_of(8);

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// Unix's VFS, ours registered over it (once; `None` when there is no "unix").
struct Vfs {
    unix: *mut ffi::sqlite3_vfs,
}

// SAFETY: SQLite's VFS object, never freed and never changed; SQLite
// calls it from any thread.
unsafe impl Send for Vfs {}
unsafe impl Sync for Vfs {}

static VFS: OnceLock<Option<Vfs>> = OnceLock::new();

/// Register the VFS (once, not as the default): whether it is there. A
/// connection opened without it writes as SQLite does alone.
pub(super) fn registered() -> bool {
    VFS.get_or_init(register).is_some()
}

fn register() -> Option<Vfs> {
    // SAFETY: sqlite3_vfs_find("unix") returns unix's VFS or NULL; the
    // objects it returns live as long as the process. Our copy is leaked
    // (it must outlive every connection) once sqlite3_vfs_register keeps
    // the pointer, and freed if it refuses it.
    unsafe {
        let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
        if unix.is_null() {
            return None;
        }
        let mut ours = ptr::read(unix);
        ours.szOsFile = c_int::try_from(INNER_AT).ok()?.checked_add((*unix).szOsFile)?;
        ours.zName = VFS_C_NAME.as_ptr();
        ours.pNext = ptr::null_mut();
        ours.pAppData = unix.cast();
        // Every other method is unix's own: they ignore the VFS they are
        // given but for xOpen (its locking style), wrapped below.
        ours.xOpen = Some(open);
        let ours = Box::into_raw(Box::new(ours));
        if ffi::sqlite3_vfs_register(ours, 0) != ffi::SQLITE_OK {
            drop(Box::from_raw(ours));
            return None;
        }
        Some(Vfs { unix })
    }
}

fn unix_vfs() -> *mut ffi::sqlite3_vfs {
    VFS.get().and_then(|v| v.as_ref()).map_or(ptr::null_mut(), |v| v.unix)
}

/// xOpen: unix opens every file in our allocation; a WAL is wrapped, and
/// a main database file (`db.rs`) so that its write lock reaches the WAL.
unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let unix = unix_vfs();
    // SAFETY: registered only with `unix` found, so it is not null here;
    // `file` is szOsFile bytes (INNER_AT + unix's), SQLite's to give.
    let Some(unix_open) = (unsafe { unix.as_ref() }).and_then(|u| u.xOpen) else { return ffi::SQLITE_CANTOPEN };
    if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
        // SAFETY: as for the WAL below (`db::open`).
        return unsafe { db::open(unix_open, unix, name, file, flags, out_flags) };
    }
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // SAFETY: unix's file at the start of the allocation, its methods
        // unix's: SQLite never calls ours on it.
        return unsafe { unix_open(unix, name, file, flags, out_flags) };
    }
    // SAFETY: `file` holds INNER_AT + unix's szOsFile bytes, aligned as
    // SQLite aligns an sqlite3_file (8); WalFile's fields are written
    // before SQLite reads them, and `inner` points inside the allocation.
    unsafe {
        let wal = file.cast::<WalFile>();
        let inner = file.cast::<u8>().add(INNER_AT).cast::<ffi::sqlite3_file>();
        (*inner).pMethods = ptr::null();
        let rc = unix_open(unix, name, inner, flags, out_flags);
        if (*inner).pMethods.is_null() {
            // Nothing opened: SQLite calls no method of ours.
            (*wal).base.pMethods = ptr::null();
            return rc;
        }
        (*wal).gathered = Box::into_raw(Box::default());
        (*wal).inner = inner;
        (*wal).db = ptr::null_mut();
        (*wal).base.pMethods = &WAL_METHODS;
        // `name` is the very pointer SQLite's pager passed, which
        // sqlite3_database_file_object needs.
        if !name.is_null() {
            db::link(ffi::sqlite3_database_file_object(name), wal);
        }
        rc
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 1: no shared memory and no memory map on a WAL (wal.c uses
    // those of the database file).
    iVersion: 1,
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
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// Our file's parts: its gathered frames and unix's file.
///
/// SAFETY (callers): `file` is a WAL file `open` set up, not yet closed;
/// SQLite calls one method of a file at a time.
unsafe fn parts<'a>(file: *mut ffi::sqlite3_file) -> (&'a mut Gathered, *mut ffi::sqlite3_file) {
    // SAFETY: as the caller promises; `gathered` is the Box made in `open`.
    unsafe {
        let wal = file.cast::<WalFile>();
        (&mut *(*wal).gathered, (*wal).inner)
    }
}

/// Unix's methods of its file.
unsafe fn methods<'a>(inner: *mut ffi::sqlite3_file) -> &'a ffi::sqlite3_io_methods {
    // SAFETY: `open` wraps only a file unix opened (its methods set).
    unsafe { &*(*inner).pMethods }
}

/// Write the gathered frames with one write of unix's; they are dropped
/// whatever it returns (a failed write fails SQLite's transaction, whose
/// frames then lie past the published header, as without gathering).
unsafe fn flush(gathered: &mut Gathered, inner: *mut ffi::sqlite3_file) -> c_int {
    if gathered.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    let mut rc = ffi::SQLITE_OK;
    let mut offset = gathered.start;
    // One piece (`step` keeps the gathered bytes within unix's most); more
    // only if a frame were larger than its page size.
    for piece in gathered.bytes.chunks(WAL_GATHER_BYTES_MAX) {
        // SAFETY: `inner` is unix's open file; `piece` is `len` bytes.
        rc = unsafe { write_through(inner, piece, offset) };
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += piece.len() as i64;
    }
    gathered.clear();
    rc
}

/// One write of unix's (one `pwrite64`, `piece` within its most).
unsafe fn write_through(inner: *mut ffi::sqlite3_file, piece: &[u8], offset: i64) -> c_int {
    let Ok(len) = c_int::try_from(piece.len()) else { return ffi::SQLITE_IOERR_WRITE };
    count::made();
    // SAFETY: `inner` is unix's open file; the buffer holds `len` bytes.
    match unsafe { methods(inner) }.xWrite {
        Some(w) => unsafe { w(inner, piece.as_ptr().cast(), len, offset) },
        None => ffi::SQLITE_IOERR_WRITE,
    }
}

unsafe extern "C" fn write(file: *mut ffi::sqlite3_file, data: *const c_void, amount: c_int, offset: i64) -> c_int {
    // SAFETY: SQLite's WAL file (see `parts`); `data` holds `amount` bytes.
    let (gathered, inner) = unsafe { parts(file) };
    let len = usize::try_from(amount).unwrap_or(0);
    let data = match data.is_null() || len == 0 {
        true => &[][..],
        false => unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) },
    };
    count::asked();
    if !gathered.continues(offset) {
        let rc = unsafe { flush(gathered, inner) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    match gathered.step(data, offset) {
        Step::Gather { flush: false } => ffi::SQLITE_OK,
        Step::Gather { flush: true } => unsafe { flush(gathered, inner) },
        Step::Direct => {
            let rc = unsafe { flush(gathered, inner) };
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            gathered.wrote(offset, data.len());
            // SAFETY: as above; SQLite's own write, passed on whole.
            unsafe { write_through(inner, data, offset) }
        }
    }
}

/// Every other call on the file: the gathered frames written first.
macro_rules! flushed_first {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> c_int {
            // SAFETY: SQLite's WAL file (see `parts`), arguments passed on.
            let (gathered, inner) = unsafe { parts(file) };
            let rc = unsafe { flush(gathered, inner) };
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            match unsafe { methods(inner) }.$method {
                Some(m) => unsafe { m(inner, $($arg),*) },
                None => ffi::SQLITE_IOERR,
            }
        }
    };
}

flushed_first!(read, xRead, (buf: *mut c_void, amount: c_int, offset: i64));
flushed_first!(truncate_through, xTruncate, (size: i64));

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: SQLite's WAL file (see `parts`).
    let (gathered, _) = unsafe { parts(file) };
    gathered.truncated(size);
    unsafe { truncate_through(file, size) }
}
flushed_first!(sync, xSync, (flags: c_int));
flushed_first!(file_size, xFileSize, (size: *mut i64));
flushed_first!(lock, xLock, (level: c_int));
flushed_first!(unlock, xUnlock, (level: c_int));
flushed_first!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int));
flushed_first!(file_control, xFileControl, (op: c_int, arg: *mut c_void));

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite's WAL file (see `parts`); a question, nothing written.
    let (_, inner) = unsafe { parts(file) };
    unsafe { methods(inner) }.xSectorSize.map_or(0, |m| unsafe { m(inner) })
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: as `sector_size`.
    let (_, inner) = unsafe { parts(file) };
    unsafe { methods(inner) }.xDeviceCharacteristics.map_or(0, |m| unsafe { m(inner) })
}

/// xClose: the gathered frames written, unix's file closed, ours freed.
unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite's WAL file (see `parts`), closed once: after this no
    // method of it is called, so the Box is freed here and only here.
    unsafe {
        let (gathered, inner) = parts(file);
        let flushed = flush(gathered, inner);
        let closed = methods(inner).xClose.map_or(ffi::SQLITE_OK, |m| m(inner));
        let wal = file.cast::<WalFile>();
        db::unlink(wal);
        drop(Box::from_raw((*wal).gathered));
        (*wal).gathered = ptr::null_mut();
        (*wal).base.pMethods = ptr::null();
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

/// The WAL writes asked of this thread's connections and made (tests).
mod count {
    #[cfg(test)]
    thread_local! {
        pub static ASKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        pub static MADE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    pub fn asked() {
        #[cfg(test)]
        ASKED.with(|c| c.set(c.get() + 1));
    }

    pub fn made() {
        #[cfg(test)]
        MADE.with(|c| c.set(c.get() + 1));
    }
}

#[cfg(test)]
fn counted() -> (u64, u64) {
    (count::ASKED.with(|c| c.get()), count::MADE.with(|c| c.get()))
}

mod db;

#[cfg(test)]
mod tests;
