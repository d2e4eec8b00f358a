//! The repository explains itself: every error code, warning code, command,
//! flag and plan field is in `docs/`, every command is in `engine --help`
//! with an example in its own `--help`, and nothing user-facing points
//! outside the repository.

use std::collections::BTreeSet;
use std::fs;

use clap::CommandFactory;
use engine::cli::args::Cli;
use engine::error::Code;
use engine::plan::warnings::WarningCode;
use serde_json::Value;

use super::common::*;

fn doc(name: &str) -> String {
    fs::read_to_string(repo_root().join("docs").join(name)).unwrap_or_else(|e| panic!("docs/{name}: {e}"))
}

/// Every page of docs/, together.
fn all_docs() -> String {
    let mut text = String::new();
    for entry in fs::read_dir(repo_root().join("docs")).expect("docs/") {
        let path = entry.expect("a docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            text.push_str(&fs::read_to_string(&path).expect("a docs page"));
        }
    }
    text
}

fn subcommands() -> Vec<clap::Command> {
    Cli::command().get_subcommands().filter(|c| c.get_name() != "help").cloned().collect()
}

/// The part of commands.md about `engine NAME`: from its heading to the next.
fn command_section(commands_md: &str, name: &str) -> Option<String> {
    let heading = format!("### `engine {name}");
    let start = commands_md.find(&heading)?;
    let rest = &commands_md[start..];
    let end = rest[heading.len()..].find("\n### ").map_or(rest.len(), |i| i + heading.len());
    Some(rest[..end].to_string())
}

#[test]
fn every_error_code_is_documented_with_its_exit_code() {
    let codes_md = doc("codes.md");
    let mut missing = Vec::new();
    for code in Code::ALL {
        let row = format!("| `{}` | {} |", code.as_str(), code.exit_code());
        if !codes_md.contains(&row) {
            missing.push(row);
        }
    }
    assert!(missing.is_empty(), "docs/codes.md lacks these rows (code, exit): {missing:#?}");
}

/// Issue 37, item 6: docs/store.md named schema version 10 where the
/// engine wrote 14. The version it names, and each version it describes,
/// are read from the code; so are the migrations ARCHITECTURE.md counts.
#[test]
fn the_schema_version_the_docs_name_is_the_one_the_engine_writes() {
    let version = engine::store::SCHEMA_VERSION;
    let store_md = doc("store.md");
    assert!(
        store_md.contains(&format!("this engine\nwrites version {version}.")),
        "docs/store.md must say the engine writes version {version}"
    );
    let described = |v: i64| [" ", "\n"].iter().any(|after| store_md.contains(&format!("Version {v}{after}")));
    let undescribed: Vec<i64> = (2..=version).filter(|&v| !described(v)).collect();
    assert!(undescribed.is_empty(), "docs/store.md describes no version {undescribed:?}");
    let architecture = fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    assert!(architecture.contains(&format!("migrations 1–{version})")), "ARCHITECTURE.md counts the migrations");
}

#[test]
fn every_warning_code_is_documented() {
    let codes_md = doc("codes.md");
    let missing: Vec<_> =
        WarningCode::ALL.iter().map(|w| w.as_str()).filter(|w| !codes_md.contains(&format!("| `{w}` |"))).collect();
    assert!(missing.is_empty(), "docs/codes.md lacks warning codes {missing:?}");
}

#[test]
fn every_command_and_flag_is_in_the_commands_reference() {
    let commands_md = doc("commands.md");
    let mut missing = Vec::new();
    for cmd in subcommands() {
        let name = cmd.get_name();
        let Some(section) = command_section(&commands_md, name) else {
            missing.push(format!("### `engine {name}` heading"));
            continue;
        };
        for arg in cmd.get_arguments().filter(|a| !a.is_global_set()) {
            let shown = match arg.get_long() {
                Some(long) => format!("--{long}"),
                None => arg.get_value_names().and_then(|v| v.first()).map(|v| v.to_string()).unwrap_or_default(),
            };
            if !section.contains(&shown) {
                missing.push(format!("engine {name}: {shown}"));
            }
        }
    }
    for global in ["--json", "--store", "--workspace", "--color"] {
        if !commands_md.contains(&format!("| `{global}")) {
            missing.push(format!("global {global}"));
        }
    }
    assert!(missing.is_empty(), "docs/commands.md lacks: {missing:#?}");
}

#[test]
fn every_command_is_in_help_with_an_example() {
    let ws = Ws::new();
    let top = ws.engine(&["--help"]);
    top.expect_code(0);
    for cmd in subcommands() {
        let name = cmd.get_name();
        assert!(top.stdout.contains(&format!("  {name} ")), "`engine --help` lists {name}\n{}", top.stdout);
        let own = ws.engine(&[name, "--help"]);
        own.expect_code(0);
        assert!(own.stdout.contains("Example"), "`engine {name} --help` has an example\n{}", own.stdout);
        assert!(own.stdout.contains(&format!("engine {name}")), "its example runs `engine {name}`\n{}", own.stdout);
        // Every argument is described, not just named.
        for arg in cmd.get_arguments() {
            assert!(arg.get_help().is_some(), "engine {name}: argument {} has no description", arg.get_id());
        }
    }
}

