//! Writing upstream tasks' outputs into this workspace before a task runs:
//! each file the ledger holds is compared with what the workspace has (a
//! regular file with the same content digest is left alone), every blob
//! to write is read and checked against its digest before the first byte
//! is written, and each file is written to a temporary name beside it,
//! synced, renamed into place and hashed again. No symlink is followed:
//! a symlink (or a folder) on the way to an output, or at its place, is
//! refused with the path named.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::checkpoint::{hash_regular_file, FileCache};
use crate::decide::outputs::{place, Place, Present};
use crate::error::{Code, Error, Result};
use crate::store::outputs::OutputFile;
use crate::workspace::lexically_inside;

/// One file to put in place, and the upstream task whose output it is.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub file: OutputFile,
    pub from: String,
}

/// What materializing did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Materialized {
    /// Files written, and their bytes.
    pub files: usize,
    pub bytes: u64,
    /// Files already there with the right content.
    pub left_alone: usize,
    /// The paths written.
    pub paths: Vec<String>,
}

/// Put `wanted` in place under `root`; `blob` reads a blob's bytes from
/// the ledger by its digest. What is there already is compared through
/// `cache`, the file-state cache: a file unchanged since it was last hashed
/// (size, mtime, ctime, inode, device, outside the racy window) is not
/// read again, so checking an ancestor's outputs before each task along a
/// chain costs a `statx` a file, not a hash.
pub fn materialize(
    root: &Path,
    wanted: &[Wanted],
    blob: &dyn Fn(&str) -> Result<Option<Vec<u8>>>,
    cache: &mut FileCache,
) -> Result<Materialized> {
    let mut done = Materialized::default();
    // The bytes of every file to write, checked, before anything is written.
    let mut writes: BTreeMap<&str, (&Wanted, Vec<u8>)> = BTreeMap::new();
    for w in wanted {
        let target = target(root, w)?;
        match place(&present(&target, w, cache)?, &w.file.digest) {
            Place::LeaveAlone => done.left_alone += 1,
            Place::Refuse => return Err(refused(w, "is not a regular file in the workspace")),
            Place::Write => {
                writes.insert(w.file.path.as_str(), (w, checked_blob(w, blob)?));
            }
        }
    }
    for (path, (w, bytes)) in writes {
        write_file(&target(root, w)?, w, &bytes)?;
        done.files += 1;
        done.bytes += bytes.len() as u64;
        done.paths.push(path.to_string());
    }
    Ok(done)
}

/// The output's place: lexically inside the workspace (a row naming one
/// outside was not written by the engine), with no symlink among the
/// folders on the way that exist.
fn target(root: &Path, w: &Wanted) -> Result<PathBuf> {
    lexically_inside(&w.file.path).map_err(|why| {
        Error::new(
            Code::StoreTampered,
            format!("the recorded output path {:?} of task `{}` {why}", w.file.path, w.from),
        )
        .at(format!("outputs row {}", w.file.path))
    })?;
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = w.file.path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let (last, folders) = parts.split_last().ok_or_else(|| refused(w, "names no file"))?;
    for part in folders {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refused(w, &format!("goes through the symlink {}", at.display())))
            }
            Ok(m) if !m.is_dir() => return Err(refused(w, &format!("goes through {}, not a folder", at.display()))),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(root.join(folders.join("/")).join(last))
}

fn refused(w: &Wanted, why: &str) -> Error {
    Error::new(
        Code::InputOutsideWorkspace,
        format!(
            "output `{}` of task `{}` cannot be written into this workspace: it {why}; the engine never writes \
             through a symlink or over a folder (move it away, then run again)",
            w.file.path, w.from
        ),
    )
    .at(w.file.path.clone())
}

fn present(target: &Path, w: &Wanted, cache: &mut FileCache) -> Result<Present> {
    let meta = match fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Present::Absent),
        Err(e) => return Err(refused(w, &format!("cannot be read ({e})"))),
    };
    if !meta.file_type().is_file() {
        return Ok(Present::Other);
    }
    // Not a link (looked at without following): its metadata is the file's.
    match cache.digest_known(target, Some(meta)) {
        Ok(Some(digest)) => Ok(Present::File { digest }),
        Ok(None) => Ok(Present::Absent),
        Err(e) => Err(refused(w, &format!("cannot be read ({e})"))),
    }
}

