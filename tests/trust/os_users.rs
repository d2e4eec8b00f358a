//! Issue 24 hole 7: `people` across real operating-system users on a
//! SQLite store. A store is its owner's alone unless the owner shares it
//! with a group (`--store-group`); then each member named in `people` acts
//! on it, anyone outside the group is refused with exit 2 (never 70), and
//! when everyone a list names is gone the store's owner — and only the
//! owner — revises `people` with `--people`, on the act chain.
//!
//! These make users and a group (`useradd`, `groupadd`), so they need
//! root, as CI has; elsewhere each prints why it skipped.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;
use crate::support::ledger::row_digest;
use crate::support::os_users::{chown, engine_as, OsUser, OsUsers};

/// A workspace `owner` may run in, with a plan whose one HTTP task needs
/// an approval, `people` as given; and `owner`'s folder for a store, which
/// any user may pass through (outside the temporary folder, as the engine
/// requires: in the users' reachable folder).
fn setup(os: &OsUsers, rcv: &Receiver, owner: &OsUser, people: Value) -> (Ws, tempfile::TempDir) {
    let ws = Ws::new();
    let mut task = http_task("T1", "external");
    task["requires_approval"] = json!(true);
    let mut p = plan("docs", json!({"r": http_provider(rcv, false)}), vec![task]);
    p["people"] = people;
    ws.write_plan("plan.json", &p);
    std::fs::set_permissions(ws.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    chown(&ws.dir, owner);
    let stores = os.place.folder("engine-group-");
    chown(stores.path(), owner);
    (ws, stores)
}

fn mode_gid(p: &Path) -> (u32, u32) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.mode() & 0o7777, m.gid())
}

/// Every file of the store's folder is the group's and open to no one
/// else (but the `.gitignore` the engine leaves in a git worktree, which
/// says only `*`).
fn assert_shared(folder: &Path, gid: u32) {
    assert_eq!(mode_gid(folder), (0o2770, gid), "{}", folder.display());
    for e in std::fs::read_dir(folder).unwrap() {
        let p: PathBuf = e.unwrap().path();
        if p.file_name().is_some_and(|n| n == ".gitignore") {
            continue;
        }
        let (mode, g) = mode_gid(&p);
        let want = if p.extension().is_some_and(|x| x == "group") { 0o640 } else { 0o660 };
        assert_eq!((mode, g), (want, gid), "{}", p.display());
    }
}

/// An owner-only store refuses another user with exit 2 naming its folder;
/// shared with a group by its owner, a member `people` names approves, a
/// member it does not name is NOT_PERMITTED, a user outside the group is
/// refused (exit 2, nothing recorded), and the owner's run spends the
/// member's approval: one delivery.
#[test]
fn a_store_shared_with_a_group_takes_the_acts_of_the_members_people_names() {
    let Some(mut os) = OsUsers::new("a_store_shared_with_a_group_takes_the_acts_of_the_members_people_names") else {
        return;
    };
    let (alice, bob, eve) = (os.user(true), os.user(true), os.user(false));
    let rcv = Receiver::start(&[]);
    let (ws, stores) = setup(&os, &rcv, &alice, json!({"approve": [bob.name]}));
    let store = stores.path().join("shared").join("engine.db");
    let s = store.to_str().unwrap();
    let op = ws.digest_op("T1");

    // Its owner's alone, as every store is by default.
    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s]).expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(mode_gid(store.parent().unwrap()).0, 0o700);
    let out = engine_as(&ws, &bob, &["--json", "approve", &op, "--note", "n", "--store", s]);
    out.expect(2, Some("USAGE_ERROR"));
    assert!(out.stdout.contains("closed to you"), "{}", out.describe());

    // Shared by its owner with the group.
    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s, "--store-group", &os.group])
        .expect(4, Some("APPROVAL_REQUIRED"));
    assert_shared(store.parent().unwrap(), os.gid);
    let before = row_digest(&store);
    let out = engine_as(&ws, &eve, &["--json", "approve", &op, "--note", "n", "--store", s]);
    out.expect(2, Some("USAGE_ERROR"));
    assert!(out.stdout.contains("closed to you"), "{}", out.describe());
    let out = engine_as(&ws, &alice, &["--json", "approve", &op, "--note", "n", "--store", s]);
    out.expect(2, Some("NOT_PERMITTED"));
    assert!(out.stdout.contains(&bob.name), "{}", out.describe());
    assert_eq!(row_digest(&store), before, "a refused act recorded something");

    let out = engine_as(&ws, &bob, &["--json", "approve", &op, "--note", "checked", "--store", s]);
    out.expect(0, None);
    let a = &Ledger::open(&store).approvals()[0];
    assert_eq!((a.uid, a.user.as_deref()), (Some(bob.uid), Some(bob.name.as_str())));
    assert_shared(store.parent().unwrap(), os.gid);

    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s]).expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "one approval, one delivery");
    assert_shared(store.parent().unwrap(), os.gid);
    engine_as(&ws, &bob, &["--json", "verify", "--store", s]).expect(0, None);
    os.remove(&eve);
}

