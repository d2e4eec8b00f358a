//! `@modelcontextprotocol/server-filesystem` (no operation-status tool):
//! the effect of `write_file` read back with `read_text_file`, and one
//! server process for every call of a provider.

use providers::mcp::McpProvider;
use providers::{Decider, Progress, Provider, Verdict};
use serde_json::json;

use crate::support::*;

/// The server run through `sh`, which notes each start in `starts.log`.
fn provider(ws: &std::path::Path) -> McpProvider {
    let index = node_server("server-filesystem");
    let starts = ws.join("starts.log");
    let command = vec![
        "sh".to_string(),
        "-c".into(),
        r#"echo started >> "$1"; exec node "$2" "$3""#.into(),
        "sh".into(),
        starts.to_string_lossy().into_owned(),
        index.to_string_lossy().into_owned(),
        ws.to_string_lossy().into_owned(),
    ];
    McpProvider::stdio(command, None)
}

fn write(ws: &std::path::Path, op: &str, content: &str) -> providers::Call {
    let path = ws.join(format!("note-{op}.txt"));
    call(ws, op, json!({"tool": "write_file", "arguments": {"path": path, "content": content}}))
}

/// The read-back a task would declare for its `write_file`.
fn rule() -> serde_json::Value {
    json!({"tool": "read_text_file", "arguments": {"path": "{workspace}/note-{operation_id}.txt"},
           "present_if": {"text_contains": "hello {operation_id}"},
           "absent_if": {"text_contains": "ENOENT"}})
}

#[tokio::test]
async fn four_calls_are_served_by_one_server_process() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let p = provider(&ws);
    let calls = [
        write(&ws, "op-a", "hello op-a"),
        write(&ws, "op-b", "hello op-b"),
        call(&ws, "op-c", json!({"tool": "read_text_file", "arguments": {"path": ws.join("note-op-a.txt")}})),
        call(&ws, "op-d", json!({"tool": "list_directory", "arguments": {"path": ws}})),
    ];
    let mut pids = Vec::new();
    let mut texts = Vec::new();
    for c in &calls {
        let (o, progress) = go(&p, c).await;
        let r = receipt(o);
        assert_eq!(r.tool_error, None, "{:?}", r.result.text);
        let Some(Progress::Dispatched { detail }) = progress.first() else { panic!("{progress:?}") };
        pids.push(detail.split("pid ").nth(1).unwrap().split(' ').next().unwrap().to_string());
        texts.push(providers::observe::content_text(&result_of(&r)));
    }
    assert!(pids.iter().all(|p| *p == pids[0]), "{pids:?}");
    assert_eq!(std::fs::read_to_string(ws.join("starts.log")).unwrap(), "started\n", "one start for four calls");
    assert_eq!(p.server_starts(), 1);
    assert_eq!(texts[2], "hello op-a");
    assert!(texts[3].contains("note-op-a.txt") && texts[3].contains("note-op-b.txt"), "{}", texts[3]);
    // The start-up banner went to the first call's stderr only.
    p.shutdown().await;
}

#[tokio::test]
async fn read_back_is_present_absent_or_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let p = provider(&ws);
    let sent = write(&ws, "op-1", "hello op-1");
    receipt(go(&p, &sent).await.0);
    let rule = rule();

    // Present: the file holds what the call wrote.
    let r = p.read_back(&sent, Some(&rule)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Present, Decider::PresentIf), "{r:?}");
    assert_eq!(r.request["arguments"]["path"], json!(format!("{}/note-op-1.txt", ws.display())));
    assert_eq!(r.matched, vec!["text contains \"hello op-1\""]);

    // Absent, as declared: the server says ENOENT for a file never written.
    let never = write(&ws, "op-2", "hello op-2");
    let r = p.read_back(&never, Some(&rule)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Absent, Decider::AbsentIf), "{r:?}");
    assert!(r.answer["result"]["isError"] == json!(true), "{r:?}");

    // Inconclusive: an error the rule did not declare (outside the allowed folder) ...
    let outside = json!({"tool": "read_text_file", "arguments": {"path": "/etc/hostname"},
                         "present_if": {"text_contains": "x"}, "absent_if": {"text_contains": "ENOENT"}});
    let r = p.read_back(&sent, Some(&outside)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NeitherMatched), "{r:?}");
    assert!(r.summary().contains("Access denied"), "{}", r.summary());
    // ... and ENOENT where the rule does not call it absence.
    let mut no_absence = rule.clone();
    no_absence.as_object_mut().unwrap().remove("absent_if");
    let r = p.read_back(&never, Some(&no_absence)).unwrap().await;
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    // ... and a file that holds something else.
    std::fs::write(ws.join("note-op-3.txt"), "other text").unwrap();
    let r = p.read_back(&write(&ws, "op-3", "hello op-3"), Some(&rule)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NeitherMatched));
    assert_eq!(p.server_starts(), 1, "read-backs use the same server");
}

/// The engine died after dispatch: a new provider (a new run) reads the
/// effect back without sending `write_file` again.
#[tokio::test]
async fn after_a_lost_answer_a_new_run_reads_the_effect_back() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let sent = write(&ws, "op-9", "hello op-9");
    {
        let first = provider(&ws);
        receipt(go(&first, &sent).await.0);
        // Dropped without shutdown, as a killed engine would leave it.
    }
    let before = std::fs::metadata(ws.join("note-op-9.txt")).unwrap().modified().unwrap();
    let second = provider(&ws);
    let r = second.read_back(&sent, Some(&rule())).unwrap().await;
    assert_eq!(r.verdict, Verdict::Present, "{r:?}");
    let after = std::fs::metadata(ws.join("note-op-9.txt")).unwrap().modified().unwrap();
    assert_eq!(before, after, "the read-back wrote nothing");
    assert_eq!(std::fs::read_to_string(ws.join("starts.log")).unwrap(), "started\nstarted\n");
}

/// `tools/list` through the provider API: the server's tools with their
/// input schemas, on the one server process the calls then use.
#[tokio::test]
async fn list_tools_names_every_tool_with_its_input_schema() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let p = provider(&ws);
    let listing = call(&ws, "tools/list", json!({}));
    let inventory = p.list_tools(&listing).expect("an MCP provider has an inventory").await.unwrap();
    let server = inventory.server.as_ref().expect("the server says who it is");
    assert!(server.name.contains("filesystem"), "{server:?}");
    assert!(!server.version.is_empty(), "{server:?}");
    let tools = inventory.tools.clone();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["read_text_file", "write_file", "list_directory"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");
    let write_tool = tools.iter().find(|t| t.name == "write_file").unwrap();
    assert_eq!(write_tool.input_schema["type"], "object", "{}", write_tool.input_schema);
    assert!(write_tool.input_schema["properties"]["path"].is_object(), "{}", write_tool.input_schema);
    // Listed once per server start: asking again is the same, no new start.
    assert_eq!(p.list_tools(&listing).unwrap().await.unwrap(), inventory);
    receipt(go(&p, &write(&ws, "op-a", "hello op-a")).await.0);
    assert_eq!(p.server_starts(), 1);
    // A command provider has no inventory.
    let cmd = providers::command::CommandProvider { protocol: None };
    assert!(cmd.list_tools(&listing).is_none());
    p.shutdown().await;
}
