//! Group commit: several `write`s in one transaction, committed once.
//!
//! The run loop opens a group when what it is about to write may share a
//! commit (`decide::group`): a finished task's receipt and the intents of
//! the tasks it makes ready. Each `write` of the group runs in a savepoint
//! of one `BEGIN IMMEDIATE` transaction — a write whose closure fails is
//! rolled back alone, as its own transaction would have been — and
//! `commit_group` commits them together and, when it is `Full`, counts and
//! records the commit in the mark, once. SQLite takes `synchronous` only between transactions, so a
//! group is begun at its first write's durability, and a `Full` write
//! meeting a `Normal` group commits that group first and begins a `Full`
//! one: a group commits `synchronous=FULL` whenever one of its writes asked
//! for it, and a `Normal` one never pays a flush. Nothing the
//! writes say may be acted on before that commit: the caller holds back
//! its dispatches until `commit_group` returned.
//!
//! A write the caller lets wait (`write_later`, `synchronous=NORMAL`) is
//! held in memory and written, in order, into the group's transaction just
//! before its next write (at that write's durability, so it never splits a
//! `Full` group) or at its commit: it adds no transaction of its own. Until
//! then the ledger does not show it, so the caller reads nothing it changes
//! before the group's commit.

use super::open::count_if_marked;
use super::{lease, Db, Sql};
use crate::error::{Error, Result};
use crate::store::lease::Fence;
use crate::store::{Durability, LedgerTx};

/// A write held for the group's next write or its commit.
pub(crate) type Held = Box<dyn FnMut(&mut dyn LedgerTx) -> Result<()> + Send>;

/// An open group: whether its transaction has begun (at its first write),
/// the durability it began with, and the writes held for it.
pub(super) struct Group {
    begun: bool,
    durability: Durability,
    held: Vec<Held>,
}

impl Db {
    /// Gather the writes from here on into one commit (until `commit_group`).
    pub fn begin_group(&mut self) {
        if self.group.is_none() {
            self.group = Some(Group { begun: false, durability: Durability::Normal, held: Vec::new() });
        }
    }

    /// A `Normal` write that may wait: held for the open group's next
    /// write or its commit, else written now.
    pub fn write_later(&mut self, fence: Fence, write: Held) -> Result<()> {
        crate::failpoint::refuse_if_dead()?;
        match &mut self.group {
            Some(group) => {
                group.held.push(write);
                Ok(())
            }
            None => self.write(fence, Durability::Normal, write),
        }
    }

    /// The held writes, into the group's transaction at `durability`.
    fn write_held(&mut self, fence: Fence, durability: Durability) -> Result<()> {
        let held = self.group.as_mut().map(|g| std::mem::take(&mut g.held)).unwrap_or_default();
        if held.is_empty() {
            return Ok(());
        }
        let mut held = held;
        self.write_grouped(fence, durability, |tx| held.iter_mut().try_for_each(|write| write(tx)))
    }

    /// One write of the group: a savepoint in the group's transaction (begun
    /// by the first write, under the write lock, the fence checked once —
    /// no other writer can move the lease while the lock is held).
    pub(super) fn write_grouped<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        mut f: impl FnMut(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        if self.group.as_ref().is_some_and(|g| !g.held.is_empty()) {
            self.write_held(fence, durability)?;
        }
        let Some(group) = &self.group else { return Err(Error::internal("a grouped write without a group")) };
        if group.begun && group.durability == Durability::Normal && durability == Durability::Full {
            // SQLite takes `synchronous` only outside a transaction: what
            // the group holds so far commits as it would have on its own,
            // and a `Full` group begins with this write.
            self.commit_open(fence)?;
            self.begin_group();
        }
        if !self.group.as_ref().is_some_and(|g| g.begun) {
            return self.write_first(fence, durability, f);
        }
        self.conn.prepare_cached("SAVEPOINT grouped")?.execute([])?;
        let value = f(&mut Sql::writer(&self.conn, fence));
        if self.conn.is_autocommit() {
            // SQLite rolled the whole transaction back (a full disk, an I/O
            // error): every write of the group is gone, none was acted on.
            self.group = None;
            return Err(value.err().unwrap_or_else(|| Error::internal("the grouped transaction ended early")));
        }
        if value.is_err() {
            self.conn.prepare_cached("ROLLBACK TO grouped")?.execute([])?;
        }
        self.conn.prepare_cached("RELEASE grouped")?.execute([])?;
        value
    }

