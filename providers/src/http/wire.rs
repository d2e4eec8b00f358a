//! One HTTP/1.1 exchange on its own connection, tracked byte by byte.
//!
//! Phases and what each failure means:
//! - resolve, connect or TLS handshake fails → `NotSent` (nothing of the
//!   request left: the handshake carries none of it);
//! - the first write fails → `NotSent`;
//! - any byte written (for TLS: any plaintext byte the TLS stream
//!   accepted — it may have gone out), then a write error, EOF, reset, a
//!   malformed or incomplete answer → `Lost`;
//! - a complete answer (status, headers, body to its framed end) → `Ok`.
//!
//! A body is read separately from its head (`Conn`), so a caller that
//! takes a status line for the answer it is can keep it whatever the body
//! does after (`BodyEnd`, and the `Failure` of a body cut short). Over TLS
//! a body that ends only with the connection (no `Content-Length`, not
//! chunked: HTTP/1.0) and whose server closed without TLS `close_notify`
//! (many do) is all that came, but nothing shows it is all that was sent:
//! `BodyEnd::Unconfirmed`, never a lost answer.
//!
//! A deadline is applied by the caller around the exchange; `Track` tells it
//! afterwards whether any byte had been written.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::url::Target;
use crate::capture::Bounded;
use crate::tls::Tls;
use crate::{Captured, LostReason, NotDispatched, NotDispatchedKind};

/// Bound on the status line plus headers (and on chunked trailers).
pub(crate) const HEAD_BYTES_MAX: usize = 64 * 1024;
/// Bound on one chunk-size line of a chunked body.
const CHUNK_LINE_BYTES_MAX: usize = 1024;
/// Bound on body bytes read (kept or not). Past it we stop reading; the
/// capture is marked truncated. Keeps a deadline-less call from reading an
/// endless body forever.
pub(crate) const BODY_READ_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// How far an exchange got, readable after the deadline dropped it.
#[derive(Debug, Default)]
pub(crate) struct Track {
    /// Request bytes written (for TLS: plaintext accepted by the stream).
    pub bytes_written: usize,
    pub status: Option<u16>,
}

impl Track {
    /// What a deadline means depends only on whether any byte left.
    pub fn deadline_failure(&self, limit: Duration) -> Failure {
        if self.bytes_written == 0 {
            Failure::NotSent(NotDispatched {
                kind: NotDispatchedKind::DeadlineBeforeDispatch,
                message: format!("deadline before dispatch: {limit:?} passed before any byte was written"),
            })
        } else {
            let seen = match self.status {
                Some(s) => format!(", status {s} seen but the answer was incomplete"),
                None => ", no status line received".into(),
            };
            Failure::Lost(
                LostReason::DeadlineAfterDispatch,
                format!("deadline {limit:?} fired after {} bytes were written{seen}", self.bytes_written),
            )
        }
    }
}

#[derive(Debug)]
pub(crate) enum Failure {
    NotSent(NotDispatched),
    Lost(LostReason, String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Failure::NotSent(nd) => &nd.message,
            Failure::Lost(_, m) => m,
        }
    }
}

pub(crate) fn lost(detail: String) -> Failure {
    Failure::Lost(LostReason::ResponseLost, detail)
}

fn not_sent(kind: NotDispatchedKind, message: String) -> Failure {
    Failure::NotSent(NotDispatched { kind, message })
}

/// A status line and the headers we use.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub status: u16,
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub retry_after_seconds: Option<u64>,
    /// Every header, names lower-cased (bounded with the head).
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// An answer: its status line and headers were received, and its body as
/// far as it came.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub retry_after_seconds: Option<u64>,
    pub body: Captured,
    /// Why the body may not be whole (the connection broke in it, a close
    /// without TLS `close_notify`, the deadline); `None`: read to its end.
    pub body_cut: Option<String>,
    /// Every header of the answer, names lower-cased.
    pub headers: Vec<(String, String)>,
}

/// How the reading of a body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// At its framed end, at the clean close that ends an unframed body,
    /// or where the sink stopped reading.
    Whole,
    /// An unframed body over TLS ended by a close without `close_notify`
    /// (the words say so): the bytes read are all that came.
    Unconfirmed(String),
}

