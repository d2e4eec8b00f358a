//! The money demo end to end: run (T2 fails its validation) → explain →
//! repair with the failure evidence handed to the agent → satisfied.

use serde_json::{json, Value};

use crate::helpers::*;

/// The fixture's agent, made to leave a copy of its stdin in `$SIDE`.
fn money() -> Ws {
    let ws = Ws::fixture("money");
    let agent = ws.read("tools/agent.py");
    let patched = agent.replace(
        "    request = json.load(sys.stdin)\n",
        "    import os\n    raw = sys.stdin.read()\n    side = os.environ[\"SIDE\"]\n    n = len([f for f in os.listdir(side) if f.startswith(\"stdin-\")]) + 1\n    open(os.path.join(side, \"stdin-%d.json\" % n), \"w\").write(raw)\n    request = json.loads(raw)\n",
    );
    assert_ne!(agent, patched, "the fixture agent reads its request with json.load(sys.stdin)");
    ws.write("tools/agent.py", &patched);
    // And the agent's provider names `SIDE`, which it now reads.
    let mut plan: Value = serde_json::from_str(&ws.read("plan.json")).unwrap();
    plan["providers"]["agent"]["env"] = json!(["SIDE"]);
    ws.write_plan("plan.json", &plan);
    ws
}

#[test]
fn money_demo_run_explain_repair_satisfied() {
    let ws = money();

    // 1. run: T1 succeeds, T2's agent says "done" but V2 fails.
    let run = ws.json(&["run", "plan.json"], 1);
    assert_eq!(run["failed"], json!(["T2"]));
    assert_eq!(ws.goal_state(), "failed");
    let first = ws.attempts_of("T2");
    assert_eq!(first.len(), 1);
    let a1 = &first[0];
    assert_eq!((a1.kind.as_str(), a1.state.as_str(), a1.class()), ("run", "failed", "validation_failed"));
    let check = ws
        .evidence(a1.id)
        .into_iter()
        .find(|(_, k, d)| k == "check_result" && d["check_id"] == "V2")
        .expect("V2's result is evidence of attempt 1");
    assert_eq!(check.2["passed"], json!(false));
    let assertion = check.2["failing_assertion"].as_str().expect("a failing assertion was extracted").to_string();
    assert!(assertion.contains("test_total") || assertion.contains("!="), "{assertion}");
    assert_eq!(
        ws.claims(a1.id),
        vec![(
            "external_ai_message".to_string(),
            json!({"status": "done", "summary": "wrote total()", "claimed_cause": null})
        )]
    );

    // 2. explain: the class, its rule and evidence, the assertion, the claim apart.
    let ex = ws.json(&["explain", "T2"], 0);
    let att = &ex["attempts"][0];
    assert_eq!(att["attempt"]["classification"]["class"], "validation_failed");
    assert_eq!(att["attempt"]["classification"]["rule"], "validation_check_failed");
    assert_eq!(att["attempt"]["classification"]["evidence_ids"], json!([check.0]));
    assert!(att["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["evidence"]["failing_assertion"] == assertion.as_str()));
    assert_eq!(att["claims"][0]["authority"], "external_ai_message");
    let text = ws.engine(&["explain", "T2"]);
    assert!(text.stdout.contains("validation_failed") && text.stdout.contains(&assertion), "{}", text.describe());

    // 3. repair: one new attempt of kind `repair`, and the goal is met.
    let rep = ws.json(&["repair", "T2"], 0);
    assert_eq!(rep["goal_state"], "satisfied");
    assert_eq!(ws.goal_state(), "satisfied");
    let all = ws.attempts_of("T2");
    assert_eq!(all.len(), 2);
    assert_eq!((all[1].kind.as_str(), all[1].state.as_str()), ("repair", "succeeded"));
    assert_eq!(ws.attempts_of("T1").len(), 1, "the repair does not touch T1");
    let status = ws.json(&["status"], 0);
    assert_eq!(status["goal"]["state"], "satisfied");

    // The agent's stdin: the first call has no repair section; the repair
    // carries the classified failure and its evidence, including V2's result.
    let stdins = agent_stdins(&ws);
    assert_eq!(stdins.len(), 2);
    assert!(stdins[0].get("repair").is_none());
    assert_eq!(stdins[0]["try"], 1);
    let repair = &stdins[1]["repair"];
    assert_eq!(repair["failed_attempt"], a1.id);
    assert_eq!(repair["classification"]["class"], "validation_failed");
    let evidence = repair["evidence"].as_array().expect("repair.evidence is a list");
    let v2: Vec<&Value> = evidence
        .iter()
        .filter(|e| e["evidence"]["kind"] == "check_result" && e["evidence"]["check_id"] == "V2")
        .collect();
    assert_eq!(v2.len(), 1, "{repair:#}");
    assert_eq!(v2[0]["evidence"]["passed"], json!(false));
    assert_eq!(v2[0]["id"], check.0);
    assert_eq!(stdins[1]["operation_id"], json!(all[1].operation_id));
    assert_eq!(stdins[1]["try"], json!(all[1].try_no));
}
