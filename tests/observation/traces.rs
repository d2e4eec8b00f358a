//! Issue 27, OpenTelemetry: a run's trace as a collector receives it (a
//! loopback OTLP receiver decoding each export with opentelemetry-proto),
//! and the `traceparent` each provider really got — the HTTP service's
//! header, the command's `TRACEPARENT`, the MCP server's `params._meta`
//! under both revisions (its `--received` log). A caller's `TRACEPARENT`
//! joined; a receiver that is down or hangs changes nothing but one
//! warning; no flag, no variable: nothing exported, nothing propagated.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::common::*;
use crate::support::otlp::{closed_port, OtlpReceiver, Span};

/// Every attribute key a span may carry: identities and states, never a
/// request, an answer, a secret or a variable's value.
const KEYS: &[&str] = &[
    "engine.goal.id",
    "engine.revision",
    "engine.goal.state",
    "engine.exit_code",
    "engine.task.ref",
    "engine.task.state",
    "engine.provider.name",
    "engine.provider.kind",
    "engine.gate",
    "engine.operation.id",
    "engine.attempt.try",
    "engine.attempt.kind",
    "engine.attempt.state",
    "engine.attempt.class",
    "engine.attempt.rule",
    "engine.call.outcome",
    "engine.call.reason",
];

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A command task that keeps the `TRACEPARENT` it was given.
fn command_task(task_ref: &str) -> Value {
    json!({"ref": task_ref, "title": "keep the traceparent", "provider": "sh", "effect": "local",
           "action": {"run": ["sh", "-c", format!("printf %s \"$TRACEPARENT\" > {task_ref}.tp")]},
           "may_change": [format!("{task_ref}.tp")]})
}

fn mcp_task(task_ref: &str, provider: &str) -> Value {
    json!({"ref": task_ref, "title": "render", "provider": provider, "effect": "local",
           "action": {"tool": "render", "arguments": {"doc": task_ref}}})
}

fn the(spans: &[Span], name: &str) -> Vec<Span> {
    spans.iter().filter(|s| s.name == name).cloned().collect()
}

fn by_id<'a>(spans: &'a [Span], id: &str) -> &'a Span {
    spans.iter().find(|s| s.span_id == id).unwrap_or_else(|| panic!("no span {id} in {spans:#?}"))
}

/// The `tools/call` the fixture received, from its `--received` log.
fn received_call(log: &std::path::Path) -> Value {
    let calls: Vec<Value> = read_json_lines(log).into_iter().filter(|m| m["method"] == "tools/call").collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    calls[0].clone()
}

