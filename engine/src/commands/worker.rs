//! `engine submit PLAN` and `engine worker`: a goal registered on a shared
//! store, and the processes (on any machine) that claim its ready tasks.
//!
//! `submit` records the goal and its plan revision (or checks that the
//! plan is the goal's active revision) and marks it submitted: workers
//! take it up. A worker claims tasks of any open goal (or of `--goal`
//! only), runs them in its own `--workspace`, and records their receipts;
//! with `--goal` it returns the goal's report once the goal is judged.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::register;
use crate::error::{Code, Error, Result};
use crate::ids::{GoalId, Revision};
use crate::limits::WORKER_POLL;
use crate::plan::load::parse_plan;
use crate::plan::Plan;
use crate::run::progress::Sink;
use crate::run::{self, Asked, RunReport};
use crate::store::goals::RevisionRecord;
use crate::store::{self, LeaseGuard, Store};

pub struct SubmitOptions {
    pub plan_path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
}

/// What `submit` recorded.
#[derive(Debug, serde::Serialize)]
pub struct Submitted {
    pub goal_id: GoalId,
    pub revision: Revision,
    pub store: String,
}

/// The store a worker or a submission needs: a shared one.
fn shared_store(flag: Option<&Path>, workspace: &Path) -> Result<PathBuf> {
    let path = crate::store::location::Location::for_workspace(flag, workspace)?.path;
    if !store::is_shared(&path) {
        return Err(Error::usage(format!(
            "workers share a PostgreSQL store: pass --store postgres://USER@HOST:PORT/DB (or set ENGINE_STORE); {} is a single-writer SQLite file, for which `engine run` is the way",
            path.display()
        )));
    }
    Ok(path)
}

pub fn submit(opts: SubmitOptions) -> Result<Submitted> {
    let plan = Plan::load(&opts.plan_path, opts.workspace.as_deref())?;
    let path = shared_store(opts.store.as_deref(), &plan.workspace)?;
    let mut ledger = Store::open_rw(&path)?.lease()?;
    let revision = register::register(&mut ledger, &plan, &opts.plan_path, None)?;
    Ok(Submitted { goal_id: GoalId::new(&plan.goal().id), revision, store: ledger.path().display().to_string() })
}

pub struct WorkerOptions {
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
    pub jobs: usize,
    pub goal: Option<GoalId>,
    pub progress: Arc<dyn Sink>,
}

/// Work until the goal given is judged (`--goal`), or for ever.
pub fn work(opts: WorkerOptions) -> Result<Option<RunReport>> {
    let ws = opts.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let workspace = std::fs::canonicalize(&ws)
        .map_err(|e| Error::usage(format!("the workspace {} is not there: {e}", ws.display())))?;
    let path = shared_store(opts.store.as_deref(), &workspace)?;
    let mut ledger = Store::open_rw(&path)?.lease()?;
    loop {
        let goals = match &opts.goal {
            Some(g) => vec![g.clone()],
            None => ledger.store().open_goals()?,
        };
        for goal in goals {
            let report = work_goal(&mut ledger, &goal, &workspace, &opts)?;
            // A person's stop ends the worker, not only the goal it was on.
            if opts.goal.is_some() || report.stopped.is_some() {
                return Ok(Some(report));
            }
        }
        if crate::signals::received().is_some() {
            return Ok(None);
        }
        std::thread::sleep(WORKER_POLL * 5);
    }
}

/// Run the goal's active revision as one of its workers.
fn work_goal(ledger: &mut LeaseGuard, goal: &GoalId, workspace: &Path, opts: &WorkerOptions) -> Result<RunReport> {
    let row = ledger
        .read()
        .goal(goal)?
        .ok_or_else(|| Error::usage(format!("no goal `{goal}` in this store: `engine submit PLAN` registers one")))?;
    let revision = ledger.read().revision(goal, row.active_revision)?;
    let plan = plan_of(&revision, workspace)?;
    let sandboxes = run::Sandboxes::prepare(&plan, ledger.path())?;
    // A person's answers to what a task's MCP server asked go with its call.
    let answers = super::answer::in_force(&*ledger.read(), goal, row.active_revision)?;
    let asked = Asked { answers, ..Asked::default() };
    run::execute(ledger, &plan, row.active_revision, opts.jobs, asked, sandboxes, opts.progress.clone())
}

/// The plan as the ledger recorded it, in this worker's workspace.
pub fn plan_of(revision: &RevisionRecord, workspace: &Path) -> Result<Plan> {
    let file = parse_plan(revision.plan_json.as_bytes(), &revision.plan_path)?;
    let plan = Plan::from_file(file, workspace.to_path_buf())?;
    if plan.digests().plan != revision.plan_digest {
        return Err(Error::new(
            Code::StoreCorrupt,
            format!(
                "the recorded plan of goal `{}` revision {} does not digest to its recorded digest",
                revision.goal_id, revision.revision
            ),
        ));
    }
    Ok(plan)
}
