//! A completion belongs to its workspace (issue 43, SPEC "Reuse codes":
//! `OUTPUTS_MISSING`): the same plan and store used from a second folder,
//! where a later task fails before the acceptance checks, never shows a
//! task `kept` without its declared outputs in that folder.

use serde_json::json;

use crate::helpers::*;

/// T1 writes `out1.txt` (declared); T2, on its own, passes only where
/// `local.txt` says `a`.
fn tasks() -> Vec<serde_json::Value> {
    let mut t1 = sh_task("T1", "echo one > out1.txt");
    t1["inputs"] = json!(["in.txt"]);
    t1["outputs"] = json!(["out1.txt"]);
    let mut t2 = sh_task("T2", "grep -q a local.txt");
    t2["inputs"] = json!(["local.txt"]);
    vec![t1, t2]
}

/// Folder A ran everything; folder B (outside A) holds the same plan and
/// inputs but a `local.txt` T2 fails on.
fn second_folder() -> (Ws, std::path::PathBuf) {
    let ws = Ws::new();
    let p = plan("folders", tasks());
    ws.write("in.txt", "in\n");
    ws.write("local.txt", "a\n");
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let b = ws.root().join("b");
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("in.txt"), "in\n").unwrap();
    std::fs::write(b.join("local.txt"), "b\n").unwrap();
    std::fs::write(b.join("plan.json"), serde_json::to_string_pretty(&p).unwrap()).unwrap();
    (ws, b)
}

fn run_in(ws: &Ws, b: &std::path::Path) -> Out {
    let store = ws.store();
    ws.engine(&["--json", "--store", store.to_str().unwrap(), "run", b.join("plan.json").to_str().unwrap()])
}

#[test]
fn a_kept_task_has_its_outputs_written_back_in_a_second_folder_even_when_a_later_task_fails() {
    let (ws, b) = second_folder();
    let out = run_in(&ws, &b);
    assert_ne!(out.code(), 0, "T2 fails in B: {}", out.describe());
    assert_eq!([ws.calls("T1"), ws.calls("T2")], [1, 2], "T1 is kept, T2 ran and failed");
    assert_eq!(std::fs::read_to_string(b.join("out1.txt")).unwrap(), "one\n", "written back from the ledger");
    let written = ws.events_of("outputs_materialized");
    assert!(written.iter().any(|(_, _, d)| d["for"] == "reuse" && d["paths"] == json!(["out1.txt"])), "{written:#?}");
}

/// A completion whose outputs the ledger did not keep (recorded before the
/// ledger kept outputs, or its rows lost: here they are deleted) is never
/// kept: nothing shows a folder holds them, so it is `OUTPUTS_MISSING` and
/// runs again, in the folder that made it as in a second one, before a
/// later task fails. An external task stands on a plain re-run, with its
/// outputs written back from the ledger.
#[test]
fn a_completion_whose_outputs_the_ledger_did_not_keep_is_outputs_missing_and_runs_again() {
    let ws = Ws::new();
    let mut ts = tasks();
    let mut t3 = sh_task("T3", "echo sent > ext.txt");
    t3["effect"] = json!("external");
    t3["outputs"] = json!(["ext.txt"]);
    ts.push(t3);
    let p = plan("unkept", ts);
    ws.write("in.txt", "in\n");
    ws.write("local.txt", "a\n");
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let db = rusqlite::Connection::open(ws.store()).unwrap();
    let gone = db.execute("DELETE FROM outputs WHERE path = 'out1.txt'", []).unwrap();
    assert_eq!(gone, 1, "T1's one output row");
    drop(db);
    let b = ws.root().join("b");
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("in.txt"), "in\n").unwrap();
    std::fs::write(b.join("local.txt"), "b\n").unwrap();
    std::fs::write(b.join("plan.json"), serde_json::to_string_pretty(&p).unwrap()).unwrap();
    let out = run_in(&ws, &b);
    assert_ne!(out.code(), 0, "T2 fails in B: {}", out.describe());
    assert_eq!([ws.calls("T1"), ws.calls("T3")], [2, 1], "T1 runs again, T3 (external) stands");
    assert_eq!(std::fs::read_to_string(b.join("out1.txt")).unwrap(), "one\n", "made again in B");
    assert_eq!(std::fs::read_to_string(b.join("ext.txt")).unwrap(), "sent\n", "written back from the ledger");
    let stale = ws.events_of("completion_stale");
    let t1: Vec<_> = stale.iter().filter(|(t, _, _)| t.as_deref() == Some("T1")).collect();
    assert_eq!(t1.len(), 1, "{stale:#?}");
    assert_eq!(t1[0].2["stale"], "OUTPUTS_MISSING");
    let detail = t1[0].2["detail"].as_str().unwrap();
    assert!(
        detail.contains("the ledger recorded outputs for it but holds none") && detail.contains("out1.txt"),
        "{detail}"
    );
    let report = out.json();
    let line = report["tasks"].as_array().unwrap().iter().find(|t| t["task_ref"] == "T1").unwrap()["rechecked"].clone();
    assert!(line.as_str().unwrap().starts_with("ran again: OUTPUTS_MISSING: "), "{report:#}");
}

/// An external task whose outputs the ledger lost is `OUTPUTS_MISSING`
/// too, but its call is never made again on that local finding alone: a
/// repeat of external work that took effect waits for a person's approval,
/// which says so, and nothing is sent meanwhile.
#[test]
fn an_external_completion_whose_outputs_were_lost_is_not_sent_again_without_a_person() {
    let ws = Ws::new();
    let mut t = sh_task("T1", "echo sent > ext.txt");
    t["effect"] = json!("external");
    t["outputs"] = json!(["ext.txt"]);
    ws.write_plan("plan.json", &plan("lost", vec![t]));
    ws.json(&["run", "plan.json"], 0);
    let db = rusqlite::Connection::open(ws.store()).unwrap();
    assert_eq!(db.execute("DELETE FROM outputs", []).unwrap(), 1, "T1's one output row");
    drop(db);
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(ws.calls("T1"), 1, "not sent again: {}", out.describe());
    assert_eq!(out.json()["awaiting_approval"][0]["task_ref"], "T1", "{}", out.describe());
    let text = ws.engine(&["run", "plan.json"]);
    assert_eq!((text.code(), ws.calls("T1")), (4, 1), "{}", text.describe());
    assert!(text.stdout.contains("already took effect"), "the wait says what it repeats: {}", text.stdout);
}
