//! The fixtures a test starts, and small file helpers: the HTTP receiver
//! (`fixtures/receiver/`) with its own delivery log, a fake HTTP service
//! for answers the receiver cannot be scripted to give, the MCP server's
//! command line (`fixtures/mcp/`), and copies and snapshots of folders.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::process::wait_until;

/// The repository root (the engine package's manifest is there; the
/// suite's, `engine-suite`, is tests/Cargo.toml).
pub fn repo_root() -> PathBuf {
    engine_suite::package_dir().parent().expect("tests/ is in the repository").to_path_buf()
}

/// The receiver fixture (`fixtures/receiver/receiver.py`): a real HTTP
/// service whose delivery log is the ground truth of what was delivered.
pub struct Receiver {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
    _dir: TempDir,
}

impl Receiver {
    /// Start it with extra flags (`--observe`, `--dedupe`).
    pub fn start(flags: &[&str]) -> Receiver {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("deliveries.jsonl");
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(repo_root().join("fixtures/receiver/receiver.py"))
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the receiver fixture");
        let mut r = Receiver { child, port: 0, log, _dir: dir };
        r.port = wait_until(Duration::from_secs(10), "the receiver's port file", || {
            fs::read_to_string(&port_file).ok().and_then(|s| s.trim().parse().ok())
        });
        r
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every delivery in the receiver's own log, in order.
    pub fn deliveries(&self) -> Vec<Value> {
        read_json_lines(&self.log)
    }

    pub fn deliveries_of(&self, key: &str) -> Vec<Value> {
        self.deliveries().into_iter().filter(|d| d["key"] == key).collect()
    }

    /// The `Engine-Try` of each delivery of `key`, in order.
    pub fn tries_of(&self, key: &str) -> Vec<i64> {
        self.deliveries_of(key).iter().map(|d| d["try"].as_i64().expect("try is a number")).collect()
    }

    /// Wait until the log holds at least `n` deliveries of `key` (a killed
    /// client's request may still be on its way through the receiver).
    pub fn wait_deliveries(&self, key: &str, n: usize) -> Vec<Value> {
        wait_until(Duration::from_secs(5), &format!("{n} deliveries of {key}"), || {
            let d = self.deliveries_of(key);
            (d.len() >= n).then_some(d)
        })
    }

    /// `POST /_control` (see the fixture's README).
    pub fn control(&self, doc: Value) {
        let (status, body) = http(self.port, "POST", "/_control", Some(&doc.to_string()), &[]);
        assert_eq!(status, 200, "control refused: {body}");
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 exchange on loopback: (status, body).
pub fn http(port: u16, method: &str, path: &str, body: Option<&str>, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.unwrap_or("");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// A one-off HTTP service on loopback that answers every request with a
/// fixed status and body, and records each request's `Idempotency-Key` and
/// `Engine-Try` (for answers the receiver fixture cannot be scripted to give),
/// and every header of each request (`headers`).
pub struct FakeHttp {
    pub port: u16,
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
    pub all_headers: std::sync::Arc<std::sync::Mutex<Vec<Headers>>>,
}

/// One request's headers: names in lower case, values trimmed.
pub type Headers = Vec<(String, String)>;

impl FakeHttp {
    pub fn start(status_line: &'static str, body: String) -> FakeHttp {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let all_headers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, headers_log) = (seen.clone(), all_headers.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let (mut key, mut try_no, mut len) = (String::new(), String::new(), 0usize);
                let mut headers = Vec::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(':') {
                        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
                        match k.to_ascii_lowercase().as_str() {
                            "idempotency-key" => key = v.trim().to_string(),
                            "engine-try" => try_no = v.trim().to_string(),
                            "content-length" => len = v.trim().parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                }
                let mut buf = vec![0u8; len];
                let _ = r.read_exact(&mut buf);
                log.lock().unwrap().push((key, try_no));
                headers_log.lock().unwrap().push(headers);
                let answer = format!(
                    "HTTP/1.1 {status_line}\r\nContent-Type: application/json\r\nRetry-After: 0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes());
            }
        });
        FakeHttp { port, seen, all_headers }
    }

    /// The value of header `name` (lower case) in each request, in order.
    pub fn header(&self, name: &str) -> Vec<Option<String>> {
        let all = self.all_headers.lock().unwrap();
        all.iter().map(|h| h.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())).collect()
    }

    pub fn requests(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

/// The MCP fixture server (`fixtures/mcp/server.py`) as a provider's
/// `command`, writing its delivery log to `log`, with extra `flags`.
pub fn mcp_server_command(log: &Path, flags: &[&str]) -> Vec<String> {
    let mut command = vec![
        "python3".to_string(),
        repo_root().join("fixtures/mcp/server.py").to_string_lossy().into_owned(),
        "--log".to_string(),
        log.to_string_lossy().into_owned(),
    ];
    command.extend(flags.iter().map(|f| f.to_string()));
    command
}

/// A delivery log (one JSON document a line); empty when there is none yet.
pub fn read_json_lines(path: &Path) -> Vec<Value> {
    match fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Every file under `dir` (relative path → bytes), to prove nothing in a
/// store folder was touched.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs::read_dir(dir).expect("read dir") {
            let entry = entry.expect("dir entry");
            let p = entry.path();
            let rel = p.strip_prefix(root).expect("under root").to_string_lossy().into_owned();
            let ft = entry.file_type().expect("file type");
            if ft.is_dir() {
                walk(root, &p, out);
            } else if ft.is_symlink() {
                out.insert(rel, format!("-> {}", fs::read_link(&p).expect("readlink").display()).into_bytes());
            } else {
                out.insert(rel, fs::read(&p).expect("read file"));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// Copy a folder (never `.engine/` or `__pycache__`).
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("dir entry");
        let name = entry.file_name();
        if name == ".engine" || name == "__pycache__" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().expect("file type").is_dir() {
            fs::create_dir_all(&dst).expect("create dir");
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).expect("copy file");
        }
    }
}