/// Where body bytes go. `Flow::Done` stops reading (the rest is left
/// unread and the connection dropped).
pub(crate) trait BodySink {
    fn push(&mut self, chunk: &[u8]) -> Flow;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    Done,
}

impl BodySink for Bounded {
    fn push(&mut self, chunk: &[u8]) -> Flow {
        Bounded::push(self, chunk);
        Flow::More
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A connection with the request written, ready for the answer.
pub(crate) struct Conn {
    r: BufReader<Pin<Box<dyn Stream>>>,
}

/// Connect (and handshake), write `request`, flush. `track` counts what was
/// written.
pub(crate) async fn send(target: &Target, tls: &Tls, request: &[u8], track: &mut Track) -> Result<Conn, Failure> {
    let tcp = connect(target).await?;
    let mut stream: Pin<Box<dyn Stream>> =
        if target.tls { Box::pin(handshake(target, tls, tcp).await?) } else { Box::pin(tcp) };
    while track.bytes_written < request.len() {
        let res = stream.write(&request[track.bytes_written..]).await;
        match res {
            Ok(n) if n > 0 => track.bytes_written += n,
            other => {
                let why = other.err().map_or("the stream accepted 0 bytes".into(), |e| e.to_string());
                return Err(if track.bytes_written == 0 {
                    not_sent(
                        NotDispatchedKind::ConnectionRefused,
                        format!("connection failed before any byte was written: {why}"),
                    )
                } else {
                    lost(format!("write failed after {} of {} bytes: {why}", track.bytes_written, request.len()))
                });
            }
        }
    }
    // For TLS this pushes the last records to the socket; for TCP it is a
    // no-op. Either way the bytes were already counted as possibly sent.
    if let Err(e) = stream.flush().await {
        return Err(lost(format!("flush failed after the request was written: {e}")));
    }
    Ok(Conn { r: BufReader::new(stream) })
}

impl Conn {
    pub async fn head(&mut self, track: &mut Track) -> Result<Head, Failure> {
        let head = read_head(&mut self.r).await?;
        track.status = Some(head.status);
        Ok(head)
    }

    /// Read the body to its framed end (or until `sink` is done).
    pub async fn body(&mut self, head: &Head, sink: &mut impl BodySink) -> Result<BodyEnd, Failure> {
        read_body(&mut self.r, head, sink).await
    }
}

/// One request as `exchange` sends it.
pub(crate) struct Ask<'a> {
    pub target: &'a Target,
    pub tls: &'a Tls,
    pub request: &'a [u8],
    /// A `HEAD`: the answer has no body.
    pub head_only: bool,
    pub body_bytes_max: usize,
    /// Bound on the whole exchange, from the connection to the body's end.
    pub limit: Option<Duration>,
}

/// Send the request, call `on_written`, read the answer. The status line
/// received is the answer, whatever the body does after: a body cut short
/// (the connection broken in it, a close without TLS `close_notify`, the
/// limit) is kept as far as it came, with why (`Response::body_cut`).
/// Before the status line, the limit is `Track::deadline_failure`.
pub(crate) async fn exchange(ask: &Ask<'_>, on_written: impl FnOnce(), track: &mut Track) -> Result<Response, Failure> {
    let by = ask.limit.map(|l| tokio::time::Instant::now() + l);
    let answered = async {
        let mut conn = send(ask.target, ask.tls, ask.request, track).await?;
        on_written();
        let head = conn.head(track).await?;
        Ok::<_, Failure>((conn, head))
    };
    let (mut conn, head) = match by {
        None => answered.await?,
        Some(at) => match tokio::time::timeout_at(at, answered).await {
            Ok(r) => r?,
            Err(_) => return Err(track.deadline_failure(ask.limit.unwrap_or_default())),
        },
    };
    let no_body = ask.head_only || head.status == 204 || head.status == 304;
    let mut body = Bounded::new(ask.body_bytes_max);
    let body_cut = if no_body {
        None
    } else {
        let read = conn.body(&head, &mut body);
        let read = match by {
            None => Some(read.await),
            Some(at) => tokio::time::timeout_at(at, read).await.ok(),
        };
        match read {
            Some(Ok(BodyEnd::Whole)) => None,
            Some(Ok(BodyEnd::Unconfirmed(why))) => Some(why),
            Some(Err(f)) => Some(f.message().to_string()),
            None => Some(format!(
                "the deadline ({:?}) passed while the body was read: what came is kept",
                ask.limit.unwrap_or_default()
            )),
        }
    };
    let (status, retry_after_seconds) = (head.status, head.retry_after_seconds);
    Ok(Response { status, retry_after_seconds, body: body.finish(), body_cut, headers: head.headers })
}

async fn connect(target: &Target) -> Result<TcpStream, Failure> {
    let addrs: Vec<SocketAddr> = match tokio::net::lookup_host((target.host.as_str(), target.port)).await {
        Ok(a) => a.collect(),
        Err(e) => return Err(not_sent(NotDispatchedKind::Other, format!("cannot resolve {}: {e}", target.host))),
    };
    // A loopback name must not resolve elsewhere (e.g. a doctored hosts file).
    if target.loopback && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(not_sent(
            NotDispatchedKind::BadRequest,
            format!("{} resolves to a non-loopback address", target.host),
        ));
    }
    let mut last = format!("{} resolved to no address", target.host);
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connect to {addr} failed: {e}"),
        }
    }
    Err(not_sent(NotDispatchedKind::ConnectionRefused, last))
}

