//! The commands that change the ledger, one module each: `run` (with
//! `register`, which records a goal and its plan), `revise`, `repair`,
//! `retry`, and a person's acts, `approve` and `settle`; and `stores`, which
//! lists and prunes the stores in the state folder. Each works under
//! a lease its caller took (the `LeaseGuard` gives it back on every return
//! path), does its part, and hands the run itself to `run/`. A person's
//! act checks who may do it (`permitted`, before the lease: a refused act
//! is recorded nowhere) and records who did it (`person`).

pub mod advice;
pub mod answer;
pub mod approve;
pub mod dry_run;
pub mod held_answer;
pub mod hold;
pub mod login;
pub mod owner_way_out;
pub mod person;
pub mod plan_watch;
pub mod register;
pub mod repair;
pub mod rerun;
pub mod retry;
pub mod revise;
pub mod run;
pub mod settle;
pub mod stores;
pub mod worker;

use std::path::{Path, PathBuf};

use crate::decide::people::{self, Act};
use crate::error::{Code, Error, Result};
use crate::ids::GoalId;
use crate::plan::model::People;
use crate::plan::{Plan, PlanFile};
use crate::run::Sandboxes;
use crate::store::acts::Person;
use crate::store::location::{self, Chosen, Location};
use crate::store::{LedgerRead, Store};

/// The store a command without a plan works on: `--store`, `ENGINE_STORE`,
/// or the nearest store of `workspace` (default: the current folder) or a
/// folder above it. `None` when there is none.
pub fn find_store(flag: Option<&Path>, workspace: Option<&Path>) -> Result<Option<Location>> {
    let start = workspace.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let found = Location::find(flag, &start)?;
    if let Some(l) = &found {
        l.prepare(false)?;
    }
    Ok(found)
}

/// The existing store of a command without a plan, or a usage error that
/// says where it looked (and about an old store inside the workspace).
pub fn existing_store(flag: Option<&Path>, workspace: Option<&Path>) -> Result<Location> {
    find_store(flag, workspace)?.ok_or_else(|| {
        let start = workspace.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        location::not_found(&start, "run `engine run PLAN` first (or pass --store / --workspace)")
    })
}

/// Open an existing store for writing (settle, approve, retry, repair):
/// never creates one.
pub fn open_existing(flag: Option<&Path>, workspace: Option<&Path>) -> Result<Store> {
    Store::open_existing(&existing_store(flag, workspace)?.path)
}

/// The store of a command with a plan (`run`, `revise`) and the plan's
/// sandboxes, prepared before anything is written: a store a provider
/// could write is refused here. `create`: the store may be made (`run`).
pub fn store_for_plan(flag: Option<&Path>, plan: &Plan, create: bool) -> Result<Location> {
    let at = Location::for_workspace(flag, &plan.workspace)?;
    let exists = at.shared() || std::fs::symlink_metadata(&at.path).is_ok();
    if !exists {
        let old = plan.workspace.join(location::LEGACY_DIR).join(crate::store::STORE_FILE);
        if matches!(at.chosen, Chosen::Default { .. }) && std::fs::symlink_metadata(&old).is_ok() {
            return Err(Error::usage(format!(
                "workspace {} has no store yet{}",
                plan.workspace.display(),
                location::legacy_hint(&old)
            ))
            .at(old.display().to_string()));
        }
        if !create {
            return Err(location::no_store_at(&at.path));
        }
    }
    Sandboxes::check(plan, &at.path)?;
    at.sweep_leftovers();
    at.prepare(create)?;
    Ok(at)
}

