//! The report's shape, read from the source: one module reads the ledger
//! (so the typed ledger interface to come changes one file of the report),
//! and the HTML renderer does no I/O at all.

use std::path::Path;

use crate::common::repo_root;

fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|e| e == "rs" || e == "js") {
            let rel = p.strip_prefix(repo_root()).unwrap().display().to_string();
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn only_document_read_touches_the_ledger() {
    let report = repo_root().join("engine/src/report");
    let mut readers: Vec<String> = sources(&report.join("document"))
        .into_iter()
        .chain(sources(&report.join("html")))
        .filter(|(_, text)| ["store::", "rusqlite", "Store", "conn()"].iter().any(|n| text.contains(n)))
        .map(|(path, _)| path)
        .collect();
    readers.dedup();
    assert_eq!(readers, vec!["engine/src/report/document/read.rs"]);
}

#[test]
fn the_html_renderer_does_no_io() {
    for (path, text) in sources(&repo_root().join("engine/src/report/html")) {
        for io in [
            "std::fs",
            "std::io",
            "std::net",
            "std::process",
            "std::env",
            "SystemTime",
            "now_ms",
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
            "import(",
        ] {
            assert!(!text.contains(io), "{path} uses {io}");
        }
    }
}
