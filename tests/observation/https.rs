//! HTTPS end to end: a local TLS server with a certificate made here
//! (self-signed). With the provider's `ca_file` the request goes through;
//! without it the handshake fails, nothing is delivered and nothing was
//! dispatched. The same for a remote MCP server (server-everything behind
//! a TLS front): a task-augmented call over Streamable HTTP in TLS with the
//! `ca_file`, nothing reaching the server without it. A `ca_file` that
//! cannot be read is refused at `engine check`, at its place.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::common::*;

/// A TLS server on a loopback port answering every request 200, on its
/// own thread and runtime; it records each request read after a
/// handshake, and each failed handshake.
struct TlsServer {
    port: u16,
    pem: String,
    requests: Arc<Mutex<Vec<String>>>,
    failed_handshakes: Arc<AtomicUsize>,
}

impl TlsServer {
    /// With a certificate made here (rcgen: an end-entity certificate,
    /// `CA:FALSE`, for localhost and 127.0.0.1).
    fn start() -> TlsServer {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let chain = vec![CertificateDer::from(cert.cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
        TlsServer::serving(chain, key, cert.cert.pem())
    }

    /// With the certificate and key of PEM files (`openssl req -x509`'s).
    fn with_pem(cert_pem: &str, key_pem: &str) -> TlsServer {
        use rustls::pki_types::pem::PemObject;
        let chain = vec![CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
        TlsServer::serving(chain, key, cert_pem.to_string())
    }

    fn serving(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>, pem: String) -> TlsServer {
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let failed_handshakes = Arc::new(AtomicUsize::new(0));
        let (reqs, failed) = (Arc::clone(&requests), Arc::clone(&failed_handshakes));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { return };
                    let (acceptor, reqs, failed) = (acceptor.clone(), Arc::clone(&reqs), Arc::clone(&failed));
                    tokio::spawn(async move {
                        let Ok(mut tls) = acceptor.accept(tcp).await else {
                            failed.fetch_add(1, Ordering::SeqCst);
                            return;
                        };
                        let req = read_request(&mut tls).await;
                        reqs.lock().unwrap().push(req);
                        let body = r#"{"ok":true}"#;
                        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        let _ = tls.write_all(answer.as_bytes()).await;
                        let _ = tls.shutdown().await;
                    });
                }
            });
        });
        TlsServer { port, pem, requests, failed_handshakes }
    }
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

fn https_plan(ws: &Ws, server: &TlsServer, ca_file: Option<&str>) {
    https_plan_to(ws, &format!("https://localhost:{}/render", server.port), ca_file)
}

fn https_plan_to(ws: &Ws, endpoint: &str, ca_file: Option<&str>) {
    let mut provider = json!({"kind": "http", "endpoint": endpoint});
    if let Some(p) = ca_file {
        provider["ca_file"] = json!(p);
    }
    let task = json!({"ref": "T1", "provider": "r", "effect": "external", "action": {"body": {"doc": "T1"}}});
    ws.write_plan("plan.json", &plan(json!({"r": provider}), vec![task]));
}

#[test]
fn an_https_round_trip_with_ca_file_and_nothing_delivered_without_it() {
    let server = TlsServer::start();

    // With the CA file (relative to the workspace): delivered, once.
    let ws = Ws::new();
    ws.write("certs/ca.pem", &server.pem);
    https_plan(&ws, &server, Some("certs/ca.pem"));
    ws.engine_json(&["check", "plan.json"]).expect(0, None);
    ws.run().expect(0, None);
    let op = ws.op_of("T1");
    let reqs = server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert!(reqs[0].starts_with("POST /render HTTP/1.1\r\n"), "{}", reqs[0]);
    assert!(reqs[0].contains(&format!("Idempotency-Key: {op}\r\n")) && reqs[0].ends_with(r#"{"doc":"T1"}"#));

    // Without it: the certificate is not trusted, the handshake fails, and
    // nothing of the request left — not dispatched, a failure, not unknown.
    let ws = Ws::new();
    https_plan(&ws, &server, None);
    let out = ws.run();
    out.expect(1, None);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "failed"), "{a:?}");
    assert_eq!(a[0].dispatched_at_ms, None, "nothing was dispatched");
    assert_eq!(a[0].class(), "environment", "{a:?}");
    let ev = ws.evidence(a[0].id);
    assert!(ev.iter().any(|e| e.2.to_string().contains("TLS handshake")), "{ev:?}");
    assert_eq!(server.requests.lock().unwrap().len(), 1, "nothing more delivered");
    assert_eq!(server.failed_handshakes.load(Ordering::SeqCst), 1);
    assert!(ws.run().json()["failed"] == json!(["T1"]), "a plain run does not re-send a failed task");
}

