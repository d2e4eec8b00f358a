//! Issue 14, tool authority: a plan's MCP tools are checked against the
//! provider's allow-list (`engine check`), then against what the server
//! really lists before the run's first intent, and the inventory is part of
//! the calling task's checkpoint.

use serde_json::{json, Value};

use crate::common::*;

/// `@modelcontextprotocol/server-filesystem` (pinned in fixtures/node),
/// serving `root`.
fn filesystem_server(root: &std::path::Path) -> Value {
    let index = crate::support::node::node_server(&repo_root(), "server-filesystem");
    json!({"kind": "mcp", "command": ["node", index.to_string_lossy(), root.to_string_lossy()]})
}

#[test]
fn a_tool_outside_the_allow_list_is_refused_at_check_time() {
    let ws = Ws::new();
    let mut provider = mcp_provider(&ws, &[], false);
    provider["tools"] = json!(["render"]);
    let tasks = vec![mcp_task("T1", "render", "local"), mcp_task("T2", "fail", "local")];
    ws.write_plan("plan.json", &plan("tools", json!({"tools": provider}), tasks));
    for command in ["check", "run"] {
        let out = ws.engine_json(&[command, "plan.json"]);
        out.expect(2, Some("TOOL_NOT_ALLOWED"));
        let e = &out.json()["error"];
        assert_eq!(e["place"], "$.tasks[1].action.tool", "{}", out.describe());
        assert_eq!(e["details"]["tool"], "fail");
    }
    assert!(ws.mcp_deliveries().is_empty(), "nothing was called");
}

#[test]
fn a_tool_the_real_server_does_not_offer_stops_the_run_before_any_intent() {
    let ws = Ws::new();
    let write = |task_ref: &str, tool: &str| {
        json!({"ref": task_ref, "title": "write", "provider": "fs", "effect": "local",
               "action": {"tool": tool, "arguments": {"path": ws.path("a.txt"), "content": "hello\n"}},
               "validations": [{"id": "V1", "run": ["test", "-f", "a.txt"], "expect_exit": 0}],
               "may_change": ["a.txt"]})
    };
    let providers = json!({"fs": filesystem_server(&ws.dir)});
    let tasks = vec![write("T1", "write_file"), write("T2", "write_everything")];
    ws.write_plan("plan.json", &plan("fs", providers.clone(), tasks));
    // Nothing in the plan alone says the tool is missing.
    ws.engine_json(&["check", "plan.json"]).expect(0, None);

    let out = ws.run();
    out.expect(2, Some("UNKNOWN_TOOL"));
    let e = &out.json()["error"];
    assert_eq!(e["place"], "$.tasks[1].action.tool", "{}", out.describe());
    assert_eq!(
        (e["details"]["task_ref"].as_str(), e["details"]["tool"].as_str()),
        (Some("T2"), Some("write_everything"))
    );
    assert!(e["details"]["offered"].as_array().unwrap().contains(&json!("write_file")), "{e:#}");
    // No intent, no call — not even of the task whose tool exists.
    assert_eq!(ws.attempt_count(), 0);
    assert!(!ws.path("a.txt").exists());
    assert!(ws.event_kinds().iter().all(|k| k != "intent_recorded"));
    let inventory = ws.events_of("tool_inventory");
    assert_eq!(inventory.len(), 1);
    let digest = inventory[0].2["tools"]["write_file"].as_str().unwrap();
    assert_eq!(digest.len(), 64, "the input schema's digest: {inventory:?}");
    let refused = ws.events_of("call_refused");
    assert_eq!((refused[0].0.as_deref(), refused[0].2["code"].as_str()), (Some("T2"), Some("UNKNOWN_TOOL")));

    // The plan fixed: the task runs against the same server.
    ws.write_plan("plan.json", &plan("fs", providers, vec![write("T1", "write_file")]));
    // Dropping T2 drops its validation with it, before its work was done:
    // a person approves that loosening.
    let args = ["revise", "plan.json", "--reason", "no such tool"];
    ws.engine_json(&args).expect(4, Some("LOOSENING_NEEDS_APPROVAL"));
    let out = ws.engine_json(&[&args[..], &["--approve-loosening"]].concat());
    out.expect(0, None);
    assert_eq!(ws.read("a.txt"), "hello\n");
}