#[test]
fn a_run_is_one_trace_of_task_attempt_and_call_spans_and_each_provider_gets_its_call_span() {
    let otlp = OtlpReceiver::start();
    let svc = FakeHttp::start("200 OK", "{\"saved\": true}".into());
    let ws = Ws::new();
    let (legacy, modern) = (ws.side.join("legacy.jsonl"), ws.side.join("modern.jsonl"));
    let server = |era: &str, log: &std::path::Path| {
        json!({"kind": "mcp", "command": mcp_server_command(&ws.side.join(format!("{era}-effects.jsonl")),
               &["--era", era, "--received", log.to_str().unwrap()])})
    };
    let providers = json!({
        "web": {"kind": "http", "endpoint": format!("http://127.0.0.1:{}/save", svc.port)},
        "sh": {"kind": "command"},
        "old": server("legacy", &legacy),
        "new": server("modern", &modern),
    });
    let tasks = vec![
        // Validations between receipt and rest: the attempt's span ends
        // after them.
        json!({"ref": "H", "title": "save", "provider": "web", "effect": "local", "action": {"body": {"doc": "H"}},
               "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]}),
        command_task("C"),
        mcp_task("M1", "old"),
        mcp_task("M2", "new"),
    ];
    ws.write_plan("plan.json", &plan(providers, tasks));
    let out = ws.engine(&["run", "plan.json", "--otlp", &otlp.base()]);
    out.expect(0, None);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);

    let requests = otlp.requests();
    assert!(!requests.is_empty());
    for (path, service, content_type) in &requests {
        assert_eq!((path.as_str(), service.as_str()), ("/v1/traces", "engine"));
        assert_eq!(content_type, "application/x-protobuf");
    }
    let spans = otlp.spans();
    let runs = the(&spans, "engine.run");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = &runs[0];
    assert_eq!(run.parent, "", "no caller: the run's span is the root");
    assert!(spans.iter().all(|s| s.trace_id == run.trace_id), "one trace: {spans:#?}");
    assert_eq!((run.attr("engine.goal.id"), run.attr("engine.revision")), ("obs", "1"));
    assert_eq!((run.attr("engine.goal.state"), run.attr("engine.exit_code")), ("satisfied", "0"));

    let tasks = the(&spans, "engine.task");
    let attempts = the(&spans, "engine.attempt");
    let calls = the(&spans, "engine.provider_call");
    assert_eq!((tasks.len(), attempts.len(), calls.len(), spans.len()), (4, 4, 4, 13), "{spans:#?}");
    let kinds: BTreeSet<(&str, &str)> =
        tasks.iter().map(|t| (t.attr("engine.task.ref"), t.attr("engine.provider.kind"))).collect();
    assert_eq!(kinds, BTreeSet::from([("C", "command"), ("H", "http"), ("M1", "mcp"), ("M2", "mcp")]));
    for call in &calls {
        let attempt = by_id(&spans, &call.parent);
        let task = by_id(&spans, &attempt.parent);
        assert_eq!((attempt.name.as_str(), task.name.as_str()), ("engine.attempt", "engine.task"));
        assert_eq!(task.parent, run.span_id, "a task is a child of the run");
        let task_ref = task.attr("engine.task.ref");
        assert_eq!(task.attr("engine.task.state"), "succeeded", "{task:?}");
        assert_eq!(attempt.attr("engine.task.ref"), task_ref);
        assert_eq!(attempt.attr("engine.operation.id"), ws.op_of(task_ref));
        assert_eq!((attempt.attr("engine.attempt.try"), attempt.attr("engine.attempt.state")), ("1", "succeeded"));
        assert_eq!(call.attr("engine.operation.id"), ws.op_of(task_ref));
        assert_eq!((call.attr("engine.call.outcome"), call.kind), ("received", 3), "a client span: {call:?}");

        // What the provider got: the call span's own context.
        let want = format!("00-{}-{}-01", run.trace_id, call.span_id);
        let got = match task_ref {
            "H" => svc.header("traceparent").into_iter().flatten().collect::<Vec<_>>().join(","),
            "C" => ws.read("C.tp"),
            "M1" => received_call(&legacy)["params"]["_meta"]["traceparent"].as_str().unwrap_or("").to_string(),
            "M2" => received_call(&modern)["params"]["_meta"]["traceparent"].as_str().unwrap_or("").to_string(),
            other => panic!("{other}"),
        };
        assert_eq!(got, want, "the traceparent {task_ref}'s provider received");
    }
    // The modern request kept its own `_meta` beside the traceparent.
    let meta = &received_call(&modern)["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{meta}");
    assert_eq!(meta["operation_id"], ws.op_of("M2").as_str());

    for s in &spans {
        for key in s.attributes.keys() {
            assert!(KEYS.contains(&key.as_str()), "span {} carries `{key}`", s.name);
        }
        let values: String = s.attributes.values().cloned().collect();
        assert!(!values.contains("saved") && !values.contains("rendered"), "provider output in {s:?}");
    }
}

#[test]
fn a_failed_attempt_carries_its_state_and_class() {
    let otlp = OtlpReceiver::start();
    let tasks = vec![json!({"ref": "F", "title": "fails", "provider": "sh", "effect": "local",
                            "action": {"run": ["sh", "-c", "exit 3"]}})];
    let (ws, untraced) = (Ws::new(), Ws::new());
    for w in [&ws, &untraced] {
        w.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), tasks.clone()));
    }
    let code = untraced.engine(&["run", "plan.json"]).code();
    let traced = ws.engine(&["run", "plan.json", "--otlp", &otlp.base()]);
    assert_eq!(traced.code(), code, "the trace changes no exit code");
    let spans = otlp.spans();
    let attempt = &the(&spans, "engine.attempt")[0];
    assert_eq!(attempt.attr("engine.attempt.state"), "failed", "{attempt:?}");
    assert!(!attempt.attr("engine.attempt.class").is_empty(), "{attempt:?}");
    assert!(!attempt.attr("engine.attempt.rule").is_empty(), "{attempt:?}");
    assert_eq!(attempt.status, 2, "an error status");
    let run = &the(&spans, "engine.run")[0];
    assert_eq!(run.attr("engine.exit_code"), code.to_string());
}

