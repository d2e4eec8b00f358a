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

use crate::outcomes::*;

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
        70 => {
            let err = &out.json()["error"];
            assert_eq!(err["code"], json!("STORE_CORRUPT"), "{case}: 70 only as STORE_CORRUPT\n{}", out.describe());
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
