use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rusqlite::Connection;

use super::*;
use crate::store::events::{Event, EventKind};
use crate::store::sqlite::Db;
use crate::store::Durability;

#[test]
fn the_writer_checkpoints_itself_at_the_backstop() {
    assert!(!backstop(BACKSTOP_FRAMES - 1));
    assert!(backstop(BACKSTOP_FRAMES));
}

#[test]
fn the_writer_asks_once_until_the_fold_ends_and_again_a_folds_worth_past_it() {
    let mut s = State::default();
    assert!(!s.ask(19, 20), "not a fold's worth yet");
    assert!(s.ask(20, 20));
    assert!(!s.ask(25, 20), "asked and not done: not again");
    // The fold ended with 30 frames in the WAL (a reader held them back).
    s.asked = false;
    s.floor = 30;
    assert!(!s.ask(31, 20), "not a fold's worth past what the last fold left");
    assert!(s.ask(50, 20));
    s.asked = false;
    s.floor = 50;
    assert!(!s.ask(4, 20), "fewer frames than after the last commit: the WAL started again");
    assert_eq!(s.floor, 0);
    assert!(s.ask(51, 20), "a fold's worth since it started again, however many the last fold left");
    let mut failed = State { failed: Some("x".into()), ..State::default() };
    assert!(!failed.ask(5_000, 20), "a failed checkpointer is asked nothing more: the backstop folds");
    let mut stopped = State { stop: true, ..State::default() };
    assert!(!stopped.ask(5_000, 20));
}

#[test]
fn a_fold_is_whole_only_when_two_passes_found_the_same_wal() {
    assert_eq!(judge_pass(None, 40, 40), (false, false), "a commit may have come during the pass");
    assert_eq!(judge_pass(Some((40, 40)), 40, 40), (true, false));
    assert_eq!(judge_pass(Some((40, 40)), 44, 44), (false, false), "a commit came: once more");
    assert_eq!(judge_pass(Some((40, 30)), 44, 30), (false, true), "nothing more folded: a reader holds it");
    assert_eq!(judge_pass(Some((40, 30)), 44, 40), (false, false), "progress: once more");
    assert_eq!(judge_pass(Some((40, 40)), 3, 3), (true, false), "fewer: the writer started the WAL again");
    assert_eq!(judge_pass(Some((40, 30)), 3, 0), (true, false), "started again: whole, not stuck");
}

#[test]
fn the_checkpointer_hands_the_writer_a_few_frames_or_a_bounded_rest_after_its_last_pass() {
    let pass = |last_pass, last| Pass { whole: false, stuck: false, last_pass, last, done: 100 };
    assert!(hand_off(&pass(false, 100 + TAIL_FRAMES)), "a few tasks' commits came during the pass");
    assert!(!hand_off(&pass(false, 101 + TAIL_FRAMES)), "more: pass again, off the writer's thread");
    assert!(hand_off(&pass(true, 100 + LAST_TAIL_FRAMES)), "the last pass: a bounded rest");
    assert!(!hand_off(&pass(true, 101 + LAST_TAIL_FRAMES)), "more: the fold ends, the writer copies none of it");
    assert!(!hand_off(&Pass { whole: true, ..pass(false, 100) }), "whole: the next commit starts the WAL again");
    assert!(!hand_off(&Pass { stuck: true, ..pass(true, 120) }), "a reader holds the rest back");
}

#[test]
fn the_writer_folds_a_handed_tail_after_its_next_commit_and_asks_nothing_then() {
    let mut s = State { tail: true, last: 40, ..State::default() };
    assert_eq!(s.after_commit(45, 20), AfterCommit::FoldTail, "the tail, taken; no ask beside it");
    assert!(!s.tail && s.last == 45);
    assert_eq!(s.after_commit(3, 20), AfterCommit::Nothing, "started again: counted from 0");
    assert_eq!((s.floor, s.starts), (0, 1));
    assert_eq!(s.after_commit(23, 20), AfterCommit::Ask, "a fold's worth since");
}