#[test]
fn a_persons_retry_is_traced_as_its_own_run_with_the_retry_attempt() {
    let otlp = OtlpReceiver::start();
    let ws = Ws::new();
    let tasks = vec![json!({"ref": "S", "title": "too slow", "provider": "sh", "effect": "local",
                            "timeout_seconds": 1, "action": {"run": ["sleep", "5"]}})];
    ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), tasks));
    ws.engine(&["run", "plan.json", "--otlp", &otlp.base()]).expect_code(1);
    let first = otlp.spans();
    let attempt = &the(&first, "engine.attempt")[0];
    assert_eq!((attempt.attr("engine.attempt.state"), attempt.attr("engine.attempt.class")), ("failed", "timeout"));
    ws.engine(&["retry", "S", "--otlp", &otlp.base()]);
    let spans: Vec<Span> = otlp.spans().into_iter().skip(first.len()).collect();
    let runs = the(&spans, "engine.run");
    assert_eq!(runs.len(), 1, "the retry's own trace: {spans:#?}");
    assert_ne!(runs[0].trace_id, the(&first, "engine.run")[0].trace_id);
    let retried = &the(&spans, "engine.attempt")[0];
    assert_eq!(
        (retried.attr("engine.attempt.kind"), retried.attr("engine.attempt.try")),
        ("retry", "2"),
        "{retried:?}"
    );
    assert_eq!(retried.attr("engine.operation.id"), attempt.attr("engine.operation.id"), "the same operation");
}

#[test]
fn a_callers_traceparent_makes_the_run_its_child_and_the_base_variable_gets_the_traces_path() {
    let otlp = OtlpReceiver::start();
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![command_task("C")]));
    let base = otlp.base();
    let out = ws.engine_env(&["run", "plan.json"], &[("OTEL_EXPORTER_OTLP_ENDPOINT", &base), ("TRACEPARENT", CALLER)]);
    out.expect(0, None);
    assert_eq!(otlp.requests()[0].0, "/v1/traces");
    let spans = otlp.spans();
    let run = &the(&spans, "engine.run")[0];
    assert_eq!((run.trace_id.as_str(), run.parent.as_str()), ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"));
    assert!(spans.iter().all(|s| s.trace_id == run.trace_id));
    let call = &the(&spans, "engine.provider_call")[0];
    assert_eq!(ws.read("C.tp"), format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", call.span_id));
}

#[test]
fn the_signal_variable_is_used_as_is_and_the_flag_wins_over_it() {
    let (flagged, variable) = (OtlpReceiver::start(), OtlpReceiver::start());
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![command_task("C")]));
    let url = format!("{}/collector/traces", variable.base());
    ws.engine_env(&["run", "plan.json"], &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)]).expect(0, None);
    assert!(variable.requests().iter().all(|r| r.0 == "/collector/traces") && !variable.requests().is_empty());
    let before = variable.requests().len();
    let ws2 = Ws::new();
    ws2.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![command_task("C")]));
    let args = ["run", "plan.json", "--otlp", &flagged.base()];
    ws2.engine_env(&args, &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)]).expect(0, None);
    assert_eq!(variable.requests().len(), before, "the flag wins");
    assert_eq!(flagged.requests()[0].0, "/v1/traces");
}