    /// The group's first write begins its transaction, which is then this
    /// write's alone: a failed one is rolled back with it (no savepoint
    /// needed) and the group begins again at its next write.
    fn write_first<T>(
        &mut self,
        fence: Fence,
        durability: Durability,
        mut f: impl FnMut(&mut dyn LedgerTx) -> Result<T>,
    ) -> Result<T> {
        self.set_durability(durability)?;
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        if let Err(e) = lease::check_fence(&self.conn, fence) {
            self.abandon_group();
            return Err(e);
        }
        let value = f(&mut Sql::writer(&self.conn, fence));
        if value.is_err() && !self.conn.is_autocommit() {
            self.conn.prepare_cached("ROLLBACK")?.execute([])?;
        }
        if self.conn.is_autocommit() {
            // Rolled back (by this write's failure, or by SQLite itself):
            // nothing of the group is written yet.
            return value;
        }
        if let Some(group) = self.group.as_mut() {
            group.begun = true;
            group.durability = durability;
        }
        value
    }

    /// Commit the group's writes as one transaction (nothing when none was
    /// written); from here on every write commits on its own again.
    pub fn commit_group(&mut self, fence: Fence) -> Result<()> {
        crate::failpoint::refuse_if_dead()?;
        let committed = self.commit_open(fence);
        committed.map_err(|e| super::located(super::sqlite_error(&self.conn, e, &self.files.db), &self.files.db))
    }

    fn commit_open(&mut self, fence: Fence) -> Result<()> {
        self.write_held(fence, Durability::Normal)?;
        let Some(group) = self.group.take() else { return Ok(()) };
        if !group.begun {
            return Ok(());
        }
        let committed = self.commit_begun(group.durability, fence.generation());
        if committed.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        committed
    }

    fn commit_begun(&mut self, durability: Durability, generation: i64) -> Result<()> {
        if self.conn.is_autocommit() {
            return Err(Error::internal("the grouped transaction ended before its commit"));
        }
        let commits = count_if_marked(&self.conn, durability)?;
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        if let Some(commits) = commits {
            self.mark_commit(commits, generation)?;
        }
        self.count_mapped_commit();
        crate::sim::disk::committed(&self.files.db, durability);
        crate::failpoint::committed();
        Ok(())
    }

