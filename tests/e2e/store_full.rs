//! A full disk (issue 9, defect 10): `STORE_FULL` with nothing half-written.
//!
//! The disk is made "full" for real, without root: the engine runs with
//! `RLIMIT_FSIZE` (SIGXFSZ ignored), so a write past the limit fails with
//! `EFBIG` exactly as it would with `ENOSPC` on a full filesystem — SQLite
//! sees a failed `write()` in the middle of a transaction.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::process::Command;

use serde_json::json;

use super::common::*;

/// `cmd` with its files limited to `bytes` (inherited by its providers).
fn limit_file_size(cmd: &mut Command, bytes: u64) {
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (signal, setrlimit); nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[track_caller]
fn expect_store_full(out: &Out, ws: &Ws) {
    assert_eq!(out.code(), 2, "STORE_FULL exits 2\nstdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    let err = &out.json()["error"];
    assert_eq!(err["code"], json!("STORE_FULL"), "{}", out.stdout);
    assert_eq!(err["place"], json!(ws.store().display().to_string()), "names the store: {}", out.stdout);
}

/// Ten tasks, each logging its (operation, try) outside the workspace and
/// printing 300 kB the store keeps as a blob: the third or so no longer fits.
fn heavy_plan(ws: &Ws) -> std::path::PathBuf {
    let log = ws.root().join("calls.log");
    let script = format!("echo \"$ENGINE_OPERATION_ID $ENGINE_TRY\" >> {}; head -c 300000 /dev/zero", sh_quote(&log));
    let tasks = (0..10).map(|i| task(&format!("T{i}"), &["sh", "-c", &script])).collect();
    ws.write_plan("plan.json", &plan(tasks));
    log
}

#[test]
fn a_full_disk_mid_run_is_store_full_and_the_store_stays_whole() {
    let ws = Ws::new();
    let log = heavy_plan(&ws);
    let mut cmd = ws.command(&["run", "plan.json", "--jobs", "1", "--json"]);
    limit_file_size(&mut cmd, 1 << 20);
    let out = ws.run_command(cmd);
    expect_store_full(&out, &ws);

    // Whole: SQLite's own check passes, every receipt has its attempt, and
    // every attempt claimed done has its receipt.
    assert_eq!(crate::support::ledger::integrity_check(&ws.store()).as_deref(), Some("ok"));
    let ledger = ws.ledger();
    let attempts = ledger.attempts();
    let with_receipt: BTreeSet<i64> = ledger.receipts().iter().map(|r| r.attempt_id.get()).collect();
    let ids: BTreeSet<i64> = attempts.iter().map(|a| a.id).collect();
    let orphans = with_receipt.difference(&ids).count()
        + attempts
            .iter()
            .filter(|a| ["succeeded", "failed", "receipt_recorded"].contains(&a.state.as_str()))
            .filter(|a| !with_receipt.contains(&a.id))
            .count();
    assert_eq!(orphans, 0, "no receipt without its attempt, no finished attempt without its receipt");
    drop(ledger);
    ws.engine(&["status"]).expect_code(0);

    // With room again, the next run finishes the goal; no try was sent twice.
    let out = ws.engine(&["run", "plan.json", "--jobs", "1", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["goal_state"], json!("satisfied"));
    let calls: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_string).collect();
    let distinct: BTreeSet<&String> = calls.iter().collect();
    assert_eq!(distinct.len(), calls.len(), "no (operation, try) delivered twice: {calls:#?}");
}

#[test]
fn a_store_that_cannot_be_made_for_lack_of_room_leaves_nothing() {
    let ws = Ws::new();
    heavy_plan(&ws);
    let mut cmd = ws.command(&["run", "plan.json", "--json"]);
    limit_file_size(&mut cmd, 8 << 10);
    let out = ws.run_command(cmd);
    expect_store_full(&out, &ws);
    // `workspace` (which workspace the folder belongs to) is whole or absent.
    let left: Vec<_> = std::fs::read_dir(ws.store_dir())
        .map(|d| d.map(|e| e.unwrap().file_name()).filter(|n| n != "workspace").collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing half-made is left: {left:?}");
    ws.engine(&["run", "plan.json"]).expect_code(0);
}
