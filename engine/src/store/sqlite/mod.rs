//! The SQLite ledger: one file (by default the workspace's, outside it:
//! `store::location`), opened with checked permissions, migrated, in WAL mode. The
//! only code in the engine that names `rusqlite` or writes SQL.
//!
//! `Db` (here) opens, migrates and runs transactions; `sql.rs` is a
//! connection (or a transaction) seen through the ledger's traits,
//! implemented by aggregate in the files beside it; `open.rs` holds what
//! every open and commit shares; `lease.rs` the lease row and the fence.
//! Beside the store file, its mark (`mark.rs`) keeps the store's identity
//! and commit count outside SQLite, so a store that lost commits is refused
//! (`identity.rs`); a new store is made whole or not at all (`create.rs`);
//! `files.rs` owns the paths and their permissions; `schema.rs` the tables
//! and migrations; `verify/` the checks of `engine verify`.
mod acts;
mod attempts;
mod chain;
mod checked;
mod columns;
mod completions;
mod create;
mod events;
mod evidence;
pub mod files;
mod fold;
mod fresh;
mod goals;
mod group;
mod header;
pub mod identity;
mod inspect;
mod lease;
pub mod mark;
mod open;
mod outputs;
pub mod owner;
mod schema;
mod share;
mod sql;
pub mod verify;
mod version;
mod walbuf;

use std::path::Path;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::access::Confinement;
use super::lease::{Acquired, Fence, Holder};
use super::{Durability, GoalsRead, LedgerRead, LedgerTx};
use crate::error::{Code, Error, Result};
use checked::Checked;
use files::{check_store_file, StoreFiles};
use identity::Verdict;
use mark::{Mark, MarkFile};
use open::{
    check_files, configure, connect, count_commit, count_if_marked, doubt, judge, located, open_existing,
    refuse_unwritable, sqlite_error, Found,
};
pub(super) use sql::Sql;
use verify::{examine, Opened};

pub use schema::SCHEMA_VERSION;

/// `Store::adopt_copy`: the mark of a copied, cleanly closed store made to
/// name the copy's file as the one its last writer closed.
pub fn adopt_copy(path: &Path) -> Result<()> {
    let files = StoreFiles::new(path);
    let mut mark = MarkFile::open(&files.mark)?;
    let next = Mark { closed_file: Some(mark::Fingerprint::of(&files.db)?), ..mark.last().clone() };
    mark.record(next, false)
}

pub(super) struct Db {
    conn: Connection,
    files: StoreFiles,
    durability: Durability,
    /// The mark, open for updates while this process holds the lease.
    mark: Option<MarkFile>,
    /// Writes gathered into one commit (`group.rs`), while a group is open.
    group: Option<group::Group>,
    /// The store file this reader's connection opened (`FileId`), when
    /// it is known: a writer of the same command may go on with it.
    opened: Option<FileId>,
    /// The store as this connection's check on open found it whole
    /// (`checked.rs`): the lease's check is skipped while it still is.
    checked: Option<Checked>,
    /// This connection's commits, up to `open::MAPPED_COMMITS` (then it
    /// reads by copy).
    commits: u32,
    /// The WAL folded in beside this writer while it holds the lease
    /// (`fold.rs`). After `conn`: the connection (and its WAL hook) goes
    /// first when a `Db` is dropped.
    fold: Option<fold::Checkpointer>,
}

