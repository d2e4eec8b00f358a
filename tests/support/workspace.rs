//! A temporary workspace per test, and the engine run in it.
//!
//! Layout: `root()` is the temp dir (outputs, anything that must stay
//! outside the workspace); `dir` = `root/ws` is the workspace the plans
//! live in; `side` = `root/side` is where a test's providers write what
//! must never be a task input (call logs, stdin dumps; `$SIDE` in their
//! environment). The root is under the system's temporary folder, which
//! the provider sandbox lets providers write; so the engine's state folder
//! (`XDG_STATE_HOME`, where the store lives by default) is a second temp
//! dir where no provider may write: under cargo's target folder, or under
//! the user's state folder when the clone itself is under the temporary
//! folder ([`state_dir`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tempfile::TempDir;

use super::fixtures::{copy_tree, read_json_lines, repo_root};
use super::ledger::{self, Attempt, Ledger};
use super::process::{Out, Running, ENGINE, RUN_DEADLINE};

pub struct Ws {
    tmp: TempDir,
    state: TempDir,
    pub dir: PathBuf,
    pub side: PathBuf,
    runs: AtomicUsize,
    /// `ENGINE_TEST_STORE=postgres`: this workspace's ledger is a database
    /// of its own on the test process's PostgreSQL server (its URL).
    shared: Option<String>,
}

impl Ws {
    /// Whether this workspace's ledger is on PostgreSQL
    /// (`ENGINE_TEST_STORE=postgres`).
    pub fn on_shared_store(&self) -> bool {
        self.shared.is_some()
    }

    /// An empty workspace.
    pub fn new() -> Ws {
        Ws::with_state(state_dir())
    }

    /// An empty workspace whose state folder is `state`, a folder where
    /// the engine allows a store (outside every folder providers may
    /// write): one another OS user can reach, say (`os_users::Reachable`).
    pub fn with_state(state: TempDir) -> Ws {
        let tmp = tempfile::Builder::new().prefix("engine-test-").tempdir().expect("temp dir");
        Ws::in_root(tmp, state)
    }

    /// An empty workspace outside the temporary folder (cargo's target
    /// folder, `support::places::outside_temp`): there the sandbox can hold
    /// a task to its declared outputs (the temporary folder is writable
    /// whole). Its `side` folder is beside it, so providers cannot write it.
    pub fn outside_temp() -> Ws {
        let place = super::places::outside_temp(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let tmp = tempfile::Builder::new().prefix("engine-test-").tempdir_in(place).expect("temp dir");
        Ws::in_root(tmp, state_dir())
    }

    fn in_root(tmp: TempDir, state: TempDir) -> Ws {
        let dir = tmp.path().join("ws");
        let side = tmp.path().join("side");
        fs::create_dir(&dir).expect("create workspace");
        fs::create_dir(&side).expect("create side folder");
        // Canonical, so paths the engine reports compare equal.
        let dir = dir.canonicalize().expect("canonical workspace");
        let side = side.canonicalize().expect("canonical side folder");
        let shared = super::postgres::test_store_database();
        Ws { tmp, state, dir, side, runs: AtomicUsize::new(0), shared }
    }

    /// A workspace holding a copy of `fixtures/NAME` (never the source tree).
    pub fn fixture(name: &str) -> Ws {
        let ws = Ws::new();
        copy_tree(&repo_root().join("fixtures").join(name), &ws.dir);
        ws
    }

    /// The temp dir around the workspace (outside it).
    pub fn root(&self) -> PathBuf {
        self.tmp.path().canonicalize().expect("canonical temp dir")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("create parent");
        }
        fs::write(&p, contents).expect("write file");
        p
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// Write a plan (pretty JSON) at `rel` in the workspace.
    pub fn write_plan(&self, rel: &str, plan: &Value) -> PathBuf {
        self.write(rel, serde_json::to_string_pretty(plan).expect("plan serializes"))
    }

    /// The engine's state folder in this test (`XDG_STATE_HOME`).
    pub fn state_home(&self) -> PathBuf {
        self.state.path().canonicalize().expect("canonical state folder")
    }

    /// The default store's folder: the workspace's, in the state folder.
    pub fn store_dir(&self) -> PathBuf {
        self.store_dir_of(&self.dir)
    }

    /// The default store's folder of another (canonical) workspace folder
    /// run in this test's state folder.
    pub fn store_dir_of(&self, workspace: &Path) -> PathBuf {
        let stores = self.state_home().join("engine").join("stores");
        stores.join(engine::store::location::key(workspace))
    }

    /// The default store (what `engine status --json` reports as `store`).
    pub fn store(&self) -> PathBuf {
        if let Some(url) = &self.shared {
            return PathBuf::from(url);
        }
        self.store_dir().join("engine.db")
    }

    /// The default store of the workspace folder `rel` inside this one
    /// (a plan in a subfolder: its folder is its workspace).
    pub fn store_of(&self, rel: &str) -> PathBuf {
        let workspace = self.path(rel).canonicalize().expect("the workspace folder exists");
        self.store_dir_of(&workspace).join("engine.db")
    }

    /// A path for a store chosen with `--store` or `ENGINE_STORE`: outside
    /// the workspace and outside the temporary folder (where providers may
    /// write, so the engine refuses a store there).
    pub fn outside_store(&self, name: &str) -> PathBuf {
        self.state_home().join(name).join("engine.db")
    }

    /// The engine, run in the workspace, with no inherited `ENGINE_*`
    /// variable (the test process may have some), `$SIDE` set.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(ENGINE);
        cmd.args(args).current_dir(&self.dir);
        for (name, _) in std::env::vars_os() {
            // No inherited ENGINE_* variable, nor a trace the test process
            // happens to be part of: each test says what it exports.
            let n = name.to_string_lossy();
            if n.starts_with("ENGINE_") || n.starts_with("OTEL_") || n == "TRACEPARENT" {
                cmd.env_remove(&name);
            }
        }
        if let Some(url) = &self.shared {
            cmd.env("ENGINE_STORE", url);
        }
        cmd.env("SIDE", &self.side).env("PYTHONDONTWRITEBYTECODE", "1").env("RUST_BACKTRACE", "1");
        cmd.env("XDG_STATE_HOME", self.state_home());
        // The release binary recounts its budget counters after each run,
        // as a debug build does (docs/testing.md, testing aids).
        cmd.env("ENGINE_CHECK_COUNTERS", "1");
        cmd
    }

