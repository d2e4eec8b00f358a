//! The engine run under `strace`: what a test counts (the workspace's
//! walks, the store's flushes) is what the kernel saw, not what the engine
//! says it did.

use std::process::Command;

use super::workspace::Ws;

/// `strace` must be there (.ci/test installs it): a test never skips.
pub fn strace() -> &'static str {
    let found = Command::new("strace").arg("-V").output().is_ok_and(|o| o.status.success());
    assert!(found, "strace is missing: .ci/test installs it (apt-get install strace)");
    "strace"
}

/// `engine ARGS` in `ws` under `strace -f -qq FILTER` (every process and
/// thread): it exits 0 and satisfies its goal; the trace's text.
pub fn traced_run(ws: &Ws, args: &[&str], filter: &[&str]) -> String {
    let engine = ws.command(args);
    let log = ws.root().join("strace.log");
    let mut cmd = Command::new(strace());
    cmd.args(["-f", "-qq"]).args(filter).arg("-o").arg(&log);
    cmd.arg(engine.get_program()).args(engine.get_args());
    cmd.current_dir(engine.get_current_dir().unwrap_or(std::path::Path::new(".")));
    for (k, v) in engine.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = ws.run_command(cmd);
    out.expect_code(0);
    assert_eq!(ws.goal_state(), "satisfied", "{}", out.describe());
    std::fs::read_to_string(&log).expect("strace's log")
}