#[test]
fn a_changed_tool_schema_makes_its_task_not_reusable_naming_the_tool() {
    let ws = Ws::new();
    let mut provider = mcp_provider(&ws, &[], false);
    // The server reads its schema for `render` from this variable: it gets
    // it only when its provider names it.
    provider["env"] = json!(["MCP_RENDER_SCHEMA"]);
    let providers = json!({"tools": provider});
    ws.write_plan("plan.json", &plan("schema", providers.clone(), vec![mcp_task("T1", "render", "local")]));
    ws.run().expect(0, None);
    // The same inventory: the completion stands, nothing is sent again.
    ws.run().expect(0, None);
    assert_eq!(ws.mcp_deliveries().len(), 1);
    assert!(ws.events_of("completion_stale").is_empty());

    // The server now declares another schema for `render`.
    let changed = [("MCP_RENDER_SCHEMA", r#"{"type": "object", "required": ["format"]}"#)];
    let out = ws.engine_env(&["--json", "run", "plan.json"], &changed);
    out.expect(0, None);
    let stale = ws.events_of("completion_stale");
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0].2["stale"], "TOOL_CHANGED");
    assert!(stale[0].2["detail"].to_string().contains("tool:tools/render"), "{stale:?}");
    assert_eq!(ws.mcp_deliveries().len(), 2, "run again");

    // `engine revise` asks the server too, and says why.
    let mut p = plan("schema", providers, vec![mcp_task("T1", "render", "local")]);
    p["goal"]["statement"] = json!("deliver the documents");
    p["tasks"].as_array_mut().unwrap().push(json!({"ref": "T2", "title": "t", "provider": "tools",
        "action": {"tool": "render", "arguments": {"doc": "T2"}}, "effect": "local"}));
    ws.write_plan("plan.json", &p);
    let out = ws.engine_env(&["--json", "revise", "plan.json", "--reason", "another document", "--no-run"], &[]);
    out.expect(0, None);
    let doc = out.json();
    let t1 = doc["decisions"].as_array().unwrap().iter().find(|d| d["task_ref"] == "T1").unwrap().clone();
    assert_eq!(t1["refusal"]["reason"], "TOOL_CHANGED", "{doc:#}");
    assert!(t1.to_string().contains("tool:tools/render"), "{t1:#}");
}

/// Issue 24 item 8: a server whose `tools/list` cannot be read is never
/// called — the fixture answers `tools/list` with an error but still
/// performs (and logs) any `tools/call` it gets.
#[test]
fn a_server_whose_tool_list_cannot_be_read_is_never_called() {
    let ws = Ws::new();
    let providers = json!({"tools": mcp_provider(&ws, &["--fail-tools-list"], false)});
    ws.write_plan("plan.json", &plan("inventory", providers, vec![mcp_task("T1", "render", "external")]));
    let out = ws.run();
    out.expect(2, Some("TOOL_INVENTORY_UNAVAILABLE"));
    let e = &out.json()["error"];
    assert_eq!(e["details"]["provider"], "tools", "{}", out.describe());
    assert!(e["message"].as_str().unwrap().contains("inventory unavailable"), "the server's own words: {e:#}");
    assert!(ws.mcp_deliveries().is_empty(), "no tools/call reached the server");
    assert_eq!(ws.attempt_count(), 0, "no intent");
    let refused = ws.events_of("call_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (refused[0].0.as_deref(), refused[0].2["code"].as_str()),
        (Some("T1"), Some("TOOL_INVENTORY_UNAVAILABLE"))
    );
}