/// A file's device and inode.
type FileId = (u64, u64);

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Db {
    /// Open for writing, making the store (atomically, `create.rs`) if there
    /// is none — unless its mark says one existed: a lost store is refused,
    /// never made again. The folder is 0700, the files 0600 (a store shared
    /// with a group: 2770 and 0660, that group's); symlinks and other
    /// users' files are refused.
    pub fn open_rw(path: &Path) -> Result<Db> {
        Db::open_writer(path, true, None)
    }

    /// `open_rw` after this process's reader of the same store
    /// (`open_ro_if_current`): every check of an open is made again, on
    /// the reader's connection when it is still the store file's and in
    /// no transaction (its schema read and its statements prepared once
    /// a command, not twice), else on a new one.
    pub fn open_rw_after(path: &Path, reader: Option<Db>) -> Result<Db> {
        Db::open_writer(path, true, reader)
    }

    /// Open an existing store for writing: `STORE_NOT_FOUND` when there is
    /// none (every command but `run`), and nothing is made.
    pub fn open_existing(path: &Path) -> Result<Db> {
        Db::open_writer(path, false, None)
    }

    /// The reader's connection, if it may serve a writer of the store
    /// whose files are `files` (`open_rw_after`).
    /// With it, the store as its check on open found it whole, if it did.
    fn connection_for(self, files: &StoreFiles) -> Option<(Connection, Option<Checked>)> {
        let same = self.files.db == files.db && self.opened.is_some() && self.opened == file_id(&files.db);
        (same && self.mark.is_none() && self.group.is_none() && self.conn.is_autocommit())
            .then_some((self.conn, self.checked))
    }

    fn open_writer(path: &Path, create: bool, reader: Option<Db>) -> Result<Db> {
        let files = StoreFiles::new(path);
        let path = &files.db.clone();
        if !create && matches!(check_files(&files)?, Found::Nothing) {
            return Err(crate::store::location::no_store_at(path));
        }
        files.make_dir()?;
        create::sweep_leftovers(&files);
        // The mark first: it exists only once the store file does.
        if let Found::Nothing = check_files(&files)? {
            files.check_folder_is_yours()?;
            create::create(&files)?;
        }
        let Found::Store(sharing) = check_files(&files)? else {
            return Err(Error::internal("the store just made is not there"));
        };
        let (conn, checked) = match reader.and_then(|r| r.connection_for(&files)) {
            Some(reused) => reused,
            None => (connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?, None),
        };
        // Judged before anything is written, migrations included.
        let (_, verdict) = judge(&conn, &files)?;
        refuse_unwritable(&conn, &files)?;
        configure(&conn).map_err(|e| sqlite_error(&conn, e, path))?;
        schema::migrate(&conn).map_err(|e| match sqlite_error(&conn, e, path) {
            e if e.code == Code::Internal => {
                Error { message: format!("cannot migrate store: {}", e.message), ..e }.at(path.display().to_string())
            }
            e => located(e, path),
        })?;
        files.tighten_side_files(&sharing);
        if verdict == Verdict::Unmarked {
            let facts = identity::facts(&conn).map_err(|e| located(e.into(), path))?;
            let id = facts.store_id.ok_or_else(|| Error::internal("a migrated store without its identity"))?;
            let mark = Mark { owner: Some(files.owner()?), ..Mark::new(&id) };
            MarkFile::create(&files.mark, &mark).map_err(|e| located(e, path))?;
        }
        Ok(Db {
            conn,
            files,
            durability: Durability::Normal,
            mark: None,
            group: None,
            opened: None,
            checked,
            commits: 0,
            fold: None,
        })
    }

    /// Open an existing store for reading only (status, log, explain).
    /// `Ok(None)` when there is no store yet. A store that lost commits is
    /// refused; one not known to be whole is checked first, as `engine
    /// verify` checks it.
    pub fn open_ro(path: &Path) -> Result<Option<Db>> {
        Db::open_reader(path, false)
    }

    /// `open_ro`, but `Ok(None)` too for a store whose schema version is
    /// not this engine's (a writer migrates it, or refuses a newer one, as
    /// it opens it): `engine run`'s look before its lease.
    pub fn open_ro_if_current(path: &Path) -> Result<Option<Db>> {
        Db::open_reader(path, true)
    }

    fn open_reader(path: &Path, only_current: bool) -> Result<Option<Db>> {
        let files = StoreFiles::new(path);
        let path = &files.db.clone();
        let before = file_id(path);
        // Read-write flags so WAL readers can use the shared memory file;
        // this handle never writes (no lease, no write).
        let Some(conn) = open_existing(&files, OpenFlags::SQLITE_OPEN_READ_WRITE)? else { return Ok(None) };
        let opened = before.filter(|b| file_id(path) == Some(*b));
        if only_current && open::claimed_version(&conn, &files)? != schema::SCHEMA_VERSION {
            return Ok(None);
        }
        let (version, verdict) = judge(&conn, &files)?;
        if version < schema::SCHEMA_VERSION {
            // A reader never writes, so it does not migrate either.
            return Err(Error::usage(format!(
                "the store has schema version {version}, older than this engine's {}; a writing command (`engine run`) migrates it",
                schema::SCHEMA_VERSION
            ))
            .at(path.display().to_string()));
        }
        configure(&conn)?;
        let mut db = Db {
            conn,
            files,
            durability: Durability::Normal,
            mark: None,
            group: None,
            opened,
            checked: None,
            commits: 0,
            fold: None,
        };
        if let Verdict::Marked { unclean, changed } = verdict {
            // A live writer's store is in motion, not damaged: not checked.
            let dead_writer = unclean && lease::live_holder(&db.conn)?.is_none();
            if let Some(why) = doubt(false, dead_writer, changed) {
                // In one snapshot: a writer may have taken the store since.
                // The proof that the store is what was checked, taken before
                // the check and after it: kept only when the two agree.
                db.checked = read_in_one_snapshot(&db.conn, || {
                    let before = Checked::now(&db.conn, &db.files)?;
                    let whole = examine(&db.conn, &db.files, why, Opened::Reading)?;
                    let after = Checked::now(&db.conn, &db.files)?;
                    Ok((whole && after == before).then_some(after))
                })?;
            }
        }
        Ok(Some(db))
    }

    /// The schema version of an existing store file (`None`: no file
    /// there), read without writing to it — but a hot journal an older
    /// engine left is rolled back (that needs a read-write handle).
    pub fn schema_version(path: &Path) -> Result<Option<i64>> {
        let files = StoreFiles::new(path);
        let Some(conn) = open_existing(&files, OpenFlags::SQLITE_OPEN_READ_WRITE)? else { return Ok(None) };
        Ok(Some(open::claimed_version(&conn, &files)?))
    }

    /// `Store::peek_cached_plan`: the store file opened `immutable` (no
    /// lock, no shared-memory index, no WAL: a refused plan must leave every
    /// file of the store as it was, and a reader's index updates would not).
    /// A clean release folds the WAL into the file after its last commit,
    /// so the rows a finished run wrote are there; one that is not (a live
    /// writer's, a damaged file) is simply not found or fails its seal.
    pub fn peek_cached_plan(path: &Path, key: &str) -> Option<crate::plan::cache::CachedPlan> {
        use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
        const URI_PATH: &AsciiSet = &CONTROLS.add(b'%').add(b'?').add(b'#');
        let files = StoreFiles::new(path);
        if !files.db_exists() || check_store_file(&files.db).is_err() {
            return None;
        }
        let uri = format!("file:{}?immutable=1", utf8_percent_encode(files.db.to_str()?, URI_PATH));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        open::process_settings();
        let conn = Connection::open_with_flags(uri, flags).ok()?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ok()?;
        if version != schema::SCHEMA_VERSION {
            return None;
        }
        Sql::reader(&conn).cached_plan(key).ok().flatten()
    }

    pub fn path(&self) -> &Path {
        &self.files.db
    }

    /// `f`'s reads, on a thread of their own through a connection of its
    /// own, in one read transaction, while this connection goes on
    /// (`LeaseGuard::read_beside`). The store was opened and checked by
    /// this handle; the side connection only reads.
    pub fn read_beside<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn LedgerRead) -> Result<T> + Send + 'static,
    ) -> Option<std::thread::JoinHandle<Result<T>>> {
        let path = self.files.db.clone();
        // No thread to be had (a process limit): `None`, and the caller
        // reads in line.
        let side = std::thread::Builder::new().name("ledger-read".into());
        side.spawn(move || {
            // Read-write flags so a WAL reader can use the shared memory file.
            let conn = connect(&path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
            read_in_one_snapshot(&conn, || f(&Sql::reader(&conn)))
        })
        .ok()
    }

    pub fn reader(&self) -> Sql<'_> {
        Sql::reader(&self.conn)
    }

    /// One transaction beside the live holder of the lease, on a
    /// connection of its own (`Store::write_beside`): IMMEDIATE, checked
    /// first against `holder` (the same process, host and generation still
    /// hold the lease, `lease::check_holder`), then `f`, then the commit
    /// with `synchronous=FULL`, counted in `store_meta.commits` (the
    /// holder's mark may trail it: more commits than a mark says are later
    /// ones not yet marked, `identity.rs`).
    pub fn write_beside<T>(&self, holder: &Holder, f: impl FnOnce(&mut dyn LedgerTx) -> Result<T>) -> Result<T> {
        let path = &self.files.db;
        let mut conn = connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        configure(&conn)?;
        // No checkpoint of its own (SQLite's automatic one at 1,000 pages):
        // the holder's process folds the WAL, and its release records it.
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0")?;
        if files::flushes() {
            conn.execute_batch("PRAGMA synchronous = FULL")?;
        }
        let written = (|| -> Result<T> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            lease::check_holder(&tx, holder)?;
            let value = f(&mut Sql::writer(&tx, Fence::new(holder.generation)))?;
            count_commit(&tx)?;
            tx.commit()?;
            Ok(value)
        })();
        if written.is_ok() {
            // A flushed commit carries the holder's unflushed ones with it.
            crate::sim::disk::committed(path, Durability::Full);
        }
        written.map_err(|e| located(e, path))
    }

    /// Run `f` inside one read transaction (one snapshot).
    pub fn snapshot<T>(&self, f: impl FnOnce(&dyn LedgerRead) -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            // Inside this writer's open group: its transaction is the snapshot.
            return f(&self.reader());
        }
        read_in_one_snapshot(&self.conn, || f(&self.reader()))
    }

    /// One IMMEDIATE transaction: the fence is checked first (a superseded
    /// writer gets `STALE_GENERATION` and writes nothing), then `f`, then
    /// the commit, fsynced when `durability` is `Full`. A `Full` one counts
    /// itself in `store_meta.commits` and is recorded in the mark before the
    /// caller acts on it; a `Normal` one is not counted (`count_if_marked`).
    /// A transaction that does not fit on the disk is rolled back whole:
    /// `STORE_FULL`.
    /// Each commit is counted for `ENGINE_CRASH_AFTER_COMMITS` (a testing aid).
    pub fn write<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        f: impl FnMut(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        crate::failpoint::refuse_if_dead()?;
        let result = match self.group.is_some() {
            true => self.write_grouped(fence, durability, f),
            false => self.write_counted(fence, durability, f),
        };
        result.map_err(|e| located(sqlite_error(&self.conn, e, &self.files.db), &self.files.db))
    }

    fn write_counted<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        mut f: impl FnMut(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        self.set_durability(durability)?;
        // Cached statements, not `rusqlite::Transaction` (which parses its
        // `BEGIN IMMEDIATE` and `COMMIT` again at every commit: ~21,000
        // instructions a process task). `Begun` rolls back whatever does
        // not reach its commit, as `Transaction`'s drop did.
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let begun = Begun(&self.conn);
        lease::check_fence(begun.0, fence)?;
        let value = f(&mut Sql::writer(begun.0, fence))?;
        let commits = count_if_marked(begun.0, durability)?;
        begun.commit()?;
        if let Some(commits) = commits {
            self.mark_commit(commits, fence.generation())?;
        }
        self.count_mapped_commit();
        crate::sim::disk::committed(&self.files.db, durability);
        crate::failpoint::committed();
        Ok(value)
    }
}

