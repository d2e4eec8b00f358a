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
//! Two implementations, the only code in the engine that writes SQL:
//! `sqlite` (one file, one writer at a time: the default) and `postgres`
//! (a ledger shared by workers on several machines, `--store
//! postgres://…`). Nothing outside this folder assumes one process or one
//! file: a writer asks its guard to `claim` a task before it works on it
//! (always granted on SQLite, whose lease covers the whole store; a
//! per-task lease with a fencing generation on PostgreSQL). Besides them,
//! `verify` (`engine verify`'s checks) restates the ledger's invariants
//! once, in read-only SQL both backends read alike, through `VerifyDb`.

pub mod access;
pub mod acts;
pub mod attempts;
pub mod chain;
mod columns;
pub mod events;
pub mod evidence;
pub mod goals;
pub mod inspect;
pub mod lease;
mod ledger;
pub mod location;
pub mod outputs;
mod postgres;
mod queries;
mod sqlite;
pub mod state_folder;
pub mod verify;

use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::error::Result;
pub use acts::{ActsRead, ActsWrite};
pub use attempts::{AttemptsRead, AttemptsWrite};
pub use events::{EventsRead, EventsWrite};
pub use evidence::{EvidenceRead, EvidenceWrite};
pub use goals::{GoalsRead, GoalsWrite};
pub use inspect::Inspect;
pub use lease::{Fence, Holder};
pub use ledger::{LedgerRead, LedgerTx};
pub use outputs::{OutputsRead, OutputsWrite};
pub use postgres::claims::{Claimed, TakenOver, GOAL_CLAIM};

pub const STORE_FILE: &str = "engine.db";

/// The schema version this engine writes (a newer store is refused).
pub const SCHEMA_VERSION: i64 = sqlite::SCHEMA_VERSION;

pub use crate::state::Durability;

/// A damaged-store or full-disk error that names no place yet, naming the
/// store at `path` (a read deep inside a run does not know it).
pub fn located(e: crate::error::Error, path: &Path) -> crate::error::Error {
    sqlite::name_store(e, path)
}

/// An opened ledger. Reads only; [`Store::lease`] makes it a writer.
pub struct Store {
    backend: Backend,
    /// Where it is, as given (a path, or a PostgreSQL URL).
    location: PathBuf,
}

enum Backend {
    Sqlite(sqlite::Db),
    Postgres(postgres::Pg),
}

/// Is this store location a PostgreSQL URL (`postgres://…`)?
pub fn is_shared(location: &Path) -> bool {
    location.to_str().is_some_and(postgres::is_url)
}

/// Where a store is, as errors name it (a URL's password left out).
pub fn display_place(location: &Path) -> String {
    if is_shared(location) {
        postgres::redact(url(location))
    } else {
        location.display().to_string()
    }
}

fn url(location: &Path) -> &str {
    location.to_str().unwrap_or_default()
}

impl Store {
    /// Open (creating if needed) for writing. The folder is made 0700 and
    /// the file 0600; a symlink or another user's file is refused. A
    /// PostgreSQL store gets its tables created or migrated.
    pub fn open_rw(path: &Path) -> Result<Store> {
        let backend = if is_shared(path) {
            Backend::Postgres(postgres::Pg::open_rw(url(path))?)
        } else {
            Backend::Sqlite(sqlite::Db::open_rw(path)?)
        };
        Ok(Store { backend, location: path.to_path_buf() })
    }

    /// `open_rw` after this process's `open_ro_if_current` of the same
    /// store: a SQLite store is opened and checked again, as by `open_rw`,
    /// on the reader's connection when it still has the store's file (one
    /// connection, its schema read once, for `engine run`'s look and its
    /// writer).
    pub fn open_rw_after(path: &Path, reader: Option<Store>) -> Result<Store> {
        let reader = reader.and_then(|r| match r.backend {
            Backend::Sqlite(db) => Some(db),
            Backend::Postgres(_) => None,
        });
        let backend = if is_shared(path) {
            Backend::Postgres(postgres::Pg::open_rw(url(path))?)
        } else {
            Backend::Sqlite(sqlite::Db::open_rw_after(path, reader)?)
        };
        Ok(Store { backend, location: path.to_path_buf() })
    }

