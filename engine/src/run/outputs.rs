//! A task's declared `outputs` through the run: read from the workspace
//! once its attempt passed every check (bounded, then committed with its
//! success, `record::record_validations`), and written into this
//! workspace from the ledger before a task that depends on it runs
//! (`materialize`), so workers with workspaces of their own pass files to
//! one another through the ledger.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use super::materialize::{self, Wanted};
use super::Runner;
use crate::decide::outputs::{upstream_with_outputs, Bounds, OverLimit, Tally};
use crate::error::{Code, Error, Result};
use crate::evidence::Evidence;
use crate::ids::{AttemptId, GoalId, Revision};
use crate::plan::Task;
use crate::state::TaskState;
use crate::store::events::{Event, EventKind};
use crate::store::outputs::OutputFile;
use crate::store::{Durability, LedgerRead, LedgerTx};
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
fn completed_by(read: &dyn LedgerRead, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<AttemptId>> {
    let Some(task) = read.task(goal, revision, task_ref)? else { return Ok(None) };
    match task.state {
        TaskState::Succeeded => read.completed_attempt(goal, revision, task_ref),
        TaskState::Reused => Ok(task.reused_from_attempt().map(AttemptId)),
        _ => Ok(None),
    }
}

impl Runner<'_> {
    /// Read a task's outputs off the coordinator's thread (they may be
    /// large); only for an attempt that passed, of a task that has any.
    pub(super) async fn collect_outputs(&self, task: &Task) -> Option<Kept> {
        if task.outputs.is_empty() {
            return None;
        }
        let (root, task_ref, patterns) = (self.plan.workspace.clone(), task.task_ref.clone(), task.outputs.clone());
        let read = tokio::task::spawn_blocking(move || collect(&root, &task_ref, &patterns, Bounds::ENGINE)).await;
        Some(read.unwrap_or_else(|e| {
            Kept::Refused(Box::new(Evidence::OutputsNotKept {
                limit: None,
                message: format!("reading the `outputs` of task `{}` failed: {e}", task.task_ref),
            }))
        }))
    }

    /// Before `task` runs: every upstream task's recorded outputs in this
    /// workspace (of two declaring one path, the one that depends on the
    /// other wins), an event saying what was written. A tampered blob is
    /// `STORE_TAMPERED` before anything is written.
    pub(super) fn materialize_upstream(&mut self, task: &Task) -> Result<()> {
        if !self.outputs_declared {
            return Ok(());
        }
        let upstream = upstream_with_outputs(&self.plan.file.tasks, &self.plan.index, &task.task_ref);
        let upstream: Vec<String> = upstream.into_iter().map(str::to_string).collect();
        self.materialize_from(&upstream, Some(&task.task_ref))
    }

    /// Before the goal's acceptance checks: every task's outputs, so a
    /// check that reads them sees them on whichever worker judges the goal.
    pub(super) fn materialize_for_acceptance(&mut self) -> Result<()> {
        if !self.outputs_declared {
            return Ok(());
        }
        let tasks = self.plan.order.iter().filter_map(|&i| self.plan.file.tasks.get(i));
        let all: Vec<String> = tasks.filter(|t| !t.outputs.is_empty()).map(|t| t.task_ref.clone()).collect();
        self.materialize_from(&all, None)
    }

    /// The outputs of `upstream` (in order: a later one wins a path) in
    /// this workspace, for `task_ref` (`None`: the goal's checks).
    fn materialize_from(&mut self, upstream: &[String], task_ref: Option<&str>) -> Result<()> {
        if upstream.is_empty() {
            return Ok(());
        }
        let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
        let read = self.ledger.read();
        for r in upstream {
            let Some(attempt) = completed_by(&*read, &self.goal_id, self.revision, r)? else { continue };
            for file in read.outputs_of_attempt(attempt)? {
                wanted.insert(file.path.clone(), Wanted { file, from: r.clone() });
            }
        }
        let wanted: Vec<Wanted> = wanted.into_values().collect();
        let done = materialize::materialize(&self.plan.workspace, &wanted, &|d| read.blob(d));
        drop(read);
        let done = match done {
            Ok(d) => d,
            Err(e) => return Err(self.refused(task_ref, e)),
        };
        if done.files == 0 {
            return Ok(());
        }
        let data = json!({
            "files": done.files, "bytes": done.bytes, "left_alone": done.left_alone, "paths": done.paths,
            "from": upstream, "for": task_ref.unwrap_or("acceptance"),
        });
        self.write_event(Durability::Normal, EventKind::OutputsMaterialized, task_ref, None, data)
    }

    /// Say in the ledger why nothing was started, then stop with `e`.
    fn refused(&mut self, task_ref: Option<&str>, e: Error) -> Error {
        let data = json!({"code": e.code, "message": e.message, "place": e.place, "why": "outputs_not_materialized"});
        match self.write_event(Durability::Normal, EventKind::CallRefused, task_ref, None, data) {
            Ok(()) => e,
            Err(w) if w.code == Code::StaleClaim => w,
            Err(_) => e,
        }
    }
}