/// A transaction begun on the writer's connection: rolled back when it is
/// dropped before `commit` succeeds (an error on the way, or an unwind).
struct Begun<'c>(&'c Connection);

impl Begun<'_> {
    fn commit(self) -> rusqlite::Result<()> {
        self.0.prepare_cached("COMMIT")?.execute([]).map(|_| ())
    }
}

impl Drop for Begun<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let _ = self.0.prepare_cached("ROLLBACK").and_then(|mut rollback| rollback.execute([]));
        }
    }
}

impl Db {
    /// One more commit of this connection: at `open::MAPPED_COMMITS`, it
    /// reads by copy from then on.
    pub(super) fn count_mapped_commit(&mut self) {
        if self.commits < open::MAPPED_COMMITS {
            self.commits += 1;
            if self.commits == open::MAPPED_COMMITS {
                open::unmap_store_file(&self.conn);
            }
        }
    }

    /// The mark learns of a durable commit (the store is held: open);
    /// written, not flushed (`mark.rs` says why).
    fn mark_commit(&mut self, commits: i64, generation: i64) -> Result<()> {
        let mark = self.mark.as_mut().ok_or_else(|| Error::internal("a durable commit without the store's mark"))?;
        let next = Mark { commits, generation, open: true, closed_file: None, closed_wal: None, ..mark.last().clone() };
        mark.record(next, false)
    }

