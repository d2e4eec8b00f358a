//! Running the real `engine` binary (and other processes) with a deadline,
//! and what one run produced.

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test: the workspace's `engine`, built first when it is
/// not fresh, with the suite's own profile (`engine_suite::engine_binary`,
/// tests/suite/lib.rs). Use it as a path or a string (`Command::new(ENGINE)`,
/// `Path::new(ENGINE)`, `"{ENGINE}"`, `&*ENGINE`).
pub const ENGINE: &Engine = &Engine;

/// The binary under test (`ENGINE`), found on first use.
#[derive(Debug)]
pub struct Engine;

impl std::ops::Deref for Engine {
    type Target = str;
    fn deref(&self) -> &'static str {
        let path = engine_suite::engine_binary();
        path.to_str().unwrap_or_else(|| panic!("{} is not UTF-8", path.display()))
    }
}

impl AsRef<str> for Engine {
    fn as_ref(&self) -> &str {
        self
    }
}

impl AsRef<std::ffi::OsStr> for Engine {
    fn as_ref(&self) -> &std::ffi::OsStr {
        engine_suite::engine_binary().as_os_str()
    }
}

impl AsRef<std::path::Path> for Engine {
    fn as_ref(&self) -> &std::path::Path {
        engine_suite::engine_binary()
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl serde::Serialize for Engine {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

/// `path` as one word of a POSIX shell line (a test's `sh -c` script, a
/// `script -c` command): quoted, so that a clone or a folder whose name
/// holds a space or a quote is still one word.
pub fn sh_quote(path: impl AsRef<std::path::Path>) -> String {
    let text = path.as_ref().to_str().expect("a UTF-8 path");
    shlex::try_quote(text).expect("a path holds no NUL").into_owned()
}

/// No single engine invocation in these tests should take longer.
pub const RUN_DEADLINE: Duration = Duration::from_secs(90);

/// What one process produced.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The exit code; `-signal` if the process died of a signal.
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or_else(|| -self.status.signal().unwrap_or(0))
    }

    /// The exit code, `None` if the process died of a signal.
    pub fn exit(&self) -> Option<i32> {
        self.status.code()
    }

    /// Killed by SIGKILL (a failpoint, or a test's kill): the shell's 137.
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(libc::SIGKILL)
    }

    /// The one JSON document `--json` prints on stdout.
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

    /// For assertion messages.
    pub fn describe(&self) -> String {
        format!("exit {} ({:?})\n--- stdout\n{}\n--- stderr\n{}", self.code(), self.status, self.stdout, self.stderr)
    }

    /// Assert the exit code, showing all output when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code(), code, "exit code\n{}", self.describe());
        self
    }

    /// Assert the exit code and, when given, the stable code in `--json`.
    #[track_caller]
    pub fn expect(&self, exit: i32, code: Option<&str>) -> &Self {
        self.expect_code(exit);
        if let Some(c) = code {
            assert_eq!(self.stop_code().as_deref(), Some(c), "stable code\n{}", self.describe());
        }
        self
    }
}

/// A background process (its output going to files), killed and reaped on
/// drop if still running.
pub struct Running {
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    pub fn new(child: Child, out: PathBuf, err: PathBuf) -> Running {
        Running { child: Some(child), out, err }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// The file its stderr goes to (readable while it runs).
    pub fn stderr_path(&self) -> &std::path::Path {
        &self.err
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
                    "process did not finish within {deadline:?}\nstdout:\n{}\nstderr:\n{}",
                    fs::read_to_string(&self.out).unwrap_or_default(),
                    fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Out {
            status,
            stdout: fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }

    /// Delete the files its output went to (once read).
    pub fn remove_output(&self) {
        let _ = (fs::remove_file(&self.out), fs::remove_file(&self.err));
    }

    /// SIGKILL it (from outside, as a person or the OOM killer would).
    pub fn sigkill(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.pid(), libc::SIGKILL) };
    }

    /// SIGKILL and reap (reaping matters: an unreaped zombie still "exists").
    pub fn kill9(&mut self) -> Out {
        self.sigkill();
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

/// Like `wait_for`, but a timeout fails the test, naming `what`.
pub fn wait_until<T>(limit: Duration, what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_for(limit, f).unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}"))
}
