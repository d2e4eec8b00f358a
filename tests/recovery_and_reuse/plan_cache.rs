//! The plan cache (`plan::cache`): a re-run of a plan file's exact bytes
//! takes the order and digests its first full load derived; a changed byte
//! always takes the full path, and an edited cache row is not trusted.

use serde_json::json;

use crate::helpers::*;

/// Two tasks with inputs, run once.
fn build() -> Ws {
    let ws = Ws::new();
    ws.write("a.txt", "a");
    ws.write("b.txt", "b");
    let mut t1 = sh_task("T1", "true");
    t1["inputs"] = json!(["a.txt"]);
    let mut t2 = sh_task("T2", "true");
    t2["inputs"] = json!(["b.txt"]);
    t2["depends_on"] = json!(["T1"]);
    ws.write_plan("plan.json", &plan("cached", vec![t1, t2]));
    ws.json(&["run", "plan.json"], 0);
    ws
}

/// The plan cache's rows: (file key, revision).
fn cache_rows(ws: &Ws) -> Vec<(String, i64)> {
    let c = rusqlite::Connection::open(ws.store()).unwrap();
    let mut s = c.prepare("SELECT file_key, revision FROM plan_cache ORDER BY file_key").unwrap();
    let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

fn key_of(ws: &Ws, rel: &str) -> String {
    engine::plan::cache::file_key(&std::fs::read(ws.path(rel)).unwrap())
}

#[test]
fn a_rerun_of_the_same_bytes_is_served_by_the_plan_cache_and_reuses_every_task() {
    let ws = build();
    assert_eq!(cache_rows(&ws), vec![(key_of(&ws, "plan.json"), 1)], "the first run keeps its plan's row");
    let before = ws.attempt_count();
    for _ in 0..2 {
        ws.json(&["run", "plan.json"], 0);
        assert_eq!(ws.goal_state(), "satisfied");
    }
    assert_eq!(ws.attempt_count(), before, "nothing ran again");
    assert_eq!([ws.calls("T1"), ws.calls("T2")], [1, 1]);
    assert!(ws.events_of("completion_stale").is_empty());
    assert_eq!(cache_rows(&ws).len(), 1, "a hit writes no row");
    ws.verify();
}

#[test]
fn a_plan_changed_by_one_byte_is_validated_in_full_though_its_revision_is_cached() {
    let ws = build();
    let text = ws.read("plan.json");
    // One character: task T2's provider `sh` becomes `sx`, which no
    // provider is — same length, another key.
    let edited = text.replacen("\"provider\": \"sh\"", "\"provider\": \"sx\"", 2).replacen(
        "\"provider\": \"sx\"",
        "\"provider\": \"sh\"",
        1,
    );
    assert_eq!((edited.len(), edited.matches("\"sx\"").count()), (text.len(), 1), "one byte changed");
    ws.write("plan.json", &edited);
    let refused = |ws: &Ws| {
        let out = ws.engine(&["run", "plan.json", "--json"]);
        assert_eq!(out.code(), 2, "{}", out.describe());
        let doc = out.json();
        assert_eq!(doc["error"]["code"], "UNKNOWN_PROVIDER", "{doc:#}");
        assert_eq!(doc["error"]["place"], "$.tasks[1].provider", "{doc:#}");
    };
    refused(&ws);
    // Even with the cached row's key edited to the changed bytes' key: its
    // seal no longer holds, so the row is not trusted.
    let key = key_of(&ws, "plan.json");
    assert_eq!(ws.tamper(&format!("UPDATE plan_cache SET file_key = '{key}'")), 1);
    refused(&ws);
    assert_eq!(ws.attempt_count(), 2, "nothing was dispatched");

    // A valid one-byte edit is a changed plan: refused as such, not run.
    ws.write("plan.json", edited.replace("\"sx\"", "\"sh\"").replace("task T1", "task T0"));
    let doc = ws.json(&["run", "plan.json"], 2);
    assert_eq!(doc["error"]["code"], "PLAN_CHANGED", "{doc:#}");
}

#[test]
fn the_bytes_of_a_revision_left_behind_are_refused_though_their_row_is_kept() {
    let ws = build();
    let first = ws.read("plan.json");
    // Revision 2: T2 runs something else; its first run keeps its own row.
    ws.write("plan.json", first.replace("echo T2", "echo T2; true"));
    ws.json(&["revise", "plan.json", "--reason", "T2 changes", "--no-run"], 0);
    ws.json(&["run", "plan.json"], 0);
    let rows = cache_rows(&ws);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.contains(&(key_of(&ws, "plan.json"), 2)), "{rows:?}");
    // Revision 1's bytes again: their row vouches for their digests, and
    // those are not the active revision's.
    ws.write("plan.json", &first);
    let attempts = ws.attempt_count();
    let doc = ws.json(&["run", "plan.json"], 2);
    assert_eq!(doc["error"]["code"], "PLAN_CHANGED", "{doc:#}");
    assert_eq!(ws.attempt_count(), attempts, "nothing ran");
}

