//! The tool's identity in a completion's checkpoint (issue 43, SPEC "Reuse
//! codes": `TOOL_CHANGED`): a script behind the same argv, outside the
//! workspace, whose bytes changed makes the completion stale — never kept
//! with the old tool's output — unless a person runs with
//! `--reuse-across-tool-change`. Real `sh` processes; what ran is read
//! from the task's own call log.

use serde_json::json;

use crate::helpers::*;

/// `["sh", "<side>/tool.sh"]`: the script is outside the workspace and in
/// no `inputs` or `context`; it logs its call.
fn built() -> (Ws, String) {
    built_with(json!(null))
}

/// `built`, with the plan's `people` (`null`: none).
fn built_with(people: serde_json::Value) -> (Ws, String) {
    let ws = Ws::new();
    let tool = ws.side.join("tool.sh");
    std::fs::write(&tool, "echo T1 >> \"$SIDE/calls.log\"\necho v1 > out.txt\n").unwrap();
    let tool = tool.to_str().unwrap().to_string();
    let task = json!({
        "ref": "T1", "title": "the tool", "provider": "sh", "action": {"run": ["sh", tool]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [], "may_change": ["out.txt"],
    });
    let mut p = plan("tool", vec![task]);
    if !people.is_null() {
        p["people"] = people;
    }
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    (ws, tool)
}

#[test]
fn a_changed_script_outside_the_workspace_is_tool_changed_and_runs_again() {
    let (ws, tool) = built();
    // Unchanged: kept.
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 1);
    std::fs::write(&tool, "echo T1 >> \"$SIDE/calls.log\"\necho v2 > out.txt\n").unwrap();
    let report = ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 2, "a changed tool is never kept");
    let line = report["tasks"][0]["rechecked"].as_str().unwrap_or_default().to_string();
    assert!(line.starts_with(&format!("ran again: TOOL_CHANGED: script {tool} ")), "{report:#}");
    let text = ws.engine(&["run", "plan.json"]).stdout;
    assert!(!text.contains("TOOL_CHANGED"), "the next run keeps it and says nothing of a tool: {text}");
    assert_eq!(ws.read("out.txt"), "v2\n", "the output is the new tool's");
    let stale = ws.events_of("completion_stale");
    assert_eq!(stale.len(), 1, "{stale:#?}");
    assert_eq!(stale[0].2["stale"], "TOOL_CHANGED");
    let detail = stale[0].2["detail"].as_str().unwrap();
    assert!(detail.starts_with(&format!("script {tool} ")) && detail.contains(" → "), "{detail}");
    let explain = ws.engine(&["explain", "T1"]).stdout;
    assert!(explain.contains(&format!("TOOL_CHANGED: script {tool} ")), "{explain}");
    // And once run on the new tool, a plain run kept it again (above).
    assert_eq!(ws.calls("T1"), 2);
}

#[test]
fn a_person_may_reuse_across_a_tool_change_and_is_named() {
    let (ws, tool) = built();
    std::fs::write(&tool, "echo T1 >> \"$SIDE/calls.log\"\necho v2 > out.txt\n").unwrap();
    ws.json(&["run", "plan.json", "--reuse-across-tool-change"], 0);
    assert_eq!(ws.calls("T1"), 1, "kept by the person's act");
    assert!(ws.events_of("completion_stale").is_empty());
    let kept = ws.events_of("completion_kept");
    assert_eq!(kept.len(), 1, "{kept:#?}");
    assert_eq!(kept[0].2["kept"], "TOOL_CHANGED");
    assert_eq!(kept[0].2["act"], "--reuse-across-tool-change");
    assert!(kept[0].2["by"]["user"].as_str().is_some_and(|u| !u.is_empty()), "{:#}", kept[0].2);
    // The act is on the act chain, as a request of its own kind, and the
    // kept completion names it; verify's act-chain check accepts it.
    let db = rusqlite::Connection::open(ws.store()).unwrap();
    let chain: Vec<(String, i64)> = db
        .prepare("SELECT kind, row_id FROM act_chain ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(chain, [("reuse_across_tool_change".to_string(), kept[0].2["ask_id"].as_i64().unwrap())]);
    drop(db);
    ws.engine(&["verify"]).expect_code(0);
    // Without the act, the changed tool runs again.
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 2);
}