/// Everyone `people` names is gone: nobody may approve, and a revision
/// that changes `people` is NOT_PERMITTED (saying the way out). A member
/// who is not the store's owner may not take it; the owner's
/// `revise --people` is recorded with the reason and the lists on the act
/// chain, and the owner's approval then sends the call once.
#[test]
fn the_stores_owner_revises_people_when_everyone_named_is_gone() {
    let Some(mut os) = OsUsers::new("the_stores_owner_revises_people_when_everyone_named_is_gone") else { return };
    let (alice, bob, carol) = (os.user(true), os.user(true), os.user(true));
    let rcv = Receiver::start(&[]);
    let people = json!({"approve": [carol.name], "retry": [carol.name]});
    let (ws, stores) = setup(&os, &rcv, &alice, people);
    let store = stores.path().join("shared").join("engine.db");
    let s = store.to_str().unwrap();
    let op = ws.digest_op("T1");
    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s, "--store-group", &os.group])
        .expect(4, Some("APPROVAL_REQUIRED"));
    os.remove(&carol);

    engine_as(&ws, &alice, &["--json", "approve", &op, "--note", "n", "--store", s]).expect(2, Some("NOT_PERMITTED"));
    let mut p: Value = serde_json::from_str(&ws.read("plan.json")).unwrap();
    p["people"] = json!({"approve": [alice.name], "retry": [alice.name]});
    ws.write_plan("plan.json", &p);
    chown(&ws.dir, &alice);
    let before = row_digest(&store);
    let revise = |who: &OsUser, extra: &[&str]| {
        let mut args = vec!["--json", "revise", "plan.json", "--reason", "carol left", "--no-run", "--store", s];
        args.extend_from_slice(extra);
        engine_as(&ws, who, &args)
    };
    let out = revise(&alice, &[]);
    out.expect(2, Some("NOT_PERMITTED"));
    assert!(out.stdout.contains("--people"), "the way out is named: {}", out.describe());
    let out = revise(&bob, &["--people"]);
    out.expect(2, Some("NOT_PERMITTED"));
    assert!(out.stdout.contains("store's owner") && out.stdout.contains(&alice.name), "{}", out.describe());
    // `--people` changes `people` and nothing else.
    let mut more = p.clone();
    more["budgets"] = json!({"max_attempts_per_task": 2});
    ws.write_plan("plan.json", &more);
    let out = revise(&alice, &["--people"]);
    out.expect(2, Some("USAGE_ERROR"));
    assert!(out.stdout.contains("nothing else"), "{}", out.describe());
    assert_eq!(row_digest(&store), before, "a refused revision recorded something");
    ws.write_plan("plan.json", &p);

    revise(&alice, &["--people"]).expect(0, None);
    let ledger = Ledger::open(&store);
    let recorded = ledger.events_of("revision_recorded");
    let last = &recorded.last().unwrap().2;
    assert_eq!((last["people_by_store_owner"].clone(), last["user"].clone()), (json!(true), json!(alice.name)));
    let conn = rusqlite::Connection::open(&store).unwrap();
    let (user, data): (String, String) = conn
        .query_row(
            "SELECT os_user, data FROM person_requests WHERE kind = 'revise' ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(user, alice.name);
    assert_eq!(data["reason"], "carol left");
    assert_eq!(data["people_by_store_owner"]["from"]["approve"], json!([carol.name]), "{data}");
    assert_eq!(data["people_by_store_owner"]["to"]["approve"], json!([alice.name]), "{data}");
    engine_as(&ws, &bob, &["--json", "verify", "--store", s]).expect(0, None);

    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s]).expect(4, Some("APPROVAL_REQUIRED"));
    engine_as(&ws, &alice, &["--json", "approve", &op, "--note", "checked", "--store", s]).expect(0, None);
    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s]).expect(0, None);
    assert_eq!(rcv.tries_of(&op), vec![1], "one approval, one delivery");
}

