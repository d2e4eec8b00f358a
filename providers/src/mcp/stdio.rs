//! The stdio transport: a server process of ours, newline-delimited
//! JSON-RPC on its stdin/stdout, requests matched to answers by id (so calls
//! can be in flight together), stderr into the session's hub.
//!
//! The process runs in the workspace, in its own process group, with the
//! command provider's environment rules minus the per-call identity (the
//! server outlives one call; the identity travels in `_meta`). Closing the
//! link closes its stdin, waits a grace, then kills the whole group.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::inbound::{Inbound, Reply};
use super::jsonrpc::{self, Answer, Kind, RpcEnd};
use super::stderr::{self, StderrHub};
use crate::command::{kill_group, provider_spawn, spawn_failure, REAP_AFTER_KILL};
use crate::spawn::Child;
use crate::{Call, NotDispatched, NotDispatchedKind};

type Pending = Arc<Mutex<PendingMap>>;
type Stdin = Arc<tokio::sync::Mutex<Option<pipe::Sender>>>;

#[derive(Default)]
struct PendingMap {
    waiting: HashMap<u64, oneshot::Sender<Answer>>,
    /// The reader ended: nothing will be answered any more.
    closed: bool,
}

fn lock(p: &Pending) -> std::sync::MutexGuard<'_, PendingMap> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) struct StdioLink {
    pgid: u32,
    stdin: Stdin,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    child: Mutex<Option<Child>>,
    stderr_fd: Option<stderr::StderrFd>,
    hub: Arc<StderrHub>,
    /// Where the server's questions and progress go.
    inbound: Arc<Inbound>,
    tasks: Vec<JoinHandle<()>>,
    /// The revision negotiated with the server.
    protocol: Mutex<Option<String>>,
}

impl StdioLink {
    /// Start the server. Its stderr goes to `hub` from the first byte.
    pub fn spawn(
        command: &[String],
        call: &Call,
        hub: &Arc<StderrHub>,
        inbound: &Arc<Inbound>,
    ) -> Result<Self, NotDispatched> {
        let Some(prog) = command.first().filter(|p| !p.is_empty()) else {
            return Err(NotDispatched {
                kind: NotDispatchedKind::BadRequest,
                message: "mcp provider `command` is empty".into(),
            });
        };
        if !call.workspace.is_dir() {
            return Err(NotDispatched {
                kind: NotDispatchedKind::Other,
                message: format!("workspace {} is not a directory; `{prog}` not started", call.workspace.display()),
            });
        }
        // No per-call identity: the server outlives one call.
        let mut child =
            provider_spawn(call, command, false, true).map_err(|e| spawn_failure(prog, &e, call.sandbox.status()))?;
        let other = |m: &str| NotDispatched { kind: NotDispatchedKind::Other, message: format!("`{prog}`: {m}") };
        let pgid = child.id();
        let (Some(stdin), Some(stdout), Some(err)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(other("started without its pipes"));
        };
        let stderr_fd = stderr::pollable(err).map_err(|e| other(&format!("stderr pipe: {e}")))?;
        let link = StdioLink {
            pgid,
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            pending: Arc::default(),
            next_id: AtomicU64::new(1),
            alive: Arc::new(AtomicBool::new(true)),
            child: Mutex::new(Some(child)),
            stderr_fd: Some(Arc::clone(&stderr_fd)),
            hub: Arc::clone(hub),
            inbound: Arc::clone(inbound),
            tasks: Vec::new(),
            protocol: Mutex::new(None),
        };
        Ok(link.start_readers(stdout, stderr_fd, call.output_bytes_max))
    }

    fn start_readers(mut self, stdout: crate::spawn::Output, fd: stderr::StderrFd, line_max: usize) -> Self {
        let reader = Reader {
            stdout: BufReader::new(stdout),
            line_max,
            pending: Arc::clone(&self.pending),
            stdin: Arc::clone(&self.stdin),
            alive: Arc::clone(&self.alive),
            inbound: Arc::clone(&self.inbound),
        };
        self.tasks.push(tokio::spawn(reader.run()));
        self.tasks.push(tokio::spawn(stderr::read_all(Arc::clone(&self.hub), fd)));
        self
    }

