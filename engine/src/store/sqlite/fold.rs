//! The WAL folded into the store file beside the writer, not on its thread.
//!
//! The writer commits with `synchronous=NORMAL` for most tasks, so its
//! commits wait for no disk; but its automatic checkpoint (every
//! [`BACKSTOP_FRAMES`] WAL pages) waits for three flushes on the committing
//! thread, and until it comes the WAL grows (about 40 MiB a 1,000-task
//! chain): every commit's write lands in new page-cache pages, and the
//! release's `TRUNCATE` checkpoint flushes and frees the whole of it
//! (bench/README.md, issue 38's thirteenth round).
//!
//! Here a thread with a connection of its own (the checkpointer) folds the
//! WAL in with a `PASSIVE` checkpoint once the writer's commits have put
//! [`FOLD_FRAMES`] pages in it: it never takes the write lock, never waits
//! for the writer or a reader, and flushes the WAL before it copies a page
//! and the store file after (SQLite's own checkpoint: the power-loss
//! argument is SQLite's). When every frame is folded in and no reader
//! holds the WAL back, the writer's next transaction starts the WAL again
//! from its beginning (SQLite's `walRestartLog`, one flush of the WAL's
//! header on the writer's thread) and writes over pages already cached
//! and blocks already allocated.
//! A checkpoint writes no row: what is committed, and when, is as before.
//!
//! That start again needs the WAL wholly folded when the writer's
//! transaction begins, and a pass (two flushes) seldom fits between two
//! commits: the checkpointer lost that race in most folds, and the WAL grew
//! to the backstop (bench/README.md, issue 38's fourteenth round). So once
//! its passes have folded all but the frames a pass's own time let commits
//! add (at most [`TAIL_FRAMES`], or [`LAST_TAIL_FRAMES`] after its last
//! pass), the checkpointer hands the rest to the writer: after its next
//! commit, on its own connection and thread, the writer runs the same
//! `PASSIVE` checkpoint over those few frames (the WAL flushed, the pages
//! copied, the store file flushed: SQLite's checkpoint, as the backstop's),
//! and no commit of the writer's can come between that and its next
//! transaction, which starts the WAL again. That checkpoint runs inside the
//! writer's commit call, so the call that takes a tail (an `external`
//! intent's too) waits for it, once a fold.
//!
//! The writer learns of its WAL's size from SQLite's WAL hook, called after
//! each commit with the frames in the WAL: it asks the checkpointer (once,
//! until the checkpointer is done), and at [`BACKSTOP_FRAMES`] checkpoints
//! itself as SQLite's `wal_autocheckpoint` would (the backstop, should the
//! checkpointer fall behind or fail). The thread is made at the first ask,
//! so a command that commits little makes none, and ended before the
//! lease is given back (`Db::release_lease`), so the release's checkpoint
//! and the mark's record of a closed store see no other checkpointer.
//! A failure of the checkpointer loses nothing committed (the WAL keeps
//! it; the backstop and the release fold it in); it is told once, when the
//! lease is given back.

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rusqlite::{ffi, Connection, OpenFlags};

use super::open::connect;

/// WAL pages (about 8 MiB of 4 KiB pages) after which the checkpointer
/// folds the WAL in: a chain task writes about 15, so about every 130
/// tasks. Each fold costs the writer one flush (the WAL's header when it
/// starts again); fewer, larger folds leave more of the WAL in new pages.
pub(super) const FOLD_FRAMES: u32 = 2_000;

/// WAL pages after which the writer checkpoints itself, as before the
/// checkpointer (`lease::AUTOCHECKPOINT_ON`: a crash's recovery reads at
/// most about 40 MiB of WAL).
pub(super) const BACKSTOP_FRAMES: u32 = 10_000;

/// `PASSIVE` passes one fold makes at most: a pass folds what the WAL held
/// when it began, and a commit during it leaves the WAL not wholly folded
/// (the writer then does not start it again), so the next pass folds
/// that commit's frames, fewer each time. The last pass hands what is left
/// to the writer only if it is at most [`LAST_TAIL_FRAMES`]; more, the fold
/// ends as a fold the writer does not finish (the next ask folds the rest).
const PASSES_MAX: u32 = 16;

