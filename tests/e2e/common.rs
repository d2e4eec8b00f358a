//! Helpers for end-to-end tests of the real `engine` binary: a temporary
//! workspace per test, running the binary with a deadline, reading `--json`
//! output, and looking into the store read-only.
//!
//! Every test gets its own temp dir (so tests are parallel-safe), and every
//! process a test starts is killed and reaped by a guard on drop (so a
//! failing test leaves nothing running).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use tempfile::TempDir;

/// The binary under test.
pub const ENGINE: &str = env!("CARGO_BIN_EXE_engine");

/// No single engine invocation in these tests should take longer.
pub const RUN_DEADLINE: Duration = Duration::from_secs(90);

/// The repository root (engine/ is the package folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("engine/ has a parent").to_path_buf()
}

/// What one engine invocation produced.
#[derive(Debug)]
pub struct Out {
    /// The exit code; `-signal` if the process died of a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The one JSON document `--json` prints on stdout.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not one JSON document ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }

    /// Assert the exit code, showing all output when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "exit code\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
}

/// A temporary workspace: `root` is the temp dir (logs, things outside the
/// workspace), `dir` = `root/ws` is the workspace the plans live in.
pub struct Ws {
    tmp: TempDir,
    pub dir: PathBuf,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

impl Ws {
    /// An empty workspace.
    pub fn empty() -> Ws {
        let tmp = tempfile::Builder::new().prefix("engine-e2e-").tempdir().expect("temp dir");
        let dir = tmp.path().join("ws");
        fs::create_dir(&dir).expect("create workspace");
        // Canonical, so paths the engine reports compare equal.
        let dir = dir.canonicalize().expect("canonical workspace");
        Ws { tmp, dir }
    }

    /// A workspace holding a copy of `fixtures/NAME` (never the source tree).
    pub fn fixture(name: &str) -> Ws {
        let ws = Ws::empty();
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

    /// The default store: `<workspace>/.engine/engine.db`.
    pub fn store_dir(&self) -> PathBuf {
        self.path(".engine")
    }

    pub fn store(&self) -> PathBuf {
        self.store_dir().join("engine.db")
    }

    /// A command for the engine, run in the workspace, with no inherited
    /// `ENGINE_*` variables (the test process may have some).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(ENGINE);
        cmd.args(args).current_dir(&self.dir);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("ENGINE_") {
                cmd.env_remove(&name);
            }
        }
        cmd.env("RUST_BACKTRACE", "1");
        cmd
    }

    /// Run the engine in the workspace and wait for it (with a deadline).
    pub fn engine(&self, args: &[&str]) -> Out {
        self.run(self.command(args))
    }

    /// Run a prepared command to completion, output captured via files (no
    /// pipe to fill up), killed if it overruns `RUN_DEADLINE`.
    pub fn run(&self, cmd: Command) -> Out {
        let mut running = self.spawn(cmd);
        running.wait(RUN_DEADLINE)
    }

    /// Start a prepared command in the background; its output goes to files
    /// in the temp dir (outside the workspace).
    pub fn spawn(&self, mut cmd: Command) -> Running {
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let out = self.root().join(format!("engine-{n}.stdout"));
        let err = self.root().join(format!("engine-{n}.stderr"));
        cmd.stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("stdout file"))
            .stderr(fs::File::create(&err).expect("stderr file"));
        let child = cmd.spawn().expect("start engine");
        Running { child: Some(child), out, err }
    }

    /// Start `engine ARGS` in the workspace in the background.
    pub fn spawn_engine(&self, args: &[&str]) -> Running {
        self.spawn(self.command(args))
    }

    /// Open the default store read-only.
    pub fn db(&self) -> Connection {
        open_ro(&self.store())
    }
}

/// Open a store read-only (never writes, never creates).
pub fn open_ro(path: &Path) -> Connection {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .unwrap_or_else(|e| panic!("open store {} read-only: {e}", path.display()));
    conn.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    conn
}

/// Like `open_ro`, but `None` while the store does not exist or is not
/// ready to read yet (for polling a store a running engine is creating).
pub fn try_open_ro(path: &Path) -> Option<Connection> {
    if !path.exists() {
        return None;
    }
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).ok()?;
    conn.busy_timeout(Duration::from_secs(2)).ok()?;
    Some(conn)
}

