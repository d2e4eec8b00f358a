//! The plan fields of issue 15, as `engine check` reads them: every rule
//! and provider config goes through the providers' own parsers, and a
//! mistake is `PLAN_INVALID` at its exact place. A task's `observe` is how
//! the engine looks, not what it sends: adding one changes no operation id.

use serde_json::{json, Value};

use super::common::*;

fn check(providers: Value, task: Value) -> Out {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(providers, vec![task]));
    ws.engine_json(&["check", "plan.json"])
}

fn http() -> Value {
    json!({"r": {"kind": "http", "endpoint": "http://127.0.0.1:9/render"}})
}

fn mcp(extra: Value) -> Value {
    let mut p = json!({"kind": "mcp", "command": ["true"]});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    if p.get("url").is_some() {
        p.as_object_mut().unwrap().remove("command");
    }
    json!({"m": p})
}

fn http_task(observe: Value) -> Value {
    json!({"ref": "T1", "provider": "r", "action": {"body": {}}, "observe": observe})
}

fn mcp_task(observe: Value) -> Value {
    json!({"ref": "T1", "provider": "m", "action": {"tool": "write"}, "observe": observe})
}

#[track_caller]
fn refused_at(out: &Out, place: &str) {
    out.expect(2, Some("PLAN_INVALID"));
    assert_eq!(out.json()["error"]["place"], place, "{}", out.describe());
}

#[test]
fn every_new_field_is_accepted_in_its_shapes() {
    let providers = json!({
        "r": {"kind": "http", "endpoint": "http://127.0.0.1:9/render",
              "observe": {"url": "http://127.0.0.1:9/ops/{operation_id}", "present_if": {"status": [200]},
                          "absent_if": {"status": [404]}}},
        "bare": {"kind": "http", "endpoint": "http://127.0.0.1:9/render", "observe": "http://127.0.0.1:9/ops/{operation_id}"},
        "m": {"kind": "mcp", "command": ["true"], "concurrent": true,
              "observe": {"tool": "read_text_file", "arguments": {"path": "{workspace}/x"},
                          "present_if": {"text_contains": "x"}}},
        "remote": {"kind": "mcp", "url": "https://mcp.internal/mcp", "hosts": ["mcp.internal"]},
    });
    let tasks = vec![
        http_task(json!({"url": "http://127.0.0.1:9/notes/{operation_id}",
                         "present_if": {"status": [200], "body_contains": "{try}", "json": {"/state": "done"}},
                         "absent_if": {"status": [404, 410]}})),
        json!({"ref": "T2", "provider": "m", "action": {"tool": "write_file"},
               "observe": {"tool": "read_text_file", "arguments": {"path": "{workspace}/note"},
                           "present_if": {"text_contains": "hi"}, "absent_if": {"text_contains": "ENOENT"}}}),
        json!({"ref": "T3", "provider": "remote", "action": {"tool": "echo"}}),
        json!({"ref": "T4", "provider": "bare", "action": {"body": {}}}),
    ];
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(providers, tasks));
    ws.engine_json(&["check", "plan.json"]).expect(0, None);
}

#[test]
fn rule_mistakes_are_placed_inside_the_rule() {
    let status = json!({"url": "http://127.0.0.1:9/{operation_id}", "present_if": {"status": [200, 99]}});
    refused_at(&check(http(), http_task(status)), "$.tasks[0].observe.present_if.status[1]");
    let neither = json!({"url": "http://127.0.0.1:9/{operation_id}"});
    refused_at(&check(http(), http_task(neither)), "$.tasks[0].observe");
    let unknown = json!({"url": "http://127.0.0.1:9/x", "absent_if": {"colour": 1}});
    refused_at(&check(http(), http_task(unknown)), "$.tasks[0].observe.absent_if.colour");
    let far = json!({"url": "http://far.example/{operation_id}", "present_if": {"status": [200]}});
    refused_at(&check(http(), http_task(far)), "$.tasks[0].observe.url");
    // An HTTP rule on an MCP provider, and an MCP match on one.
    let wrong_kind = json!({"url": "http://127.0.0.1:9/x", "present_if": {"status": [200]}});
    refused_at(&check(mcp(json!({})), mcp_task(wrong_kind)), "$.tasks[0].observe.url");
    let http_match = json!({"tool": "read", "present_if": {"status": [200]}});
    refused_at(&check(mcp(json!({})), mcp_task(http_match)), "$.tasks[0].observe.present_if.status");
    // A command provider cannot read back.
    let sh = json!({"sh": {"kind": "command"}});
    let task = json!({"ref": "T1", "provider": "sh", "action": {"run": ["true"]},
                      "observe": {"tool": "t", "present_if": {"text_contains": "x"}}});
    refused_at(&check(sh, task), "$.tasks[0].observe");
    // Bounded: a rule over 64 KiB.
    let huge = json!({"url": "http://127.0.0.1:9/x", "present_if": {"body_contains": "x".repeat(70_000)}});
    refused_at(&check(http(), http_task(huge)), "$.tasks[0].observe");
}

