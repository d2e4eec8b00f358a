//! A task's declared `outputs` through the run: read from the workspace
//! once its attempt passed every check (bounded, then committed with its
//! success, `record::record_validations`), and written into this
//! workspace from the ledger before a task that depends on it runs
//! (`materialize`), so workers with workspaces of their own pass files to
//! one another through the ledger.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use crate::decide::outputs::{Bounds, OverLimit, Tally};
use crate::error::Result;
use crate::evidence::Evidence;
use crate::ids::{AttemptId, GoalId, Revision};
use crate::state::TaskState;
use crate::store::events::{Event, EventKind};
use crate::store::outputs::OutputFile;
use crate::store::{LedgerRead, LedgerTx};
use crate::workspace::Expander;

/// What a succeeded attempt's outputs came to.
#[derive(Debug)]
pub enum Kept {
    /// The files and their bytes, to commit with the success.
    Files(Vec<(OutputFile, Vec<u8>)>),
    /// Not kept: the evidence the task fails on (a bound passed, or a file
    /// that could not be read).
    Refused(Box<Evidence>),
}

impl Kept {
    /// The evidence a refusal fails the attempt with.
    pub fn refusal(&self) -> Option<&Evidence> {
        match self {
            Kept::Refused(e) => Some(&**e),
            Kept::Files(_) => None,
        }
    }
}

/// Read `patterns`' files under `root`, within `bounds`.
pub fn collect(root: &Path, task_ref: &str, patterns: &[String], bounds: Bounds) -> Kept {
    match read_all(root, patterns, bounds) {
        Ok(files) => Kept::Files(files),
        Err(Refusal::Over(over)) => Kept::Refused(Box::new(Evidence::OutputsNotKept {
            limit: Some(over.limit().to_string()),
            message: over.message(task_ref),
        })),
        Err(Refusal::Unreadable(why)) => Kept::Refused(Box::new(Evidence::OutputsNotKept {
            limit: None,
            message: format!("the `outputs` of task `{task_ref}` could not be read: {why}"),
        })),
    }
}

enum Refusal {
    Over(OverLimit),
    Unreadable(String),
}

fn read_all(
    root: &Path,
    patterns: &[String],
    bounds: Bounds,
) -> std::result::Result<Vec<(OutputFile, Vec<u8>)>, Refusal> {
    let mut expander = Expander::new(root).map_err(Refusal::Unreadable)?;
    let mut paths = std::collections::BTreeSet::new();
    for pattern in patterns {
        let found = expander.expand(pattern).map_err(|why| Refusal::Unreadable(format!("`{pattern}` {why}")))?;
        paths.extend(found);
    }
    let mut tally = Tally::new(bounds);
    let mut out = Vec::new();
    for rel in paths {
        // Expanded inside the workspace (symlinks out refused); a literal
        // path the task did not write, or a folder, is no file to keep.
        let Ok(meta) = std::fs::metadata(root.join(&rel)) else { continue };
        if !meta.is_file() {
            continue;
        }
        let unreadable = |e: std::io::Error| Refusal::Unreadable(format!("`{rel}`: {e}"));
        let mut bytes = Vec::new();
        let file = std::fs::File::open(root.join(&rel)).map_err(unreadable)?;
        file.take(bounds.file_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(unreadable)?;
        tally.admit(&rel, bytes.len() as u64).map_err(Refusal::Over)?;
        let file = OutputFile {
            digest: crate::digest::content(&bytes),
            size: bytes.len() as u64,
            executable: meta.permissions().mode() & 0o100 != 0,
            path: rel,
        };
        out.push((file, bytes));
    }
    Ok(out)
}

/// Commit kept outputs inside the success's transaction, with an event.
pub fn record(tx: &mut dyn LedgerTx, key: (&GoalId, Revision, &str), attempt_id: AttemptId, kept: &Kept) -> Result<()> {
    let Kept::Files(files) = kept else { return Ok(()) };
    for (file, bytes) in files {
        tx.insert_output(attempt_id, file, bytes)?;
    }
    let bytes: u64 = files.iter().map(|(f, _)| f.size).sum();
    let data = json!({"files": files.len(), "bytes": bytes});
    let e = Event::goal(EventKind::OutputsRecorded, key.0, key.1, data).task(key.2).attempt(attempt_id);
    tx.append_event(&e).map(|_| ())
}

/// The attempt whose result a completed task stands on (a reuse's
/// original), or `None` when it did not complete in `revision`.
pub fn completed_by(
    read: &dyn LedgerRead,
    goal: &GoalId,
    revision: Revision,
    task_ref: &str,
) -> Result<Option<AttemptId>> {
    let Some(task) = read.task(goal, revision, task_ref)? else { return Ok(None) };
    match task.state {
        TaskState::Succeeded => read.completed_attempt(goal, revision, task_ref),
        TaskState::Reused => Ok(task.reused_from_attempt().map(AttemptId)),
        _ => Ok(None),
    }
}
