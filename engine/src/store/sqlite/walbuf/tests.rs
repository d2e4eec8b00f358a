use std::path::Path;
use std::process::Command;

use rusqlite::{Connection, OpenFlags};

use super::{counted, Gathered, Step, FRAME_HEADER_BYTES, WAL_GATHER_BYTES_MAX};

fn header(commit: u32) -> Vec<u8> {
    let mut h = vec![0u8; FRAME_HEADER_BYTES];
    h[..4].copy_from_slice(&7u32.to_be_bytes());
    h[4..8].copy_from_slice(&commit.to_be_bytes());
    h
}

#[test]
fn frames_are_gathered_until_the_commit_frame_is_whole() {
    let mut g = Gathered::default();
    let page = vec![1u8; 4096];
    assert_eq!(g.step(&header(0), 32), Step::Gather { flush: false });
    assert_eq!(g.step(&page, 56), Step::Gather { flush: false });
    assert!(g.continues(32 + 24 + 4096) && !g.continues(32));
    assert_eq!(g.step(&header(9), 4152), Step::Gather { flush: false });
    // The commit frame's page: everything gathered is written now.
    assert_eq!(g.step(&page, 4176), Step::Gather { flush: true });
    assert_eq!((g.start, g.bytes.len()), (32, 2 * (24 + 4096)));
}

#[test]
fn a_frame_written_again_goes_as_it_comes() {
    let mut g = Gathered::default();
    let page = vec![1u8; 4096];
    g.wrote(0, 32);
    g.step(&header(0), 32);
    assert_eq!(g.step(&page, 56), Step::Gather { flush: false });
    g.clear();
    // A commit's checksums rewritten over its frames, the buffer empty:
    // never held, so never left behind once the commit is published.
    assert_eq!(g.step(&header(9), 32), Step::Direct);
    // The write lock released: the next transaction's frames are appends.
    g.discard();
    assert_eq!(g.step(&header(0), 32), Step::Gather { flush: false });
    g.clear();
    g.truncated(0);
    g.wrote(0, 32);
    assert_eq!(g.step(&header(0), 32), Step::Gather { flush: false });
}

#[test]
fn what_is_not_a_frame_goes_as_it_comes() {
    let mut g = Gathered::default();
    // The WAL's own header (32 bytes at 0), a part of a frame split at a
    // sync point.
    assert_eq!(g.step(&[0u8; 32], 0), Step::Direct);
    assert_eq!(g.step(&[0u8; 10], 32), Step::Direct);
    assert!(g.bytes.is_empty());
}

#[test]
fn a_large_transaction_is_written_in_writes_unix_can_make() {
    let mut g = Gathered::default();
    let page = vec![0u8; 4096];
    let (mut offset, mut written) = (32, vec![]);
    for _ in 0..100 {
        assert_eq!(g.step(&header(0), offset), Step::Gather { flush: false });
        if g.step(&page, offset + 24) == (Step::Gather { flush: true }) {
            written.push(g.bytes.len());
            g.clear();
        }
        offset += 24 + 4096;
    }
    // 31 frames of 4 KiB pages a write: within unix's 0x1ffff bytes.
    assert_eq!(written, vec![31 * 4120; 3]);
    assert!(31 * 4120 <= WAL_GATHER_BYTES_MAX && 32 * 4120 > WAL_GATHER_BYTES_MAX);
    let mut g = Gathered::default();
    let page = vec![0u8; 65536];
    g.step(&header(0), 32);
    assert_eq!(g.step(&page, 56), Step::Gather { flush: true });
}

/// A ledger connection (through the VFS) to a WAL store at `path`.
fn ledger(path: &Path) -> Connection {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
    let conn = crate::store::sqlite::open::connect(path, flags).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;").unwrap();
    conn
}

fn wal_bytes(path: &Path) -> u64 {
    std::fs::metadata(path.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0)
}

#[test]
fn one_commit_of_many_frames_is_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let conn = ledger(&path);
    conn.execute_batch("CREATE TABLE a (x); CREATE TABLE b (x); CREATE TABLE c (x);").unwrap();
    let before_bytes = wal_bytes(&path);
    let before = counted();
    // Three tables and a row over several pages: one commit, many frames.
    conn.execute_batch(
        "BEGIN; INSERT INTO a VALUES (zeroblob(20000)); INSERT INTO b VALUES (1); INSERT INTO c VALUES (2); COMMIT;",
    )
    .unwrap();
    let after = counted();
    let frames = (wal_bytes(&path) - before_bytes) / (24 + 4096);
    assert!(frames >= 6, "{frames} frames");
    // SQLite asked for a header and a page a frame; the file got one write.
    assert_eq!(after.0 - before.0, 2 * frames);
    assert_eq!(after.1 - before.1, 1);
}

