//! The report in a real headless Chromium: the DOM after its script ran
//! (every task ref and its state, the waiting commands), no network
//! request and no CSP violation, provider output shown as text and never
//! run, a click opening a task's details, and a screenshot that is not
//! blank. Without Chromium these tests fail, naming how to install it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cdp::{png_colours, Browser};
use super::scenario::{self, MIXED_STATES};

/// Where a test leaves its screenshot, if asked (`REPORT_SCREENSHOTS=DIR`).
fn keep_screenshot(name: &str, png: &[u8]) {
    if let Some(dir) = std::env::var_os("REPORT_SCREENSHOTS") {
        std::fs::write(Path::new(&dir).join(name), png).unwrap();
    }
}

/// What the page shows once its script ran.
const DOM: &str = r##"JSON.stringify({
  ready: document.documentElement.getAttribute("data-report-ready"),
  pwned: document.documentElement.getAttribute("data-pwned"),
  scripts: document.scripts.length,
  images: document.images.length,
  nodes: Array.from(document.querySelectorAll("#dag-svg .node")).map(function (n) {
    return {ref: n.getAttribute("data-ref"), state: n.getAttribute("data-state"), text: n.textContent};
  }),
  details: Array.from(document.querySelectorAll("details.task > summary")).map(function (s) { return s.textContent; }),
  commands: Array.from(document.querySelectorAll("#waiting .cmd code")).map(function (c) { return c.textContent; }),
  text: document.body.innerText,
  all: document.body.textContent
})"##;

fn dom(b: &mut Browser) -> Value {
    let v = b.eval(DOM);
    serde_json::from_str(v.as_str().expect("a JSON string")).unwrap()
}

/// Open `page` and check what every report page must hold: its script ran
/// without an error, it fetched nothing and broke no policy.
fn open_report(b: &mut Browser, page: &Path) -> Value {
    b.open_file(page);
    let d = dom(b);
    assert_eq!(d["ready"], "1", "the report's script did not run");
    let name = page.file_name().unwrap().to_string_lossy().to_string();
    assert_eq!(b.requests_besides(&name), Vec::<String>::new(), "the page made network requests");
    assert_eq!(b.csp_violations(), Vec::<String>::new(), "the page broke its Content-Security-Policy");
    assert_eq!(b.exceptions(), Vec::<Value>::new(), "the page's script threw");
    assert_eq!(d["scripts"], 1, "only the report's own script is in the page");
    d
}

fn node_states(d: &Value) -> Vec<(String, String)> {
    d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let (r, s) = (n["ref"].as_str().unwrap(), n["state"].as_str().unwrap());
            assert!(n["text"].as_str().unwrap().contains(s), "node {r} does not show its state: {n}");
            (r.to_string(), s.to_string())
        })
        .collect()
}

fn assert_not_blank(png: &[u8]) {
    let (colours, ink, (w, h)) = png_colours(png);
    assert!(w >= 1000 && h >= 600, "screenshot is {w}x{h}");
    assert!(colours >= 32, "screenshot has only {colours} distinct colours");
    assert!(ink > 0.05, "screenshot is {:.1}% ink: blank", ink * 100.0);
}

