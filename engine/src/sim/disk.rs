//! The simulated disk: what of the store a power loss keeps.
//!
//! The simulator's engine never flushes (`files::flushes`), so the disk is
//! modelled from what the engine asks of each commit: a `synchronous=FULL`
//! commit (and the lease's taking and giving back, which flush) makes the
//! store's files as they are then durable — the image kept here, the WAL
//! appended to it as it grows; a `synchronous=NORMAL` commit after it is
//! not, until the next flush. A power loss puts the image back, with
//! a prefix of what followed it in the same WAL (a torn last page, or
//! whole `NORMAL` commits the disk happened to keep): SQLite keeps the
//! commits whose frames are whole, so a power loss takes a suffix of the
//! commits made since the last flush, and never one flushed. Checkpoints
//! in between are not counted as flushes: the image is never newer than
//! what a real power loss would keep.
//!
//! One image per thread (a seed runs on one thread), of one store.

use std::cell::RefCell;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::store::Durability;

/// The WAL header's size: a WAL whose header changed was restarted.
const WAL_HEADER: usize = 32;

struct Image {
    db: PathBuf,
    /// The store file's bytes, and its identity then (changed only by a
    /// checkpoint).
    file: Vec<u8>,
    file_id: Option<(u64, i64, i64, u64)>,
    wal: Vec<u8>,
    /// A commit was made since the image: a power loss may take it.
    unsynced: bool,
}

thread_local! {
    static IMAGE: RefCell<Option<Image>> = const { RefCell::new(None) };
}

fn wal_of(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_os_string();
    s.push("-wal");
    PathBuf::from(s)
}

fn shm_of(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_os_string();
    s.push("-shm");
    PathBuf::from(s)
}

fn file_id(path: &Path) -> Option<(u64, i64, i64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.size(), m.mtime(), m.mtime_nsec(), m.ino()))
}

/// The simulator is on this thread: only then is the disk modelled.
fn modelled() -> bool {
    crate::failpoint::sim::active()
}

/// A commit of the store at `db` was made with `durability` (or the lease
/// was taken or given back: `Full`).
pub fn committed(db: &Path, durability: Durability) {
    if !modelled() {
        return;
    }
    match durability {
        Durability::Full => flushed(db),
        Durability::Normal => IMAGE.with(|i| {
            if let Some(image) = i.borrow_mut().as_mut() {
                image.unsynced = true;
            }
        }),
    }
}

/// Everything of the store's files is durable now: the image follows them
/// (the WAL's new bytes appended; the store file read again only when a
/// checkpoint changed it).
fn flushed(db: &Path) {
    IMAGE.with(|i| {
        let mut slot = i.borrow_mut();
        let wal = std::fs::read(wal_of(db)).unwrap_or_default();
        let id = file_id(db);
        match slot.as_mut() {
            Some(image) if image.db == db => {
                if image.file_id != id {
                    image.file = std::fs::read(db).unwrap_or_default();
                    image.file_id = id;
                }
                image.wal = wal;
                image.unsynced = false;
            }
            _ => {
                let file = std::fs::read(db).unwrap_or_default();
                *slot = Some(Image { db: db.to_path_buf(), file, file_id: id, wal, unsynced: false });
            }
        }
    });
}

/// Forget the image (a new seed).
pub fn forget() {
    IMAGE.with(|i| *i.borrow_mut() = None);
}

/// The power fails: the store's files go back to the last flush, plus
/// `kept(n)` of the `n` bytes the WAL grew by since (in the same WAL); the
/// shared-memory index is gone. No connection to the store may be open.
/// What was lost, told (`None`: nothing was unflushed).
pub fn power_loss(kept: impl FnOnce(usize) -> usize) -> Option<String> {
    IMAGE.with(|i| {
        let mut slot = i.borrow_mut();
        let image = slot.as_mut()?;
        if !image.unsynced {
            return None;
        }
        let (db, wal_path) = (image.db.clone(), wal_of(&image.db));
        let now = std::fs::read(&wal_path).unwrap_or_default();
        let same_wal = image.wal.is_empty()
            || (image.wal.len() >= WAL_HEADER
                && now.len() >= WAL_HEADER
                && now[..WAL_HEADER] == image.wal[..WAL_HEADER]);
        let mut wal = image.wal.clone();
        let mut torn = 0;
        if same_wal && now.len() > wal.len() {
            let after = now.get(wal.len()..).unwrap_or_default();
            torn = kept(after.len()).min(after.len());
            wal.extend_from_slice(after.get(..torn).unwrap_or_default());
        }
        let lost = now.len().saturating_sub(wal.len());
        let _ = std::fs::write(&wal_path, &wal);
        if file_id(&db) != image.file_id {
            let _ = std::fs::write(&db, &image.file);
            image.file_id = file_id(&db);
        }
        let _ = std::fs::remove_file(shm_of(&db));
        image.wal = wal;
        image.unsynced = false;
        Some(format!("{lost} WAL bytes since the last flush lost, {torn} kept"))
    })
}