/// The TLS handshake. Nothing of the request is in it, so any failure here
/// is "not sent".
async fn handshake(
    target: &Target,
    tls: &Tls,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Failure> {
    let config = tls.config().map_err(|m| not_sent(NotDispatchedKind::Other, m))?;
    let name = ServerName::try_from(target.host.clone())
        .map_err(|e| not_sent(NotDispatchedKind::BadRequest, format!("TLS server name `{}`: {e}", target.host)))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(&config));
    connector.connect(name, tcp).await.map_err(|e| {
        not_sent(
            NotDispatchedKind::Other,
            format!("TLS handshake with {} failed, nothing of the request was sent: {e}", target.origin()),
        )
    })
}

/// Read the status line and headers, skipping interim 1xx answers.
async fn read_head<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> Result<Head, Failure> {
    let mut budget = HEAD_BYTES_MAX;
    loop {
        let line = read_line(r, &mut budget, "status line").await?;
        let status =
            parse_status_line(&line).ok_or_else(|| lost(format!("malformed status line {:?}", trunc(&line))))?;
        let mut head =
            Head { status, content_length: None, chunked: false, retry_after_seconds: None, headers: vec![] };
        loop {
            let line = read_line(r, &mut budget, "headers").await?;
            if line.is_empty() {
                break;
            }
            let (name, value) =
                line.split_once(':').ok_or_else(|| lost(format!("malformed header {:?}", trunc(&line))))?;
            take_header(&mut head, name.trim().to_ascii_lowercase(), value.trim())?;
        }
        // 1xx (other than 101, which we never ask for) precede the real answer.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        return Ok(head);
    }
}

fn take_header(head: &mut Head, name: String, value: &str) -> Result<(), Failure> {
    match name.as_str() {
        "content-length" => {
            let n = value.parse::<u64>().map_err(|_| lost(format!("bad Content-Length {value:?}")))?;
            if head.content_length.is_some_and(|m| m != n) {
                return Err(lost("conflicting Content-Length headers".into()));
            }
            head.content_length = Some(n);
        }
        "transfer-encoding" => head.chunked = value.to_ascii_lowercase().contains("chunked"),
        // Only delta-seconds; an HTTP-date is left as "no hint".
        "retry-after" => head.retry_after_seconds = value.parse::<u64>().ok(),
        _ => {}
    }
    head.headers.push((name, value.to_string()));
    Ok(())
}

fn parse_status_line(line: &str) -> Option<u16> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    let code = parts.next()?;
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") || code.len() != 3 {
        return None;
    }
    code.parse::<u16>().ok().filter(|c| (100..600).contains(c))
}

