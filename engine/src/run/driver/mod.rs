//! The driver: it steps the core (`run::core`) and performs each action it
//! gives — on the ledger (`ledger`, `gate`, `receipt`, `reads`, `finish`),
//! on the workspace (`workspace`, `inputs`, `early`, `refresh`) or on the
//! world (`run::world`) — then resumes the core with the answer. It
//! decides nothing: every choice of what to do next is the core's, every
//! judgement a pure function of `decide/`. The same driver serves the real
//! world and the simulator's. When the run is traced it also feeds the
//! run's spans (`traced`) from what it performs.

mod cutoff;
pub mod dry;
mod early;
mod finish;
mod gate;
mod inputs;
mod ledger;
mod perform;
mod question;
mod read_first;
mod reads;
mod receipt;
mod refresh;
mod restore;
mod scope;
mod traced;
mod workspace;

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{Code, Error, Result};
use crate::ids::Revision;
use crate::plan::{Plan, PlanFile};
use crate::run::asked::Asked;
use crate::run::core::{Core, Opened, Say, Step};
use crate::run::progress::Update;
use crate::run::report::RunReport;
use crate::run::world::World;
use crate::state::TaskState;
use crate::store::LeaseGuard;
use crate::trace::RunTrace;
use early::Completions;
use inputs::FirstLook;
use scope::Scope;
use workspace::Workspace;

/// What the reuse pass is asked: the states, the tools, a person's
/// `--reuse-across-tool-change`, the tasks rerun alone.
type Refreshing<'a> = (
    &'a [(String, TaskState)],
    &'a std::collections::BTreeMap<String, crate::decide::tools::Inventory>,
    bool,
    &'a std::collections::BTreeSet<String>,
);

/// Run revision `revision` of `plan` under `ledger`'s lease in `world`:
/// the core's actions performed one after another until its report; its
/// spans sent to `tracing` when the run is traced.
pub async fn drive(
    ledger: &mut LeaseGuard,
    plan: &Plan,
    (revision, jobs, asked): (Revision, usize, Asked),
    world: &mut dyn World,
    (checks_sandbox, tracing): (providers::sandbox::Sandbox, Option<crate::trace::Tracing>),
) -> Result<RunReport> {
    let scope = Scope::new(plan, revision);
    let guard = workspace::guard(plan);
    let mut core = Core::new(plan, revision, jobs, asked, ledger.shared(), guard.clone());
    let trace = tracing.map(|t| RunTrace::start(t, scope.goal_id.as_str(), revision.get()));
    let mut driver = Driver {
        ledger,
        world,
        workspace: Workspace::new(&scope, checks_sandbox, guard),
        scope,
        first_look: None,
        completions: None,
        trace,
    };
    loop {
        match core.resume() {
            Step::Done(report) => {
                driver.trace_finish(&report);
                return report;
            }
            Step::Act(action) => {
                let _answered = driver.perform(action).await;
            }
        }
        if driver.world.dead() {
            return Err(Error::internal("the engine's process died"));
        }
    }
}

struct Driver<'l, 'p> {
    ledger: &'l mut LeaseGuard,
    world: &'l mut dyn World,
    scope: Scope<'p>,
    workspace: Workspace,
    /// What the first look at the workspace read of the complete tasks'
    /// inputs, for the reuse pass while nothing else ran (`inputs.rs`).
    first_look: Option<FirstLook>,
    /// The revision's completions as the run's start read them (`early.rs`).
    completions: Option<Completions>,
    /// The run's spans, when it is traced (`traced.rs`).
    trace: Option<RunTrace>,
}

impl Driver<'_, '_> {
    /// The protected paths after an attempt, against its baseline.
    async fn judge_protected(
        &mut self,
        attempt_id: crate::ids::AttemptId,
        task_ref: &str,
        judged: (Option<crate::checkpoint::Checkpoint>, bool, Option<Vec<crate::ids::AttemptId>>),
    ) -> Result<Vec<crate::evidence::Evidence>> {
        let task = self.scope.task(task_ref)?;
        let ws = &mut self.workspace;
        ws.judge_protected(self.world, self.ledger, &self.scope, (attempt_id, task), judged).await
    }

    /// A passed attempt's declared outputs (none for a task the plan lacks).
    async fn collect_outputs(&mut self, task_ref: &str) -> Option<crate::run::outputs::Kept> {
        let task = self.scope.task(task_ref).ok()?;
        Workspace::collect_outputs(self.world, &self.scope, task).await
    }

    /// The reuse pass (`refresh`); what stands has its outputs here before
    /// anything runs (`restore`).
    fn refresh(
        &mut self,
        (states, tools, across_tool_change, alone): Refreshing<'_>,
    ) -> Result<Vec<(String, serde_json::Value)>> {
        self.workspace.forget_upstream(None);
        let early = refresh::Looked { first_look: self.first_look.take(), completions: self.completions.take() };
        let sandbox = self.workspace.sandbox().clone();
        let cache = &mut self.workspace.cache;
        let pass = refresh::stale(
            self.ledger,
            &self.scope,
            (states, tools, across_tool_change, alone),
            (cache, &sandbox),
            early,
        )?;
        restore::restore(self.ledger, &self.scope, &pass.restore, cache)?;
        Ok(pass.stale)
    }