/// Frames left unfolded (the writer's commits since a pass began) that the
/// checkpointer hands to the writer rather than pass again: 1 MiB of WAL,
/// a few dozen builtin steps at most, so the writer's own checkpoint copies
/// at most that many distinct pages (most frames rewrite the same few)
/// besides its two flushes.
pub(super) const TAIL_FRAMES: u32 = 256;

/// Frames the last pass may hand to the writer (2 MiB of WAL): under writes
/// that outpace every pass, the writer copies no more than that on its own
/// thread; the fold ends without it instead.
pub(super) const LAST_TAIL_FRAMES: u32 = FOLD_FRAMES / 4;

/// Times the writer tries a handed tail that another checkpoint keeps busy
/// before it gives the tail up (the next fold is asked as after any fold).
const TAIL_TRIES: u32 = 4;

/// Does a commit that left `frames` pages in the WAL checkpoint on the
/// writer's thread (SQLite's automatic checkpoint, the backstop)?
fn backstop(frames: u32) -> bool {
    frames >= BACKSTOP_FRAMES
}

#[derive(Debug, Default)]
struct State {
    /// Asked and not yet done.
    asked: bool,
    /// The WAL's frames after the writer's last commit.
    last: u32,
    /// The times the WAL started again (seen by the writer's hook): a fold
    /// that ends after one keeps the floor at 0, not what its pass read of
    /// the WAL before it.
    starts: u32,
    stop: bool,
    /// The WAL's frames when the last fold ended: the next ask waits for
    /// the WAL to grow past it by a fold's worth (a reader holding frames
    /// back, another checkpointer busy), unless it started again (fewer).
    floor: u32,
    /// The checkpointer's fold ended with frames left for the writer to
    /// fold after its next commit (`tail_done`).
    tail: bool,
    /// The writer's tries of the handed tail that found another checkpoint
    /// busy (at [`TAIL_TRIES`] it gives the tail up).
    tail_busy: u32,
    /// The first failure, told when the lease is given back.
    failed: Option<String>,
    /// Folds that left the WAL wholly in the store file, passes made, and
    /// the writer's folds of what a fold left that left the WAL whole.
    folded: u32,
    passes: u32,
    tails: u32,
}

/// What the writer does after a commit.
#[derive(Debug, PartialEq, Eq)]
enum AfterCommit {
    /// Fold the frames the checkpointer's last fold left (the tail).
    FoldTail,
    /// Ask the checkpointer for a fold.
    Ask,
    Nothing,
}

impl State {
    /// A commit left `frames` in the WAL: does the writer fold what the
    /// last fold left (the tail, taken), ask for a fold, or neither?
    fn after_commit(&mut self, frames: u32, fold_frames: u32) -> AfterCommit {
        if std::mem::take(&mut self.tail) {
            self.seen(frames);
            return AfterCommit::FoldTail;
        }
        if self.ask(frames, fold_frames) {
            AfterCommit::Ask
        } else {
            AfterCommit::Nothing
        }
    }

    fn seen(&mut self, frames: u32) {
        if frames < self.last {
            // The WAL started again since the last commit.
            self.floor = 0;
            self.starts = self.starts.wrapping_add(1);
        }
        self.last = frames;
    }

