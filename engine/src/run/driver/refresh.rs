//! Are completed tasks still complete? Like a build tool with stale
//! targets: a task whose inputs or tool changed since its validations
//! judged them (or whose upstream runs again) runs again; one whose
//! checkpoint still matches is not touched. External effects stand: they
//! are never re-sent on the strength of a local observation. Every
//! decision is `decide::reuse`'s, inside one snapshot of the ledger; the
//! core writes what went stale. A completion whose upstream runs again is
//! put off (`defer`) when that upstream can cut off: the core decides it
//! once the upstream is complete again (`core::cutoff`). A completion that
//! stands has its recorded outputs in this workspace (`restore`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::{json, Value};

use super::early::Completions;
use super::inputs::FirstLook;
use super::restore;
use super::scope::Scope;
use crate::checkpoint::{self, FileCache};
use crate::decide::outputs::{self, Standing};
use crate::decide::reuse::{self, cutoff, Candidate, Decision, Refusal};
use crate::decide::tools::{self, Inventory};
use crate::error::Result;
use crate::plan::{Effect, Plan, Task};
use crate::run::fresh::weighed;
use crate::run::identity;
use crate::state::TaskState;
use crate::store::{LeaseGuard, LedgerRead};

/// What the reuse pass may take from the run's first look, if nothing ran
/// since: each complete task's expanded inputs, and the completions read.
pub struct Looked {
    pub first_look: Option<FirstLook>,
    pub completions: Option<Completions>,
}

/// What the pass decided: the complete tasks that went stale, each with
/// why (in plan order), and the completions that stand whose outputs are
/// to be written back into this workspace.
pub struct Pass {
    pub stale: Vec<(String, Value)>,
    pub restore: Vec<String>,
}

/// The pass's state over one snapshot of the ledger.
struct Walk<'a, 'p> {
    ledger: &'a dyn LedgerRead,
    scope: &'a Scope<'p>,
    cache: &'a mut FileCache,
    sandbox: &'a providers::sandbox::Sandbox,
    looked: FirstLook,
    expander: Option<crate::workspace::Expander>,
    tool_context: HashMap<&'p str, BTreeMap<String, String>>,
    /// The programs the pass looked up (forgotten when a context command ran).
    programs: identity::Programs,
    /// Tasks that run (or wait) now; of those, the ones put off.
    rerun: HashSet<&'p str>,
    deferred: HashSet<&'p str>,
    /// A person's `--reuse-across-tool-change`.
    across_tool_change: bool,
    /// What each provider's newest answer said of who it is.
    newest: identity::Newest,
    pass: Pass,
}

/// The reuse pass over every complete task, in dependency order.
/// `alone`: tasks a person reruns without their dependants
/// (`engine rerun` without `--downstream`): theirs stand.
pub fn stale(
    ledger: &LeaseGuard,
    scope: &Scope,
    asked: (&[(String, TaskState)], &BTreeMap<String, Inventory>, bool, &BTreeSet<String>),
    (cache, sandbox): (&mut FileCache, &providers::sandbox::Sandbox),
    early: Looked,
) -> Result<Pass> {
    // The first look's expansions, when it made them and nothing ran
    // since (`inputs.rs`): each input resolved once a run.
    let mut looked = early.first_look;
    // The completions read at the run's start, when nothing ran since.
    let mut read_early = early.completions;
    ledger.snapshot(|ledger| {
        let early = (looked.take().unwrap_or_default(), read_early.take());
        stale_in(ledger, scope, asked, (&mut *cache, sandbox), early, Starts::Processes)
    })
}

/// May the reuse pass start a process (a task's context command)?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Starts {
    Processes,
    /// `engine run --dry-run`: a task whose checkpoint needs a context
    /// command is not observed; it is named `{"not_observed": ...}`.
    Nothing,
}

/// `stale`, in one read of the ledger.
pub fn stale_in(
    ledger: &dyn LedgerRead,
    scope: &Scope,
    (states, tools, across_tool_change, alone): (
        &[(String, TaskState)],
        &BTreeMap<String, Inventory>,
        bool,
        &BTreeSet<String>,
    ),
    (cache, sandbox): (&mut FileCache, &providers::sandbox::Sandbox),
    (looked, read_early): (FirstLook, Option<Completions>),
    starts: Starts,
) -> Result<Pass> {
    let plan = scope.plan;
    let states: HashMap<&str, TaskState> = states.iter().map(|(r, s)| (r.as_str(), *s)).collect();
    let tool_context: HashMap<&str, _> =
        plan.file.tasks.iter().map(|t| (t.task_ref.as_str(), tools::context_of(&plan.file, t, tools))).collect();
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    // Every completion of the revision in one read, not five per task.
    let mut completions = match read_early {
        Some(c) => c,
        None => ledger.completions(goal_id, revision)?,
    };
    let mut walk = Walk {
        ledger,
        scope,
        cache,
        sandbox,
        looked,
        // One expander for the pass: the workspace and each folder
        // resolved once, not once per task.
        expander: None,
        tool_context,
        programs: identity::Programs::default(),
        rerun: HashSet::new(),
        deferred: HashSet::new(),
        across_tool_change,
        newest: identity::newest_of(plan, &completions),
        pass: Pass { stale: Vec::new(), restore: Vec::new() },
    };
    for &i in &plan.order {
        let Some(task) = plan.file.tasks.get(i) else { continue };
        let r = task.task_ref.as_str();
        if !states.get(r).is_some_and(|s| s.is_complete()) {
            // Not done: it runs (or waits) now, so what depends on it
            // cannot stand on an older completion — unless a person
            // reruns it alone: its dependants keep theirs.
            if !alone.contains(r) {
                walk.rerun.insert(r);
            }
            continue;
        }
        if task.effect == Effect::External {
            // It stands, with its outputs in this workspace; where the
            // ledger cannot put them here it is stale, and its new call,
            // a repeat of external work, waits for a person's approval.
            walk.outputs_here(task)?;
            continue;
        }
        if starts == Starts::Nothing && !checkpoint::starts_nothing(task) {
            let data = json!({"not_observed": "its checkpoint runs a context command"});
            walk.pass.stale.push((r.to_string(), data));
            continue;
        }
        let done = completions.remove(r);
        walk.task(i, task, done)?;
    }
    Ok(walk.pass)
}

