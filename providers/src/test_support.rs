//! Helpers shared by this crate's unit tests.

use std::time::Duration;

/// Dead or a zombie (pid 1 in a container may never reap it).
pub fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(true)
}

/// Wait up to `limit` for `pid` to be gone.
pub async fn wait_gone(pid: i32, limit: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gone(pid)
}
