//! The plan file, watched over a run. A run executes the revision the
//! ledger holds, never the file again; but a file changed while the run
//! went on (by a provider, or by anything but a person's `engine revise`)
//! is worth a person's notice: the run's summary says so, a
//! `plan_file_changed` event records it (which `engine status` and the next
//! run's `PLAN_CHANGED` read back), and `engine revise` shows what the
//! change would loosen.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::Result;
use crate::ids::{GoalId, Revision};
use crate::plan::{cache, load};
use crate::run::{PlanFileChanged, RunReport};
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard, LedgerRead};

/// The plan file's bytes as a run began.
pub struct PlanWatch {
    path: PathBuf,
    /// As given on the command line (for the words).
    shown: String,
    key: Option<String>,
}

impl PlanWatch {
    /// `key`: the digest of the bytes the run was started from
    /// (`plan::cache::file_key`).
    pub fn start(path: &Path, key: Option<String>) -> PlanWatch {
        PlanWatch { path: path.to_path_buf(), shown: path.display().to_string(), key }
    }

    /// The file's bytes now (a command that loaded the plan without
    /// keeping them).
    pub fn now(path: &Path) -> PlanWatch {
        let key = load::read_plan_bytes(path).ok().map(|b| cache::file_key(&b));
        PlanWatch::start(path, key)
    }

    /// After the run: has the file changed since? Then record it and say
    /// so in `report`.
    pub fn finish(&self, ledger: &mut LeaseGuard, report: &mut RunReport) -> Result<()> {
        let Some(before) = &self.key else { return Ok(()) };
        let now = load::read_plan_bytes(&self.path).ok().map(|b| cache::file_key(&b));
        if now.as_ref() == Some(before) {
            return Ok(());
        }
        let (goal_id, revision) = (report.goal_id.clone(), report.revision);
        let run = runs_of(&*ledger.read(), &goal_id)?;
        let data = json!({"run": run, "path": self.shown, "deleted": now.is_none()});
        ledger.write(Durability::Normal, |tx| {
            tx.append_event(&Event::goal(EventKind::PlanFileChanged, &goal_id, revision, data.clone())).map(|_| ())
        })?;
        report.plan_file_changed = Some(PlanFileChanged { run, path: self.shown.clone() });
        Ok(())
    }
}

/// How many runs the goal has had (its `run_started` events).
fn runs_of(read: &dyn LedgerRead, goal_id: &GoalId) -> Result<u64> {
    Ok(read.events_of_goal(goal_id, EventKind::RunStarted)?.len() as u64)
}

/// The run during which the plan file last changed, if it changed while
/// `revision` was the goal's active one (a later revision recorded the
/// change, or another plan, by a person).
pub fn changed_during(read: &dyn LedgerRead, goal_id: &GoalId, revision: Revision) -> Result<Option<u64>> {
    let events = read.events_of_goal(goal_id, EventKind::PlanFileChanged)?;
    Ok(events.iter().rev().find(|e| e.revision == Some(revision)).and_then(|e| e.data["run"].as_u64()))
}