impl<'p> Walk<'_, 'p> {
    /// Decide one complete task (`i`: its place in the plan's tasks).
    fn task(&mut self, i: usize, task: &'p Task, done: Option<crate::store::evidence::CompletionRecord>) -> Result<()> {
        let plan = self.scope.plan;
        let r = task.task_ref.as_str();
        let Some(d) = plan.digests().tasks.get(r) else { return Ok(()) };
        // The completion is of this revision's task, with this provider:
        // its core meaning is the one computed at load.
        let done = done.map(|c| weighed(c, task, d.meaning_core.clone()));
        let upstream = task.depends_on.iter().find(|d| self.rerun.contains(d.as_str())).map(String::as_str);
        // What the ledger adds to its checkpoint: its upstream's outputs.
        let context = match upstream {
            Some(_) => BTreeMap::new(),
            None => identity::upstream_context(self.ledger, (&self.scope.goal_id, self.scope.revision), plan, task)?,
        };
        let recorded = done.as_ref().and_then(|c| c.checkpoint.as_ref());
        let reported = identity::reported_context(plan, task, recorded, &self.newest);
        let candidate =
            Candidate { task, meaning: &d.meaning, meaning_core: &d.meaning_core, dependencies: &d.dependencies };
        let decision = reuse::decide(false, done.as_ref(), &candidate, upstream, || {
            let (secrets, workspace, sandbox) = (&plan.file.secrets, &plan.workspace, self.sandbox);
            let observed = match self.looked.remove(&i) {
                Some(expanded) => {
                    checkpoint::observe_expanded(expanded, workspace, task, secrets, sandbox, self.cache)?
                }
                None => checkpoint::observe_with(&mut self.expander, workspace, task, secrets, sandbox, self.cache)?,
            };
            let tools = self.tool_context.get(r).cloned().unwrap_or_default();
            if !checkpoint::starts_nothing(task) {
                // Its context command ran: it may have replaced a program.
                self.programs.forget();
            }
            let carried = identity::carried(plan, task, (tools, context), (self.cache, &mut self.programs));
            // Hashed once, with every entry the ledger and the tools add.
            let mut extra = carried;
            extra.extend(reported);
            Ok(observed.hashed(extra))
        });
        let refusal = match decision {
            Decision::Run { refusal } => refusal,
            Decision::Reuse { .. } => match self.outputs_here(task)? {
                None => return Ok(()),
                Some(refusal) => refusal,
            },
        };
        if crate::failpoint::fault(crate::failpoint::Fault::KeepChangedTool)
            && matches!(refusal, Refusal::ToolChanged { .. })
        {
            // Planted fault: kept across its tool's change, no act asked.
            return Ok(());
        }
        if self.across_tool_change && matches!(refusal, Refusal::ToolChanged { .. }) {
            // Kept by a person's act (the core writes it, naming them).
            let data = json!({"kept": refusal.code(), "detail": refusal.detail(), "keep": true});
            self.pass.stale.push((r.to_string(), data));
            return Ok(());
        }
        let data = stale_data(plan, task, refusal, (&self.rerun, &mut self.deferred));
        self.pass.stale.push((r.to_string(), data));
        self.rerun.insert(r);
        Ok(())
    }

    /// A completion that stands has its recorded outputs in this
    /// workspace: there already, or written back once the pass has decided;
    /// else it is stale (`OUTPUTS_MISSING`, returned for a local task,
    /// recorded here for an external one) and the task runs again.
    fn outputs_here(&mut self, task: &'p Task) -> Result<Option<Refusal>> {
        let r = task.task_ref.as_str();
        match outputs::standing(restore::here(self.ledger, self.scope, task, self.cache)?, task.effect) {
            Standing::Stands { restore: write_back } => {
                if write_back {
                    self.pass.restore.push(r.to_string());
                }
                Ok(None)
            }
            Standing::Stale(refusal) => Ok(Some(refusal)),
            Standing::StaleAsIs(refusal) => {
                self.pass.stale.push((r.to_string(), json!({"stale": refusal.code(), "detail": refusal.detail()})));
                self.rerun.insert(r);
                Ok(None)
            }
        }
    }
}

/// What the `completion_stale` event of `task` says; `defer`: decided
/// when its upstream is complete again (early cutoff, `core::cutoff`),
/// when every upstream that runs again can cut off or was put off itself.
fn stale_data<'p>(
    plan: &'p Plan,
    task: &'p Task,
    refusal: Refusal,
    (rerun, deferred): (&HashSet<&str>, &mut HashSet<&'p str>),
) -> Value {
    let refusal = match cutoff::named(refusal) {
        refusal @ Refusal::UpstreamNotReused { why: None, .. } => match cutoff::no_cutoff(
            task.depends_on.iter().filter(|d| rerun.contains(d.as_str()) && !deferred.contains(d.as_str())),
            |r| plan.task(r),
        ) {
            None => {
                deferred.insert(task.task_ref.as_str());
                return json!({"stale": refusal.code(), "detail": refusal.detail(), "defer": true});
            }
            Some(refusal) => refusal,
        },
        refusal => refusal,
    };
    json!({"stale": refusal.code(), "detail": refusal.detail()})
}