    fn set_durability(&mut self, durability: Durability) -> Result<()> {
        if durability != self.durability {
            // Switched twice per task (intents and receipts are `Full`):
            // a cached statement, not a parse each time.
            let pragma = match (durability, files::flushes()) {
                (_, false) => "PRAGMA synchronous = OFF",
                (Durability::Full, true) => "PRAGMA synchronous = FULL",
                (Durability::Normal, true) => "PRAGMA synchronous = NORMAL",
            };
            self.conn.prepare_cached(pragma)?.execute([])?;
            self.durability = durability;
        }
        Ok(())
    }

    pub fn acquire_lease(&mut self) -> Result<Acquired> {
        self.set_durability(Durability::Full)?;
        let acquired = lease::acquire(&mut self.conn, &self.files, &mut self.mark, self.checked.take());
        crate::sim::disk::committed(&self.files.db, Durability::Full);
        // Replaces the automatic checkpoint the lease set (the same backstop).
        // Not in the simulator: its disk model follows the writer's thread
        // (`sim::disk`), and a fold's timing would make a seed's power loss
        // keep more or less; there the writer checkpoints itself, as before.
        if acquired.is_ok() && !crate::failpoint::sim::active() {
            self.fold = Some(fold::Checkpointer::install(
                &self.conn,
                &self.files.db,
                file_id(&self.files.db),
                fold::FOLD_FRAMES,
            ));
        }
        acquired
    }

