//! What every command checks when it opens a SQLite store, and `engine
//! verify` checking the same (issue 29): the files' owners and modes as the
//! engine made them (`STORE_TAMPERED` naming the change), the SQLite header
//! (`STORE_CORRUPT` naming the field), the store against its mark, and a
//! store this process may not write (named as that). Each condition gets
//! its documented code from every command, verify included, never exit 70.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::outcomes::*;

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

/// A `--store` whose folder is not made yet is no store (a reader says so:
/// `STORE_NOT_FOUND`; `run` makes it), never exit 70 — found by the tests from a clone under
/// the temporary folder, where the tests' stores live outside any git
/// worktree (inside one, `run` made the folder for its `.gitignore` first).
#[test]
fn a_store_in_a_folder_not_made_yet_is_no_store_and_run_makes_it() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &super::common::plan(vec![super::common::task("a", &["true"])]));
    let store = ws.outside_store("not-made-yet");
    let store_arg = store.display().to_string();
    let out = ws.engine(&["--json", "status", "--store", &store_arg]);
    assert_eq!(out.json()["error"]["code"], "STORE_NOT_FOUND", "{}", out.describe());
    assert!(!store.parent().unwrap().exists(), "a reader makes nothing");
    ws.engine(&["run", "plan.json", "--store", &store_arg]).expect_code(0);
    ws.engine(&["status", "--store", &store_arg]).expect_code(0);
}

