//! Early cutoff (issue 43, SPEC "Reuse codes": `UPSTREAM_OUTPUT_UNCHANGED`):
//! a dependant stands on its upstream's recorded outputs, not on the fact
//! that the upstream ran. Real `sh` processes; what ran is read from the
//! tasks' own call log, what was decided from the ledger and `explain`.

use serde_json::{json, Value};

use crate::helpers::*;

/// A chain T1 → … → Tn: T1 copies the first line of `in.txt` to `out1.txt`;
/// each next task copies its upstream's output to its own. Each declares
/// its output; `outputs: false` declares none.
fn chain(n: usize, outputs: bool) -> Vec<Value> {
    (1..=n)
        .map(|k| {
            let (script, input) = match k {
                1 => ("head -n 1 in.txt > out1.txt".to_string(), "in.txt".to_string()),
                _ => (format!("cat out{}.txt > out{k}.txt", k - 1), format!("out{}.txt", k - 1)),
            };
            let mut t = sh_task(&format!("T{k}"), &script);
            t["inputs"] = json!([input]);
            // Its write declared either way: kept (`outputs`) or only
            // allowed (`may_change`).
            let field = if outputs { "outputs" } else { "may_change" };
            t[field] = json!([format!("out{k}.txt")]);
            if k > 1 {
                t["depends_on"] = json!([format!("T{}", k - 1)]);
            }
            t
        })
        .collect()
}

fn built(n: usize, outputs: bool) -> Ws {
    let ws = Ws::new();
    ws.write("in.txt", "first line\nsecond line\n");
    ws.write_plan("plan.json", &plan("cutoff", chain(n, outputs)));
    ws.json(&["run", "plan.json"], 0);
    ws
}

fn calls(ws: &Ws, n: usize) -> Vec<usize> {
    (1..=n).map(|k| ws.calls(&format!("T{k}"))).collect()
}

/// T1's input changed where its output does not look: T1 runs again,
/// writes the same bytes, and the 9 tasks below it are kept, each with a
/// `completion_kept` event (never `completion_stale`) and explain saying
/// `UPSTREAM_OUTPUT_UNCHANGED`. Without early cutoff all 10 run again.
#[test]
fn an_upstream_rerun_with_identical_outputs_keeps_every_dependant() {
    let ws = built(10, true);
    ws.write("in.txt", "first line\nanother second line\n");
    // A dry run cannot know T1's next output: it says T2 may be kept.
    let dry = ws.json(&["run", "plan.json", "--dry-run"], 0);
    let t2 = dry["tasks"].as_array().unwrap().iter().find(|t| t["task_ref"] == "T2").unwrap();
    let why = t2["why"].as_str().unwrap_or_default();
    assert!(why.contains("kept instead if its upstream's outputs come out byte-identical"), "{dry:#}");
    let report = ws.json(&["run", "plan.json"], 0);
    let mut expected = vec![1; 10];
    expected[0] = 2;
    assert_eq!(calls(&ws, 10), expected, "{report:#}");
    let t2 = report["tasks"].as_array().unwrap().iter().find(|t| t["task_ref"] == "T2").unwrap();
    assert!(t2["rechecked"].as_str().unwrap().starts_with("kept: UPSTREAM_OUTPUT_UNCHANGED: T1 ran again"), "{t2:#}");
    let stale: Vec<String> = ws.events_of("completion_stale").into_iter().filter_map(|(r, _, _)| r).collect();
    assert_eq!(stale, ["T1"]);
    let kept = ws.events_of("completion_kept");
    let refs: Vec<&str> = kept.iter().filter_map(|(r, _, _)| r.as_deref()).collect();
    assert_eq!(refs, (2..=10).map(|k| format!("T{k}")).collect::<Vec<_>>());
    assert!(kept.iter().all(|(_, _, d)| d["kept"] == "UPSTREAM_OUTPUT_UNCHANGED"), "{kept:#?}");
    assert_eq!(kept[0].2["ran_again"], json!(["T1"]));
    assert_eq!(kept[1].2["kept_upstream"], json!(["T2"]));
    for k in 2..=10 {
        assert_eq!(ws.task_state(&format!("T{k}")), "succeeded");
    }
    assert_eq!(ws.goal_state(), "satisfied");
    let explain = ws.engine(&["explain", "T2"]);
    assert!(explain.stdout.contains("completion kept at") && explain.stdout.contains("UPSTREAM_OUTPUT_UNCHANGED"));
    assert!(explain.stdout.contains("T1 ran again with byte-identical outputs"), "{}", explain.stdout);
    let j = ws.json(&["explain", "T3"], 0);
    assert_eq!(j["kept"][0]["kept"], "UPSTREAM_OUTPUT_UNCHANGED", "{j:#}");
    // The next plain run is a no-op.
    let before = ws.attempt_count();
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.attempt_count(), before);
}

