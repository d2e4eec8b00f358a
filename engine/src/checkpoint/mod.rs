//! Checkpoints: the observed state of a task's declared inputs (globs
//! expanded, sorted, each file's BLAKE3) plus declared context values.
//! Validations are judged against a checkpoint; reuse compares them.
//!
//! This file holds the data (pure); `observe` reads the workspace through
//! `cache`, the file-state cache that spares re-hashing unchanged files;
//! `recorded` is a stored checkpoint as reuse reads it (its digest first).

mod cache;
mod context;
pub mod mode;
mod observe;
mod protect;
mod recorded;
pub(crate) mod stamps;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::{Digester, Kind};

pub use cache::{hash_regular_file, FileCache};
pub use observe::{
    expand_inputs, few_small_files, observe, observe_expanded, observe_with, observes_quickly, starts_nothing,
    Expanded, Observed,
};
pub use protect::{observe_protected, observe_protected_with, observe_workspace};
pub use recorded::RecordedCheckpoint;
pub use stamps::RACY_WINDOW_NS;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Workspace-relative path → content digest (`None`: absent); in a
    /// look at protected paths or the workspace, with the path's mode
    /// (`mode`).
    pub files: BTreeMap<String, Option<String>>,
    /// Context name → value (or `digest:<hex>` for secrets).
    pub context: BTreeMap<String, String>,
    pub digest: String,
    /// The state a process task's undeclared writes are judged against: every
    /// file of the workspace (`observe_workspace`) beside the protected
    /// `files`. Held in memory only, never stored: the stored checkpoint
    /// carries its digest outside the task's declared paths
    /// (`WORKSPACE_CONTEXT`), so an attempt's record costs one digest, not
    /// a snapshot of the workspace.
    #[serde(skip)]
    pub workspace: Option<std::sync::Arc<BTreeMap<String, Option<String>>>>,
}

/// The context name under which a protected-paths checkpoint carries the
/// digest of the workspace's files outside its task's declared paths.
pub const WORKSPACE_CONTEXT: &str = "workspace:outside_declared";

/// The digest of a map of files (path → digest, `None`: absent), as a
/// checkpoint of those files alone has it.
pub fn files_digest(files: &BTreeMap<String, Option<String>>) -> String {
    entries_digest(files.iter())
}

/// `files_digest` of the map whose entries `files` yields in path order
/// (a filtered map's, without copying it: a look at a large workspace).
pub fn entries_digest<'a>(files: impl Iterator<Item = (&'a String, &'a Option<String>)> + Clone) -> String {
    Digester::new(Kind::Checkpoint).bytes("files", &entries_json(files, |v| v.as_deref())).finish()
}

/// `entries_digest` of the entries' content alone (their modes left out):
/// what an engine that recorded no mode stored.
pub fn content_digest<'a>(files: impl Iterator<Item = (&'a String, &'a Option<String>)> + Clone) -> String {
    let json = entries_json(files, |v| v.as_deref().map(mode::content));
    Digester::new(Kind::Checkpoint).bytes("files", &json).finish()
}

/// `serde_json::to_vec(map)` of a map of strings to strings or nulls, the
/// same bytes: a string copied straight when it needs no escaping (the
/// common case: paths and hex digests), else escaped as serde_json does.
fn string_map_json<V>(map: &BTreeMap<String, V>, value: impl Fn(&V) -> Option<&str>) -> Vec<u8> {
    entries_json(map.iter(), value)
}

/// `string_map_json` of the entries of a map, in its order.
fn entries_json<'a, V: 'a>(
    entries: impl Iterator<Item = (&'a String, &'a V)> + Clone,
    value: impl Fn(&V) -> Option<&str>,
) -> Vec<u8> {
    let len = entries.clone().map(|(k, v)| k.len() + value(v).map_or(4, str::len) + 6).sum::<usize>();
    let mut out = Vec::with_capacity(len + 2);
    out.push(b'{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(&mut out, k);
        out.push(b':');
        match value(v) {
            Some(v) => json_str(&mut out, v),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
    out
}

/// `s` as a JSON string, escaped as serde_json escapes: `\"` and `\\`,
/// the short forms of backspace, form feed, newline, return and tab, any
/// other control byte as `\u00xx` (lowercase hex); nothing else.
fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    if plain(s) {
        out.extend_from_slice(s.as_bytes());
    } else {
        for &b in s.as_bytes() {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1f => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 15)],
                    ]);
                }
                _ => out.push(b),
            }
        }
    }
    out.push(b'"');
}

/// Does `s` need no escaping in JSON: no control byte (below 0x20), no
/// `"` and no `\`? Eight bytes at a time (the test of each word is
/// exact: a byte at or above 0x80 is never taken for one of the three),
/// the rest one by one; a checkpoint's paths and digests are most of the
/// bytes a reuse pass hashes.
fn plain(s: &str) -> bool {
    plain_bytes(s.as_bytes())
}

