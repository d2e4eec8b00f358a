//! The engine's own environment, out of its providers' sight.
//!
//! `/proc/PID/environ` shows the memory a process's environment was handed
//! in at `exec` — and a provider can open its engine's (`/proc/$PPID/environ`:
//! on this kernel neither Landlock nor a non-dumpable engine keeps a process
//! of the same user out of it, as `tests/trust/sandbox.rs` shows). It holds
//! `ENGINE_STORE`, API keys, whatever the shell that started the engine had.
//! So the engine, first thing, moves its environment elsewhere and blanks
//! that memory: every variable is set again (the C library copies each into
//! memory of its own and points the environment at the copy), then the
//! original bytes are overwritten with zeros. The engine reads its variables
//! as before; the file reads as zeros.

use std::io;

/// Move this process's environment out of the memory `/proc/self/environ`
/// shows, and zero that memory. Only while the process has one thread (the
/// C library's environment is not safe to change beside other threads):
/// call it first thing in `main`. An error changes nothing it could not
/// undo: the environment is then still readable there.
pub fn hide_engine_environment() -> io::Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    if status.lines().find_map(|l| l.strip_prefix("Threads:")).map(str::trim) != Some("1") {
        return Err(io::Error::other("the process has more than one thread"));
    }
    let (start, end) = env_block()?;
    for (name, value) in std::env::vars_os() {
        std::env::set_var(&name, &value);
    }
    let len = end.checked_sub(start).ok_or_else(|| io::Error::other("an empty environment block"))?;
    // SAFETY: [start, end) is this process's own environment block, as the
    // kernel reports it: mapped, writable (the top of the initial stack),
    // and after the `set_var`s above no variable points into it any more
    // (the C library keeps each re-set variable in memory of its own). One
    // thread: nothing reads it meanwhile.
    unsafe { std::ptr::write_bytes(start as *mut u8, 0, len) };
    Ok(())
}

/// `env_start` and `env_end`: fields 50 and 51 of `/proc/self/stat`.
fn env_block() -> io::Result<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let after_name = stat.rfind(')').and_then(|i| stat.get(i + 1..)).unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| -> io::Result<usize> {
        // Field 3 is the first after the name.
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other(format!("/proc/self/stat has no field {n}")))
    };
    Ok((field(50)?, field(51)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_where_the_environment_strings_are() {
        let (start, end) = env_block().unwrap();
        assert!(start > 0 && end > start, "{start}..{end}");
        let shown = std::fs::read("/proc/self/environ").unwrap();
        assert_eq!(shown.len(), end - start, "the file shows exactly the block");
    }

    #[test]
    fn a_process_with_threads_is_refused() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let e = hide_engine_environment().unwrap_err();
        assert!(e.to_string().contains("more than one thread"), "{e}");
        drop(tx);
        let _ = other.join();
    }
}
