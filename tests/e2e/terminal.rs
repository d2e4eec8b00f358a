//! Issue 9, defect 5: human output replayed raw terminal escapes from
//! provider output (OSC 52 clipboard writes, clear screen, window titles,
//! carriage returns, backspaces). Every human rendering shows control
//! characters as escapes; `--json` keeps the bytes.

use serde_json::{json, Value};

use crate::common::*;

/// What the provider prints: each a real terminal attack.
const ATTACK: &str = "printf 'osc52:\\033]52;c;ZXZpbA==\\007 clear:\\033[2J\\033[H title:\\033]0;pwned\\007 \
                      cr:done\\rFAIL bs:ok\\010\\010no del:\\177 c1:\\302\\2331m\\n'; printf 'err:\\033[31m\\n' >&2; exit 3";

/// A control character a terminal would act on (newline and tab are layout).
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|c| c.is_control() && *c != '\n' && *c != '\t')
}

#[track_caller]
fn assert_inert(what: &str, text: &str) {
    if let Some(c) = raw_control(text) {
        panic!("{what} printed the raw control character U+{:04X}:\n{text:?}", c as u32);
    }
}

#[test]
fn human_output_escapes_control_characters_and_json_keeps_them() {
    let ws = Ws::new();
    let mut p = plan(vec![task("T1", &["sh", "-c", ATTACK])]);
    p["goal"]["statement"] = json!("a goal \u{1b}]0;retitled\u{7} with a title escape");
    // The plan's file name reaches the log (`goal_registered`).
    let name = "plan\u{9b}2J.json";
    ws.write_plan(name, &p);

    let run = ws.engine(&["run", name]);
    run.expect_code(1);
    assert_inert("run", &run.stdout);
    let status = ws.engine(&["status"]);
    assert_inert("status", &status.stdout);
    assert!(status.stdout.contains("a goal \\x1b]0;retitled\\x07 with"), "{}", status.stdout);
    let log = ws.engine(&["log"]);
    assert_inert("log", &log.stdout);
    assert!(log.stdout.contains("plan\\u{9b}2J.json"), "{}", log.stdout);

    let explain = ws.engine(&["explain", "T1"]);
    explain.expect_code(0);
    let text = &explain.stdout;
    assert_inert("explain", text);
    for shown in [
        "osc52:\\x1b]52;c;ZXZpbA==\\x07",
        "clear:\\x1b[2J\\x1b[H",
        "title:\\x1b]0;pwned\\x07",
        "cr:done\\rFAIL",
        "bs:ok\\x08\\x08no",
        "del:\\x7f",
        "c1:\\u{9b}1m",
        "err:\\x1b[31m",
    ] {
        assert!(text.contains(shown), "explain lacks {shown:?}:\n{text}");
    }

    // Errors quote what they were given: escaped too.
    let err = ws.engine(&["explain", "T\u{1b}[2J\u{7}"]);
    err.expect_code(2);
    assert_inert("an error", &err.stderr);
    assert!(err.stderr.contains("T\\x1b[2J\\x07"), "{}", err.stderr);

    // --json: the bytes as the provider wrote them (JSON-escaped only).
    let j = ws.engine(&["explain", "T1", "--json"]);
    j.expect_code(0);
    let doc = j.json();
    let stdout = find_excerpt(&doc).expect("the provider's stdout excerpt");
    for raw in ["\u{1b}]52;c;ZXZpbA==\u{7}", "\u{1b}[2J\u{1b}[H", "done\rFAIL", "ok\u{8}\u{8}no", "\u{7f}", "\u{9b}1m"]
    {
        assert!(stdout.contains(raw), "--json lost {raw:?}: {stdout:?}");
    }
}

/// The stdout excerpt of the attempt's process-exit evidence.
fn find_excerpt(doc: &Value) -> Option<String> {
    doc["attempts"].as_array()?.iter().flat_map(|a| a["evidence"].as_array().into_iter().flatten()).find_map(|e| {
        let ev = &e["evidence"];
        (ev["kind"] == "process_exit").then(|| ev["stdout"]["excerpt"].as_str().map(str::to_string)).flatten()
    })
}