/// T1's output changed: every dependant runs again, the first one stale
/// because its input, T1's output, changed.
#[test]
fn a_changed_upstream_output_runs_its_dependants_again() {
    let ws = built(4, true);
    ws.write("in.txt", "a new first line\nsecond line\n");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(calls(&ws, 4), [2, 2, 2, 2]);
    assert!(ws.events_of("completion_kept").is_empty());
    let stale = ws.events_of("completion_stale");
    let t2 = stale.iter().find(|(r, _, _)| r.as_deref() == Some("T2")).expect("T2 stale").2.clone();
    assert_eq!(t2["stale"], "CHECKPOINT_CHANGED", "{t2:#}");
    assert!(t2["detail"].as_str().unwrap().contains("out1.txt"), "{t2:#}");
    assert_eq!(ws.read("out4.txt"), "a new first line\n");
}

/// The same, when the dependants do not declare their upstream's output
/// as an input: the upstream's recorded outputs in their checkpoints
/// still catch the change.
#[test]
fn a_changed_upstream_output_is_caught_by_its_recorded_digest_alone() {
    let ws = Ws::new();
    ws.write("in.txt", "first line\nsecond line\n");
    let mut tasks = chain(3, true);
    for t in tasks.iter_mut().skip(1) {
        t["inputs"] = json!([]);
    }
    ws.write_plan("plan.json", &plan("cutoff", tasks));
    ws.json(&["run", "plan.json"], 0);
    ws.write("in.txt", "a new first line\nsecond line\n");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(calls(&ws, 3), [2, 2, 2]);
    let stale = ws.events_of("completion_stale");
    let t2 = stale.iter().find(|(r, _, _)| r.as_deref() == Some("T2")).expect("T2 stale").2.clone();
    assert_eq!(t2["stale"], "UPSTREAM_NOT_REUSED", "{t2:#}");
    assert_eq!(t2["detail"], "dependency T1 runs again: its recorded outputs changed", "{t2:#}");
    assert_eq!(ws.read("out3.txt"), "a new first line\n");
}

/// An upstream that runs again and fails leaves its put-off dependants on
/// their completions (the ledger's `succeeded`, shown stale meanwhile),
/// never `blocked` over a completion (the simulator's seed 9 of issue 43:
/// an internal error, `succeeded -> blocked`); the run that completes the
/// upstream (here a person's repair) decides them.
#[test]
fn a_put_off_dependant_stands_while_its_upstream_fails() {
    let ws = Ws::new();
    ws.write("in.txt", "first line\nok\n");
    let mut tasks = chain(3, true);
    tasks[0] = sh_task("T1", "head -n 1 in.txt > out1.txt; grep -q ok in.txt");
    tasks[0]["inputs"] = json!(["in.txt"]);
    tasks[0]["outputs"] = json!(["out1.txt"]);
    ws.write_plan("plan.json", &plan("cutoff", tasks));
    ws.json(&["run", "plan.json"], 0);
    ws.write("in.txt", "first line\nno longer\n");
    let report = ws.json(&["run", "plan.json"], 1);
    assert_eq!(calls(&ws, 3), [2, 1, 1], "{report:#}");
    assert_eq!((ws.task_state("T2"), ws.task_state("T3")), ("succeeded".into(), "succeeded".into()));
    let task = |r: &str| report["tasks"].as_array().unwrap().iter().find(|t| t["task_ref"] == r).unwrap().clone();
    assert_eq!(task("T2")["upstream"]["upstream"], "failed_since", "{report:#}");
    ws.write("in.txt", "first line\nok again\n");
    ws.json(&["repair", "T1", "--force", "--note", "in.txt fixed"], 0);
    assert_eq!(calls(&ws, 3), [3, 1, 1]);
    let kept: Vec<String> = ws.events_of("completion_kept").into_iter().filter_map(|(r, _, _)| r).collect();
    assert_eq!(kept, ["T2", "T3"]);
}