#[test]
fn a_tail_another_checkpoint_keeps_busy_is_given_up_after_a_few_tries() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Shared {
        state: Mutex::new(State { tail: true, ..State::default() }),
        wake: Condvar::new(),
        path: dir.path().join("engine.db"),
        file: None,
        fold_frames: 20,
        thread: Mutex::new(None),
    };
    for tried in 1..=TAIL_TRIES {
        assert_eq!(lock(&shared.state).after_commit(30 + tried, 20), AfterCommit::FoldTail, "try {tried}");
        tail_done(&shared, Ok(None));
    }
    let mut state = lock(&shared.state);
    assert!(!state.tail, "given up: {state:?}");
    assert_eq!(state.after_commit(40, 20), AfterCommit::Ask, "a fold is asked as after any fold");
}

#[test]
fn a_fold_that_ends_after_the_wal_started_again_keeps_the_floor_at_zero() {
    let mut s = State::default();
    assert!(s.ask(2_050, 2_000));
    let asked_at = s.starts;
    // The last pass read 2,050 frames; the writer then started the WAL
    // again and committed: its hook set the floor to 0.
    assert!(!s.ask(15, 2_000));
    assert_eq!(s.floor, 0);
    assert_eq!(floor_after(&s, asked_at, Some(2_050), 2_000), 0, "not the old WAL's frames");
    assert_eq!(floor_after(&s, asked_at, None, 2_000), 0, "busy, started again: 0 too");
    // No start again since the ask: what the pass left, or a fold's worth more.
    assert_eq!(floor_after(&s, s.starts, Some(30), 2_000), 30);
    assert_eq!(floor_after(&s, s.starts, None, 2_000), 2_000);
}

#[test]
fn a_checkpointer_folds_nothing_into_a_file_that_replaced_the_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store/engine.db");
    let (mut db, fence) = held(&path, 20);
    let _ = db.fold.take().unwrap().stop(&db.conn);
    // Another file's identity stands for a store file replaced under the writer.
    let other = dir.path().join("other");
    std::fs::write(&other, b"x").unwrap();
    db.fold = Some(Checkpointer::install(&db.conn, &path, super::super::file_id(&other), 20));
    let next = commit(&mut db, fence, 0, 100, false);
    let done = db.fold.take().unwrap().stop(&db.conn);
    assert_eq!(done.passes, 0, "{done:?}");
    assert!(done.failed.as_deref().is_some_and(|w| w.contains("not the file")), "{done:?}");
    db.release_lease(fence).unwrap();
    drop(db);
    assert_eq!(events_and_integrity(&path), (i64::from(next), "ok".to_string()));
}

fn event(n: u32) -> Event<'static> {
    Event::store(EventKind::RunStopping, serde_json::json!({"n": n, "pad": "x".repeat(3000)}))
}

/// A store with its lease taken, folded at `fold_frames` frames.
fn held(path: &Path, fold_frames: u32) -> (Db, crate::store::lease::Fence) {
    let mut db = Db::open_rw(path).unwrap();
    let fence = db.acquire_lease().unwrap().fence;
    let installed = db.fold.take().expect("a writer's checkpointer");
    assert_eq!(installed.stop(&db.conn), Done::default(), "nothing asked yet");
    db.fold = Some(Checkpointer::install(&db.conn, path, super::super::file_id(path), fold_frames));
    (db, fence)
}

fn shared(db: &Db) -> &Arc<Shared> {
    &db.fold.as_ref().unwrap().shared
}