/// Every property name anywhere in the plan's JSON Schema.
fn schema_fields(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                out.extend(props.keys().cloned());
            }
            map.values().for_each(|child| schema_fields(child, out));
        }
        Value::Array(items) => items.iter().for_each(|child| schema_fields(child, out)),
        _ => {}
    }
}

#[test]
fn every_plan_field_is_in_the_plan_reference() {
    let plan_md = doc("plan.md");
    let mut fields = BTreeSet::new();
    schema_fields(&serde_json::to_value(engine::plan::schema()).expect("the schema"), &mut fields);
    assert!(fields.len() > 30, "the schema has its fields: {fields:?}");
    let missing: Vec<_> = fields.iter().filter(|f| !plan_md.contains(&format!("`{f}`"))).collect();
    assert!(missing.is_empty(), "docs/plan.md lacks plan fields {missing:?}");
}

#[test]
fn every_state_and_failure_class_is_documented() {
    use engine::state::{AttemptState, FailureClass, GoalState, TaskState};
    let states_md = doc("states.md");
    let mut words: Vec<&str> = Vec::new();
    words.extend(AttemptState::ALL.iter().map(|s| s.as_str()));
    words.extend(TaskState::ALL.iter().map(|s| s.as_str()));
    words.extend(GoalState::ALL.iter().map(|s| s.as_str()));
    words.extend(FailureClass::ALL.iter().map(|s| s.as_str()));
    // The re-run summary's word for a task it did not run.
    words.push("kept");
    let missing: Vec<_> = words.iter().filter(|w| !states_md.contains(&format!("`{w}`"))).collect();
    assert!(missing.is_empty(), "docs/states.md lacks {missing:?}");
}

#[test]
fn the_repository_explains_itself_without_outside_links() {
    let mut texts = vec![("README.md".to_string(), fs::read_to_string(repo_root().join("README.md")).unwrap())];
    texts.push(("docs/".to_string(), all_docs()));
    for (name, text) in texts {
        assert!(!text.contains("../shared"), "{name} points outside the repository (../shared)");
    }
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(readme.contains("(docs/README.md)"), "the README links to the reference");
    // Every page the index names exists, and every page is in the index.
    let index = doc("README.md");
    for entry in fs::read_dir(repo_root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && name != "README.md" {
            assert_eq!(index.matches(&format!("| [{name}]({name}) |")).count(), 1, "docs/README.md lists {name} once");
        }
    }
}

/// The keys an `agent-json` agent really receives are the ones
/// docs/agent-json.md documents, on a first call and on a repair.
#[test]
fn the_agent_request_is_what_the_docs_describe() {
    let ws = Ws::new();
    let agent = "cat >> requests.jsonl; echo >> requests.jsonl; echo '{\"status\": \"done\", \"summary\": \"s\"}'";
    let mut t = task("write", &["sh", "-c", agent]);
    t["provider"] = serde_json::json!("agent");
    t["effect"] = serde_json::json!("local");
    t["validations"] = serde_json::json!([{"id": "V1", "run": ["test", "-e", "ok"]}]);
    t["may_change"] = serde_json::json!(["requests.jsonl"]);
    let mut p = plan(vec![t]);
    p["providers"]["agent"] = serde_json::json!({"kind": "command", "protocol": "agent-json"});
    ws.write_plan("plan.json", &p);
    ws.engine(&["run", "plan.json"]).expect_code(1);
    ws.write("ok", "");
    ws.engine(&["repair", "write", "--instruction", "make ok"]).expect_code(0);

    let text = ws.read("requests.jsonl");
    let requests: Vec<Value> =
        text.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(requests.len(), 2, "one request per call, each on one line:\n{text}");
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<BTreeSet<_>>();
    let first: BTreeSet<String> = ["goal", "task", "operation_id", "try", "authority"].map(String::from).into();
    assert_eq!(keys(&requests[0]), first);
    let mut repair_keys = first.clone();
    repair_keys.insert("repair".into());
    assert_eq!(keys(&requests[1]), repair_keys);
    let repair = &requests[1]["repair"];
    assert_eq!(repair["instruction"], "make ok");
    assert_eq!(repair["classification"]["class"], "validation_failed");

    let agent_md = doc("agent-json.md");
    let documented = |k: &String| agent_md.contains(&format!("| `{k}` |"));
    let authority = &requests[0]["authority"];
    let all = keys(&requests[1]).into_iter().chain(keys(repair)).chain(keys(&requests[0]["task"]));
    for k in all.chain(keys(authority)).collect::<Vec<_>>().iter() {
        assert!(documented(k) || agent_md.contains(&format!("`{k}`")), "docs/agent-json.md lacks `{k}`");
    }
    for k in keys(&requests[1]).iter().chain(keys(repair).iter()) {
        assert!(documented(k), "docs/agent-json.md has no row for `{k}`");
    }
}