/// What a refused run must leave as it was: every task's state, every
/// attempt, every event (a lease-taker writes one only when it ends a
/// left-over process or takes over a lease: neither happens here).
fn ledger_now(ws: &Ws) -> (Vec<String>, usize, Vec<String>) {
    let states = ["T1", "T2"].iter().map(|t| ws.task_state(t)).collect();
    let events = ws.events().into_iter().map(|e| e.kind).collect();
    (states, ws.attempt_count(), events)
}

/// A re-run of the same bytes (a plan cache hit) after input `rel` of task
/// T2 (`$.tasks[1].inputs[0]`) was made to lead out of the workspace: the
/// load left the inputs to the run, and the run refuses it as the load
/// would, before it writes or sends anything.
fn refused_on_a_cached_rerun(ws: &Ws, rel: &str) {
    let rows = cache_rows(ws);
    let before = ledger_now(ws);
    let calls = [ws.calls("T1"), ws.calls("T2")];
    let out = ws.engine(&["run", "plan.json", "--json"]);
    assert_eq!(out.code(), 2, "{}", out.describe());
    let doc = out.json();
    assert_eq!(doc["error"]["code"], "INPUT_OUTSIDE_WORKSPACE", "{doc:#}");
    assert_eq!(doc["error"]["place"], "$.tasks[1].inputs[0]", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(&format!("input `{rel}` of task `T2` resolves through a symlink")), "{doc:#}");
    assert!(message.ends_with("outside the workspace"), "{doc:#}");
    assert_eq!(ledger_now(ws), before, "no state, attempt or run event written");
    assert_eq!([ws.calls("T1"), ws.calls("T2")], calls, "nothing dispatched");
    assert_eq!(cache_rows(ws), rows, "the same bytes: a cache hit, no new row");
    // `engine check` refuses it at load, with the same error.
    let checked = ws.engine(&["check", "plan.json", "--json"]);
    assert_eq!(checked.code(), 2, "{}", checked.describe());
    assert_eq!(checked.json()["error"], doc["error"], "the load's refusal and the run's are one");
}

#[test]
fn a_complete_tasks_input_turned_into_a_symlink_out_refuses_the_cached_rerun() {
    let ws = build();
    assert_eq!([ws.task_state("T1"), ws.task_state("T2")], ["succeeded", "succeeded"]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("b.txt"), "b").unwrap();
    std::fs::remove_file(ws.path("b.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("b.txt"), ws.path("b.txt")).unwrap();
    refused_on_a_cached_rerun(&ws, "b.txt");
    // Back inside: the same bytes run again, every task reused.
    std::fs::remove_file(ws.path("b.txt")).unwrap();
    ws.write("b.txt", "b");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!([ws.calls("T1"), ws.calls("T2")], [1, 1]);
    ws.verify();
}

#[test]
fn a_never_completed_tasks_folder_turned_into_a_symlink_out_refuses_the_cached_rerun() {
    // T1 fails, so T2 (after it) never runs: its input is checked, not
    // observed.
    let ws = Ws::new();
    ws.write("a.txt", "a");
    ws.write("d/b.txt", "b");
    let mut t1 = sh_task("T1", "exit 1");
    t1["inputs"] = json!(["a.txt"]);
    let mut t2 = sh_task("T2", "true");
    t2["inputs"] = json!(["d/b.txt"]);
    t2["depends_on"] = json!(["T1"]);
    ws.write_plan("plan.json", &plan("cached", vec![t1, t2]));
    let first = ws.engine(&["run", "plan.json", "--json"]);
    assert_ne!(first.code(), 0, "{}", first.describe());
    assert_eq!(ws.calls("T2"), 0);
    assert_ne!(ws.task_state("T2"), "succeeded");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("b.txt"), "b").unwrap();
    std::fs::remove_dir_all(ws.path("d")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("d")).unwrap();
    refused_on_a_cached_rerun(&ws, "d/b.txt");
}
