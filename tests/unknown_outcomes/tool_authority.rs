//! Issue 14, tool authority: a plan's MCP tools are checked against the
//! provider's allow-list (`engine check`), then against what the server
//! really lists before the run's first intent, and the inventory is part of
//! the calling task's checkpoint.

use serde_json::{json, Value};

use crate::common::*;

/// `@modelcontextprotocol/server-filesystem` (pinned in fixtures/node),
/// serving `root`.
fn filesystem_server(root: &std::path::Path) -> Value {
    let index = repo_root().join("fixtures/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(index.is_file(), "{} is missing: run .ci/install-node-fixtures", index.display());
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
               "validations": [{"id": "V1", "run": ["test", "-f", "a.txt"], "expect_exit": 0}]})
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
    let out = ws.engine_json(&["revise", "plan.json", "--reason", "no such tool"]);
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
    assert_eq!(stale[0].2["stale"], "CHECKPOINT_CHANGED");
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
    assert_eq!(t1["refusal"]["reason"], "CHECKPOINT_CHANGED", "{doc:#}");
    assert!(t1.to_string().contains("tool:tools/render"), "{t1:#}");
}
