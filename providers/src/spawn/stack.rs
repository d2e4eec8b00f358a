//! The stack a spawning thread's children run on until their `exec`
//! (`CLONE_VM | CLONE_VFORK`: they share the engine's memory).

use std::io;

/// The child's stack: it only makes system calls, so 64 KiB is ample; the
/// lowest page is a guard.
const STACK_BYTES: usize = 64 * 1024;
const GUARD_BYTES: usize = 4096;

/// Run `f` with this thread's child stack, made at its first spawn. One
/// per thread is enough: with CLONE_VFORK the thread waits until its child
/// has left the stack (exec'd or exited) before it can spawn again.
pub(super) fn with_stack<R>(f: impl FnOnce(&Stack) -> io::Result<R>) -> io::Result<R> {
    thread_local! {
        static STACK: std::cell::RefCell<Option<Stack>> = const { std::cell::RefCell::new(None) };
    }
    STACK.with(|cell| {
        let mut slot = cell.borrow_mut();
        match &*slot {
            Some(stack) => f(stack),
            None => f(slot.insert(Stack::new()?)),
        }
    })
}

/// An mmap'd stack for children, with a guard page at its low end.
pub(super) struct Stack {
    base: *mut libc::c_void,
}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: a fresh anonymous mapping, unmapped in Drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STACK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base };
        // SAFETY: the lowest page of the mapping made above.
        if unsafe { libc::mprotect(base, GUARD_BYTES, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The lowest usable byte, above the guard page.
    pub(super) fn above_guard(&self) -> *mut libc::c_void {
        self.base.wrapping_byte_add(GUARD_BYTES)
    }

    /// The usable bytes, from `above_guard` to `top`.
    pub(super) fn usable_bytes(&self) -> usize {
        STACK_BYTES - GUARD_BYTES
    }

    /// The stack grows down from here (16-byte aligned: the mapping is).
    pub(super) fn top(&self) -> *mut libc::c_void {
        self.base.wrapping_byte_add(STACK_BYTES)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; every child that used it has
        // exec'd or exited (the thread ends).
        unsafe { libc::munmap(self.base, STACK_BYTES) };
    }
}
