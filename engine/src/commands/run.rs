//! `engine run PLAN`: register the goal and plan (or check it is the
//! goal's active revision), then run it.

use std::path::PathBuf;
use std::sync::Arc;

use super::plan_watch::PlanWatch;
use super::register;
use crate::error::{Error, Result};
use crate::os::Group;
use crate::plan::Plan;
use crate::run::progress::Sink;
use crate::run::{self, Asked, RunReport, Sandboxes};
use crate::store::access;
use crate::store::location::{Chosen, Location};
use crate::store::Store;

pub struct RunOptions {
    pub plan_path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
    /// `--store-group`: share the store with this OS group (its owner's
    /// explicit choice; `store::access::share`).
    pub store_group: Option<String>,
    pub jobs: usize,
    /// Where the run's progress goes (`run::progress`).
    pub progress: Arc<dyn Sink>,
    /// `--reuse-across-tool-change`: a person's act (`run::Asked`).
    pub reuse_across_tool_change: bool,
}

/// The group to share the store at `at` with, checked before the store is
/// opened (the sharing itself happens under its lease): only a store at a
/// path a person chose (the state folder stays its owner's alone), only a
/// file store.
fn ready_to_share(at: &Location, group: &str) -> Result<Group> {
    if at.shared() || matches!(at.chosen, Chosen::Default { .. }) {
        return Err(Error::usage(
            "--store-group shares a store file at a path you choose: pass --store PATH (or ENGINE_STORE) outside the state folder, which stays yours alone; a PostgreSQL store's access is the database's",
        )
        .at(format!("--store-group {group}")));
    }
    access::ready_to_share(&at.path, group)
}

pub fn run(opts: RunOptions) -> Result<RunReport> {
    let source = Plan::read(&opts.plan_path, opts.workspace.as_deref())?;
    let key = source.key.clone();
    // The store's plan cache may vouch for these exact bytes (`plan::cache`).
    let cached = Location::for_workspace(opts.store.as_deref(), &source.workspace)
        .ok()
        .and_then(|at| Store::peek_cached_plan(&at.path, &key));
    let (plan, from_cache) = Plan::checked(source, cached.as_ref())?;
    // The store's place and the sandbox first: a store a provider could
    // write is refused before it is made.
    let at = super::store_for_plan(opts.store.as_deref(), &plan, true)?;
    let group = opts.store_group.as_deref().map(|g| ready_to_share(&at, g)).transpose()?;
    let store_path = at.path;
    // A changed plan is refused before anything is written, lease included
    // (a store that still needs migrating is checked after, under the lease).
    // The writer goes on with the look's connection (`Store::open_rw_after`).
    let existing = Store::open_ro_if_current(&store_path)?;
    if let Some(existing) = &existing {
        register::check_unchanged(&*existing.read(), &plan, &opts.plan_path)?;
    }
    let mut ledger = run::orphans::take_lease(Store::open_rw_after(&store_path, existing)?)?;
    if let Some(group) = &group {
        ledger.share_with(group)?;
    }
    let sandboxes = Sandboxes::prepare(&plan, &store_path)?;
    sandboxes.hold_to_shared(&mut ledger)?;
    let full = (!from_cache).then_some(key.as_str());
    let revision = register::register(&mut ledger, &plan, &opts.plan_path, full)?;
    let watch = PlanWatch::start(&opts.plan_path, Some(key));
    // A person's answers to what a task's MCP server asked go with its call.
    let goal_id = crate::ids::GoalId::new(&plan.goal().id);
    // A person's reruns not yet done go on, each its own operation.
    let asked = Asked {
        answers: super::answer::in_force(&*ledger.read(), &goal_id, revision)?,
        reruns: super::rerun::in_force(&*ledger.read(), &goal_id, revision)?,
        across_tool_change: across_tool_change(&mut ledger, (&goal_id, revision), opts.reuse_across_tool_change)?,
        ..Asked::default()
    };
    let report = run::execute(&mut ledger, &plan, revision, opts.jobs, asked, sandboxes, opts.progress)
        .and_then(|mut r| watch.finish(&mut ledger, &mut r).map(|()| r))
        .map_err(|e| crate::store::located(e, &store_path));
    // `engine run` ends its process after this: the plan's memory goes with
    // it, instead of being freed one string at a time (1,000 tasks of ten
    // inputs: 5 M instructions, 2% of a no-op re-run).
    std::mem::forget(plan);
    report
}

/// A person's `--reuse-across-tool-change`: recorded on the act chain
/// before the run (`people.revise` says who may: it decides reuse), in
/// its own transaction committed to the disk; each completion it keeps
/// names it.
fn across_tool_change(
    ledger: &mut crate::store::LeaseGuard,
    (goal_id, revision): (&crate::ids::GoalId, crate::ids::Revision),
    asked: bool,
) -> Result<Option<crate::run::AcrossToolChange>> {
    use crate::store::acts::{AskKind, NewAsk};
    if !asked {
        return Ok(None);
    }
    let person = super::person::who(None);
    super::permitted(&*ledger.read(), goal_id, crate::decide::people::Act::Revise, &person)?;
    let data = serde_json::json!({"flag": "--reuse-across-tool-change"});
    let ask = NewAsk {
        kind: AskKind::ReuseAcrossToolChange,
        goal_id,
        revision,
        task_ref: None,
        operation_id: None,
        person: &person,
        data: &data,
    };
    let ask_id = ledger.write(crate::store::Durability::Full, |tx| tx.insert_ask(&ask))?;
    Ok(Some(crate::run::AcrossToolChange { person, ask_id }))
}
