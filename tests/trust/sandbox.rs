//! Every process the engine starts runs in the sandbox: it writes its
//! workspace, never the store (nor anything outside what the plan opens).

use serde_json::{json, Value};

use crate::support::ledger::row_digest;
use crate::support::workspace::arg;
use crate::support::*;

/// An agent-json agent that, besides its work (`inside.txt`), tries to
/// forge an approval: an SQL insert into the store, a plain append to the
/// store file, a file outside the workspace. It writes what each attempt
/// gave to `$SIDE/forge.json` and the call it got to `$SIDE/stdin.json`.
const FORGER: &str = r#"
import json, os, sqlite3, sys
store, outside, mode = sys.argv[1], sys.argv[2], sys.argv[3]
call = sys.stdin.read()
side = os.environ["SIDE"]
open(os.path.join(side, "stdin.json"), "w").write(call)
got = {}
def attempt(name, f):
    try:
        f()
        got[name] = "ok"
    except Exception as e:
        got[name] = "%s: %s" % (type(e).__name__, e)
def sql():
    c = sqlite3.connect(store, timeout=1)
    info = [r for r in c.execute("PRAGMA table_info(approvals)") if r[1] != "id"]
    cols = [r[1] for r in info]
    vals = [(1 if r[2] == "INTEGER" else "forged") if r[3] else None for r in info]
    c.execute("INSERT INTO approvals (%s) VALUES (%s)" % (",".join(cols), ",".join("?" * len(cols))), vals)
    c.commit()
attempt("sql", sql)
if mode == "all":
    attempt("append", lambda: open(store, "a").write("forged"))
attempt("outside", lambda: open(outside, "w").write("escaped"))
attempt("inside", lambda: open("inside.txt", "w").write("work"))
json.dump(got, open(os.path.join(side, "forge.json"), "w"))
print(json.dumps({"status": "done", "summary": "did the work", "claimed_cause": None}))
"#;

fn forger_plan(ws: &Ws, outside: &std::path::Path, mode: &str, sandbox: Option<Value>) -> Value {
    let mut agent = json!({"kind": "command", "protocol": "agent-json", "env": ["SIDE"]});
    if let Some(s) = sandbox {
        agent["sandbox"] = s;
    }
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "the work is done", "acceptance": []},
        "providers": {"agent": agent},
        "tasks": [{"ref": "T1", "title": "work", "provider": "agent", "effect": "local",
                   "action": {"run": ["python3", "-c", FORGER, arg(&ws.store()), arg(outside), mode]},
                   "outputs": ["inside.txt"]}],
    })
}

fn forge_result(ws: &Ws) -> Value {
    serde_json::from_str(&std::fs::read_to_string(ws.side.join("forge.json")).unwrap()).unwrap()
}

/// Refused: by the sandbox's file rules, or because the store is not even
/// there for a provider (its folder is hidden: `No such file`).
fn denied(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    ["Permission denied", "readonly", "unable to open", "No such file"].iter().any(|w| s.contains(w))
}

/// The issue's forger: with the store already holding a goal, an agent's
/// SQL insert, append and outside write all fail with a permission error,
/// its workspace write succeeds, and the store's rows are as the engine
/// wrote them (no approval, the act chain empty, `engine verify` clean).
#[test]
fn a_provider_cannot_write_the_store_or_outside_but_writes_its_workspace() {
    let ws = Ws::new();
    let outside = ws.state_home().join("outside.txt");
    ws.write_plan("plan.json", &forger_plan(&ws, &outside, "all", None));
    // A first run makes the store; the agent runs against it.
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(0, None);
    let got = forge_result(&ws);
    for what in ["sql", "append", "outside"] {
        assert!(denied(&got[what]), "{what} was not refused by the sandbox: {got}");
    }
    assert_eq!(got["inside"], "ok", "{got}");
    assert_eq!(ws.read("inside.txt"), "work");
    assert!(!outside.exists(), "nothing was written outside the workspace");
    assert!(ws.ledger().approvals().is_empty(), "no approval was forged");
    let before = row_digest(&ws.store());
    ws.engine(&["verify"]).expect_code(0);
    assert_eq!(row_digest(&ws.store()), before);
    // What was recorded: enforced, on the attempt.
    let status = ws.json(&["status"], 0);
    assert_eq!(status["store"], json!(arg(&ws.store())), "{status}");
    let sandbox = &status["tasks"][0]["last_attempt"]["sandbox"];
    assert_eq!(sandbox["state"], "enforced", "{status}");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("sandbox: enforced (Landlock ABI"), "{}", explain.stdout);
}

