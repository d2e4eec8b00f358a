//! `engine run PLAN --dry-run`: what a run of the plan would do now, from
//! the run's own decisions (`run::dry_walk`) against the store as it
//! stands. Loads and checks the plan as `engine run` does (its errors are
//! the run's), finds the store without making one, reads it through a
//! read-only view (never a lease, a migration, a plan cache entry), and
//! starts no process and opens no connection to a provider.

use std::path::PathBuf;

use crate::error::Result;
use crate::ids::GoalId;
use crate::plan::Plan;
use crate::run::DryRun;
use crate::store::location::Location;
use crate::store::Store;

pub struct DryOptions {
    pub plan_path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
}

/// What `engine run` would do, and the store it read (`None`: no store
/// yet: the run would make one).
pub fn dry_run(opts: &DryOptions) -> Result<(DryRun, Option<PathBuf>)> {
    let source = Plan::read(&opts.plan_path, opts.workspace.as_deref())?;
    let (plan, _) = Plan::checked(source, None)?;
    let at = Location::for_workspace(opts.store.as_deref(), &plan.workspace)?;
    let now_ms = crate::clock::now_ms();
    let store = match Store::schema_version(&at.path)? {
        None => None,
        Some(_) => Store::open_ro(&at.path)?,
    };
    let Some(store) = store else { return Ok((crate::run::dry_walk(None, &plan, now_ms)?, None)) };
    let view = store.read();
    // A changed plan is refused as `engine run` refuses it.
    super::register::check_unchanged(&*view, &plan, &opts.plan_path)?;
    let registered = view.goal(&GoalId::new(&plan.goal().id))?.is_some();
    let read: Option<&dyn crate::store::LedgerRead> = if registered { Some(&*view) } else { None };
    let dry = crate::run::dry_walk(read, &plan, now_ms)?;
    Ok((dry, Some(store.path().to_path_buf())))
}
