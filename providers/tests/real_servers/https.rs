//! HTTPS: a local TLS server whose self-signed certificate is made here.
//! With the provider's `ca_file` the request goes through; without it the
//! handshake fails and nothing of the request leaves (not dispatched, and
//! the server sees no request). Once the handshake is done, written bytes
//! count as dispatched. The MCP Streamable HTTP transport follows the same
//! rules (through a TLS front to server-everything).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use providers::http::HttpProvider;
use providers::mcp::{McpConfig, McpProvider};
use providers::{LostReason, NotDispatchedKind, Outcome, Provider, Verdict};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::*;

#[derive(Clone, Copy)]
enum Mode {
    /// Read one request, answer 200 with a JSON body.
    Answer,
    /// Complete the handshake, then close without reading.
    CloseAfterHandshake,
    /// Forward the decrypted bytes to this loopback port (a TLS front).
    Front(u16),
}

struct TlsServer {
    port: u16,
    /// Requests read in full (after the handshake).
    requests: Arc<Mutex<Vec<String>>>,
    failed_handshakes: Arc<AtomicUsize>,
    /// The CA file a client needs (the certificate itself).
    ca_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn tls_server(mode: Mode) -> TlsServer {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, cert.cert.pem()).unwrap();
    let chain = vec![CertificateDer::from(cert.cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let failed_handshakes = Arc::new(AtomicUsize::new(0));
    let (reqs, failed) = (Arc::clone(&requests), Arc::clone(&failed_handshakes));
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (acceptor, reqs, failed) = (acceptor.clone(), Arc::clone(&reqs), Arc::clone(&failed));
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    failed.fetch_add(1, Ordering::SeqCst);
                    return;
                };
                match mode {
                    Mode::CloseAfterHandshake => drop(tls),
                    Mode::Front(to) => {
                        let mut back = tokio::net::TcpStream::connect(("127.0.0.1", to)).await.unwrap();
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut back).await;
                    }
                    Mode::Answer => {
                        let req = read_request(&mut tls).await;
                        reqs.lock().unwrap().push(req);
                        let body = r#"{"ok":true}"#;
                        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        let _ = tls.write_all(answer.as_bytes()).await;
                        let _ = tls.shutdown().await;
                    }
                }
            });
        }
    });
    TlsServer { port, requests, failed_handshakes, ca_file, _dir: dir }
}

/// Head up to the blank line, then Content-Length bytes.
async fn read_request(s: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(i) = text.find("\r\n\r\n") {
            let len = text.lines().find_map(|l| l.strip_prefix("Content-Length: ")).map_or(0, |v| v.parse().unwrap());
            if buf.len() >= i + 4 + len {
                return text;
            }
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).to_string(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[tokio::test]
async fn https_round_trip_with_ca_file() {
    let server = tls_server(Mode::Answer).await;
    let dir = tempfile::tempdir().unwrap();
    for host in ["127.0.0.1", "localhost"] {
        let p = HttpProvider::new(format!("https://{host}:{}/render", server.port))
            .with_ca_file(Some(server.ca_file.clone()));
        let (o, progress) = go(&p, &call(dir.path(), "op-tls", json!({"body": {"a": 1}}))).await;
        let r = http_receipt(o);
        assert_eq!((r.status, r.body.text.as_str()), (200, r#"{"ok":true}"#), "{host}");
        assert_eq!(progress.len(), 1);
    }
    let reqs = server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].starts_with("POST /render HTTP/1.1\r\n") && reqs[0].contains("Idempotency-Key: op-tls\r\n"));
    assert!(reqs[0].ends_with("{\"a\":1}"), "{}", reqs[0]);
    // A read-back over TLS too.
    let p = HttpProvider::new("https://127.0.0.1:1/").with_ca_file(Some(server.ca_file.clone()));
    let rule = json!({"url": format!("https://127.0.0.1:{}/x/{{operation_id}}", server.port),
                      "present_if": {"json": {"/ok": true}}});
    let r = p.read_back(&call(dir.path(), "op-tls", json!({})), Some(&rule)).unwrap().await;
    assert_eq!(r.verdict, Verdict::Present, "{r:?}");
}

#[tokio::test]
async fn without_ca_file_nothing_is_delivered_and_nothing_dispatched() {
    let server = tls_server(Mode::Answer).await;
    let dir = tempfile::tempdir().unwrap();
    let p = HttpProvider::new(format!("https://127.0.0.1:{}/render", server.port));
    let (o, progress) = go(&p, &call(dir.path(), "op-tls", json!({"body": {"a": 1}}))).await;
    match o {
        Outcome::NotDispatched(nd) => {
            assert_eq!(nd.kind, NotDispatchedKind::Other);
            assert!(
                nd.message.contains("TLS handshake") && nd.message.contains("nothing of the request"),
                "{}",
                nd.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(progress.is_empty(), "not dispatched");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(server.requests.lock().unwrap().is_empty(), "nothing delivered");
    assert_eq!(server.failed_handshakes.load(Ordering::SeqCst), 1);
    // A read-back that cannot verify the server is no answer.
    let rule = json!({"url": format!("https://127.0.0.1:{}/x", server.port), "present_if": {"status": [200]},
                      "absent_if": {"status": [404]}});
    let r = p.read_back(&call(dir.path(), "op-tls", json!({})), Some(&rule)).unwrap().await;
    assert_eq!(r.verdict, Verdict::Inconclusive);
}

#[tokio::test]
async fn bytes_written_after_the_handshake_are_dispatched() {
    let server = tls_server(Mode::CloseAfterHandshake).await;
    let dir = tempfile::tempdir().unwrap();
    let p = HttpProvider::new(format!("https://127.0.0.1:{}/render", server.port))
        .with_ca_file(Some(server.ca_file.clone()));
    let (o, _) = go(&p, &call(dir.path(), "op-tls", json!({"body": {"a": 1}}))).await;
    assert!(matches!(o, Outcome::Lost { reason: LostReason::ResponseLost, .. }), "{o:?}");
}

#[tokio::test]
async fn mcp_over_https_follows_the_same_rules() {
    let (_everything, port) = everything_http().await;
    let front = tls_server(Mode::Front(port)).await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("https://localhost:{}/mcp", front.port);
    let echo = call(dir.path(), "op-echo", json!({"tool": "echo", "arguments": {"message": "over tls"}}));
    let mut config = McpConfig::http(url.clone());
    config.ca_file = Some(front.ca_file.clone());
    let p = McpProvider::new(config);
    let r = receipt(go(&p, &echo).await.0);
    assert!(r.result.text.contains("over tls"), "{}", r.result.text);
    // No ca_file: refused in the handshake, before initialize; nothing sent.
    let q = McpProvider::new(McpConfig::http(url));
    let (o, progress) = go(&q, &echo).await;
    match o {
        Outcome::NotDispatched(nd) => assert!(nd.message.contains("TLS handshake"), "{}", nd.message),
        other => panic!("{other:?}"),
    }
    assert!(progress.is_empty());
    // A non-loopback host needs the hosts list, https or not.
    let far = McpProvider::new(McpConfig::http("https://mcp.example.com/mcp"));
    match go(&far, &echo).await.0 {
        Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::BadRequest, "{}", nd.message),
        other => panic!("{other:?}"),
    }
}