/// The same agent unconfined (the kernel as if without Landlock): its
/// insert reaches the store — which is why the sandbox matters — and the
/// act chain then names the forged row; `engine verify` fails on it.
#[test]
fn without_the_sandbox_the_forgery_lands_and_the_chain_names_it() {
    let ws = Ws::new();
    let outside = ws.state_home().join("outside.txt");
    ws.write_plan("plan.json", &forger_plan(&ws, &outside, "sql", None));
    let out = ws.engine_env(&["run", "plan.json", "--json"], &[("ENGINE_SANDBOX", "unavailable")]);
    out.expect(0, None);
    assert_eq!(out.stderr.matches("provider sandbox is unavailable").count(), 1, "said once: {}", out.stderr);
    // Issue 37, item 6: the notice said Landlock was "not enabled at boot"
    // on a machine where it is. It says what is so: a simulation, and what
    // this kernel really has.
    assert!(!out.stderr.contains("not enabled at boot"), "{}", out.stderr);
    assert!(out.stderr.contains("simulated by ENGINE_SANDBOX=unavailable"), "{}", out.stderr);
    if let providers::sandbox::Kernel::Landlock { abi } = providers::sandbox::kernel() {
        assert!(out.stderr.contains(&format!("this kernel has Landlock ABI {abi}")), "{}", out.stderr);
    }
    let got = forge_result(&ws);
    assert_eq!(got["sql"], "ok", "unconfined, the insert lands: {got}");
    assert_eq!(got["outside"], "ok", "{got}");
    let a = ws.ledger().approvals();
    assert_eq!(a.len(), 1, "the forged row is there");
    let status = ws.json(&["status"], 0);
    let recorded = &status["tasks"][0]["last_attempt"]["sandbox"];
    assert_eq!(recorded["state"], "unavailable", "{status}");
    assert_eq!(recorded["reason"], "simulated", "recorded as what it was: {status}");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("sandbox: unavailable"), "{}", explain.stdout);
    assert!(!explain.stdout.contains("not enabled at boot"), "{}", explain.stdout);
    let verify = ws.engine_json(&["verify"]);
    assert_ne!(verify.code(), 0, "{}", verify.describe());
    assert!(verify.stdout.contains(&format!("approvals row {}", a[0].id.get())), "{}", verify.describe());
}

/// `"sandbox": "none"` is the plan's word: the provider runs unconfined,
/// and every attempt records and shows it.
#[test]
fn sandbox_none_is_recorded_and_shown() {
    let ws = Ws::new();
    let outside = ws.state_home().join("outside.txt");
    ws.write_plan("plan.json", &forger_plan(&ws, &outside, "sql", Some(json!("none"))));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    assert_eq!(forge_result(&ws)["outside"], "ok");
    let status = ws.json(&["status"], 0);
    assert_eq!(status["tasks"][0]["last_attempt"]["sandbox"]["state"], "disabled", "{status}");
    let explain = ws.engine(&["explain", "T1"]);
    assert!(explain.stdout.contains("sandbox: disabled by the plan"), "{}", explain.stdout);
}

/// A declared path is writable, and only that one.
#[test]
fn a_declared_write_path_is_opened_and_nothing_else() {
    let ws = Ws::new();
    let cache = ws.state_home().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let outside = cache.join("outside.txt");
    ws.write_plan("plan.json", &forger_plan(&ws, &outside, "all", Some(json!({"write": [arg(&cache)]}))));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    let got = forge_result(&ws);
    assert_eq!(got["outside"], "ok", "{got}");
    assert!(denied(&got["sql"]) && denied(&got["append"]), "{got}");
}