#[test]
fn an_invalid_traceparent_is_ignored_with_one_warning() {
    let otlp = OtlpReceiver::start();
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![command_task("C")]));
    let bad = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01";
    let out = ws.engine_env(&["run", "plan.json", "--otlp", &otlp.base()], &[("TRACEPARENT", bad)]);
    out.expect(0, None);
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("TRACEPARENT")).collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(warnings[0].contains("not a valid W3C traceparent") && !warnings[0].contains(bad), "{}", warnings[0]);
    let run = &the(&otlp.spans(), "engine.run")[0];
    assert_eq!(run.parent, "", "a trace of its own");
    assert_ne!(run.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
}

#[test]
fn a_receiver_that_is_down_or_hangs_changes_nothing_but_one_warning() {
    let ws = Ws::new();
    let tasks = vec![
        command_task("C"),
        json!({"ref": "F", "title": "fails", "provider": "sh", "effect": "local",
                                              "action": {"run": ["false"]}}),
    ];
    ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), tasks));
    let untraced = ws.engine(&["run", "plan.json"]);
    assert!(!untraced.stderr.contains("traces"), "{}", untraced.stderr);

    let down = format!("http://127.0.0.1:{}", closed_port());
    let hanging = OtlpReceiver::hanging();
    for (url, why) in [(down, "Connection refused"), (hanging.base(), "timed out")] {
        let ws = Ws::new();
        ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![command_task("C"),
            json!({"ref": "F", "title": "fails", "provider": "sh", "effect": "local", "action": {"run": ["false"]}})]));
        let started = Instant::now();
        let out = ws.engine(&["run", "plan.json", "--otlp", &url]);
        let took = started.elapsed();
        assert_eq!(out.code(), untraced.code(), "the exit code is the run's: {}", out.stderr);
        assert_eq!(out.stdout.lines().count(), untraced.stdout.lines().count(), "the same summary");
        let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("traces not exported")).collect();
        assert_eq!(warnings.len(), 1, "{}", out.stderr);
        assert!(warnings[0].contains(&url) && warnings[0].contains("the run itself is unaffected"), "{}", warnings[0]);
        assert!(warnings[0].contains(why), "{}", warnings[0]);
        assert!(took < Duration::from_secs(12), "bounded: {took:?}");
    }
    assert!(!hanging.requests().is_empty(), "the hanging receiver was asked, and never answered");
    assert!(!hanging.spans().is_empty(), "it got the spans it never answered for");
}

#[test]
fn without_flag_or_variable_nothing_is_exported_nor_propagated() {
    let otlp = OtlpReceiver::start();
    let svc = FakeHttp::start("200 OK", "{}".into());
    let ws = Ws::new();
    let providers = json!({"web": {"kind": "http", "endpoint": format!("http://127.0.0.1:{}/save", svc.port)},
                           "sh": {"kind": "command"}});
    let tasks = vec![
        json!({"ref": "H", "title": "save", "provider": "web", "effect": "local", "action": {"body": {}}}),
        command_task("C"),
    ];
    ws.write_plan("plan.json", &plan(providers, tasks));
    // A caller's context alone exports nothing, and reaches no provider.
    let out = ws.engine_env(&["run", "plan.json"], &[("TRACEPARENT", CALLER), ("OTEL_EXPORTER_OTLP_ENDPOINT", "")]);
    out.expect(0, None);
    assert_eq!(svc.header("traceparent"), vec![None]);
    assert_eq!(ws.read("C.tp"), "");
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    // A command that runs no work exports nothing, variable or not.
    ws.engine_env(&["status"], &[("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.base())]).expect_code(0);
    assert!(otlp.requests().is_empty());
}

#[test]
fn an_otlp_url_that_is_none_is_refused_at_its_place_before_anything_runs() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![command_task("C")]));
    let out = ws.engine(&["run", "plan.json", "--otlp", "localhost:4318"]);
    out.expect_code(2);
    assert!(out.stderr.contains("USAGE_ERROR") && out.stderr.contains("--otlp"), "{}", out.stderr);
    assert!(!ws.path("C.tp").exists(), "nothing ran");
    let out = ws.engine_env(&["run", "plan.json"], &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]);
    out.expect_code(2);
    assert!(out.stderr.contains("USAGE_ERROR") && out.stderr.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{}", out.stderr);
}