    /// Open an existing store for writing, never making one
    /// (`STORE_NOT_FOUND`): every command but `run`.
    pub fn open_existing(path: &Path) -> Result<Store> {
        let backend = if is_shared(path) {
            Backend::Postgres(postgres::Pg::open_rw(url(path))?)
        } else {
            Backend::Sqlite(sqlite::Db::open_existing(path)?)
        };
        Ok(Store { backend, location: path.to_path_buf() })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet. A reader never migrates.
    pub fn open_ro(path: &Path) -> Result<Option<Store>> {
        let backend = if is_shared(path) {
            postgres::Pg::open_ro(url(path))?.map(Backend::Postgres)
        } else {
            sqlite::Db::open_ro(path)?.map(Backend::Sqlite)
        };
        Ok(backend.map(|backend| Store { backend, location: path.to_path_buf() }))
    }

    /// `open_ro`, but `Ok(None)` too for a store not at this engine's
    /// schema version (`is_current`), which a writer migrates under its
    /// lease (or refuses, a newer one).
    pub fn open_ro_if_current(path: &Path) -> Result<Option<Store>> {
        if is_shared(path) {
            return match Store::is_current(path)? {
                true => Store::open_ro(path),
                false => Ok(None),
            };
        }
        let backend = sqlite::Db::open_ro_if_current(path)?.map(Backend::Sqlite);
        Ok(backend.map(|backend| Store { backend, location: path.to_path_buf() }))
    }

    /// The simulator's copy of its template store (`sim::session`), made
    /// to read as the file its last writer closed, as a store the engine
    /// had made there itself would: a copy has an inode and times of its
    /// own, so every seed's first opens took it for a changed store and
    /// checked it whole (as `engine verify`), three times a seed.
    pub fn adopt_copy(path: &Path) -> Result<()> {
        sqlite::adopt_copy(path)
    }

    /// Remove what creations of the store at `path` killed midway left
    /// (every writer's open does it too; the sandbox, prepared before the
    /// store is opened, refuses a store folder holding such a second name).
    pub fn sweep_leftovers(path: &Path) {
        if !is_shared(path) {
            sqlite::sweep_leftovers(path)
        }
    }

    /// The schema version of an existing store, read without touching it
    /// (`None`: no store there).
    pub fn schema_version(path: &Path) -> Result<Option<i64>> {
        if is_shared(path) {
            postgres::Pg::schema_version(url(path))
        } else {
            sqlite::Db::schema_version(path)
        }
    }

    /// The plan cache's row for `key` in the store at `path`, read without
    /// touching any of its files (`None`: no store, a shared one, or a row
    /// that cannot be read — the plan then takes the full path). Whatever
    /// it returns is judged by its seal (`plan::cache`), and the store is
    /// opened and checked as usual before anything else trusts it.
    pub fn peek_cached_plan(path: &Path, key: &str) -> Option<crate::plan::cache::CachedPlan> {
        if is_shared(path) {
            return None;
        }
        sqlite::Db::peek_cached_plan(path, key)
    }

    /// Is the store at `path` at this engine's schema version?
    pub fn is_current(path: &Path) -> Result<bool> {
        let current = if is_shared(path) { postgres::SCHEMA_VERSION } else { SCHEMA_VERSION };
        Ok(Store::schema_version(path)? == Some(current))
    }

    /// Where the store is: its file, or its URL without the password.
    pub fn path(&self) -> &Path {
        match &self.backend {
            Backend::Sqlite(db) => db.path(),
            Backend::Postgres(pg) => Path::new(pg.place()),
        }
    }

    /// Is this a ledger shared by workers (claims per task)?
    pub fn shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// The ledger, for reading.
    pub fn read(&self) -> ReadView<'_> {
        ReadView { inner: self.view() }
    }

