//! The file-state cache: (size, mtime, ctime, inode, device) → digest, so
//! an unchanged file is not hashed again. Loaded from and flushed to the
//! ledger by its caller; it knows nothing of the ledger itself.

use foldhash::{HashMap, HashSet};
use std::path::Path;

use super::stamps::{self, RACY_WINDOW_NS, UNTRUSTED};
use super::FileState;

#[derive(Debug, Default)]
pub struct FileCache {
    /// By path: the path is the key only (a `FileState`'s own is moved
    /// into it, not copied, when the ledger's states are loaded).
    entries: HashMap<String, Seen>,
    dirty: HashSet<String>,
    pub hits: u64,
    pub misses: u64,
}

impl FileCache {
    /// A cache holding what the ledger remembers.
    pub fn from_states(states: Vec<FileState>) -> FileCache {
        FileCache { entries: states.into_iter().map(Seen::of).collect(), ..Default::default() }
    }

    /// The entries this process hashed since the last call: what to write
    /// back to the ledger.
    pub fn take_dirty(&mut self) -> Vec<FileState> {
        let mut out: Vec<FileState> = self.dirty.drain().filter_map(|p| Some(self.entries.get(&p)?.state(p))).collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// The content digest of `path` (`None`: absent), from the cache when
    /// size, mtime and inode match and the entry is not racy.
    pub fn digest(&mut self, path: &Path) -> std::io::Result<Option<String>> {
        self.digest_known(path, None)
    }

    /// As `digest`, with the file's metadata when the caller has just read
    /// it (one `statx` per input file, not two).
    pub fn digest_known(&mut self, path: &Path, known: Option<std::fs::Metadata>) -> std::io::Result<Option<String>> {
        use std::os::unix::fs::MetadataExt;
        let meta = match known.map_or_else(|| std::fs::metadata(path), Ok) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !meta.is_file() {
            // A FIFO or device would block or never end: inputs are files.
            return Err(std::io::Error::other("not a regular file"));
        }
        // Borrowed for the lookup: a hit copies no path.
        let key = path.to_string_lossy();
        let mtime_ns = stamps::ns(meta.mtime(), meta.mtime_nsec());
        let ctime_ns = stamps::ns(meta.ctime(), meta.ctime_nsec());
        // Unchanged and settled: neither the content time nor the inode's
        // change time is within the racy window of when it was hashed.
        let settled = self.entries.get(key.as_ref()).filter(|e| {
            e.size == meta.len()
                && e.mtime_ns == mtime_ns
                && e.ctime_ns == ctime_ns
                && e.inode == meta.ino()
                && e.dev == meta.dev()
                && mtime_ns.max(ctime_ns) < e.hashed_at_ns.saturating_sub(RACY_WINDOW_NS)
        });
        if let Some(e) = settled {
            self.hits += 1;
            return Ok(Some(e.digest.clone()));
        }
        self.misses += 1;
        let seen = hash_seen(path, || {})?;
        let digest = seen.digest.clone();
        let key = key.into_owned();
        self.entries.insert(key.clone(), seen);
        self.dirty.insert(key);
        Ok(Some(digest))
    }
}

/// Hash `path` into the entry it leaves: the time read before it is
/// opened, on the clock the kernel stamps inode times from
/// (`stamps::coarse_now_ns`), and the size, times, inode and device of the
/// open file, not of a look before that time. So a write between an
/// earlier look and the hash is in the entry's times, and any write that
/// begins after the clock was read stamps at least that time: a later look
/// sees the change or finds the entry within the racy window. A file whose
/// size or times moved while it was hashed is never trusted by its times
/// (`UNTRUSTED`): what was read may be half of two contents. `hashed`
/// runs between the hash and the second look at the open file (the
/// tests' hook).
fn hash_seen(path: &Path, hashed: impl FnOnce()) -> std::io::Result<Seen> {
    let hashed_at_ns = stamps::coarse_now_ns();
    let (file, meta) = open_regular(path)?;
    let digest = blake3::Hasher::new().update_reader(&file)?.finalize().to_hex().to_string();
    hashed();
    let mut seen = Seen::hashed(&meta, digest, hashed_at_ns);
    let after = Seen::hashed(&file.metadata()?, String::new(), hashed_at_ns);
    if (after.size, after.mtime_ns, after.ctime_ns, after.inode)
        != (seen.size, seen.mtime_ns, seen.ctime_ns, seen.inode)
    {
        seen.hashed_at_ns = UNTRUSTED;
    }
    Ok(seen)
}

/// A `FileState` without its path (the cache's key).
#[derive(Debug, Clone)]
struct Seen {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    inode: u64,
    dev: u64,
    digest: String,
    hashed_at_ns: i64,
}

impl Seen {
    fn of(s: FileState) -> (String, Seen) {
        let FileState { path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns } = s;
        (path, Seen { size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns })
    }

