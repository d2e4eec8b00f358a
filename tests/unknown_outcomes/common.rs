//! Helpers for the unknown-outcome tests: a temp workspace per test, the
//! engine binary run as a separate process, the receiver fixture started
//! on a free port with its own delivery log, and direct reads (and, where a
//! test simulates something, writes) of the engine's SQLite store.

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Value};
use tempfile::TempDir;

pub const ENGINE: &str = env!("CARGO_BIN_EXE_engine");

/// No engine call in these tests should take anywhere near this long.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(60);

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("engine/ has a parent").to_path_buf()
}

/// Poll `f` until it returns `Some`, or panic after `limit` naming `what`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ------------------------------------------------------------ receiver

/// The receiver fixture (`fixtures/receiver/receiver.py`): a real HTTP
/// service whose delivery log is the ground truth of what was delivered.
pub struct Receiver {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
    _dir: TempDir,
}

impl Receiver {
    /// Start it with extra flags (`--observe`, `--dedupe`).
    pub fn start(flags: &[&str]) -> Receiver {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("deliveries.jsonl");
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(repo_root().join("fixtures/receiver/receiver.py"))
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the receiver fixture");
        let mut r = Receiver { child, port: 0, log, _dir: dir };
        r.port = wait_for(Duration::from_secs(10), "the receiver's port file", || {
            std::fs::read_to_string(&port_file).ok().and_then(|s| s.trim().parse().ok())
        });
        r
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every delivery in the receiver's own log, in order.
    pub fn deliveries(&self) -> Vec<Value> {
        read_json_lines(&self.log)
    }

    pub fn deliveries_of(&self, key: &str) -> Vec<Value> {
        self.deliveries().into_iter().filter(|d| d["key"] == key).collect()
    }

    /// The `Engine-Try` of each delivery of `key`, in order.
    pub fn tries_of(&self, key: &str) -> Vec<i64> {
        self.deliveries_of(key).iter().map(|d| d["try"].as_i64().expect("try is a number")).collect()
    }

    /// Wait until the log holds at least `n` deliveries of `key` (a killed
    /// client's request may still be on its way through the receiver).
    pub fn wait_deliveries(&self, key: &str, n: usize) -> Vec<Value> {
        wait_for(Duration::from_secs(5), &format!("{n} deliveries of {key}"), || {
            let d = self.deliveries_of(key);
            (d.len() >= n).then_some(d)
        })
    }

    /// `POST /_control` (see the fixture's README).
    pub fn control(&self, doc: Value) {
        let (status, body) = http(self.port, "POST", "/_control", Some(&doc.to_string()), &[]);
        assert_eq!(status, 200, "control refused: {body}");
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 exchange on loopback: (status, body).
pub fn http(port: u16, method: &str, path: &str, body: Option<&str>, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.unwrap_or("");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

// ------------------------------------------------------------ workspace

/// One workspace (temp dir) with `plan.json` and the store under `.engine/`.
pub struct Ws {
    dir: TempDir,
    runs: AtomicUsize,
}

/// What one engine process did.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Killed by SIGKILL (a failpoint, or a test's kill): the shell's 137.
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(libc::SIGKILL)
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not one JSON document ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }

    /// The stable code of the stop: a run report's `code`, or an error's.
    pub fn stop_code(&self) -> Option<String> {
        let j = self.json();
        j.get("code").or_else(|| j.get("error").and_then(|e| e.get("code"))).and_then(Value::as_str).map(str::to_string)
    }

    pub fn describe(&self) -> String {
        format!("status {:?}\nstdout:\n{}\nstderr:\n{}", self.status, self.stdout, self.stderr)
    }

    /// Assert the exit code (and, when given, the stable code in `--json`).
    #[track_caller]
    pub fn expect(&self, exit: i32, code: Option<&str>) -> &Self {
        assert_eq!(self.code(), Some(exit), "exit code\n{}", self.describe());
        if let Some(c) = code {
            assert_eq!(self.stop_code().as_deref(), Some(c), "stable code\n{}", self.describe());
        }
        self
    }
}

impl Ws {
    pub fn new() -> Ws {
        Ws { dir: tempfile::tempdir().expect("tempdir"), runs: AtomicUsize::new(0) }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn plan_path(&self) -> PathBuf {
        self.path().join("plan.json")
    }

    pub fn db_path(&self) -> PathBuf {
        self.path().join(".engine/engine.db")
    }

    pub fn write_plan(&self, plan: &Value) {
        std::fs::write(self.plan_path(), serde_json::to_string_pretty(plan).unwrap()).unwrap();
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// The engine command, in the workspace, with `--json`, and without any
    /// `ENGINE_*` variable the test process might carry.
    pub fn command(&self, args: &[&str], failpoint: Option<&str>) -> (Command, PathBuf, PathBuf) {
        let n = self.runs.fetch_add(1, Ordering::SeqCst);
        let out = self.path().join(format!(".out-{n}"));
        let err = self.path().join(format!(".err-{n}"));
        let mut cmd = Command::new(ENGINE);
        cmd.current_dir(self.path()).arg("--json").args(args).stdin(Stdio::null());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ENGINE_") {
                cmd.env_remove(k);
            }
        }
        if let Some(fp) = failpoint {
            cmd.env("ENGINE_FAILPOINT", fp);
        }
        cmd.stdout(File::create(&out).unwrap()).stderr(File::create(&err).unwrap());
        (cmd, out, err)
    }

    pub fn engine(&self, args: &[&str]) -> Out {
        self.engine_with(args, None)
    }

    pub fn engine_with(&self, args: &[&str], failpoint: Option<&str>) -> Out {
        let (mut cmd, out, err) = self.command(args, failpoint);
        let child = cmd.spawn().expect("engine starts");
        finish(child, &out, &err)
    }

    /// `engine run plan.json --jobs 1`.
    pub fn run(&self) -> Out {
        self.engine(&["run", "plan.json", "--jobs", "1"])
    }

    pub fn run_fp(&self, failpoint: &str) -> Out {
        self.engine_with(&["run", "plan.json", "--jobs", "1"], Some(failpoint))
    }

    /// Start `engine run` and return at once (for kills from outside).
    pub fn spawn_run(&self) -> Running {
        let (mut cmd, out, err) = self.command(&["run", "plan.json", "--jobs", "1"], None);
        Running { child: Some(cmd.spawn().expect("engine starts")), out, err }
    }

    pub fn db(&self) -> Connection {
        let c = Connection::open(self.db_path()).expect("store opens");
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    }

    // -- store reads -----------------------------------------------------

    pub fn op_of(&self, task_ref: &str) -> String {
        self.db()
            .query_row("SELECT operation_id FROM tasks WHERE task_ref = ?1", [task_ref], |r| r.get(0))
            .expect("task in the store")
    }

    pub fn task_state(&self, task_ref: &str) -> String {
        self.db()
            .query_row("SELECT state FROM tasks WHERE task_ref = ?1 ORDER BY revision DESC LIMIT 1", [task_ref], |r| {
                r.get(0)
            })
            .expect("task in the store")
    }

    pub fn goal_state(&self) -> String {
        self.db().query_row("SELECT state FROM goals", [], |r| r.get(0)).expect("one goal")
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        let db = self.db();
        let mut st = db
            .prepare(
                "SELECT id, task_ref, operation_id, try_no, state, request_digest, intent_at_ms, generation, dispatched_at_ms,
                        unknown_reason, classification, kind FROM attempts ORDER BY id",
            )
            .unwrap();
        let rows = st
            .query_map([], |r| {
                let class: Option<String> = r.get(10)?;
                Ok(Attempt {
                    id: r.get(0)?,
                    task_ref: r.get(1)?,
                    operation_id: r.get(2)?,
                    try_no: r.get(3)?,
                    state: r.get(4)?,
                    request_digest: r.get(5)?,
                    intent_at_ms: r.get(6)?,
                    generation: r.get(7)?,
                    dispatched_at_ms: r.get(8)?,
                    unknown_reason: r.get(9)?,
                    classification: class.map(|c| serde_json::from_str(&c).unwrap()),
                    kind: r.get(11)?,
                })
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    pub fn attempts_of(&self, task_ref: &str) -> Vec<Attempt> {
        self.attempts().into_iter().filter(|a| a.task_ref == task_ref).collect()
    }

    /// Every event as (seq, kind, attempt id, data).
    pub fn events(&self) -> Vec<(i64, String, Option<i64>, String)> {
        let db = self.db();
        let mut st = db.prepare("SELECT seq, kind, attempt_id, data FROM events ORDER BY seq").unwrap();
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    pub fn event_kinds(&self) -> Vec<String> {
        self.events().into_iter().map(|e| e.1).collect()
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.db().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    pub fn receipt_of(&self, attempt_id: i64) -> Option<Value> {
        self.db()
            .query_row("SELECT data FROM receipts WHERE attempt_id = ?1", [attempt_id], |r| r.get::<_, String>(0))
            .optional()
            .unwrap()
            .map(|d| serde_json::from_str(&d).unwrap())
    }

    /// A fingerprint of everything a person-facing record holds, to show
    /// that a refused command wrote nothing.
    pub fn ledger_snapshot(&self) -> Value {
        let db = self.db();
        let dump = |sql: &str| -> Value {
            let mut st = db.prepare(sql).unwrap();
            let n = st.column_count();
            let rows = st
                .query_map([], |r| {
                    let mut row = Vec::new();
                    for i in 0..n {
                        let v: rusqlite::types::Value = r.get(i)?;
                        row.push(format!("{v:?}"));
                    }
                    Ok(row)
                })
                .unwrap();
            json!(rows.collect::<Result<Vec<_>, _>>().unwrap())
        };
        json!({
            "events": dump("SELECT * FROM events ORDER BY seq"),
            "attempts": dump("SELECT * FROM attempts ORDER BY id"),
            "tasks": dump("SELECT * FROM tasks ORDER BY goal_id, revision, task_ref"),
            "goals": dump("SELECT * FROM goals ORDER BY id"),
            "receipts": dump("SELECT * FROM receipts ORDER BY attempt_id"),
            "settlements": dump("SELECT * FROM settlements ORDER BY id"),
            "approvals": dump("SELECT * FROM approvals ORDER BY id"),
            "evidence": dump("SELECT * FROM evidence ORDER BY id"),
        })
    }
}

/// An attempt row, as the tests read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub id: i64,
    pub task_ref: String,
    pub operation_id: String,
    pub try_no: i64,
    pub state: String,
    pub request_digest: String,
    pub intent_at_ms: i64,
    pub generation: i64,
    pub dispatched_at_ms: Option<i64>,
    pub unknown_reason: Option<String>,
    pub classification: Option<Value>,
    pub kind: String,
}

impl Attempt {
    pub fn class(&self) -> Option<&str> {
        self.classification.as_ref().and_then(|c| c["class"].as_str())
    }
}

/// An engine started in the background.
pub struct Running {
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub fn sigkill(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(self.pid(), libc::SIGKILL);
        }
    }

    pub fn wait(mut self) -> Out {
        finish(self.child.take().unwrap(), &self.out, &self.err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn finish(mut child: Child, out: &Path, err: &Path) -> Out {
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > ENGINE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "engine did not finish within {ENGINE_TIMEOUT:?}; stderr:\n{}",
                std::fs::read_to_string(err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        status,
        stdout: std::fs::read_to_string(out).unwrap_or_default(),
        stderr: std::fs::read_to_string(err).unwrap_or_default(),
    }
}

// ------------------------------------------------------------ plans

/// A goal whose one acceptance check passes.
pub fn goal(id: &str) -> Value {
    json!({"id": id, "statement": "deliver the documents", "acceptance": [
        {"id": "A1", "statement": "the run completed", "check": {"run": ["true"], "expect_exit": 0}}
    ]})
}

/// The receiver as provider `r`, with or without its observation URL.
pub fn http_provider(rcv: &Receiver, observe: bool) -> Value {
    let mut p = json!({"kind": "http", "endpoint": format!("{}/render", rcv.base())});
    if observe {
        p["observe"] = json!(format!("{}/operations/{{operation_id}}", rcv.base()));
    }
    p
}

/// An HTTP task on provider `r` with one passing validation.
pub fn http_task(task_ref: &str, effect: &str) -> Value {
    json!({"ref": task_ref, "title": format!("deliver {task_ref}"), "provider": "r",
           "action": {"body": {"doc": task_ref}}, "effect": effect,
           "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})
}

pub fn plan(goal_id: &str, providers: Value, tasks: Vec<Value>) -> Value {
    json!({"version": 1, "goal": goal(goal_id), "providers": providers, "tasks": tasks})
}

/// A workspace with a one-task HTTP plan on `rcv`.
pub fn one_http_task(rcv: &Receiver, effect: &str, observe: bool, extra: Value) -> Ws {
    let ws = Ws::new();
    let mut task = http_task("T1", effect);
    if let Value::Object(m) = extra {
        for (k, v) in m {
            task[k] = v;
        }
    }
    ws.write_plan(&plan("docs", json!({"r": http_provider(rcv, observe)}), vec![task]));
    ws
}

impl Ws {
    /// A task's operation id as `engine digest` prints it (before any run).
    pub fn digest_op(&self, task_ref: &str) -> String {
        let out = self.engine(&["digest", "plan.json"]);
        out.expect(0, None);
        let j = out.json();
        let t = j["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == task_ref).expect("task in digest");
        t["operation_id"].as_str().unwrap().to_string()
    }

    /// Run a SQL statement against the store directly: a test simulating
    /// something the engine's own commands cannot stage.
    pub fn tamper(&self, sql: &str) -> usize {
        self.db().execute(sql, []).expect("tamper statement")
    }
}

/// A one-off HTTP service on loopback that answers every request with a
/// fixed status and body, and records each request's `Idempotency-Key` and
/// `Engine-Try` (for answers the receiver fixture cannot be scripted to give).
pub struct FakeHttp {
    pub port: u16,
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl FakeHttp {
    pub fn start(status_line: &'static str, body: String) -> FakeHttp {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let (mut key, mut try_no, mut len) = (String::new(), String::new(), 0usize);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(':') {
                        match k.to_ascii_lowercase().as_str() {
                            "idempotency-key" => key = v.trim().to_string(),
                            "engine-try" => try_no = v.trim().to_string(),
                            "content-length" => len = v.trim().parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                }
                let mut buf = vec![0u8; len];
                let _ = r.read_exact(&mut buf);
                log.lock().unwrap().push((key, try_no));
                let answer = format!(
                    "HTTP/1.1 {status_line}\r\nContent-Type: application/json\r\nRetry-After: 0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes());
            }
        });
        FakeHttp { port, seen }
    }

    pub fn requests(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

// ------------------------------------------------------------ MCP

/// The MCP fixture (`fixtures/mcp/server.py`) as provider `tools` of a plan
/// in `ws`, writing its delivery log to `ws/deliveries.jsonl`.
pub fn mcp_provider(ws: &Ws, flags: &[&str], observe: bool) -> Value {
    let mut command = vec![
        "python3".to_string(),
        repo_root().join("fixtures/mcp/server.py").to_string_lossy().into_owned(),
        "--log".to_string(),
        ws.mcp_log().to_string_lossy().into_owned(),
    ];
    command.extend(flags.iter().map(|f| f.to_string()));
    let mut p = json!({"kind": "mcp", "command": command});
    if observe {
        p["observe_tool"] = json!("operation_status");
    }
    p
}

/// An MCP task calling `tool` on provider `tools`, with one passing validation.
pub fn mcp_task(task_ref: &str, tool: &str, effect: &str) -> Value {
    json!({"ref": task_ref, "title": format!("{tool} {task_ref}"), "provider": "tools",
           "action": {"tool": tool, "arguments": {"doc": task_ref}}, "effect": effect,
           "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})
}

impl Ws {
    pub fn mcp_log(&self) -> PathBuf {
        self.path().join("deliveries.jsonl")
    }

    /// Every delivery in the MCP fixture's own log, in order.
    pub fn mcp_deliveries(&self) -> Vec<Value> {
        read_json_lines(&self.mcp_log())
    }

    /// Wait until the MCP log holds at least `n` deliveries (a killed
    /// engine's server may still be working through the call).
    pub fn wait_mcp_deliveries(&self, n: usize) -> Vec<Value> {
        wait_for(Duration::from_secs(10), &format!("{n} MCP deliveries"), || {
            let d = self.mcp_deliveries();
            (d.len() >= n).then_some(d)
        })
    }
}

/// A delivery log (one JSON document a line); empty when there is none yet.
pub fn read_json_lines(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect(),
        Err(_) => Vec::new(),
    }
}
