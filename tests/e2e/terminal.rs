//! Issue 9, defect 5: human output replayed raw terminal escapes from
//! provider output (OSC 52 clipboard writes, clear screen, window titles,
//! carriage returns, backspaces). Every human rendering shows control
//! characters as escapes; `--json` keeps the bytes.

use serde_json::{json, Value};

use super::common::*;

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

/// What a provider prints to reorder or restyle what a person reads: a C1
/// CSI (U+009B), a right-to-left override (U+202E), an isolate (U+2066)
/// and a right-to-left mark (U+200F).
const BIDI: &str =
    "printf 'c1:\\302\\2331m rlo:\\342\\200\\256gpj.exe iso:\\342\\201\\246x mark:\\342\\200\\217y\\n'; exit 3";

/// A character no output may print as itself: a control (but newline and
/// tab) or a bidirectional control.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Issue 29, defect 6: `report --json` (and every `--json`) passed raw
/// U+009B and U+202E from provider output to whoever reads it in a
/// terminal. Every output now writes them as escapes: human text as
/// `\u{202e}`, `--json` as JSON's `\u202e`, which a script reads back as
/// the very characters the provider printed.
#[test]
fn c1_and_bidi_characters_are_escaped_in_every_output_and_json_keeps_their_values() {
    let ws = Ws::new();
    let mut p = plan(vec![task("T1", &["sh", "-c", BIDI])]);
    p["tasks"][0]["title"] = json!("title \u{202e}txt.exe");
    ws.write_plan("plan.json", &p);
    let run = ws.engine(&["run", "plan.json", "--json"]);
    run.expect_code(1);
    for args in [
        &["run", "plan.json"][..],
        &["status"],
        &["explain", "T1"],
        &["log"],
        &["status", "--json"],
        &["explain", "T1", "--json"],
        &["log", "--json"],
        &["report", "--json"],
    ] {
        let out = ws.engine(args);
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            if let Some(c) = text.chars().find(|c| hidden(*c)) {
                panic!("engine {args:?} printed U+{:04X} raw on {stream}:\n{text:?}", c as u32);
            }
        }
    }
    let report = ws.engine(&["report", "--json"]);
    report.expect_code(0);
    assert!(report.stdout.contains("\\u202e") && report.stdout.contains("\\u009b"), "{}", report.stdout);
    let explain = ws.engine(&["explain", "T1"]);
    assert!(
        explain.stdout.contains("rlo:\\u{202e}gpj.exe") && explain.stdout.contains("mark:\\u{200f}y"),
        "{}",
        explain.stdout
    );
    // `engine output`: the bytes as kept into a pipe, escaped into a
    // terminal (here `script`'s pseudo-terminal).
    let piped = ws.engine(&["output", "T1"]);
    assert!(piped.stdout.contains("rlo:\u{202e}gpj.exe"), "{}", piped.describe());
    let engine = crate::support::ENGINE;
    let mut tty = std::process::Command::new("script");
    tty.args(["-qec", &format!("{} output T1", sh_quote(engine)), "/dev/null"]);
    let shown = ws.run_command(ws_env(&ws, tty));
    assert!(!shown.stdout.chars().any(|c| hidden(c) && c != '\r'), "{}", shown.describe());
    assert!(shown.stdout.contains("rlo:\\u{202e}gpj.exe"), "{}", shown.describe());
    // The values are the provider's own.
    let doc = ws.engine(&["explain", "T1", "--json"]).json();
    let excerpt = find_excerpt(&doc).expect("the provider's stdout excerpt");
    for raw in ["c1:\u{9b}1m", "rlo:\u{202e}gpj.exe", "iso:\u{2066}x", "mark:\u{200f}y"] {
        assert!(excerpt.contains(raw), "--json changed {raw:?}: {excerpt:?}");
    }
}

/// `cmd` run as `ws.command` runs the engine: in the workspace, with its
/// state folder.
fn ws_env(ws: &Ws, mut cmd: std::process::Command) -> std::process::Command {
    let template = ws.command(&[]);
    cmd.current_dir(template.get_current_dir().expect("a working folder"));
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd
}

/// Issue 29, defect 6: `--request-id` took U+202E, so two ids could look
/// alike or one read backwards in every listing. Refused, naming the
/// character; nothing recorded.
#[test]
fn a_request_id_with_a_bidi_or_invisible_character_is_refused() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("T1", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    let op = ws.digest_op("T1");
    for (id, named) in
        [("ab\u{202e}cd", "U+202E"), ("ab\u{2066}cd", "U+2066"), ("a\u{200b}b", "U+200B"), ("\u{feff}id", "U+FEFF")]
    {
        let out = ws.engine(&["--json", "retry", &op, "--request-id", id]);
        out.expect_code(2);
        let err = &out.json()["error"];
        assert_eq!(err["code"], "USAGE_ERROR", "{}", out.describe());
        assert!(err["message"].as_str().unwrap().contains(named), "names {named}: {}", out.describe());
        assert!(!out.stderr.chars().any(hidden) && !out.stdout.chars().any(hidden), "{}", out.describe());
    }
    assert_eq!(ws.ledger().attempts().len(), 1, "nothing was recorded");
}

/// A command whose stderr is a pipe nobody reads any more (`2>&1 | head
/// -1` after `head` exited) still ends with its own exit code: its error
/// line is dropped, not a panic (exit 101). On 714a6df this exited 101.
#[test]
fn a_closed_stderr_pipe_keeps_the_exit_code() {
    let ws = Ws::new();
    let missing = ws.path("no-store.db");
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (reader, writer) = unsafe {
        use std::os::fd::FromRawFd;
        (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1]))
    };
    drop(reader);
    let status = ws
        .command(&["status", "--store", missing.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(writer))
        .status()
        .unwrap();
    // 2: STORE_NOT_FOUND, as with a stderr that is read.
    assert_eq!(status.code(), Some(2), "{status:?}");
    let read = ws.engine(&["status", "--store", missing.to_str().unwrap()]);
    assert_eq!(read.code(), 2, "{}", read.describe());
    assert!(read.stderr.contains("STORE_NOT_FOUND"), "{}", read.describe());
}