    /// Should a commit that left `frames` in the WAL ask for a fold?
    fn ask(&mut self, frames: u32, fold_frames: u32) -> bool {
        self.seen(frames);
        let due = !self.asked && !self.stop && self.failed.is_none() && frames >= self.floor + fold_frames;
        self.asked |= due;
        due
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    path: PathBuf,
    /// The store file (device, inode) when the lease was taken on it: the
    /// checkpointer opens the path again and folds nothing into another.
    file: Option<(u64, u64)>,
    fold_frames: u32,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here panics while holding it; a poisoned lock's data is whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The writer connection's checkpointer, from the lease taken to the lease
/// given back.
pub(super) struct Checkpointer {
    /// The WAL hook's argument: it lives as long as the hook is installed
    /// (`stop` removes the hook; `Db` drops its connection before this).
    shared: Box<Arc<Shared>>,
}

/// What a checkpointer did, told when it is stopped.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Done {
    pub folded: u32,
    pub passes: u32,
    pub tails: u32,
    pub failed: Option<String>,
}

impl Checkpointer {
    /// Install the WAL hook on the writer's `conn` (after the lease's
    /// `AUTOCHECKPOINT_ON`, which it replaces with the same backstop).
    pub(super) fn install(conn: &Connection, path: &Path, file: Option<(u64, u64)>, fold_frames: u32) -> Checkpointer {
        let shared = Box::new(Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            path: path.to_path_buf(),
            file,
            fold_frames,
            thread: Mutex::new(None),
        }));
        let arg = &*shared as *const Arc<Shared> as *mut c_void;
        // SAFETY: the handle is the open writer connection's; `arg` points
        // into the box this value owns, which outlives the hook (`stop`
        // removes it, and `Db` drops the connection before the box).
        unsafe { ffi::sqlite3_wal_hook(conn.handle(), Some(on_commit), arg) };
        Checkpointer { shared }
    }

    /// Remove the hook from `conn`, end the thread (after its current pass)
    /// and tell what it did.
    pub(super) fn stop(self, conn: &Connection) -> Done {
        // SAFETY: as in `install`; no hook refers to the box after this.
        unsafe { ffi::sqlite3_wal_hook(conn.handle(), None, std::ptr::null_mut()) };
        self.end()
    }

    fn end(&self) -> Done {
        lock(&self.shared.state).stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = lock(&self.shared.thread).take() {
            if thread.join().is_err() {
                lock(&self.shared.state).failed.get_or_insert_with(|| "the checkpointer's thread panicked".into());
            }
        }
        let mut state = lock(&self.shared.state);
        Done { folded: state.folded, passes: state.passes, tails: state.tails, failed: state.failed.take() }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Not stopped by the release (an error path, a panic): the thread
        // ends; what it did is not told.
        let _ = self.end();
    }
}

/// SQLite's WAL hook on the writer's connection, after each commit.
unsafe extern "C" fn on_commit(arg: *mut c_void, db: *mut ffi::sqlite3, name: *const c_char, frames: c_int) -> c_int {
    // SAFETY: `arg` is the `Arc<Shared>` `install` gave, alive while the
    // hook is installed.
    let shared = unsafe { &*(arg as *const Arc<Shared>) };
    let frames = frames.max(0) as u32;
    if backstop(frames) {
        // The backstop folds what a handed tail would have.
        lock(&shared.state).tail = false;
        // SAFETY: `db` and `name` are the ones SQLite called the hook
        // with; SQLite's default hook makes this same call.
        unsafe { ffi::sqlite3_wal_checkpoint(db, name) };
        return ffi::SQLITE_OK;
    }
    let next = lock(&shared.state).after_commit(frames, shared.fold_frames);
    match next {
        AfterCommit::FoldTail => {
            // SAFETY: as above: the hook's own `db` and `name`, between the
            // writer's transactions (SQLite's default hook checkpoints here).
            let end = unsafe { checkpoint_passive(db, name) };
            tail_done(shared, end);
        }
        AfterCommit::Ask => ask(shared),
        AfterCommit::Nothing => {}
    }
    ffi::SQLITE_OK
}

/// The writer's fold of what the checkpointer's fold left ended: whole,
/// its next transaction starts the WAL again; a reader holding frames
/// back, the next ask waits as after any fold; busy (another checkpoint),
/// tried again after the next commit, [`TAIL_TRIES`] times at most (then
/// the next ask waits as after any fold); a failure is told at the
/// release, and the backstop folds.
fn tail_done(shared: &Shared, end: Result<Option<(u32, u32)>, String>) {
    let mut state = lock(&shared.state);
    match end {
        Ok(Some((log, done))) => state.tails += u32::from(log == done),
        Ok(None) => {
            state.tail_busy += 1;
            state.tail = !state.stop && state.tail_busy < TAIL_TRIES;
        }
        Err(why) => {
            state.failed.get_or_insert(why);
        }
    }
}

