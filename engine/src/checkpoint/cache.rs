//! The file-state cache: (size, mtime, ctime, inode, device) → digest, so
//! an unchanged file is not hashed again. Loaded from and flushed to the
//! ledger by its caller; it knows nothing of the ledger itself.

use foldhash::{HashMap, HashSet};
use std::path::Path;

use super::stamps::{self, RACY_WINDOW_NS};
use super::FileState;

#[derive(Debug, Default)]
pub struct FileCache {
    /// By path: the path is the key only (a `FileState`'s own is moved
    /// into it, not copied, when the ledger's states are loaded).
    entries: HashMap<String, Seen>,
    dirty: HashSet<String>,
    /// Each device's file system type (`statfs`), asked once: what its
    /// racy window is (`stamps::racy_window_ns`).
    fs_types: HashMap<u64, Option<u64>>,
    pub hits: u64,
    pub misses: u64,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
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
        let mtime_ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let ctime_ns = meta.ctime() * 1_000_000_000 + meta.ctime_nsec();
        // The entry's hash time when it still describes the file.
        let unchanged = self.entries.get(key.as_ref()).filter(|e| {
            e.size == meta.len()
                && e.mtime_ns == mtime_ns
                && e.ctime_ns == ctime_ns
                && e.inode == meta.ino()
                && e.dev == meta.dev()
        });
        if let Some((hashed_at_ns, own)) = unchanged.map(|e| (e.hashed_at_ns, e.own)) {
            // Settled: neither the content time nor the inode's change time
            // is within the racy window of when it was hashed (the wide
            // window first: it needs no look at the file system).
            let before = |window_ns: i64| mtime_ns.max(ctime_ns) < hashed_at_ns.saturating_sub(window_ns);
            if before(RACY_WINDOW_NS) || (own && before(self.window_ns(path, &meta))) {
                if let Some(e) = self.entries.get(key.as_ref()) {
                    self.hits += 1;
                    return Ok(Some(e.digest.clone()));
                }
            }
        }
        self.misses += 1;
        let seen = hash_seen(path)?;
        let digest = seen.digest.clone();
        let key = key.into_owned();
        self.entries.insert(key.clone(), seen);
        self.dirty.insert(key);
        Ok(Some(digest))
    }

    /// The racy window of a file with metadata `meta` at `path`: its
    /// device's file system asked once (`statfs`), its stamps' nanoseconds.
    fn window_ns(&mut self, path: &Path, meta: &std::fs::Metadata) -> i64 {
        use std::os::unix::fs::MetadataExt;
        let f_type = *self.fs_types.entry(meta.dev()).or_insert_with(|| stamps::fs_type(path));
        stamps::racy_window_ns(f_type, meta.mtime_nsec(), meta.ctime_nsec())
    }
}

/// Hash `path` into the entry it leaves: the time taken before it is
/// opened, and the size, times, inode and device of the open file, not of
/// a look before that time. So a write between an earlier look and the
/// hash is in the entry's times, and any write after the open stamps at
/// least that time less one tick: a later look sees the change or finds
/// the entry within the racy window.
fn hash_seen(path: &Path) -> std::io::Result<Seen> {
    use std::os::unix::fs::MetadataExt;
    let hashed_at_ns = now_ns();
    let (file, meta) = open_regular(path)?;
    let digest = blake3::Hasher::new().update_reader(file)?.finalize().to_hex().to_string();
    Ok(Seen {
        size: meta.len(),
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        inode: meta.ino(),
        dev: meta.dev(),
        digest,
        hashed_at_ns,
        own: true,
    })
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
    /// Hashed by this process (`hash_seen`: times read on the open file,
    /// after `hashed_at_ns`), so the narrow racy window may apply. An entry
    /// the ledger kept may come from an engine that read the times in an
    /// earlier look, any time before the hash: it keeps the wide window.
    own: bool,
}

impl Seen {
    fn of(s: FileState) -> (String, Seen) {
        let FileState { path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns } = s;
        (path, Seen { size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns, own: false })
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
        let (mt, ct) = (m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.ctime() * 1_000_000_000 + m.ctime_nsec());
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
        assert!(mt.max(ct) < e.hashed_at_ns - 0, "trusted under a zero window");
        assert_eq!(cache.digest(&f).unwrap(), Some(blake3::hash(b"six").to_hex().to_string()));
        assert_eq!((cache.hits, cache.misses), (0, 3));
    }

    /// An unchanged entry is trusted once its times are the narrow window
    /// before its hash where the file system keeps fine stamps (the
    /// temporary folder's, asked), the wide one elsewhere; never within
    /// the narrow one.
    #[test]
    fn a_settled_entry_is_trusted_after_its_file_systems_window() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let (m, mt, ct) = stamps_of(&f);
        let window = stamps::racy_window_ns(stamps::fs_type(dir.path()), m.mtime_nsec(), m.ctime_nsec());
        let mut cache = FileCache::default();
        let key = f.to_string_lossy().into_owned();
        let look_hashed_at = |cache: &mut FileCache, after_ns: i64| {
            cache.digest(&f).unwrap();
            cache.entries.get_mut(&key).unwrap().hashed_at_ns = mt.max(ct) + after_ns;
            let hits = cache.hits;
            assert_eq!(cache.digest(&f).unwrap(), Some(blake3::hash(b"one").to_hex().to_string()));
            cache.hits > hits
        };
        assert!(!look_hashed_at(&mut cache, stamps::FINE_RACY_WINDOW_NS - 1_000_000));
        let fine = window == stamps::FINE_RACY_WINDOW_NS;
        assert_eq!(look_hashed_at(&mut cache, stamps::FINE_RACY_WINDOW_NS + 1_000_000), fine);
        assert!(look_hashed_at(&mut cache, RACY_WINDOW_NS + 1_000_000));
        // One `statfs` for the device, whatever the looks.
        assert_eq!(cache.fs_types.keys().collect::<Vec<_>>(), vec![&m.dev()]);
    }

    /// An entry the ledger kept (maybe from an engine that read the
    /// times before the hash) keeps the wide window; once this process
    /// hashed the file, the file system's window applies.
    #[test]
    fn a_kept_entry_keeps_the_wide_window_until_hashed_here() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        let (m, mt, ct) = stamps_of(&f);
        let settled_ns = mt.max(ct) + stamps::FINE_RACY_WINDOW_NS + 1_000_000;
        let kept = FileState {
            path: f.to_string_lossy().into_owned(),
            size: m.len(),
            mtime_ns: mt,
            ctime_ns: ct,
            inode: m.ino(),
            dev: m.dev(),
            digest: "kept".into(),
            hashed_at_ns: settled_ns,
        };
        let mut cache = FileCache::from_states(vec![kept]);
        let want = Some(blake3::hash(b"one").to_hex().to_string());
        assert_eq!(cache.digest(&f).unwrap(), want, "hashed again, not taken");
        assert_eq!((cache.hits, cache.misses), (0, 1));
        cache.entries.get_mut(f.to_string_lossy().as_ref()).unwrap().hashed_at_ns = settled_ns;
        let fine = stamps::racy_window_ns(stamps::fs_type(dir.path()), m.mtime_nsec(), m.ctime_nsec())
            == stamps::FINE_RACY_WINDOW_NS;
        assert_eq!(cache.digest(&f).unwrap(), want);
        assert_eq!(cache.hits, u64::from(fine));
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
            hashed_at_ns: now_ns() + 10 * RACY_WINDOW_NS,
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
