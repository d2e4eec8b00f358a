//! What every command checks when it opens a SQLite store, and `engine
//! verify` checking the same (issue 29): the files' owners and modes as the
//! engine made them (`STORE_TAMPERED` naming the change), the SQLite header
//! (`STORE_CORRUPT` naming the field), the store against its mark, and a
//! store this process may not write (named as that). Each condition gets
//! its documented code from every command, verify included, never exit 70.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::outcomes::*;

/// The commands a person runs on a store, reading and writing.
const COMMANDS: &[&[&str]] =
    &[&["status"], &["verify"], &["log"], &["goals"], &["explain", "T1"], &["run", "plan.json"]];

fn side(ws: &Ws, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", ws.store().display()))
}

/// A store a run finished with (one HTTP task, satisfied).
fn finished(rcv: &Receiver) -> Ws {
    let ws = one_http_task(rcv, "none", false, json!({}));
    ws.run().expect(0, None);
    ws
}

/// Every command refuses with `code` (exit 2) at `place`, its message
/// holding `words`; returns verify's error document.
#[track_caller]
fn every_command_refuses(ws: &Ws, code: &str, place: &Path, words: &str) -> Value {
    let mut verify = Value::Null;
    for args in COMMANDS {
        let out = ws.engine_json(args);
        out.expect(2, Some(code));
        let err = out.json()["error"].clone();
        assert_eq!(err["place"], json!(place.display().to_string()), "{args:?}: names the file\n{}", out.describe());
        let message = err["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{args:?}: says {words:?}\n{}", out.describe());
        if args == &["verify"] {
            verify = err;
        }
    }
    verify
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Issue 29, defect 1: a provider (as root) chowned `<store>.mark`, and
/// every later command exited 2 as if the store were another user's.
/// Now: `STORE_TAMPERED` from every command and verify, naming the file
/// and the change; chowned back, everything works again.
#[test]
fn a_chowned_file_of_the_store_is_tampering_named_by_every_command() {
    if !is_root() {
        eprintln!("skipped: only root can give a file away (chown)");
        return;
    }
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    for suffix in [".mark", "", "-wal"] {
        let file = side(&ws, suffix);
        let was = std::fs::metadata(&file).unwrap();
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
        let err = every_command_refuses(&ws, "STORE_TAMPERED", &file, "owner changed from uid 0");
        assert!(err["message"].as_str().unwrap().contains("to uid 65534 gid 65534"), "{err}");
        assert_eq!(err["details"]["change"], "owner", "{err}");
        assert_eq!(err["details"]["now"], json!({"uid": 65534, "gid": 65534}), "{err}");
        std::os::unix::fs::chown(&file, Some(was.uid()), Some(was.gid())).unwrap();
    }
    ws.engine_json(&["verify"]).expect(0, None);
    ws.run().expect(0, None);
    assert_eq!(rcv.deliveries().len(), 1, "nothing was sent again");
}

/// A changed mode was repaired in silence (the store file) or left as it
/// was (the mark, the WAL): now it is `STORE_TAMPERED`, named, and left for
/// a person to judge.
#[test]
fn a_chmodded_file_of_the_store_is_tampering_named_by_every_command() {
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    for (suffix, to) in [("", 0o644), (".mark", 0o640), ("-wal", 0o604), ("", 0o400)] {
        let file = side(&ws, suffix);
        chmod(&file, to);
        let err = every_command_refuses(&ws, "STORE_TAMPERED", &file, &format!("mode changed from 0600 to {to:04o}"));
        assert_eq!(
            err["details"],
            json!({"file": file.display().to_string(), "change": "mode", "was": "0600", "now": format!("{to:04o}")})
        );
        assert_eq!(mode(&file), to, "the engine does not repair it in silence");
        chmod(&file, 0o600);
    }
    ws.engine_json(&["verify"]).expect(0, None);
    ws.run().expect(0, None);
}

/// Issue 29, defect 2: after a crash and a lost WAL, `status` refused the
/// store (`commit 4 was recorded, the store holds 0`) while `verify` said
/// "store verified". Verify runs the same open-time checks: same code,
/// same words.
#[test]
fn verify_refuses_a_store_that_lost_commits_as_every_command_does() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    std::fs::remove_file(side(&ws, "-wal")).unwrap();
    let _ = std::fs::remove_file(side(&ws, "-shm"));
    let status = ws.engine_json(&["status"]);
    status.expect(2, Some("STORE_CORRUPT"));
    let verify = ws.engine_json(&["verify"]);
    verify.expect(2, Some("STORE_CORRUPT"));
    assert_eq!(verify.json()["error"], status.json()["error"], "verify and status say the same");
    every_command_refuses(&ws, "STORE_CORRUPT", &ws.store(), "the store holds 0");
}