fn ask(shared: &Arc<Shared>) {
    let mut thread = lock(&shared.thread);
    if thread.is_none() {
        let mine = Arc::clone(shared);
        match std::thread::Builder::new().name("ledger-fold".into()).spawn(move || run(&mine)) {
            Ok(t) => *thread = Some(t),
            // No thread to be had (a process limit): the backstop folds.
            Err(e) => lock(&shared.state).failed = Some(format!("no thread for the checkpointer: {e}")),
        }
    }
    shared.wake.notify_all();
}

/// The checkpointer's thread: a fold at every ask, until stopped.
fn run(shared: &Shared) {
    let conn = match open(shared) {
        Ok(conn) => conn,
        Err(e) => return finish(shared, 0, Err(e)),
    };
    while let Some(starts) = wait_for_ask(shared) {
        let end = fold(&conn, shared, &mut || {});
        finish(shared, starts, end);
    }
}

fn open(shared: &Shared) -> Result<Connection, String> {
    let conn = connect(&shared.path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| e.to_string())?;
    // Not the writer's file (replaced since it was opened): fold nothing.
    if shared.file.is_none() || super::file_id(&shared.path) != shared.file {
        return Err(format!("{} is not the file the writer opened", shared.path.display()));
    }
    // The checkpoint's flushes follow the connection's setting: NORMAL
    // (or FULL) flushes the WAL before a page is copied and the store
    // file after, as the writer's own checkpoint does. No map: with one,
    // each pass that grows the store file resizes it first (SQLite's size
    // hint, an `ftruncate` and a new map) for reads it never makes.
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA mmap_size = 0;")
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

/// Wait until asked (the WAL's starts then) or stopped (`None`).
fn wait_for_ask(shared: &Shared) -> Option<u32> {
    let mut state = lock(&shared.state);
    while !state.asked && !state.stop {
        state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
    }
    (!state.stop).then_some(state.starts)
}

/// One fold: passes until the WAL is wholly in the store file with no
/// commit since (then the writer's next transaction starts the WAL again),
/// a pass folds nothing more (a reader holds the rest back), what is left
/// is the writer's to fold (`hand_off`), or stopped. A pass reports the
/// WAL as it was when it began, so "whole" needs the writer's last commit
/// to have left no more frames than the pass folded, or two passes that
/// found the same WAL (the second, with nothing to fold, flushes nothing),
/// or a pass that found fewer frames than the one before (the writer
/// started the WAL again: it was whole). The frames in the WAL at the end;
/// `Err` a failure. `landed` runs after each pass, before the writer's last
/// commit is read (the tests commit there, as a commit during a pass would).
fn fold(conn: &Connection, shared: &Shared, landed: &mut dyn FnMut()) -> Result<Folded, String> {
    let mut before: Option<(u32, u32)> = None;
    for pass in 1..=PASSES_MAX {
        let busy = Folded { log: None, whole: false, tail: false, passes: pass };
        let Some((log, done)) = passive(conn)? else { return Ok(busy) };
        landed();
        let (last, stop) = {
            let state = lock(&shared.state);
            (state.last, state.stop)
        };
        let (whole, stuck) = judge_pass(before, log, done);
        let whole = whole || (log == done && last == done);
        let tail = hand_off(&Pass { whole, stuck, last_pass: pass == PASSES_MAX, last, done });
        if whole || stuck || tail || stop {
            return Ok(Folded { log: Some(log), whole, tail, passes: pass });
        }
        before = Some((log, done));
    }
    Ok(Folded { log: None, whole: false, tail: false, passes: PASSES_MAX })
}

/// A pass of a fold, judged.
struct Pass {
    /// Every frame folded in, no commit since (or the WAL started again).
    whole: bool,
    /// Folded nothing more than the pass before: a reader holds frames back.
    stuck: bool,
    /// The fold's last pass ([`PASSES_MAX`]).
    last_pass: bool,
    /// The WAL's frames after the writer's last commit.
    last: u32,
    /// The frames the pass left folded in.
    done: u32,
}

/// Does the checkpointer hand the rest (the frames commits added during
/// its passes) to the writer? When they are at most [`TAIL_FRAMES`], or
/// [`LAST_TAIL_FRAMES`] after the last pass. Not when the pass was judged
/// `stuck`; a first pass cannot be (it has none before it to compare), so
/// a reader holding frames back may get a tail handed over, and the
/// writer's checkpoint then folds what the reader lets it.
fn hand_off(p: &Pass) -> bool {
    let left = p.last.saturating_sub(p.done);
    !p.whole && !p.stuck && (left <= TAIL_FRAMES || (p.last_pass && left <= LAST_TAIL_FRAMES))
}

/// After a pass that found `log` frames and left `done` folded in, the
/// pass `before` it: is the WAL wholly folded with no commit since, or
/// started again since (`whole`: the fold ends, else each pass more would
/// let the writer start it again, one flush more on its thread), or did
/// the pass fold nothing more while frames are left (`stuck`: a reader
/// holds them back)?
fn judge_pass(before: Option<(u32, u32)>, log: u32, done: u32) -> (bool, bool) {
    let restarted = before.is_some_and(|(l, _)| log < l);
    let whole = restarted || (log == done && before.is_some_and(|(l, _)| l == log));
    let stuck = !whole && log != done && before.is_some_and(|(_, d)| d == done);
    (whole, stuck)
}

struct Folded {
    /// The WAL's frames after the last pass (`None`: not known, busy).
    log: Option<u32>,
    /// Every frame folded in.
    whole: bool,
    /// The rest handed to the writer.
    tail: bool,
    passes: u32,
}

/// One `PASSIVE` checkpoint: the WAL's frames and those folded in, or
/// `None` when another checkpoint holds the lock (SQLite serialises them).
fn passive(conn: &Connection) -> Result<Option<(u32, u32)>, String> {
    // SAFETY: the handle is this thread's open connection; a null database
    // name means every one.
    unsafe { checkpoint_passive(conn.handle(), std::ptr::null()) }
}

/// [`passive`] on connection `db`, database `name`.
///
/// # Safety
/// `db` is an open connection no other thread uses meanwhile, outside a
/// transaction; `name` is null or the name of one of its databases.
unsafe fn checkpoint_passive(db: *mut ffi::sqlite3, name: *const c_char) -> Result<Option<(u32, u32)>, String> {
    let (mut log, mut done): (c_int, c_int) = (0, 0);
    // SAFETY: as the caller promises; the out pointers are valid locals.
    let rc = unsafe { ffi::sqlite3_wal_checkpoint_v2(db, name, ffi::SQLITE_CHECKPOINT_PASSIVE, &mut log, &mut done) };
    // The connection reports extended codes (`SQLITE_BUSY_SNAPSHOT`, ...).
    match rc & 0xff {
        ffi::SQLITE_OK => Ok(Some((log.max(0) as u32, done.max(0) as u32))),
        ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED => Ok(None),
        _ => Err(format!("{} (SQLite code {rc})", ffi::Error::new(rc))),
    }
}

/// A fold asked when the WAL had started `starts` times ended.
fn finish(shared: &Shared, starts: u32, end: Result<Folded, String>) {
    let mut state = lock(&shared.state);
    state.asked = false;
    match end {
        Ok(f) => {
            state.passes += f.passes;
            state.folded += u32::from(f.whole);
            state.tail = f.tail && !state.stop;
            state.tail_busy = 0;
            state.floor = floor_after(&state, starts, f.log, shared.fold_frames);
        }
        Err(why) => {
            state.failed.get_or_insert(why);
        }
    }
}

/// The floor after a fold asked at `starts` that left `log` frames (`None`:
/// busy, wait for a fold's worth more). The WAL started again meanwhile:
/// 0, as the hook set it, not what a pass read of the WAL before that.
fn floor_after(state: &State, starts: u32, log: Option<u32>, fold_frames: u32) -> u32 {
    if state.starts != starts {
        return 0;
    }
    log.unwrap_or(state.floor + fold_frames)
}

#[cfg(test)]
mod tests;