/// `openssl req -x509` as people type it: a self-signed certificate for
/// localhost, which OpenSSL marks `CA:TRUE` (its default v3_ca section).
/// Its (certificate, key) in PEM.
fn openssl_self_signed(dir: &std::path::Path, name: &str) -> (String, String) {
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs (Debian's openssl package)");
    assert!(out.status.success(), "openssl req -x509: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::process::Command::new("openssl").args(["x509", "-noout", "-text", "-in"]).arg(&cert).output();
    let text = String::from_utf8_lossy(&text.unwrap().stdout).to_string();
    assert!(text.contains("CA:TRUE"), "the certificate is the CA:TRUE kind this test is about:\n{text}");
    (std::fs::read_to_string(cert).unwrap(), std::fs::read_to_string(key).unwrap())
}

/// A `ca_file` holding the server's own self-signed `CA:TRUE` certificate
/// pins it: delivered once (as curl --cacert would). Another such
/// certificate, or the right one under a name it does not carry, is
/// refused at the handshake — nothing delivered, not dispatched — and the
/// evidence names the `ca_file` and the mismatch.
#[test]
fn a_self_signed_ca_true_certificate_in_ca_file_is_pinned() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key) = openssl_self_signed(tmp.path(), "server");
    let (other, _) = openssl_self_signed(tmp.path(), "other");
    let server = TlsServer::with_pem(&cert, &key);

    let ws = Ws::new();
    ws.write("certs/server.crt", &cert);
    https_plan(&ws, &server, Some("certs/server.crt"));
    ws.engine_json(&["check", "plan.json"]).expect(0, None);
    ws.run().expect(0, None);
    let reqs = server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert!(reqs[0].contains(&format!("Idempotency-Key: {}\r\n", ws.op_of("T1"))), "{}", reqs[0]);
    assert_eq!(server.failed_handshakes.load(Ordering::SeqCst), 0);

    let refused = |ws: &Ws, says: &[&str]| {
        ws.run().expect(1, None);
        let a = ws.attempts();
        assert_eq!((a.len(), a[0].state.as_str(), a[0].dispatched_at_ms), (1, "failed", None), "{a:?}");
        let ev = ws.evidence(a[0].id);
        let text = format!("{ev:?}");
        for word in says {
            assert!(text.contains(word), "the evidence says {word:?}: {text}");
        }
    };
    // Another self-signed certificate in the ca_file: not this server's.
    let ws = Ws::new();
    ws.write("certs/other.crt", &other);
    https_plan(&ws, &server, Some("certs/other.crt"));
    refused(&ws, &["TLS handshake", "certs/other.crt", "not one of ca_file"]);
    assert_eq!(server.requests.lock().unwrap().len(), 1, "nothing more delivered");

    // The pinned certificate, reached by a name it does not carry.
    let ws = Ws::new();
    ws.write("certs/server.crt", &cert);
    https_plan_to(&ws, &format!("https://127.0.0.1:{}/render", server.port), Some("certs/server.crt"));
    refused(&ws, &["TLS handshake", "pinned in ca_file", "not for 127.0.0.1"]);
    assert_eq!(server.requests.lock().unwrap().len(), 1, "nothing more delivered");
    assert_eq!(server.failed_handshakes.load(Ordering::SeqCst), 2);
}

#[test]
fn a_ca_file_that_cannot_be_read_is_refused_at_check() {
    let server = TlsServer::start();
    let ws = Ws::new();
    https_plan(&ws, &server, Some("missing.pem"));
    let out = ws.engine_json(&["check", "plan.json"]);
    out.expect(2, Some("PLAN_INVALID"));
    assert_eq!(out.json()["error"]["place"], "$.providers.r.ca_file", "{}", out.describe());
    ws.write("bad.pem", "not a certificate");
    https_plan(&ws, &server, Some("bad.pem"));
    let out = ws.engine_json(&["check", "plan.json"]);
    out.expect(2, Some("PLAN_INVALID"));
    assert_eq!(out.json()["error"]["place"], "$.providers.r.ca_file");
    assert!(server.requests.lock().unwrap().is_empty());
}

/// A TLS front on a loopback port for a plain TCP server (as a remote MCP
/// server would sit behind one): it terminates TLS with a self-signed
/// certificate and relays to `upstream`, keeping the plaintext clients
/// sent, and counting failed handshakes.
struct TlsFront {
    port: u16,
    pem: String,
    plaintext: Arc<Mutex<Vec<u8>>>,
    failed_handshakes: Arc<AtomicUsize>,
}

