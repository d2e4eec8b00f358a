//! The OTLP exporter's HTTP client: one blocking HTTP/1.1 POST on a
//! socket of its own (rustls over it for `https://`), every step under
//! one deadline. The exporter calls it from the SDK's batch thread, so it
//! needs no async runtime (no second tokio, no reqwest), and a receiver
//! that is down or slow costs that thread at most `timeout`, never the run.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

use super::export::Tally;

/// What of a receiver's answer is read (an OTLP answer is a few bytes).
const ANSWER_BYTES_MAX: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct Blocking {
    pub timeout: Duration,
    /// Certificates trusted besides the system's for an `https://`
    /// receiver (`OTEL_EXPORTER_OTLP_CERTIFICATE`), or its own, pinned.
    pub ca_file: Option<PathBuf>,
    /// Where the first failure's own words go (the exporter's error says
    /// only "network error").
    pub failures: Arc<Tally>,
}

#[async_trait]
impl HttpClient for Blocking {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let sent = post(&request, self.ca_file.as_deref(), Instant::now() + self.timeout);
        match &sent {
            Err(e) => self.failures.failed(e.to_string()),
            Ok(r) if !r.status().is_success() => self.failures.failed(format!("the receiver answered {}", r.status())),
            Ok(_) => {}
        }
        sent
    }
}

fn post(request: &Request<Bytes>, ca_file: Option<&Path>, deadline: Instant) -> Result<Response<Bytes>, HttpError> {
    let uri = request.uri();
    let host = uri.host().ok_or("the URL names no host")?;
    let tls = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut head = format!("{} {target} HTTP/1.1\r\nHost: {}\r\n", request.method(), authority(host, uri.port_u16()));
    for (name, value) in request.headers() {
        head.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap_or_default()));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", request.body().len()));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(request.body());

    let socket = connect(host.trim_start_matches('[').trim_end_matches(']'), port, deadline)?;
    let answer = if tls {
        let config = providers::tls::client_config(ca_file)?;
        let name = rustls::pki_types::ServerName::try_from(host.to_string())?;
        let conn = rustls::ClientConnection::new(config, name)?;
        exchange(rustls::StreamOwned::new(conn, socket), &bytes, deadline)?
    } else {
        exchange(socket, &bytes, deadline)?
    };
    parse(&answer)
}

fn authority(host: &str, port: Option<u16>) -> String {
    port.map_or_else(|| host.to_string(), |p| format!("{host}:{p}"))
}

fn left(deadline: Instant) -> Result<Duration, HttpError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err("timed out".into());
    }
    Ok(left)
}

fn connect(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, HttpError> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, left(deadline)?) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or_else(|| format!("{host} has no address").into(), late))
}

/// A socket's timeout in words a person reads (the OS says "resource
/// temporarily unavailable").
fn late(e: std::io::Error) -> HttpError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "timed out: no answer in time".into(),
        _ => e.into(),
    }
}

/// Write the request, read the answer to its end (the connection closes),
/// each read and write bounded by what is left of the deadline.
fn exchange<S: Read + Write + Socket>(mut s: S, request: &[u8], deadline: Instant) -> Result<Vec<u8>, HttpError> {
    s.tcp().set_write_timeout(Some(left(deadline)?))?;
    s.write_all(request).and_then(|()| s.flush()).map_err(late)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        s.tcp().set_read_timeout(Some(left(deadline)?))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            // A TLS peer that closes without close_notify: the bytes so far.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => break,
            Err(e) => return Err(late(e)),
        }
        if answer.len() > ANSWER_BYTES_MAX || complete(&answer) {
            break;
        }
    }
    Ok(answer)
}

/// A socket, plain or under TLS, whose timeouts can be set.
trait Socket {
    fn tcp(&self) -> &TcpStream;
}

impl Socket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Socket for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref()
    }
}

/// The answer's head is in, and as much body as its `Content-Length` says.
fn complete(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let length = head.lines().find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse().ok()));
    // The receiver's figure may be any size: compare what is in, never add to it.
    length.is_some_and(|n: usize| answer.len() - (end + 4) >= n)
}

fn parse(answer: &[u8]) -> Result<Response<Bytes>, HttpError> {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the receiver's answer has no HTTP head")?;
    let head = String::from_utf8_lossy(&answer[..end]);
    let status: u16 = head
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("the receiver's answer has no HTTP status")?;
    let mut response = Response::builder().status(status);
    for line in head.lines().skip(1) {
        if let Some((k, v)) = line.split_once(':') {
            response = response.header(k.trim(), v.trim());
        }
    }
    Ok(response.body(Bytes::copy_from_slice(&answer[end + 4..]))?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_content_length_of_any_size_is_compared_not_added() {
        assert!(!super::complete(b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nx"));
        assert!(super::complete(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"));
        assert!(!super::complete(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nx"));
    }

    use super::*;

    #[test]
    fn an_answer_is_complete_by_its_content_length() {
        assert!(!complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab"));
        assert!(complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"));
        let r = parse(b"HTTP/1.1 503 Busy\r\nRetry-After: 1\r\n\r\nno").unwrap();
        assert_eq!((r.status().as_u16(), r.body().as_ref()), (503, &b"no"[..]));
    }

    #[test]
    fn a_receiver_that_never_answers_costs_the_timeout_and_no_more() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        let request = Request::post(url).body(Bytes::from_static(b"x")).unwrap();
        let started = Instant::now();
        let e = post(&request, None, Instant::now() + Duration::from_millis(300)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(e.to_string().contains("timed out"), "{e}");
        drop(listener);
    }
}
