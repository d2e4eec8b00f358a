//! Issue 29, defect 1, and issue 25, item 8: a provider could change the
//! store's owner, mode, extended attributes and times (Landlock covers
//! writes, not metadata: as root, `chown 65534:65534 <store>.mark` made
//! every later command exit 2), and read every other workspace's store.
//! Now a confined provider sees no store at all: each folder that holds
//! one is an empty, read-only folder in its mount namespace. Tried here by
//! a real process, as root; `"sandbox": "none"` is the control that shows
//! each attempt would land.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{json, Value};

use crate::support::workspace::arg;
use crate::support::*;

/// Tries every change on the store and its mark, and a read of another
/// workspace's store and of the stores' root; prints `label OK|ERR errno`.
const MEDDLER: &str = r#"
import errno, os, sys
store, other, root = sys.argv[1], sys.argv[2], sys.argv[3]
def attempt(label, fn):
    try:
        fn()
        print(label, "OK", flush=True)
    except OSError as e:
        print(label, "ERR", errno.errorcode.get(e.errno, e.errno), flush=True)
attempt("chown_mark", lambda: os.chown(store + ".mark", 65534, 65534))
attempt("chown_store", lambda: os.chown(store, 65534, 65534))
attempt("chmod_store", lambda: os.chmod(store, 0o777))
attempt("chmod_folder", lambda: os.chmod(os.path.dirname(store), 0o777))
attempt("setxattr_store", lambda: os.setxattr(store, "user.forged", b"1"))
attempt("utime_store", lambda: os.utime(store, (946684800, 946684800)))
attempt("read_other", lambda: open(other, "rb").read(16))
attempt("list_root", lambda: os.listdir(root) or (_ for _ in ()).throw(OSError(errno.ENOENT, "empty")))
"#;

/// The owner and mode of the store, its mark and its folder (their times
/// move with the engine's own writes).
fn metadata(store: &Path) -> Vec<(u32, u32, u32)> {
    [store.to_path_buf(), store.with_extension("db.mark"), store.parent().unwrap().to_path_buf()]
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (m.uid(), m.gid(), m.mode())
        })
        .collect()
}

/// The time the meddler sets (2000-01-01), in seconds.
const FORGED_TIME: i64 = 946_684_800;

fn xattr_names(p: &Path) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import os,sys; print(sorted(os.listxattr(sys.argv[1])))"])
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn results(text: &str) -> std::collections::HashMap<String, String> {
    text.lines().filter_map(|l| l.split_once(' ')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `other/`, a workspace of its own with a store of its own (under the same
/// state home), then this workspace's plan, whose task meddles.
fn setup(sandbox: Option<Value>) -> (Ws, std::path::PathBuf) {
    let ws = Ws::new();
    std::fs::create_dir(ws.path("other")).unwrap();
    let quiet = json!({"version": 1, "goal": {"id": "o", "statement": "another workspace"},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "T1", "provider": "sh", "effect": "none", "action": {"run": ["true"]}}]});
    ws.write_plan("other/plan.json", &quiet);
    ws.engine(&["run", "other/plan.json"]).expect_code(0);
    let other = ws.store_of("other");
    assert!(other.exists());
    // This workspace's store exists before the meddler runs: a first run.
    ws.write_plan(
        "first.json",
        &json!({"version": 1, "goal": {"id": "g0", "statement": "s"},
        "providers": {"b": {"kind": "builtin"}},
        "tasks": [{"ref": "B", "provider": "b", "effect": "none", "action": {"op": "noop"}}]}),
    );
    ws.engine(&["run", "first.json"]).expect_code(0);
    let mut provider = json!({"kind": "command"});
    if let Some(s) = sandbox {
        provider["sandbox"] = s;
    }
    let root = other.parent().unwrap().parent().unwrap();
    let task = json!({"ref": "T1", "provider": "py", "effect": "local",
        "action": {"run": ["sh", "-c", "python3 -c \"$0\" \"$@\" > meddle.txt", MEDDLER, arg(&ws.store()), arg(&other), arg(root)]}, "outputs": ["meddle.txt"]});
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "the stores are out of reach"},
        "providers": {"py": provider}, "tasks": [task]}),
    );
    (ws, other)
}