/// One CRLF-terminated line (terminator stripped), charged against `budget`.
/// EOF or a reset before the line ends means the answer was lost.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    budget: &mut usize,
    what: &str,
) -> Result<String, Failure> {
    let mut line = Vec::new();
    let n = (&mut *r)
        .take(*budget as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| lost(format!("connection broke while reading the {what}: {e}")))?;
    *budget = budget.saturating_sub(n);
    if !line.ends_with(b"\n") {
        return Err(lost(if *budget == 0 {
            format!("response {what} over its bound")
        } else {
            format!("connection closed before the {what} was complete")
        }));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn trunc(s: &str) -> String {
    s.chars().take(120).collect()
}

/// Read the body to its framed end into `out`. An early end is a
/// `Failure` naming it (what it means is the caller's: the HTTP provider
/// keeps the status it received, an MCP answer is lost without its
/// message).
async fn read_body<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    head: &Head,
    out: &mut impl BodySink,
) -> Result<BodyEnd, Failure> {
    let status = head.status;
    if head.chunked {
        return read_chunked(r, status, out).await.map(|()| BodyEnd::Whole);
    }
    match head.content_length {
        Some(n) => copy_exact(r, n.min(BODY_READ_BYTES_MAX), out, status).await.map(|_| BodyEnd::Whole),
        None => read_to_close(r, status, out).await,
    }
}

/// An unframed body: it ends where the connection does (we sent
/// `Connection: close`).
async fn read_to_close<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    status: u16,
    out: &mut impl BodySink,
) -> Result<BodyEnd, Failure> {
    let mut limited = (&mut *r).take(BODY_READ_BYTES_MAX);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match limited.read(&mut chunk).await {
            Ok(n) => n,
            // Only TLS reports an end this way: the server closed without
            // `close_notify`.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(BodyEnd::Unconfirmed(format!(
                    "the body ended with the connection, closed without TLS close_notify ({e}): \
                     what came is kept, but nothing shows it is the whole body"
                )))
            }
            Err(e) => {
                return Err(lost(format!("status {status} received, then the connection broke in the body: {e}")))
            }
        };
        if n == 0 || out.push(chunk.get(..n).unwrap_or_default()) == Flow::Done {
            return Ok(BodyEnd::Whole);
        }
    }
}

async fn read_chunked<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    status: u16,
    out: &mut impl BodySink,
) -> Result<(), Failure> {
    let mut budget = HEAD_BYTES_MAX;
    let mut read_total: u64 = 0;
    loop {
        let mut line_budget = CHUNK_LINE_BYTES_MAX;
        let line = read_line(r, &mut line_budget, "chunk size").await?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(hex, 16).map_err(|_| lost(format!("bad chunk size {:?}", trunc(&line))))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(r, &mut budget, "trailers").await?.is_empty() {}
            return Ok(());
        }
        read_total += size;
        if read_total > BODY_READ_BYTES_MAX {
            return Ok(()); // stop reading; a Bounded sink records truncation by count
        }
        if copy_exact(r, size, out, status).await? == Flow::Done {
            return Ok(());
        }
        if !read_line(r, &mut line_budget, "chunk end").await?.is_empty() {
            return Err(lost("chunk not followed by CRLF".into()));
        }
    }
}

async fn copy_exact<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    n: u64,
    out: &mut impl BodySink,
    status: u16,
) -> Result<Flow, Failure> {
    let mut left = n;
    let mut chunk = vec![0u8; 64 * 1024];
    while left > 0 {
        let want = chunk.len().min(left as usize);
        match r.read(&mut chunk[..want]).await {
            Ok(0) => return Err(lost(format!("status {status} received, then the body ended {left} bytes short"))),
            Ok(k) => {
                left -= k as u64;
                if out.push(chunk.get(..k).unwrap_or_default()) == Flow::Done {
                    return Ok(Flow::Done);
                }
            }
            Err(e) => {
                return Err(lost(format!("status {status} received, then the connection broke in the body: {e}")))
            }
        }
    }
    Ok(Flow::More)
}
