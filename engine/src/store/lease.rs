//! The single-writer lease, as the rest of the engine sees it: a [`Fence`]
//! (the right to write, checked by every transaction) and the [`Holder`]
//! it belongs to. A live holder means `STORE_LOCKED`; a holder whose
//! process is gone from this host is taken over (a new fence), and the
//! takeover is logged. What is stored where is the backend's business.

/// The right to write, obtained with the lease and checked inside every
/// transaction that uses it. On SQLite it is the store lease's generation;
/// a ledger shared by several workers gives one per claimed task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    generation: i64,
}

impl Fence {
    pub(super) fn new(generation: i64) -> Fence {
        Fence { generation }
    }

    pub fn generation(self) -> i64 {
        self.generation
    }
}

/// What acquiring found.
#[derive(Debug, Clone)]
pub(super) struct Acquired {
    pub fence: Fence,
    /// The dead holder whose lease was taken over, if any.
    pub took_over: Option<Holder>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i64,
    pub host: String,
    pub proc_start: Option<String>,
    pub generation: i64,
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // on success when the name fits, and we bound the read by the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The start time of a process (field 22 of /proc/PID/stat), so a pid that
/// was reused by an unrelated process is not mistaken for the holder.
pub fn proc_start(pid: i64) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after it follow ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19).map(str::to_string)
}

/// The state letter of a process (field 3 of /proc/PID/stat).
fn proc_state(pid: i64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Is `holder` a live process on this host?
pub fn is_alive(holder: &Holder) -> bool {
    if holder.host != hostname() {
        // Another host's process cannot be checked from here: treat it as
        // live; a person must remove the lease by hand.
        return true;
    }
    if holder.pid == std::process::id() as i64 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let exists = unsafe { libc::kill(holder.pid as libc::pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    if proc_state(holder.pid) == Some('Z') {
        // Dead, only not yet reaped by its parent.
        return false;
    }
    match (&holder.proc_start, proc_start(holder.pid)) {
        (Some(recorded), Some(now)) => *recorded == now,
        _ => true,
    }
}