#[test]
fn a_confined_provider_changes_nothing_of_any_store_and_reads_none() {
    let (ws, other) = setup(None);
    let before = metadata(&ws.store());
    let xattrs = xattr_names(&ws.store());
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    let got = results(&ws.read("meddle.txt"));
    for label in [
        "chown_mark",
        "chown_store",
        "chmod_store",
        "chmod_folder",
        "setxattr_store",
        "utime_store",
        "read_other",
        "list_root",
    ] {
        let r = got.get(label).unwrap_or_else(|| panic!("{label} not tried: {got:?}"));
        assert!(r.starts_with("ERR"), "{label} was not refused: {got:?}");
    }
    assert_eq!(metadata(&ws.store()), before, "owner or mode of the store changed");
    assert_ne!(std::fs::metadata(ws.store()).unwrap().mtime(), FORGED_TIME, "its time was set");
    assert_eq!(xattr_names(&ws.store()), xattrs);
    assert!(other.exists());
    // Every later command works as before.
    ws.engine(&["status"]).expect_code(0);
    ws.engine(&["verify"]).expect_code(0);
    let status = ws.json(&["status"], 0);
    let t1 = status["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == "T1").cloned().unwrap();
    assert_eq!(t1["last_attempt"]["sandbox"]["stores"], json!({"state": "hidden"}), "{status}");
}

/// The control: unconfined, the same process changes the mark's owner —
/// the issue's reproduction — and reads the other store.
#[test]
fn unconfined_the_same_changes_land() {
    let (ws, _other) = setup(Some(json!("none")));
    let mark = ws.store().with_extension("db.mark");
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    let got = results(&ws.read("meddle.txt"));
    assert_eq!(got["read_other"], "OK", "{got:?}");
    assert_eq!(got["utime_store"], "OK", "{got:?}");
    // SAFETY: geteuid has no arguments.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(got["chown_mark"], "OK", "{got:?}");
        assert_eq!(std::fs::metadata(&mark).unwrap().uid(), 65534);
        // The store is now not the engine's: refused until chowned back.
        assert_eq!(ws.engine(&["status"]).code(), 2);
        std::os::unix::fs::chown(&mark, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(ws.store(), Some(0), Some(0)).unwrap();
    }
    // Its mode changed too (`chmod_store`): refused as tampered until put
    // back as the engine made it (docs/store.md, "A damaged store").
    assert_eq!(got["chmod_store"], "OK", "{got:?}");
    assert_eq!(ws.engine(&["status"]).code(), 2);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(ws.store(), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(ws.store().parent().unwrap(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let status = ws.json(&["status"], 0);
    let t1 = status["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == "T1").cloned().unwrap();
    assert_eq!(t1["last_attempt"]["sandbox"]["stores"], json!({"state": "disabled"}), "{status}");
}

/// Issue 37, item 3: `engine answer … --store PATH` run by a provider (the
/// store hidden from it) exited 70 (INTERNAL_ERROR: it tried to make a
/// store in the hidden, read-only folder). Every command a provider runs
/// on a hidden store is `STORE_NOT_FOUND` (exit 2) saying why, and nothing
/// is made or recorded.
#[test]
fn a_provider_running_the_engine_on_a_hidden_store_gets_store_not_found() {
    let ws = Ws::new();
    ws.write_plan(
        "first.json",
        &json!({"version": 1, "goal": {"id": "g0", "statement": "s"},
        "providers": {"b": {"kind": "builtin"}},
        "tasks": [{"ref": "B", "provider": "b", "effect": "none", "action": {"op": "noop"}}]}),
    );
    ws.engine(&["run", "first.json"]).expect_code(0);
    let engine = crate::support::ENGINE;
    let script = r#"engine="$0"; store="$1"; i=0
for cmd in "answer B --accept" "approve op_0123456789abcdef01234567 --note go" "status" "retry B"; do
  i=$((i+1)); "$engine" --json $cmd --store "$store" > "out/$i.json" 2>/dev/null; echo $? > "out/$i.rc"
done"#;
    std::fs::create_dir(ws.path("out")).unwrap();
    let task = json!({"ref": "T1", "provider": "sh", "effect": "local",
        "action": {"run": ["sh", "-c", script, engine, arg(&ws.store())]}, "outputs": ["out"]});
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "the engine inside"},
        "providers": {"sh": {"kind": "command"}}, "tasks": [task]}),
    );
    let before = ws.ledger().events().len();
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    for i in 1..=4 {
        let rc = ws.read(&format!("out/{i}.rc"));
        let doc: Value = serde_json::from_str(&ws.read(&format!("out/{i}.json"))).unwrap();
        assert_eq!(rc.trim(), "2", "command {i}: {doc}");
        assert_eq!(doc["error"]["code"], "STORE_NOT_FOUND", "command {i}: {doc}");
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("hides its stores"), "command {i} says why: {message}");
    }
    let after = ws.ledger().events();
    assert!(after.iter().skip(before).all(|e| e.task_ref.as_deref() != Some("B")), "nothing recorded of B");
}
