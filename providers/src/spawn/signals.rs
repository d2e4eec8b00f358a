//! Which signals a child sets back to their default before it unblocks
//! them: every one with a handler in the engine, and SIGPIPE (the Rust
//! runtime ignores it; a provider expects the default).
//!
//! The child shares the engine's memory until its `exec`, so a handler of
//! the engine's that ran there (a signal sent to the child between its
//! unblocking and its `exec`) would act on the engine's own state: the
//! child resets every handled signal first. Asking the kernel which ones
//! those are took 64 `rt_sigaction`s per child (about 27 µs on this
//! machine, while the engine thread waits for the child's `exec`). So the
//! engine's dispositions are read once, at its first spawn, and again
//! after [`handlers_changed`]: a handler installed after the first spawn
//! is announced with it (`engine::signals` does, when it catches the stop
//! signals). The engine installs handlers and never removes one.

use std::sync::Mutex;

/// Signals are 1 to 64 on Linux; bit `n - 1` of a mask is signal `n`.
pub(super) const NSIG: libc::c_int = 65;

/// The handled signals as last read; `None`: to be read again.
static HANDLED: Mutex<Option<u64>> = Mutex::new(None);

/// Say that this process installed (or changed) a signal handler since it
/// started a provider process, so the next child knows to reset it.
pub fn handlers_changed() {
    *HANDLED.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// The signals a child resets: bit `n - 1` for signal `n`.
pub(super) fn to_reset() -> u64 {
    let mut handled = HANDLED.lock().unwrap_or_else(|e| e.into_inner());
    *handled.get_or_insert_with(read) | bit(libc::SIGPIPE)
}

fn bit(sig: libc::c_int) -> u64 {
    1u64 << (sig - 1)
}

/// The signals with a handler (neither the default nor ignored). glibc
/// refuses to show its own (SIGCANCEL, SIGSETXID), as it refuses to change
/// them.
fn read() -> u64 {
    (1..NSIG)
        .filter(|&sig| {
            // SAFETY: a query only, into a local.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            let queried = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0;
            queried && old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
        })
        .fold(0, |mask, sig| mask | bit(sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn counted(_: libc::c_int) {}

    #[test]
    fn a_handler_announced_is_reset_in_the_next_child() {
        let usr2 = bit(libc::SIGUSR2);
        assert_ne!(to_reset() & bit(libc::SIGPIPE), 0, "SIGPIPE always");
        assert_eq!(to_reset() & usr2, 0, "no handler for SIGUSR2 yet");
        // SAFETY: installing a handler that does nothing.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = counted as extern "C" fn(libc::c_int) as usize;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()), 0);
        }
        handlers_changed();
        assert_ne!(to_reset() & usr2, 0, "the new handler is known");
        // SAFETY: back to the default.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGUSR2, &dfl, std::ptr::null_mut());
        }
        handlers_changed();
        assert_eq!(to_reset() & usr2, 0);
    }
}