    pub fn set_protocol(&self, v: Option<&str>) {
        *self.protocol.lock().unwrap_or_else(|e| e.into_inner()) = v.map(str::to_string);
    }

    pub fn protocol(&self) -> Option<String> {
        self.protocol.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn pid(&self) -> u32 {
        self.pgid
    }

    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// One request; `on_sent` runs once its line is written and flushed.
    pub async fn request(
        &self,
        method: &str,
        params: &Value,
        deadline: Option<Instant>,
        on_sent: impl FnOnce() + Send,
    ) -> RpcEnd {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = lock(&self.pending);
            if p.closed {
                return RpcEnd::NotSent(not_sent("the server had already closed its stdout".into()));
            }
            p.waiting.insert(id, tx);
        }
        let _forget = Forget { pending: &self.pending, id };
        // A request abandoned while the server works on it (the call's
        // future dropped: a person's stop) is cancelled the stdio way.
        let mut cancel = CancelOnDrop { stdin: Arc::clone(&self.stdin), id, armed: false };
        let line = line_of(&jsonrpc::request(id, method, params));
        let mut sent = false;
        let exchange = async {
            if let Err(e) = self.write(&line, &mut sent).await {
                // The server closed its stdin: it never read the whole line.
                return RpcEnd::NotSent(not_sent(format!("writing {method}: {e}{}", self.hub.tail())));
            }
            cancel.armed = true;
            on_sent();
            let end = match rx.await {
                Ok(answer) => RpcEnd::Answer(answer),
                Err(_) => RpcEnd::Lost(format!("the server closed its stdout before answering {method}")),
            };
            cancel.armed = false;
            end
        };
        let end = match deadline {
            None => exchange.await,
            Some(at) => match tokio::time::timeout_at(at.into(), exchange).await {
                Ok(end) => end,
                Err(_) => RpcEnd::Deadline { sent, id },
            },
        };
        // The deadline's own way of giving up is the caller's (`give_up`).
        cancel.armed = false;
        end
    }

    /// `sent` turns true before the first byte may reach the server.
    async fn write(&self, line: &[u8], sent: &mut bool) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().await;
        let Some(w) = stdin.as_mut() else {
            return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin closed"));
        };
        *sent = true;
        w.write_all(line).await?;
        w.flush().await
    }

    pub async fn notify(&self, method: &str, params: Option<&Value>) -> Result<(), String> {
        let line = line_of(&jsonrpc::notification(method, params));
        let mut sent = false;
        self.write(&line, &mut sent).await.map_err(|e| format!("writing {method}: {e}"))
    }

    /// Read what the server wrote to stderr so far into the hub.
    pub fn pump_stderr(&self) {
        if let Some(fd) = &self.stderr_fd {
            let _ = self.hub.pump(fd.get_ref());
        }
    }

    pub fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
        kill_group(self.pgid);
    }

    /// Close stdin (the MCP way to ask a stdio server to exit), wait up to
    /// `grace` for it to exit, then kill its group (grandchildren too) and
    /// reap it.
    pub async fn close(&self, grace: Duration) {
        self.alive.store(false, Ordering::SeqCst);
        drop(self.stdin.lock().await.take());
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut child) = child {
            let _ = tokio::time::timeout(grace, child.wait()).await;
            kill_group(self.pgid);
            let _ = tokio::time::timeout(REAP_AFTER_KILL, child.wait()).await;
        } else {
            kill_group(self.pgid);
        }
    }
}

impl Drop for StdioLink {
    fn drop(&mut self) {
        // The safety net when nobody called `close`: no server outlives us.
        kill_group(self.pgid);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Sends `notifications/cancelled` for a request that was written and is
/// dropped before its answer (the 2026-07-28 and 2025-11-25 way to cancel
/// over stdio), on a task of its own: a drop cannot wait.
struct CancelOnDrop {
    stdin: Stdin,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (stdin, id) = (Arc::clone(&self.stdin), self.id);
        rt.spawn(async move {
            let params = serde_json::json!({"requestId": id, "reason": "the engine stopped waiting (a person's stop)"});
            let line = line_of(&jsonrpc::notification("notifications/cancelled", Some(&params)));
            if let Some(w) = stdin.lock().await.as_mut() {
                let _ = w.write_all(&line).await;
                let _ = w.flush().await;
            }
        });
    }
}

/// Removes a request from the pending map however it ended.
struct Forget<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(self.pending).waiting.remove(&self.id);
    }
}

