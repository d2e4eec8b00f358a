//! The mark: a small file beside the store (`engine.db.mark`, 0600) that
//! says which store this is and how many commits it has made durably. It
//! lives outside SQLite and its WAL, so a store that lost committed
//! transactions — a deleted WAL, an old copy put back, another store in its
//! place — can be told from a new one and refused (`identity.rs`).
//!
//! Why a count kept at every durable commit, not only at lease acquire and
//! release: the commit that matters most is an intent (the engine's word
//! that it is about to send), and it is made mid-run. With the count updated
//! right after each `synchronous=FULL` commit and before the engine acts on
//! it, a store that lost an intent always holds fewer commits than its mark
//! — no other rule (such as "the last writer did not close and the WAL is
//! gone") is needed, and none can be fooled by a WAL cut short.
//!
//! Why updated in place, and flushed only at the lease's edges: an update
//! is one `pwrite` — visible at once to every later process, and surviving
//! any crash of the engine — so a deleted WAL or a store put back is caught
//! whatever commit it cost. `fdatasync` is added when the lease is taken
//! and given back (and the file is created whole: temporary file, fsync,
//! link, fsync of the folder). A flush at every durable commit would double
//! the engine's fsyncs per task for one case only: a power loss, after
//! which the mark could trail the store by the commits of the last run —
//! never lead it, since each count is written after its commit's own fsync
//! returned. Trailing narrows what the mark can tell; it never refuses a
//! whole store. A torn write is survived by keeping two copies (slots) in
//! separate 4 KiB blocks, each with its own checksum and sequence number:
//! an update overwrites the older slot, and a reader takes the newest
//! intact one.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files::{flushes, io_error, sync_dir, with_suffix, write_error};
use super::owner::Owner;
use crate::error::{Code, Error, Result};

/// Each slot starts a 4 KiB block (a disk that tears a sector tears one).
const SLOT: u64 = 4096;
/// The most a slot's text may take.
const SLOT_TEXT: usize = 1024;

/// The store file as a writer left it when it closed cleanly (after its
/// final checkpoint). Only a checkpoint writes the store file, and only the
/// writer's process checkpoints (its checkpointer included, `fold.rs`), so
/// a file that differs was changed outside the engine: the next open checks it. `ctime` cannot be set from user space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
}

impl Fingerprint {
    pub fn of(path: &Path) -> Result<Fingerprint> {
        let m = std::fs::symlink_metadata(path).map_err(|e| io_error(e, path, "cannot inspect store"))?;
        Ok(Fingerprint {
            size: m.size(),
            mtime_ns: crate::checkpoint::stamps::ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: crate::checkpoint::stamps::ns(m.ctime(), m.ctime_nsec()),
            inode: m.ino(),
        })
    }
}

/// What the WAL held when its writer closed the store: nothing (a clean
/// close folds it into the store file and truncates it), or, when a reader
/// held it back, its bytes — by size and digest. A commit appended to it
/// afterwards (by anything that opens the file: `sqlite3`, a script) is a
/// change of the closed store, checked before it is trusted, as a change
/// of the store file is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalPrint {
    pub size: u64,
    /// BLAKE3 of its bytes (hex, 32 characters); empty for an empty WAL.
    pub digest: String,
}