/// A store inside the workspace (or the temporary folder) could be written
/// by a provider: refused before anything is made or run, naming both.
#[test]
fn a_store_inside_a_writable_path_is_refused() {
    let ws = Ws::new();
    ws.write_plan(
        "plan.json",
        &json!({
        "version": 1, "goal": {"id": "g", "statement": "s", "acceptance": []},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "effect": "none",
                   "action": {"run": ["sh", "-c", "echo ran > ran.txt"]}}]}),
    );
    let inside = ws.path("db/engine.db");
    for (args, env) in [
        (vec!["run", "plan.json", "--store", arg(&inside)], None),
        (vec!["run", "plan.json"], Some(("ENGINE_STORE", arg(&inside)))),
    ] {
        let out = match env {
            Some(e) => ws.engine_env(&args, &[e]),
            None => ws.engine(&args),
        };
        out.expect_code(2);
        assert!(out.stderr.contains(arg(&ws.dir)) && out.stderr.contains(arg(&inside)), "{}", out.stderr);
        assert!(!ws.path("db").exists(), "nothing was made");
        assert!(!ws.path("ran.txt").exists(), "nothing ran");
    }
}

/// An old store inside the workspace is never used on its own: the engine
/// says where it is and how to use it on purpose.
#[test]
fn an_old_store_in_the_workspace_is_named_not_used() {
    let ws = Ws::new();
    std::fs::create_dir(ws.path(".engine")).unwrap();
    std::fs::write(ws.path(".engine/engine.db"), b"").unwrap();
    let out = ws.engine(&["status"]);
    out.expect_code(2);
    assert!(out.stderr.contains(".engine/engine.db") && out.stderr.contains("--store"), "{}", out.stderr);
}

/// The agent is told its authority on stdin.
#[test]
fn the_agent_is_told_its_authority() {
    let ws = Ws::new();
    let outside = ws.state_home().join("outside.txt");
    ws.write_plan("plan.json", &forger_plan(&ws, &outside, "sql", None));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    let call: Value = serde_json::from_str(&std::fs::read_to_string(ws.side.join("stdin.json")).unwrap()).unwrap();
    let authority = &call["authority"];
    assert_eq!(authority["claims_authority"], "external_ai_message", "{call}");
    assert!(authority["how_they_happen"].as_str().unwrap().contains("only a person"), "{authority}");
}

/// A declared write path that holds the store would open it to the
/// provider: the plan is refused at that path, by `check` as by `run`,
/// before anything runs.
#[test]
fn a_declared_write_path_around_the_store_is_refused() {
    let ws = Ws::new();
    let outside = ws.state_home().join("outside.txt");
    let around = ws.state_home();
    ws.write_plan(
        "plan.json",
        &forger_plan(&ws, &outside, "sql", Some(json!({"write": ["/nonexistent-ok", arg(&around)]}))),
    );
    for args in [&["check", "plan.json"][..], &["run", "plan.json"]] {
        let out = ws.engine_json(args);
        out.expect(2, Some("SANDBOX_RULE_REFUSED"));
        assert_eq!(out.json()["error"]["place"], "$.providers.agent.sandbox.write[1]", "{}", out.describe());
    }
    assert!(!ws.side.join("forge.json").exists(), "nothing ran");
}