/// Wait (bounded) until the checkpointer is not asked: its fold ended.
fn fold_ended(db: &Db) {
    for _ in 0..1_000 {
        if !lock(&shared(db).state).asked {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the fold did not end in 10 s");
}

/// The WAL header's checkpoint sequence: one more at every start again.
fn wal_starts(path: &Path) -> u32 {
    let wal = std::fs::read(path.with_file_name("engine.db-wal")).unwrap();
    u32::from_be_bytes(wal[12..16].try_into().unwrap())
}

fn events_and_integrity(path: &Path) -> (i64, String) {
    let conn = Connection::open(path).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    let n = conn.query_row("SELECT count(*) FROM events WHERE kind = 'run_stopping'", [], |r| r.get(0)).unwrap();
    (n, ok)
}

/// Commit `n` events (numbered from `from`), one a transaction, until the
/// checkpointer is asked (when `until_asked`).
fn commit(db: &mut Db, fence: crate::store::lease::Fence, from: u32, n: u32, until_asked: bool) -> u32 {
    for i in from..from + n {
        db.write(fence, Durability::Normal, |tx| tx.append_event(&event(i)).map(|_| ())).unwrap();
        if until_asked && lock(&shared(db).state).asked {
            return i + 1;
        }
    }
    from + n
}

#[test]
fn a_fold_lets_the_writer_start_the_wal_again_over_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store/engine.db");
    let (mut db, fence) = held(&path, 20);
    let wal = path.with_file_name("engine.db-wal");
    let mut next = commit(&mut db, fence, 0, 200, true);
    assert!(lock(&shared(&db).state).asked, "20 frames ask for a fold");
    fold_ended(&db);
    let size = std::fs::metadata(&wal).unwrap().len();
    for _ in 0..5 {
        // The WAL wholly folded in: the next commit starts it again.
        let starts = wal_starts(&path);
        next = commit(&mut db, fence, next, 1, false);
        assert_eq!(wal_starts(&path), starts + 1, "the WAL started again");
        fold_ended(&db);
        next = commit(&mut db, fence, next, 200, true);
        fold_ended(&db);
    }
    let grown = std::fs::metadata(&wal).unwrap().len();
    assert!(grown <= size + 64 * 1024, "written over, not grown: {size} -> {grown} bytes");
    let done = db.fold.take().unwrap().stop(&db.conn);
    assert!(done.folded >= 6 && done.failed.is_none(), "{done:?}");
    db.release_lease(fence).unwrap();
    drop(db);
    assert_eq!(events_and_integrity(&path), (i64::from(next), "ok".to_string()));
    assert_eq!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0, "the release truncated the WAL");
}

/// The WAL file's size, 0 when there is none.
fn wal_size(path: &Path) -> u64 {
    std::fs::metadata(path.with_file_name("engine.db-wal")).map(|m| m.len()).unwrap_or(0)
}

/// Issue 38, fourteenth round: commits that keep landing while the
/// checkpointer passes (each pass found frames a commit added during the
/// one before) left the WAL never wholly folded when the writer's next
/// transaction began, so the WAL grew to the backstop. The checkpointer
/// now hands the last few frames to the writer, whose next transaction
/// then starts the WAL again. Driven from this thread: the fold runs on a
/// connection of the test's, and commits land during its passes.
#[test]
fn commits_landing_during_every_pass_still_let_the_writer_start_the_wal_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store/engine.db");
    // The writer asks for no fold: this thread folds.
    let (mut db, fence) = held(&path, 1_000_000);
    let shared = Arc::clone(shared(&db));
    let conn = open(&shared).unwrap();
    let mut next = commit(&mut db, fence, 0, 1, false);
    let mut first = None;
    for round in 1..=5 {
        next = commit(&mut db, fence, next, 100, false);
        let asked_at = lock(&shared.state).starts;
        // About 400 frames land during the first pass (more than a tail:
        // it passes again), one commit during the second.
        let mut pass = 0;
        let end = fold(&conn, &shared, &mut || {
            pass += 1;
            next = commit(&mut db, fence, next, if pass == 1 { 200 } else { 1 }, false);
        })
        .unwrap();
        assert!(end.tail && end.passes == 2 && !end.whole, "round {round}: {:?} passes", end.passes);
        finish(&shared, asked_at, Ok(end));
        let tails = lock(&shared.state).tails;
        next = commit(&mut db, fence, next, 1, false);
        assert_eq!(lock(&shared.state).tails, tails + 1, "round {round}: the writer folded the tail");
        let starts = wal_starts(&path);
        next = commit(&mut db, fence, next, 1, false);
        assert_eq!(wal_starts(&path), starts + 1, "round {round}: the WAL started again");
        let size = wal_size(&path);
        let first = *first.get_or_insert(size);
        assert!(size <= first + 64 * 1024, "round {round}: written over, not grown: {first} -> {size} bytes");
    }
    drop(conn);
    let done = db.fold.take().unwrap().stop(&db.conn);
    assert!(done.tails == 5 && done.failed.is_none(), "{done:?}");
    db.release_lease(fence).unwrap();
    drop(db);
    assert_eq!(events_and_integrity(&path), (i64::from(next), "ok".to_string()));
}