    /// The entry of a file hashed at `hashed_at_ns` to `digest`, with the
    /// open file's metadata.
    fn hashed(meta: &std::fs::Metadata, digest: String, hashed_at_ns: i64) -> Seen {
        use std::os::unix::fs::MetadataExt;
        Seen {
            size: meta.len(),
            mtime_ns: stamps::ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: stamps::ns(meta.ctime(), meta.ctime_nsec()),
            inode: meta.ino(),
            dev: meta.dev(),
            digest,
            hashed_at_ns,
        }
    }

    fn state(&self, path: String) -> FileState {
        FileState {
            path,
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            inode: self.inode,
            dev: self.dev,
            digest: self.digest.clone(),
            hashed_at_ns: self.hashed_at_ns,
        }
    }
}

/// BLAKE3 of a regular file's content, streamed (a large input is never
/// held in memory whole). Opened without blocking and checked again on the
/// open handle: a path swapped for a FIFO after it was looked at is
/// refused, never waited on.
pub fn hash_regular_file(path: &Path) -> std::io::Result<String> {
    let (file, _) = open_regular(path)?;
    Ok(blake3::Hasher::new().update_reader(file)?.finalize().to_hex().to_string())
}

/// `path` opened without blocking, with its metadata read on the open
/// handle: refused unless a regular file.
fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_hits_only_for_settled_unchanged_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let mut cache = FileCache::default();
        let d1 = cache.digest(&f).unwrap();
        // Just written: racy, so hashed again (and right).
        std::fs::write(&f, "two").unwrap();
        let d2 = cache.digest(&f).unwrap();
        assert_ne!(d1, d2);
        assert_eq!(cache.hits, 0);
        // Pretend the hash happened long after the write: now trusted.
        let key = f.to_string_lossy().into_owned();
        cache.entries.get_mut(&key).unwrap().hashed_at_ns += 10 * RACY_WINDOW_NS;
        assert_eq!(cache.digest(&f).unwrap(), d2);
        assert_eq!(cache.hits, 1);
        // Same size, same mtime forced back, other content: a trusted entry
        // would lie, which is why the racy window exists; a different size
        // or inode is always caught.
        std::fs::write(&f, "three!").unwrap();
        assert_ne!(cache.digest(&f).unwrap(), d2);
        std::fs::remove_file(&f).unwrap();
        assert_eq!(cache.digest(&f).unwrap(), None);
    }

    #[test]
    fn an_in_place_rewrite_with_its_mtime_restored_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_577_836_800);
        std::fs::write(&f, "good\n").unwrap();
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(old).unwrap();
        let mut cache = FileCache::default();
        let good = cache.digest(&f).unwrap();
        // Settle the entry (as if hashed long after every change).
        let key = f.to_string_lossy().into_owned();
        cache.entries.get_mut(&key).unwrap().hashed_at_ns += 10 * RACY_WINDOW_NS;
        assert_eq!(cache.digest(&f).unwrap(), good);
        assert_eq!(cache.hits, 1);
        // Same size, same inode, mtime put back: only the ctime moved.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&f, "bad!\n").unwrap();
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(old).unwrap();
        let now = cache.digest(&f).unwrap();
        assert_ne!(now, good, "a changed file must never come back from the cache");
        assert_eq!(cache.hits, 1);
    }

    /// The stamps of `f` as the cache compares them: (mtime, ctime) in ns.
    fn stamps_of(f: &Path) -> (std::fs::Metadata, i64, i64) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(f).unwrap();
        let (mt, ct) = (stamps::ns(m.mtime(), m.mtime_nsec()), stamps::ns(m.ctime(), m.ctime_nsec()));
        (m, mt, ct)
    }

    /// A same-size rewrite right after the hash, keeping the file's times
    /// (both writes in one coarse clock tick: the entry is made to record
    /// the rewrite's times, which this kernel may make finer than a tick),
    /// is hashed again: the racy window, never zero, distrusts an entry
    /// whose times are that close to its hash.
    #[test]
    fn a_same_size_rewrite_right_after_the_hash_is_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let mut cache = FileCache::default();
        assert_eq!(cache.digest(&f).unwrap(), Some(blake3::hash(b"one").to_hex().to_string()));
        // As it happens: rewritten at once, then looked at again.
        std::fs::write(&f, "two").unwrap();
        assert_eq!(cache.digest(&f).unwrap(), Some(blake3::hash(b"two").to_hex().to_string()));
        assert_eq!((cache.hits, cache.misses), (0, 2));
        // The rewrite keeps both times, the hash 1 ms after them: with a
        // zero window the entry ("two") would be taken for "six".
        std::fs::write(&f, "six").unwrap();
        let (_, mt, ct) = stamps_of(&f);
        let key = f.to_string_lossy().into_owned();
        let e = cache.entries.get_mut(&key).unwrap();
        (e.mtime_ns, e.ctime_ns, e.hashed_at_ns) = (mt, ct, mt.max(ct) + 1_000_000);
        assert_eq!(cache.digest(&f).unwrap(), Some(blake3::hash(b"six").to_hex().to_string()));
        assert_eq!((cache.hits, cache.misses), (0, 3));
    }

    /// A file rewritten while it is hashed (between the open and the read:
    /// the hook) may have been read half old, half new: its entry is never
    /// trusted by its times, by this engine nor by an older one reading
    /// the ledger (its plain subtraction does not wrap); an unmoved file's
    /// entry is.
    #[test]
    fn a_file_changed_while_it_is_hashed_is_never_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let still = hash_seen(&f, || {}).unwrap();
        assert_ne!(still.hashed_at_ns, UNTRUSTED, "unmoved: trusted after the racy window");
        let torn = hash_seen(&f, || {
            // Past a coarse clock tick (10 ms at most): the times move.
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::write(&f, "two").unwrap();
        })
        .unwrap();
        assert_eq!(torn.hashed_at_ns, UNTRUSTED);
        assert_eq!(torn.digest, blake3::hash(b"one").to_hex().to_string(), "hashed before the rewrite");
        assert_eq!(torn.state(String::new()).hashed_at_ns, UNTRUSTED, "what the ledger keeps");
        // However late the next look, with the file's times as they are now.
        let (m, _, _) = stamps_of(&f);
        let mut cache = FileCache::default();
        cache.entries.insert(f.to_string_lossy().into_owned(), Seen::hashed(&m, "torn".into(), torn.hashed_at_ns));
        assert_eq!(cache.digest(&f).unwrap(), Some(blake3::hash(b"two").to_hex().to_string()));
        assert_eq!(cache.hits, 0);
        // An older engine subtracted the window plainly: no wrap.
        assert_eq!(UNTRUSTED - RACY_WINDOW_NS, i64::MIN);
    }

    /// The hash time is read before the content is hashed (a clock read
    /// after it would date a long hash's entry later than its read).
    #[test]
    fn the_hash_time_is_read_before_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let mut after_hash = 0;
        let seen = hash_seen(&f, || {
            // Past a coarse clock tick (10 ms at most).
            std::thread::sleep(std::time::Duration::from_millis(20));
            after_hash = stamps::coarse_now_ns();
        })
        .unwrap();
        assert!(seen.hashed_at_ns < after_hash, "{} < {after_hash}", seen.hashed_at_ns);
    }

    /// `hash_seen`'s order: the entry's size and times are the open file's,
    /// not the metadata the caller read before a same-size rewrite.
    #[test]
    fn the_entry_keeps_the_open_files_metadata_not_the_callers() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let stale = std::fs::metadata(&f).unwrap();
        // Past a coarse clock tick (10 ms at most): the rewrite's ctime moves.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&f, "two").unwrap();
        let (fresh, mt, ct) = stamps_of(&f);
        assert_ne!(stamps::ns(stale.ctime(), stale.ctime_nsec()), ct, "the rewrite moved the ctime");
        let mut cache = FileCache::default();
        assert_eq!(cache.digest_known(&f, Some(stale)).unwrap(), Some(blake3::hash(b"two").to_hex().to_string()));
        let e = &cache.entries[f.to_string_lossy().as_ref()];
        assert_eq!((e.size, e.mtime_ns, e.ctime_ns, e.inode), (fresh.len(), mt, ct, fresh.ino()));
    }

    /// Hashed here: the hash time is the coarse clock's read before the
    /// open, so a write right after the hash stamps at least it (and the
    /// entry is not trusted).
    #[test]
    fn a_write_after_the_hash_stamps_at_least_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        let key = f.to_string_lossy().into_owned();
        for _ in 0..200 {
            std::fs::write(&f, "one").unwrap();
            let mut cache = FileCache::default();
            cache.digest(&f).unwrap();
            std::fs::write(&f, "two").unwrap();
            let (_, mt, ct) = stamps_of(&f);
            assert!(mt.min(ct) >= cache.entries[&key].hashed_at_ns, "a later write stamps at least the hash time");
        }
    }

    /// What the ledger remembered answers a lookup; what was hashed comes
    /// back whole (its path too) to be written back, and nothing else.
    #[test]
    fn loaded_states_answer_and_hashed_ones_come_back_whole() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        let m = std::fs::metadata(&a).unwrap();
        let remembered = FileState {
            path: a.to_string_lossy().into_owned(),
            size: m.len(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            inode: m.ino(),
            dev: m.dev(),
            digest: "remembered".into(),
            hashed_at_ns: stamps::coarse_now_ns() + 10 * RACY_WINDOW_NS,
        };
        let mut cache = FileCache::from_states(vec![remembered]);
        assert_eq!(cache.digest(&a).unwrap().as_deref(), Some("remembered"));
        assert_eq!((cache.hits, cache.misses), (1, 0));
        let hashed = cache.digest(&b).unwrap();
        let dirty = cache.take_dirty();
        assert_eq!(dirty.len(), 1);
        assert_eq!(dirty[0].path, b.to_string_lossy());
        assert_eq!(Some(dirty[0].digest.clone()), hashed);
        assert_eq!(dirty[0].size, 1);
        assert!(cache.take_dirty().is_empty());
    }

    #[test]
    fn a_large_file_hashes_as_its_whole_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big.bin");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&f, &bytes).unwrap();
        let want = blake3::hash(&bytes).to_hex().to_string();
        assert_eq!(FileCache::default().digest(&f).unwrap(), Some(want));
        assert!(hash_regular_file(dir.path()).is_err(), "a folder is not hashed");
    }

    #[test]
    fn a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pipe");
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(FileCache::default().digest(&f).is_err());
    }
}