/// An MCP server is started by the run's tool listing, before the first
/// intent, and the run's calls then go to it: it runs in its provider's
/// sandbox (a declared write path open, anything else outside closed), not
/// in the narrower one of acceptance checks.
#[test]
fn an_mcp_server_started_to_list_its_tools_runs_in_its_providers_sandbox() {
    let ws = Ws::new();
    let cache = ws.state_home().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let (opened, closed) = (cache.join("started.txt"), ws.state_home().join("closed.txt"));
    let script = format!(
        "{{ echo started >> {}; }} 2>/dev/null; {{ echo escaped > {}; }} 2>/dev/null; exec \"$@\"",
        sh_quote(&opened),
        sh_quote(&closed)
    );
    let mut command = vec!["sh".to_string(), "-c".into(), script, "sh".into()];
    command.extend(mcp_server_command(&ws.mcp_log(), &[]));
    let provider = json!({"kind": "mcp", "command": command, "sandbox": {"write": [arg(&cache)]}});
    let task = crate::common::mcp_task("T1", "render", "local");
    ws.write_plan("plan.json", &crate::common::plan("g", json!({"tools": provider}), vec![task]));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);

    let inventory = ws.events_of("tool_inventory");
    assert_eq!(inventory.len(), 1, "{inventory:?}");
    assert!(inventory[0].2["tools"]["render"].is_string(), "the listing reached the server: {inventory:?}");
    let started = std::fs::read_to_string(&opened).expect("the declared path is writable to the server");
    assert_eq!(started.lines().count(), 1, "one server, started by the listing, took the call too");
    assert!(!closed.exists(), "the server could write outside what its provider opens");
    assert_eq!(ws.mcp_deliveries().len(), 1, "the call went to it");
}

/// The cgroup file systems mounted here (`cgroup2` or `cgroup`), from
/// `/proc/self/mountinfo`.
fn cgroup_mounts() -> Vec<std::path::PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| l.split_once(" - "))
        .filter(|(_, right)| matches!(right.split_whitespace().next(), Some("cgroup2" | "cgroup")))
        .filter_map(|(left, _)| left.split_whitespace().nth(4).map(std::path::PathBuf::from))
        .collect()
}

/// Issue 37, item 5: a plan granting `"sandbox": {"write": ["/sys/fs/cgroup"]}`
/// let a provider's child move itself out of its cgroup and outlive the
/// run (exit 0); `engine check` passed a plan whose write path covered the
/// store, which `run` then refused. A write rule that covers or lies
/// inside a cgroup tree, the store's folder or the engine's state (every
/// workspace's store, the OAuth tokens) is now `SANDBOX_RULE_REFUSED` from
/// `check` and `run` alike, naming the rule at its JSON path; nothing runs.
#[test]
fn write_rules_over_cgroups_stores_or_the_engines_state_are_refused_by_check_and_run() {
    let ws = Ws::new();
    let ran = ws.side.join("ran");
    let mut rules: Vec<(std::path::PathBuf, &str)> = Vec::new();
    match cgroup_mounts().first() {
        Some(mount) => {
            let top = mount.ancestors().find(|a| a.parent() == Some(std::path::Path::new("/sys/fs"))).unwrap_or(mount);
            rules.push((top.to_path_buf(), "cgroup"));
            rules.push((mount.join("engine-escape"), "cgroup"));
        }
        None => eprintln!("no cgroup file system here: the cgroup rules are not tried"),
    }
    rules.push((ws.store_dir(), "store's folder"));
    rules.push((ws.state_home(), "engine's state"));
    rules.push((ws.state_home().join("engine").join("oauth"), "engine's state"));
    for (rule, words) in rules {
        let escape = format!(
            "echo $$ > {0}/cgroup.procs 2>/dev/null; (setsid sh -c 'sleep 2; touch {1}' &); touch {1}",
            rule.display(),
            ran.display()
        );
        let plan = json!({"version": 1, "goal": {"id": "g", "statement": "s"},
            "providers": {"sh": {"kind": "command", "sandbox": {"write": [arg(&ws.side), arg(&rule)]}}},
            "tasks": [{"ref": "T1", "provider": "sh", "effect": "local", "action": {"run": ["sh", "-c", escape]}}]});
        ws.write_plan("plan.json", &plan);
        for args in [&["check", "plan.json"][..], &["run", "plan.json"]] {
            let out = ws.engine_json(args);
            out.expect(2, Some("SANDBOX_RULE_REFUSED"));
            let err = &out.json()["error"];
            assert_eq!(err["place"], "$.providers.sh.sandbox.write[1]", "{}: {}", rule.display(), out.describe());
            let message = err["message"].as_str().unwrap_or_default();
            assert!(message.contains(&rule.display().to_string()), "names the rule: {message}");
            assert!(message.contains(words), "{}: says what it covers ({words}): {message}", rule.display());
        }
        assert!(!ran.exists(), "{}: nothing ran", rule.display());
    }
}