impl TlsFront {
    fn start(upstream: u16) -> TlsFront {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let chain = vec![CertificateDer::from(cert.cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let plaintext = Arc::new(Mutex::new(Vec::new()));
        let failed_handshakes = Arc::new(AtomicUsize::new(0));
        let (log, failed) = (Arc::clone(&plaintext), Arc::clone(&failed_handshakes));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { return };
                    let (acceptor, log, failed) = (acceptor.clone(), Arc::clone(&log), Arc::clone(&failed));
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            failed.fetch_add(1, Ordering::SeqCst);
                            return;
                        };
                        let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                        relay(tls, server, log).await;
                    });
                }
            });
        });
        TlsFront { port, pem: cert.cert.pem(), plaintext, failed_handshakes }
    }

    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.plaintext.lock().unwrap()).matches(needle).count()
    }
}

/// Copy both ways until either side closes; what the client sent is logged.
async fn relay(
    client: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    server: tokio::net::TcpStream,
    log: Arc<Mutex<Vec<u8>>>,
) {
    let (mut c_read, mut c_write) = tokio::io::split(client);
    let (mut s_read, mut s_write) = server.into_split();
    let up = async move {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match c_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    log.lock().unwrap().extend_from_slice(&buf[..n]);
                    if s_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = s_write.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut s_read, &mut c_write).await;
        let _ = c_write.shutdown().await;
    };
    tokio::join!(up, down);
}

#[test]
fn a_remote_mcp_server_over_https_is_reached_with_ca_file_and_not_without_it() {
    let ev = Everything::start();
    let front = TlsFront::start(ev.port);
    let provider = |ca: Option<&str>| {
        let mut p = json!({"kind": "mcp", "url": format!("https://localhost:{}/mcp", front.port)});
        if let Some(c) = ca {
            p["ca_file"] = json!(c);
        }
        json!({"ev": p})
    };

    // With the CA file: a task-augmented call over Streamable HTTP in TLS,
    // its task id (and session) committed, its result the receipt.
    let ws = Ws::new();
    ws.write("certs/ca.pem", &front.pem);
    ws.write_plan("plan.json", &plan(provider(Some("certs/ca.pem")), vec![research_task("T1", "reefs")]));
    ws.run().expect(0, None);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"), "{a:?}");
    let handle = a[0].handle.clone().expect("the task id on the attempt");
    assert!(handle["session"].is_string(), "{handle}");
    assert_eq!(related_task(&ws, a[0].id).as_deref(), handle["task_id"].as_str());
    assert_eq!(front.count(r#""method":"tools/call""#), 1, "one tools/call, inside TLS");
    assert_eq!(front.failed_handshakes.load(Ordering::SeqCst), 0);

    // Without it: the handshake fails, so the server's tools cannot be
    // read, and no call is made (issue 24 item 8): the run stops before
    // its first intent, the server received nothing.
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(provider(None), vec![research_task("T1", "reefs")]));
    let out = ws.run();
    out.expect(2, Some("TOOL_INVENTORY_UNAVAILABLE"));
    assert!(
        out.json()["error"]["message"].as_str().unwrap().to_lowercase().contains("certificate"),
        "{}",
        out.describe()
    );
    assert_eq!(ws.attempts().len(), 0, "no intent");
    assert!(front.failed_handshakes.load(Ordering::SeqCst) >= 1);
    assert_eq!(front.count(r#""method":"tools/call""#), 1, "nothing more reached the server");
}

#[test]
fn a_read_back_over_https_trusts_the_same_ca_file() {
    let server = TlsServer::start();
    let ws = Ws::new();
    ws.write("certs/ca.pem", &server.pem);
    let provider = json!({"kind": "http", "endpoint": format!("https://localhost:{}/render", server.port),
                          "ca_file": "certs/ca.pem"});
    let rule = json!({"url": format!("https://localhost:{}/notes/{{operation_id}}", server.port),
                      "present_if": {"status": [200], "json": {"/ok": true}}, "absent_if": {"status": [404]}});
    let task = json!({"ref": "T1", "provider": "r", "effect": "external", "action": {"body": {"doc": "T1"}},
                      "observe": rule});
    ws.write_plan("plan.json", &plan(json!({"r": provider}), vec![task]));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.op_of("T1");
    wait_until(std::time::Duration::from_secs(10), "the request delivered", || {
        (server.requests.lock().unwrap().len() == 1).then_some(())
    });
    ws.run().expect(0, None);
    let reqs = server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2, "the POST once, then the read-back: {reqs:?}");
    assert!(reqs[0].starts_with("POST /render "), "{}", reqs[0]);
    assert!(reqs[1].starts_with(&format!("GET /notes/{op} ")), "{}", reqs[1]);
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"), "{a:?}");
    assert_eq!(ws.receipt_of(a[0].id).unwrap()["read_back"]["decided_by"], "present_if");
    assert_eq!(server.failed_handshakes.load(Ordering::SeqCst), 0);
}

/// Issue 27: an `https://` OTLP receiver is verified as a provider's
/// server is: without `OTEL_EXPORTER_OTLP_CERTIFICATE` its self-made
/// certificate is refused (one warning, the run's exit code); with it, the
/// trace goes through in TLS.
#[test]
fn an_https_trace_receiver_is_trusted_by_the_otlp_certificate_variable_only() {
    let server = TlsServer::start();
    let url = format!("https://localhost:{}", server.port);
    let task = json!({"ref": "T1", "provider": "sh", "effect": "local", "action": {"run": ["true"]}});
    let untrusted = Ws::new();
    untrusted.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![task.clone()]));
    let out = untrusted.engine(&["run", "plan.json", "--otlp", &url]);
    out.expect(0, None);
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("traces not exported")).collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(warnings[0].contains("certificate"), "the TLS refusal, in its words: {}", warnings[0]);
    assert!(server.requests.lock().unwrap().is_empty());
    // The engine gave up on the handshake before the server's thread may
    // have counted it.
    let refused = || (server.failed_handshakes.load(Ordering::SeqCst) >= 1).then_some(());
    wait_until(std::time::Duration::from_secs(10), "the server to count the refused handshake", refused);

    let trusted = Ws::new();
    trusted.write_plan("plan.json", &plan(json!({"sh": {"kind": "command"}}), vec![task]));
    let pem = trusted.side.join("receiver.pem");
    std::fs::write(&pem, &server.pem).unwrap();
    let out = trusted.engine_env(
        &["run", "plan.json", "--otlp", &url],
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", pem.to_str().unwrap())],
    );
    out.expect(0, None);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let requests = server.requests.lock().unwrap().clone();
    assert!(!requests.is_empty() && requests.iter().all(|r| r.starts_with("POST /v1/traces HTTP/1.1")), "{requests:?}");

    // A certificate file that cannot be read is refused at its name.
    let missing = trusted.side.join("missing.pem");
    let out = trusted.engine_env(
        &["run", "plan.json", "--otlp", &url],
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", missing.to_str().unwrap())],
    );
    out.expect_code(2);
    assert!(
        out.stderr.contains("USAGE_ERROR") && out.stderr.contains("OTEL_EXPORTER_OTLP_CERTIFICATE"),
        "{}",
        out.stderr
    );
}

