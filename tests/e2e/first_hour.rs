//! The first hour with the engine (issue 12 items 3, 4, 6, 7): `init`, the
//! warnings of `check`, "did you mean", `$schema`, `goals`, `--goal`,
//! `output`, what a re-run says of tasks it did not run, `status` after an
//! approval, completions and man pages.

use std::fs;

use serde_json::{json, Value};

use super::common::*;

#[test]
fn init_writes_a_starter_that_runs_to_satisfied_and_never_overwrites() {
    let ws = Ws::new();
    let out = ws.engine(&["init", "first"]);
    out.expect_code(0);
    for f in ["plan.json", "agent.sh", "plan.schema.json"] {
        assert!(ws.path("first").join(f).is_file(), "init wrote {f}\n{}", out.stdout);
    }
    let check = ws.engine(&["check", "first/plan.json"]);
    check.expect_code(0);
    assert!(!check.stderr.contains("warning"), "the starter has no trap\n{}", check.stderr);

    let run = ws.engine(&["run", "first/plan.json"]);
    assert_eq!(run.code(), 0, "{}", run.describe());
    assert!(run.stdout.contains("goal satisfied"), "{}", run.stdout);
    // The plan's folder is its workspace; its store is outside it.
    let status = ws.engine(&["--json", "status", "--workspace", "first"]);
    assert_eq!(status.json()["goal"]["state"], "satisfied", "{}", status.stdout);
    assert_eq!(status.json()["store"], ws.store_of("first").display().to_string(), "{}", status.stdout);
    assert!(!ws.path("first/.engine").exists(), "nothing of the store in the workspace");
    // The agent really ran and saw its request (operation id, try).
    let summary = ws.read("first/summary.md");
    assert!(summary.contains("hello, world") && summary.contains("op_") && summary.contains("try 1"), "{summary}");

    // A second init into the same folder writes nothing and names the files.
    let plan_before = ws.read("first/plan.json");
    ws.write("first/agent.sh", "mine");
    let again = ws.engine(&["--json", "init", "first"]);
    again.expect(2, Some("USAGE_ERROR"));
    let message = again.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("plan.json") && message.contains("agent.sh"), "{message}");
    assert_eq!(ws.read("first/agent.sh"), "mine");
    assert_eq!(ws.read("first/plan.json"), plan_before);
}

/// A plan with every trap `check` warns about.
fn trapped_plan() -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "s"},
        "budgets": {"max_cost": 1},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [
            {"ref": "A", "provider": "sh", "action": {"run": ["true"]}, "cost": 2.5, "effect": "none"},
            {"ref": "B", "provider": "sh", "action": {"run": ["no-such-program-xyz"]}, "inputs": ["src/*.py"]}
        ]
    })
}

#[test]
fn check_warns_about_each_trap_with_its_code_and_path_and_exits_0() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &trapped_plan());
    let json_out = ws.engine(&["--json", "check", "plan.json"]);
    json_out.expect_code(0);
    let warnings = json_out.json()["warnings"].as_array().cloned().unwrap_or_default();
    let pairs: Vec<(String, String)> = warnings
        .iter()
        .map(|w| (w["code"].as_str().unwrap().to_string(), w["path"].as_str().unwrap().to_string()))
        .collect();
    for (code, path) in [
        ("COST_OVER_BUDGET", "$.tasks[0].cost"),
        ("EFFECT_DEFAULTED", "$.tasks[1].effect"),
        ("EXECUTABLE_NOT_FOUND", "$.tasks[1].action.run[0]"),
        ("INPUT_MATCHES_NOTHING", "$.tasks[1].inputs[0]"),
        ("NO_ACCEPTANCE_CHECK", "$.goal.acceptance"),
    ] {
        assert!(pairs.contains(&(code.into(), path.into())), "{code} at {path} in {pairs:?}");
    }
    assert!(warnings.iter().all(|w| w["message"].as_str().is_some_and(|m| !m.is_empty())));
    // In text: on stderr, one line per warning; stdout says the plan is ok.
    let text = ws.engine(&["check", "plan.json"]);
    text.expect_code(0);
    assert_eq!(text.stderr.matches("warning: ").count(), warnings.len(), "{}", text.stderr);
    assert!(text.stderr.contains("defaults to `external`") || text.stderr.contains("is `external`"), "{}", text.stderr);
    // The input warning goes once the file is there.
    ws.write("src/a.py", "");
    let after = ws.json(&["check", "plan.json"], 0);
    assert!(!after["warnings"].to_string().contains("INPUT_MATCHES_NOTHING"), "{after}");
}