/// A background process, killed and reaped on drop if still running.
pub struct Running {
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().expect("running").try_wait(), Ok(None))
    }

    /// Wait for exit (killing it past `deadline`, which fails the test).
    pub fn wait(&mut self, deadline: Duration) -> Out {
        let mut child = self.child.take().expect("waited once");
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                break st;
            }
            if start.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "engine did not finish within {deadline:?}\nstdout:\n{}\nstderr:\n{}",
                    fs::read_to_string(&self.out).unwrap_or_default(),
                    fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        use std::os::unix::process::ExitStatusExt;
        let code = status.code().unwrap_or_else(|| -status.signal().unwrap_or(0));
        Out {
            code,
            stdout: fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }

    /// SIGKILL and reap (reaping matters: an unreaped zombie still "exists").
    pub fn kill9(&mut self) -> Out {
        let pid = self.pid() as libc::pid_t;
        // SAFETY: plain syscall on our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        self.wait(Duration::from_secs(10))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Kills a whole process group on drop (a provider's leftover tree after
/// the engine itself was killed).
pub struct GroupGuard(pub i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.0 > 1 {
            // SAFETY: plain syscall; negative pid = the process group.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
}

/// Is `pid` gone? Dead, or a zombie nobody reaped (in a container pid 1
/// may never reap orphans) — either way it runs no more.
pub fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().unwrap_or("").trim_start().starts_with(['Z', 'X']),
        Err(_) => true,
    }
}

/// Poll `f` every 20 ms until it returns `Some`, or `None` after `timeout`.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `dir` (relative path → bytes), to prove nothing in a
/// store folder was touched.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs::read_dir(dir).expect("read dir") {
            let entry = entry.expect("dir entry");
            let p = entry.path();
            let rel = p.strip_prefix(root).expect("under root").to_string_lossy().into_owned();
            let ft = entry.file_type().expect("file type");
            if ft.is_dir() {
                walk(root, &p, out);
            } else if ft.is_symlink() {
                out.insert(rel, format!("-> {}", fs::read_link(&p).expect("readlink").display()).into_bytes());
            } else {
                out.insert(rel, fs::read(&p).expect("read file"));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("dir entry");
        let name = entry.file_name();
        if name == ".engine" || name == "__pycache__" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().expect("file type").is_dir() {
            fs::create_dir_all(&dst).expect("create dir");
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).expect("copy file");
        }
    }
}

/// A minimal valid plan: goal `g`, one command provider `sh`, these tasks.
pub fn plan(tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "the e2e goal holds", "acceptance": [], "constraints": []},
        "providers": {"sh": {"kind": "command"}},
        "tasks": tasks,
    })
}

/// A command task with `effect: none` running `argv`.
pub fn task(task_ref: &str, argv: &[&str]) -> Value {
    json!({"ref": task_ref, "title": format!("task {task_ref}"), "provider": "sh",
           "action": {"run": argv}, "effect": "none"})
}

/// A shell snippet that waits (up to ~30 s) for the file `release` to
/// appear in the workspace: lets a test hold a task "running" exactly as
/// long as it needs, with no fixed sleeps.
pub const WAIT_FOR_RELEASE: &str = "i=0; while [ ! -e release ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done";

/// Events of `engine log --json`.
pub fn events(ws: &Ws) -> Vec<Value> {
    let out = ws.engine(&["log", "--json"]);
    out.expect_code(0);
    out.json()["events"].as_array().expect("events array").clone()
}

/// The store's attempts, oldest first: (id, task_ref, state, try_no).
pub fn attempts(conn: &Connection) -> Vec<(i64, String, String, i64)> {
    let mut stmt = conn.prepare("SELECT id, task_ref, state, try_no FROM attempts ORDER BY id").expect("prepare");
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).expect("query");
    rows.collect::<Result<_, _>>().expect("rows")
}

/// How many receipts the store holds for this attempt.
pub fn receipts_of(conn: &Connection, attempt_id: i64) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM receipts WHERE attempt_id = ?1", [attempt_id], |r| r.get(0))
        .expect("count receipts")
}

/// The pid in an attempt's `dispatch_detail` ("pid N").
pub fn dispatched_pid(conn: &Connection, attempt_id: i64) -> Option<i32> {
    let detail: Option<String> =
        conn.query_row("SELECT dispatch_detail FROM attempts WHERE id = ?1", [attempt_id], |r| r.get(0)).ok()?;
    detail?.strip_prefix("pid ")?.trim().parse().ok()
}
