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