#[test]
fn provider_mistakes_are_placed_inside_the_provider() {
    let task = json!({"ref": "T1", "provider": "m", "action": {"tool": "t"}});
    let both = json!({"m": {"kind": "mcp", "command": ["true"], "url": "http://127.0.0.1:9/mcp"}});
    refused_at(&check(both, task.clone()), "$.providers.m");
    let neither = json!({"m": {"kind": "mcp"}});
    refused_at(&check(neither, task.clone()), "$.providers.m");
    refused_at(&check(mcp(json!({"url": "https://far.example/mcp"})), task.clone()), "$.providers.m.url");
    refused_at(&check(mcp(json!({"url": "ftp://127.0.0.1/mcp"})), task.clone()), "$.providers.m.url");
    let two = json!({"observe_tool": "status", "observe": {"tool": "t", "present_if": {"text_contains": "x"}}});
    refused_at(&check(mcp(two), task.clone()), "$.providers.m.observe");
    let rule = json!({"observe": {"tool": "t", "absent_if": {}}});
    refused_at(&check(mcp(rule), task.clone()), "$.providers.m.observe.absent_if");
    let out = check(mcp(json!({"concurrent": "yes"})), task);
    out.expect(2, Some("PLAN_INVALID"));
    let bare =
        json!({"r": {"kind": "http", "endpoint": "http://127.0.0.1:9/render", "observe": "http://127.0.0.1:9/ops"}});
    refused_at(&check(bare, http_task(Value::Null)), "$.providers.r.observe");
}

#[test]
fn a_tasks_observe_is_not_part_of_its_meaning_or_its_operation() {
    let ws = Ws::new();
    let task = json!({"ref": "T1", "provider": "r", "action": {"body": {}}});
    ws.write_plan("plan.json", &plan(http(), vec![task.clone()]));
    let before = ws.engine_json(&["digest", "plan.json"]).json();
    let mut observed = task;
    observed["observe"] = json!({"url": "http://127.0.0.1:9/{operation_id}", "absent_if": {"status": [404]}});
    ws.write_plan("plan.json", &plan(http(), vec![observed]));
    let after = ws.engine_json(&["digest", "plan.json"]).json();
    for field in ["operation_id", "meaning_digest", "request_digest"] {
        assert_eq!(before["tasks"][0][field], after["tasks"][0][field], "{field}");
    }
    assert_ne!(before["plan_digest"], after["plan_digest"], "the plan itself changed (a run asks for a revision)");
}

/// Tool authority (issue 14) covers the read-back too: with a `tools`
/// allow-list, the tool an `observe` rule calls — the provider's default or
/// a task's — must be on it (`TOOL_NOT_ALLOWED` at its place), like the
/// tasks' tools; and the allow-list is the engine's, so a remote server's
/// config with one still goes through the providers' parser.
#[test]
fn a_read_back_tool_must_be_on_the_tools_allow_list() {
    let rule = |tool: &str| json!({"tool": tool, "present_if": {"text_contains": "x"}});
    let listed = |extra: Value| {
        let mut m = json!({"tools": ["write", "read_text_file"]});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        mcp(m)
    };
    let task = json!({"ref": "T1", "provider": "m", "action": {"tool": "write"}});
    let out = check(listed(json!({"observe": rule("stat")})), task.clone());
    out.expect(2, Some("TOOL_NOT_ALLOWED"));
    assert_eq!(out.json()["error"]["place"], "$.providers.m.observe.tool", "{}", out.describe());
    let out = check(listed(json!({})), mcp_task(rule("stat")));
    out.expect(2, Some("TOOL_NOT_ALLOWED"));
    assert_eq!(out.json()["error"]["place"], "$.tasks[0].observe.tool", "{}", out.describe());

    check(listed(json!({"observe": rule("read_text_file")})), task.clone()).expect(0, None);
    check(listed(json!({})), mcp_task(rule("read_text_file"))).expect(0, None);
    let remote = listed(json!({"url": "https://mcp.internal/mcp", "hosts": ["mcp.internal"]}));
    check(remote, task).expect(0, None);
}

/// Issue 27: `auth.oauth` on a `url` server, checked by the providers'
/// parser with its exact place; never on a stdio server.
#[test]
fn oauth_is_accepted_on_a_url_server_and_refused_at_its_place() {
    let url = "http://127.0.0.1:9/mcp";
    let task = || json!({"ref": "T1", "provider": "m", "action": {"tool": "write"}});
    let ok = json!({"url": url, "auth": {"oauth": {"client_id": "engine-cli", "scopes": ["mcp:tools"]}}});
    check(mcp(ok), task()).expect_code(0);
    check(mcp(json!({"url": url, "auth": {"oauth": {}}})), task()).expect_code(0);
    let bad_scope = json!({"url": url, "auth": {"oauth": {"scopes": ["ok", "two words"]}}});
    refused_at(&check(mcp(bad_scope), task()), "$.providers.m.auth.oauth.scopes[1]");
    let unknown = json!({"url": url, "auth": {"oauth": {"client_secret": "x"}}});
    refused_at(&check(mcp(unknown), task()), "$.providers.m.auth.oauth.client_secret");
    let other_scheme = json!({"url": url, "auth": {"basic": {}}});
    refused_at(&check(mcp(other_scheme), task()), "$.providers.m.auth.basic");
    refused_at(&check(mcp(json!({"auth": {"oauth": {}}})), task()), "$.providers.m.auth");
}
