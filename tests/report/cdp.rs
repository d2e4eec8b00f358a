//! A real headless Chromium (Debian's `chromium`), driven through the
//! DevTools protocol over a pipe (`--remote-debugging-pipe`: commands on
//! its fd 3, answers on its fd 4, each message ended by a NUL byte) — no
//! port, no crate beyond the standard library. It records every request
//! the page starts (`Network.requestWillBeSent`) and every Content
//! Security Policy violation (a listener injected before any page script,
//! which CSP does not govern), so a page that fetches anything, or tries
//! to and is blocked, is caught.

#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Where Chromium is: `$CHROMIUM`, else the first of the usual names on PATH.
pub fn chromium_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "Chromium was not found (tried $CHROMIUM, chromium, chromium-browser, google-chrome on PATH). \
         These tests need a real headless browser: install Debian's `chromium` package with \
         `.ci/install-chromium` (as root), or point $CHROMIUM at a Chromium binary."
    );
}

pub struct Browser {
    child: Child,
    to: File,
    from: Receiver<Value>,
    next_id: u64,
    /// Events not yet looked at, in arrival order.
    pub events: Vec<Value>,
    session: String,
    _profile: tempfile::TempDir,
}

/// A pipe whose two ends are close-on-exec and numbered above 9 (so that
/// moving them to 3 and 4 in the child never overwrites one with the other).
fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    let high = |fd: RawFd| {
        // SAFETY: duplicating a descriptor we own, then closing the original.
        let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        assert!(h >= 10, "fcntl");
        unsafe { libc::close(fd) };
        h
    };
    (high(fds[0]), high(fds[1]))
}

impl Browser {
    /// Start Chromium headless with a fresh profile and open one page
    /// (`width` × `height`), with network and CSP recording on.
    pub fn launch(width: u32, height: u32) -> Browser {
        let exe = chromium_path();
        let profile = tempfile::Builder::new().prefix("engine-chromium-").tempdir().unwrap();
        let (cmd_read, cmd_write) = pipe();
        let (ans_read, ans_write) = pipe();
        let mut command = Command::new(&exe);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(cmd_read, 3) < 0 || libc::dup2(ans_write, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start Chromium at {}: {e}", exe.display()));
        // SAFETY: the parent's ends are ours alone from here on.
        let to = unsafe {
            libc::close(cmd_read);
            libc::close(ans_write);
            File::from_raw_fd(cmd_write)
        };
        let reader = unsafe { File::from_raw_fd(ans_read) };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(reader);
            loop {
                let mut buf = Vec::new();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        buf.pop();
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                            if tx.send(v).is_err() {
                                break;
                            }
                        }
                    }
                }
            }
        });
        let mut b =
            Browser { child, to, from: rx, next_id: 0, events: Vec::new(), session: String::new(), _profile: profile };
        b.open_page(width, height);
        b
    }

    fn open_page(&mut self, width: u32, height: u32) {
        let target = self.call_browser("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("a target id").to_string();
        let attached = self.call_browser("Target.attachToTarget", json!({"targetId": target_id, "flatten": true}));
        self.session = attached["sessionId"].as_str().expect("a session id").to_string();
        for domain in ["Page.enable", "Network.enable", "Runtime.enable"] {
            self.call(domain, json!({}));
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        // Runs before any script of each page, outside its CSP.
        self.call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": "window.__cspViolations = []; document.addEventListener('securitypolicyviolation', function (e) { window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI); });"}),
        );
    }

    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to Chromium's pipe");
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self.from.recv_timeout(left).unwrap_or_else(|_| panic!("no answer from Chromium to {method}"));
            if m["id"] == json!(id) {
                if let Some(e) = m.get("error") {
                    panic!("Chromium refused {method}: {e}");
                }
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A command to the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.send(method, params, Some(&s))
    }

    /// Wait for an event of the page (already received, or to come).
    pub fn wait_event(&mut self, method: &str) -> Value {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            if let Some(e) =
                self.events.iter().find(|e| e["method"] == method && e["sessionId"] == self.session.as_str())
            {
                return e.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self.from.recv_timeout(left).unwrap_or_else(|_| panic!("Chromium sent no {method}"));
            self.events.push(m);
        }
    }

    /// Open `path` from disk and wait until it loaded (and, if it has the
    /// report's script, until that script ran).
    pub fn open_file(&mut self, path: &Path) {
        let url = format!("file://{}", path.canonicalize().unwrap().display());
        self.events.retain(|e| e["method"] != "Page.loadEventFired");
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired");
    }

    /// Evaluate `expression` in the page and return its value (JSON).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true, "awaitPromise": true}));
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("the page threw evaluating {expression}: {ex}");
        }
        r["result"]["value"].clone()
    }

    /// Every request the page started, but for the page itself (`page_url`).
    pub fn requests_besides(&mut self, page_url_suffix: &str) -> Vec<String> {
        self.drain();
        self.events
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .map(|e| e["params"]["request"]["url"].as_str().unwrap_or("").to_string())
            .filter(|u| !u.ends_with(page_url_suffix))
            .collect()
    }

    /// Content Security Policy violations the page reported.
    pub fn csp_violations(&mut self) -> Vec<String> {
        let v = self.eval("JSON.stringify(window.__cspViolations || ['listener missing'])");
        serde_json::from_str(v.as_str().unwrap_or("[]")).unwrap_or_default()
    }

    /// Uncaught exceptions of the page's scripts.
    pub fn exceptions(&mut self) -> Vec<Value> {
        self.drain();
        self.events.iter().filter(|e| e["method"] == "Runtime.exceptionThrown").cloned().collect()
    }

    /// Take in whatever arrived meanwhile (after a short settle).
    fn drain(&mut self) {
        std::thread::sleep(Duration::from_millis(200));
        while let Ok(m) = self.from.try_recv() {
            self.events.push(m);
        }
    }

    /// A PNG of the viewport (or of `height` pixels from the top, if larger).
    pub fn screenshot(&mut self, full_height: Option<u32>) -> Vec<u8> {
        let mut params = json!({"format": "png"});
        if let Some(h) = full_height {
            params["captureBeyondViewport"] = json!(true);
            params["clip"] = json!({"x": 0, "y": 0, "width": 1280, "height": h, "scale": 1});
        }
        let r = self.call("Page.captureScreenshot", params);
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(r["data"].as_str().expect("screenshot data")).expect("base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.to.write_all(b"{\"id\":999999,\"method\":\"Browser.close\"}\0");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Distinct colours in a PNG, and the share of pixels that are not the
/// most common colour (the background).
pub fn png_colours(bytes: &[u8]) -> (usize, f64, (u32, u32)) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    let mut counts: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    let pixels = &buf[..info.buffer_size()];
    for px in pixels.chunks_exact(channels) {
        *counts.entry(px).or_default() += 1;
    }
    let total = pixels.len() / channels;
    let background = counts.values().copied().max().unwrap_or(0);
    (counts.len(), 1.0 - background as f64 / total.max(1) as f64, (info.width, info.height))
}
