//! Making a store (issue 9, defects 3 and 4): creation is atomic — a store
//! is built under a temporary name and linked into place complete — so an
//! engine killed at any moment of it leaves nothing a later `engine run`
//! refuses; a hot journal an older engine left behind is rolled back by the
//! writer that opens it; and engines racing to create the same store end
//! with exactly one running and the others `STORE_LOCKED` (exit 6).

use std::time::Duration;

use serde_json::json;

use super::common::*;

fn one_task_plan(ws: &Ws) {
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"])]));
}

/// Everything in the store folder that is not the store itself: the
/// temporary files of a creation must not outlive the next run.
fn leftovers(ws: &Ws) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(ws.store_dir()) else { return vec![] };
    // `workspace`: which workspace the store belongs to (made with it).
    let keep = ["engine.db", "engine.db-wal", "engine.db-shm", "engine.db.mark", "workspace"];
    let mut names: Vec<String> = dir
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

#[track_caller]
fn next_run_is_satisfied(ws: &Ws, context: &str) {
    let out = ws.engine(&["run", "plan.json", "--json"]);
    assert_eq!(out.code(), 0, "{context}: the next run\nstdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert_eq!(out.json()["goal_state"], json!("satisfied"), "{context}");
    assert_eq!(leftovers(ws), Vec::<String>::new(), "{context}: temporary files of the killed creation are gone");
    ws.engine(&["status"]).expect_code(0);
}

/// A kill at each named point of creation (the temporary store built; linked
/// into place; in place before its mark exists) leaves a folder the next
/// `engine run` uses as if nothing had happened.
#[test]
fn a_kill_at_each_point_of_creation_leaves_nothing_half_made() {
    for point in ["store_built", "store_linked", "store_placed"] {
        let ws = Ws::new();
        one_task_plan(&ws);
        let mut cmd = ws.command(&["run", "plan.json"]);
        cmd.env("ENGINE_FAILPOINT", point);
        let out = ws.run_command(cmd);
        assert_eq!(out.code(), -libc::SIGKILL, "{point}: killed at the point\nstderr:\n{}", out.stderr);
        assert!(out.stderr.contains(&format!("failpoint {point}")), "{point}: {}", out.stderr);
        next_run_is_satisfied(&ws, point);
    }
}

/// The same with kills from outside at 0–20 ms after the start, the window
/// in which a fresh store is made (the issue saw 4 of 300 such kills leave a
/// store every later run refused). Guards issue 9, defect 3, as the soak
/// found it (in about 3% of its sessions): 150 tries. Those were kept apart
/// as a test of their own (`crash_sweep::regressions`) on the command
/// reference plan, asserting only that the next run does not exit 70,
/// beside 42 tries here: 55 s of test time, 19 CPU-seconds, most of it the
/// next run waiting on that plan's three tools and two checks. The store
/// is made before any task starts, so a one-task plan meets every moment
/// of creation as that plan did, and each try here asserts more: the next
/// run satisfied, nothing of the creation left (150 tries: 32 s, 9
/// CPU-seconds, same load).
#[test]
fn kills_at_random_moments_of_creation_never_block_the_next_run() {
    for i in 0..150u64 {
        let ws = Ws::new();
        one_task_plan(&ws);
        let mut running = ws.spawn_engine(&["run", "plan.json"]);
        std::thread::sleep(Duration::from_micros((i % 21) * 1000));
        running.kill9();
        next_run_is_satisfied(&ws, &format!("try {i}: kill after {} ms", i % 21));
    }
}

/// What an older engine left when killed while making its store: a
/// 4,096-byte file whose header already says WAL, and a hot rollback
/// journal holding its empty original. The next writer rolls it back.
#[test]
fn a_hot_journal_left_by_a_killed_creation_is_rolled_back_by_the_next_writer() {
    let ws = Ws::new();
    one_task_plan(&ws);
    std::fs::create_dir_all(ws.store_dir()).unwrap();
    std::fs::set_permissions(ws.store_dir(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut db = vec![0u8; 4096];
    db[..16].copy_from_slice(b"SQLite format 3\0");
    db[16..28].copy_from_slice(&[0x10, 0x00, 0x02, 0x02, 0x00, 0x40, 0x20, 0x20, 0, 0, 0, 1]);
    db[28..32].copy_from_slice(&[0, 0, 0, 1]);
    db[92..100].copy_from_slice(&[0, 0, 0, 1, 0x00, 0x2e, 0x7a, 0x70]);
    db[100] = 0x0d;
    db[105..107].copy_from_slice(&[0x10, 0x00]);
    let mut journal = vec![0u8; 512];
    journal[..8].copy_from_slice(&[0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]);
    journal[12..16].copy_from_slice(&[0x6c, 0xf3, 0x6c, 0x58]);
    journal[20..24].copy_from_slice(&[0, 0, 2, 0]);
    journal[24..28].copy_from_slice(&[0, 0, 0x10, 0]);
    std::fs::write(ws.store(), &db).unwrap();
    std::fs::write(ws.store_dir().join("engine.db-journal"), &journal).unwrap();
    for f in [ws.store(), ws.store_dir().join("engine.db-journal")] {
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    next_run_is_satisfied(&ws, "hot journal");
}

/// Two or three `engine run` started together on a fresh workspace: exactly
/// one runs, every other exits 6 with `STORE_LOCKED` — never 70, never
/// "table lease already exists", "File exists" or "database is locked".
#[test]
fn racing_creators_one_runs_the_others_are_store_locked() {
    for trial in 0..30 {
        let ws = Ws::new();
        ws.write_plan("plan.json", &plan(vec![task("A", &["sh", "-c", WAIT_FOR_RELEASE])]));
        let n = 2 + trial % 2;
        let mut engines: Vec<Running> = (0..n).map(|_| ws.spawn_engine(&["run", "plan.json", "--json"])).collect();
        // The losers give up at once; the winner waits for `release`.
        let settled = wait_for(Duration::from_secs(60), || {
            let alive = engines.iter_mut().map(|e| e.alive()).filter(|a| *a).count();
            (alive <= 1).then_some(())
        });
        assert!(settled.is_some(), "trial {trial}: the losers did not stop");
        release(&ws);
        let outs: Vec<Out> = engines.iter_mut().map(|e| e.wait(RUN_DEADLINE)).collect();
        let winners = outs.iter().filter(|o| o.code() == 0).count();
        assert_eq!(winners, 1, "trial {trial}: exactly one ran\n{outs:#?}");
        for o in outs.iter().filter(|o| o.code() != 0) {
            assert_eq!(o.code(), 6, "trial {trial}: a loser exits 6\n{o:#?}");
            assert_eq!(o.json()["error"]["code"], json!("STORE_LOCKED"), "trial {trial}\n{o:#?}");
        }
    }
}

/// An engine that cannot get the store's write lock within its wait (another
/// process holds it: here the test, as an engine checking a large store
/// after a crash would) gets `STORE_LOCKED` (exit 6), not an internal error.
#[test]
fn waiting_out_the_write_lock_is_store_locked() {
    let ws = Ws::new();
    one_task_plan(&ws);
    ws.engine(&["run", "plan.json"]).expect_code(0);
    let holder = crate::support::ledger::hold_write_lock(&ws.store());
    let out = ws.engine(&["run", "plan.json", "--json"]);
    drop(holder);
    assert_eq!(out.code(), 6, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert_eq!(out.json()["error"]["code"], json!("STORE_LOCKED"));
    assert_eq!(out.json()["error"]["place"], json!(ws.store().display().to_string()));
}