/// The store's files, to put back whole between two damages.
fn store_files(ws: &Ws) -> Vec<(PathBuf, Vec<u8>)> {
    ["", "-wal", "-shm", ".mark"]
        .iter()
        .map(|s| side(ws, s))
        .filter(|p| p.exists())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Each file written back in place (its owner and mode kept); one that
/// was not there removed.
fn put_back(ws: &Ws, files: &[(PathBuf, Vec<u8>)]) {
    for suffix in ["", "-wal", "-shm", ".mark"] {
        let path = side(ws, suffix);
        match files.iter().find(|(p, _)| *p == path) {
            Some((_, bytes)) => std::fs::write(&path, bytes).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// `verify`, `status` and `run` on the store: exit code, error code and
/// the first words of the message, each.
fn three_answers(ws: &Ws) -> Vec<(i32, Value)> {
    [&["verify"][..], &["status"], &["run", "plan.json"]]
        .iter()
        .map(|args| {
            let out = ws.engine_json(args);
            (out.code(), out.json()["error"]["code"].clone())
        })
        .collect()
}

/// Issue 37, item 2: damaged schema-version bytes (header 60-63, SQLite's
/// `user_version`) answered three ways — at a negative value `verify`
/// passed, `status` advised "engine run migrates it" and `run` exited 0; at
/// an older one `run` exited 70 ("duplicate column name"). The version is
/// judged against the store's tables: every command says `STORE_CORRUPT`
/// naming the field, and nothing is written.
#[test]
fn damaged_schema_version_bytes_are_named_alike_by_every_command() {
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    let clean = store_files(&ws);
    let bytes = std::fs::read(ws.store()).unwrap();
    let version = i32::from_be_bytes([bytes[60], bytes[61], bytes[62], bytes[63]]);
    for claimed in
        [version - 1, version - 4, 0, -1, i32::MIN + version, version + 1, version ^ 0x5a, 0x5a00_0000 | version]
    {
        let mut damaged = bytes.clone();
        damaged[60..64].copy_from_slice(&claimed.to_be_bytes());
        std::fs::write(ws.store(), &damaged).unwrap();
        let verify = every_command_refuses(&ws, "STORE_CORRUPT", &ws.store(), "bytes 60-63 (schema version)");
        let message = verify["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("is {claimed}")), "{claimed}: {message}");
        assert!(
            message.contains(&format!("schema version {version}")),
            "{claimed}: names what the tables are\n{message}"
        );
        assert_eq!(std::fs::read(ws.store()).unwrap(), damaged, "{claimed}: nothing written");
        put_back(&ws, &clean);
    }
    ws.run().expect(0, None);
    assert_eq!(rcv.deliveries().len(), 1, "nothing was sent again");
}

/// A store a newer engine migrated (a table this engine does not know, a
/// higher version) is still `SCHEMA_TOO_NEW` from every command, untouched.
#[test]
fn a_store_a_newer_engine_migrated_is_too_new_for_every_command() {
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    crate::support::ledger::tamper_batch(
        &ws.store(),
        "CREATE TABLE later_things (id INTEGER); PRAGMA user_version = 99;",
    );
    let before = std::fs::read(ws.store()).unwrap();
    assert_eq!(three_answers(&ws), vec![(2, json!("SCHEMA_TOO_NEW")); 3]);
    assert_eq!(std::fs::read(ws.store()).unwrap(), before, "untouched");
}

/// Issue 37, item 2: every field of SQLite's 100-byte header, damaged,
/// gets one answer from `verify`, `status` and `run` — a documented code
/// (docs/store.md, "A damaged header"), or none where SQLite keeps the
/// field for itself — never exit 70, never one command passing what
/// another refuses.
#[test]
fn every_header_field_damaged_gets_one_answer_from_every_command() {
    let rcv = Receiver::start(&[]);
    let ws = finished(&rcv);
    let clean = store_files(&ws);
    let bytes = std::fs::read(ws.store()).unwrap();
    // One byte of each field (both ends of the 4-byte ones that matter).
    let fields =
        [0, 16, 17, 18, 19, 20, 21, 22, 23, 27, 31, 35, 39, 43, 44, 47, 51, 55, 59, 60, 63, 67, 71, 80, 95, 99];
    for at in fields {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5a;
        std::fs::write(ws.store(), &damaged).unwrap();
        let answers = three_answers(&ws);
        assert!(answers.iter().all(|a| a == &answers[0]), "byte {at}: verify, status, run answered {answers:?}");
        assert!(matches!(answers[0].0, 0 | 2), "byte {at}: {answers:?}");
        put_back(&ws, &clean);
    }
    assert_eq!(rcv.deliveries().len(), 1, "nothing was sent again");
}

/// Every command but `run`, with a store of its own.
const NOT_RUN: &[&[&str]] = &[
    &["status"],
    &["goals"],
    &["log"],
    &["explain", "T1"],
    &["output", "T1"],
    &["report"],
    &["verify"],
    &["approve", "op_0123456789abcdef01234567", "--note", "fine"],
    &["settle", "op_0123456789abcdef01234567", "--outcome", "ok", "--note", "checked"],
    &["answer", "T1", "--accept"],
    &["retry", "T1"],
    &["repair", "T1", "--force", "--note", "fixed by hand"],
    &["revise", "plan.json", "--reason", "r"],
];

/// Issue 37, item 3: `approve`, `settle`, `retry`, `answer` with a `--store`
/// that does not exist made an empty store there (then "no goal yet").
/// Now no command but `run` makes a store: each says `STORE_NOT_FOUND`
/// (exit 2) naming the path, and leaves nothing behind — in a folder that
/// is there, in one that is not, and through `ENGINE_STORE`.
#[test]
fn no_command_but_run_makes_a_store() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "none", false, json!({}));
    let there = ws.outside_store("there");
    std::fs::create_dir_all(there.parent().unwrap()).unwrap();
    let not_made = ws.outside_store("not-made-yet");
    for store in [&there, &not_made] {
        let store_arg = store.display().to_string();
        for args in NOT_RUN {
            for by_env in [false, true] {
                let mut cmd = match by_env {
                    false => ws.command(&[&["--json", "--store", &store_arg][..], args].concat()),
                    true => ws.command(&[&["--json"][..], args].concat()),
                };
                if by_env {
                    cmd.env("ENGINE_STORE", store);
                }
                let out = ws.run_command(cmd);
                out.expect(2, Some("STORE_NOT_FOUND"));
                let err = &out.json()["error"];
                assert_eq!(err["place"], json!(store_arg), "{args:?}: names the path\n{}", out.describe());
            }
        }
        let left: Vec<_> = std::fs::read_dir(store.parent().unwrap()).map(|d| d.count()).into_iter().collect();
        assert!(left.iter().all(|&n| n == 0), "{}: nothing made there ({left:?} files)", store.display());
        assert!(store == &there || !not_made.parent().unwrap().exists(), "no folder made");
    }
    // `run` makes it; then every command finds it.
    let store_arg = there.display().to_string();
    ws.engine(&["run", "plan.json", "--store", &store_arg]).expect_code(0);
    ws.engine(&["status", "--store", &store_arg]).expect_code(0);
}

/// Issue 37, item 3: `run` where the system refuses it a new store (here a
/// Landlock sandbox that keeps the folder read-only, as a read-only file
/// system would) exited 70 "cannot create store". It is a usage error
/// saying why, and nothing is made.
#[test]
fn a_store_that_cannot_be_made_is_named_never_exit_70() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &super::common::plan(vec![super::common::task("a", &["true"])]));
    let store = ws.outside_store("kept-read-only");
    let folder = store.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&folder).unwrap();
    let policy = match providers::sandbox::Policy::builder(ws.root()).protect(&folder).build() {
        Ok(p) => p,
        Err(e) => panic!("a sandbox policy: {e}"),
    };
    let sandbox = policy.prepare().expect("the sandbox is prepared");
    if !sandbox.status().is_confined() {
        eprintln!("skipped: this kernel has no Landlock to confine the engine with");
        return;
    }
    for target in [store.clone(), folder.join("below").join("engine.db")] {
        let mut cmd = ws.command(&["--json", "run", "plan.json", "--store", super::common::arg(&target)]);
        sandbox.apply(&mut cmd);
        let out = ws.run_command(cmd);
        out.expect(2, Some("USAGE_ERROR"));
        let err = &out.json()["error"];
        assert_eq!(err["details"]["reason"], "store_not_writable", "{}", out.describe());
    }
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "nothing made");
}
