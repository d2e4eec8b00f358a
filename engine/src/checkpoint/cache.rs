//! The file-state cache: (size, mtime, ctime, inode, device) → digest, so
//! an unchanged file is not hashed again. Loaded from and flushed to the
//! ledger by its caller; it knows nothing of the ledger itself.

use foldhash::{HashMap, HashSet};
use std::path::Path;

use super::FileState;

/// A file modified less than this long before it was hashed may change
/// again within the same mtime tick (coarse timestamps): such a cache entry
/// is not trusted, and the file is hashed again.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

#[derive(Debug, Default)]
pub struct FileCache {
    /// By path: the path is the key only (a `FileState`'s own is moved
    /// into it, not copied, when the ledger's states are loaded).
    entries: HashMap<String, Seen>,
    dirty: HashSet<String>,
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
        if let Some(e) = self.entries.get(key.as_ref()) {
            // Settled: neither the content time nor the inode's change time
            // is within the racy window of when it was hashed.
            if e.size == meta.len()
                && e.mtime_ns == mtime_ns
                && e.ctime_ns == ctime_ns
                && e.inode == meta.ino()
                && e.dev == meta.dev()
                && mtime_ns.max(ctime_ns) < e.hashed_at_ns - RACY_WINDOW_NS
            {
                self.hits += 1;
                return Ok(Some(e.digest.clone()));
            }
        }
        self.misses += 1;
        let hashed_at_ns = now_ns();
        let digest = hash_regular_file(path)?;
        let key = key.into_owned();
        self.entries.insert(
            key.clone(),
            Seen {
                size: meta.len(),
                mtime_ns,
                ctime_ns,
                inode: meta.ino(),
                dev: meta.dev(),
                digest: digest.clone(),
                hashed_at_ns,
            },
        );
        self.dirty.insert(key);
        Ok(Some(digest))
    }
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
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(blake3::Hasher::new().update_reader(file)?.finalize().to_hex().to_string())
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