fn plain_bytes(s: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES * 0x80;
    // Some byte of `v` below `n` (n <= 128).
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * n as u64) & !v & HIGH != 0;
    let special = |v: u64| below(v, 0x20) || below(v ^ (ONES * b'"' as u64), 1) || below(v ^ (ONES * b'\\' as u64), 1);
    let mut words = s.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if special(u64::from_ne_bytes(w)) {
            return false;
        }
    }
    !words.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

impl Checkpoint {
    /// A checkpoint of these files and context values, with its digest.
    pub fn of(files: BTreeMap<String, Option<String>>, context: BTreeMap<String, String>) -> Checkpoint {
        let digest = Digester::new(Kind::Checkpoint)
            .bytes("files", &string_map_json(&files, |v| v.as_deref()))
            .bytes("context", &string_map_json(&context, |v| Some(v.as_str())))
            .finish();
        Checkpoint { files, context, digest, workspace: None }
    }

    /// This checkpoint with `extra` context values added (a provider's
    /// tool inventory entries), its digest recomputed.
    pub fn with_context(self, extra: BTreeMap<String, String>) -> Checkpoint {
        if extra.is_empty() {
            return self;
        }
        let mut context = self.context;
        context.extend(extra);
        Checkpoint { workspace: self.workspace, ..Checkpoint::of(self.files, context) }
    }

    /// The first path whose digest differs between two checkpoints.
    pub fn first_difference(&self, other: &Checkpoint) -> Option<String> {
        let mut paths: Vec<&String> = self.files.keys().chain(other.files.keys()).collect();
        paths.sort();
        paths.dedup();
        for p in paths {
            if self.files.get(p) != other.files.get(p) {
                return Some(p.clone());
            }
        }
        let mut names: Vec<&String> = self.context.keys().chain(other.context.keys()).collect();
        names.sort();
        names.dedup();
        names.into_iter().find(|n| self.context.get(*n) != other.context.get(*n)).map(|n| format!("context:{n}"))
    }
}

/// One file as the file-state cache last saw it: a file whose size, times,
/// inode and device all still match was not rewritten since it was hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i64,
    /// The inode's change time: user space cannot set it back, so an
    /// in-place rewrite with its mtime restored is still caught.
    pub ctime_ns: i64,
    pub inode: u64,
    pub dev: u64,
    pub digest: String,
    pub hashed_at_ns: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time test says what a byte-at-a-time one says: every
    /// byte value at every place of a word and of its remainder, among
    /// fills at and above 0x80, and beside a neighbour that borrows in the
    /// subtraction.
    #[test]
    fn plain_is_the_byte_by_byte_test() {
        let slow = |s: &[u8]| !s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        for fill in [b'a', 0x80, 0xff, 0x21, 0x5d, 0x23, 0x00] {
            for len in 1..=19 {
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut bytes = vec![fill; len];
                        bytes[at] = b;
                        assert_eq!(plain_bytes(&bytes), slow(&bytes), "{bytes:?}");
                    }
                }
            }
        }
        // Two neighbours of every pair of the values at the edges.
        let edges = [0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0x81, 0xa2, 0xdc, 0xff];
        for &x in &edges {
            for &y in &edges {
                for at in 0..15 {
                    let mut bytes = vec![b'a'; 16];
                    (bytes[at], bytes[at + 1]) = (x, y);
                    assert_eq!(plain_bytes(&bytes), slow(&bytes), "{bytes:?}");
                }
            }
        }
        for s in ["", "src/t0000/f00.txt", "é ü \u{7f}", "ü\"", "\u{1f600}\n", "aaaaaaaaaaaaaaa\u{1}"] {
            assert_eq!(plain(s), slow(s.as_bytes()), "{s:?}");
        }
    }

    /// The checkpoint's digest input is `serde_json::to_vec`'s bytes,
    /// whether written straight or (a name to escape) by serde_json.
    #[test]
    fn string_map_json_is_serde_jsons_bytes() {
        let names =
            ["", "a", "src/t0000/f00.txt", "quote\"d", "back\\slash", "tab\there", "nl\n", "é ü \u{7f}", "\u{1}"];
        let more = ["\u{8}\u{c}\r", "\u{0}\u{1f}\u{1b}", "long path with a \\ past eight bytes \"", "ü\u{e}"];
        for k in names.iter().chain(&more) {
            for v in names.iter().chain(&more) {
                let files: BTreeMap<String, Option<String>> =
                    [(k.to_string(), Some(v.to_string())), (format!("{k}z"), None), ("b".into(), Some("c".into()))]
                        .into_iter()
                        .collect();
                assert_eq!(string_map_json(&files, |v| v.as_deref()), serde_json::to_vec(&files).unwrap());
                let context: BTreeMap<String, String> = [(k.to_string(), v.to_string())].into_iter().collect();
                assert_eq!(string_map_json(&context, |v| Some(v.as_str())), serde_json::to_vec(&context).unwrap());
            }
        }
        let empty: BTreeMap<String, String> = BTreeMap::new();
        assert_eq!(string_map_json(&empty, |v| Some(v.as_str())), b"{}".to_vec());
    }
}
