//! `engine run`: register the goal and plan, reconcile in-doubt operations,
//! run ready tasks (intent → dispatch → receipt → validations), then the
//! goal's acceptance checks.
//!
//! One coordinator owns the store and is the only writer; provider calls and
//! checks run as tokio tasks that report back over a channel. So every
//! ledger write happens in one place, in the order events really happened.

pub mod checks;
pub mod orphans;
pub mod provider;
mod reconcile;
mod record;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use providers::{Call, Outcome, Progress, Provider};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::approval;
use crate::budget::{self, Exhausted, Usage};
use crate::checkpoint::{self, Checkpoint};
use crate::error::{Code, Error, Result};
use crate::failpoint;
use crate::plan::{Effect, Plan, ProviderSpec, Task};
use crate::state::{AttemptState, GoalState, TaskState};
use crate::store::events::{self, Event};
use crate::store::{ledger, now_ms, Durability, Store};
use checks::{CheckRun, CheckSpec};
use rusqlite::OptionalExtension;

/// Captured output bound per stream (stdout, stderr, HTTP body).
pub use crate::limits::OUTPUT_BYTES_MAX;

pub struct RunOptions {
    pub plan_path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
    pub jobs: usize,
}

/// An operation whose outcome a person must settle.
#[derive(Debug, Clone, Serialize)]
pub struct UnknownOp {
    pub operation_id: String,
    pub task_ref: String,
    pub request_digest: String,
    pub try_no: i64,
    pub state: String,
    /// The last state the engine knew before the outcome became unknown
    /// (`intent_recorded`, `dispatched` or `receipt_recorded`).
    pub last_state: String,
    pub reason: String,
}

