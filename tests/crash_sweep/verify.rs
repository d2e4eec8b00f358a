//! `engine verify`: every check passes on a store the engine made, and a
//! damaged store is refused with `STORE_CORRUPT` naming the check and the
//! first bad entry (a person's act edited outside the engine:
//! `STORE_TAMPERED`). Read-only: it changes no byte of the
//! store, not even a write-ahead log left by a killed engine.

use serde_json::Value;

use crate::common::{Receiver, Ws};
use crate::support::kill::{self, Kill};
use crate::support::reference::Instance;

const CHECKS: usize = 22;

fn verify(ws: &Ws) -> (Option<i32>, Value) {
    let ran = kill::run(ws, &["verify"], Kill::Never);
    let doc = serde_json::from_str(&ran.out.stdout).unwrap_or_else(|e| panic!("{e}: {}", ran.out.describe()));
    (ran.out.exit(), doc)
}

fn bytes(ws: &Ws, suffix: &str) -> Option<Vec<u8>> {
    std::fs::read(format!("{}{suffix}", ws.store().display())).ok()
}

/// A satisfied store of the command plan: three attempts (1: C1 effect
/// none, 2: C2 local, 3: C3 paid external), receipts, validations,
/// acceptance, budget use.
fn satisfied(rcv: &Receiver, run: &str) -> Instance {
    let inst = Instance::new("command", rcv, run);
    inst.ws.run().expect(0, None);
    inst
}

#[test]
fn a_store_the_engine_made_passes_every_check() {
    let rcv = Receiver::start(&[]);
    let inst = satisfied(&rcv, "ok");
    let (code, doc) = verify(&inst.ws);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["ok"], true, "{doc}");
    assert_eq!(doc["checks"].as_array().map(Vec::len), Some(CHECKS), "{doc}");
    assert_eq!(doc["checks"][0], "no_hot_journal", "{doc}");
    assert_eq!(doc["checks"][1], "sqlite_integrity", "SQLite's own check comes next: {doc}");
}

