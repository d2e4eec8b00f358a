//! Issue 25 items 4 and 5, a newcomer's small sharp edges: one numbering
//! of attempts per task everywhere, `retry REF`, "did you mean" for every
//! ref, a readable `engine log --task REF`, `--color`, the providers an
//! undeclared one could have been, and a JSON syntax error shown on its
//! line with a caret.

use serde_json::json;

use super::common::*;

/// `B` succeeds; `A` fails its validation until `ok` exists, printing
/// which of its calls this is. With one job, B's attempt is the store's
/// attempt 1, A's first is 2, and A's repair is 3: A's *second*.
fn two_tasks(ws: &Ws) {
    let mut a =
        task("A", &["sh", "-c", "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo \"A call $n\""]);
    a["validations"] = json!([{"id": "V1", "run": ["test", "-f", "ok"], "expect_exit": 0}]);
    a["may_change"] = json!(["n"]);
    ws.write_plan("plan.json", &plan(vec![task("B", &["true"]), a]));
    ws.engine(&["run", "plan.json", "--jobs", "1"]).expect_code(1);
    ws.write("ok", "");
    ws.engine(&["repair", "A", "--jobs", "1"]).expect_code(0);
    let ids: Vec<(String, i64)> = ws.attempts().into_iter().map(|a| (a.task_ref, a.id)).collect();
    assert_eq!(ids, [("B".to_string(), 1), ("A".into(), 2), ("A".into(), 3)], "store-wide ids interleave");
}

#[test]
fn attempts_are_numbered_per_task_everywhere() {
    let ws = Ws::new();
    two_tasks(&ws);
    // explain: A's attempts are 1 and 2.
    let explain = ws.engine(&["explain", "A"]);
    assert!(explain.stdout.contains("\nattempt 2  r1  try 2  repair  succeeded"), "{}", explain.stdout);
    assert!(!explain.stdout.contains("attempt 3"), "{}", explain.stdout);
    let j = ws.json(&["explain", "A"], 0);
    let numbers: Vec<i64> = j["attempts"].as_array().unwrap().iter().map(|a| a["number"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [1, 2], "{j}");
    assert_eq!(j["attempts"][1]["attempt"]["id"], 3, "the ledger's id stays an id");
    // status
    let s = ws.json(&["status"], 0);
    let a = s["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == "A").unwrap().clone();
    assert_eq!((a["last_attempt"]["number"].as_i64(), a["last_attempt"]["id"].as_i64()), (Some(2), Some(3)), "{a}");
    // output --attempt N counts the same way.
    let second = ws.engine(&["output", "A", "--attempt", "2"]);
    second.expect_code(0);
    assert_eq!(second.stdout, "A call 2\n");
    assert_eq!(ws.engine(&["output", "A", "--attempt", "1"]).stdout, "A call 1\n");
    let third = ws.engine(&["output", "A", "--attempt", "3"]);
    third.expect_code(2);
    assert!(third.stderr.contains("task A has no attempt 3; its attempts: 1, 2"), "{}", third.describe());
    assert_eq!(ws.json(&["output", "A", "--attempt", "2"], 0)["attempt"], 2);
    // log: A's second attempt is attempt 2.
    let log = ws.engine(&["log", "--task", "A"]).stdout;
    assert!(log.contains("attempt 2") && !log.contains("attempt 3"), "{log}");
    // report: the same numbers in the document and on the page.
    let doc = ws.json(&["report"], 0);
    let a = doc["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == "A").unwrap().clone();
    let numbers: Vec<i64> = a["attempts"].as_array().unwrap().iter().map(|x| x["number"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [1, 2], "{a}");
    ws.engine(&["report", "--html", "r.html"]).expect_code(0);
    let page = ws.read("r.html");
    assert!(page.contains("attempt 2 · revision 1 · try 2"), "the page numbers A's repair attempt 2");
    assert!(!page.contains("attempt 3 ·"), "no store-wide number on the page");
}

#[test]
fn retry_takes_a_task_ref_and_still_an_operation_id() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("calm", &["sh", "-c", "test -f calm || kill -9 $$"])]));
    ws.engine(&["run", "plan.json"]).expect_code(1);
    ws.write("calm", "");
    let out = ws.engine(&["retry", "calm"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!(ws.task_state("calm"), "succeeded");

    // An operation id still works, and `--goal` names the goal.
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("calm", &["sh", "-c", "test -f calm || kill -9 $$"])]));
    ws.engine(&["run", "plan.json"]).expect_code(1);
    ws.write("calm", "");
    let op = ws.op_of("calm");
    ws.engine(&["retry", &op]).expect_code(0);
    let again = ws.engine(&["retry", "calm", "--goal", "g"]);
    again.expect_code(2);
    assert!(
        again.stderr.contains("is not task calm's latest call") || again.stderr.contains("not retryable"),
        "{}",
        again.describe()
    );
}