/// `people.revise` says who may reuse across a tool change (the act decides
/// reuse): anyone else is refused, nothing recorded, nothing run.
#[test]
fn reuse_across_a_tool_change_is_refused_to_whom_people_revise_does_not_name() {
    let (ws, tool) = built_with(json!({"revise": ["nobody-here"]}));
    std::fs::write(&tool, "echo T1 >> \"$SIDE/calls.log\"\necho v2 > out.txt\n").unwrap();
    let out = ws.engine(&["--json", "run", "plan.json", "--reuse-across-tool-change"]);
    out.expect(2, Some("NOT_PERMITTED"));
    assert!(out.stdout.contains("people.revise"), "{}", out.describe());
    assert_eq!(ws.calls("T1"), 1, "nothing ran");
    assert!(ws.events_of("completion_kept").is_empty());
}

/// `engine explain` says who did a completion's work: a command's program
/// and script by digest; for an agent, the model its report named, shown
/// and said not to be compared (known only from a report after a call).
#[test]
fn explain_names_the_tool_and_what_is_not_compared() {
    let (ws, tool) = built();
    let explain = ws.engine(&["explain", "T1"]).stdout;
    assert!(explain.contains("its tool's identity: sh /"), "{explain}");
    assert!(explain.contains(&format!("; script {tool} ")), "{explain}");

    let ws = Ws::new();
    ws.write("agent.sh", "echo A1 >> \"$SIDE/calls.log\"\necho '{\"status\": \"done\", \"model\": \"m-1\"}'\n");
    let task = json!({
        "ref": "A1", "title": "an agent", "provider": "agent", "action": {"run": ["sh", "agent.sh"]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [],
    });
    ws.write_plan("plan.json", &plan("agent", vec![task]));
    ws.json(&["run", "plan.json"], 0);
    let explain = ws.engine(&["explain", "A1", "--json"]).json();
    let tool = &explain["completion"]["tool"];
    assert_eq!(tool["model"], "m-1", "{explain:#}");
    assert!(tool["compared"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().starts_with("script agent.sh ")));
    assert!(tool["compared"].as_array().unwrap().iter().any(|c| c == "model m-1"), "{explain:#}");
    let text = ws.engine(&["explain", "A1"]).stdout;
    assert!(
        text.contains("compared: its model (from the agent's report, a claim) with the newest one a completion of this provider reported in this revision; known only after a call"),
        "{text}"
    );
}

/// An HTTP service's `version_header` (issue 43): each answer's value is
/// recorded with the completion; the service is never called to learn it,
/// so a completion is compared only with what a later answer of the same
/// provider said. Deliveries read from the receiver's own log.
#[test]
fn an_http_services_declared_version_is_compared_with_the_newest_answer() {
    let rcv = Receiver::start(&[]);
    rcv.control(json!({"version": "1.0"}));
    let ws = Ws::new();
    ws.write("in2.txt", "a");
    let task = |r: &str, inputs: Vec<&str>| json!({"ref": r, "title": r, "provider": "r", "effect": "none", "inputs": inputs, "action": {"body": {"doc": r}}});
    let endpoint = format!("{}/render", rcv.base());
    let mut p = json!({"version": 1, "goal": {"id": "svc", "statement": "rendered", "acceptance": []},
        "providers": {"r": {"kind": "http", "endpoint": endpoint, "version_header": "X-Service-Version"}},
        "tasks": [task("T1", vec![]), task("T2", vec!["in2.txt"])]});
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(rcv.deliveries().len(), 2);
    let text = ws.engine(&["explain", "T1"]).stdout;
    assert!(text.contains("its tool's identity: r version 1.0; compared: its version with the newest one a completion of this provider recorded in this revision (the service is not asked before a call)"), "{text}");

    // The service moves to 2.0: nothing says so before a call, so T1 is
    // kept; T2's input changed, it runs and its answer says 2.0.
    rcv.control(json!({"version": "2.0"}));
    ws.write("in2.txt", "b");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(rcv.deliveries().len(), 3, "only T2 was sent");
    // Now a later answer of the same provider names 2.0: T1 runs again.
    let report = ws.json(&["run", "plan.json"], 0);
    assert_eq!(rcv.deliveries().len(), 4, "{report:#}");
    let stale = ws.events_of("completion_stale");
    let t1: Vec<_> = stale.iter().filter(|e| e.0.as_deref() == Some("T1")).collect();
    assert_eq!(t1.len(), 1, "{stale:#?}");
    assert_eq!(t1[0].2["stale"], "TOOL_CHANGED");
    assert_eq!(t1[0].2["detail"], "r version 1.0 → 2.0");
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(rcv.deliveries().len(), 4, "both stand on 2.0");

    // Without a declaration, explain says the version is not compared.
    p["providers"]["r"].as_object_mut().unwrap().remove("version_header");
    let ws = Ws::new();
    ws.write("in2.txt", "a");
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let text = ws.engine(&["explain", "T1"]).stdout;
    assert!(text.contains("not compared: an HTTP service's version: the plan declares no `version_header`, and the engine does not call a service to learn it"), "{text}");
}

/// An agent provider's pinned `model` (issue 43): a new pin makes
/// completions of the old model stale at `engine revise` (`TOOL_CHANGED:
/// model a → b`), before any call; a report naming another model than the
/// pin fails the attempt.
#[test]
fn an_agents_pinned_model_holds_its_reports_and_a_new_pin_runs_it_again() {
    let ws = Ws::new();
    ws.write("agent.sh", "echo A1 >> \"$SIDE/calls.log\"\necho \"{\\\"status\\\": \\\"done\\\", \\\"model\\\": \\\"$(cat \"$SIDE/model\")\\\"}\"\n");
    std::fs::write(ws.side.join("model"), "m-1").unwrap();
    let task = json!({
        "ref": "A1", "title": "an agent", "provider": "agent", "action": {"run": ["sh", "agent.sh"]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [],
    });
    let mut p = plan("pinned", vec![task]);
    p["providers"]["agent"]["model"] = json!("m-1");
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 0);
    let text = ws.engine(&["explain", "A1"]).stdout;
    assert!(text.contains("; model m-1;"), "{text}");
    assert!(text.contains("; compared: its model with the plan's pinned `model`, m-1"), "{text}");

    // A new pin: known before any call, so revise decides it.
    std::fs::write(ws.side.join("model"), "m-2").unwrap();
    p["providers"]["agent"]["model"] = json!("m-2");
    ws.write_plan("plan.json", &p);
    let revise = ws.json(&["revise", "plan.json", "--reason", "the new model"], 0);
    assert_eq!(decision(&revise, "A1"), ("run".to_string(), "TOOL_CHANGED".to_string()), "{revise:#}");
    let refusal = &decision_detail(&revise, "A1")["refusal"];
    assert_eq!((&refusal["what"], &refusal["old"], &refusal["new"]), (&json!("model"), &json!("m-1"), &json!("m-2")));
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("A1"), 2);

    // A report of another model than the pin fails the attempt.
    std::fs::write(ws.side.join("model"), "m-3").unwrap();
    let out = ws.engine_json(&["rerun", "A1", "--reason", "again"]);
    assert_ne!(out.code(), 0, "{}", out.describe());
    assert_eq!(ws.calls("A1"), 3);
    let explain = ws.engine(&["explain", "A1"]).stdout;
    assert!(explain.contains("the agent's report names model \"m-3\"; the plan pins `model` \"m-2\""), "{explain}");
}