#[test]
fn another_connection_sees_every_commit_as_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let writer = ledger(&path);
    writer.execute_batch("CREATE TABLE t (x)").unwrap();
    let reader = ledger(&path);
    let plain = Connection::open(&path).unwrap();
    for i in 1..=50i64 {
        writer.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
        for conn in [&reader, &plain] {
            let (n, last): (i64, i64) =
                conn.query_row("SELECT count(*), max(x) FROM t", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            assert_eq!((n, last), (i, i));
        }
    }
}

/// The child of the kill tests (run as this test binary again, the store
/// in `WALBUF_CHILD`): commits rows 1..=3, then (`WALBUF_MODE`) kills
/// itself right after the third commit returns ("after"), or opens a
/// fourth transaction larger than a gathered write (its frames spilled,
/// some written, some held) and kills itself before its commit
/// ("middle"), or after it commits rows 4..=800 with pages it had
/// spilled changed again ("rewrite").
#[test]
fn kill_child() {
    let Ok(path) = std::env::var("WALBUF_CHILD") else { return };
    let conn = ledger(Path::new(&path));
    conn.execute_batch("PRAGMA cache_size = 8; CREATE TABLE IF NOT EXISTS t (x, pad)").unwrap();
    for i in 1..=3i64 {
        conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [i]).unwrap();
    }
    let mode = std::env::var("WALBUF_MODE").unwrap_or_default();
    if mode != "after" {
        conn.execute_batch("BEGIN").unwrap();
        for i in 4..=800i64 {
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [i]).unwrap();
        }
    }
    if mode == "rewrite" {
        // Pages spilled in this transaction changed again: the commit
        // writes them over their frames and rewrites the checksums of
        // every frame from there, the commit frame's last.
        conn.execute_batch("UPDATE t SET pad = zeroblob(2999) WHERE x BETWEEN 4 AND 40; COMMIT").unwrap();
    }
    // SAFETY: kill of this process by itself; nothing after it runs.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
}

fn killed_child(path: &Path, mode: &str) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "store::sqlite::walbuf::tests::kill_child", "--test-threads", "1"]);
    cmd.env("WALBUF_CHILD", path).env("WALBUF_MODE", mode);
    let status = cmd.output().unwrap().status;
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

fn rows_and_integrity(path: &Path) -> (Vec<i64>, String) {
    let conn = Connection::open(path).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    let mut stmt = conn.prepare("SELECT x FROM t ORDER BY x").unwrap();
    let rows = stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<Vec<i64>>>().unwrap();
    (rows, ok)
}

#[test]
fn a_process_killed_right_after_a_commit_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    killed_child(&path, "after");
    assert_eq!(rows_and_integrity(&path), (vec![1, 2, 3], "ok".to_string()));
}

#[test]
fn a_process_killed_in_a_transaction_leaves_the_store_whole_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    killed_child(&path, "middle");
    // The spilled transaction's frames reached the WAL (some of them).
    assert!(wal_bytes(&path) > 1024 * 1024, "{} WAL bytes", wal_bytes(&path));
    assert_eq!(rows_and_integrity(&path), (vec![1, 2, 3], "ok".to_string()));
}

#[test]
fn a_process_killed_right_after_a_commit_that_rewrote_its_frames_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    killed_child(&path, "rewrite");
    assert_eq!(rows_and_integrity(&path), ((1..=800).collect(), "ok".to_string()));
    let conn = Connection::open(&path).unwrap();
    let changed: i64 = conn.query_row("SELECT count(*) FROM t WHERE length(pad) = 2999", [], |r| r.get(0)).unwrap();
    assert_eq!(changed, 37);
}

#[test]
fn frames_of_a_rolled_back_transaction_never_reach_the_file_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let a = ledger(&path);
    a.execute_batch("PRAGMA cache_size = 8; CREATE TABLE t (x, pad)").unwrap();
    // The WAL empty: the rollback reads nothing from it (a read would
    // write what A holds while its transaction is still open).
    a.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    // A spills a transaction larger than a gathered write, then rolls it back.
    a.execute_batch("BEGIN").unwrap();
    for i in 1000..1300i64 {
        a.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [i]).unwrap();
    }
    a.execute_batch("ROLLBACK").unwrap();
    // B commits more frames than A spilled, over the same offsets.
    let b = Connection::open(&path).unwrap();
    b.execute_batch("BEGIN").unwrap();
    for i in 1..=400i64 {
        b.execute("INSERT INTO t VALUES (?1, randomblob(3000))", [i]).unwrap();
    }
    b.execute_batch("COMMIT").unwrap();
    // A reads, writes and closes.
    let _ = a.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0));
    let _ = a.execute("INSERT INTO t VALUES (401, 0)", []);
    drop(a);
    drop(b);
    let (rows, ok) = rows_and_integrity(&path);
    assert_eq!(ok, "ok");
    assert!(rows.len() >= 400 && rows[..400] == (1..=400).collect::<Vec<i64>>()[..], "{} rows", rows.len());
}