#[test]
fn the_money_demo_report_in_a_browser() {
    let ws = scenario::money();
    let page = ws.dir.join("report.html");
    let out = ws.engine(&["report", "--html", "report.html"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    let mut b = Browser::launch(1280, 1600);
    let d = open_report(&mut b, &page);
    assert_eq!(node_states(&d), vec![("T1".into(), "succeeded".into()), ("T2".into(), "succeeded".into())]);
    let text = d["text"].as_str().unwrap();
    assert!(text.contains("Nothing in this report waits on a person."), "{text}");
    assert!(text.contains("every acceptance check passed"));
    // T2's details: the failed attempt's class, and the agent's claim kept apart.
    b.eval(r#"document.querySelector('.node[data-ref="T2"]').dispatchEvent(new MouseEvent("click", {bubbles: true, cancelable: true}))"#);
    let panel = b.eval(r#"JSON.stringify({hidden: document.getElementById("panel").hidden, text: document.getElementById("panel").innerText})"#);
    let panel: Value = serde_json::from_str(panel.as_str().unwrap()).unwrap();
    assert_eq!(panel["hidden"], false, "clicking T2 opened no details");
    let p = panel["text"].as_str().unwrap();
    for want in ["validation_failed", "validation_check_failed", "not verified", "external_ai_message", "repair"] {
        assert!(p.contains(want), "T2's details lack {want:?}:\n{p}");
    }
    let png = b.screenshot(None);
    keep_screenshot("money.png", &png);
    assert_not_blank(&png);
}

#[test]
fn the_mixed_report_in_a_browser_shows_states_commands_and_output_as_text() {
    let m = scenario::mixed();
    let doc = m.ws.engine_json(&["report", "--html", "report.html"]).expect(0, None).json();
    let mut b = Browser::launch(1280, 1400);
    let d = open_report(&mut b, &m.ws.dir.join("report.html"));
    let want: Vec<(String, String)> = MIXED_STATES.iter().map(|(r, s)| (r.to_string(), s.to_string())).collect();
    assert_eq!(node_states(&d), want);
    let summaries: Vec<&str> = d["details"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    for (r, s) in MIXED_STATES {
        assert!(summaries.iter().any(|x| x.contains(r) && x.contains(s)), "no details of {r} ({s}): {summaries:?}");
    }
    // The commands a person runs, with the real operation ids.
    let send_op = m.ws.op_of("send-invoice");
    let publish_op = doc["tasks"][3]["operation_id"].as_str().unwrap().to_string();
    let commands: Vec<&str> = d["commands"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    for want in [
        format!("engine settle {send_op} --outcome ok --note \"…\""),
        format!("engine settle {send_op} --outcome not_run --note \"…\""),
        format!("engine approve {publish_op} --note \"…\""),
    ] {
        assert!(commands.contains(&want.as_str()), "{want} not among {commands:?}");
    }
    // The provider's markup is text, its escapes visible, and none of it ran.
    assert_eq!(d["pwned"], Value::Null, "provider output ran as script");
    assert_eq!(d["images"], 0, "provider output made an element");
    assert!(!d["all"].as_str().unwrap().contains('\u{1b}'), "a raw escape byte reached the page");
    // Opened, lint's details show it all as text, the escapes visible.
    b.eval(
        r#"document.querySelector('.node[data-ref="lint"]').dispatchEvent(new MouseEvent("click", {bubbles: true}))"#,
    );
    let panel = b.eval(r#"document.getElementById("panel").innerText"#);
    let text = panel.as_str().unwrap();
    assert!(text.contains("<script>document.documentElement.setAttribute('data-pwned','script')</script>"), "{text}");
    assert!(text.contains("</script></pre><img src=x onerror="), "the img tag is not shown as text: {text}");
    assert!(text.contains(r"colour \x1b[31mred\x1b[0m title \x1b]0;owned-title\x07 end"), "{text}");
    assert_eq!(b.eval(r#"document.documentElement.getAttribute("data-pwned")"#), Value::Null);
    // The approval, who gave it and their note (escaped too).
    b.eval(r#"document.querySelector('.node[data-ref="publish"]').dispatchEvent(new MouseEvent("click", {bubbles: true}))"#);
    let panel = b.eval(r#"document.getElementById("panel").innerText"#);
    let panel = panel.as_str().unwrap();
    assert!(panel.contains("alice") && panel.contains("release notes <b>checked</b>"), "{panel}");
    let png = b.screenshot(None);
    keep_screenshot("mixed.png", &png);
    assert_not_blank(&png);
}

/// A listener on loopback that counts the connections made to it.
fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten().take(16) {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 1024];
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (port, hits)
}

fn wait_hits(hits: &AtomicUsize, n: usize) -> usize {
    let start = Instant::now();
    while hits.load(Ordering::SeqCst) < n && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    hits.load(Ordering::SeqCst)
}

#[test]
fn the_network_check_catches_a_page_that_fetches() {
    let dir = tempfile::tempdir().unwrap();
    let (port, hits) = listener();
    let img = format!("<img src=\"http://127.0.0.1:{port}/x\">");
    // Without a policy the image is fetched: the listener sees it, and so
    // does the check.
    let open = dir.path().join("open.html");
    std::fs::write(&open, format!("<!DOCTYPE html><html><body><p>hello</p>{img}</body></html>")).unwrap();
    let mut b = Browser::launch(800, 600);
    b.open_file(&open);
    assert_eq!(wait_hits(&hits, 1), 1, "the page's fetch did not reach the listener");
    let seen = b.requests_besides("open.html");
    assert!(seen.iter().any(|u| u.contains(&format!("127.0.0.1:{port}/x"))), "the check missed the fetch: {seen:?}");
    // Under the report's policy nothing leaves, and the attempt is caught
    // as a violation.
    let strict = dir.path().join("strict.html");
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src 'none'\">";
    std::fs::write(&strict, format!("<!DOCTYPE html><html><head>{csp}</head><body>{img}</body></html>")).unwrap();
    b.open_file(&strict);
    let violations = b.csp_violations();
    assert!(violations.iter().any(|v| v.contains(&format!("127.0.0.1:{port}"))), "{violations:?}");
    assert_eq!(wait_hits(&hits, 2), 1, "the policy let a fetch through");
}
