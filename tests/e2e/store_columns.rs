//! Issue 29, defect 3: `engine verify` panicked (exit 101) on bytes that
//! are not UTF-8 in a text column, while other commands read on. Here every
//! text and blob column of a real store (one a person acted on: settled,
//! approved) is set to values the engine never writes — bytes that are
//! not UTF-8, bytes where text belongs, numbers, JSON of another shape,
//! terminal and bidi controls — and `verify` and every reading command
//! must exit with a documented code and one JSON document: never 70, never
//! 101. Where verify refuses the store, every command refuses it with
//! verify's code (a reader may show an act edited outside the engine,
//! `STORE_TAMPERED`, for what it is).

use proptest::prelude::*;
use serde_json::Value;

use super::corruption::a_store_a_person_acted_on;
use super::outcomes::*;
use crate::support::ledger::{set_first, value_columns, Stored};

/// Every command that reads the ledger, and `run`, which reads it all.
const READERS: &[&[&str]] = &[
    &["verify"],
    &["status"],
    &["goals"],
    &["log"],
    &["explain", "T1"],
    &["explain", "T2"],
    &["output", "T1"],
    &["report", "--json"],
    &["run", "plan.json"],
];

/// The error codes `docs/codes.md` documents.
fn documented(code: &str) -> bool {
    engine::error::Code::ALL.iter().any(|c| c.as_str() == code)
}

/// A store to damage, made once (each case restores it).
struct Template {
    ws: Ws,
    _rcv: Receiver,
    files: Vec<(std::path::PathBuf, Vec<u8>)>,
    columns: Vec<(String, String)>,
    /// What each of `READERS` does on the undamaged store: exit, error code.
    ordinary: Vec<(i32, Option<String>)>,
}

/// A command's exit and error code (`None`: no error), and its document.
fn outcome(out: &Out) -> ((i32, Option<String>), Option<Value>) {
    let doc: Option<Value> = serde_json::from_str(&out.stdout).ok();
    let code = doc.as_ref().and_then(|d| d["error"]["code"].as_str().map(str::to_string));
    ((out.code(), code), doc)
}

impl Template {
    fn new() -> Template {
        let rcv = Receiver::start(&[]);
        let ws = a_store_a_person_acted_on(&rcv);
        let dir = ws.store().parent().unwrap().to_path_buf();
        let files = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect();
        let columns = value_columns(&ws.store());
        let mut t = Template { ws, _rcv: rcv, files, columns, ordinary: Vec::new() };
        t.ordinary = READERS.iter().map(|args| outcome(&t.ws.engine_json(args)).0).collect();
        t
    }

    fn restore(&self) {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.ws.store().parent().unwrap().to_path_buf();
        for e in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        for (p, bytes) in &self.files {
            std::fs::write(p, bytes).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }

    /// Set one column of one row; `None` when the store refuses the value
    /// (a NOT NULL or CHECK constraint, an append-only table): no case.
    /// Otherwise the findings of every command on the damaged store.
    fn case(&self, column: usize, value: &Stored, readers: &[&[&str]]) -> Option<Vec<String>> {
        let (table, name) = &self.columns[column % self.columns.len()];
        self.restore();
        if !set_first(&self.ws.store(), table, name, value) {
            return None;
        }
        let case = format!("{table}.{name} = {value:?}");
        let mut findings = Vec::new();
        let mut refused: Option<Value> = None;
        for args in readers {
            let out = self.ws.engine_json(args);
            let ((_, code), doc) = outcome(&out);
            let ordinary = READERS.iter().position(|r| r == args).and_then(|i| self.ordinary.get(i));
            let bad_exit = matches!(out.exit(), None | Some(70) | Some(101)) || out.stderr.contains("panicked");
            if bad_exit || doc.is_none() || code.as_deref().is_some_and(|c| !documented(c)) {
                findings.push(format!("{case}: engine {args:?}\n{}", out.describe()));
                continue;
            }
            if *args == ["verify"] && out.code() != 0 {
                refused = doc.map(|d| d["error"]["code"].clone());
            } else if let Some(want) = &refused {
                // A person's act edited refuses a writer; a reader may show
                // it (doing what it does on the undamaged store).
                let shown = *want == "STORE_TAMPERED" && args[0] != "run" && ordinary == Some(&outcome(&out).0);
                if !shown && (out.code() != 2 || code.as_deref() != want.as_str()) {
                    findings.push(format!("{case}: verify refused with {want}; engine {args:?}\n{}", out.describe()));
                }
            }
        }
        Some(findings)
    }
}

/// A value the engine never writes, for any column.
fn odd_value() -> impl Strategy<Value = Stored> {
    let texts = prop::sample::select(vec![
        "",
        "{}",
        "[]",
        "null",
        "7",
        "\"x\"",
        "{\"kind\": 7}",
        "not json",
        "{\"a\":",
        "succeeded",
        "\u{1b}]52;c;aGk=\u{7}",
        "\u{202e}txt.exe",
        "\u{9b}31m",
    ]);
    prop_oneof![
        texts.prop_map(|t| Stored::Text(t.as_bytes().to_vec())),
        "\\PC{0,24}".prop_map(|t| Stored::Text(t.into_bytes())),
        prop::collection::vec(any::<u8>(), 0..24).prop_map(Stored::Text),
        prop::collection::vec(any::<u8>(), 0..24).prop_map(Stored::Bytes),
        any::<i64>().prop_map(Stored::Int),
        Just(Stored::Null),
    ]
}

/// Every column once, with text that is not UTF-8 (the value):
/// `verify`, `status` and `run` refuse it alike, never 70 or 101.
#[test]
fn every_column_with_text_that_is_not_utf8_is_refused_alike() {
    let t = Template::new();
    assert!(t.columns.len() >= 40, "a store with rows in most tables: {:?}", t.columns);
    let not_utf8 = Stored::Text(vec![0x7b, 0xe1, 0x22, 0x7d]);
    let (mut cases, mut findings) = (0, Vec::new());
    for i in 0..t.columns.len() {
        if let Some(f) = t.case(i, &not_utf8, &[&["verify"], &["status"], &["run", "plan.json"]]) {
            cases += 1;
            findings.extend(f);
        }
    }
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
    assert!(cases >= 30, "only {cases} columns took the value");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(24),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any column, any odd value: every reading command exits with a
    /// documented code and one JSON document, and refuses what verify
    /// refuses.
    #[test]
    fn any_value_in_any_column_gets_a_documented_code_from_every_command(
        column in any::<prop::sample::Index>(),
        value in odd_value(),
    ) {
        thread_local!(static TEMPLATE: Template = Template::new());
        TEMPLATE.with(|t| {
            let findings = t.case(column.index(t.columns.len()), &value, READERS).unwrap_or_default();
            prop_assert!(findings.is_empty(), "{}", findings.join("\n\n"));
            Ok(())
        })?;
    }
}
