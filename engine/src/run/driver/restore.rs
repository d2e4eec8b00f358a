//! A completion belongs to its workspace (SPEC.md "Additions (2026-12-06)",
//! `OUTPUTS_MISSING`): a task whose completion stands is never kept in a
//! folder that lacks its declared outputs with the digests its success
//! recorded. The reuse pass looks (`here`); what the ledger holds is
//! written back once the pass has decided (`restore`), what it does not
//! hold makes the completion stale, and the task runs again.

use serde_json::json;

use super::scope::Scope;
use crate::checkpoint::FileCache;
use crate::error::Result;
use crate::ids::AttemptId;
use crate::plan::Task;
use crate::run::materialize::{self, Wanted};
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard, LedgerRead};

pub use crate::decide::outputs::Here;

/// Does the workspace hold `task`'s recorded outputs (its completion in
/// this revision)? Digests through `cache`: an unchanged file is not
/// hashed again.
pub fn here(read: &dyn LedgerRead, scope: &Scope, task: &Task, cache: &mut FileCache) -> Result<Here> {
    if task.outputs.is_empty() {
        return Ok(Here::All);
    }
    let Some(attempt) = crate::run::outputs::completed_by(read, &scope.goal_id, scope.revision, &task.task_ref)? else {
        return Ok(Here::All);
    };
    let files = read.outputs_of_attempt(attempt)?;
    if files.is_empty() {
        return unrecorded(read, scope, task, attempt);
    }
    let mut here = Here::All;
    for file in files {
        let now = cache.digest(&scope.plan.workspace.join(&file.path)).ok().flatten();
        if now.as_deref() == Some(file.digest.as_str()) {
            continue;
        }
        if read.blob(&file.digest)?.is_none() {
            return Ok(Here::Missing { path: file.path, why: None });
        }
        here = Here::Restorable;
    }
    Ok(here)
}

/// A completion of a task that declares `outputs` with no output row: the
/// ledger recorded its outputs as none (an `outputs_recorded` event of 0
/// files: its patterns matched nothing), or it kept no record of them (a
/// completion recorded before the ledger kept outputs, or rows it lost):
/// then nothing shows this folder holds them, and the task runs again.
/// Read only on this rare path (the goal's events of that kind).
fn unrecorded(read: &dyn LedgerRead, scope: &Scope, task: &Task, attempt: AttemptId) -> Result<Here> {
    let recorded = read.events_of_goal(&scope.goal_id, EventKind::OutputsRecorded)?;
    let files = recorded.iter().find(|e| e.attempt_id == Some(attempt)).map(|e| e.data["files"].as_u64());
    if files == Some(Some(0)) {
        return Ok(Here::All);
    }
    let path = task.outputs.first().cloned().unwrap_or_default();
    let why = match files {
        None => "the ledger holds no record of its outputs",
        Some(_) => "the ledger recorded outputs for it but holds none of them",
    };
    Ok(Here::Missing { path, why: Some(why.into()) })
}

/// Write back the recorded outputs of `refs` (completions that stand),
/// with an `outputs_materialized` event saying so (`for`: `reuse`); what
/// is there already compared through `cache`.
pub fn restore(ledger: &mut LeaseGuard, scope: &Scope, refs: &[String], cache: &mut FileCache) -> Result<()> {
    if refs.is_empty() {
        return Ok(());
    }
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    let mut wanted = Vec::new();
    let read = ledger.read();
    for r in refs {
        let Some(attempt) = crate::run::outputs::completed_by(&*read, goal_id, revision, r)? else { continue };
        wanted.extend(read.outputs_of_attempt(attempt)?.into_iter().map(|file| Wanted { file, from: r.clone() }));
    }
    let done = materialize::materialize(&scope.plan.workspace, &wanted, &|d| read.blob(d), cache)?;
    drop(read);
    if done.files == 0 {
        return Ok(());
    }
    let data = json!({
        "files": done.files, "bytes": done.bytes, "left_alone": done.left_alone, "paths": done.paths,
        "from": refs, "for": "reuse",
    });
    ledger.write(Durability::Normal, |tx| {
        tx.append_event(&Event::goal(EventKind::OutputsMaterialized, goal_id, revision, data.clone())).map(|_| ())
    })
}