/// The server's own name and version and its inventory's digest are
/// recorded with the run and in the attempt's checkpoint; another server
/// behind the same command (here: another version) makes a completed task
/// not reusable, and `explain` names why.
#[test]
fn another_server_behind_the_same_command_is_a_changed_meaning() {
    let ws = Ws::new();
    let mut provider = mcp_provider(&ws, &[], false);
    // The plan names what its server reads (only named variables reach it).
    provider["env"] = json!(["MCP_SERVER_VERSION"]);
    let providers = json!({"tools": provider});
    ws.write_plan("plan.json", &plan("server", providers, vec![mcp_task("T1", "render", "local")]));
    ws.run().expect(0, None);
    let inventory = ws.events_of("tool_inventory");
    assert_eq!(inventory[0].2["server"], json!({"name": "engine-mcp-fixture", "version": "1"}), "{inventory:?}");
    assert_eq!(inventory[0].2["digest"].as_str().map(str::len), Some(64), "{inventory:?}");
    ws.run().expect(0, None);
    assert_eq!(ws.mcp_deliveries().len(), 1, "the same server: the completion stands");

    let out = ws.engine_env(&["--json", "run", "plan.json"], &[("MCP_SERVER_VERSION", "2")]);
    out.expect(0, None);
    let stale = ws.events_of("completion_stale");
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0].2["stale"], "TOOL_CHANGED");
    assert!(stale[0].2["detail"].to_string().contains("mcp-server:tools"), "{stale:?}");
    assert!(stale[0].2["detail"].to_string().contains("engine-mcp-fixture 1 → engine-mcp-fixture 2"), "{stale:?}");
    assert_eq!(ws.mcp_deliveries().len(), 2, "run again against the new server");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("mcp-server:tools"), "{}", explain.stdout);
}

/// Issue 27: a result that does not match the tool's declared
/// `outputSchema` is `provider_output_invalid`, naming the JSON path; one
/// that matches passes.
#[test]
fn a_result_outside_the_tools_output_schema_is_provider_output_invalid_at_its_path() {
    let ws = Ws::new();
    let providers = json!({"tools": mcp_provider(&ws, &[], false)});
    let mut bad = mcp_task("T1", "count", "none");
    bad["action"]["arguments"] = json!({"count": "three"});
    ws.write_plan("plan.json", &plan("schema", providers.clone(), vec![bad]));
    ws.run().expect(1, None);
    let a = ws.attempts();
    assert_eq!(a[0].state, "failed", "{a:?}");
    assert_eq!((a[0].class(), a[0].rule()), ("provider_rejected", "provider_output_invalid"), "{a:?}");
    let invalid = ws.evidence(a[0].id).into_iter().find(|e| e.1 == "provider_output_invalid").expect("its evidence");
    let message = invalid.2["message"].as_str().unwrap();
    assert!(message.starts_with("structuredContent/count: "), "{message}");
    assert_eq!(ws.receipt_of(a[0].id).unwrap()["output_invalid"].as_str(), Some(message));

    let ws = Ws::new();
    let mut good = mcp_task("T1", "count", "none");
    good["action"]["arguments"] = json!({"count": 3});
    ws.write_plan("plan.json", &plan("schema", json!({"tools": mcp_provider(&ws, &[], false)}), vec![good]));
    ws.run().expect(0, None);
}

/// A server's annotations are recorded and shown, never taken as
/// permission: `crash` says it is read-only and idempotent (it is not: it
/// performs the effect, then dies unanswered), and its task, whose effect
/// defaults to `external`, is still `effect_unknown` — never sent again.
#[test]
fn tool_annotations_are_recorded_and_shown_never_taken_as_permission() {
    let ws = Ws::new();
    let providers = json!({"tools": mcp_provider(&ws, &[], false)});
    let mut t = mcp_task("T1", "crash", "external");
    t.as_object_mut().unwrap().remove("effect");
    ws.write_plan("plan.json", &plan("hints", providers, vec![t]));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    assert_eq!(ws.mcp_deliveries().len(), 1, "sent once, whatever the server's hints");
    let inventory = ws.events_of("tool_inventory");
    assert_eq!(inventory[0].2["annotations"]["crash"], json!({"readOnlyHint": true, "idempotentHint": true}));
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "effect_unknown"), "{a:?}");
    let detail = a[0].dispatch_detail.clone().unwrap_or_default();
    assert!(detail.contains("annotations, hints only") && detail.contains("readOnlyHint"), "{detail}");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("hints only"), "{}", explain.stdout);
}