impl WalPrint {
    /// The WAL at `path` now. An absent WAL is an empty one (a reader that
    /// closes last deletes an empty WAL); its bytes are hashed only when
    /// its size is `recorded`'s, since another size differs anyway.
    pub fn of(path: &Path, recorded: Option<&WalPrint>) -> Result<WalPrint> {
        let mut file = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(WalPrint::empty()),
            Err(e) => return Err(io_error(e, path, "cannot read the store's WAL")),
        };
        let size = file.metadata().map_err(|e| io_error(e, path, "cannot inspect the store's WAL"))?.len();
        if size == 0 {
            return Ok(WalPrint::empty());
        }
        if recorded.is_some_and(|r| r.size != size) {
            return Ok(WalPrint { size, digest: String::new() });
        }
        let mut hasher = blake3::Hasher::new();
        std::io::copy(&mut file.by_ref().take(size), &mut hasher)
            .map_err(|e| io_error(e, path, "cannot read the store's WAL"))?;
        Ok(WalPrint { size, digest: hasher.finalize().to_hex()[..32].to_string() })
    }

    fn empty() -> WalPrint {
        WalPrint { size: 0, digest: String::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mark {
    /// The store's identity (`store_meta.store_id`).
    pub store_id: String,
    /// Which write of the mark this is (the newest intact slot wins).
    pub seq: u64,
    /// The lease generation of the writer that wrote it.
    pub generation: i64,
    /// The store had made at least this many commits (`store_meta.commits`).
    pub commits: i64,
    /// A writer holds (or held, and died holding) the store.
    pub open: bool,
    /// The store file as the last writer closed it (`None` while open).
    pub closed_file: Option<Fingerprint>,
    /// The WAL as the last writer closed the store (`None` while open,
    /// and in a mark from before the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_wal: Option<WalPrint>,
    /// A store shared with a group: what its owner's engine confines
    /// providers with, which every person's run on it is held to
    /// (`store::access::Confinement`; `None`: not recorded yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<crate::store::access::Confinement>,
    /// The schema version the last writer left the store at (its
    /// `user_version`: `None` in a mark from before the record), so that
    /// damaged version bytes are told from a newer engine's store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<i64>,
    /// The owner and mode the engine made the store's files with
    /// (`owner.rs`; `None` in a mark from before the record, until the
    /// next writer records it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

impl Mark {
    /// A new store's mark: nothing committed, nobody writing.
    pub fn new(store_id: &str) -> Mark {
        Mark {
            store_id: store_id.to_string(),
            seq: 0,
            generation: 0,
            commits: 0,
            open: false,
            closed_file: None,
            closed_wal: None,
            confinement: None,
            schema: None,
            owner: None,
        }
    }

    /// The mark at `path`; `None` when there is none.
    pub fn read(path: &Path) -> Result<Option<Mark>> {
        let mut file = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(e, path, "cannot read the store's mark file")),
        };
        let mut bytes = Vec::new();
        file.by_ref()
            .take(2 * SLOT)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(e, path, "cannot read the store's mark file"))?;
        let newest = [0, SLOT as usize]
            .iter()
            .filter_map(|&at| parse_slot(bytes.get(at..).unwrap_or_default()))
            .max_by_key(|m| m.seq);
        match newest {
            Some(m) => Ok(Some(m)),
            None => Err(Error::new(
                Code::StoreCorrupt,
                format!("the store's mark file {} is unreadable (neither copy is intact)", path.display()),
            )),
        }
    }

    fn slot_text(&self) -> Result<Vec<u8>> {
        let body = serde_json::to_string(self).map_err(|e| Error::internal(format!("mark: {e}")))?;
        let text = format!("{} {body}\n", checksum(&body));
        if text.len() > SLOT_TEXT {
            return Err(Error::internal("the store's mark outgrew its slot"));
        }
        Ok(text.into_bytes())
    }
}

/// `"<checksum> <json>\n"`, padded; `None` unless intact.
fn parse_slot(bytes: &[u8]) -> Option<Mark> {
    let text = std::str::from_utf8(bytes.get(..SLOT_TEXT.min(bytes.len()))?).ok()?;
    let line = text.split('\n').next()?;
    let (sum, body) = line.split_once(' ')?;
    (sum == checksum(body)).then(|| serde_json::from_str(body).ok()).flatten()
}

fn checksum(body: &str) -> String {
    blake3::hash(body.as_bytes()).to_hex()[..32].to_string()
}

/// The mark a writer keeps open and updates in place.
pub struct MarkFile {
    file: File,
    path: PathBuf,
    last: Mark,
}