/// The crates every Cargo.toml of the repository depends on (normal, build
/// and dev), by name; the workspace's own packages left out.
fn dependency_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for manifest in ["Cargo.toml", "providers/Cargo.toml", "tests/Cargo.toml", "simulator/Cargo.toml"] {
        let text = fs::read_to_string(repo_root().join(manifest)).expect("a manifest");
        let mut in_deps = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_deps = line.ends_with("dependencies]");
                continue;
            }
            let Some((name, _)) = line.split_once(['=', '.']) else { continue };
            let name = name.trim();
            if in_deps && !name.is_empty() && !name.starts_with('#') && name != "providers" && name != "engine" {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// Issue 25: the README is what a person reads first — what it is,
/// install, the two commands, a first plan, where the docs are, and why
/// each dependency is here (every crate, one row) — in at most 300 lines;
/// the rest lives in docs/ and bench/README.md. Its test command is the
/// one `.ci/run` runs.
#[test]
fn the_readme_is_short_and_says_why_each_dependency_is_here() {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines; at most 300 (move the rest into docs/)");
    for section in ["## Install", "## The two commands", "## A plan, end to end", "## Where the docs are"] {
        assert!(readme.contains(&format!("\n{section}\n")), "README has {section}");
    }
    let table = &readme[readme.find("## Why each dependency is here").expect("the dependency table")..];
    let listed: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .flat_map(|cell| cell.split([',', ' ', '(', ')']).map(str::to_string).collect::<Vec<_>>())
        .collect();
    let deps = dependency_names();
    assert!(deps.len() > 25 && deps.contains("rusqlite") && deps.contains("rcgen"), "{deps:?}");
    let missing: Vec<_> = deps.into_iter().filter(|d| !listed.contains(d)).collect();
    assert!(missing.is_empty(), "README's dependency table lacks {missing:?}");

    let command = "bash .ci/test";
    assert!(readme.contains(&format!("\n{command} ")), "the README's test command is `{command}`");
    let ci = fs::read_to_string(repo_root().join(".ci/run")).unwrap();
    // As a line of its own, or the command of one of its timed parts.
    let runs = |l: &str| l.trim() == command || l.trim().ends_with(&format!(" {command}"));
    assert!(ci.lines().any(runs), ".ci/run runs the README's test command");
    // What moved out is there: the performance log, the store's pages.
    let bench = fs::read_to_string(repo_root().join("bench/README.md")).unwrap();
    assert!(bench.contains("## The performance log") && bench.contains("### A provider process, counted"));
    for (page, heading) in [
        ("store.md", "## A damaged store"),
        ("store.md", "## `engine verify`"),
        ("guarantees.md", "## Behaviour in detail"),
        ("limits.md", "| plan file | 256 MiB"),
        ("testing.md", "## Reliability tests"),
        ("tour.md", "## The demo: run → explain → repair → satisfied"),
    ] {
        assert!(doc(page).contains(heading), "docs/{page} holds {heading}");
    }
}

/// `n` as docs write it: `994`, `2,949`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Issue 39: docs/testing.md quotes the last CI figure, never another.
/// `.ci/run` writes the date, wall time, head and verdict of each run,
/// passed or failed, into `.ci/last-run.json` (committed with the page):
/// the page's "Last measured" paragraph names that date, that head and
/// that wall time, and says "failed" of a run that failed (a failed run is
/// measured too: the page once quoted an older passing run of 994 s while
/// CI's last run had taken 1,578 s).
#[test]
fn the_ci_figure_in_testing_md_is_the_last_measured() {
    let last: Value =
        serde_json::from_str(&fs::read_to_string(repo_root().join(".ci/last-run.json")).unwrap()).unwrap();
    let measured = last["measured"].as_str().expect("the date .ci/run measured");
    let wall = last["wall_seconds"].as_u64().expect("its wall time");
    let passed = last["passed"].as_bool().expect("whether every part passed");
    let head = last["head"].as_str().expect("the head it ran");
    let page = doc("testing.md");
    let lead = "Last measured: a run of `.ci/run` on ";
    let at = page.find(lead).expect("docs/testing.md quotes the last CI figure") + lead.len();
    let quoted = page.get(at..at + 10).expect("a date");
    assert_eq!(quoted, measured, "docs/testing.md quotes the CI run of {quoted}, not the one .ci/run measured last");
    let paragraph = page[at..].split("\n\n").next().unwrap_or_default().replace('\n', " ");
    let said = paragraph.split(". The ").next().unwrap_or_default();
    let took = format!("took {} s", thousands(wall));
    assert!(said.contains(&took), "docs/testing.md's CI figure of {quoted} is not the {took} measured: {said}");
    assert!(said.contains(&format!("head {head}")), "docs/testing.md does not name the run's head {head}: {said}");
    assert_eq!(said.contains("failed"), !passed, "docs/testing.md's CI figure says passed/failed wrongly: {said}");
    assert_eq!(
        (thousands(994), thousands(2949), thousands(1_000_000)),
        ("994".into(), "2,949".into(), "1,000,000".into())
    );
}