/// Python's `http.server` over `ssl` (`fixtures/https/http10_server.py`):
/// HTTP/1.0, the body ended by closing the connection, and no TLS
/// `close_notify` before the close. The status line came, so the answer
/// came: the run completes (not `response_lost`, not `effect_unknown`), the
/// server's own log holds one delivery, and the receipt and the evidence
/// say the body ended without `close_notify` (kept as far as it came).
#[test]
fn an_https_answer_closed_without_close_notify_is_an_answer_with_its_body_marked() {
    let ws = Ws::new();
    let (cert, key) = openssl_self_signed(&ws.side, "server");
    let (cert_path, key_path) = (ws.side.join("server.crt"), ws.side.join("server.key"));
    std::fs::write(&key_path, key).unwrap();
    let (port_file, log) = (ws.side.join("port"), ws.side.join("deliveries.jsonl"));
    let mut server = std::process::Command::new("python3")
        .arg(repo_root().join("fixtures/https/http10_server.py"))
        .arg("--cert")
        .arg(&cert_path)
        .arg("--key")
        .arg(&key_path)
        .arg("--port-file")
        .arg(&port_file)
        .arg("--log")
        .arg(&log)
        .spawn()
        .expect("python3 starts the HTTP/1.0 TLS server");
    let port = wait_until(std::time::Duration::from_secs(20), "the server's port", || {
        std::fs::read_to_string(&port_file).ok().and_then(|p| p.trim().parse::<u16>().ok())
    });
    ws.write("certs/server.crt", &cert);
    https_plan_to(&ws, &format!("https://localhost:{port}/render"), Some("certs/server.crt"));
    let out = ws.run();
    let _ = server.kill();
    let _ = server.wait();
    out.expect(0, None);
    let delivered = read_json_lines(&log);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["idempotency_key"], json!(ws.op_of("T1")));
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str()), (1, "succeeded"), "{a:?}");
    let receipt = ws.receipt_of(a[0].id).expect("a receipt");
    assert_eq!(receipt["http_status"], 200, "{receipt}");
    let cut = receipt["body_cut"].as_str().unwrap_or_default();
    assert!(cut.contains("close_notify"), "the receipt says how the body ended: {receipt}");
    let ev = ws.evidence(a[0].id);
    let http = ev.iter().find(|e| e.1 == "http_response").expect("the answer's evidence");
    assert!(http.2["body_cut"].as_str().unwrap_or_default().contains("close_notify"), "{http:?}");
    let explained = ws.engine(&["explain", "T1"]);
    explained.expect(0, None);
    assert!(explained.stdout.contains("HTTP 200") && explained.stdout.contains("cut short"), "{}", explained.stdout);
    assert!(explained.stdout.contains("delivered"), "the body as far as it came: {}", explained.stdout);
}
