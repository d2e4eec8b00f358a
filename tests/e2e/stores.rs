//! `engine stores [--prune] [--force]`: the stores in the state folder,
//! each with its workspace, size, last write and what waits on a person;
//! `--prune` removes only those whose workspace is gone and that wait on
//! nothing (`--force`: those too), never one whose workspace is there or
//! that a live engine holds; the stores are their owner's alone.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};

use super::common::*;

/// `engine stores ARGS --json`: its stores, by workspace folder name.
fn stores(ws: &Ws, args: &[&str]) -> (Value, Vec<(String, Value)>) {
    let mut all = vec!["stores"];
    all.extend_from_slice(args);
    let doc = ws.json(&all, 0);
    let rows = doc["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .map(|s| {
            let name = s["workspace"].as_str().map_or("?".into(), |w| w.rsplit('/').next().unwrap_or("").to_string());
            (name, s.clone())
        })
        .collect();
    (doc, rows)
}

fn row<'a>(rows: &'a [(String, Value)], name: &str) -> &'a Value {
    &rows.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no store of {name}: {rows:?}")).1
}

/// Three workspaces run in one state folder: `kept` (still there), `gone`
/// (removed, its run settled) and `doubt` (removed, its engine killed
/// after dispatching an external call: an operation in doubt).
fn three_workspaces(ws: &Ws) {
    for name in ["kept", "gone", "doubt"] {
        let mut t = task("T1", &["true"]);
        if name == "doubt" {
            t["effect"] = json!("external");
        }
        ws.write_plan(&format!("{name}/plan.json"), &plan(vec![t]));
    }
    ws.engine(&["run", "kept/plan.json"]).expect_code(0);
    ws.engine(&["run", "gone/plan.json"]).expect_code(0);
    let killed = ws.engine_env(&["run", "doubt/plan.json"], &[("ENGINE_FAILPOINT", "after_dispatch")]);
    assert!(killed.killed(), "{}", killed.describe());
    fs::remove_dir_all(ws.path("gone")).unwrap();
    fs::remove_dir_all(ws.path("doubt")).unwrap();
}

#[test]
fn stores_lists_each_store_and_prune_removes_only_gone_workspaces_that_wait_on_nothing() {
    let ws = Ws::new();
    three_workspaces(&ws);
    let folder = |name: &str| ws.store_dir_of(&ws.path("").join(name));
    let (kept_dir, gone_dir, doubt_dir) = (ws.store_dir_of(&ws.path("kept")), folder("gone"), folder("doubt"));
    assert!(kept_dir.is_dir() && gone_dir.is_dir() && doubt_dir.is_dir());

    // Listed: each with its workspace, size, last write, what waits.
    let (doc, rows) = stores(&ws, &[]);
    assert_eq!(doc["root"], json!(ws.state_home().join("engine/stores")), "{doc}");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let kept = row(&rows, "kept");
    assert_eq!(kept["workspace"], json!(ws.path("kept")));
    assert_eq!(kept["workspace_exists"], true);
    assert!(kept["bytes"].as_u64().unwrap() > 0 && kept["last_written"].is_string(), "{kept}");
    assert_eq!(kept["prune"]["action"], "would_keep");
    assert_eq!(kept["prune"]["reason"], "workspace_exists");
    let gone = row(&rows, "gone");
    assert_eq!(
        (gone["workspace_exists"].clone(), gone["prune"]["action"].clone()),
        (json!(false), json!("would_remove"))
    );
    let doubt = row(&rows, "doubt");
    assert_eq!((doubt["unknown_operations"].clone(), doubt["in_doubt_operations"].clone()), (json!(0), json!(1)));
    assert_eq!(doubt["prune"]["reason"], "unsettled_operations", "{doubt}");
    let text = ws.engine(&["stores"]);
    text.expect_code(0);
    assert!(text.stdout.contains(&format!("{} (gone)", ws.path("gone").display())), "{}", text.stdout);
    assert!(text.stdout.contains("3 stores, 2 whose workspace is gone"), "{}", text.stdout);
    assert!(gone_dir.is_dir(), "listing removes nothing");

    // Pruned: the settled store of a gone workspace only, and said so.
    let prune = ws.engine(&["stores", "--prune"]);
    prune.expect_code(0);
    assert!(prune.stdout.contains("REMOVED (its workspace is gone)"), "{}", prune.stdout);
    assert!(prune.stdout.contains("kept: 0 operations with an unknown outcome and 1 in doubt wait on a person"));
    assert!(prune.stdout.contains("--force removes it anyway") && prune.stdout.contains("kept: its workspace exists"));
    assert!(prune.stdout.contains("removed 1 store") && prune.stdout.contains("kept 2"), "{}", prune.stdout);
    assert!(!gone_dir.exists() && doubt_dir.is_dir() && kept_dir.is_dir());

    // --force: the one in doubt too; never the one whose workspace is there.
    let (doc, rows) = stores(&ws, &["--prune", "--force"]);
    assert_eq!((doc["removed"].clone(), doc["kept"].clone()), (json!(1), json!(1)), "{doc}");
    assert_eq!(row(&rows, "doubt")["prune"], json!({"action": "removed", "forced": true, "reason": null, "why": null}));
    assert!(!doubt_dir.exists() && kept_dir.is_dir());
    ws.engine(&["status", "--workspace", "kept"]).expect_code(0);
}