    /// The whole ledger, listed (see `inspect`).
    pub fn inspect(&self) -> InspectView<'_> {
        InspectView { inner: self.view() }
    }

    fn view(&self) -> View<'_> {
        match &self.backend {
            Backend::Sqlite(db) => View::Sqlite(db.reader()),
            Backend::Postgres(pg) => View::Postgres(pg.reader()),
        }
    }

    /// Read inside one snapshot (one read transaction): every read in `f`
    /// sees the same ledger. On a shared store `f` runs again when the
    /// connection was lost in the middle (so it only reads).
    pub fn snapshot<T>(&self, f: impl FnMut(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(db) => db.snapshot(f),
            Backend::Postgres(pg) => pg.snapshot(f),
        }
    }

    /// The live holder of the lease, if any (for readers to say whether an
    /// in-doubt attempt is still in flight). A shared store has none.
    pub fn live_holder(&self) -> Result<Option<Holder>> {
        match &self.backend {
            Backend::Sqlite(db) => db.live_holder(),
            Backend::Postgres(_) => Ok(None),
        }
    }

    /// The only write without this process's own lease: one transaction
    /// beside `holder`, the live engine that holds it, fenced by that
    /// holder (it must still hold the lease, with the same generation,
    /// inside the transaction). For a question a run holds open for a
    /// person (`run::held`): the run's record of it, and a person's answer
    /// to it from another terminal (`engine answer`). SQLite only: on a
    /// shared store every process takes a worker's lease of its own.
    pub fn write_beside<T>(&self, holder: &Holder, f: impl FnOnce(&mut dyn LedgerTx) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(db) => db.write_beside(holder, f),
            Backend::Postgres(_) => Err(crate::error::Error::usage(
                "a shared (PostgreSQL) store takes no write beside a run: every process takes a worker's lease",
            )),
        }
    }

    /// Take the single-writer lease (`STORE_LOCKED` while another live
    /// engine holds it; a dead holder's lease is taken over and logged).
    /// On a shared store: register as a worker, whose claims a heartbeat
    /// keeps alive.
    pub fn lease(mut self) -> Result<LeaseGuard> {
        let acquired = match &mut self.backend {
            Backend::Sqlite(db) => db.acquire_lease()?,
            Backend::Postgres(pg) => pg.acquire_lease()?,
        };
        Ok(LeaseGuard { store: self, fence: acquired.fence, took_over: acquired.took_over })
    }

    /// The goals a worker may find work in (a shared store's open goals).
    pub fn open_goals(&self) -> Result<Vec<crate::ids::GoalId>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(Vec::new()),
            Backend::Postgres(pg) => pg.open_goals(),
        }
    }

    /// Where the store is, as the command was given it.
    pub fn location(&self) -> &Path {
        &self.location
    }
}

/// A backend's view of the ledger.
enum View<'a> {
    Sqlite(sqlite::Sql<'a>),
    Postgres(postgres::PgSql<'a>),
}

/// The ledger as a reader sees it: every read of [`LedgerRead`], no write.
pub struct ReadView<'a> {
    inner: View<'a>,
}

impl<'a> Deref for ReadView<'a> {
    type Target = dyn LedgerRead + 'a;

    fn deref(&self) -> &Self::Target {
        match &self.inner {
            View::Sqlite(s) => s,
            View::Postgres(p) => p,
        }
    }
}

/// The ledger as a whole: every record, listed; no write.
pub struct InspectView<'a> {
    inner: View<'a>,
}

impl<'a> Deref for InspectView<'a> {
    type Target = dyn Inspect + 'a;

    fn deref(&self) -> &Self::Target {
        match &self.inner {
            View::Sqlite(s) => s,
            View::Postgres(p) => p,
        }
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

    pub fn snapshot<T>(&self, f: impl FnMut(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        self.store.snapshot(f)
    }

    /// `f`'s reads of the ledger as committed now, made beside the caller:
    /// on SQLite on a thread and a connection of their own, in one read
    /// transaction, so that they overlap the caller's own work; `None` on
    /// PostgreSQL, or when no thread could be started (the caller reads in
    /// line). What `f` reads is only as
    /// fresh as the moment it ran: the caller uses it only while nothing it
    /// depends on was written since (a run: `run::early`).
    pub fn read_beside<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn LedgerRead) -> Result<T> + Send + 'static,
    ) -> Option<std::thread::JoinHandle<Result<T>>> {
        match &self.store.backend {
            Backend::Sqlite(db) => db.read_beside(f),
            Backend::Postgres(_) => None,
        }
    }

    /// Run `f` in one transaction: begin, check that this writer's fence
    /// still holds (`STALE_GENERATION` otherwise: a superseded writer
    /// writes nothing), `f`, commit.
    ///
    /// `f` may run more than once on a shared store: when the connection
    /// was lost before the commit (or the commit's answer was lost and it
    /// did not happen), the transaction runs again from the start, on
    /// fresh reads. So `f` does ledger reads and writes only.
    pub fn write<T>(&mut self, durability: Durability, f: impl FnMut(&mut dyn LedgerTx) -> Result<T>) -> Result<T> {
        match &mut self.store.backend {
            Backend::Sqlite(db) => db.write(self.fence, durability, f),
            Backend::Postgres(pg) => pg.write(self.fence, durability, f),
        }
    }

