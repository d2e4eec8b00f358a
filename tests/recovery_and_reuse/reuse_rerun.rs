//! A plain `engine run` of the active revision trusts a completed task only
//! while its checkpoint still matches, like a build tool's stale targets.

use std::os::unix::process::ExitStatusExt;

use serde_json::json;

use crate::helpers::*;

/// T1 (in1.txt) → T2 (in2.txt) → T3, and T4 (in4.txt) on its own.
fn build() -> Ws {
    let ws = Ws::new();
    for f in ["1", "2", "4"] {
        ws.write(&format!("in{f}.txt"), f);
    }
    ws.write_plan("plan.json", &plan("rerun", tasks("true")));
    ws.json(&["run", "plan.json"], 0);
    ws
}

/// The tasks of `build`, T4 running `t4`.
fn tasks(t4: &str) -> Vec<serde_json::Value> {
    let mut tasks = Vec::new();
    for (r, inputs, deps) in [
        ("T1", vec!["in1.txt"], vec![]),
        ("T2", vec!["in2.txt"], vec!["T1"]),
        ("T3", vec![], vec!["T2"]),
        ("T4", vec!["in4.txt"], vec![]),
    ] {
        let mut t = sh_task(r, if r == "T4" { t4 } else { "true" });
        t["inputs"] = json!(inputs);
        t["depends_on"] = json!(deps);
        t["validations"] = json!([validation("V", "true")]);
        tasks.push(t);
    }
    tasks
}

#[test]
fn an_unchanged_rerun_makes_no_new_attempt() {
    let ws = build();
    let before = ws.attempt_count();
    ws.json(&["run", "plan.json"], 0);
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.attempt_count(), before);
    assert_eq!([ws.calls("T1"), ws.calls("T2"), ws.calls("T3"), ws.calls("T4")], [1, 1, 1, 1]);
    assert!(ws.events_of("completion_stale").is_empty());
    assert_eq!(ws.goal_state(), "satisfied");
}

#[test]
fn an_edited_input_reruns_that_task_and_its_downstream_with_completion_stale_events() {
    let ws = build();
    ws.write("in2.txt", "2, edited");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!([ws.calls("T1"), ws.calls("T2"), ws.calls("T3"), ws.calls("T4")], [1, 2, 2, 1]);
    let stale = ws.events_of("completion_stale");
    let refs: Vec<&str> = stale.iter().map(|(r, _, _)| r.as_deref().unwrap()).collect();
    assert_eq!(refs, ["T2", "T3"]);
    assert_eq!(stale[0].2["stale"], "CHECKPOINT_CHANGED");
    assert!(stale[0].2["detail"].as_str().unwrap().contains("in2.txt"), "{:#}", stale[0].2);
    assert_eq!(stale[1].2["stale"], "UPSTREAM_NOT_REUSED");
    // The new attempts are in the same revision, and succeeded.
    let t2 = ws.attempts_of("T2");
    assert_eq!((t2.len(), t2[1].revision, t2[1].state.as_str()), (2, 1, "succeeded"));

    // And once re-run, the next plain run is a no-op again.
    let before = ws.attempt_count();
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.attempt_count(), before);
}

/// A satisfied goal whose task runs again (an edited input) is opened in
/// the transaction that makes the task pending: an engine killed while
/// that task runs leaves no `satisfied` goal over a try in flight, and
/// `engine verify` passes (before: STORE_CORRUPT, `goal_verdicts`;
/// simulator seed 9775, through a changed tool).
#[test]
fn a_satisfied_goal_is_opened_before_a_stale_task_runs_again() {
    let ws = build();
    assert_eq!(ws.goal_state(), "satisfied");
    ws.write("in4.txt", "4, edited");
    let out = ws.engine_fp(&["run", "plan.json"], Some("after_dispatch"));
    assert_eq!(out.status.signal(), Some(9), "{}", out.describe());
    assert_eq!(ws.goal_state(), "open");
    ws.verify();
}

#[test]
fn a_rerun_after_an_edit_made_within_the_same_second_is_still_seen() {
    // Same size, same second: the file-state cache must not trust a stale
    // (size, mtime, inode) entry that was hashed just after the write.
    let ws = build();
    ws.write("in1.txt", "X");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 2);
    ws.write("in1.txt", "Y");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 3);
}

/// The reuse pass reads every completion of a revision at once; what it
/// reads is exactly what reading each task's completion alone gives —
/// succeeded tasks, tasks reused from an earlier revision (their
/// provenance followed to the original attempt), checkpoints and the
/// latest validation results alike.
#[test]
fn completions_read_at_once_equal_each_read_alone() {
    let ws = build();
    // Revision 2 changes T4 alone: T1..T3 are reused from revision 1.
    ws.write_plan("plan.json", &plan("rerun", tasks("echo changed")));
    ws.json(&["revise", "plan.json", "--reason", "T4 changes"], 0);
    let agree = |ws: &Ws| {
        let ledger = ws.ledger();
        for revision in [1, 2] {
            let (at_once, alone) = ledger.completions_both_ways("rerun", revision);
            assert_eq!(at_once.len(), 4, "revision {revision}: {at_once:#?}");
            assert_eq!(at_once, alone, "revision {revision}");
        }
    };
    agree(&ws);
    let reused = ws.ledger().completions_both_ways("rerun", 2).0;
    assert!(reused.iter().filter(|c| c.contains("revision: Revision(1)")).count() >= 3, "{reused:#?}");
    // After an edited input re-runs T1..T3 in revision 2: their new attempts.
    ws.write("in1.txt", "1, edited");
    ws.json(&["run", "plan.json"], 0);
    agree(&ws);
}