#[test]
fn a_misspelt_field_ref_or_provider_gets_did_you_mean() {
    let ws = Ws::new();
    let mut plan = plan(vec![task("build", &["true"]), task("test", &["true"])]);
    plan["tasks"][0]["efect"] = json!("none");
    ws.write_plan("field.json", &plan);
    let out = ws.json(&["check", "field.json"], 2);
    assert_eq!(out["error"]["code"], "PLAN_INVALID");
    assert!(out["error"]["message"].as_str().unwrap().contains("did you mean `effect`"), "{out}");
    assert_eq!(out["error"]["place"], "$.tasks[0].efect");

    let mut plan = super::common::plan(vec![task("build", &["true"]), task("test", &["true"])]);
    plan["tasks"][1]["depends_on"] = json!(["biuld"]);
    ws.write_plan("dep.json", &plan);
    let out = ws.json(&["check", "dep.json"], 2);
    assert_eq!(out["error"]["code"], "UNKNOWN_DEPENDENCY");
    assert!(out["error"]["message"].as_str().unwrap().contains("did you mean `build`"), "{out}");

    let mut plan = super::common::plan(vec![task("build", &["true"])]);
    plan["tasks"][0]["provider"] = json!("hs");
    ws.write_plan("provider.json", &plan);
    let out = ws.json(&["check", "provider.json"], 2);
    assert_eq!(out["error"]["code"], "UNKNOWN_PROVIDER");
    assert!(out["error"]["message"].as_str().unwrap().contains("did you mean `sh`"), "{out}");
}

#[test]
fn a_schema_key_is_accepted_and_changes_no_digest() {
    let ws = Ws::new();
    let bare = plan(vec![task("A", &["true"])]);
    let mut with_schema = bare.clone();
    with_schema["$schema"] = json!("plan.schema.json");
    ws.write_plan("bare.json", &bare);
    ws.write_plan("schema.json", &with_schema);
    ws.engine(&["check", "schema.json"]).expect_code(0);
    let a = ws.json(&["digest", "bare.json"], 0);
    let b = ws.json(&["digest", "schema.json"], 0);
    assert_eq!(a["plan_digest"], b["plan_digest"]);
    // The schema types `action` per provider kind and speaks to users.
    let schema = ws.engine(&["schema"]).stdout;
    assert!(schema.contains("\"$schema\""), "the schema names the $schema key");
    for internal in ["serde", "Option<", "Vec<", "skip_serializing"] {
        assert!(!schema.contains(internal), "internal wording `{internal}` in the schema");
    }
}

/// Two goals in one store: `a` satisfied, `b` failed.
fn two_goals(ws: &Ws) {
    let mut a = plan(vec![task("T", &["true"])]);
    a["goal"]["id"] = json!("a");
    let mut b = plan(vec![task("T", &["false"])]);
    b["goal"]["id"] = json!("b");
    ws.write_plan("a.json", &a);
    ws.write_plan("b.json", &b);
    ws.engine(&["run", "a.json"]).expect_code(0);
    ws.engine(&["run", "b.json"]).expect_code(1);
}