/// A shared store's files are judged against the group its mark records,
/// whichever member opens it: a chmod, a chgrp, the group file gone — each
/// is `STORE_TAMPERED` naming the file and the change, for every member,
/// and left as it is (nothing repairs it); put back, the store opens.
#[test]
fn a_shared_stores_files_changed_outside_the_engine_are_refused_never_repaired() {
    let Some(mut os) = OsUsers::new("a_shared_stores_files_changed_outside_the_engine_are_refused_never_repaired")
    else {
        return;
    };
    let (alice, bob) = (os.user(true), os.user(true));
    let rcv = Receiver::start(&[]);
    let (ws, stores) = setup(&os, &rcv, &alice, json!({"approve": [bob.name]}));
    let store = stores.path().join("shared").join("engine.db");
    let s = store.to_str().unwrap();
    let as_store = |suffix: &str| PathBuf::from(format!("{s}{suffix}"));
    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s, "--store-group", &os.group])
        .expect(4, Some("APPROVAL_REQUIRED"));
    // Shared again with the same group: nothing changes, the store opens clean.
    engine_as(&ws, &alice, &["--json", "run", "plan.json", "--store", s, "--store-group", &os.group])
        .expect(4, Some("APPROVAL_REQUIRED"));
    engine_as(&ws, &bob, &["--json", "verify", "--store", s]).expect(0, None);
    assert_shared(store.parent().unwrap(), os.gid);

    let refused_for_both = |file: &Path, words: &str| {
        for (who, args) in
            [(&bob, vec!["--json", "verify", "--store", s]), (&alice, vec!["--json", "status", "--store", s])]
        {
            let out = engine_as(&ws, who, &args);
            out.expect(2, Some("STORE_TAMPERED"));
            assert!(out.stdout.contains(&*file.to_string_lossy()), "names the file: {}", out.describe());
            assert!(out.stdout.contains(words), "names the change ({words}): {}", out.describe());
        }
    };
    let mark = as_store(".mark");
    std::fs::set_permissions(&mark, std::fs::Permissions::from_mode(0o640)).unwrap();
    refused_for_both(&mark, "from 0660 to 0640");
    assert_eq!(mode_gid(&mark), (0o640, os.gid), "a tampered mode is left as it is");
    std::fs::set_permissions(&mark, std::fs::Permissions::from_mode(0o660)).unwrap();
    engine_as(&ws, &bob, &["--json", "verify", "--store", s]).expect(0, None);

    std::os::unix::fs::lchown(&store, None, Some(0)).unwrap();
    refused_for_both(&store, &format!("from gid {} to gid 0", os.gid));
    std::os::unix::fs::lchown(&store, None, Some(os.gid)).unwrap();

    let folder = store.parent().unwrap();
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o2775)).unwrap();
    refused_for_both(folder, "from 2770 to 2775");
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o2770)).unwrap();

    let group_file = as_store(".group");
    let away = stores.path().join("group-file-away");
    std::fs::rename(&group_file, &away).unwrap();
    refused_for_both(&group_file, "is gone");
    std::fs::rename(&away, &group_file).unwrap();
    engine_as(&ws, &bob, &["--json", "verify", "--store", s]).expect(0, None);
    assert_shared(folder, os.gid);
}

/// Issue 36, item 6: a person's retry on a shared store ran with weaker
/// confinement than its owner's runs (a member who is not root: no cgroup,
/// the stores not hidden, UDP not restricted), and a `setsid env -i` child
/// landed its effect while the task read `succeeded`. Every person's run on
/// a shared store now confines as the owner's engine does, or is refused
/// before anything runs or is recorded, naming what it lacks and why. The
/// owner's own retry runs confined: the escapee is ended with its cgroup.
#[test]
fn a_members_run_on_a_shared_store_confines_as_the_owners_or_is_refused() {
    let Some(mut os) = OsUsers::new("a_members_run_on_a_shared_store_confines_as_the_owners_or_is_refused") else {
        return;
    };
    let bob = os.user(true);
    let ws = Ws::new();
    std::fs::set_permissions(ws.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&ws.side, std::fs::Permissions::from_mode(0o777)).unwrap();
    let landed = ws.side.join("landed");
    // Past the engine's grace for what a command leaves running (2 s).
    let escape = format!("setsid env -i sh -c 'sleep 4; touch \"$0\"' {} >/dev/null 2>&1 & exit 0", sh_quote(&landed));
    let task = json!({"ref": "T1", "provider": "sh", "effect": "local", "action": {"run": ["sh", "-c", escape]}});
    ws.write_plan("plan.json", &plan("g", json!({"sh": {"kind": "command"}}), vec![task]));
    let stores = os.place.folder("engine-group-");
    let store = stores.path().join("shared").join("engine.db");
    let s = store.to_str().unwrap();
    // The store's owner (root here: every part of the sandbox) shares it
    // and runs: the escapee is ended with the attempt's cgroup.
    let first = ws.engine(&["--json", "run", "plan.json", "--store", s, "--store-group", &os.group]);
    assert_ne!(first.code(), 0, "a command that leaves a descendant running is not `succeeded`: {}", first.describe());
    let attempts = Ledger::open(&store).attempts().len();

    let out = engine_as(&ws, &bob, &["--json", "retry", "T1", "--store", s]);
    out.expect(2, Some("USAGE_ERROR"));
    let err = &out.json()["error"];
    assert_eq!(err["details"]["reason"], "weaker_confinement", "{}", out.describe());
    let missing: Vec<String> = serde_json::from_value(err["details"]["missing"].clone()).unwrap();
    assert!(missing.contains(&"cgroup".to_string()), "names what it lacks: {}", out.describe());
    assert!(err["message"].as_str().unwrap().contains("no cgroup of their own"), "says why: {}", out.describe());
    assert_eq!(Ledger::open(&store).attempts().len(), attempts, "nothing was run");

    let again = ws.engine(&["--json", "retry", "T1", "--store", s]);
    assert_ne!(again.code(), 2, "the owner's retry runs: {}", again.describe());
    assert_eq!(Ledger::open(&store).attempts().len(), attempts + 1);
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(!landed.exists(), "no escapee of any run landed its effect");
    os.remove(&bob);
}
