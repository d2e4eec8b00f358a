//! Where the store lives: outside the workspace, found from any folder
//! beneath it, never shared by two workspaces, never committed by accident.

use serde_json::json;

use crate::support::workspace::arg;
use crate::support::*;

fn one_task(ws: &Ws) {
    ws.write_plan(
        "plan.json",
        &json!({
        "version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "effect": "none", "action": {"run": ["true"]}}]}),
    );
}

/// The default store is the workspace's, in the state folder, with its
/// `workspace` file; a command in a folder beneath the workspace finds it.
#[test]
fn the_store_is_found_from_a_folder_beneath_the_workspace() {
    let ws = Ws::new();
    one_task(&ws);
    ws.engine(&["run", "plan.json"]).expect_code(0);
    assert!(ws.store().exists(), "{}", ws.store().display());
    assert_eq!(std::fs::read_to_string(ws.store_dir().join("workspace")).unwrap(), arg(&ws.dir));
    assert!(!ws.path(".engine").exists(), "nothing in the workspace");
    std::fs::create_dir_all(ws.path("a/b")).unwrap();
    let mut cmd = ws.command(&["status", "--json"]);
    cmd.current_dir(ws.path("a/b"));
    let out = ws.run_command(cmd);
    out.expect_code(0);
    assert_eq!(out.json()["store"], json!(arg(&ws.store())), "{}", out.stdout);
}

/// A store folder whose `workspace` file names another workspace is
/// refused, never used.
#[test]
fn a_store_of_another_workspace_is_refused() {
    let ws = Ws::new();
    one_task(&ws);
    ws.engine(&["run", "plan.json"]).expect_code(0);
    std::fs::write(ws.store_dir().join("workspace"), "/somewhere/else").unwrap();
    for args in [&["status"][..], &["run", "plan.json"][..]] {
        let out = ws.engine(args);
        out.expect_code(2);
        assert!(out.stderr.contains("/somewhere/else"), "{args:?}: {}", out.stderr);
    }
}

/// A `--store` inside a git worktree gets a `.gitignore` of `*` beside it.
#[test]
fn a_store_in_a_git_worktree_is_ignored_by_git() {
    let ws = Ws::new();
    one_task(&ws);
    let repo = ws.state_home().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let store = repo.join("ledger").join("engine.db");
    ws.engine(&["run", "plan.json", "--store", arg(&store)]).expect_code(0);
    assert_eq!(std::fs::read_to_string(repo.join("ledger/.gitignore")).unwrap(), "*\n");
}