#[test]
fn goals_lists_every_goal_and_goal_filters_the_readers() {
    let ws = Ws::new();
    two_goals(&ws);
    let goals = ws.json(&["goals"], 0);
    let rows: Vec<(String, String, i64)> = goals["goals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["id"].as_str().unwrap().into(),
                g["state"].as_str().unwrap().into(),
                g["active_revision"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(
        rows.contains(&("a".into(), "satisfied".into(), 1)) && rows.contains(&("b".into(), "failed".into(), 1)),
        "{rows:?}"
    );
    let text = ws.engine(&["goals"]);
    assert!(text.stdout.contains("satisfied") && text.stdout.contains("failed"), "{}", text.stdout);

    // Without --goal: the latest run (b). With it: the named goal.
    assert_eq!(ws.json(&["status"], 0)["goal"]["id"], "b");
    assert_eq!(ws.json(&["status", "--goal", "a"], 0)["goal"]["id"], "a");
    assert!(ws.engine(&["explain", "T", "--goal", "a"]).stdout.contains("succeeded"));
    assert!(ws.engine(&["explain", "T", "--goal", "b"]).stdout.contains("failed"));
    let log = ws.engine(&["log", "--goal", "a"]);
    log.expect_code(0);
    let goals = ws.json(&["log", "--goal", "a"], 0);
    assert!(goals["events"].as_array().unwrap().iter().all(|e| e["goal_id"] == "a"), "{goals}");
    // Two goals in the store: without --goal each line names its goal.
    let all = ws.engine(&["log"]).stdout;
    assert!(all.contains("  a r1  ") && all.contains("  b r1  "), "{all}");
    assert!(!log.stdout.contains("  b r1  "), "{}", log.stdout);
    let missing = ws.json(&["status", "--goal", "c"], 2);
    assert!(missing["error"]["message"].as_str().unwrap().contains("engine goals"), "{missing}");
}

#[test]
fn output_prints_the_raw_bytes_of_either_stream_of_any_attempt() {
    let ws = Ws::new();
    let t = task("A", &["sh", "-c", "printf 'x\\033[31my\\n'; echo \"err $ENGINE_TRY\" >&2; exit 1"]);
    ws.write_plan("plan.json", &plan(vec![t]));
    ws.engine(&["run", "plan.json"]).expect_code(1);
    let out = ws.engine(&["output", "A"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "x\u{1b}[31my\n", "bytes as they are, no escaping");
    let err = ws.engine(&["output", "A", "--stderr"]);
    assert_eq!(err.stdout, "err 1\n");
    assert_eq!(ws.engine(&["output", "A", "--attempt", "1", "--stderr"]).stdout, "err 1\n");
    let none = ws.json(&["output", "A", "--attempt", "999"], 2);
    assert!(
        none["error"]["message"].as_str().unwrap().ends_with("its attempts: 1"),
        "names the attempts there are: {none}"
    );
}

#[test]
fn output_names_the_gap_of_a_truncated_capture_on_stderr() {
    let ws = Ws::new();
    let t = task("A", &["sh", "-c", "head -c 1500000 /dev/zero | tr '\\0' a"]);
    ws.write_plan("plan.json", &plan(vec![t]));
    ws.engine(&["run", "plan.json"]).expect_code(0);
    let out = ws.engine(&["output", "A"]);
    out.expect_code(0);
    assert_eq!(out.stdout.len(), 1_048_576, "the whole of what was kept");
    assert!(out.stdout.bytes().all(|b| b == b'a'));
    assert!(out.stderr.contains("1500000") && out.stderr.contains("451424"), "the gap is named\n{}", out.stderr);
}

#[test]
fn a_rerun_marks_the_tasks_it_did_not_run() {
    let ws = Ws::new();
    let mut b = task("B", &["true"]);
    b["depends_on"] = json!(["A"]);
    b["validations"] = json!([{"id": "V", "run": ["test", "-e", "ok"]}]);
    ws.write_plan("plan.json", &plan(vec![task("A", &["true"]), b]));
    ws.engine(&["run", "plan.json"]).expect_code(1);
    let calls = ws.attempt_count();
    let again = ws.engine(&["run", "plan.json"]);
    again.expect_code(1);
    assert_eq!(ws.attempt_count(), calls, "nothing ran");
    let line = |r: &str| again.stdout.lines().find(|l| l.trim_start().starts_with(r)).unwrap_or_default().to_string();
    assert!(line("A").contains("kept") && !line("A").contains("succeeded  "), "{}", again.stdout);
    assert!(line("B").contains("failed earlier"), "{}", again.stdout);
    // The line under it names the command that acts on it.
    let after_b = again.stdout.lines().skip_while(|l| !l.trim_start().starts_with("B ")).nth(1).unwrap_or_default();
    assert!(after_b.contains("next: `engine repair B`"), "{}", again.stdout);
    let j = ws.json(&["run", "plan.json"], 1);
    let this_run: Vec<bool> = j["tasks"].as_array().unwrap().iter().map(|t| t["this_run"].as_bool().unwrap()).collect();
    assert_eq!(this_run, [false, false], "{j}");
}

#[test]
fn status_after_approve_names_the_approval_and_the_command_that_spends_it() {
    let ws = Ws::new();
    let mut t = task("A", &["true"]);
    t["requires_approval"] = json!(true);
    ws.write_plan("plan.json", &plan(vec![t]));
    let stop = ws.engine(&["run", "plan.json"]);
    stop.expect_code(4);
    let op = ws.op_of("A");
    assert!(stop.stdout.contains(&format!("engine approve {op} --note")), "{}", stop.stdout);
    ws.engine(&["approve", &op, "--note", "fine"]).expect_code(0);
    let status = ws.engine(&["status"]);
    let row = status.stdout.lines().find(|l| l.contains(&op)).unwrap_or_default();
    assert!(row.contains("not spent yet"), "{}", status.stdout);
    let next = status.stdout.lines().skip_while(|l| !l.contains(&op)).nth(1).unwrap_or_default();
    assert!(next.contains("next: `engine run plan.json`"), "{}", status.stdout);
    let task_row = status.stdout.lines().find(|l| l.trim_start().starts_with("A ")).unwrap_or_default();
    assert!(
        task_row.contains("awaiting_approval") && task_row.contains("approved, not spent yet"),
        "{}",
        status.stdout
    );
    for out in [&stop, &status] {
        assert!(!out.stdout.contains("OPERATION_ID") && !out.stderr.contains("OPERATION_ID"), "{}", out.describe());
    }
    ws.engine(&["run", "plan.json"]).expect_code(0);
    assert!(!ws.engine(&["status"]).stdout.contains("not spent"), "spent by the run");
}

#[test]
fn completions_and_man_pages_are_printed_and_written() {
    let ws = Ws::new();
    for (shell, marker) in [("bash", "complete -F _engine"), ("zsh", "#compdef engine"), ("fish", "complete -c engine")]
    {
        let out = ws.engine(&["completions", shell]);
        out.expect_code(0);
        assert!(out.stdout.contains(marker), "{shell}: {}", &out.stdout[..out.stdout.len().min(300)]);
        // Completions know the commands (here: one added in this issue).
        assert!(out.stdout.contains("output"), "{shell} completes `output`");
    }
    let man = ws.engine(&["man", "run"]);
    man.expect_code(0);
    assert!(man.stdout.contains(".TH") && man.stdout.contains("\\-\\-jobs"), "{}", man.stdout);
    let dir = ws.path("man1");
    ws.engine(&["man", "--dir", dir.to_str().unwrap()]).expect_code(0);
    for page in ["engine.1", "engine-run.1", "engine-output.1", "engine-completions.1"] {
        assert!(fs::metadata(dir.join(page)).is_ok_and(|m| m.len() > 0), "{page} written");
    }
}

#[test]
fn every_stop_names_the_real_operation_id_and_task() {
    let rcv = Receiver::start(&[]);
    let ws = super::outcomes::one_http_task(&rcv, "external", false, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    let unknown = ws.engine(&["run", "plan.json"]);
    unknown.expect_code(3);
    let op = ws.op_of(&ws.attempts()[0].task_ref);
    assert!(unknown.stdout.contains(&format!("next: `engine settle {op} --outcome ok --note")), "{}", unknown.stdout);
    assert_eq!(unknown.stdout.matches("--outcome not_run").count(), 1, "each way said once: {}", unknown.stdout);
    ws.engine(&["settle", &op, "--outcome", "not_run", "--note", "not in the log"]).expect_code(0);
    let unproven = ws.engine(&["run", "plan.json"]);
    unproven.expect_code(3);
    assert!(unproven.stdout.contains("`engine retry T1`"), "{}", unproven.stdout);
    let status = ws.engine(&["status"]);
    for out in [&unknown, &unproven, &status] {
        assert!(!out.stdout.contains("OPERATION_ID") && !out.stderr.contains("OPERATION_ID"), "{}", out.describe());
        assert!(!out.stdout.contains(" REF") && !out.stderr.contains(" REF"), "{}", out.describe());
    }
}

/// `cargo install --path .` at the repository root needs a package there
/// (a virtual manifest cannot be installed), and one binary named `engine`
/// in the whole workspace (no two to collide on install).
#[test]
fn the_repository_root_is_an_installable_package_with_one_engine_binary() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let root_manifest = repo_root().join("Cargo.toml");
    let packages = meta["packages"].as_array().unwrap();
    let root = packages
        .iter()
        .find(|p| p["manifest_path"].as_str() == root_manifest.to_str())
        .expect("a package at the repository root");
    // What `cargo install` builds: the binaries that need no feature left
    // off by default (the simulator's `engine-sim` is another package's).
    let defaults: Vec<&Value> = root["features"]["default"].as_array().map(|d| d.iter().collect()).unwrap_or_default();
    let bins = |p: &Value| -> Vec<String> {
        p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
            .filter(|t| t["required-features"].as_array().is_none_or(|f| f.iter().all(|f| defaults.contains(&f))))
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(bins(root), ["engine"]);
    let engines = packages.iter().flat_map(bins).filter(|b| b == "engine").count();
    assert_eq!(engines, 1, "one `engine` binary in the workspace");
}
