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
/// in `WALBUF_CHILD`): commits rows 1..=3, then either kills itself right
/// after the third commit returns, or opens a fourth transaction larger
/// than a gathered write (its frames spilled, some written, some held)
/// and kills itself before its commit.
#[test]
fn kill_child() {
    let Ok(path) = std::env::var("WALBUF_CHILD") else { return };
    let conn = ledger(Path::new(&path));
    conn.execute_batch("PRAGMA cache_size = 8; CREATE TABLE IF NOT EXISTS t (x, pad)").unwrap();
    for i in 1..=3i64 {
        conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [i]).unwrap();
    }
    if std::env::var("WALBUF_MIDDLE").is_ok() {
        conn.execute_batch("BEGIN").unwrap();
        for i in 4..=800i64 {
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [i]).unwrap();
        }
    }
    // SAFETY: kill of this process by itself; nothing after it runs.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
}

fn killed_child(path: &Path, middle: bool) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "store::sqlite::walbuf::tests::kill_child", "--test-threads", "1"]);
    cmd.env("WALBUF_CHILD", path);
    if middle {
        cmd.env("WALBUF_MIDDLE", "1");
    }
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
    killed_child(&path, false);
    assert_eq!(rows_and_integrity(&path), (vec![1, 2, 3], "ok".to_string()));
}

#[test]
fn a_process_killed_in_a_transaction_leaves_the_store_whole_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    killed_child(&path, true);
    // The spilled transaction's frames reached the WAL (some of them).
    assert!(wal_bytes(&path) > 1024 * 1024, "{} WAL bytes", wal_bytes(&path));
    assert_eq!(rows_and_integrity(&path), (vec![1, 2, 3], "ok".to_string()));
}