#[test]
fn force_needs_prune() {
    let ws = Ws::new();
    let out = ws.engine(&["stores", "--force"]);
    out.expect_code(2);
    assert!(out.stderr.contains("--prune"), "{}", out.stderr);
}

/// A store a live engine holds stays, whatever became of its workspace.
#[test]
fn a_store_a_live_engine_holds_is_kept() {
    let ws = Ws::new();
    let mut p =
        plan(vec![json!({"ref": "S", "provider": "b", "action": {"op": "sleep", "ms": 20000}, "effect": "none"})]);
    p["providers"] = json!({"b": {"kind": "builtin"}});
    ws.write_plan("busy/plan.json", &p);
    let mut running = ws.spawn_engine(&["run", "busy/plan.json"]);
    let store = ws.store_of("busy");
    wait_until(std::time::Duration::from_secs(20), "the run holds its store", || {
        (store.exists() && ws.engine(&["--json", "status", "--workspace", "busy"]).stdout.contains("running"))
            .then_some(())
    });
    let moved = ws.root().join("busy-moved");
    fs::rename(ws.path("busy"), &moved).unwrap();
    let (_, rows) = stores(&ws, &["--prune", "--force"]);
    let busy = row(&rows, "busy");
    assert_eq!(busy["prune"]["action"], "kept", "{busy}");
    assert_eq!(busy["prune"]["reason"], "in_use", "{busy}");
    assert_eq!(busy["in_use_by"], json!(running.pid()), "{busy}");
    assert!(store.exists());
    running.kill9();
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The stores' root, each store's folder and its files are the owner's
/// alone: made so, and closed again when opened up.
#[test]
fn the_stores_root_folders_and_files_are_the_owners_alone() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("a", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    let root = ws.state_home().join("engine/stores");
    assert_eq!((mode(&root), mode(&ws.store_dir())), (0o700, 0o700));
    for entry in fs::read_dir(ws.store_dir()).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
    // Opened up by hand: the next command closes them again.
    let workspace_file = ws.store_dir().join("workspace");
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(ws.store_dir(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&workspace_file, fs::Permissions::from_mode(0o644)).unwrap();
    ws.engine(&["status"]).expect_code(0);
    assert_eq!((mode(&root), mode(&ws.store_dir()), mode(&workspace_file)), (0o700, 0o700, 0o600));
    // And `engine stores` does the same for every store it lists; a ledger
    // file whose mode changed is not repaired in silence: every command
    // that opens the store names the change.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o750)).unwrap();
    fs::set_permissions(ws.store_dir(), fs::Permissions::from_mode(0o711)).unwrap();
    fs::set_permissions(ws.store(), fs::Permissions::from_mode(0o640)).unwrap();
    ws.engine(&["stores"]).expect_code(0);
    assert_eq!((mode(&root), mode(&ws.store_dir()), mode(&ws.store())), (0o700, 0o700, 0o640));
    let out = ws.engine(&["status", "--json"]);
    out.expect_code(2);
    assert!(out.stdout.contains("STORE_TAMPERED") && out.stdout.contains("0600"), "{}", out.stdout);
}
