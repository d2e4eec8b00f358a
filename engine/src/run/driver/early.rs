//! What a run reads of the ledger before it needs it, beside its first
//! look at the workspace (`inputs.rs`): the file-state cache's rows and the
//! revision's completions, on a thread and a connection of their own
//! (`LeaseGuard::read_beside`; SQLite only). The run holds the lease, so
//! only the run itself writes the ledger meanwhile. The cache's rows serve
//! whatever it writes (each vouches for itself by its file's metadata); the
//! completions serve only while the run has done nothing but ledger reads
//! and its `run_started` event — a provider asked or an attempt reconciled
//! drops them (`Action::Forget`), and the reuse pass reads afresh.

use std::collections::HashMap;
use std::thread::JoinHandle;

use super::scope::Scope;
use crate::checkpoint::FileCache;
use crate::error::Result;
use crate::store::evidence::CompletionRecord;
use crate::store::LeaseGuard;

/// A revision's completions, by task ref (`LedgerRead::completions`).
pub type Completions = HashMap<String, CompletionRecord>;

/// The side read under way. Joined when dropped: a run that ends before
/// taking it (a refusal at its first look) does not leave it reading while
/// the lease is given back.
pub struct Early(Option<JoinHandle<Result<ReadEarly>>>);

/// The file-state cache, built from its rows on the side thread too (a
/// map of 10,000 files is 2 M instructions the run's own thread spent
/// after its look), and the revision's completions.
type ReadEarly = (FileCache, Completions);

impl Drop for Early {
    fn drop(&mut self) {
        if let Some(side) = self.0.take() {
            let _ = side.join();
        }
    }
}

/// Start the side read (nothing on PostgreSQL, or without a thread).
pub fn read_early(ledger: &LeaseGuard, scope: &Scope) -> Early {
    let (goal, revision) = (scope.goal_id.clone(), scope.revision);
    Early(ledger.read_beside(move |ledger| {
        let cache = FileCache::from_states(ledger.file_states()?);
        Ok((cache, ledger.completions(&goal, revision)?))
    }))
}

/// Take the side read's answers: the file-state cache at once, the
/// completions kept for the reuse pass. Without them (PostgreSQL, or a
/// side read that failed) the cache is read in line — where an error is
/// met again and reported — and the pass reads its completions.
pub fn take_early(ledger: &LeaseGuard, mut early: Early) -> Result<(FileCache, Option<Completions>)> {
    match early.0.take().map(JoinHandle::join) {
        Some(Ok(Ok((cache, completions)))) => Ok((cache, Some(completions))),
        _ => Ok((FileCache::from_states(ledger.read().file_states()?), None)),
    }
}
