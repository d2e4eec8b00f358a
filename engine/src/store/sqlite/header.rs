//! The store file's first 100 bytes: SQLite's database header, read and
//! judged before SQLite opens the file. SQLite trusts several of its
//! fields without complaint — a write version it does not know makes the
//! file silently read-only (every later write fails as "attempt to write a
//! readonly database"), a read version or schema format it does not know
//! refuses every read as "unsupported file format", another text encoding
//! reads every text as something else — so a damaged header would surface
//! as an internal error, or not at all. Here it is `STORE_CORRUPT`, naming
//! the field. The judgement (`judge`) is a pure function of the bytes.
//!
//! The fields are SQLite's file format (sqlite.org/fileformat.html, "The
//! Database Header"); the values allowed are those SQLite itself accepts,
//! narrowed to what the engine makes: UTF-8 text, no auto-vacuum, no
//! reserved bytes.

use std::io::Read;
use std::path::Path;

use crate::error::{Code, Error, Result};

/// The header's length.
pub const HEADER_BYTES: usize = 100;

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What is wrong with `header` (the first bytes of the file), if anything.
/// An empty file has no header yet, and nothing wrong with it here (`engine
/// verify` names it as a file that holds no ledger).
pub fn judge(header: &[u8]) -> Option<String> {
    if header.is_empty() {
        return None;
    }
    let Some(h) = header.get(..HEADER_BYTES) else {
        return Some(format!(
            "the file is {} bytes long, shorter than a SQLite database header ({HEADER_BYTES} bytes)",
            header.len()
        ));
    };
    let byte = |i: usize| h.get(i).copied().unwrap_or(0);
    let be32 = |i: usize| u32::from_be_bytes([byte(i), byte(i + 1), byte(i + 2), byte(i + 3)]);
    let field =
        |at: &str, name: &str, value: u32, allowed: &str| Some(format!("header {at} ({name}) is {value}; {allowed}"));
    if h.get(..16) != Some(MAGIC.as_slice()) {
        return Some("the file does not start with SQLite's header string (\"SQLite format 3\")".into());
    }
    let page_size = u32::from(u16::from_be_bytes([byte(16), byte(17)]));
    if !(page_size == 1 || (512..=32768).contains(&page_size) && page_size.is_power_of_two()) {
        return field("bytes 16-17", "page size", page_size, "SQLite's are powers of two from 512 to 65536");
    }
    for (at, name) in [(18, "file format write version"), (19, "file format read version")] {
        if !matches!(byte(at), 1 | 2) {
            return field(
                &format!("byte {at}"),
                name,
                byte(at).into(),
                "SQLite knows 1 (rollback journal) and 2 (WAL)",
            );
        }
    }
    if byte(20) != 0 {
        return field("byte 20", "reserved space per page", byte(20).into(), "the engine reserves none");
    }
    for (at, name, want) in
        [(21, "maximum payload fraction", 64), (22, "minimum payload fraction", 32), (23, "leaf payload fraction", 32)]
    {
        if byte(at) != want {
            return field(&format!("byte {at}"), name, byte(at).into(), &format!("SQLite requires {want}"));
        }
    }
    // 0 in these two: a file with no schema yet (SQLite's defaults apply).
    if be32(44) > 4 {
        return field("bytes 44-47", "schema format number", be32(44), "SQLite knows 1 to 4");
    }
    if be32(56) > 1 {
        return field("bytes 56-59", "text encoding", be32(56), "the engine's store is UTF-8 (1)");
    }
    for (at, name) in [(52, "largest root page (auto-vacuum)"), (64, "incremental vacuum")] {
        if be32(at) != 0 {
            return field(
                &format!("bytes {at}-{}", at + 3),
                name,
                be32(at),
                "the engine's store has no auto-vacuum (0)",
            );
        }
    }
    if h.get(72..92).is_some_and(|r| r.iter().any(|&b| b != 0)) {
        return Some("header bytes 72-91 (reserved for expansion) are not zero".into());
    }
    None
}

/// Read the header of the store file at `path` and judge it:
/// `STORE_CORRUPT` naming the field, before SQLite opens the file.
pub fn check(path: &Path) -> Result<()> {
    let mut header = Vec::with_capacity(HEADER_BYTES);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEADER_BYTES as u64).read_to_end(&mut header))
        .map_err(|e| super::files::io_error(e, path, "cannot read the store's header"))?;
    match judge(&header) {
        None => Ok(()),
        Some(why) => Err(Error::new(
            Code::StoreCorrupt,
            format!("the store file's SQLite header is damaged: {why} (see \"A damaged store\" in docs/store.md)"),
        )
        .at(path.display().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real store's header (what `create` makes).
    fn made() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let files = super::super::files::StoreFiles::new(&dir.path().join("engine.db"));
        super::super::create::create(&files).unwrap();
        std::fs::read(&files.db).unwrap()[..HEADER_BYTES].to_vec()
    }

    #[test]
    fn the_engines_own_header_passes_and_so_does_an_empty_file() {
        assert_eq!(judge(&made()), None);
        assert_eq!(judge(&[]), None);
    }

    #[test]
    fn every_byte_sqlite_would_trust_when_damaged_is_named() {
        let good = made();
        // The fields SQLite reads as given: each flipped as the sweep did.
        for (at, words) in [
            (0, "header string"),
            (16, "page size"),
            (18, "write version"),
            (19, "read version"),
            (20, "reserved space"),
            (21, "maximum payload"),
            (47, "schema format"),
            (59, "text encoding"),
            (55, "auto-vacuum"),
            (67, "incremental vacuum"),
            (80, "reserved for expansion"),
        ] {
            let mut h = good.clone();
            h[at] ^= 0x5a;
            let why = judge(&h).unwrap_or_else(|| panic!("byte {at} flipped passed"));
            assert!(why.contains(words), "byte {at}: {why}");
        }
    }

    #[test]
    fn fields_sqlite_keeps_for_itself_may_change() {
        let good = made();
        // The change counter, page count, schema cookie, user version,
        // application id, version-valid-for and SQLite version: SQLite
        // itself checks or rewrites them, and the schema version is the
        // engine's own check.
        for at in [24, 31, 40, 48, 63, 68, 95, 99] {
            let mut h = good.clone();
            h[at] ^= 0x5a;
            assert_eq!(judge(&h), None, "byte {at}");
        }
        assert!(judge(&good[..50]).unwrap().contains("shorter"));
    }
}
