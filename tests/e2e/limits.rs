//! Issue 9, defects 6, 7 and 10: every input a plan holds has a bound that
//! `engine check` enforces (PLAN_INVALID at the exact JSON path), plan
//! files must be regular files read within the size bound, a bad glob is a
//! bad plan (not an input outside the workspace), and no renderer panics
//! on what an older store holds.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

/// `engine check --json` of `plan`: (exit code, error code, place).
fn check(ws: &Ws, plan: &Value) -> (i32, String, String) {
    ws.write_plan("plan.json", plan);
    let out = ws.engine(&["check", "plan.json", "--json"]);
    let doc = out.json();
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (out.code(), s(&doc["error"]["code"]), s(&doc["error"]["place"]))
}

fn one_task(t: Value) -> Value {
    plan(vec![t])
}

/// A task ref of 65,536 characters used to pass `check` and then panic
/// `run` (after doing the work) and `status`.
#[test]
fn a_ref_of_65536_characters_is_refused_by_every_command_that_loads_the_plan() {
    let ws = Ws::new();
    let long = "r".repeat(65_536);
    ws.write_plan("plan.json", &one_task(task(&long, &["true"])));
    for cmd in ["check", "digest", "graph", "run"] {
        let out = ws.engine(&[cmd, "plan.json", "--json"]);
        out.expect_code(2);
        let e = &out.json()["error"];
        assert_eq!((e["code"].as_str(), e["place"].as_str()), (Some("PLAN_INVALID"), Some("$.tasks[0].ref")), "{cmd}");
        assert!(e["message"].as_str().unwrap().contains("65536 bytes"), "{e}");
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
    assert!(!ws.store_dir().exists(), "nothing was run or written");
}

/// Each bound: the value at the limit passes, one past it is refused at
/// its path.
#[test]
fn every_plan_bound_holds_at_its_limit_and_refuses_one_past_it() {
    type Set = fn(&mut Value, usize);
    let cases: Vec<(&str, usize, Set, &str)> = vec![
        ("ref bytes", 128, |p, n| p["tasks"][0]["ref"] = json!("r".repeat(n)), "$.tasks[0].ref"),
        ("goal id bytes", 128, |p, n| p["goal"]["id"] = json!("g".repeat(n)), "$.goal.id"),
        ("title bytes", 1024, |p, n| p["tasks"][0]["title"] = json!("t".repeat(n)), "$.tasks[0].title"),
        ("goal statement bytes", 16384, |p, n| p["goal"]["statement"] = json!("s".repeat(n)), "$.goal.statement"),
        ("constraint bytes", 16384, |p, n| p["goal"]["constraints"] = json!(["c".repeat(n)]), "$.goal.constraints[0]"),
        ("input path bytes", 4096, |p, n| p["tasks"][0]["inputs"] = json!(["i".repeat(n)]), "$.tasks[0].inputs[0]"),
        ("inputs per task", 10_000, |p, n| p["tasks"][0]["inputs"] = json!(vec!["a.txt"; n]), "$.tasks[0].inputs"),
        (
            "argument count",
            4096,
            |p, n| p["tasks"][0]["action"]["run"] = json!(vec!["true"; n]),
            "$.tasks[0].action.run",
        ),
        (
            "argument bytes",
            131_072,
            |p, n| p["tasks"][0]["action"]["run"] = json!(["true", "a".repeat(n)]),
            "$.tasks[0].action.run[1]",
        ),
        (
            "validations per task",
            1000,
            |p, n| {
                let v: Vec<Value> = (0..n).map(|i| json!({"id": format!("V{i}"), "run": ["true"]})).collect();
                p["tasks"][0]["validations"] = json!(v)
            },
            "$.tasks[0].validations",
        ),
        (
            "dependencies per task",
            10_000,
            |p, n| p["tasks"][1]["depends_on"] = json!(vec!["a"; n]),
            "$.tasks[1].depends_on",
        ),
        (
            "timeout seconds",
            2_592_000,
            |p, n| p["tasks"][0]["timeout_seconds"] = json!(n),
            "$.tasks[0].timeout_seconds",
        ),
    ];
    let ws = Ws::new();
    for (name, limit, set, place) in cases {
        let mut p = plan(vec![task("a", &["true"]), task("b", &["true"])]);
        set(&mut p, limit);
        assert_eq!(check(&ws, &p).0, 0, "{name}: {limit} is within the bound");
        set(&mut p, limit + 1);
        let (code, error, at) = check(&ws, &p);
        assert_eq!((code, error.as_str(), at.as_str()), (2, "PLAN_INVALID", place), "{name}: {} is past it", limit + 1);
    }
}

#[test]
fn refs_and_ids_are_plain_identifiers() {
    let ws = Ws::new();
    for bad in ["a b", "T\u{1b}[2J", "-T", "T\"1", "T\n"] {
        let (code, error, at) = check(&ws, &one_task(task(bad, &["true"])));
        assert_eq!((code, error.as_str(), at.as_str()), (2, "PLAN_INVALID", "$.tasks[0].ref"), "{bad:?}");
    }
    let mut p = one_task(task("T1", &["true"]));
    p["tasks"][0]["validations"] = json!([{"id": "V 1", "run": ["true"]}]);
    assert_eq!(check(&ws, &p).2, "$.tasks[0].validations[0].id");
    let mut p = one_task(task("T1", &["true"]));
    p["providers"]["s h"] = json!({"kind": "command"});
    assert_eq!(check(&ws, &p).2, "$.providers[\"s h\"]");
}

/// Nesting past the bound is named by its path; past serde_json's own
/// recursion limit by line and column — both PLAN_INVALID, never a crash.
#[test]
fn nesting_depth_is_bounded() {
    let ws = Ws::new();
    let nested = |arrays: usize| {
        let mut v = json!(1);
        for _ in 0..arrays {
            v = json!([v]);
        }
        let mut p = one_task(json!({"ref": "T1", "provider": "h", "action": {"body": v}}));
        p["providers"]["h"] = json!({"kind": "http", "endpoint": "http://127.0.0.1:9/x"});
        p
    };
    // The action object is 4 deep, `body` 5: 60 arrays reach 64.
    assert_eq!(check(&ws, &nested(60)).0, 0);
    let (code, error, at) = check(&ws, &nested(61));
    assert_eq!((code, error.as_str()), (2, "PLAN_INVALID"));
    assert_eq!(at, format!("$.tasks[0].action.body{}", "[0]".repeat(60)));

    let deep = format!(
        "{{\"version\": 1, \"tasks\": [{{\"ref\": \"a\", \"provider\": \"sh\", \"action\": {}",
        "[".repeat(10_000)
    );
    ws.write("deep.json", deep);
    let out = ws.engine(&["check", "deep.json", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "PLAN_INVALID");
    assert!(out.json()["error"]["place"].as_str().unwrap().starts_with("deep.json:1:"), "{}", out.stdout);
}

/// An input glob `[` was reported as INPUT_OUTSIDE_WORKSPACE.
#[test]
fn a_bad_glob_is_plan_invalid_naming_the_glob() {
    let ws = Ws::new();
    let mut p = plan(vec![task("a", &["true"]), task("b", &["true"])]);
    p["tasks"][1]["inputs"] = json!(["ok.txt", "src/[", "x"]);
    ws.write_plan("plan.json", &p);
    for cmd in ["check", "run"] {
        let out = ws.engine(&[cmd, "plan.json", "--json"]);
        out.expect_code(2);
        let e = &out.json()["error"];
        assert_eq!((e["code"].as_str(), e["place"].as_str()), (Some("PLAN_INVALID"), Some("$.tasks[1].inputs[1]")));
        assert!(e["message"].as_str().unwrap().contains("`src/[`"), "{e}");
    }
}

/// A workspace whose own path has glob characters: its globs still match.
#[test]
fn a_workspace_path_with_glob_characters_is_literal() {
    let ws = Ws::new();
    let odd = ws.path("a[1]");
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join("in.txt"), "x").unwrap();
    let mut t = task("T1", &["true"]);
    t["inputs"] = json!(["*.txt"]);
    std::fs::write(odd.join("plan.json"), serde_json::to_string(&one_task(t)).unwrap()).unwrap();
    ws.engine(&["run", "a[1]/plan.json", "--json"]).expect_code(0);
    // The input was expanded: changing it makes the completion stale.
    std::fs::write(odd.join("in.txt"), "changed").unwrap();
    ws.engine(&["run", "a[1]/plan.json", "--json"]).expect_code(0);
    let rows = attempts(&Ledger::open(&ws.store_dir_of(&odd).join("engine.db")));
    assert_eq!(rows.len(), 2, "T1 ran again after its input changed: {rows:?}");
}

/// `/dev/zero` read until memory ran out; a FIFO and `/dev/urandom` hung.
/// Each is refused at once, without reading.
#[test]
fn plan_files_must_be_regular_files() {
    let ws = Ws::new();
    let fifo = ws.path("fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::create_dir(ws.path("folder.json")).unwrap();
    let cases = [
        ("/dev/zero", "a character device"),
        ("/dev/urandom", "a character device"),
        ("/dev/null", "a character device"),
        ("fifo.json", "a FIFO"),
        ("folder.json", "a folder"),
    ];
    for (path, kind) in cases {
        for cmd in ["check", "run"] {
            let mut running = ws.spawn_engine(&[cmd, path, "--json"]);
            let out = running.wait(Duration::from_secs(20));
            out.expect_code(2);
            let e = &out.json()["error"];
            assert_eq!((e["code"].as_str(), e["place"].as_str()), (Some("PLAN_INVALID"), Some(path)), "{path}");
            assert!(e["message"].as_str().unwrap().contains(kind), "{path}: {e}");
        }
    }
    assert!(!ws.store_dir().exists());
}

/// The size bound holds for a regular file too (read no further than it).
#[test]
fn a_plan_file_over_the_size_bound_is_refused() {
    let ws = Ws::new();
    let f = std::fs::File::create(ws.path("big.json")).unwrap();
    f.set_len(256 * 1024 * 1024 + 1).unwrap();
    let out = ws.engine(&["check", "big.json", "--json"]);
    out.expect_code(2);
    let e = &out.json()["error"];
    assert_eq!((e["code"].as_str(), e["place"].as_str()), (Some("PLAN_INVALID"), Some("big.json")));
    assert!(e["message"].as_str().unwrap().contains("limit"), "{e}");
}

/// A store written by an engine without the bound can still hold a long
/// ref: `status` used to panic on its column width.
#[test]
fn status_of_a_store_holding_an_over_long_ref_does_not_panic() {
    let ws = Ws::new();
    let mut t = task("T1", &["true"]);
    t["requires_approval"] = json!(true);
    ws.write_plan("plan.json", &one_task(t));
    ws.engine(&["run", "plan.json", "--json"]).expect_code(4);
    let long = "r".repeat(70_000);
    assert_eq!(ws.tamper(&format!("UPDATE tasks SET task_ref = '{long}'")), 1);
    for args in [vec!["status"], vec!["status", "--json"]] {
        let out = ws.engine(&args);
        out.expect_code(0);
        assert!(out.stdout.contains(&long), "{args:?}");
    }
}