fn not_sent(message: String) -> NotDispatched {
    NotDispatched { kind: NotDispatchedKind::Other, message }
}

async fn write_reply(stdin: &Stdin, reply: &Value) {
    if let Some(w) = stdin.lock().await.as_mut() {
        // A failed reply shows up as EOF on the next read.
        let _ = w.write_all(&line_of(reply)).await;
        let _ = w.flush().await;
    }
}

fn line_of(msg: &Value) -> Vec<u8> {
    let mut line = msg.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// The stdout side: routes answers to their requests, answers the
/// server's own requests (its questions through `inbound`), hands its
/// progress to the call it names.
struct Reader {
    stdout: BufReader<crate::spawn::Output>,
    line_max: usize,
    pending: Pending,
    stdin: Stdin,
    alive: Arc<AtomicBool>,
    inbound: Arc<Inbound>,
}

enum Line {
    Eof,
    Whole(Vec<u8>),
    /// Longer than the bound: the kept prefix and the line's real length.
    Truncated {
        kept: Vec<u8>,
        total: u64,
    },
}

impl Reader {
    async fn run(mut self) {
        loop {
            match self.next_line().await {
                Ok(Line::Whole(bytes)) => self.route(&bytes).await,
                Ok(Line::Truncated { kept, total }) => self.route_truncated(kept, total),
                Ok(Line::Eof) | Err(_) => break,
            }
        }
        self.alive.store(false, Ordering::SeqCst);
        let mut p = lock(&self.pending);
        p.closed = true;
        // Dropping the senders tells every waiting request: no answer.
        p.waiting.clear();
    }

    async fn route(&mut self, bytes: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Value>(bytes) else { return };
        match jsonrpc::kind(&msg) {
            Kind::Response(id) => {
                if let Some(tx) = lock(&self.pending).waiting.remove(&id) {
                    let _ = tx.send(Answer::Message(msg));
                }
            }
            Kind::ServerRequest => {
                let reply =
                    self.inbound.request(&msg).or_else(|| jsonrpc::reply_to_server_request(&msg).map(Reply::Now));
                match reply {
                    Some(Reply::Now(reply)) => write_reply(&self.stdin, &reply).await,
                    // Held for a person: the server's other lines are read
                    // meanwhile; the reply goes when it is ready.
                    Some(Reply::Later(f)) => {
                        let stdin = Arc::clone(&self.stdin);
                        tokio::spawn(async move { write_reply(&stdin, &f.await).await });
                    }
                    None => {}
                }
            }
            Kind::Notification => self.inbound.notification(&msg),
            Kind::Other => {}
        }
    }

    /// A line over the bound answers the request whose id starts it, or
    /// the only request in flight.
    fn route_truncated(&mut self, kept: Vec<u8>, total: u64) {
        let mut p = lock(&self.pending);
        let id = jsonrpc::id_in_prefix(&kept)
            .filter(|id| p.waiting.contains_key(id))
            .or_else(|| (p.waiting.len() == 1).then(|| p.waiting.keys().next().copied()).flatten());
        if let Some(tx) = id.and_then(|id| p.waiting.remove(&id)) {
            let _ = tx.send(Answer::Truncated { kept, total });
        }
    }

    /// One line, keeping at most `line_max` bytes of it; the rest is read
    /// and counted, never held.
    async fn next_line(&mut self) -> std::io::Result<Line> {
        let (mut kept, mut total) = (Vec::new(), 0u64);
        loop {
            let buf = self.stdout.fill_buf().await?;
            if buf.is_empty() {
                return Ok(match total {
                    0 => Line::Eof,
                    _ => finish_line(kept, total, self.line_max),
                });
            }
            let (chunk, used, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            total += chunk.len() as u64;
            let room = self.line_max.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.stdout.consume(used);
            if done {
                return Ok(finish_line(kept, total, self.line_max));
            }
        }
    }
}

fn finish_line(kept: Vec<u8>, total: u64, max: usize) -> Line {
    if total > max as u64 {
        Line::Truncated { kept, total }
    } else {
        Line::Whole(kept)
    }
}
