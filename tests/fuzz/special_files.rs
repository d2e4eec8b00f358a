//! Plan paths that are not regular files: a FIFO, `/dev/zero` and
//! `/dev/urandom` must each be refused at once with `PLAN_INVALID` (a size
//! limit that reads the file's size sees 0 for these, so reading them would
//! wait for a writer forever or until memory runs out). The engine runs
//! under a 1 GiB address-space limit and a 5 s deadline, so a failure here
//! cannot take the machine with it.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::ENGINE;

const DEADLINE: Duration = Duration::from_secs(5);

/// (exit code, stdout) of `engine --json check PATH`, or `None` if it was
/// still running at the deadline (then killed).
fn check(path: &std::path::Path) -> Option<(Option<i32>, String)> {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(ENGINE);
    cmd.args(["--json", "check"]).arg(path).stdin(Stdio::null()).stdout(out.reopen().unwrap()).stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status.code(), std::fs::read_to_string(out.path()).unwrap_or_default()));
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Guards issue 9, defect 7: a FIFO or a device as the plan hung `check` or filled the memory.
#[test]
fn plans_that_are_not_regular_files_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("plan.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut failures = Vec::new();
    for path in [fifo.as_path(), "/dev/zero".as_ref(), "/dev/urandom".as_ref()] {
        match check(path) {
            // Refused for what it is, not after filling the memory limit.
            Some((Some(2), out)) if out.contains("PLAN_INVALID") && !out.contains("out of memory") => {}
            Some((code, out)) => failures.push(format!("{}: exit {code:?}: {out}", path.display())),
            None => failures.push(format!("{}: still running after {DEADLINE:?}", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