/// An upstream that declares no outputs cuts nothing off, and the stale
/// event (so explain) says why.
#[test]
fn an_upstream_without_outputs_cuts_nothing_off_and_says_so() {
    let ws = built(3, false);
    ws.write("in.txt", "first line\nanother second line\n");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(calls(&ws, 3), [2, 2, 2]);
    let stale = ws.events_of("completion_stale");
    let t2 = stale.iter().find(|(r, _, _)| r.as_deref() == Some("T2")).expect("T2 stale").2.clone();
    assert_eq!(t2["stale"], "UPSTREAM_NOT_REUSED");
    assert!(t2["detail"].as_str().unwrap().contains("no early cutoff: it declares no `outputs`"), "{t2:#}");
    let explain = ws.engine(&["explain", "T2"]);
    assert!(explain.stdout.contains("no early cutoff"), "{}", explain.stdout);
}

/// `engine revise` decides early cutoff as a plain run does: a revision
/// adds a task, and T1's input changed where its output does not look: T1
/// runs again and writes the same bytes, so T2 … T5 are reused on
/// condition (`early_cutoff_on`) and the run keeps them
/// (`completion_kept`, `UPSTREAM_OUTPUT_UNCHANGED`). A second revision
/// after T1's output did change runs every dependant. (An upstream whose
/// meaning changed changes its dependants' dependency digest:
/// `DEPENDENCIES_CHANGED`, before any cutoff.)
#[test]
fn revise_decides_early_cutoff_as_a_plain_run_does() {
    let ws = built(5, true);
    let mut tasks = chain(5, true);
    tasks.push(sh_task("X1", "true"));
    ws.write_plan("plan.json", &plan("cutoff", tasks.clone()));
    ws.write("in.txt", "first line\nanother second line\n");
    let rev = ws.json(&["revise", "plan.json", "--reason", "add X1", "--no-run"], 0);
    assert_eq!(decision(&rev, "T1"), ("run".to_string(), "CHECKPOINT_CHANGED".to_string()));
    for k in 2..=5 {
        let d = decision_detail(&rev, &format!("T{k}"));
        let want = json!([format!("T{}", k - 1)]);
        assert_eq!((d["decision"].as_str(), &d["early_cutoff_on"]), (Some("reuse"), &want), "{d:#}");
    }
    // Until a run decides it, each is said to be reused on condition —
    // not plainly `reused`, nor `stale` (issue 43).
    let status = ws.engine(&["status"]).stdout;
    let t2 = status.lines().find(|l| l.trim_start().starts_with("T2 ")).unwrap_or_default();
    assert!(t2.contains("reused") && !t2.contains("stale"), "{status}");
    assert!(
        t2.contains("(on condition: kept only if T1 comes out with byte-identical outputs (early cutoff), else it runs; the next run decides)"),
        "{status}"
    );
    let json = ws.json(&["status"], 0);
    let row = json["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == "T3").unwrap().clone();
    assert_eq!((&row["state"], &row["condition"]["early_cutoff_on"]), (&json!("reused"), &json!(["T2"])), "{row:#}");
    let explain = ws.engine(&["explain", "T2"]).stdout;
    assert!(explain.contains("on condition: kept only if T1 comes out with byte-identical outputs (early cutoff), else it runs (not decided yet: the next run decides)"), "{explain}");
    let report = ws.json(&["run", "plan.json"], 0);
    assert_eq!(calls(&ws, 5), [2, 1, 1, 1, 1], "{report:#}");
    let kept = ws.events_of("completion_kept");
    assert_eq!(kept.len(), 4, "{kept:#?}");
    assert!(kept.iter().all(|(_, _, d)| d["kept"] == "UPSTREAM_OUTPUT_UNCHANGED"), "{kept:#?}");
    assert!(ws.events_of("completion_stale").is_empty());
    ws.engine(&["verify"]).expect_code(0);
    // Kept by the run: decided, plainly reused.
    let status = ws.engine(&["status"]).stdout;
    assert!(!status.contains("on condition"), "{status}");
    let explain = ws.engine(&["explain", "T2"]).stdout;
    assert!(explain.contains("(decided by a run since)"), "{explain}");

    // Now T1's output changes: nothing below it can be kept.
    tasks.push(sh_task("X2", "true"));
    ws.write_plan("plan.json", &plan("cutoff", tasks));
    ws.write("in.txt", "a new first line\n");
    let rev = ws.engine(&["revise", "plan.json", "--reason", "add X2", "--no-run"]);
    rev.expect_code(0);
    assert!(
        rev.stdout.contains("kept only if T1 comes out with byte-identical outputs (early cutoff)"),
        "{}",
        rev.stdout
    );
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(calls(&ws, 5), [3, 2, 2, 2, 2]);
    assert_eq!(ws.read("out5.txt"), "a new first line\n");
    ws.engine(&["verify"]).expect_code(0);
}