    /// A task's checkpoint now; with `identity`, with the entries the
    /// ledger adds (`cutoff::with_identity`).
    async fn observe(
        &mut self,
        task_ref: &str,
        context: std::collections::BTreeMap<String, String>,
        identity: bool,
    ) -> std::result::Result<crate::checkpoint::Checkpoint, String> {
        let scope = &self.scope;
        let task = scope.task(task_ref).map_err(|e| e.to_string())?;
        let context = match identity {
            true => {
                let known = (&mut self.workspace.cache, &mut self.workspace.programs);
                cutoff::with_identity(self.ledger, scope, task, context, known).map_err(|e| e.to_string())?
            }
            false => context,
        };
        self.workspace.observe(self.world, scope, task, context).await
    }

    /// Each task's state as the ledger has it when the run begins; the
    /// inputs the load left to the run checked before anything is written;
    /// the file-state cache and the completions read beside that look.
    fn open(&mut self) -> Result<Opened> {
        let now_ms = self.world.now_ms();
        let (plan, goal_id, revision) = (self.scope.plan, &self.scope.goal_id, self.scope.revision);
        let early = early::read_early(self.ledger, &self.scope);
        let states: HashMap<String, TaskState> =
            self.ledger.read().task_states(goal_id, revision)?.into_iter().collect();
        // Every task of the plan has its row: the scheduler reads states by
        // the plan's refs and must never meet one the ledger lacks.
        if let Some(t) = plan.file.tasks.iter().find(|t| !states.contains_key(&t.task_ref)) {
            return Err(Error::new(
                Code::StoreCorrupt,
                format!("task `{}` of goal `{goal_id}` revision {revision} has no row in the ledger", t.task_ref),
            ));
        }
        // Inputs the load left to the run are refused before it writes
        // anything, as the load would have refused them.
        let shared = self.ledger.shared();
        let observed = |task: &crate::plan::Task| {
            !shared
                && task.effect != crate::plan::Effect::External
                && states.get(&task.task_ref).is_some_and(|s| s.is_complete())
        };
        self.first_look = inputs::check_inputs(plan, observed)?;
        let (cache, completions) = early::take_early(self.ledger, early)?;
        self.workspace.cache = cache;
        self.completions = completions;
        let holds = crate::run::holds::holds(&*self.ledger.read(), goal_id)?;
        let held = plan.file.tasks.iter().map(|t| &t.task_ref).filter(|r| holds.is_held(r)).cloned().collect();
        Ok(Opened { states, held, now_ms })
    }

    /// Look at an earlier revision's operation with that revision's
    /// provider (built for this look, shut down after it) and task rule;
    /// also its task's effect and idempotence then (an effect of `external`
    /// if the task is gone from that plan).
    async fn look_superseded(
        &mut self,
        a: &crate::store::attempts::AttemptRecord,
        goal_left: Duration,
    ) -> Result<(crate::plan::Effect, bool, Box<crate::run::looked::Looked>)> {
        use crate::run::looked::Looked;
        let row = self.ledger.read().revision(&self.scope.goal_id, a.revision)?;
        let file: PlanFile = serde_json::from_str(&row.plan_json).map_err(|e| {
            Error::new(Code::StoreCorrupt, format!("stored plan of revision {} does not parse: {e}", a.revision))
        })?;
        let Some(task) = file.tasks.iter().find(|t| t.task_ref == a.task_ref) else {
            return Ok((a.effect, false, Box::new(Looked::nothing())));
        };
        let Some(spec) = file.providers.get(&task.provider) else {
            return Ok((a.effect, task.idempotent, Box::new(Looked::nothing())));
        };
        let workspace = std::path::PathBuf::from(&row.workspace);
        let looked = self.world.look_superseded((task, spec, &workspace), a, goal_left).await;
        Ok((a.effect, task.idempotent, Box::new(looked)))
    }

    fn say(&mut self, say: Say) {
        let goal = &self.scope.goal_id;
        let update = match &say {
            Say::Began { total, complete } => {
                Update::Began { goal, revision: self.scope.revision, total: *total, complete: *complete }
            }
            Say::Validating(task_ref) => Update::Validating { task_ref },
            Say::Accepting { checks } => Update::Accepting { checks: *checks },
            Say::Stopping { signal, in_flight, groups, grace } => {
                Update::Stopping { signal: *signal, in_flight: *in_flight, groups: *groups, grace: *grace }
            }
            Say::Killing { groups, by_signal } => Update::Killing { groups: *groups, by_signal: *by_signal },
            Say::Note { task_ref, progress, total, message } => {
                Update::Note { task_ref, progress: *progress, total: *total, message: message.as_deref() }
            }
        };
        self.world.say(&update);
    }

    /// A task this run started came to rest: say so (once), with its
    /// failure class if it failed.
    fn ended(&mut self, task_ref: &str, state: TaskState) -> Result<()> {
        let Some(took) = self.world.ended(task_ref) else { return Ok(()) };
        let class = match state {
            TaskState::Failed | TaskState::EffectUnknown => self
                .ledger
                .read()
                .task(&self.scope.goal_id, self.scope.revision, task_ref)?
                .and_then(|t| t.class().and_then(crate::state::FailureClass::parse)),
            _ => None,
        };
        let task = self.scope.task(task_ref)?;
        let took = Duration::from_millis(took.as_millis() as u64);
        self.world.say(&Update::TaskEnded { task_ref, title: &task.title, state, class, took });
        Ok(())
    }
}

/// What is left of this run of work's wall-clock budget
/// (`deadline_seconds` from the start of the command, raises included).
fn goal_left(now_ms: i64, began_ms: i64, seconds: u64) -> Duration {
    let used_ms = (now_ms - began_ms).max(0) as u64;
    Duration::from_secs(seconds).saturating_sub(Duration::from_millis(used_ms))
}