/// The blob's bytes, refused unless they are what its digest says.
fn checked_blob(w: &Wanted, blob: &dyn Fn(&str) -> Result<Option<Vec<u8>>>) -> Result<Vec<u8>> {
    let row = format!("blobs row {}", w.file.digest);
    let bytes = blob(&w.file.digest)?.ok_or_else(|| {
        Error::new(
            Code::StoreCorrupt,
            format!("output `{}` of task `{}` has no blob in the ledger", w.file.path, w.from),
        )
        .at(row.clone())
    })?;
    if crate::digest::content(&bytes) != w.file.digest || bytes.len() as u64 != w.file.size {
        return Err(Error::new(
            Code::StoreTampered,
            format!(
                "the ledger's bytes for output `{}` of task `{}` do not match their digest: they were written by \
                 something other than the engine; nothing was written to the workspace",
                w.file.path, w.from
            ),
        )
        .at(row));
    }
    Ok(bytes)
}

/// Temporary file beside the target, synced, renamed over it, hashed again.
fn write_file(target: &Path, w: &Wanted, bytes: &[u8]) -> Result<()> {
    let io = |e: std::io::Error| refused(w, &format!("could not be written ({e})"));
    let parent = target.parent().ok_or_else(|| refused(w, "has no folder"))?;
    fs::create_dir_all(parent).map_err(io)?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Unique among writers sharing a folder (a shared filesystem): pid and time.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tmp = parent.join(format!(".{name}.engine-{}-{nanos}.tmp", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(w.file.mode()).open(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(fs::Permissions::from_mode(w.file.mode()))?;
        f.sync_all()?;
        fs::rename(&tmp, target)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(e));
    }
    let after = hash_regular_file(target).map_err(io)?;
    if after != w.file.digest {
        return Err(refused(w, &format!("read back as {after}, not the {} written", w.file.digest)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(path: &str, bytes: &[u8]) -> Wanted {
        let file = OutputFile {
            path: path.into(),
            digest: crate::digest::content(bytes),
            size: bytes.len() as u64,
            executable: false,
        };
        Wanted { file, from: "A".into() }
    }

    #[test]
    fn writes_what_is_missing_and_leaves_the_right_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let ws = [wanted("dist/out.txt", b"built\n"), wanted("same.txt", b"same")];
        fs::write(dir.path().join("same.txt"), b"same").unwrap();
        let blobs = |d: &str| {
            Ok([b"built\n".as_slice(), b"same"]
                .into_iter()
                .find(|b| crate::digest::content(b) == d)
                .map(<[u8]>::to_vec))
        };
        let done = materialize(dir.path(), &ws, &blobs, &mut FileCache::default()).unwrap();
        assert_eq!((done.files, done.bytes, done.left_alone), (1, 6, 1));
        assert_eq!(fs::read(dir.path().join("dist/out.txt")).unwrap(), b"built\n");
    }

    #[test]
    fn a_blob_not_matching_its_digest_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ws = [wanted("a.txt", b"good"), wanted("b.txt", b"also good")];
        let blobs = |d: &str| {
            Ok(Some(if d == crate::digest::content(b"good") { b"good".to_vec() } else { b"evil!!!!!".to_vec() }))
        };
        let e = materialize(dir.path(), &ws, &blobs, &mut FileCache::default()).unwrap_err();
        assert_eq!(e.code, Code::StoreTampered, "{e}");
        assert!(fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written");
    }

    #[test]
    fn a_symlink_on_the_way_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("dist")).unwrap();
        let ws = [wanted("dist/out.txt", b"x")];
        let e = materialize(dir.path(), &ws, &|_| Ok(Some(b"x".to_vec())), &mut FileCache::default()).unwrap_err();
        assert_eq!(e.code, Code::InputOutsideWorkspace, "{e}");
        assert!(e.message.contains("symlink"), "{e}");
        assert!(fs::read_dir(outside.path()).unwrap().next().is_none(), "nothing written through it");
        std::os::unix::fs::symlink(outside.path().join("f"), dir.path().join("link.txt")).unwrap();
        let e = materialize(
            dir.path(),
            &[wanted("link.txt", b"x")],
            &|_| Ok(Some(b"x".to_vec())),
            &mut FileCache::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
    }
}
