//! A server's stderr, attributed to the calls it happened under.
//!
//! One server serves many calls, so its stderr is one stream. Each call
//! attaches a bounded sink for its span; every chunk read while a sink is
//! attached goes into it (into each, for calls in flight together). A call
//! pumps the pipe once more before it detaches, under the same lock the
//! reader uses: what the server wrote before it answered is in the pipe by
//! then, so it lands in that call's capture, not the next one's.
//! The last `TAIL_BYTES` are also kept for failure messages.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::unix::AsyncFd;

use crate::capture::Bounded;
use crate::Captured;

/// How much of the stderr goes into a failure message.
pub(crate) const TAIL_BYTES: usize = 500;

#[derive(Debug, Default)]
pub(crate) struct StderrHub {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sinks: Vec<(u64, Bounded)>,
    next: u64,
    tail: VecDeque<u8>,
}

/// A call's sink; detached when finished or dropped.
pub(crate) struct Sink {
    hub: Arc<StderrHub>,
    id: u64,
}

impl StderrHub {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a reader panicked mid-push; the data
        // is still bytes.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn attach(self: &Arc<Self>, bytes_max: usize) -> Sink {
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        inner.sinks.push((id, Bounded::new(bytes_max)));
        Sink { hub: Arc::clone(self), id }
    }

    fn feed(inner: &mut Inner, chunk: &[u8]) {
        for (_, sink) in inner.sinks.iter_mut() {
            sink.push(chunk);
        }
        inner.tail.extend(chunk);
        let over = inner.tail.len().saturating_sub(TAIL_BYTES);
        inner.tail.drain(..over);
    }

    /// Read what the pipe holds now, without blocking. `Ok(true)`: EOF.
    /// `Err(WouldBlock)` when drained (what `AsyncFd::try_io` expects).
    pub fn pump(&self, fd: &OwnedFd) -> io::Result<bool> {
        let mut inner = self.lock();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: reading into a buffer we own, from a descriptor we own.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            match n {
                0 => return Ok(true),
                n if n > 0 => Self::feed(&mut inner, buf.get(..n as usize).unwrap_or_default()),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The last bytes, as `; server stderr: …` (empty when there are none).
    pub fn tail(&self) -> String {
        let inner = self.lock();
        let bytes: Vec<u8> = inner.tail.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let t = text.trim();
        if t.is_empty() {
            String::new()
        } else {
            format!("; server stderr: {t}")
        }
    }
}

impl Sink {
    pub fn finish(self) -> Captured {
        let mut inner = self.hub.lock();
        let at = inner.sinks.iter().position(|(id, _)| *id == self.id);
        at.map(|i| inner.sinks.swap_remove(i).1.finish()).unwrap_or_default()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let mut inner = self.hub.lock();
        inner.sinks.retain(|(id, _)| *id != self.id);
    }
}

/// A server's stderr pipe, readable without blocking.
pub(crate) type StderrFd = Arc<AsyncFd<OwnedFd>>;

/// Make the pipe pollable by itself (it is read outside tokio's pipe type).
pub(crate) fn pollable(stderr: crate::spawn::Output) -> io::Result<StderrFd> {
    let fd = stderr.into_nonblocking_fd()?;
    // SAFETY: `fd` is an open pipe we own; the AsyncFd owns it from here
    // on and nothing else closes or replaces it.
    Ok(Arc::new(unsafe { AsyncFd::register(fd)? }))
}

/// Drain the pipe into the hub until EOF.
pub(crate) async fn read_all(hub: Arc<StderrHub>, fd: StderrFd) {
    loop {
        let Ok(mut ready) = fd.readable().await else { return };
        match ready.try_io(|inner| hub.pump(inner.get_ref())) {
            Ok(Ok(true)) | Ok(Err(_)) => return,
            Ok(Ok(false)) | Err(_) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sinks_get_what_happened_while_attached() {
        let mut child = crate::spawn::sh("echo one >&2; read x; echo two >&2; read y; echo three >&2");
        let mut stdin = child.stdin.take().unwrap();
        let fd = pollable(child.stderr.take().unwrap()).unwrap();
        let hub = Arc::new(StderrHub::default());
        let first = hub.attach(100);
        // Wait until "one" is in the pipe, then pump it (as a call's end does).
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let _ = hub.pump(fd.get_ref());
        assert_eq!(first.finish().text, "one\n");
        let reader = tokio::spawn(read_all(Arc::clone(&hub), Arc::clone(&fd)));
        let second = hub.attach(2);
        use tokio::io::AsyncWriteExt;
        stdin.write_all(b"x\n").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let _ = hub.pump(fd.get_ref());
        let c = second.finish();
        // A bound of 2 keeps the first and the last byte (capture keeps head and tail).
        assert_eq!((c.text.as_str(), c.total_bytes, c.truncated), ("t\n", 4, true));
        stdin.write_all(b"y\n").await.unwrap();
        reader.await.unwrap();
        assert_eq!(hub.tail(), "; server stderr: one\ntwo\nthree");
        let _ = child.wait().await;
    }
}
