//! `engine stores`: one line per store in the state folder — its
//! workspace (and whether it is still there), size, when it was last
//! written, what waits on a person in it — and what `--prune` did, or
//! would do, with the reason.

use serde_json::{json, Value};

use super::Output;
use crate::clock::utc;
use crate::commands::stores::{Entry, Fate, Listing};
use crate::decide::prune::{Kept, Verdict};

pub fn render(listing: &Listing) -> Output {
    let mut text = format!("stores in {}\n", listing.root.display());
    if listing.entries.is_empty() {
        text.push_str("  none\n");
    }
    for e in &listing.entries {
        text.push_str(&line(e));
    }
    if listing.left_out > 0 {
        text.push_str(&format!("  … and {} more store folder(s), not examined\n", listing.left_out));
    }
    text.push_str(&summary(listing));
    let stores: Vec<Value> = listing.entries.iter().map(row).collect();
    let json = json!({
        "ok": true,
        "root": listing.root,
        "pruned": listing.pruned,
        "stores": stores,
        "removed": count(listing, |f| matches!(f, Fate::Removed { .. })),
        "kept": count(listing, |f| !matches!(f, Fate::Removed { .. })),
        "left_out": listing.left_out,
    });
    Output { text, json, exit_code: 0 }
}

fn count(listing: &Listing, f: impl Fn(&Fate) -> bool) -> usize {
    listing.entries.iter().filter(|e| f(&e.fate)).count()
}

/// `  WORKSPACE [gone]  SIZE  last written TIME  WAITING  — FATE`
fn line(e: &Entry) -> String {
    let s = &e.store;
    let workspace = match &s.workspace {
        Some(w) if s.workspace_exists => w.display().to_string(),
        Some(w) => format!("{} (gone)", w.display()),
        None => "(no workspace recorded)".to_string(),
    };
    let written = s.last_written_ms.map_or_else(|| "never".to_string(), utc);
    let waiting = match &s.unsettled {
        Ok(u) if u.total() == 0 => "nothing waits on a person".to_string(),
        Ok(u) => format!("{} unknown, {} in doubt", u.unknown, u.in_doubt),
        Err(_) => "unreadable".to_string(),
    };
    format!(
        "  {workspace}\n      {}  written {written}  {waiting}  {}\n      {}\n",
        size(s.bytes),
        fate_text(e),
        s.store().display()
    )
}

fn fate_text(e: &Entry) -> String {
    let kept = |k: &Kept| match k {
        Kept::Unsettled { .. } | Kept::Unreadable(_) => format!(
            "kept: {} (see `engine status --store {}`; --force removes it anyway)",
            k.why(),
            e.store.store().display()
        ),
        _ => format!("kept: {}", k.why()),
    };
    match &e.fate {
        Fate::Would(Verdict::Remove { forced: false }) => "→ --prune removes it (its workspace is gone)".to_string(),
        Fate::Would(Verdict::Remove { forced: true }) => "→ --prune --force removes it".to_string(),
        Fate::Would(Verdict::Keep(k)) | Fate::Kept(k) => kept(k),
        Fate::Removed { forced: false } => "REMOVED (its workspace is gone)".to_string(),
        Fate::Removed { forced: true } => "REMOVED with --force (its workspace is gone)".to_string(),
        Fate::NotRemoved(why) => format!("not removed: {why}"),
    }
}

fn summary(listing: &Listing) -> String {
    let n = listing.entries.len();
    let gone = listing.entries.iter().filter(|e| e.store.workspace.is_some() && !e.store.workspace_exists).count();
    if listing.pruned {
        let removed: Vec<&Entry> = listing.entries.iter().filter(|e| matches!(e.fate, Fate::Removed { .. })).collect();
        let freed: u64 = removed.iter().map(|e| e.store.bytes).sum();
        format!("removed {} ({}), kept {}\n", super::count(removed.len(), "store"), size(freed), n - removed.len())
    } else {
        let would =
            listing.entries.iter().filter(|e| matches!(e.fate, Fate::Would(Verdict::Remove { forced: false }))).count();
        let next = if would > 0 { "; `engine stores --prune` removes the ones marked →" } else { "" };
        format!("{}, {gone} whose workspace is gone{next}\n", super::count(n, "store"))
    }
}

fn row(e: &Entry) -> Value {
    let s = &e.store;
    let (unknown, in_doubt, unreadable) = match &s.unsettled {
        Ok(u) => (Some(u.unknown), Some(u.in_doubt), None),
        Err(why) => (None, None, Some(why.clone())),
    };
    let (action, forced, reason) = match &e.fate {
        Fate::Would(Verdict::Remove { forced }) => ("would_remove", *forced, None),
        Fate::Would(Verdict::Keep(k)) => ("would_keep", false, Some(k)),
        Fate::Removed { forced } => ("removed", *forced, None),
        Fate::Kept(k) => ("kept", false, Some(k)),
        Fate::NotRemoved(_) => ("not_removed", false, None),
    };
    let why = match &e.fate {
        Fate::NotRemoved(why) => Some(why.clone()),
        _ => reason.map(Kept::why),
    };
    json!({
        "store": s.store(),
        "folder": s.folder,
        "workspace": s.workspace,
        "workspace_exists": s.workspace_exists,
        "bytes": s.bytes,
        "last_written": s.last_written_ms.map(utc),
        "unknown_operations": unknown,
        "in_doubt_operations": in_doubt,
        "unreadable": unreadable,
        "in_use_by": s.in_use_by,
        "prune": {"action": action, "forced": forced, "reason": reason.map(Kept::code), "why": why},
    })
}

/// Bytes as a person reads them.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_a_person_reads_them() {
        assert_eq!(super::size(512), "512 B");
        assert_eq!(super::size(1536), "1.5 KiB");
        assert_eq!(super::size(3 * 1024 * 1024), "3.0 MiB");
    }
}