#[test]
fn a_reader_holding_the_wal_back_leaves_the_fold_waiting_not_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store/engine.db");
    let (mut db, fence) = held(&path, 20);
    let next = commit(&mut db, fence, 0, 2, false);
    assert!(!lock(&shared(&db).state).asked, "not yet a fold's worth");
    // `engine log --follow` in the middle of a read.
    let reader = Connection::open(&path).unwrap();
    reader.execute_batch("BEGIN; SELECT count(*) FROM events;").unwrap();
    let next = commit(&mut db, fence, next, 200, true);
    fold_ended(&db);
    let state = lock(&shared(&db).state);
    assert!(state.passes <= 3 && state.folded == 0, "{state:?}");
    assert!(state.floor >= 20, "the next ask waits for a fold's worth more: {state:?}");
    drop(state);
    reader.execute_batch("COMMIT").unwrap();
    let next = commit(&mut db, fence, next, 400, true);
    fold_ended(&db);
    // Any tail the fold handed over is folded after the next commit.
    let next = commit(&mut db, fence, next, 1, false);
    let state = lock(&shared(&db).state);
    assert!(state.folded + state.tails >= 1, "the reader gone, the WAL folds: {state:?}");
    drop(state);
    db.release_lease(fence).unwrap();
    drop(db);
    assert_eq!(events_and_integrity(&path).0, i64::from(next));
}

#[test]
fn a_checkpointer_that_fails_fails_no_commit_and_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store/engine.db");
    let (mut db, fence) = held(&path, 20);
    // Its connection cannot be made: the thread fails at once.
    let _ = db.fold.take().unwrap().stop(&db.conn);
    db.fold =
        Some(Checkpointer::install(&db.conn, &dir.path().join("nowhere/engine.db"), super::super::file_id(&path), 20));
    let next = commit(&mut db, fence, 0, 100, false);
    let done = db.fold.take().unwrap().stop(&db.conn);
    assert!(done.failed.as_deref().is_some_and(|w| w.contains("cannot open store")), "{done:?}");
    db.release_lease(fence).unwrap();
    drop(db);
    assert_eq!(events_and_integrity(&path), (i64::from(next), "ok".to_string()));
}

/// The child of the kill test (this test binary again, the store in
/// `FOLD_CHILD`): commits with a fold every 20 frames, printing each
/// commit's number once it returned, until killed.
#[test]
fn fold_kill_child() {
    let Ok(path) = std::env::var("FOLD_CHILD") else { return };
    let (mut db, fence) = held(Path::new(&path), 20);
    use std::io::Write;
    for i in 0.. {
        db.write(fence, Durability::Normal, |tx| tx.append_event(&event(i)).map(|_| ())).unwrap();
        println!("committed {i}");
        std::io::stdout().flush().unwrap();
    }
}

#[test]
fn a_process_killed_while_its_wal_is_folded_keeps_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store/engine.db");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "store::sqlite::fold::tests::fold_kill_child", "--test-threads", "1", "--nocapture"]);
    cmd.env("FOLD_CHILD", &path).stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut last = None;
    let mut line = String::new();
    // Killed at a different moment of a fold each run: after 1,500
    // commits (about 60 folds of 20 frames), whatever was under way.
    while last.is_none_or(|n| n < 1_500) {
        line.clear();
        use std::io::BufRead;
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended early");
        if let Some(n) = line.trim().strip_prefix("committed ") {
            last = Some(n.parse::<i64>().unwrap());
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (n, ok) = events_and_integrity(&path);
    assert_eq!(ok, "ok");
    assert!(n > last.unwrap(), "every commit that returned is kept: {n} rows, commit {last:?} returned");
    // The engine opens it (its last writer died holding the lease: checked).
    let mut db = Db::open_rw(&path).unwrap();
    let fence = db.acquire_lease().unwrap().fence;
    db.release_lease(fence).unwrap();
}
