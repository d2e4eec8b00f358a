//! Checkpoints: the observed state of a task's declared inputs (globs
//! expanded, sorted, each file's BLAKE3) plus declared context values.
//! Validations are judged against a checkpoint; reuse compares them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::digest::{Digester, Kind};
use crate::plan::{ContextSource, Task};
use crate::workspace;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Workspace-relative path → content digest (`None`: absent).
    pub files: BTreeMap<String, Option<String>>,
    /// Context name → value (or `digest:<hex>` for secrets).
    pub context: BTreeMap<String, String>,
    pub digest: String,
}

impl Checkpoint {
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

/// A file modified less than this long before it was hashed may change
/// again within the same mtime tick (coarse timestamps): such a cache entry
/// is not trusted, and the file is hashed again.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// The file-state cache: (size, mtime, inode) → digest, so an unchanged
/// file is not hashed again. Loaded from and flushed to the ledger.
#[derive(Debug, Default)]
pub struct FileCache {
    entries: HashMap<String, CacheEntry>,
    dirty: HashSet<String>,
    pub hits: u64,
    pub misses: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct CacheEntry {
    size: u64,
    mtime_ns: i64,
    /// The inode's change time: user space cannot set it back, so an
    /// in-place rewrite with its mtime restored is still caught.
    ctime_ns: i64,
    inode: u64,
    dev: u64,
    digest: String,
    hashed_at_ns: i64,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

impl FileCache {
    pub fn load(conn: &rusqlite::Connection) -> rusqlite::Result<FileCache> {
        let mut stmt =
            conn.prepare("SELECT path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns FROM file_cache")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                CacheEntry {
                    size: r.get::<_, i64>(1)? as u64,
                    mtime_ns: r.get(2)?,
                    ctime_ns: r.get(3)?,
                    inode: r.get::<_, i64>(4)? as u64,
                    dev: r.get::<_, i64>(5)? as u64,
                    digest: r.get(6)?,
                    hashed_at_ns: r.get(7)?,
                },
            ))
        })?;
        Ok(FileCache { entries: rows.collect::<rusqlite::Result<_>>()?, ..Default::default() })
    }

    /// Write back the entries this process hashed.
    pub fn flush(&mut self, tx: &rusqlite::Transaction) -> rusqlite::Result<()> {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO file_cache (path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT(path) DO UPDATE SET size = ?2, mtime_ns = ?3, ctime_ns = ?4, inode = ?5, dev = ?6,
               digest = ?7, hashed_at_ns = ?8",
        )?;
        for path in self.dirty.drain() {
            if let Some(e) = self.entries.get(&path) {
                stmt.execute(rusqlite::params![
                    path,
                    e.size as i64,
                    e.mtime_ns,
                    e.ctime_ns,
                    e.inode as i64,
                    e.dev as i64,
                    e.digest,
                    e.hashed_at_ns
                ])?;
            }
        }
        Ok(())
    }

    /// The content digest of `path` (`None`: absent), from the cache when
    /// size, mtime and inode match and the entry is not racy.
    pub fn digest(&mut self, path: &Path) -> std::io::Result<Option<String>> {
        use std::os::unix::fs::MetadataExt;
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !meta.is_file() {
            // A FIFO or device would block or never end: inputs are files.
            return Err(std::io::Error::other("not a regular file"));
        }
        let key = path.to_string_lossy().into_owned();
        let mtime_ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let ctime_ns = meta.ctime() * 1_000_000_000 + meta.ctime_nsec();
        if let Some(e) = self.entries.get(&key) {
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
        let bytes = std::fs::read(path)?;
        let digest = blake3::hash(&bytes).to_hex().to_string();
        self.entries.insert(
            key.clone(),
            CacheEntry {
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

/// Observe a task's checkpoint now, through `cache`. `secrets` are the
/// plan's secret variable names: their values are recorded only as digests.
pub fn observe(
    workspace_dir: &Path,
    task: &Task,
    secrets: &[String],
    cache: &mut FileCache,
) -> Result<Checkpoint, String> {
    let mut files = BTreeMap::new();
    let mut expander = workspace::Expander::new(workspace_dir)?;
    for input in &task.inputs {
        for rel in expander.expand(input)? {
            let digest =
                cache.digest(&workspace_dir.join(&rel)).map_err(|e| format!("cannot read input {rel}: {e}"))?;
            files.insert(rel, digest);
        }
    }
    let mut context = BTreeMap::new();
    for (name, source) in &task.context {
        let value = match source {
            ContextSource::Env { env } => {
                let v = std::env::var(env).unwrap_or_default();
                if secrets.contains(env) {
                    format!("digest:{}", blake3::hash(v.as_bytes()).to_hex())
                } else {
                    v
                }
            }
            ContextSource::Command(argv) => run_context_command(workspace_dir, argv),
        };
        context.insert(name.clone(), value);
    }
    let digest = Digester::new(Kind::Checkpoint).json("files", &json!(files)).json("context", &json!(context)).finish();
    Ok(Checkpoint { files, context, digest })
}

/// A context command's trimmed stdout (bounded), or a marker of failure.
fn run_context_command(workspace_dir: &Path, argv: &[String]) -> String {
    let Some((prog, args)) = argv.split_first() else { return "error: empty argv".into() };
    match std::process::Command::new(prog).args(args).current_dir(workspace_dir).env_remove("ENGINE_STORE").output() {
        Ok(out) => {
            let mut s = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if s.is_empty() {
                s = String::from_utf8_lossy(&out.stderr).trim().to_string();
            }
            s.chars().take(4096).collect()
        }
        Err(e) => format!("error: {e}"),
    }
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