impl MarkFile {
    /// Create the mark for a store that has none yet, whole: a temporary
    /// file, flushed, linked into place (never over another's), then the
    /// folder flushed. Another process's mark, made first, wins.
    pub fn create(path: &Path, mark: &Mark) -> Result<()> {
        let tmp = with_suffix(path, &format!(".new-{}-{}", std::process::id(), crate::clock::now_ms()));
        let made = write_new(&tmp, mark).and_then(|_| match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(write_error(e, path, "cannot place the store's mark file")),
        });
        let _ = std::fs::remove_file(&tmp);
        made?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    }

    /// Open the existing mark for updates.
    pub fn open(path: &Path) -> Result<MarkFile> {
        let last = Mark::read(path)?.ok_or_else(|| {
            Error::new(Code::StoreCorrupt, format!("the store's mark file {} is missing", path.display()))
        })?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| io_error(e, path, "cannot open the store's mark file"))?;
        Ok(MarkFile { file, path: path.to_path_buf(), last })
    }

    pub fn last(&self) -> &Mark {
        &self.last
    }

    /// Record `next` (its `seq` is assigned here) over the older slot;
    /// `flush` waits until it is on disk.
    pub fn record(&mut self, mut next: Mark, flush: bool) -> Result<()> {
        next.seq = self.last.seq + 1;
        let mut block = next.slot_text()?;
        block.resize(SLOT_TEXT, b' ');
        let at = (next.seq % 2) * SLOT;
        self.file
            .write_all_at(&block, at)
            .and_then(|_| if flush && flushes() { self.file.sync_data() } else { Ok(()) })
            .map_err(|e| write_error(e, &self.path, "cannot record the store's mark"))?;
        self.last = next;
        Ok(())
    }
}

/// A complete two-slot mark file at `tmp` (slot 1 empty), flushed.
fn write_new(tmp: &Path, mark: &Mark) -> Result<()> {
    let mut bytes = vec![b' '; 2 * SLOT as usize];
    let text = mark.slot_text()?;
    bytes[..text.len()].copy_from_slice(&text);
    bytes[SLOT as usize] = b'\n';
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(tmp)
        .map_err(|e| write_error(e, tmp, "cannot create the store's mark file"))?;
    file.write_all_at(&bytes, 0)
        .and_then(|_| if flushes() { file.sync_all() } else { Ok(()) })
        .map_err(|e| write_error(e, tmp, "cannot write the store's mark file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(seq: u64, commits: i64) -> Mark {
        Mark { seq, commits, ..Mark::new("abc") }
    }

    #[test]
    fn the_newest_intact_slot_wins_and_a_torn_one_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.db.mark");
        MarkFile::create(&path, &mark(0, 0)).unwrap();
        let mut f = MarkFile::open(&path).unwrap();
        f.record(mark(0, 5), true).unwrap();
        f.record(mark(0, 9), false).unwrap();
        assert_eq!(Mark::read(&path).unwrap().map(|m| (m.seq, m.commits)), Some((2, 9)));
        // Tear the newest slot (seq 2 lives in slot 0): the older one stands.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"XX", 40).unwrap();
        assert_eq!(Mark::read(&path).unwrap().map(|m| (m.seq, m.commits)), Some((1, 5)));
        // Both torn: unreadable, never taken for "no mark".
        file.write_all_at(b"XX", SLOT + 40).unwrap();
        assert_eq!(Mark::read(&path).unwrap_err().code, Code::StoreCorrupt);
    }

    #[test]
    fn a_missing_mark_reads_as_none_and_creation_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.db.mark");
        assert_eq!(Mark::read(&path).unwrap(), None);
        MarkFile::create(&path, &mark(0, 3)).unwrap();
        MarkFile::create(&path, &mark(0, 0)).unwrap();
        assert_eq!(Mark::read(&path).unwrap().map(|m| m.commits), Some(3));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }
}
