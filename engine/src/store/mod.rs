//! The ledger behind one typed interface.
//!
//! The interface is a set of traits by aggregate — `goals` (goals,
//! revisions, tasks), `attempts` (intent, dispatch, receipt, finish),
//! `evidence` (evidence, blobs, claims, check results, checkpoints, the
//! file-state cache), `acts` (a person's acts: approvals, settlements, and
//! the requests a person is asked to approve) and `events` — joined in
//! [`LedgerRead`] and [`LedgerTx`]. The rest of the engine reads through
//! [`Store::read`] and writes only through [`LeaseGuard::write`]: one
//! transaction, begun by checking the writer's [`Fence`], then the closure,
//! then the commit. Without a lease there is no write at all.
//!
//! `sqlite` is the one implementation: the only code in the engine that
//! names `rusqlite` or writes SQL. Another backend (a ledger shared by
//! workers on several machines) implements the same traits; nothing outside
//! this folder assumes one process or one file.

pub mod acts;
pub mod attempts;
pub mod chain;
pub mod events;
pub mod evidence;
pub mod goals;
pub mod inspect;
pub mod lease;
mod ledger;
pub mod location;
mod sqlite;

/// `engine verify`: check a store and name the first bad thing. The checks
/// read the SQLite file itself (its integrity, foreign keys, schema) and
/// restate the ledger's invariants as queries, so they live with the
/// SQLite implementation; this is their public face.
pub mod verify {
    pub use super::sqlite::verify::{verify, Finding, Verified, CHECKS};
}

use std::ops::Deref;
use std::path::Path;

use crate::error::Result;
pub use acts::{ActsRead, ActsWrite};
pub use attempts::{AttemptsRead, AttemptsWrite};
pub use events::{EventsRead, EventsWrite};
pub use evidence::{EvidenceRead, EvidenceWrite};
pub use goals::{GoalsRead, GoalsWrite};
pub use inspect::Inspect;
pub use lease::{Fence, Holder};
pub use ledger::{LedgerRead, LedgerTx};

pub const STORE_FILE: &str = "engine.db";

/// The schema version this engine writes (a newer store is refused).
pub const SCHEMA_VERSION: i64 = sqlite::SCHEMA_VERSION;

/// How durable a commit must be. `Full` survives power loss (intents,
/// receipts, settlements, approvals); `Normal` may lose the last commits on
/// power loss (never on a process crash): bookkeeping the engine can
/// re-derive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Normal,
    Full,
}

/// A damaged-store or full-disk error that names no place yet, naming the
/// store at `path` (a read deep inside a run does not know it).
pub fn located(e: crate::error::Error, path: &Path) -> crate::error::Error {
    sqlite::name_store(e, path)
}

/// An opened ledger. Reads only; [`Store::lease`] makes it a writer.
pub struct Store {
    db: sqlite::Db,
}

impl Store {
    /// Open (creating if needed) for writing. The folder is made 0700 and
    /// the file 0600; a symlink or another user's file is refused.
    pub fn open_rw(path: &Path) -> Result<Store> {
        Ok(Store { db: sqlite::Db::open_rw(path)? })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet. A reader never migrates.
    pub fn open_ro(path: &Path) -> Result<Option<Store>> {
        Ok(sqlite::Db::open_ro(path)?.map(|db| Store { db }))
    }

    /// Remove what creations of the store at `path` killed midway left
    /// (every writer's open does it too; the sandbox, prepared before the
    /// store is opened, refuses a store folder holding such a second name).
    pub fn sweep_leftovers(path: &Path) {
        sqlite::sweep_leftovers(path)
    }

    /// The schema version of an existing store file, read without touching
    /// it (`None`: no file there).
    pub fn schema_version(path: &Path) -> Result<Option<i64>> {
        sqlite::Db::schema_version(path)
    }

    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// The ledger, for reading.
    pub fn read(&self) -> ReadView<'_> {
        ReadView { inner: self.db.reader() }
    }

    /// The whole ledger, listed (see `inspect`).
    pub fn inspect(&self) -> InspectView<'_> {
        InspectView { inner: self.db.reader() }
    }

    /// Read inside one snapshot (one read transaction): every read in `f`
    /// sees the same ledger.
    pub fn snapshot<T>(&self, f: impl FnOnce(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        self.db.snapshot(f)
    }

    /// The live holder of the lease, if any (for readers to say whether an
    /// in-doubt attempt is still in flight).
    pub fn live_holder(&self) -> Result<Option<Holder>> {
        self.db.live_holder()
    }

    /// Take the single-writer lease (`STORE_LOCKED` while another live
    /// engine holds it; a dead holder's lease is taken over and logged).
    pub fn lease(mut self) -> Result<LeaseGuard> {
        let acquired = self.db.acquire_lease()?;
        Ok(LeaseGuard { store: self, fence: acquired.fence, took_over: acquired.took_over })
    }
}

/// The ledger as a reader sees it: every read of [`LedgerRead`], no write.
pub struct ReadView<'a> {
    inner: sqlite::Sql<'a>,
}

impl<'a> Deref for ReadView<'a> {
    type Target = dyn LedgerRead + 'a;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

/// The ledger as a whole: every record, listed; no write.
pub struct InspectView<'a> {
    inner: sqlite::Sql<'a>,
}

impl<'a> Deref for InspectView<'a> {
    type Target = dyn Inspect + 'a;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

/// A store whose lease this process holds: the only way to write. The
/// lease is given back when the guard is dropped (on any return path);
/// a lease already taken over by another engine is left alone.
pub struct LeaseGuard {
    store: Store,
    fence: Fence,
    took_over: Option<Holder>,
}

impl LeaseGuard {
    /// The right this writer writes under, checked by every transaction.
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// The dead holder whose lease was taken over, if any.
    pub fn took_over(&self) -> Option<&Holder> {
        self.took_over.as_ref()
    }

    pub fn path(&self) -> &Path {
        self.store.path()
    }

    pub fn read(&self) -> ReadView<'_> {
        self.store.read()
    }

    pub fn snapshot<T>(&self, f: impl FnOnce(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        self.store.snapshot(f)
    }

    /// Run `f` in one transaction: begin, check that this writer's fence
    /// still holds (`STALE_GENERATION` otherwise: a superseded writer
    /// writes nothing), `f`, commit.
    pub fn write<T>(&mut self, durability: Durability, f: impl FnOnce(&mut dyn LedgerTx) -> Result<T>) -> Result<T> {
        self.store.db.write(self.fence, durability, f)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Nothing to report to on this path; a lease left behind is taken
        // over by the next engine once this process is gone.
        let _ = self.store.db.release_lease(self.fence);
    }
}