/// Issue 29, defect 5: a flipped header byte 18 made the store silently
/// read-only (`status` and `verify` exit 0, `run` exit 70 "readonly
/// database"); byte 47, "unsupported file format" (exit 70) where verify
/// said `STORE_CORRUPT`. Every command now names the damaged field.
#[test]
fn a_damaged_header_is_named_by_every_command() {
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    let clean = std::fs::read(ws.store()).unwrap();
    for (at, words) in
        [(18, "byte 18 (file format write version)"), (19, "byte 19"), (47, "schema format"), (59, "text encoding")]
    {
        let mut damaged = clean.clone();
        damaged[at] ^= 0x5a;
        std::fs::write(ws.store(), &damaged).unwrap();
        every_command_refuses(&ws, "STORE_CORRUPT", &ws.store(), words);
        assert_eq!(std::fs::read(ws.store()).unwrap(), damaged, "byte {at}: nothing written");
    }
    std::fs::write(ws.store(), &clean).unwrap();
    ws.run().expect(0, None);
}

/// Issue 29, defect 5: an engine run where the system refuses it writes to
/// its store (here: in a Landlock sandbox, as another engine's provider
/// would be) failed with exit 70 "attempt to write a readonly database".
/// It now says why, before it writes anything, with a documented code.
#[test]
fn a_store_the_sandbox_keeps_read_only_is_named_as_that() {
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    let before = std::fs::read(ws.store()).unwrap();
    let policy = match providers::sandbox::Policy::builder(ws.root()).protect(ws.store_dir()).build() {
        Ok(p) => p,
        Err(e) => panic!("a sandbox policy: {e}"),
    };
    let sandbox = policy.prepare().expect("the sandbox is prepared");
    if !sandbox.status().is_confined() {
        eprintln!("skipped: this kernel has no Landlock to confine the engine with");
        return;
    }
    let mut cmd = ws.command(&["--json", "run", "plan.json"]);
    sandbox.apply(&mut cmd);
    let out = ws.run_command(cmd);
    out.expect(2, Some("USAGE_ERROR"));
    let err = &out.json()["error"];
    assert_eq!(err["details"]["reason"], "store_not_writable", "{}", out.describe());
    assert!(err["message"].as_str().unwrap().contains("sandbox"), "names the sandbox\n{}", out.describe());
    assert_eq!(std::fs::read(ws.store()).unwrap(), before, "nothing written");
    ws.run().expect(0, None);
}

/// A `--store` whose folder is not made yet is no store (a reader says so,
/// `run` makes it), never exit 70 — found by the tests from a clone under
/// the temporary folder, where the tests' stores live outside any git
/// worktree (inside one, `run` made the folder for its `.gitignore` first).
#[test]
fn a_store_in_a_folder_not_made_yet_is_no_store_and_run_makes_it() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &crate::common::plan(vec![crate::common::task("a", &["true"])]));
    let store = ws.outside_store("not-made-yet");
    let store_arg = store.display().to_string();
    let out = ws.engine(&["--json", "status", "--store", &store_arg]);
    assert_eq!(out.json()["error"]["code"], "USAGE_ERROR", "{}", out.describe());
    assert!(!store.parent().unwrap().exists(), "a reader makes nothing");
    ws.engine(&["run", "plan.json", "--store", &store_arg]).expect_code(0);
    ws.engine(&["status", "--store", &store_arg]).expect_code(0);
}