    /// Drop an open group's writes (its fence no longer holds).
    fn abandon_group(&mut self) {
        self.group = None;
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::mark::Mark;
    use crate::error::Error;
    use crate::ids::Seq;
    use crate::store::events::{Event, EventKind};
    use crate::store::{Durability, LeaseGuard, Store};

    fn event(tx: &mut dyn crate::store::LedgerTx, n: i64) -> crate::error::Result<()> {
        tx.append_event(&Event::store(EventKind::RunStopping, json!({"n": n}))).map(|_| ())
    }

    /// The store's commit count and the count its mark holds.
    fn commits(ledger: &LeaseGuard) -> (i64, i64) {
        let conn = rusqlite::Connection::open(ledger.path()).unwrap();
        let store: i64 = conn.query_row("SELECT commits FROM store_meta WHERE id = 1", [], |r| r.get(0)).unwrap();
        let mark = Mark::read(&super::super::files::StoreFiles::new(ledger.path()).mark).unwrap().unwrap();
        (store, mark.commits)
    }

    fn written(ledger: &LeaseGuard) -> Vec<i64> {
        let events = ledger.read().events_since(Seq(0), 100).unwrap();
        events.iter().filter(|e| e.kind == EventKind::RunStopping).filter_map(|e| e.data["n"].as_i64()).collect()
    }

    fn opened() -> (tempfile::TempDir, LeaseGuard) {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Store::open_rw(&dir.path().join("store/engine.db")).unwrap().lease().unwrap();
        (dir, ledger)
    }

    #[test]
    fn a_group_commits_once_and_a_failed_write_in_it_is_rolled_back_alone() {
        let (_dir, mut ledger) = opened();
        let (before, _) = commits(&ledger);
        ledger.begin_group();
        ledger.write(Durability::Full, |tx| event(tx, 1)).unwrap();
        let failed = ledger.write(Durability::Full, |tx| {
            event(tx, 2)?;
            Err::<(), _>(Error::internal("refused after writing"))
        });
        assert!(failed.is_err());
        ledger.write(Durability::Normal, |tx| event(tx, 3)).unwrap();
        assert_eq!(commits(&ledger).0, before, "nothing committed before the group's commit");
        ledger.commit_group().unwrap();
        assert_eq!(written(&ledger), vec![1, 3], "the failed write alone is gone");
        assert_eq!(commits(&ledger), (before + 1, before + 1), "one commit, recorded in the mark (it was Full)");
        // After the group, each write commits on its own again.
        ledger.write(Durability::Full, |tx| event(tx, 4)).unwrap();
        assert_eq!(commits(&ledger), (before + 2, before + 2));
    }

    /// A write of its own (no group) that fails, or unwinds, after writing
    /// leaves nothing behind and no transaction open: the next write
    /// commits alone (`Begun` rolls back as `rusqlite::Transaction` did).
    #[test]
    fn a_write_of_its_own_that_fails_or_unwinds_is_rolled_back_whole() {
        let (_dir, mut ledger) = opened();
        let (before, _) = commits(&ledger);
        let failed = ledger.write(Durability::Full, |tx| {
            event(tx, 1)?;
            Err::<(), _>(Error::internal("refused after writing"))
        });
        assert!(failed.is_err());
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = ledger.write(Durability::Normal, |tx| -> crate::error::Result<()> {
                event(tx, 2)?;
                panic!("a bug after writing")
            });
        }));
        assert!(unwound.is_err());
        ledger.write(Durability::Full, |tx| event(tx, 3)).unwrap();
        assert_eq!(written(&ledger), vec![3], "only the write that succeeded");
        assert_eq!(commits(&ledger), (before + 1, before + 1), "one Full commit, in the mark");
    }

    #[test]
    fn a_full_write_meeting_a_normal_group_commits_it_first() {
        let (_dir, mut ledger) = opened();
        let (before, marked) = commits(&ledger);
        ledger.begin_group();
        ledger.write(Durability::Normal, |tx| event(tx, 1)).unwrap();
        assert_eq!(commits(&ledger).0, before);
        ledger.write(Durability::Full, |tx| event(tx, 2)).unwrap();
        // The Normal part is committed, neither counted nor in the mark.
        assert_eq!(commits(&ledger), (before, marked));
        ledger.commit_group().unwrap();
        assert_eq!(commits(&ledger), (before + 1, before + 1));
        assert_eq!(written(&ledger), vec![1, 2]);
        // An empty group commits nothing.
        ledger.begin_group();
        ledger.commit_group().unwrap();
        assert_eq!(commits(&ledger).0, before + 1);
    }

    #[test]
    fn a_write_that_may_wait_rides_the_groups_next_write_or_its_commit() {
        let (_dir, mut ledger) = opened();
        let (before, _) = commits(&ledger);
        // No group open: written now, a commit of its own (Normal: not counted).
        ledger.write_later(|tx| event(tx, 1)).unwrap();
        assert_eq!(commits(&ledger).0, before);
        assert_eq!(written(&ledger), vec![1]);
        // In a group: held, then written before the group's next write, in
        // its transaction, at that write's durability (one Full commit).
        ledger.begin_group();
        ledger.write_later(|tx| event(tx, 2)).unwrap();
        assert_eq!(written(&ledger), vec![1], "held, not yet written");
        ledger.write(Durability::Full, |tx| event(tx, 3)).unwrap();
        ledger.commit_group().unwrap();
        assert_eq!(written(&ledger), vec![1, 2, 3], "in the order they were asked for");
        assert_eq!(commits(&ledger), (before + 1, before + 1), "one commit, Full");
        // Held alone until the commit: written and committed then, Normal.
        ledger.begin_group();
        ledger.write_later(|tx| event(tx, 4)).unwrap();
        ledger.commit_group().unwrap();
        assert_eq!(written(&ledger), vec![1, 2, 3, 4]);
        assert_eq!(commits(&ledger), (before + 1, before + 1), "committed, Normal: neither counted nor marked");
    }

    /// A `Normal` commit is neither counted nor marked, a `Full` one is
    /// both: a store that lost its last `Full` commit (with the `Normal`
    /// ones after it) holds fewer commits than its mark.
    #[test]
    fn only_a_commit_the_mark_records_is_counted() {
        let (_dir, mut ledger) = opened();
        let (before, marked) = commits(&ledger);
        assert_eq!(before, marked, "the lease's taking is counted and marked");
        ledger.write(Durability::Normal, |tx| event(tx, 1)).unwrap();
        ledger.write(Durability::Normal, |tx| event(tx, 2)).unwrap();
        assert_eq!(commits(&ledger), (before, marked), "Normal commits: store_meta not written");
        ledger.write(Durability::Full, |tx| event(tx, 3)).unwrap();
        assert_eq!(commits(&ledger), (before + 1, before + 1));
        ledger.write(Durability::Normal, |tx| event(tx, 4)).unwrap();
        assert_eq!(commits(&ledger), (before + 1, before + 1));
        assert_eq!(written(&ledger), vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_failed_first_write_of_a_group_leaves_nothing_and_the_group_goes_on() {
        let (_dir, mut ledger) = opened();
        let (before, _) = commits(&ledger);
        ledger.begin_group();
        let failed = ledger.write(Durability::Normal, |tx| {
            event(tx, 1)?;
            Err::<(), _>(Error::internal("refused after writing"))
        });
        assert!(failed.is_err());
        ledger.write(Durability::Full, |tx| event(tx, 2)).unwrap();
        ledger.write(Durability::Full, |tx| event(tx, 3)).unwrap();
        assert_eq!(commits(&ledger).0, before, "nothing committed before the group's commit");
        ledger.commit_group().unwrap();
        assert_eq!(written(&ledger), vec![2, 3]);
        assert_eq!(commits(&ledger), (before + 1, before + 1), "one Full commit: the failed write began nothing");
    }
}
