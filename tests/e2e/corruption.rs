//! A damaged store (issue 9, defect 8 and "Corruption tests"): a fixed,
//! seeded set of damages — truncation, zeroed pages, flipped bytes, a lost
//! or damaged WAL, a lost or damaged `-shm` — applied to a store closed
//! cleanly and to one whose engine was SIGKILLed after dispatching. Each
//! case must be detected (`STORE_CORRUPT` naming the store) or harmless
//! (the command's ordinary result), and nothing is ever sent again (the
//! receiver fixture's own log). A store whose `PRAGMA integrity_check`
//! fails must never be trusted by `engine run`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::outcomes::*;

const PAGE: u64 = 4096;

/// A small deterministic generator (SplitMix64), so every run of this test
/// applies the same damages.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, Clone)]
enum Damage {
    /// Keep only the first `pages` pages of the store file.
    TruncatePages(u64),
    /// Cut the store file in the middle of its last page.
    TruncateTail,
    /// Zero one page of the store file (1 = the header page).
    ZeroPage(u64),
    /// Flip these bytes of a file (suffix "" = the store, "-wal", "-shm").
    Flip(&'static str, Vec<u64>),
    /// Cut a file to this many bytes.
    Truncate(&'static str, u64),
    Delete(&'static [&'static str]),
}

fn cases(seed: u64, files: &BTreeMap<String, Vec<u8>>) -> Vec<Damage> {
    let mut rng = Rng(seed);
    let len = |suffix: &str| files.get(&format!("engine.db{suffix}")).map_or(0, |b| b.len() as u64);
    let pages = len("") / PAGE;
    let mut out = vec![
        Damage::Delete(&["-wal"]),
        Damage::Delete(&["-shm"]),
        Damage::Delete(&["-wal", "-shm"]),
        Damage::ZeroPage(1),
        Damage::TruncateTail,
        Damage::TruncatePages(pages / 2),
    ];
    for _ in 0..4 {
        out.push(Damage::ZeroPage(2 + rng.below(pages - 1)));
    }
    for _ in 0..4 {
        let n = 1 + rng.below(4);
        out.push(Damage::Flip("", (0..n).map(|_| 100 + rng.below(len("") - 100)).collect()));
    }
    for suffix in ["-wal", "-shm"] {
        if len(suffix) > 32 {
            out.push(Damage::Flip(suffix, vec![32 + rng.below(len(suffix) - 32)]));
            out.push(Damage::Truncate(suffix, rng.below(len(suffix))));
        }
    }
    out
}

fn apply(dir: &Path, damage: &Damage) {
    let file = |suffix: &str| dir.join(format!("engine.db{suffix}"));
    let edit = |suffix: &str, f: &mut dyn FnMut(&mut Vec<u8>)| {
        let mut bytes = std::fs::read(file(suffix)).unwrap();
        f(&mut bytes);
        std::fs::write(file(suffix), bytes).unwrap();
    };
    match damage {
        Damage::TruncatePages(n) => edit("", &mut |b| b.truncate((n * PAGE) as usize)),
        Damage::TruncateTail => edit("", &mut |b| b.truncate(b.len() - 100)),
        Damage::ZeroPage(p) => edit("", &mut |b| {
            let start = ((p - 1) * PAGE) as usize;
            b[start..start + PAGE as usize].fill(0);
        }),
        Damage::Flip(suffix, offsets) => edit(suffix, &mut |b| {
            for &o in offsets {
                b[o as usize] ^= 0x5a;
            }
        }),
        Damage::Truncate(suffix, n) => edit(suffix, &mut |b| b.truncate(*n as usize)),
        Damage::Delete(suffixes) => {
            for s in suffixes.iter() {
                let _ = std::fs::remove_file(file(s));
            }
        }
    }
}

/// Does SQLite's own `integrity_check` pass on a copy of the store folder?
fn integrity_ok(dir: &Path) -> bool {
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    crate::support::ledger::integrity_check(&copy.path().join("engine.db")).is_some_and(|s| s == "ok")
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn restore(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    for (name, bytes) in files {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// The command's ordinary result, or `STORE_CORRUPT` naming the store;
/// returns whether it was refused.
#[track_caller]
fn ordinary_or_detected(out: &Out, ordinary: i32, store: &Path, case: &str) -> bool {
    match out.code() {
        c if c == ordinary => false,
        2 => {
            let err = &out.json()["error"];
            assert_eq!(err["code"], json!("STORE_CORRUPT"), "{case}: 2 only as STORE_CORRUPT\n{}", out.describe());
            assert_eq!(err["place"], json!(store.display().to_string()), "{case}: names the store\n{}", out.describe());
            true
        }
        _ => panic!("{case}: neither the ordinary exit {ordinary} nor STORE_CORRUPT\n{}", out.describe()),
    }
}

/// Run every damage of `seed` against the store `ws` holds now; `ordinary`
/// is what `engine run` exits on the undamaged store.
fn sweep(ws: &Ws, rcv: &Receiver, seed: u64, ordinary: i32, label: &str) -> (usize, usize) {
    let dir: PathBuf = ws.store().parent().unwrap().to_path_buf();
    let template = snapshot(&dir);
    let (mut detected, mut harmless) = (0, 0);
    for damage in cases(seed, &template) {
        restore(&dir, &template);
        apply(&dir, &damage);
        let case = format!("{label}: {damage:?}");
        let sane = integrity_ok(&dir);
        let sent = rcv.deliveries().len();

        let status = ws.engine_json(&["status"]);
        ordinary_or_detected(&status, 0, &ws.store(), &format!("{case} (status)"));
        let run = ws.run();
        let refused = ordinary_or_detected(&run, ordinary, &ws.store(), &format!("{case} (run)"));
        assert!(refused || sane, "{case}: `engine run` trusted a store that fails integrity_check\n{}", run.describe());
        assert_eq!(rcv.deliveries().len(), sent, "{case}: nothing is sent again");
        eprintln!(
            "{case}: integrity {}, {}",
            if sane { "ok" } else { "fails" },
            if refused { "detected" } else { "harmless" }
        );
        if refused {
            detected += 1;
        } else {
            harmless += 1;
        }
    }
    restore(&dir, &template);
    (detected, harmless)
}

#[test]
fn damage_after_a_clean_shutdown_is_detected_or_harmless() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    ws.run().expect(0, None);
    let (detected, harmless) = sweep(&ws, &rcv, 0x5eed_0001, 0, "clean");
    // Not vacuous: zeroed pages and a cut store file are among the damages,
    // and each of those fails integrity_check (asserted per case above).
    assert!(detected >= 3 && harmless >= 3, "detected {detected}, harmless {harmless}");
}

#[test]
fn damage_after_an_unclean_shutdown_is_detected_or_harmless() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    assert!(ws.run_fp("after_dispatch").killed());
    let op = ws.digest_op("T1");
    rcv.wait_deliveries(&op, 1);
    let (detected, harmless) = sweep(&ws, &rcv, 0x5eed_0002, 3, "unclean");
    assert!(detected >= 3 && harmless >= 3, "detected {detected}, harmless {harmless}");
    assert_eq!(rcv.tries_of(&op), vec![1]);
}

/// A store holding a row of every kind a person's session makes: T1
/// (external) dispatched and the engine killed, found unknown, settled
/// `ok` by a person; T2 (after it) waiting on a person's approval, approved
/// and run; the goal satisfied. Events, attempts, receipts, evidence,
/// checkpoints, blobs, a settlement, an approval, the act chain.
pub fn a_store_a_person_acted_on(rcv: &Receiver) -> Ws {
    let ws = Ws::new();
    let mut gated = http_task("T2", "none");
    gated["requires_approval"] = json!(true);
    gated["depends_on"] = json!(["T1"]);
    ws.write_plan(
        "plan.json",
        &plan("acted", json!({"r": http_provider(rcv, false)}), vec![http_task("T1", "external"), gated]),
    );
    let (t1, t2) = (ws.digest_op("T1"), ws.digest_op("T2"));
    assert!(ws.run_fp("after_dispatch").killed());
    rcv.wait_deliveries(&t1, 1);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.engine_json(&["settle", &t1, "--outcome", "ok", "--note", "the receiver logged it"]).expect(0, None);
    ws.run().expect(4, Some("APPROVAL_REQUIRED"));
    ws.engine_json(&["approve", &t2, "--note", "go"]).expect(0, None);
    ws.run().expect(0, None);
    ws
}

/// `a_store_a_person_acted_on`, with its folder and the files in it as the
/// session left them (for `restore`).
fn acted_on_and_kept() -> (Receiver, Ws, PathBuf, BTreeMap<String, Vec<u8>>) {
    let rcv = Receiver::start(&[]);
    let ws = a_store_a_person_acted_on(&rcv);
    let dir: PathBuf = ws.store().parent().unwrap().to_path_buf();
    let template = snapshot(&dir);
    (rcv, ws, dir, template)
}

/// An error's code and the check it names (`Null` where there is none).
fn verdict(out: &Out) -> (serde_json::Value, serde_json::Value) {
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
    (doc["error"]["code"].clone(), doc["error"]["details"]["check"].clone())
}

/// Where a byte-flip sweep flips, and what it hits there: in every page of
/// the store file, one byte of its structure (page 1's file header, the
/// page's b-tree header and cell pointers) and, if the page holds any,
/// one byte of its cells (the records or keys); seeded, so the same store
/// always gets the same flips. In this test's store nearly every table and
/// index is one page, so this hits each of them, its structure and its
/// rows. It replaced 160 flips spread evenly over the file (114 s in the
/// suite at a load of 10; alone 50 s, 20 CPU-seconds): 145 of them landed
/// where a flip changes nothing a reader looks at (a page's free space),
/// 15 were refused. These 86 found what those missed: a checkpoint that
/// no longer parsed passed verify while reuse took it for absent.
fn page_flips(db: &[u8], seed: u64) -> Vec<(u64, String)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for (i, page) in db.chunks(PAGE as usize).enumerate() {
        let (base, no, len) = (i as u64 * PAGE, i + 1, page.len() as u64);
        // The b-tree header: after the file header on page 1.
        let at = if i == 0 { 100 } else { 0 };
        let header = match page.get(at) {
            Some(2 | 5) => 12,
            Some(10 | 13) => 8,
            // Not a b-tree page (overflow, freelist): any byte of it.
            _ => {
                out.push((base + rng.below(len), format!("page {no} (not a b-tree page)")));
                continue;
            }
        };
        let word = |o: usize| u64::from(u16::from_be_bytes([page[at + o], page[at + o + 1]]));
        let (cells, content) = (
            word(3),
            match word(5) {
                0 => 65_536,
                c => c,
            },
        );
        let structure = (at as u64 + header + 2 * cells).min(len);
        out.push((base + rng.below(structure), format!("page {no} (type {}): its header or cell pointers", page[at])));
        if content < len {
            out.push((base + content + rng.below(len - content), format!("page {no} (type {}): a cell", page[at])));
        }
    }
    out
}

/// Issue 29, defect 4: `engine run` ended "satisfied" on 5 of 160
/// byte-flipped stores that `engine verify` rejects (one of them a
/// revision whose plan was no longer JSON, hidden by the plan cache). Now
/// every command that opens a store its engine did not leave as it is
/// checks it as verify does: where verify refuses, `status` and `run`
/// refuse with its code and its check; where verify passes, they do what
/// they do on the undamaged store. Never exit 70 or 101, nothing sent
/// again. The flips: `page_flips`.
#[test]
fn a_byte_flipped_store_is_refused_by_every_command_exactly_when_verify_refuses_it() {
    let (rcv, ws, dir, template) = acted_on_and_kept();
    let flips = page_flips(&template["engine.db"], 0x5eed_0029);
    let sent = rcv.deliveries().len();
    let (mut refused, mut harmless, mut failures) = (0, 0, Vec::new());
    for (at, what) in &flips {
        let at = *at;
        restore(&dir, &template);
        apply(&dir, &Damage::Flip("", vec![at]));
        let verify = ws.engine_json(&["verify"]);
        let judged = match verify.code() {
            0 => None,
            2 => Some(verdict(&verify)),
            _ => {
                failures.push(format!("byte {at}, {what}: verify\n{}", verify.describe()));
                continue;
            }
        };
        for (args, ordinary) in [(&["status"][..], 0), (&["run", "plan.json"], 0)] {
            let out = ws.engine_json(args);
            // A person's act edited (`STORE_TAMPERED`) refuses a writer; a
            // reader shows it for what it is.
            let shown = args == ["status"] && out.code() == ordinary;
            let agrees = match &judged {
                None => out.code() == ordinary,
                Some(v) if v.0 == "STORE_TAMPERED" && shown => true,
                Some(v) => out.code() == 2 && verdict(&out) == *v,
            };
            if !agrees {
                failures
                    .push(format!("byte {at}, {what}: verify said {judged:?}; engine {args:?}:\n{}", out.describe()));
            }
        }
        if judged.is_some() {
            refused += 1;
        } else {
            harmless += 1;
        }
    }
    restore(&dir, &template);
    assert!(failures.is_empty(), "{} of {} flips:\n{}", failures.len(), flips.len(), failures.join("\n"));
    assert_eq!(rcv.deliveries().len(), sent, "nothing was sent again");
    eprintln!(
        "byte flips: {} in {} pages: {refused} refused by verify and every command, {harmless} harmless",
        flips.len(),
        template["engine.db"].len() as u64 / PAGE
    );
    // Not vacuous: most flips hit what a reader checks (79-80 of 86
    // refused when written: 6-7 land where nothing reads), and a few verify passes show the commands ordinary.
    assert!(refused >= 40 && harmless >= 3, "not vacuous: {refused} refused, {harmless} harmless");
}

/// Issue 29, defect 5: an edited act was reported `STORE_CORRUPT` when a
/// check of the ledger met the edit before the act chain did (an edited
/// settlement's outcome breaks `settlements`; an approval's request,
/// `approvals`). Every edit of a person's act is `STORE_TAMPERED`, naming
/// the row, from verify and every command that would act (a reader shows
/// the act for what it is, never as damage).
#[test]
fn every_edit_of_a_persons_act_is_tampering_whichever_check_meets_it_first() {
    let (_rcv, ws, dir, template) = acted_on_and_kept();
    let mut failures = Vec::new();
    for (edit, row) in [
        ("UPDATE settlements SET outcome = 'not_run'", "settlements row 1"),
        ("UPDATE settlements SET note = CAST(X'FF' AS TEXT)", "settlements row 1"),
        ("DELETE FROM settlements", "settlements row 1"),
        ("UPDATE approvals SET request_digest = 'another'", "approvals row 1"),
        ("UPDATE approvals SET consumed_by = NULL", "approvals row 1"),
    ] {
        restore(&dir, &template);
        crate::support::ledger::tamper_batch(&ws.store(), edit);
        // Verify and a writer refuse it; a reader may show the store with
        // the act marked (nothing acts on it), never as damage.
        for (args, refuses) in
            [(&["verify"][..], true), (&["run", "plan.json"], true), (&["status"], false), (&["explain", "T1"], false)]
        {
            let out = ws.engine_json(args);
            let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
            let message = doc["error"]["message"].as_str().unwrap_or_default();
            let tampered = out.code() == 2 && doc["error"]["code"] == "STORE_TAMPERED" && message.contains(row);
            if !(tampered || !refuses && out.code() == 0) {
                failures
                    .push(format!("{edit}: engine {args:?} (wants STORE_TAMPERED naming {row})\n{}", out.describe()));
            }
        }
    }
    restore(&dir, &template);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// One flipped byte in the schema's text (`sqlite_master`'s SQL): SQLite
/// refuses to read the schema before any query, so every command meets it
/// at its first statement. Each says `STORE_CORRUPT` naming the check
/// (`schema`) and the store, as verify does — not a bare "store is
/// corrupt".
#[test]
fn a_flipped_byte_in_the_schemas_text_is_named_check_schema_by_every_command() {
    let ws = Ws::new();
    let task = json!({"ref": "T1", "title": "write", "provider": "sh", "effect": "local",
                      "action": {"run": ["sh", "-c", "echo hi > out.txt"]}, "outputs": ["out.txt"]});
    ws.write_plan("plan.json", &crate::e2e::common::plan(vec![task]));
    ws.run().expect(0, None);
    let store = ws.store();
    let mut bytes = std::fs::read(&store).unwrap();
    let text = bytes.windows(21).position(|w| w == b"CREATE TABLE attempts").expect("the schema's text is in the file");
    // `CREATE TABLE` -> `CREATE UABLE`: the schema no longer parses.
    bytes[text + 7] ^= 0x01;
    std::fs::write(&store, bytes).unwrap();
    let mut failures = Vec::new();
    for args in [&["verify"][..], &["status"], &["explain", "T1"], &["log"], &["run", "plan.json"]] {
        let out = ws.engine_json(args);
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        let err = &doc["error"];
        let named = out.code() == 2
            && err["code"] == "STORE_CORRUPT"
            && err["details"]["check"] == "schema"
            && err["place"] == json!(store.display().to_string())
            && err["message"].as_str().is_some_and(|m| m.contains("check `schema` failed"));
        if !named {
            failures.push(format!("engine {args:?}\n{}", out.describe()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