    pub fn release_lease(&mut self, fence: Fence) -> Result<()> {
        // A process that died gives nothing back: its lease is taken over.
        crate::failpoint::refuse_if_dead()?;
        // First, so that its failure is told whatever follows, and the
        // group's commit asks no fold only to stop it.
        self.stop_folding();
        // A group left open by a run that ended in an error: committed, as
        // a crash right after it would have left it.
        self.commit_group(fence)?;
        self.set_durability(Durability::Full)?;
        let released = lease::release(&mut self.conn, &self.files, &mut self.mark, fence);
        crate::sim::disk::committed(&self.files.db, Durability::Full);
        released
    }

    /// The checkpointer ended before the release's own checkpoint (no other
    /// checkpoint may move the store file once the mark records it). Its
    /// failure lost nothing committed (the WAL keeps it, and the release
    /// folds it in), so it fails nothing: it is told, once.
    fn stop_folding(&mut self) {
        let Some(fold) = self.fold.take() else { return };
        if let Some(why) = fold.stop(&self.conn).failed {
            let note = format!(
                "engine: note: the store's WAL could not be folded in beside the run ({why}); nothing committed \
                 depends on it"
            );
            crate::say_line!("{}", crate::report::escape::for_terminal(&note));
        }
    }

    pub fn live_holder(&self) -> Result<Option<Holder>> {
        lease::live_holder(&self.conn)
    }

    /// On a store shared with a group, what this process's run must confine
    /// its providers with: `None` when the store is its owner's alone, or
    /// when this process is the store's owner (whose `ours` the mark then
    /// records: the store's confinement, under the lease).
    /// Is the store shared with a group (as its mark records, under the
    /// lease this process holds)?
    pub fn shared_with_group(&self) -> bool {
        self.mark.as_ref().and_then(|m| m.last().owner).is_some_and(|o| o.shared().is_some())
    }

    pub fn shared_confinement(&mut self, ours: Confinement) -> Result<Option<Confinement>> {
        let mark = self.mark.as_mut().ok_or_else(|| Error::internal("a shared store's record without its lease"))?;
        let last = mark.last().clone();
        let Some(owner) = last.owner.filter(|o| o.shared().is_some()) else { return Ok(None) };
        if owner.uid != crate::store::access::current_uid() {
            return Ok(Some(last.confinement.unwrap_or(Confinement::FULL)));
        }
        if last.confinement != Some(ours) {
            mark.record(Mark { confinement: Some(ours), ..last }, true).map_err(|e| located(e, &self.files.db))?;
        }
        Ok(None)
    }

    /// Share the store with `group`, under the lease this process holds
    /// (`share.rs`).
    pub fn share(&mut self, group: &crate::os::Group) -> Result<()> {
        let mark = self.mark.as_mut().ok_or_else(|| Error::internal("sharing a store without its lease"))?;
        share::share(&self.files, mark, group).map_err(|e| located(e, &self.files.db))
    }
}

/// `f`'s reads in one read transaction (one snapshot), its `BEGIN` and
/// `COMMIT` prepared once per connection; the snapshot ends whatever `f`
/// returned.
fn read_in_one_snapshot<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.prepare_cached("BEGIN DEFERRED")?.execute([])?;
    let value = f();
    let ended = conn.prepare_cached("COMMIT").and_then(|mut commit| commit.execute([]));
    if ended.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let value = value?;
    ended?;
    Ok(value)
}

