//! The MCP provider end to end: a tool call carries the operation id and
//! try in `_meta`, a tool error is classified `provider_rejected`, and an
//! answer lost after the effect (the server crashed, or the engine was
//! killed after dispatch) is unknown unless the server's observe tool finds
//! the effect — asserted from the fixture's own delivery log.

use serde_json::json;

use crate::common::*;

fn one_mcp_task(flags: &[&str], observe: bool, tool: &str) -> Ws {
    let ws = Ws::new();
    let providers = json!({"tools": mcp_provider(&ws, flags, observe)});
    ws.write_plan("plan.json", &plan("docs", providers, vec![mcp_task("T1", tool, "external")]));
    ws
}

#[test]
fn tool_call_succeeds_with_identity_in_meta() {
    let ws = one_mcp_task(&[], false, "render");
    ws.run().expect(0, None);
    let op = ws.op_of("T1");
    let d = ws.mcp_deliveries();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0]["key"].as_str(), d[0]["try"].as_i64()), (Some(op.as_str()), Some(1)));
    assert_eq!(d[0]["arguments"], json!({"doc": "T1"}));
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"));
    let kinds: Vec<String> = ws.evidence(a[0].id).into_iter().map(|e| e.1).collect();
    assert_eq!(kinds.first().map(String::as_str), Some("tool_result"), "{kinds:?}");
    // `explain` (human form) describes the tool's answer.
    let explain = ws.command(&["explain", "T1"]).output().unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(explain.status.success() && text.contains("MCP tool answered in"), "{text}");
}

#[test]
fn tool_error_is_provider_rejected() {
    let ws = one_mcp_task(&[], false, "fail");
    let out = ws.run();
    out.expect(1, None);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str(), a[0].class()), (1, "failed", "provider_rejected"));
    assert_eq!(a[0].classification.as_ref().unwrap()["rule"], "tool_error");
    assert_eq!(ws.task_state("T1"), "failed");
    assert!(ws.mcp_deliveries().is_empty());
    let data =
        ws.evidence(a[0].id).into_iter().find(|e| e.1 == "provider_error").expect("a provider error").2.to_string();
    assert!(data.contains("\"source\":\"tool\"") && data.contains("template `?` not found"), "{data}");
    assert_eq!(ws.receipt_of(a[0].id).unwrap()["tool_error"], "cannot render: template `?` not found");
}

#[test]
fn crash_after_effect_is_unknown_without_observe_and_found_with_it() {
    for observe in [false, true] {
        let ws = one_mcp_task(&["--crash-after-effect"], observe, "render");
        let out = ws.run();
        let op = ws.op_of("T1");
        let d = ws.mcp_deliveries();
        assert_eq!(d.len(), 1, "the effect happened once: {d:?}");
        assert_eq!(d[0]["key"].as_str(), Some(op.as_str()));
        let a = ws.attempts();
        assert_eq!(a.len(), 1, "never re-sent: {a:?}");
        if observe {
            out.expect(0, None);
            let receipt = ws.receipt_of(a[0].id).unwrap();
            assert_eq!(
                (receipt["source"].as_str(), receipt["lost"].as_str()),
                (Some("observation"), Some("response_lost"))
            );
            assert_eq!(a[0].state, "succeeded");
        } else {
            out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
            let u = &out.json()["unknown"][0];
            assert_eq!((u["operation_id"].as_str(), u["reason"].as_str()), (Some(op.as_str()), Some("response_lost")));
            assert_eq!(a[0].state, "effect_unknown");
        }
    }
}

#[test]
fn engine_killed_after_dispatch_then_restart() {
    for observe in [false, true] {
        let ws = one_mcp_task(&[], observe, "render");
        // Killed once the server has acted and answered, before the answer
        // is committed: the store is exactly as after `after_dispatch`
        // (dispatched, no receipt). Not `after_dispatch` itself: the server
        // dies with the engine (PR_SET_PDEATHSIG), so whether it acts first
        // would be a race.
        assert!(ws.run_fp("after_receipt").killed());
        assert_eq!(ws.attempts()[0].state, "dispatched");
        ws.wait_mcp_deliveries(1);
        let out = ws.run();
        let op = ws.op_of("T1");
        let a = ws.attempts();
        assert_eq!(a.len(), 1, "never re-sent: {a:?}");
        if observe {
            out.expect(0, None);
            assert_eq!(a[0].state, "succeeded");
            assert_eq!(ws.receipt_of(a[0].id).unwrap()["lost"], "engine_restarted");
        } else {
            out.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
            assert_eq!(out.json()["unknown"][0]["operation_id"].as_str(), Some(op.as_str()));
            assert_eq!(a[0].state, "effect_unknown");
        }
        let d = ws.mcp_deliveries();
        assert_eq!(d.len(), 1, "exactly one delivery: {d:?}");
        assert_eq!((d[0]["key"].as_str(), d[0]["try"].as_i64()), (Some(op.as_str()), Some(1)));
    }
}

#[test]
fn mcp_plan_shapes_are_checked() {
    let ws = Ws::new();
    let good = mcp_provider(&ws, &[], true);
    let cases = [
        (json!({"tools": good}), json!({"tool": ""}), "$.tasks[0].action.tool"),
        (json!({"tools": good}), json!({"arguments": {}}), "$.tasks[0].action.tool"),
        (json!({"tools": good}), json!({"tool": "render", "arguments": [1]}), "$.tasks[0].action.arguments"),
        (json!({"tools": good}), json!({"tool": "render", "run": ["x"]}), "$.tasks[0].action.run"),
        (json!({"tools": {"kind": "mcp", "command": []}}), json!({"tool": "render"}), "$.providers.tools.command"),
        (
            json!({"tools": {"kind": "mcp", "command": ["x"], "endpoint": "y"}}),
            json!({"tool": "render"}),
            "$.providers.tools.endpoint",
        ),
    ];
    for (providers, action, place) in cases {
        let mut task = mcp_task("T1", "render", "external");
        task["action"] = action;
        ws.write_plan("plan.json", &plan("docs", providers, vec![task]));
        let out = ws.engine_json(&["check", "plan.json"]);
        out.expect(2, Some("PLAN_INVALID"));
        assert_eq!(out.json()["error"]["place"].as_str(), Some(place), "{}", out.describe());
    }
    let mut task = mcp_task("T1", "render", "external");
    task["action"] = json!({"tool": "render"});
    ws.write_plan("plan.json", &plan("docs", json!({"tools": good}), vec![task]));
    ws.engine_json(&["check", "plan.json"]).expect(0, None);
}