#[test]
fn prints_the_number_of_checks() {
    let rcv = Receiver::start(&[]);
    let inst = satisfied(&rcv, "text");
    let out = inst.ws.command(&["verify"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.starts_with(&format!("store verified: {CHECKS} checks")), "{text}");
}

/// After a crash the ledger sits in the write-ahead log; verify reads it
/// there and leaves both files exactly as they were (no checkpoint, no
/// recovery, no migration).
#[test]
fn verify_changes_no_byte_of_a_crashed_store() {
    let rcv = Receiver::start(&["--observe"]);
    let inst = Instance::new("http-observe", &rcv, "wal");
    let ran = kill::run(&inst.ws, &["run", "plan.json", "--jobs", "1"], Kill::AfterCommits(6));
    assert!(ran.out.killed(), "{}", ran.out.describe());
    let (db, wal) = (bytes(&inst.ws, ""), bytes(&inst.ws, "-wal"));
    assert!(wal.as_ref().is_some_and(|w| !w.is_empty()), "the crash left a write-ahead log");
    let (code, doc) = verify(&inst.ws);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(bytes(&inst.ws, ""), db, "verify changed the store file");
    assert_eq!(bytes(&inst.ws, "-wal"), wal, "verify changed the write-ahead log");
}

/// Damage verify must name: (what is done to a satisfied store, the check
/// that fails, words its finding contains).
const TAMPERED: &[(&str, &str, &str)] = &[
    ("DROP TRIGGER events_append_only_delete", "schema", "events_append_only_delete"),
    ("UPDATE evidence SET data = '{\"kind\": 7}' WHERE id = 1", "json_columns", "evidence 1"),
    ("UPDATE attempts SET request_json = '{' WHERE id = 2", "json_columns", "attempts 2"),
    ("UPDATE blobs SET data = CAST('x' AS BLOB), size = 1 WHERE rowid = 1", "blobs", "hash to"),
    ("UPDATE revisions SET plan_json = replace(plan_json, 'C3', 'C4')", "plan_digests", "revision 1"),
    ("UPDATE attempts SET generation = 99 WHERE id = 1", "lease_generation", "attempt 1"),
    ("UPDATE goals SET calls_used = calls_used - 1", "budget_counters", "recount"),
    ("UPDATE goals SET cost_used_micros = 0", "budget_counters", "cost 0"),
    ("UPDATE attempts SET try_no = 2 WHERE id = 3", "tries_contiguous", "has tries 2"),
    ("INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, cost_micros, state, generation, intent_at_ms)
      SELECT goal_id, revision, task_ref, operation_id, 2, 'run', 'x', request_json, effect, cost_micros, 'failed', generation, 0 FROM attempts WHERE id = 1;
      UPDATE goals SET calls_used = calls_used + 1",
     "one_request_per_operation", "2 request digests"),
    ("UPDATE attempts SET state = 'dispatched' WHERE id = 2", "attempt_traces", "has a receipt but is dispatched"),
    ("DELETE FROM receipts WHERE attempt_id = 3", "attempt_traces", "succeeded without a receipt"),
    ("UPDATE attempts SET state = 'settled_ok' WHERE id = 3", "settlements", "without a settlement"),
    ("UPDATE check_results SET passed = 0 WHERE attempt_id = 2", "succeeded_validated", "validation V1"),
    ("UPDATE check_results SET checkpoint = 'elsewhere' WHERE attempt_id = 2", "succeeded_validated", "attempt 2"),
    ("UPDATE tasks SET state = 'succeeded', detail = '{}' WHERE task_ref = 'C3'; UPDATE attempts SET state = 'failed' WHERE id = 3",
     "succeeded_validated", "is succeeded but its latest attempt 3 is failed"),
    ("UPDATE attempts SET state = 'effect_unknown' WHERE id = 1; UPDATE tasks SET state = 'pending' WHERE task_ref = 'C1'",
     "task_follows_attempt", "is effect_unknown but its task is pending"),
    ("UPDATE check_results SET passed = 0 WHERE scope = 'acceptance'", "goal_verdicts", "acceptance check A1"),
    ("UPDATE tasks SET state = 'blocked' WHERE task_ref = 'C2'", "goal_verdicts", "task C2 is blocked"),
    // An act inserted by hand is tampering, whichever check meets it first
    // (here `approvals`: consumed by an attempt of another operation).
    ("INSERT INTO approvals (operation_id, goal_id, revision, task_ref, request_digest, plan_digest, actor, note, at_ms, consumed_by)
      SELECT operation_id, goal_id, revision, task_ref, request_digest, 'p', 'me', 'n', 0, 1 FROM attempts WHERE id = 3",
     "act_chain", "approvals row 1"),
    ("INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, cost_micros, state, generation, intent_at_ms)
      SELECT goal_id, revision, task_ref, operation_id, 2, 'run', request_digest, request_json, effect, cost_micros, 'failed', generation, 0 FROM attempts WHERE id = 3;
      UPDATE goals SET calls_used = calls_used + 1, cost_used_micros = cost_used_micros + 2000000;
      UPDATE tasks SET state = 'failed' WHERE task_ref = 'C3'",
     "repeats_approved", "repeats paid work"),
];

/// The store file and its mark as a run left them, to copy from.
struct Base {
    db: Vec<u8>,
    mark: Vec<u8>,
    plan: String,
}

impl Base {
    fn of(ws: &Ws) -> Base {
        let (db, mark) = (std::fs::read(ws.store()).unwrap(), bytes(ws, ".mark").expect("the store's mark"));
        Base { db, mark, plan: ws.read("plan.json") }
    }

    /// A fresh workspace holding a copy of the store (0600, as the engine
    /// makes its files), the store file changed by `edit`.
    fn copy(&self, edit: impl FnOnce(&mut Vec<u8>)) -> Ws {
        use std::os::unix::fs::PermissionsExt;
        let ws = Ws::new();
        ws.write("plan.json", &self.plan);
        std::fs::create_dir_all(ws.store().parent().unwrap()).unwrap();
        let mut db = self.db.clone();
        edit(&mut db);
        for (path, bytes) in
            [(ws.store(), &db), (std::path::PathBuf::from(format!("{}.mark", ws.store().display())), &self.mark)]
        {
            std::fs::write(&path, bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        ws
    }
}

#[test]
fn verify_names_the_first_bad_entry() {
    let rcv = Receiver::start(&[]);
    let inst = satisfied(&rcv, "base");
    let base = Base::of(&inst.ws);
    let mut failures = Vec::new();
    for (sql, check, words) in TAMPERED {
        let ws = base.copy(|_| {});
        crate::support::ledger::tamper_batch(&ws.store(), sql);
        let (code, doc) = verify(&ws);
        let error = &doc["error"];
        let want = if *check == "act_chain" { "STORE_TAMPERED" } else { "STORE_CORRUPT" };
        let ok = code == Some(2)
            && error["code"] == want
            && error["details"]["check"] == *check
            && error["message"].as_str().is_some_and(|m| m.contains(words));
        if !ok {
            failures.push(format!("{sql}\n  expected check {check} naming {words:?}, got exit {code:?}: {doc}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 29, defect 3: bytes that are not UTF-8 in a text column made
/// verify panic (exit 101) while other commands read on. Named, by row and
/// column, before any check reads the value; every reading command refuses
/// it too, with the same code.
#[test]
fn text_that_is_not_utf8_is_named_never_a_panic() {
    let rcv = Receiver::start(&[]);
    let inst = satisfied(&rcv, "utf8");
    let base = Base::of(&inst.ws);
    for (sql, entry) in [
        ("UPDATE attempts SET request_json = CAST(X'7BE1227D' AS TEXT) WHERE id = 2", "attempts row 2"),
        ("UPDATE tasks SET meaning = CAST(X'FF' AS TEXT) WHERE task_ref = 'C1'", "tasks row"),
        ("UPDATE receipts SET data = CAST(data AS BLOB) WHERE attempt_id = 1", "receipts row 1"),
        ("UPDATE goals SET calls_used = 'many'", "goals row 1"),
    ] {
        let ws = base.copy(|_| {});
        crate::support::ledger::tamper_batch(&ws.store(), sql);
        let (code, doc) = verify(&ws);
        assert_eq!((code, doc["error"]["code"].as_str()), (Some(2), Some("STORE_CORRUPT")), "{sql}: {doc}");
        assert_eq!(doc["error"]["details"]["check"], "column_types", "{sql}: {doc}");
        assert!(doc["error"]["message"].as_str().unwrap().contains(entry), "{sql}: names {entry}: {doc}");
        for args in [&["status"][..], &["explain", "C1"], &["log"], &["report", "--json"], &["run", "plan.json"]] {
            let ran = kill::run(&ws, args, Kill::Never);
            let out = &ran.out;
            assert_eq!(out.exit(), Some(2), "{sql}: engine {args:?} refuses as verify does\n{}", out.describe());
            assert!(out.stdout.contains("STORE_CORRUPT"), "{sql}: engine {args:?}\n{}", out.describe());
        }
    }
}

#[test]
fn a_file_with_no_ledger_or_no_file_is_refused() {
    let ws = Ws::new();
    let (code, doc) = verify(&ws);
    assert_eq!((code, doc["error"]["code"].as_str()), (Some(2), Some("USAGE_ERROR")), "no store: {doc}");
    // What a killed creation or a lost write-ahead log leaves: a file with
    // no ledger. Refused, and not migrated into an empty one.
    std::fs::create_dir_all(ws.store().parent().unwrap()).unwrap();
    std::fs::write(ws.store(), b"").unwrap();
    std::fs::set_permissions(ws.store(), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (code, doc) = verify(&ws);
    assert_eq!(code, Some(2), "{doc}");
    assert_eq!(doc["error"]["details"]["check"], "schema", "{doc}");
    assert!(doc["error"]["message"].as_str().unwrap().contains("holds no ledger"), "{doc}");
    assert_eq!(std::fs::metadata(ws.store()).unwrap().len(), 0, "verify never migrates");
}

/// Zeroed pages after a clean shutdown: each is named as damage by
/// SQLite's own check (or the first read of a damaged table), or is
/// harmless — the ledger reads back exactly as before.
#[test]
fn zeroed_pages_are_named_or_harmless() {
    let rcv = Receiver::start(&[]);
    let inst = satisfied(&rcv, "pages");
    let base = Base::of(&inst.ws);
    let before = inst.ws.ledger().snapshot();
    let pages = base.db.len() / 4096;
    let mut harmless = 0;
    for page in 1..pages {
        let ws = base.copy(|db| db[page * 4096..(page + 1) * 4096].fill(0));
        let (code, doc) = verify(&ws);
        if code == Some(0) {
            harmless += 1;
            assert_eq!(ws.ledger().snapshot(), before, "page {page} of {pages} zeroed: verify passed a changed ledger");
            continue;
        }
        assert_eq!((code, doc["error"]["code"].as_str()), (Some(2), Some("STORE_CORRUPT")), "page {page}: {doc}");
    }
    assert!(harmless < pages / 2, "{harmless} of {pages} zeroed pages went unnoticed");
}

/// What a kill during the store's creation can leave (issue 9, defect 3):
/// a rollback journal that only a writer can roll back. Verify names it
/// and leaves both files as they are.
#[test]
fn a_hot_journal_is_named_and_left_alone() {
    let ws = Ws::new();
    let dir = ws.store().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    // A writer in rollback-journal mode killed mid-transaction, with its
    // cache too small to keep the transaction off the file.
    let script = "import os, signal, sqlite3, sys\n\
        c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
        c.execute('PRAGMA journal_mode=DELETE'); c.execute('CREATE TABLE t(x)'); c.execute('PRAGMA cache_size=1')\n\
        c.execute('BEGIN')\n\
        [c.execute('INSERT INTO t VALUES (?)', ('x' * 500,)) for _ in range(2000)]\n\
        os.kill(os.getpid(), signal.SIGKILL)\n";
    let status = std::process::Command::new("python3").args(["-c", script]).arg(ws.store()).status().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
    for suffix in ["", "-journal"] {
        let p = format!("{}{suffix}", ws.store().display());
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let (db, journal) = (bytes(&ws, ""), bytes(&ws, "-journal"));
    assert!(journal.as_ref().is_some_and(|j| !j.is_empty()), "the writer left a hot journal");
    let (code, doc) = verify(&ws);
    assert_eq!(code, Some(2), "{doc}");
    assert_eq!(doc["error"]["details"]["check"], "no_hot_journal", "{doc}");
    assert_eq!((bytes(&ws, ""), bytes(&ws, "-journal")), (db, journal), "verify rolled nothing back");
}