/// `store::located`: name the store in a damaged-store or full-disk error.
pub(super) fn name_store(e: Error, path: &Path) -> Error {
    located(e, path)
}

/// `Store::sweep_leftovers`: the temporary files of killed creations.
pub(super) fn sweep_leftovers(path: &Path) {
    create::sweep_leftovers(&StoreFiles::new(path));
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::Db;

    fn tables_named(db: &Db, name: &str) -> i64 {
        db.conn.query_row("SELECT COUNT(*) FROM sqlite_schema WHERE name = ?1", [name], |r| r.get(0)).unwrap()
    }

    /// A store whose file changed since its writer closed it (its times
    /// moved: `identity.rs`), so every open checks it whole.
    fn changed_store(dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("store/engine.db");
        let mut db = Db::open_rw(&path).unwrap();
        let fence = db.acquire_lease().unwrap().fence;
        db.release_lease(fence).unwrap();
        drop(db);
        touch(&path);
        path
    }

    fn touch(path: &std::path::Path) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        let moved = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        file.set_modified(moved).unwrap();
    }

    /// `engine run`'s look checks the store, then its writer takes the
    /// lease: how many whole-store checks the two made, after `between`.
    fn checks_for_look_then_lease(between: impl FnOnce(&std::path::Path)) -> u32 {
        let dir = tempfile::tempdir().unwrap();
        let path = changed_store(dir.path());
        super::verify::EXAMINED.with(|n| n.set(0));
        let reader = Db::open_ro_if_current(&path).unwrap().unwrap();
        assert!(reader.checked.is_some(), "the look checked the changed store and found it whole");
        between(&path);
        let mut writer = Db::open_rw_after(&path, Some(reader)).unwrap();
        writer.acquire_lease().unwrap();
        super::verify::EXAMINED.with(|n| n.get())
    }

    #[test]
    fn the_lease_checks_again_only_a_store_that_may_have_changed_since_the_look_checked_it() {
        assert_eq!(checks_for_look_then_lease(|_| {}), 1, "the same store, untouched: checked once");
        let committed = |path: &std::path::Path| {
            let other = Connection::open(path).unwrap();
            // One more commit, as a writer's would count it.
            let counted = other.execute("UPDATE store_meta SET commits = commits + 1 WHERE id = 1", []).unwrap();
            assert_eq!(counted, 1);
        };
        assert_eq!(checks_for_look_then_lease(committed), 2, "another connection committed: checked again");
        assert_eq!(checks_for_look_then_lease(touch), 2, "the file written outside SQLite: checked again");
        // Only the WAL's change time moves (as an edit in place whose
        // modification time was set back would leave it).
        let wal_changed = |path: &std::path::Path| {
            let wal = path.with_file_name("engine.db-wal");
            let mode = std::fs::metadata(&wal).expect("the look left the WAL").permissions();
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::set_permissions(&wal, mode).unwrap();
        };
        assert_eq!(checks_for_look_then_lease(wal_changed), 2, "the WAL changed outside SQLite: checked again");
    }

    #[test]
    fn a_writer_goes_on_with_its_readers_connection_only_while_that_has_the_store_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store/engine.db");
        assert!(Db::open_ro_if_current(&path).unwrap().is_none(), "no store: nothing to look at");
        drop(Db::open_rw(&path).unwrap());
        let reader = Db::open_ro_if_current(&path).unwrap().unwrap();
        // Only the reader's connection knows this table (a temporary one).
        reader.conn.execute_batch("CREATE TEMP TABLE looked (x)").unwrap();
        let writer = Db::open_rw_after(&path, Some(reader)).unwrap();
        assert_eq!(
            writer.conn.query_row("SELECT COUNT(*) FROM temp.sqlite_schema", [], |r| r.get::<_, i64>(0)).unwrap(),
            1
        );
        drop(writer);
        // The store file replaced (another inode) between the look and the
        // writer: the writer opens the file now there.
        let reader = Db::open_ro_if_current(&path).unwrap().unwrap();
        let copy = dir.path().join("store/copy.db");
        std::fs::copy(&path, &copy).unwrap();
        Connection::open(&copy)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE only_in_copy (x)")
            .unwrap();
        std::fs::rename(&copy, &path).unwrap();
        let writer = Db::open_rw_after(&path, Some(reader)).unwrap();
        assert_eq!(tables_named(&writer, "only_in_copy"), 1, "a new connection, on the file now at the path");
    }
}