    /// Gather the writes from here on into one transaction, committed by
    /// [`LeaseGuard::commit_group`] (`Full` if any of them is): a step's
    /// receipt and the intents of the tasks it makes ready share one flush.
    /// The caller acts on none of them before that commit. Each write of
    /// the group is still whole or absent (a failed one is rolled back
    /// alone). On PostgreSQL every write commits on its own as before: a
    /// write there may run again after a lost connection, which a group of
    /// closures already run cannot.
    pub fn begin_group(&mut self) {
        if let Backend::Sqlite(db) = &mut self.store.backend {
            db.begin_group()
        }
    }

    /// Commit the open group (nothing if none is open or nothing was written).
    pub fn commit_group(&mut self) -> Result<()> {
        match &mut self.store.backend {
            Backend::Sqlite(db) => db.commit_group(self.fence),
            Backend::Postgres(_) => Ok(()),
        }
    }

    /// A `synchronous=NORMAL` write that may wait for the open group: on
    /// SQLite it is written into the group's transaction just before the
    /// group's next write, or at its commit, adding no commit of its own;
    /// without an open group (and on PostgreSQL) it is written now. Until
    /// the group's commit the ledger does not show it: the caller reads
    /// nothing it changes before then.
    pub fn write_later(
        &mut self,
        mut write: impl FnMut(&mut dyn LedgerTx) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        match &mut self.store.backend {
            Backend::Sqlite(db) => db.write_later(self.fence, Box::new(write)),
            Backend::Postgres(pg) => pg.write(self.fence, Durability::Normal, &mut write),
        }
    }

    /// Is this a shared store (claims per task)?
    pub fn shared(&self) -> bool {
        self.store.shared()
    }

    /// Is this a store file shared with a group (`--store-group`)?
    pub fn shared_with_group(&self) -> bool {
        match &self.store.backend {
            Backend::Sqlite(db) => db.shared_with_group(),
            Backend::Postgres(_) => false,
        }
    }

    /// What this run must confine its providers with on a store shared with
    /// a group (`sqlite::Db::shared_confinement`); `None` on any other.
    pub fn shared_confinement(&mut self, ours: access::Confinement) -> Result<Option<access::Confinement>> {
        match &mut self.store.backend {
            Backend::Sqlite(db) => db.shared_confinement(ours),
            Backend::Postgres(_) => Ok(None),
        }
    }

    /// Share this SQLite store with an OS group, under its lease (its
    /// owner's `--store-group`: `sqlite/share.rs`). A PostgreSQL store's
    /// access is the database's: refused.
    pub fn share_with(&mut self, group: &crate::os::Group) -> Result<()> {
        match &mut self.store.backend {
            Backend::Sqlite(db) => db.share(group),
            Backend::Postgres(_) => Err(crate::error::Error::usage(
                "--store-group shares a store file; a PostgreSQL store's access is the database's",
            )),
        }
    }

    /// Claim a task before working on it. On SQLite the store's lease
    /// covers every task: always this writer's. On a shared store, a
    /// per-task lease (`SKIP LOCKED`): `Elsewhere` when another live
    /// worker holds it; an expired one is taken over (its generation + 1).
    pub fn claim(&mut self, goal: &crate::ids::GoalId, task_ref: &str) -> Result<Claimed> {
        match &mut self.store.backend {
            Backend::Sqlite(_) => Ok(Claimed::Mine { generation: self.fence.generation(), took_over: None }),
            Backend::Postgres(pg) => pg.claim(goal, task_ref),
        }
    }

    /// Give a task's claim back (nothing more to do on it for now).
    pub fn release_claim(&mut self, goal: &crate::ids::GoalId, task_ref: &str) -> Result<()> {
        match &mut self.store.backend {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(pg) => pg.release_claim(goal, task_ref),
        }
    }

    /// The tasks of a goal other live workers hold (none on SQLite).
    pub fn held_elsewhere(&self, goal: &crate::ids::GoalId) -> Result<std::collections::HashSet<String>> {
        match &self.store.backend {
            Backend::Sqlite(_) => Ok(Default::default()),
            Backend::Postgres(pg) => pg.held_elsewhere(goal),
        }
    }

    /// This writer's name on a shared store (host, pid, a random part).
    pub fn worker_id(&self) -> Option<&str> {
        match &self.store.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(pg) => Some(pg.worker_id()),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Nothing to report to on this path; a lease left behind is taken
        // over by the next engine once this process is gone (claims on a
        // shared store expire).
        let _ = match &mut self.store.backend {
            Backend::Sqlite(db) => db.release_lease(self.fence),
            Backend::Postgres(pg) => pg.release_lease(),
        };
    }
}
