//! Shared scaffolding: a throw-away workspace per test (never the source
//! tree), the real `engine` binary, and read-only access to its store.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

pub const ENGINE: &str = env!("CARGO_BIN_EXE_engine");

/// A temporary workspace. `root` is the plan's folder (the workspace);
/// `side` is a folder beside it for files a test's providers write that
/// must never be task inputs (call logs, stdin dumps).
pub struct Ws {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub side: PathBuf,
}

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The one JSON document `--json` prints.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not one JSON document ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
    /// For assertion messages.
    pub fn show(&self) -> String {
        format!("exit {}\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".engine" || name == "__pycache__" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

impl Ws {
    pub fn new() -> Ws {
        let tmp = tempfile::Builder::new().prefix("engine-flow-").tempdir().unwrap();
        let root = tmp.path().join("ws");
        let side = tmp.path().join("side");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&side).unwrap();
        Ws { _tmp: tmp, root, side }
    }

    /// A copy of `fixtures/NAME`.
    pub fn fixture(name: &str) -> Ws {
        let ws = Ws::new();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name);
        copy_dir(&src, &ws.root);
        ws
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.path(rel);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    pub fn write_plan(&self, name: &str, plan: &Value) {
        self.write(name, &serde_json::to_string_pretty(plan).unwrap());
    }

    /// Lines in the side call log written by `task`'s actions (see
    /// [`sh_task`]): how many times each task's provider really ran.
    pub fn calls(&self, task_ref: &str) -> usize {
        std::fs::read_to_string(self.side.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == task_ref)
            .count()
    }

    pub fn engine(&self, args: &[&str]) -> Out {
        self.engine_env(args, &[])
    }

    pub fn engine_env(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = Command::new(ENGINE);
        cmd.args(args)
            .current_dir(&self.root)
            .env_remove("ENGINE_STORE")
            .env_remove("ENGINE_FAILPOINT")
            .env("SIDE", &self.side)
            .env("PYTHONDONTWRITEBYTECODE", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("the engine binary runs");
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `engine ARGS --json`, expecting exit `code`; returns the document.
    pub fn json(&self, args: &[&str], code: i32) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let out = self.engine(&all);
        assert_eq!(out.code, code, "engine {args:?}\n{}", out.show());
        out.json()
    }

    /// The store, read-only.
    pub fn db(&self) -> Connection {
        let path = self.root.join(".engine/engine.db");
        Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
    }

    pub fn count(&self, sql: &str, params: impl rusqlite::Params) -> i64 {
        self.db().query_row(sql, params, |r| r.get(0)).unwrap()
    }

    /// Non-abandoned attempts of a task (all revisions).
    pub fn attempts(&self, task_ref: &str) -> Vec<Attempt> {
        let db = self.db();
        let mut stmt = db
            .prepare(
                "SELECT id, revision, kind, state, classification, reusable, checkpoint, instruction, operation_id, try_no
                 FROM attempts WHERE task_ref = ?1 ORDER BY id",
            )
            .unwrap();
        let rows = stmt
            .query_map([task_ref], |r| {
                let class: Option<String> = r.get(4)?;
                Ok(Attempt {
                    id: r.get(0)?,
                    revision: r.get(1)?,
                    kind: r.get(2)?,
                    state: r.get(3)?,
                    classification: class.map(|c| serde_json::from_str(&c).unwrap()),
                    reusable: r.get(5)?,
                    checkpoint: r.get(6)?,
                    instruction: r.get(7)?,
                    operation_id: r.get(8)?,
                    try_no: r.get(9)?,
                })
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    pub fn attempt_count(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM attempts", [])
    }

    /// (state, detail) of a task in a revision.
    pub fn task(&self, revision: i64, task_ref: &str) -> (String, Value) {
        self.db()
            .query_row(
                "SELECT state, detail FROM tasks WHERE revision = ?1 AND task_ref = ?2",
                rusqlite::params![revision, task_ref],
                |r| Ok((r.get::<_, String>(0)?, serde_json::from_str(&r.get::<_, String>(1)?).unwrap())),
            )
            .unwrap_or_else(|e| panic!("task {task_ref} r{revision}: {e}"))
    }

    pub fn goal_state(&self) -> String {
        self.db().query_row("SELECT state FROM goals", [], |r| r.get(0)).unwrap()
    }

    /// Events of a kind, in ledger order: (task_ref, attempt_id, data).
    pub fn events(&self, kind: &str) -> Vec<(Option<String>, Option<i64>, Value)> {
        let db = self.db();
        let mut stmt =
            db.prepare("SELECT task_ref, attempt_id, data FROM events WHERE kind = ?1 ORDER BY seq").unwrap();
        let rows = stmt
            .query_map([kind], |r| Ok((r.get(0)?, r.get(1)?, serde_json::from_str(&r.get::<_, String>(2)?).unwrap())))
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    /// Evidence rows of an attempt: (id, kind, data).
    pub fn evidence(&self, attempt_id: i64) -> Vec<(i64, String, Value)> {
        let db = self.db();
        let mut stmt = db.prepare("SELECT id, kind, data FROM evidence WHERE attempt_id = ?1 ORDER BY id").unwrap();
        let rows = stmt
            .query_map([attempt_id], |r| {
                Ok((r.get(0)?, r.get(1)?, serde_json::from_str(&r.get::<_, String>(2)?).unwrap()))
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    /// Claims of an attempt: (authority, data).
    pub fn claims(&self, attempt_id: i64) -> Vec<(String, Value)> {
        let db = self.db();
        let mut stmt = db.prepare("SELECT authority, data FROM claims WHERE attempt_id = ?1 ORDER BY id").unwrap();
        let rows = stmt
            .query_map([attempt_id], |r| Ok((r.get(0)?, serde_json::from_str(&r.get::<_, String>(1)?).unwrap())))
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: i64,
    pub revision: i64,
    pub kind: String,
    pub state: String,
    pub classification: Option<Value>,
    pub reusable: Option<bool>,
    pub checkpoint: Option<String>,
    pub instruction: Option<String>,
    pub operation_id: String,
    pub try_no: i64,
}

impl Attempt {
    pub fn class(&self) -> &str {
        self.classification.as_ref().and_then(|c| c["class"].as_str()).unwrap_or("")
    }
    pub fn rule(&self) -> &str {
        self.classification.as_ref().and_then(|c| c["rule"].as_str()).unwrap_or("")
    }
}

/// A plan with two command providers (`sh`, and `agent` speaking
/// agent-json), generous budgets, and the given tasks.
pub fn plan(goal_id: &str, tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": goal_id, "statement": format!("{goal_id}: the tasks are done"), "acceptance": [], "constraints": []},
        "budgets": {"max_attempts_per_task": 10, "max_revisions": 10, "max_provider_calls": 1000, "max_cost": 0, "deadline_seconds": 3600},
        "providers": {"sh": {"kind": "command"}, "agent": {"kind": "command", "protocol": "agent-json"}},
        "tasks": tasks,
    })
}

/// A local-effect `sh -c` task that first appends its ref to the side call
/// log (`Ws::calls`), then runs `script`.
pub fn sh_task(task_ref: &str, script: &str) -> Value {
    json!({
        "ref": task_ref, "title": format!("task {task_ref}"), "provider": "sh",
        "action": {"run": ["sh", "-c", format!("echo {task_ref} >> \"$SIDE/calls.log\"; {script}")]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [],
    })
}

/// A validation: `sh -c script`.
pub fn validation(id: &str, script: &str) -> Value {
    json!({"id": id, "run": ["sh", "-c", script], "expect_exit": 0})
}

/// Set a field of every task in `plan` whose ref is `task_ref`.
pub fn set(plan: &mut Value, task_ref: &str, field: &str, value: Value) {
    let task = plan["tasks"].as_array_mut().unwrap().iter_mut().find(|t| t["ref"] == task_ref).expect("task in plan");
    task[field] = value;
}

/// The decision of `task_ref` in `engine revise --json` output:
/// ("reuse", "") or ("run", REASON).
pub fn decision(revise: &Value, task_ref: &str) -> (String, String) {
    let d = revise["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["task_ref"] == task_ref)
        .unwrap_or_else(|| panic!("no decision for {task_ref} in {revise:#}"));
    let kind = d["decision"].as_str().unwrap().to_string();
    let reason = d["refusal"]["reason"].as_str().unwrap_or("").to_string();
    (kind, reason)
}

pub fn decision_detail(revise: &Value, task_ref: &str) -> Value {
    revise["decisions"].as_array().unwrap().iter().find(|d| d["task_ref"] == task_ref).cloned().unwrap()
}

/// A tiny agent-json agent: dumps its stdin to `$SIDE/stdin-<n>.json`,
/// logs its task ref to the call log, then reports according to MODE
/// (`python3 agent.py MODE REF`).
pub const AGENT_PY: &str = r#"import json, os, sys
mode, ref = sys.argv[1], sys.argv[2]
raw = sys.stdin.read()
side = os.environ["SIDE"]
n = len([f for f in os.listdir(side) if f.startswith("stdin-")]) + 1
open(os.path.join(side, "stdin-%d.json" % n), "w").write(raw)
open(os.path.join(side, "calls.log"), "a").write(ref + "\n")
request = json.loads(raw)
print("agent working on", request["task"]["ref"], "try", request["try"])
if mode == "done":
    print(json.dumps({"status": "done", "summary": "all tests pass now", "claimed_cause": None}))
elif mode == "blame-network":
    print(json.dumps({"status": "done", "summary": "done; any failure is the network", "claimed_cause": "the network was flaky"}))
elif mode == "failed-network":
    print(json.dumps({"status": "failed", "summary": "could not finish", "claimed_cause": "the network is down"}))
elif mode == "failed-network-exit1":
    print(json.dumps({"status": "failed", "summary": "could not finish", "claimed_cause": "the network is down"}))
    sys.exit(1)
elif mode == "garbage":
    print("I fixed everything, trust me")
elif mode == "no-status":
    print(json.dumps({"summary": "done", "claimed_cause": None}))
"#;

/// An agent task: `python3 agent.py MODE REF`.
pub fn agent_task(task_ref: &str, mode: &str) -> Value {
    json!({
        "ref": task_ref, "title": format!("agent {task_ref}"), "provider": "agent",
        "action": {"run": ["python3", "agent.py", mode, task_ref]},
        "effect": "local", "inputs": [], "depends_on": [], "validations": [],
    })
}

/// The stdin documents the agent received, in call order.
pub fn agent_stdins(ws: &Ws) -> Vec<Value> {
    let mut n = 1;
    let mut out = Vec::new();
    while let Ok(text) = std::fs::read_to_string(ws.side.join(format!("stdin-{n}.json"))) {
        out.push(serde_json::from_str(&text).unwrap());
        n += 1;
    }
    out
}