    /// `engine ARGS`, to completion (within `RUN_DEADLINE`).
    pub fn engine(&self, args: &[&str]) -> Out {
        self.run_command(self.command(args))
    }

    /// `engine verify` passes on the workspace's store (SQLite or PostgreSQL).
    pub fn verify(&self) {
        self.engine(&["--json", "verify"]).expect_code(0);
    }

    /// `engine --json ARGS`.
    pub fn engine_json(&self, args: &[&str]) -> Out {
        self.engine_fp(args, None)
    }

    /// `engine --json ARGS` with `ENGINE_FAILPOINT` set (when given).
    pub fn engine_fp(&self, args: &[&str], failpoint: Option<&str>) -> Out {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let mut cmd = self.command(&all);
        if let Some(fp) = failpoint {
            cmd.env("ENGINE_FAILPOINT", fp);
        }
        self.run_command(cmd)
    }

    /// `engine ARGS` with extra environment variables.
    pub fn engine_env(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.run_command(cmd)
    }

    /// `engine ARGS --json`, expecting exit `code`; returns the document.
    #[track_caller]
    pub fn json(&self, args: &[&str], code: i32) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let out = self.engine(&all);
        assert_eq!(out.code(), code, "engine {args:?}\n{}", out.describe());
        out.json()
    }

    /// `engine --json run plan.json --jobs 1`.
    pub fn run(&self) -> Out {
        self.engine_json(&["run", "plan.json", "--jobs", "1"])
    }

    /// The same, with a failpoint.
    pub fn run_fp(&self, failpoint: &str) -> Out {
        self.engine_fp(&["run", "plan.json", "--jobs", "1"], Some(failpoint))
    }

    /// Start `engine --json run plan.json --jobs 1` and return at once.
    pub fn spawn_run(&self) -> Running {
        self.spawn(self.command(&["--json", "run", "plan.json", "--jobs", "1"]))
    }

    /// Run a prepared command to completion, output captured via files (no
    /// pipe to fill up), killed if it overruns `RUN_DEADLINE`.
    pub fn run_command(&self, cmd: Command) -> Out {
        self.spawn(cmd).wait(RUN_DEADLINE)
    }

    /// Start a prepared command in the background; its output goes to files
    /// in the temp dir (outside the workspace).
    pub fn spawn(&self, mut cmd: Command) -> Running {
        let n = self.runs.fetch_add(1, Ordering::SeqCst);
        let out = self.root().join(format!("engine-{n}.stdout"));
        let err = self.root().join(format!("engine-{n}.stderr"));
        cmd.stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("stdout file"))
            .stderr(fs::File::create(&err).expect("stderr file"));
        Running::new(cmd.spawn().expect("start engine"), out, err)
    }

    /// Start `engine ARGS` in the workspace in the background.
    pub fn spawn_engine(&self, args: &[&str]) -> Running {
        self.spawn(self.command(args))
    }

    /// A task's operation id as `engine digest` prints it (before any run).
    pub fn digest_op(&self, task_ref: &str) -> String {
        let out = self.engine_json(&["digest", "plan.json"]);
        out.expect_code(0);
        let j = out.json();
        let t = j["tasks"].as_array().unwrap().iter().find(|t| t["ref"] == task_ref).expect("task in digest");
        t["operation_id"].as_str().unwrap().to_string()
    }

    /// Lines in the side call log (`$SIDE/calls.log`) naming `task_ref`:
    /// how many times its provider really ran.
    pub fn calls(&self, task_ref: &str) -> usize {
        fs::read_to_string(self.side.join("calls.log")).unwrap_or_default().lines().filter(|l| *l == task_ref).count()
    }

    /// The MCP fixture's delivery log of this workspace: beside it, not in
    /// it (a file a server writes in the workspace is its task's write, to
    /// declare).
    pub fn mcp_log(&self) -> PathBuf {
        self.side.join("deliveries.jsonl")
    }

    pub fn mcp_deliveries(&self) -> Vec<Value> {
        read_json_lines(&self.mcp_log())
    }

    /// Wait until the MCP log holds at least `n` deliveries (a killed
    /// engine's server may still be working through the call).
    pub fn wait_mcp_deliveries(&self, n: usize) -> Vec<Value> {
        super::wait_until(std::time::Duration::from_secs(10), &format!("{n} MCP deliveries"), || {
            let d = self.mcp_deliveries();
            (d.len() >= n).then_some(d)
        })
    }

    // -- the ledger, read through the engine's store interface ------------

    /// The default store, read-only.
    pub fn ledger(&self) -> Ledger {
        Ledger::open(&self.store())
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        self.ledger().attempts()
    }

    pub fn attempts_of(&self, task_ref: &str) -> Vec<Attempt> {
        self.ledger().attempts_of(task_ref)
    }

    pub fn attempt_count(&self) -> usize {
        self.attempts().len()
    }

    pub fn task(&self, revision: i64, task_ref: &str) -> (String, Value) {
        self.ledger().task(revision, task_ref)
    }

    pub fn task_state(&self, task_ref: &str) -> String {
        self.ledger().task_state(task_ref)
    }

    pub fn op_of(&self, task_ref: &str) -> String {
        self.ledger().op_of(task_ref)
    }

    pub fn goal_state(&self) -> String {
        self.ledger().goal_state()
    }

    pub fn events(&self) -> Vec<super::Event> {
        self.ledger().events()
    }

    pub fn event_kinds(&self) -> Vec<String> {
        self.ledger().event_kinds()
    }

    pub fn events_of(&self, kind: &str) -> Vec<(Option<String>, Option<i64>, Value)> {
        self.ledger().events_of(kind)
    }

    pub fn receipt_of(&self, attempt_id: i64) -> Option<Value> {
        self.ledger().receipt_of(attempt_id)
    }

    pub fn evidence(&self, attempt_id: i64) -> Vec<(i64, String, Value)> {
        self.ledger().evidence(attempt_id)
    }

    pub fn claims(&self, attempt_id: i64) -> Vec<(String, Value)> {
        self.ledger().claims(attempt_id)
    }

    /// Write the store directly, as something holding its file or its
    /// database credentials could (see `ledger::tamper`).
    pub fn tamper(&self, sql: &str) -> usize {
        if let Some(url) = &self.shared {
            return super::postgres::tamper_test_store(url, sql);
        }
        ledger::tamper(&self.store(), sql)
    }

    /// Events of `engine log --json`.
    pub fn log(&self) -> Vec<Value> {
        let out = self.engine(&["log", "--json"]);
        out.expect_code(0);
        out.json()["events"].as_array().expect("events array").clone()
    }
}

impl Default for Ws {
    fn default() -> Self {
        Ws::new()
    }
}

/// A state folder for one test (`XDG_STATE_HOME`), where the engine allows
/// a store: outside every folder a provider may write. The workspaces are
/// under the system's temporary folder, which providers may write, so the
/// state folder is elsewhere (`places::outside_temp`: cargo's target
/// folder, or the user's state folder when the clone itself is under the
/// temporary folder).
pub fn state_dir() -> TempDir {
    let place = super::places::outside_temp(Path::new(env!("CARGO_TARGET_TMPDIR")));
    tempfile::Builder::new().prefix("engine-state-").tempdir_in(place).expect("state temp dir")
}

/// `path` as a `&str` for argv.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}
