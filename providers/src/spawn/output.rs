//! The parent's end of a child's stdout or stderr pipe, registered with the
//! reactor only once a read finds it empty.
//!
//! Why: a short task's child has most often written its output and exited
//! by the time the engine first reads its pipes; the read then finds the
//! data and the end of the file at once. A pipe registered at the spawn (as
//! `tokio::net::unix::pipe::Receiver` is) costs an `epoll_ctl` to add it
//! and one to remove it even then: four system calls a process, on the
//! engine's one busy thread (bench/README.md, issue 38's eleventh round).
//! Here a read is tried first (the descriptor is non-blocking); only a read
//! that would block registers it, and from then on it is read as tokio's
//! pipe is, by readiness.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, Interest, ReadBuf};

/// A non-blocking pipe's read end: not registered until a read would block.
#[derive(Debug)]
pub(crate) struct Output {
    state: State,
}

#[derive(Debug)]
enum State {
    Unwatched(OwnedFd),
    Watched(AsyncFd<OwnedFd>),
    /// Only while moving from the one to the other.
    Moving,
}

impl Output {
    /// `fd` must be a pipe's read end with `O_NONBLOCK` set.
    pub(super) fn new(fd: OwnedFd) -> Output {
        Output { state: State::Unwatched(fd) }
    }

    /// Has it been registered with the reactor (a read found it empty)?
    #[cfg(test)]
    pub(crate) fn watched(&self) -> bool {
        matches!(self.state, State::Watched(_))
    }

    /// The descriptor, non-blocking, no longer registered.
    pub(crate) fn into_nonblocking_fd(self) -> io::Result<OwnedFd> {
        match self.state {
            State::Unwatched(fd) => Ok(fd),
            State::Watched(fd) => Ok(fd.into_inner()),
            State::Moving => Err(io::Error::other("a pipe lost in its registration")),
        }
    }
}

/// One `read` into `buf`'s unfilled part (not zeroed first: a read writes
/// only what it returns).
fn read_into(fd: &OwnedFd, buf: &mut ReadBuf<'_>) -> io::Result<()> {
    // SAFETY: `read` writes at most the length given into this memory, and
    // only the bytes it reports are marked as filled.
    unsafe {
        let unfilled = buf.unfilled_mut();
        let n = libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len());
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        buf.assume_init(n);
        buf.advance(n);
    }
    Ok(())
}

impl AsyncRead for Output {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &this.state {
                State::Watched(fd) => {
                    let mut guard = ready!(fd.poll_read_ready(cx))?;
                    match guard.try_io(|inner| read_into(inner.get_ref(), buf)) {
                        Ok(result) => return Poll::Ready(result),
                        Err(_would_block) => continue,
                    }
                }
                State::Unwatched(fd) => {
                    // A read spends the task's budget as a registered one
                    // does: a child that never lets its pipe run empty
                    // cannot keep the engine's one thread (and the call's
                    // timeout) from running.
                    let coop = ready!(tokio::task::coop::poll_proceed(cx));
                    match read_into(fd, buf) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        done => {
                            coop.made_progress();
                            return Poll::Ready(done);
                        }
                    }
                }
                State::Moving => return Poll::Ready(Err(io::Error::other("a pipe lost in its registration"))),
            }
            // Empty: registered from now on (a registration reports data
            // that came meanwhile: `epoll` looks at the pipe as it adds it).
            // Outside a runtime there is no reactor: an error, not tokio's
            // panic (spawn's contract: read within the runtime).
            if tokio::runtime::Handle::try_current().is_err() {
                return Poll::Ready(Err(io::Error::other("a pipe read outside a tokio runtime")));
            }
            let State::Unwatched(fd) = std::mem::replace(&mut this.state, State::Moving) else { continue };
            // SAFETY: the pipe is open and owned by the AsyncFd from here on.
            let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
            match registered {
                Ok(fd) => this.state = State::Watched(fd),
                Err(e) => {
                    // The pipe kept: a later read may register it.
                    let (fd, cause) = e.into_parts();
                    this.state = State::Unwatched(fd);
                    return Poll::Ready(Err(cause));
                }
            }
        }
    }
}