#[test]
fn every_command_taking_a_ref_suggests_the_closest() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("build", &["false"]), task("test", &["true"])]));
    ws.engine(&["run", "plan.json"]).expect_code(1);
    for args in [
        &["explain", "biuld"][..],
        &["repair", "biuld"],
        &["retry", "biuld"],
        &["output", "biuld"],
        &["log", "--task", "biuld"],
    ] {
        let out = ws.engine_json(args);
        out.expect(2, Some("USAGE_ERROR"));
        let e = &out.json()["error"];
        assert!(e["message"].as_str().unwrap().contains("did you mean `build`?"), "{args:?}: {e}");
        assert_eq!(e["place"], "biuld", "{args:?}: {e}");
    }
}

#[test]
fn log_task_is_readable_and_json_keeps_the_raw_events() {
    let ws = Ws::new();
    two_tasks(&ws);
    let log = ws.engine(&["log", "--task", "A"]);
    log.expect_code(0);
    let lines: Vec<&str> = log.stdout.lines().collect();
    assert!(lines.len() >= 8, "{}", log.stdout);
    for l in &lines {
        assert!(l.contains(" A ") || l.contains("  A  "), "only task A: {l}");
        assert!(!l.contains(" B "), "{l}");
        // A time of day on every line, and no 64-hex digest in full.
        assert!(l.split_whitespace().any(|w| w.len() == 8 && w.chars().filter(|c| *c == ':').count() == 2), "{l}");
        let hex_run = l.split(|c: char| !c.is_ascii_hexdigit()).map(str::len).max().unwrap_or(0);
        assert!(hex_run < 64, "a whole digest: {l}");
    }
    let text = &log.stdout;
    for said in [
        "intent recorded",
        "attempt 1",
        "attempt 2",
        "failed: validation_failed",
        "repair requested: failed attempt 1,",
        "succeeded",
    ] {
        assert!(text.contains(said), "the log says {said:?}:\n{text}");
    }
    // A's attempts are ledger ids 2 and 3: neither id is shown as a number.
    assert!(!text.contains("attempt 3") && !text.contains("failed attempt 2"), "{text}");
    // --json: the raw events of that task, digests whole.
    let raw = ws.json(&["log", "--task", "A"], 0);
    let events = raw["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e["task_ref"] == "A"), "{raw}");
    let intent = events.iter().find(|e| e["kind"] == "intent_recorded").unwrap();
    assert_eq!(intent["data"]["request_digest"].as_str().unwrap().len(), 64, "{intent}");
    assert_eq!(intent["attempt_id"], 2, "the ledger's id");
    let repair = events.iter().find(|e| e["kind"] == "repair_requested").unwrap();
    assert_eq!(repair["data"]["failed_attempt"], 2, "the ledger's id: {repair}");
}

/// A raw ESC byte in `text` only as the start of a colour (SGR) sequence.
fn only_colour_escapes(text: &str) -> bool {
    let mut rest = text;
    while let Some(i) = rest.find('\u{1b}') {
        let tail = &rest[i + 1..];
        let Some(params) = tail.strip_prefix('[') else { return false };
        let end = params.find(|c: char| !(c.is_ascii_digit() || c == ';')).unwrap_or(params.len());
        if !params[end..].starts_with('m') {
            return false;
        }
        rest = &params[end + 1..];
    }
    true
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let ws = Ws::new();
    let script = "printf 'provider:\\033[2J\\033]0;pwned\\007\\n'; exit 3";
    ws.write_plan("plan.json", &plan(vec![task("ok", &["true"]), task("bad", &["sh", "-c", script])]));
    let run = ws.engine(&["--color", "always", "run", "plan.json"]);
    run.expect_code(1);
    assert!(run.stdout.contains('\u{1b}'), "the summary is coloured:\n{}", run.stdout);
    for args in [&["status"][..], &["explain", "bad"], &["log"], &["goals"]] {
        let mut all = vec!["--color", "always"];
        all.extend_from_slice(args);
        let out = ws.engine(&all);
        out.expect_code(0);
        assert!(out.stdout.contains('\u{1b}'), "{args:?} is coloured:\n{}", out.stdout);
        assert!(only_colour_escapes(&out.stdout), "{args:?}: a provider's escape got through:\n{:?}", out.stdout);
        // The flag goes after the command as well.
        let mut after: Vec<&str> = args.to_vec();
        after.extend_from_slice(&["--color", "always"]);
        assert!(ws.engine(&after).stdout.contains('\u{1b}'), "{args:?} --color always");
    }
    let explain = ws.engine(&["--color", "always", "explain", "bad"]).stdout;
    assert!(
        explain.contains("provider:\\x1b[2J\\x1b]0;pwned\\x07"),
        "the provider's bytes shown, not sent:\n{explain:?}"
    );
    // A format another program reads is never painted, even when asked.
    for args in [&["schema"][..], &["completions", "bash"], &["man"], &["graph", "plan.json"]] {
        let mut all = vec!["--color", "always"];
        all.extend_from_slice(args);
        let out = ws.engine(&all);
        out.expect_code(0);
        assert!(!out.stdout.contains('\u{1b}'), "{args:?} is not painted:\n{}", out.stdout);
    }
    // never; auto off a terminal; NO_COLOR with auto; --json.
    for (args, env) in [
        (vec!["--color", "never", "status"], vec![]),
        (vec!["status"], vec![]),
        (vec!["--color", "auto", "status"], vec![("NO_COLOR", "1")]),
        (vec!["--color", "always", "--json", "status"], vec![]),
    ] {
        let out = ws.engine_env(&args, &env);
        out.expect_code(0);
        assert!(!out.stdout.contains('\u{1b}'), "{args:?} {env:?} has no colour:\n{}", out.stdout);
    }
    // A person's explicit --color always outranks NO_COLOR (no-color.org).
    let forced = ws.engine_env(&["--color", "always", "status"], &[("NO_COLOR", "1")]);
    assert!(forced.stdout.contains('\u{1b}'), "{}", forced.stdout);
    // An error is coloured on stderr when asked, never its JSON.
    let err = ws.engine(&["--color", "always", "explain", "nope"]);
    err.expect_code(2);
    assert!(err.stderr.contains('\u{1b}') && only_colour_escapes(&err.stderr), "{:?}", err.stderr);
    let bad = ws.engine(&["--color", "sometimes", "status"]);
    bad.expect_code(2);
}

#[test]
fn an_undeclared_provider_error_lists_the_declared_ones() {
    let ws = Ws::new();
    let mut p = plan(vec![task("build", &["true"])]);
    p["providers"] = json!({"sh": {"kind": "command"}, "agent": {"kind": "command", "protocol": "agent-json"}});
    p["tasks"][0]["provider"] = json!("claude");
    ws.write_plan("plan.json", &p);
    let out = ws.json(&["check", "plan.json"], 2);
    assert_eq!(out["error"]["code"], "UNKNOWN_PROVIDER");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("declared: `agent`, `sh`"), "{message}");
    p["providers"] = json!({});
    ws.write_plan("plan.json", &p);
    let message = ws.json(&["check", "plan.json"], 2)["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("declares no provider"), "{message}");
}

/// A plan whose line 14 misses a comma at column `col`.
fn broken_plan(line14: &str) -> String {
    let mut lines: Vec<String> = vec![
        "{".into(),
        "  \"version\": 1,".into(),
        "  \"goal\": {".into(),
        "    \"id\": \"g\",".into(),
        "    \"statement\": \"s\"".into(),
        "  },".into(),
        "  \"providers\": {".into(),
        "    \"sh\": {".into(),
        "      \"kind\": \"command\"".into(),
        "    }".into(),
        "  },".into(),
        "  \"tasks\": [".into(),
        "    {\"ref\": \"T0\", \"provider\": \"sh\", \"action\": {\"run\": [\"true\"]}, \"effect\": \"none\"},".into(),
    ];
    lines.push(line14.into());
    lines.push("  ]".into());
    lines.push("}".into());
    lines.join("\n")
}

#[test]
fn a_json_syntax_error_shows_the_line_and_a_caret() {
    let ws = Ws::new();
    let line = "    {\"ref\": \"T1\", \"provider\": \"sh\", \"action\": {\"run\": [\"true\"]}, \"effect\": \"none\" \"inputs\": []}";
    ws.write("plan.json", broken_plan(line));
    let col = line.find(" \"inputs\"").unwrap() + 2; // serde_json's column: the unexpected `"`
    let out = ws.engine(&["check", "plan.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("plan.json:14:{col}")), "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    let at = lines.iter().position(|l| l.trim_start().starts_with("14 |")).unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(lines[at].ends_with(line), "the whole line:\n{}", out.stderr);
    let caret = lines[at + 1].find('^').expect("a caret");
    assert_eq!(lines[at + 1].trim_end().len(), caret + 1, "the caret ends its line");
    assert!(lines[at][caret..].starts_with("\"inputs\""), "the caret is under column {col}:\n{}", out.stderr);
    // --json: the same in `details`.
    let j = ws.json(&["check", "plan.json"], 2);
    assert_eq!(
        (j["error"]["details"]["line"].as_i64(), j["error"]["details"]["column"].as_i64()),
        (Some(14), Some(col as i64))
    );

    // A long line is clipped around the column, the caret still under it.
    let long = format!("    {{\"ref\": \"T1\", \"title\": \"{}\", \"provider\": \"sh\" \"x\": 1}}", "w".repeat(5000));
    ws.write("plan.json", broken_plan(&long));
    let (shown, under) = caret_line(&ws);
    assert!(shown.chars().count() < 200 && shown.contains('…'), "clipped: {shown}");
    assert!(under.starts_with("\"x\": 1}"), "the caret is under the unexpected `\"`: {under}");
    // A raw control character (itself a JSON error) is shown escaped, and
    // the caret stands under its escape.
    let raw = format!("    {{\"ref\": \"T1\", \"title\": \"{}\u{1b}[2J\"}}", "w".repeat(5000));
    ws.write("plan.json", broken_plan(&raw));
    let (shown, under) = caret_line(&ws);
    assert!(!shown.contains('\u{1b}') && shown.contains("\\x1b[2J"), "{shown}");
    assert!(under.starts_with("\\x1b[2J"), "{under}");
}

/// `engine check`'s source line for a plan whose error is on line 14, and
/// what of it stands from the caret on (in characters: `…` is one).
fn caret_line(ws: &Ws) -> (String, String) {
    let out = ws.engine(&["check", "plan.json"]);
    out.expect_code(2);
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    let at = lines.iter().position(|l| l.trim_start().starts_with("14 |")).expect("the line");
    let caret = lines[at + 1].chars().position(|c| c == '^').expect("a caret");
    (lines[at].to_string(), lines[at].chars().skip(caret).collect())
}