/// The state an `effect_unknown` attempt was in before it became unknown,
/// read from the traces each state leaves (a receipt row, a dispatch time).
pub fn last_known_state(conn: &rusqlite::Connection, a: &ledger::AttemptRow) -> Result<AttemptState> {
    Ok(if ledger::receipt(conn, a.id)?.is_some() {
        AttemptState::ReceiptRecorded
    } else if a.dispatched_at_ms.is_some() {
        AttemptState::Dispatched
    } else {
        AttemptState::IntentRecorded
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskLine {
    pub task_ref: String,
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub goal_id: String,
    pub revision: i64,
    pub goal_state: GoalState,
    pub exit_code: i32,
    /// The stable code of the stop, when the run did not satisfy the goal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Code>,
    pub tasks: Vec<TaskLine>,
    pub acceptance: Vec<AcceptanceLine>,
    pub unknown: Vec<UnknownOp>,
    pub failed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Exhausted>,
    pub awaiting_approval: Vec<Awaiting>,
    /// Operations a person settled as not run and nobody has re-sent.
    pub settled_not_run: Vec<String>,
    /// Acceptance criteria with no `check`: stated, never verified.
    pub acceptance_unchecked: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AcceptanceLine {
    pub id: String,
    pub passed: bool,
}

/// Messages from in-flight work to the coordinator.
enum Msg {
    Progress { attempt_id: i64, progress: Progress },
    Finished { attempt_id: i64, outcome: Outcome },
    Validated { attempt_id: i64, runs: Vec<CheckRun> },
}

struct InFlight {
    /// The committed intent this work belongs to.
    intent: ledger::Intent,
    task_ref: String,
    before: Option<Checkpoint>,
    /// The provider process, once started: recorded with the dispatch, so
    /// an engine taking over after a crash can end its process group.
    process: Option<providers::process::ProcessId>,
}

impl InFlight {
    fn new(intent: ledger::Intent, task_ref: &str) -> InFlight {
        InFlight { intent, task_ref: task_ref.to_string(), before: None, process: None }
    }
}

pub fn run(opts: RunOptions) -> Result<RunReport> {
    let plan = Plan::load(&opts.plan_path, opts.workspace.as_deref())?;
    let store_path = crate::store::resolve_path(opts.store.as_deref(), &plan.workspace);
    // A changed plan is refused before anything is written, lease included
    // (a store that still needs migrating is checked after, under the lease).
    if Store::schema_version(&store_path)? == Some(crate::store::schema::SCHEMA_VERSION) {
        if let Some(existing) = Store::open_ro(&store_path)? {
            check_unchanged(&existing, &plan, &opts.plan_path)?;
        }
    }
    let mut store = Store::open_rw(&store_path)?;
    orphans::take_lease(&mut store)?;
    let result = register(&mut store, &plan, &opts.plan_path)
        .and_then(|revision| execute(&mut store, plan, revision, opts.jobs, HashSet::new()));
    // Give the lease back whatever happened; a failure here is not worth
    // hiding the run's own result.
    let _ = store.release_lease();
    result
}

/// `engine retry OPERATION_ID`: re-send an operation a person settled as
/// not run, or one whose failure class is retryable — same operation id,
/// next try number, approval checked again at the call site.
pub fn retry(store: &mut Store, operation_id: &str, jobs: usize) -> Result<RunReport> {
    orphans::take_lease(store)?;
    let result = retry_locked(store, operation_id, jobs);
    let _ = store.release_lease();
    result
}

fn retry_locked(store: &mut Store, operation_id: &str, jobs: usize) -> Result<RunReport> {
    let conn = store.conn();
    let (goal_id, revision, task_ref, task_state): (String, i64, String, TaskState) = crate::store::qrow(
        conn,
        "SELECT t.goal_id, t.revision, t.task_ref, t.state FROM tasks t JOIN goals g
               ON g.id = t.goal_id AND g.active_revision = t.revision WHERE t.operation_id = ?1",
        [operation_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()?
    .ok_or_else(|| {
        Error::usage(format!("no task of an active plan revision has operation {operation_id}"))
            .at(operation_id.to_string())
    })?;
    let attempts = ledger::attempts_of_task(conn, &goal_id, &task_ref)?;
    let latest = attempts.iter().rev().find(|a| a.operation_id == operation_id).cloned();
    // Only the task's latest call can be re-sent: an older operation that a
    // repair or a revision replaced is history, and a task that succeeded
    // (or was reused) has nothing to retry.
    let task_latest = attempts.iter().rev().find(|a| a.revision == revision);
    if matches!(task_state, TaskState::Succeeded | TaskState::Reused)
        || task_latest.is_some_and(|a| a.operation_id != operation_id)
    {
        return Err(Error::usage(format!(
            "operation {operation_id} is not task {task_ref}'s latest call (task state {task_state}); nothing to retry"
        ))
        .at(operation_id.to_string()));
    }
    let retryable = match &latest {
        _ if task_state == TaskState::AwaitingApproval => true,
        Some(a) if a.state == AttemptState::SettledNotRun => true,
        Some(a) if a.state == AttemptState::Failed => {
            let class = a
                .classification
                .as_ref()
                .and_then(|c| c.get("class"))
                .and_then(Value::as_str)
                .and_then(crate::state::FailureClass::parse);
            matches!(
                class,
                Some(
                    crate::state::FailureClass::ProviderUnavailable
                        | crate::state::FailureClass::Timeout
                        | crate::state::FailureClass::Killed
                        | crate::state::FailureClass::Environment
                )
            )
        }
        _ => false,
    };
    if !retryable {
        let what = match &latest {
            Some(a) if a.state == AttemptState::EffectUnknown => {
                "its outcome is unknown: settle it first (`engine settle`)".to_string()
            }
            Some(a) => format!(
                "its latest try ({}) is `{}`{}",
                a.try_no,
                a.state,
                a.classification
                    .as_ref()
                    .and_then(|c| c.get("class"))
                    .and_then(Value::as_str)
                    .map(|c| format!(" with class {c}; use `engine repair` for that"))
                    .unwrap_or_default()
            ),
            None => "it has no attempt yet: `engine run` sends it".to_string(),
        };
        return Err(Error::usage(format!("operation {operation_id} (task {task_ref}) is not retryable: {what}"))
            .at(operation_id.to_string()));
    }
    if let Some(a) = &latest {
        honour_retry_after(conn, a)?;
    }
    let row = ledger::revision(conn, &goal_id, revision)?;
    let file: crate::plan::PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
        Error::new(Code::StoreCorrupt, format!("stored plan of {goal_id} r{revision} does not parse: {e}"))
    })?;
    let plan = Plan::from_file(file, PathBuf::from(&row.workspace))?;
    store.write(Durability::Normal, |tx| {
        ledger::set_task_state(
            tx,
            &goal_id,
            revision,
            &task_ref,
            TaskState::Pending,
            &json!({"retry_requested": operation_id}),
        )?;
        events::append(
            tx,
            &Event::goal(
                "retry_requested",
                &goal_id,
                revision,
                json!({
                    "operation_id": operation_id, "after_try": latest.as_ref().map(|a| a.try_no),
                }),
            )
            .task(&task_ref),
        )?;
        Ok(())
    })?;
    execute(store, plan, revision, jobs, HashSet::from([operation_id.to_string()]))
}

/// What a repair sends: a new request (the instruction is part of it) with
/// the failure evidence handed to the provider.
#[derive(Debug, Clone)]
pub struct Repair {
    pub operation_id: String,
    pub request_digest: String,
    pub instruction: Option<String>,
    pub failed_attempt: i64,
    pub classification: Value,
    pub evidence: Value,
}

/// The longest `Retry-After` the engine waits out before a retry; a longer
/// one is refused with the time to come back.
pub const RETRY_AFTER_WAIT_MAX_S: u64 = 300;

/// A provider that answered 429/503 with `Retry-After` is not asked again
/// before that time: wait it out (bounded), or refuse saying when.
fn honour_retry_after(conn: &rusqlite::Connection, a: &ledger::AttemptRow) -> Result<()> {
    let retry_after = ledger::evidence_of_attempt(conn, a.id)?.into_iter().find_map(|r| match r.evidence {
        crate::evidence::Evidence::ProviderError { retry_after_seconds: Some(s), .. } => Some(s),
        _ => None,
    });
    let (Some(seconds), Some(finished)) = (retry_after, a.finished_at_ms) else { return Ok(()) };
    let not_before_ms = finished + (seconds as i64) * 1000;
    let wait_ms = not_before_ms - now_ms();
    if wait_ms <= 0 {
        return Ok(());
    }
    let wait_s = (wait_ms as u64).div_ceil(1000);
    if wait_s > RETRY_AFTER_WAIT_MAX_S {
        return Err(Error::usage(format!(
            "the provider asked not to be called again for {seconds}s (Retry-After); retry after {}",
            crate::report::utc(not_before_ms)
        )));
    }
    eprintln!("engine: waiting {wait_s}s: the provider answered Retry-After: {seconds}");
    std::thread::sleep(Duration::from_millis(wait_ms as u64));
    Ok(())
}

pub(crate) fn execute(
    store: &mut Store,
    plan: Plan,
    revision: i64,
    jobs: usize,
    retry_allowed: HashSet<String>,
) -> Result<RunReport> {
    execute_with(store, plan, revision, jobs, retry_allowed, HashMap::new())
}

pub(crate) fn execute_with(
    store: &mut Store,
    plan: Plan,
    revision: i64,
    jobs: usize,
    retry_allowed: HashSet<String>,
    repairs: HashMap<String, Repair>,
) -> Result<RunReport> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut runner = Runner::new(store, plan, revision, jobs.max(1));
    runner.retry_allowed = retry_allowed;
    runner.repairs = repairs;
    rt.block_on(runner.run())
}

/// `Some(revision)` when the goal is registered with exactly this plan as
/// its active revision; `PLAN_CHANGED` when it is registered with another;
/// `None` when the goal is new. Reads only.
fn check_unchanged(store: &Store, plan: &Plan, plan_path: &Path) -> Result<Option<i64>> {
    let goal = plan.goal();
    let Some(row) = ledger::goal(store.conn(), &goal.id)? else { return Ok(None) };
    let active = ledger::revision(store.conn(), &goal.id, row.active_revision)?;
    if active.plan_digest != plan.digests.plan {
        return Err(Error::new(
            Code::PlanChanged,
            format!(
                "this plan differs from goal `{}`'s active revision {}; record the change with `engine revise {} --reason TEXT`",
                goal.id,
                row.active_revision,
                plan_path.display()
            ),
        )
        .at(plan_path.display().to_string())
        .with_details(json!({
            "goal_id": goal.id, "active_revision": row.active_revision,
            "active_plan_digest": active.plan_digest, "plan_digest": plan.digests.plan,
        })));
    }
    Ok(Some(row.active_revision))
}

/// Register the goal and its first revision, or check that the plan is the
/// goal's active revision (`PLAN_CHANGED` otherwise).
fn register(store: &mut Store, plan: &Plan, plan_path: &Path) -> Result<i64> {
    if let Some(revision) = check_unchanged(store, plan, plan_path)? {
        return Ok(revision);
    }
    let goal = plan.goal();
    let plan_json = serde_json::to_string(&plan.file).expect("a plan serializes");
    store.write(Durability::Full, |tx| {
        let seq = events::append(
            tx,
            &Event::goal(
                "goal_registered",
                &goal.id,
                1,
                json!({
                    "plan_digest": plan.digests.plan, "goal_contract_digest": plan.digests.goal_contract,
                    "plan_path": plan_path.display().to_string(), "tasks": plan.file.tasks.len(),
                }),
            ),
        )?;
        ledger::insert_goal(tx, &goal.id, 1, seq)?;
        ledger::insert_revision(
            tx,
            &ledger::NewRevision {
                goal_id: &goal.id,
                revision: 1,
                parent: None,
                plan_digest: &plan.digests.plan,
                goal_contract: &plan.digests.goal_contract,
                plan_json: &plan_json,
                plan_path: &plan_path.display().to_string(),
                workspace: &plan.workspace.display().to_string(),
                reason: None,
            },
        )?;
        insert_tasks(tx, plan, 1)
    })?;
    Ok(1)
}

pub(crate) fn insert_tasks(tx: &rusqlite::Transaction, plan: &Plan, revision: i64) -> Result<()> {
    let goal_id = &plan.goal().id;
    for i in &plan.order {
        let t = &plan.file.tasks[*i];
        let d = &plan.digests.tasks[&t.task_ref];
        ledger::insert_task(
            tx,
            goal_id,
            revision,
            &t.task_ref,
            &d.meaning,
            &d.dependencies,
            &d.operation_id,
            &d.request,
        )?;
    }
    Ok(())
}

struct Runner<'s> {
    store: &'s mut Store,
    plan: Plan,
    goal_id: String,
    revision: i64,
    jobs: usize,
    providers: HashMap<String, Arc<dyn Provider>>,
    /// Secret values (from the variables the plan names), for redaction.
    secrets: Vec<String>,
    states: HashMap<String, TaskState>,
    in_flight: HashMap<i64, InFlight>,
    unknown: Vec<UnknownOp>,
    budget_stop: Option<Exhausted>,
    awaiting: Vec<Awaiting>,
    /// Operations a person asked to re-send (`engine retry`).
    retry_allowed: HashSet<String>,
    /// Tasks a person asked to repair (`engine repair`), by ref.
    repairs: HashMap<String, Repair>,
    /// File-state cache for checkpoints; flushed when the run finishes.
    cache: checkpoint::FileCache,
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
}

impl<'s> Runner<'s> {
    fn new(store: &'s mut Store, plan: Plan, revision: i64, jobs: usize) -> Self {
        let providers = plan.file.providers.iter().map(|(name, spec)| (name.clone(), provider::build(spec))).collect();
        let secrets =
            plan.file.secrets.iter().filter_map(|name| std::env::var(name).ok()).filter(|v| !v.is_empty()).collect();
        let (tx, rx) = mpsc::unbounded_channel();
        let goal_id = plan.goal().id.clone();
        Runner {
            store,
            plan,
            goal_id,
            revision,
            jobs,
            providers,
            secrets,
            states: HashMap::new(),
            in_flight: HashMap::new(),
            unknown: Vec::new(),
            budget_stop: None,
            awaiting: Vec::new(),
            retry_allowed: HashSet::new(),
            repairs: HashMap::new(),
            cache: checkpoint::FileCache::default(),
            tx,
            rx,
        }
    }

    async fn run(&mut self) -> Result<RunReport> {
        self.write_event(
            Durability::Normal,
            "run_started",
            None,
            None,
            json!({
                "generation": self.store.generation(), "jobs": self.jobs, "pid": std::process::id(),
            }),
        )?;
        for row in ledger::tasks(self.store.conn(), &self.goal_id, self.revision)? {
            self.states.insert(row.task_ref, row.state);
        }
        // Every task of the plan has its row: the scheduler reads states by
        // the plan's refs and must never meet one the ledger lacks.
        if let Some(t) = self.plan.file.tasks.iter().find(|t| !self.states.contains_key(&t.task_ref)) {
            return Err(Error::new(
                Code::StoreCorrupt,
                format!(
                    "task `{}` of goal `{}` revision {} has no row in the ledger",
                    t.task_ref, self.goal_id, self.revision
                ),
            ));
        }
        self.cache = checkpoint::FileCache::load(self.store.conn())?;
        reconcile::reconcile(self).await?;
        self.refresh_completions()?;
        self.schedule().await?;
        let acceptance = self.acceptance().await?;
        self.finish(acceptance)
    }

    fn task(&self, task_ref: &str) -> Result<&Task> {
        self.plan
            .task(task_ref)
            .ok_or_else(|| Error::internal(format!("task `{task_ref}` is not in the plan being run")))
    }

    /// The work in flight for an attempt; a message about any other
    /// attempt is a bug, reported as one rather than a panic.
    fn flight(&self, attempt_id: i64) -> Result<&InFlight> {
        self.in_flight
            .get(&attempt_id)
            .ok_or_else(|| Error::internal(format!("attempt {attempt_id} reported back but is not in flight")))
    }

    fn write_event(
        &mut self,
        d: Durability,
        kind: &str,
        task_ref: Option<&str>,
        attempt: Option<i64>,
        data: Value,
    ) -> Result<i64> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.store.write(d, |tx| {
            let mut e = Event::goal(kind, &goal_id, revision, data);
            e.task_ref = task_ref;
            e.attempt_id = attempt;
            events::append(tx, &e)
        })
    }

    fn set_task(&mut self, task_ref: &str, state: TaskState, detail: Value) -> Result<()> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        self.store.write(Durability::Normal, |tx| {
            ledger::set_task_state(tx, &goal_id, revision, task_ref, state, &detail)?;
            events::append(
                tx,
                &Event::goal("task_state", &goal_id, revision, json!({"state": state, "detail": detail}))
                    .task(task_ref),
            )?;
            Ok(())
        })?;
        self.states.insert(task_ref.to_string(), state);
        Ok(())
    }

    /// Like a build tool with stale targets: a completed task whose inputs
    /// changed since its validations judged them (or whose upstream runs
    /// again) is run again; one whose checkpoint still matches is not
    /// touched. External effects stand: they are never re-sent on the
    /// strength of a local observation.
    fn refresh_completions(&mut self) -> Result<()> {
        let mut rerun: HashSet<String> = HashSet::new();
        let mut stale: Vec<(String, Value)> = Vec::new();
        // Decide everything inside one read transaction (one snapshot, one
        // lock), then write what went stale.
        self.store.conn().execute_batch("BEGIN DEFERRED")?;
        let decided = (|| -> Result<()> {
            for &i in &self.plan.order {
                let task = &self.plan.file.tasks[i];
                let r = task.task_ref.as_str();
                if !self.states[r].is_complete() {
                    // Not done: it runs (or waits) now, so what depends on
                    // it cannot stand on an older completion.
                    rerun.insert(r.to_string());
                    continue;
                }
                if task.effect == Effect::External {
                    continue;
                }
                let completion =
                    crate::revise::load_completion(self.store.conn(), &self.goal_id, self.revision, Some(task), r)?;
                let upstream = task.depends_on.iter().find(|d| rerun.contains(*d)).map(String::as_str);
                let d = &self.plan.digests.tasks[r];
                let (workspace, secrets, cache) = (&self.plan.workspace, &self.plan.file.secrets, &mut self.cache);
                let decision = crate::reuse::decide(
                    false,
                    completion.as_ref(),
                    &crate::reuse::Candidate { task, meaning: &d.meaning, dependencies: &d.dependencies },
                    upstream,
                    || checkpoint::observe(workspace, task, secrets, cache),
                );
                if let crate::reuse::Decision::Run { refusal } = decision {
                    stale.push((r.to_string(), json!({"stale": refusal.code(), "detail": refusal.detail()})));
                    rerun.insert(r.to_string());
                }
            }
            Ok(())
        })();
        self.store.conn().execute_batch("COMMIT")?;
        decided?;
        for (r, detail) in stale {
            self.write_event(Durability::Normal, "completion_stale", Some(&r), None, detail.clone())?;
            self.set_task(&r, TaskState::Pending, detail)?;
        }
        Ok(())
    }

    /// Run every task whose dependencies are complete, `jobs` at a time.
    ///
    /// Candidates wait in `ready`, ordered by plan position, so tasks start
    /// in plan order as before; a task becomes a candidate again only when
    /// one of its dependencies completes. Each message therefore costs work
    /// in proportion to its task's dependents, not a scan of the whole plan
    /// (a scan per message made a run quadratic in the number of tasks).
    async fn schedule(&mut self) -> Result<()> {
        let order: Vec<String> = self.plan.order.iter().map(|&i| self.plan.file.tasks[i].task_ref.clone()).collect();
        // Tasks that stopped earlier on a dependency are looked at afresh
        // (but not those whose validations reconciliation just resumed).
        let busy: HashSet<String> = self.in_flight.values().map(|f| f.task_ref.clone()).collect();
        // A task held back by an earlier try that waited on settlement goes
        // on once that try is settled.
        for r in &order {
            if self.states[r] != TaskState::EffectUnknown {
                continue;
            }
            let row = ledger::tasks_one(self.store.conn(), &self.goal_id, self.revision, r)?;
            let Some(waited) = row.as_ref().and_then(|t| t.detail.get("waits_on_attempt")).and_then(Value::as_i64)
            else {
                continue;
            };
            let state = ledger::attempt(self.store.conn(), waited)?.state;
            if !state.in_doubt() && state != AttemptState::EffectUnknown {
                self.states.insert(r.clone(), TaskState::Pending);
            }
        }
        for r in &order {
            if matches!(self.states[r], TaskState::Blocked | TaskState::Ready | TaskState::Running) && !busy.contains(r)
            {
                self.states.insert(r.clone(), TaskState::Pending);
            }
        }
        let position: HashMap<&str, usize> = order.iter().enumerate().map(|(p, r)| (r.as_str(), p)).collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
        for (p, r) in order.iter().enumerate() {
            for d in &self.task(r)?.depends_on {
                dependents[position[d.as_str()]].push(p);
            }
        }
        let mut ready: BTreeSet<usize> = (0..order.len()).collect();
        let mut started = vec![false; order.len()];
        // A refused call (plan changed, operation conflict) stops new work,
        // but what is already in flight is drained so its receipts are kept.
        let mut refused: Option<Error> = None;
        loop {
            // Start what is ready, in plan order, while there is room.
            while self.budget_stop.is_none() && refused.is_none() && self.in_flight.len() < self.jobs {
                let Some(p) = ready.pop_first() else { break };
                let r = &order[p];
                if !matches!(self.states[r], TaskState::Pending | TaskState::AwaitingApproval) || started[p] {
                    continue;
                }
                if self.waits_for_retry(r)? {
                    continue;
                }
                // Not yet: it comes back when one of its dependencies completes.
                if !self.task(r)?.depends_on.iter().all(|d| self.states[d].is_complete()) {
                    continue;
                }
                started[p] = true;
                match self.start(r).await {
                    Ok(()) => {}
                    Err(e) if matches!(e.code, Code::PlanChanged | Code::OperationConflict) => refused = Some(e),
                    Err(e) => return Err(e),
                }
            }
            if self.in_flight.is_empty() {
                break;
            }
            let msg = self.rx.recv().await.ok_or_else(|| Error::internal("the runner's channel closed"))?;
            let attempt_id = match &msg {
                Msg::Progress { attempt_id, .. }
                | Msg::Finished { attempt_id, .. }
                | Msg::Validated { attempt_id, .. } => *attempt_id,
            };
            let task_ref = self.in_flight.get(&attempt_id).map(|f| f.task_ref.clone());
            self.handle(msg).await?;
            if let Some(r) = task_ref {
                if self.states[&r].is_complete() {
                    ready.extend(dependents[position[r.as_str()]].iter().copied());
                }
            }
        }
        if let Some(e) = refused {
            return Err(e);
        }
        // Whatever could not start waits on something: say what.
        for r in &order {
            if self.states[r] == TaskState::Pending {
                let waits: Vec<String> = self
                    .task(r)?
                    .depends_on
                    .iter()
                    .filter(|d| !self.states[*d].is_complete())
                    .map(|d| format!("{d} ({})", self.states[d]))
                    .collect();
                if !waits.is_empty() {
                    self.set_task(r, TaskState::Blocked, json!({"waits_on": waits}))?;
                }
            }
        }
        Ok(())
    }

    /// Re-check, in the transaction that commits the intent, that the plan
    /// revision is still current, the operation id still means this request,
    /// the budgets allow one more call and an approval (where one is needed)
    /// is there — then commit the intent, and only then hand the call over.
    async fn start(&mut self, task_ref: &str) -> Result<()> {
        let task = self.task(task_ref)?.clone();
        let mut digests = self.plan.digests.tasks[task_ref].clone();
        let repair = self.repairs.get(task_ref).cloned();
        if let Some(rep) = &repair {
            digests.operation_id = rep.operation_id.clone();
            digests.request = rep.request_digest.clone();
        }
        // What the inputs looked like when the engine decided to send: a
        // later repair compares against it to tell new evidence from repetition.
        let inputs_at_intent =
            checkpoint::observe(&self.plan.workspace, &task, &self.plan.file.secrets, &mut self.cache).ok();
        // A person's retry or repair of paid or external work is a repeat
        // whether or not an earlier try got out; a plain run's repeat is one
        // after a try that was (or may have been) dispatched.
        let asked_repeat = repair.is_some() || self.retry_allowed.contains(&digests.operation_id);
        let needs_approval = approval::needed(
            &task,
            asked_repeat || approval::prior_dispatch(self.store.conn(), &self.goal_id, task_ref)?,
        );
        let request = match &repair {
            Some(rep) => json!({ "provider": task.provider, "action": task.action, "instruction": rep.instruction }),
            None => json!({ "provider": task.provider, "action": task.action }),
        };
        let generation = self.store.generation().ok_or_else(|| Error::internal("a runner without the lease"))?;
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let plan_digest = self.plan.digests.plan.clone();
        let budgets = self.plan.file.budgets.clone();
        let kind = if repair.is_some() {
            "repair"
        } else if self.retry_allowed.contains(&digests.operation_id) {
            "retry"
        } else {
            "run"
        };
        let decision = self.store.write(Durability::Full, |tx| {
            fresh(tx, &goal_id, revision, &plan_digest)?;
            // Never a new call of a task while an earlier attempt of it (of
            // this operation or another: a repair's, an older revision's)
            // is unknown or in doubt: a person settles that one first.
            if let Some((unsettled, state)) = tx
                .query_row(
                    "SELECT id, state FROM attempts WHERE goal_id = ?1 AND task_ref = ?2
                       AND state IN ('effect_unknown','intent_recorded','dispatched') ORDER BY id LIMIT 1",
                    rusqlite::params![goal_id, task_ref],
                    |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
                )
                .optional()?
            {
                let why = format!("attempt {unsettled} of this task is {state}: settle it first");
                ledger::set_task_state(
                    tx,
                    &goal_id,
                    revision,
                    task_ref,
                    TaskState::EffectUnknown,
                    &json!({"operation_id": digests.operation_id, "waits_on_attempt": unsettled, "why": why}),
                )?;
                events::append(
                    tx,
                    &Event::goal("call_refused", &goal_id, revision, json!({"operation_id": digests.operation_id, "why": why}))
                        .task(task_ref),
                )?;
                return Ok(Decision::Unsettled);
            }
            if let Some(other) = crate::store::qrow(tx,
                    "SELECT request_digest FROM attempts WHERE operation_id = ?1 AND request_digest != ?2 LIMIT 1",
                    rusqlite::params![digests.operation_id, digests.request],
                    |r| r.get::<_, String>(0),
                )
                .optional()?
            {
                return Err(Error::new(
                    Code::OperationConflict,
                    format!("operation {} was recorded with request digest {other}, not {}; refusing to send a different request under the same operation id", digests.operation_id, digests.request),
                )
                .at(task_ref.to_string()));
            }
            let usage = usage(tx, &goal_id, revision, task_ref)?;
            if let Err(exhausted) = budget::check_call(&budgets, &usage, task.cost) {
                events::append(tx, &Event::goal("budget_exhausted", &goal_id, revision, json!(exhausted)).task(task_ref))?;
                return Ok(Decision::Budget(exhausted));
            }
            let gate = if needs_approval { Some(approval::find(tx, &digests.operation_id, &digests.request, &plan_digest)?) } else { None };
            if let Some(g @ (approval::Gate::Missing | approval::Gate::Stale { .. })) = &gate {
                let why = match g {
                    approval::Gate::Stale { why, approval_id } => format!("approval {approval_id} is stale: {why}"),
                    _ => "no approval for this exact request".to_string(),
                };
                ledger::set_task_state(tx, &goal_id, revision, task_ref, TaskState::AwaitingApproval,
                    &json!({"operation_id": digests.operation_id, "request_digest": digests.request, "why": why}))?;
                events::append(tx, &Event::goal("approval_required", &goal_id, revision, json!({
                    "operation_id": digests.operation_id, "request_digest": digests.request, "why": why,
                })).task(task_ref))?;
                return Ok(Decision::Approval(g.clone()));
            }
            let try_no = ledger::last_try(tx, &digests.operation_id)? + 1;
            let intent = ledger::insert_intent(tx, &ledger::NewIntent {
                goal_id: &goal_id,
                revision,
                task_ref,
                operation_id: &digests.operation_id,
                try_no,
                kind,
                request_digest: &digests.request,
                request_json: &request,
                effect: task.effect.as_str(),
                cost: task.cost,
                generation,
                inputs_at_intent: inputs_at_intent.as_ref().map(|c| c.digest.as_str()),
                instruction: repair.as_ref().and_then(|r| r.instruction.as_deref()),
            })?;
            let id = intent.attempt_id();
            if let Some(cp) = &inputs_at_intent {
                ledger::put_checkpoint(tx, cp)?;
            }
            let approval_id = match gate {
                Some(approval::Gate::Found { approval_id }) => {
                    approval::consume(tx, approval_id, id)?;
                    Some(approval_id)
                }
                _ => None,
            };
            if approval_id.is_none() {
                let voided = approval::void_unneeded(tx, &digests.operation_id, id)?;
                if !voided.is_empty() {
                    events::append(
                        tx,
                        &Event::goal("approvals_voided", &goal_id, revision, json!({
                            "approval_ids": voided, "why": "this call needed no approval; approvals are never kept for a later repeat",
                        }))
                        .task(task_ref)
                        .attempt(id),
                    )?;
                }
            }
            ledger::set_task_state(tx, &goal_id, revision, task_ref, TaskState::Running, &json!({"attempt_id": id}))?;
            events::append(tx, &Event::goal("intent_recorded", &goal_id, revision, json!({
                "operation_id": digests.operation_id, "try": try_no, "request_digest": digests.request,
                "approval_consumed": approval_id,
            })).task(task_ref).attempt(id))?;
            Ok(Decision::Go { intent, try_no })
        });
        let decision = match decision {
            Ok(d) => d,
            Err(e) if matches!(e.code, Code::PlanChanged | Code::OperationConflict) => {
                // Nothing was dispatched; say why in the ledger before stopping.
                self.write_event(
                    Durability::Normal,
                    "call_refused",
                    Some(task_ref),
                    None,
                    json!({
                        "operation_id": digests.operation_id, "code": e.code, "message": e.message,
                    }),
                )?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let (intent, try_no) = match decision {
            Decision::Go { intent, try_no } => (intent, try_no),
            Decision::Budget(exhausted) => {
                if let Some(rep) = &repair {
                    // The repair never started: the task is still the failure it was.
                    let detail = json!({"attempt_id": rep.failed_attempt, "class": rep.classification.get("class"),
                        "why": "repair refused: budget exhausted"});
                    self.set_task(task_ref, TaskState::Failed, detail)?;
                }
                self.budget_stop = Some(exhausted);
                return Ok(());
            }
            Decision::Unsettled => {
                self.states.insert(task_ref.to_string(), TaskState::EffectUnknown);
                return Ok(());
            }
            Decision::Approval(gate) => {
                self.states.insert(task_ref.to_string(), TaskState::AwaitingApproval);
                self.awaiting.push(Awaiting {
                    operation_id: digests.operation_id.clone(),
                    task_ref: task_ref.to_string(),
                    request_digest: digests.request.clone(),
                    stale: matches!(gate, approval::Gate::Stale { .. }),
                });
                return Ok(());
            }
        };
        self.states.insert(task_ref.to_string(), TaskState::Running);
        failpoint::hit("after_intent");

        let call = self.call_for(&task, &digests.operation_id, try_no as u32, repair.as_ref());
        let provider = self.providers[&task.provider].clone();
        let tx = self.tx.clone();
        let attempt_id = intent.attempt_id();
        self.in_flight.insert(attempt_id, InFlight::new(intent, task_ref));
        tokio::spawn(async move {
            let (ptx, mut prx) = mpsc::unbounded_channel::<Progress>();
            let fut = provider.dispatch(&call, ptx);
            tokio::pin!(fut);
            let outcome = loop {
                tokio::select! {
                    Some(progress) = prx.recv() => {
                        let _ = tx.send(Msg::Progress { attempt_id, progress });
                    }
                    outcome = &mut fut => break outcome,
                }
            };
            // Progress sent just before completion must still come first.
            while let Ok(progress) = prx.try_recv() {
                let _ = tx.send(Msg::Progress { attempt_id, progress });
            }
            let _ = tx.send(Msg::Finished { attempt_id, outcome });
        });
        Ok(())
    }

    /// A task whose latest attempt a person settled as `not_run` is sent
    /// again only when a person asks (`engine retry`), never by a plain run.
    fn waits_for_retry(&self, task_ref: &str) -> Result<bool> {
        if self.states[task_ref] == TaskState::AwaitingApproval {
            return Ok(false);
        }
        let op = &self.plan.digests.tasks[task_ref].operation_id;
        if self.retry_allowed.contains(op) {
            return Ok(false);
        }
        let latest: Option<AttemptState> = self
            .store
            .conn()
            .query_row(
                "SELECT state FROM attempts WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3 ORDER BY id DESC LIMIT 1",
                rusqlite::params![self.goal_id, self.revision, task_ref],
                |r| r.get(0),
            )
            .optional()?;
        Ok(latest == Some(AttemptState::SettledNotRun))
    }

    /// The call as the provider receives it. An agent gets, on stdin, the
    /// goal, the task, its identity, and on a repair the classified failure
    /// evidence and the person's instruction.
    pub(crate) fn call_for(&self, task: &Task, operation_id: &str, try_no: u32, repair: Option<&Repair>) -> Call {
        let stdin = match self.plan.provider_of(task) {
            ProviderSpec::Command { protocol: Some(_) } => {
                let mut doc = json!({
                    "goal": self.plan.goal(),
                    "task": task,
                    "operation_id": operation_id,
                    "try": try_no,
                });
                if let Some(rep) = repair {
                    doc["repair"] = json!({
                        "failed_attempt": rep.failed_attempt,
                        "classification": rep.classification,
                        "evidence": rep.evidence,
                        "instruction": rep.instruction,
                    });
                }
                Some(serde_json::to_vec(&doc).expect("serializes"))
            }
            _ => None,
        };
        Call {
            operation_id: operation_id.to_string(),
            try_no,
            request: task.action.clone(),
            workspace: self.plan.workspace.clone(),
            timeout: task.timeout_seconds.map(Duration::from_secs),
            output_bytes_max: OUTPUT_BYTES_MAX,
            stdin,
            env: Vec::new(),
            secrets: self.secrets.clone(),
        }
    }

    async fn handle(&mut self, msg: Msg) -> Result<()> {
        match msg {
            Msg::Progress { attempt_id, progress: Progress::Spawned { process } } => {
                // Kept until the dispatch is recorded, in the same write.
                if let Some(f) = self.in_flight.get_mut(&attempt_id) {
                    f.process = Some(process);
                }
            }
            Msg::Progress { attempt_id, progress: Progress::Dispatched { detail } } => {
                let flight = self.flight(attempt_id)?;
                let (task_ref, intent) = (flight.task_ref.clone(), flight.intent);
                let mut data = json!({"detail": detail});
                if let Some(p) = flight.process {
                    data["process"] = json!(p);
                }
                let (goal_id, revision) = (self.goal_id.clone(), self.revision);
                self.store.write(Durability::Normal, |tx| {
                    ledger::mark_dispatched(tx, intent, &detail)?;
                    events::append(
                        tx,
                        &Event::goal("dispatched", &goal_id, revision, data).task(&task_ref).attempt(attempt_id),
                    )?;
                    Ok(())
                })?;
                failpoint::hit("after_dispatch");
            }
            // An MCP task handle: not yet kept in the ledger (no plan can ask
            // for a task-augmented call yet), so nothing to record.
            Msg::Progress { progress: Progress::Handle { .. }, .. } => {}
            Msg::Finished { attempt_id, outcome } => {
                failpoint::hit("after_receipt");
                let task_ref = self.flight(attempt_id)?.task_ref.clone();
                let task = self.task(&task_ref)?.clone();
                match record::outcome(self, attempt_id, &task, outcome).await? {
                    record::Next::Validate => self.start_validations(attempt_id, &task)?,
                    record::Next::Done => {
                        self.in_flight.remove(&attempt_id);
                    }
                }
            }
            Msg::Validated { attempt_id, runs } => {
                let flight = self.in_flight.remove(&attempt_id).ok_or_else(|| {
                    Error::internal(format!(
                        "validations of attempt {attempt_id} reported twice, or for no attempt in flight"
                    ))
                })?;
                let task = self.task(&flight.task_ref)?.clone();
                let after = checkpoint::observe(&self.plan.workspace, &task, &self.plan.file.secrets, &mut self.cache);
                record::validations(self, attempt_id, &task, flight.before, after, runs)?;
            }
        }
        Ok(())
    }

    /// Observe the checkpoint the validations will judge, then run them.
    fn start_validations(&mut self, attempt_id: i64, task: &Task) -> Result<()> {
        let before = checkpoint::observe(&self.plan.workspace, task, &self.plan.file.secrets, &mut self.cache).ok();
        if let Some(f) = self.in_flight.get_mut(&attempt_id) {
            f.before = before;
        }
        let specs: Vec<CheckSpec> = task
            .validations
            .iter()
            .map(|v| CheckSpec {
                id: v.id.clone(),
                run: v.run.clone(),
                expect_exit: v.expect_exit,
                timeout: v.timeout_seconds.map(Duration::from_secs),
            })
            .collect();
        let tx = self.tx.clone();
        let workspace = self.plan.workspace.clone();
        let op = self.plan.digests.tasks[&task.task_ref].operation_id.clone();
        let secrets = self.secrets.clone();
        tokio::spawn(async move {
            let runs = checks::run_checks(specs, workspace, op, OUTPUT_BYTES_MAX, secrets).await;
            let _ = tx.send(Msg::Validated { attempt_id, runs });
        });
        Ok(())
    }

    /// Run the goal's acceptance checks when every task is complete.
    async fn acceptance(&mut self) -> Result<Option<Vec<AcceptanceLine>>> {
        if !self.states.values().all(|s| s.is_complete()) {
            return Ok(None);
        }
        let specs: Vec<CheckSpec> = self
            .plan
            .goal()
            .acceptance
            .iter()
            .filter_map(|a| {
                a.check.as_ref().map(|c| CheckSpec {
                    id: a.id.clone(),
                    run: c.run.clone(),
                    expect_exit: c.expect_exit,
                    timeout: c.timeout_seconds.map(Duration::from_secs),
                })
            })
            .collect();
        let runs = checks::run_checks(
            specs,
            self.plan.workspace.clone(),
            format!("acceptance:{}", self.goal_id),
            OUTPUT_BYTES_MAX,
            self.secrets.clone(),
        )
        .await;
        record::acceptance(self, runs).map(Some)
    }

    /// Decide the goal's state and the exit code from what the ledger now
    /// holds (the latest result of everything, in ledger order).
    fn finish(&mut self, acceptance: Option<Vec<AcceptanceLine>>) -> Result<RunReport> {
        let conn = self.store.conn();
        if cfg!(debug_assertions) {
            // The budget counters must agree with the attempts they count.
            let counted = ledger::recount_budget_use(conn, &self.goal_id)?;
            let kept = (ledger::provider_calls_used(conn, &self.goal_id)?, ledger::cost_used(conn, &self.goal_id)?);
            assert!(
                counted.0 == kept.0 && (counted.1 - kept.1).abs() < 1e-9,
                "budget counters {kept:?} != recount {counted:?}"
            );
        }
        let mut unknown = std::mem::take(&mut self.unknown);
        for a in ledger::attempts_in_state(conn, &self.goal_id, AttemptState::EffectUnknown)? {
            if !unknown.iter().any(|u| u.operation_id == a.operation_id && u.try_no == a.try_no) {
                let last_state = last_known_state(conn, &a)?.to_string();
                unknown.push(UnknownOp {
                    last_state,
                    operation_id: a.operation_id,
                    task_ref: a.task_ref,
                    request_digest: a.request_digest,
                    try_no: a.try_no,
                    state: a.state.to_string(),
                    reason: a.unknown_reason.unwrap_or_default(),
                });
            }
        }
        let rows = ledger::tasks(conn, &self.goal_id, self.revision)?;
        let order: HashMap<&str, usize> = self
            .plan
            .order
            .iter()
            .enumerate()
            .map(|(pos, &i)| (self.plan.file.tasks[i].task_ref.as_str(), pos))
            .collect();
        let mut tasks: Vec<TaskLine> = rows
            .iter()
            .map(|r| TaskLine {
                task_ref: r.task_ref.clone(),
                state: r.state,
                class: r.detail.get("class").and_then(Value::as_str).map(str::to_string),
                why: r.detail.get("why").and_then(Value::as_str).map(str::to_string),
            })
            .collect();
        tasks.sort_by_key(|t| order.get(t.task_ref.as_str()).copied().unwrap_or(usize::MAX));
        let failed: Vec<String> =
            tasks.iter().filter(|t| t.state == TaskState::Failed).map(|t| t.task_ref.clone()).collect();
        let awaiting = std::mem::take(&mut self.awaiting);
        let not_run =
            ledger::latest_attempts_in_state(conn, &self.goal_id, self.revision, AttemptState::SettledNotRun)?;
        // A settled-not-run operation whose re-send a person asked for
        // (`engine retry`) and which now waits on an approval stops the run
        // as APPROVAL_REQUIRED: approving is what the person does next.
        let unretried = not_run.iter().filter(|a| !awaiting.iter().any(|w| w.operation_id == a.operation_id)).count();
        let acceptance_passed = acceptance.as_ref().map(|a| a.iter().all(|l| l.passed));

        let (goal_state, exit_code, code) = if !unknown.is_empty() {
            (GoalState::NeedsSettlement, 3, Some(Code::ExternalEffectUnknown))
        } else if unretried > 0 {
            // A person said these did not run; until they are re-sent the
            // goal's outcome is not proven.
            (GoalState::Open, 3, Some(Code::GoalOutcomeUnproven))
        } else if awaiting.iter().any(|a| a.stale) {
            (GoalState::Open, 4, Some(Code::ApprovalStale))
        } else if !awaiting.is_empty() {
            (GoalState::Open, 4, Some(Code::ApprovalRequired))
        } else if self.budget_stop.is_some() {
            (GoalState::Open, 5, Some(Code::BudgetExhausted))
        } else if !failed.is_empty() || acceptance_passed == Some(false) {
            (GoalState::Failed, 1, None)
        } else if acceptance_passed == Some(true) {
            (GoalState::Satisfied, 0, None)
        } else {
            (GoalState::Open, 1, None)
        };
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let summary = json!({
            "goal_state": goal_state, "exit_code": exit_code, "failed": failed,
            "unknown": unknown.iter().map(|u| &u.operation_id).collect::<Vec<_>>(),
            "awaiting_approval": awaiting.iter().map(|u| &u.operation_id).collect::<Vec<_>>(),
            "budget": self.budget_stop,
        });
        let cache = &mut self.cache;
        self.store.write(Durability::Normal, |tx| {
            cache.flush(tx)?;
            let seq = events::append(tx, &Event::goal("run_finished", &goal_id, revision, summary))?;
            ledger::set_goal_state(tx, &goal_id, goal_state, seq)
        })?;
        Ok(RunReport {
            goal_id: self.goal_id.clone(),
            revision: self.revision,
            goal_state,
            exit_code,
            code,
            tasks,
            acceptance: acceptance.unwrap_or_default(),
            unknown,
            failed,
            budget: self.budget_stop.clone(),
            awaiting_approval: awaiting,
            settled_not_run: not_run.iter().map(|a| a.operation_id.clone()).collect(),
            acceptance_unchecked: self
                .plan
                .goal()
                .acceptance
                .iter()
                .filter(|a| a.check.is_none())
                .map(|a| a.id.clone())
                .collect(),
        })
    }
}

enum Decision {
    Go {
        intent: ledger::Intent,
        try_no: i64,
    },
    Budget(Exhausted),
    Approval(approval::Gate),
    /// An earlier try of the operation waits on a person's settlement.
    Unsettled,
}

/// An operation waiting on a person's approval.
#[derive(Debug, Clone, Serialize)]
pub struct Awaiting {
    pub operation_id: String,
    pub task_ref: String,
    pub request_digest: String,
    /// An approval exists but was for another request or plan.
    pub stale: bool,
}

/// Freshness at the call site: the revision being run is still the goal's
/// active one, with the same plan content.
fn fresh(tx: &rusqlite::Transaction, goal_id: &str, revision: i64, plan_digest: &str) -> Result<()> {
    let goal = ledger::goal(tx, goal_id)?.ok_or_else(|| Error::internal(format!("goal {goal_id} vanished")))?;
    // Only the digest: the full revision row carries the whole plan JSON,
    // and reading it at every intent made a run quadratic in plan size.
    let active_digest = ledger::revision_plan_digest(tx, goal_id, goal.active_revision)?;
    if goal.active_revision != revision || active_digest != plan_digest {
        return Err(Error::new(
            Code::PlanChanged,
            format!("goal {goal_id} moved to revision {} while this run was on revision {revision}; nothing more is dispatched", goal.active_revision),
        ));
    }
    Ok(())
}

/// What the ledger says has been used, read inside the intent's transaction.
pub fn usage(conn: &rusqlite::Connection, goal_id: &str, revision: i64, task_ref: &str) -> Result<Usage> {
    let attempts_of_task: i64 = crate::store::qrow(
        conn,
        "SELECT COUNT(*) FROM attempts WHERE goal_id = ?1 AND revision = ?2 AND task_ref = ?3",
        rusqlite::params![goal_id, revision, task_ref],
        |r| r.get(0),
    )?;
    let goal = ledger::goal(conn, goal_id)?.ok_or_else(|| Error::internal(format!("goal {goal_id} vanished")))?;
    Ok(Usage {
        attempts_of_task: attempts_of_task as u64,
        provider_calls: ledger::provider_calls_used(conn, goal_id)? as u64,
        cost: ledger::cost_used(conn, goal_id)?,
        elapsed_seconds: ((now_ms() - goal.first_run_at_ms).max(0) / 1000) as u64,
    })
}

/// Is this effect safe to send again without a person (SPEC: re-run only
/// where the effect is `none` or the task is declared idempotent)?
pub fn safe_to_resend(task: &Task) -> bool {
    task.effect == Effect::None || task.idempotent
}