/// A ref that names no task of goal `goal`'s `revision`: the error every
/// command taking a ref gives, with the closest known ref (`did you mean`).
pub fn no_task<'a>(
    goal: &GoalId,
    revision: crate::ids::Revision,
    task_ref: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Error {
    let known: Vec<&str> = known.into_iter().collect();
    let mut hint = crate::plan::suggest::did_you_mean(task_ref, known.iter().copied());
    // Nothing close: the refs it has (a few), so the next try is a pick.
    if hint.is_empty() && !known.is_empty() {
        let mut shown: Vec<String> = known.iter().take(KNOWN_REFS_SHOWN_MAX).map(|k| format!("`{k}`")).collect();
        if known.len() > KNOWN_REFS_SHOWN_MAX {
            shown.push(format!("and {} more (`engine status`)", known.len() - KNOWN_REFS_SHOWN_MAX));
        }
        hint = format!("; its tasks: {}", shown.join(", "));
    }
    Error::usage(format!("goal `{goal}` revision {revision} has no task `{task_ref}`{hint}")).at(task_ref.to_string())
}

/// How many of a goal's task refs an unknown ref's error lists.
const KNOWN_REFS_SHOWN_MAX: usize = 8;

/// The plan file a recorded revision came from, for a run of it without a
/// plan file (`retry`, `repair`): the recorded path as seen from here, or
/// from the workspace, when it lies in the workspace — so the run protects
/// it from providers as `engine run` does (`run::constraints`).
pub fn recorded_source(plan_path: &str, workspace: &Path) -> Option<PathBuf> {
    let p = Path::new(plan_path);
    let mut candidates = vec![p.to_path_buf()];
    if p.is_relative() {
        candidates.push(workspace.join(p));
    }
    if let Some(name) = p.file_name() {
        candidates.push(workspace.join(name));
    }
    candidates.into_iter().filter_map(|c| std::fs::canonicalize(c).ok()).find(|c| c.starts_with(workspace))
}

/// A goal's active plan, as recorded.
pub fn active_plan(read: &dyn LedgerRead, goal: &GoalId) -> Result<PlanFile> {
    let g = read.goal(goal)?.ok_or_else(|| Error::internal(format!("goal {goal} vanished")))?;
    let row = read.revision(goal, g.active_revision)?;
    serde_json::from_str(&row.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of {goal} r{} does not parse: {e}", g.active_revision))
    })
}

/// A goal's active revision as a plan to run again without a plan file
/// (`repair`, `rerun`): loaded from the ledger's copy, its recorded plan
/// file protected as `engine run` protects it (`recorded_source`).
pub fn recorded_plan(read: &dyn LedgerRead, goal: &GoalId, revision: crate::ids::Revision) -> Result<Plan> {
    let row = read.revision(goal, revision)?;
    let file: PlanFile = serde_json::from_str(&row.plan_json)
        .map_err(|e| Error::new(Code::StoreCorrupt, format!("stored plan does not parse: {e}")))?;
    let mut plan = Plan::from_file(file, PathBuf::from(&row.workspace))?;
    plan.source = recorded_source(&row.plan_path, &plan.workspace);
    Ok(plan)
}

/// May `person` do `act` on `goal`? The goal's active plan's `people`
/// decides (`NOT_PERMITTED` otherwise; nothing is recorded).
pub fn permitted(read: &dyn LedgerRead, goal: &GoalId, act: Act, person: &Person) -> Result<()> {
    let people: Option<People> = active_plan(read, goal)?.people;
    people::permitted(people.as_ref(), act, &person.user).map_err(not_permitted)
}

pub fn not_permitted(r: people::Refused) -> Error {
    Error::new(Code::NotPermitted, r.message()).at(format!("$.people.{}", r.act.key()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_task_ref_gets_the_closest_or_the_refs_there_are() {
        let g = GoalId::new("g".to_string());
        let r = crate::ids::Revision(1);
        let close = no_task(&g, r, "transfrom", ["load", "transform", "publish"]);
        assert!(close.message.ends_with("has no task `transfrom`; did you mean `transform`?"), "{}", close.message);
        let far = no_task(&g, r, "nosuch", ["load", "transform"]);
        assert!(far.message.ends_with("has no task `nosuch`; its tasks: `load`, `transform`"), "{}", far.message);
    }
}
