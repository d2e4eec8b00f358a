//! The run's looks at its workspace: a task's checkpoint (hashing many
//! or large inputs and running context commands off the coordinator's
//! thread), the goal's protected paths around every attempt, a passed
//! attempt's declared outputs, and upstream outputs written in before a
//! task runs. The comparisons are `decide::constraints` and
//! `decide::outputs`; this is the I/O around them.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};

use serde_json::json;

use super::scope::Scope;
use crate::checkpoint::{self, Checkpoint, FileCache};
use crate::decide::constraints::{self, Git};
use crate::decide::declared::{self, Declared};
use crate::decide::looks;
use crate::decide::outputs::{upstream_with_outputs, Bounds};
use crate::error::{Code, Error, Result};
use crate::evidence::{Evidence, PathChange};
use crate::ids::AttemptId;
use crate::plan::{Plan, Task};
use crate::run::constraints::{shadows, starts_process, Guard};
use crate::run::core::Write;
use crate::run::materialize::{self, Wanted};
use crate::run::outputs::{self, Kept};
use crate::run::world::{Job, World};
use crate::state::AttemptState;
use crate::store::events::{Event, EventKind};
use crate::store::outputs::OutputFile;
use crate::store::{Durability, LeaseGuard};

/// The paths and checks a run's attempts are judged by: the goal's
/// constraints (their protected paths with what the plan's checks would
/// load in their place, `decide::shadow`) and the engine's own protected
/// paths, as the workspace holds them now.
pub fn guard(plan: &Plan) -> Guard {
    let protects = plan.goal().constraints.iter().any(|c| c.checked().is_some_and(|c| !c.protect.is_empty()));
    let shadows = if protects { shadows(plan) } else { Vec::new() };
    Guard::of(plan.goal(), &shadows, engine_protected(plan))
}

/// The engine's own protected paths for a run of `plan` in its workspace
/// (the plan file, `.git`, `.engine`), looked up now.
fn engine_protected(plan: &Plan) -> Vec<(String, Vec<String>)> {
    let ws = &plan.workspace;
    let plan_file = plan.source.as_deref().and_then(|p| p.strip_prefix(ws).ok()).and_then(|p| p.to_str());
    let git = match std::fs::symlink_metadata(ws.join(".git")) {
        Ok(m) if m.is_dir() => Git::Folder,
        Ok(_) => Git::File,
        Err(_) => Git::Absent,
    };
    constraints::engine_protected(plan_file, git)
}

/// `f` off the world's coordinator thread (`Err`: why the thread failed).
async fn blocking<T: Send + 'static>(
    world: &mut dyn World,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::result::Result<T, String> {
    let job: Job = Box::new(move || Box::new(f()) as Box<dyn Any + Send>);
    let done = world.off_thread(job).await?;
    done.downcast::<T>().map(|b| *b).map_err(|_| "the thread's answer was not what it was asked".to_string())
}

/// What the driver keeps of the workspace between looks.
pub struct Workspace {
    /// File-state cache for checkpoints; flushed when the run finishes.
    pub cache: FileCache,
    /// The workspace's real path, resolved once when the run starts (the
    /// run holds its workspace: docs/trust.md): a look a task resolves no
    /// path of it again (`Expander::resolved`). `None`: it could not be
    /// resolved then, and each look tries (and says why it cannot).
    root: Option<std::path::PathBuf>,
    /// The files programs resolved to earlier in the run (`run::identity`).
    pub programs: crate::run::identity::Programs,
    guard: Guard,
    /// Where context commands run.
    sandbox: providers::sandbox::Sandbox,
    /// Does any task declare `outputs`? (Else nothing is materialized, at
    /// no cost per task.)
    outputs_declared: bool,
    /// The recorded outputs of upstream completions this run has read
    /// (task ref → the files its completion recorded), so that the tasks
    /// along a chain do not read every ancestor's again: an entry goes when
    /// the run writes anything of its task (a new intent, a state), all of
    /// them at a reuse pass. Never on a shared store, where another worker
    /// may complete a task again.
    upstream: HashMap<String, Vec<OutputFile>>,
    /// The last look (after an attempt, or a baseline), until anything
    /// but a call runs or anything is written in the workspace
    /// (`disturbed`): a later attempt's baseline while every call that
    /// may have written since it is still in flight
    /// (`decide::looks::stands`), instead of another look (one look a
    /// task instead of two, in a chain and beside other tasks alike).
    /// None is kept while validations or constraint checks run.
    last_look: Option<LastLook>,
    /// May a look stand for a later one at all? Only on a store of its own
    /// (no other worker in the workspace) and when every provider's
    /// processes end with their call (command and builtin: no MCP server or
    /// remote service that may write the workspace between two calls).
    keeps_looks: bool,
}

/// A look at the protected paths (with the whole workspace for a task that
/// starts processes: `process`), and the attempts whose processes may have
/// written since it (in flight at it, or sent since).
struct LastLook {
    process: bool,
    look: Checkpoint,
    running: Vec<AttemptId>,
}

impl Workspace {
    pub fn new(scope: &Scope, sandbox: providers::sandbox::Sandbox, guard: Guard) -> Workspace {
        Workspace {
            cache: FileCache::default(),
            root: std::fs::canonicalize(&scope.plan.workspace).ok(),
            programs: crate::run::identity::Programs::default(),
            guard,
            sandbox,
            outputs_declared: scope.plan.file.tasks.iter().any(|t| !t.outputs.is_empty()),
            upstream: HashMap::new(),
            last_look: None,
            keeps_looks: looks::looks_may_stand(scope.plan.file.providers.values()),
        }
    }

    /// Something ran, or may have changed the workspace, since the last
    /// look: it no longer stands for the next.
    pub fn disturbed(&mut self) {
        self.last_look = None;
    }

    /// `attempt`'s call was handed to its provider: its processes may
    /// write from now on, and the last look stands only while it is in
    /// flight (it is judged by its own look after it).
    pub fn sent(&mut self, attempt: AttemptId) {
        if let Some(l) = &mut self.last_look {
            l.running.push(attempt);
        }
    }

    /// Forget what was read of `task_ref`'s completion (`None`: of every task).
    pub fn forget_upstream(&mut self, task_ref: Option<&str>) {
        match task_ref {
            Some(r) => {
                self.upstream.remove(r);
            }
            None => self.upstream.clear(),
        }
    }

    /// Before `w` is written: forget what it may change of a completion
    /// (its task's, or every one for a write that settles or replaces an
    /// attempt by other ways than the run's own intent and receipt).
    pub fn forget_upstream_of(&mut self, w: &Write) {
        if self.upstream.is_empty() {
            return;
        }
        match w {
            Write::TaskState { task_ref, .. } => self.forget_upstream(Some(task_ref)),
            Write::Event { .. }
            | Write::Handle { .. }
            | Write::Dispatched(_)
            | Write::Failed { .. }
            | Write::GoalConstraints(_) => {}
            _ => self.forget_upstream(None),
        }
    }

    pub fn sandbox(&self) -> &providers::sandbox::Sandbox {
        &self.sandbox
    }

    /// A task's checkpoint now. Hashing many or large inputs and running
    /// context commands can take a while: that runs off the coordinator's
    /// thread, so the calls in flight keep reading their providers' output
    /// meanwhile. A checkpoint of a few small files is observed in place
    /// (`checkpoint::observes_quickly`: bounded, and cheaper than the hop).
    pub async fn observe(
        &mut self,
        world: &mut dyn World,
        scope: &Scope<'_>,
        task: &Task,
        context: BTreeMap<String, String>,
    ) -> std::result::Result<Checkpoint, String> {
        let plan = scope.plan;
        let sandbox = self.sandbox.clone();
        if checkpoint::observes_quickly(&plan.workspace, task) {
            let observed = checkpoint::observe_with(
                &mut None,
                &plan.workspace,
                task,
                &plan.file.secrets,
                &sandbox,
                &mut self.cache,
            );
            return observed.map(|o| o.hashed(context));
        }
        let (workspace, secrets) = (plan.workspace.clone(), plan.file.secrets.clone());
        let (task, mut cache) = (task.clone(), std::mem::take(&mut self.cache));
        let observed = blocking(world, move || {
            let observed = checkpoint::observe_with(&mut None, &workspace, &task, &secrets, &sandbox, &mut cache);
            (observed, cache)
        })
        .await;
        match observed {
            Ok((observed, cache)) => {
                self.cache = cache;
                observed.map(|o| o.hashed(context))
            }
            // The cache went with the failed thread: the next observation
            // hashes again, which is only slower.
            Err(e) => Err(format!("observing the inputs failed: {e}")),
        }
    }

    /// The protected paths as they are now, and for a task whose provider
    /// starts processes (`process`) the whole workspace (what its undeclared
    /// writes are judged by): in place when they are a few small literal
    /// files (the plan file, an absent `.engine`: two hops a task saved),
    /// or when nothing else of the run is in flight (`alone`: no call's
    /// output to read meanwhile, so the hop would only wait; in a chain,
    /// a hop a task saved), else off the coordinator's thread (a workspace
    /// or a protected folder may hold many files).
    async fn observe_protected(
        &mut self,
        world: &mut dyn World,
        scope: &Scope<'_>,
        (process, whole, alone): (bool, bool, bool),
    ) -> std::result::Result<Checkpoint, String> {
        let globs = self.guard.globs(process);
        let workspace = &scope.plan.workspace;
        if !whole && checkpoint::few_small_files(workspace, &globs) {
            let expander = expander(self.root.as_deref(), workspace)?;
            return checkpoint::observe_protected_with(expander, workspace, &globs, &mut self.cache);
        }
        if alone {
            return observe_judged((workspace, self.root.as_deref()), &globs, whole, &mut self.cache);
        }
        let (workspace, root, mut cache) = (workspace.clone(), self.root.clone(), std::mem::take(&mut self.cache));
        let observed = blocking(world, move || {
            let cp = observe_judged((&workspace, root.as_deref()), &globs, whole, &mut cache);
            (cp, cache)
        })
        .await;
        match observed {
            Ok((cp, cache)) => {
                self.cache = cache;
                cp
            }
            Err(e) => Err(format!("observing the protected paths failed: {e}")),
        }
    }

    /// The state a new attempt of `task_ref` will be judged against: the
    /// protected paths now, with the paths the task's last judged attempt
    /// changed in violation put back to their state before it
    /// (`decide::constraints::baseline`). `None`: they could not be
    /// observed (the attempt is then judged as not observed).
    pub async fn baseline(
        &mut self,
        world: &mut dyn World,
        ledger: &LeaseGuard,
        scope: &Scope<'_>,
        (task_ref, in_flight): (&str, Option<Vec<AttemptId>>),
    ) -> Result<Option<Checkpoint>> {
        let process = scope.plan.task(task_ref).is_some_and(|t| starts_process(scope.plan.provider_of(t)));
        let kept = self.last_look.as_ref().filter(|l| l.process == process && !ledger.shared());
        // While checks run (`None`), no look stands.
        let now = match kept.filter(|l| in_flight.as_ref().is_some_and(|f| looks::stands(&l.running, f))) {
            Some(l) => l.look.clone(),
            None => match self.observe_protected(world, scope, (process, process, in_flight == Some(vec![]))).await {
                Ok(now) => {
                    self.keep((process, process), &now, in_flight);
                    now
                }
                Err(_) => {
                    self.last_look = None;
                    return Ok(None);
                }
            },
        };
        let earlier = match last_violation(ledger, scope, task_ref)? {
            Some((changes, revision)) => constraints::carried(changes, revision != scope.revision),
            None => Vec::new(),
        };
        let carried = !earlier.is_empty();
        let files = constraints::baseline(now.files, &earlier);
        let (Some(mut judged), Some(task)) = (now.workspace, scope.plan.task(task_ref)) else {
            return Ok(Some(Checkpoint::of(files, BTreeMap::new())));
        };
        // The workspace as the attempt is judged against: the protected
        // paths and the carried violations as `files` has them (without
        // carried ones, the look's own: it saw the protected paths first).
        if carried {
            std::sync::Arc::make_mut(&mut judged).extend(files.iter().map(|(p, d)| (p.clone(), d.clone())));
        }
        let digest = checkpoint::entries_digest(declared::outside_entries(&judged, &own_paths(task)));
        let context = BTreeMap::from([(checkpoint::WORKSPACE_CONTEXT.to_string(), digest)]);
        Ok(Some(Checkpoint { workspace: Some(judged), ..Checkpoint::of(files, context) }))
    }

    /// The protected paths after an attempt (and its validations and the
    /// constraint checks), against the state it was judged against: the
    /// evidence of every change its task may not make, or of why it could
    /// not be judged. Empty when nothing protected changed.
    pub async fn judge_protected(
        &mut self,
        world: &mut dyn World,
        ledger: &LeaseGuard,
        scope: &Scope<'_>,
        (attempt_id, task): (AttemptId, &Task),
        (before, writes, others): (Option<Checkpoint>, bool, Option<Vec<AttemptId>>),
    ) -> Result<Vec<Evidence>> {
        let before = match before {
            Some(cp) => Some(cp),
            None => match ledger.read().attempt(attempt_id)?.protected_at_intent {
                Some(digest) => ledger.read().checkpoint(&digest)?,
                None => None,
            },
        };
        let process = starts_process(scope.plan.provider_of(task));
        let whole = process && writes;
        let alone = others.as_ref().is_some_and(Vec::is_empty);
        let after = self.observe_protected(world, scope, (process, whole, alone)).await;
        // Seen whole where the next baseline would look whole (a task that
        // starts processes): it may stand as a later baseline while the
        // others still run. A look at the protected paths alone (after
        // validations) leaves a kept look as it was: whether that one
        // stands is a matter of what ran since it, not of this look.
        match &after {
            Ok(a) if whole == process => self.keep((process, whole), a, others),
            Ok(_) => {}
            Err(_) => self.last_look = None,
        }
        let not_judged = |message: String| vec![Evidence::ProtectedPathsNotObserved { message }];
        Ok(match (before, after) {
            (None, _) => not_judged(
                "the goal's protected paths were not observed before this attempt, so whether \
                                     it changed them cannot be told"
                    .into(),
            ),
            (_, Err(e)) => {
                not_judged(format!("the goal's protected paths could not be observed after this attempt: {e}"))
            }
            (Some(b), Ok(a)) => {
                let changes =
                    constraints::changes(&b.files, &a.files, &self.guard.protected(process), &task.may_change);
                let mut out = Vec::new();
                if let (true, Some(after)) = (whole, &a.workspace) {
                    out.extend(match (&b.workspace, b.context.get(checkpoint::WORKSPACE_CONTEXT)) {
                        (Some(before), _) => undeclared_writes(scope, task, (before, after), &changes),
                        (None, Some(digest)) => unnamed_writes(task, digest, after),
                        // Recorded before the workspace was kept by its
                        // digest: the stored checkpoint holds it whole.
                        (None, None) => undeclared_writes(scope, task, (&b.files, after), &changes),
                    });
                }
                if !changes.is_empty() {
                    out.insert(0, Evidence::ProtectedPathChanged { changes });
                }
                out
            }
        })
    }

    /// Keep `look` for later baselines, if looks may stand in this run and
    /// no checks run beside it (`running`: `None`).
    fn keep(&mut self, (process, whole): (bool, bool), look: &Checkpoint, running: Option<Vec<AttemptId>>) {
        let stands = looks::look_stands(self.keeps_looks, (process, whole));
        self.last_look = running.filter(|_| stands).map(|running| LastLook { process, look: look.clone(), running });
    }

    /// Read a task's outputs off the coordinator's thread (they may be
    /// large); only for an attempt that passed, of a task that has any.
    pub async fn collect_outputs(world: &mut dyn World, scope: &Scope<'_>, task: &Task) -> Option<Kept> {
        if task.outputs.is_empty() {
            return None;
        }
        let (root, task_ref, patterns) = (scope.plan.workspace.clone(), task.task_ref.clone(), task.outputs.clone());
        let read = blocking(world, move || outputs::collect(&root, &task_ref, &patterns, Bounds::ENGINE)).await;
        Some(read.unwrap_or_else(|e| {
            Kept::Refused(Box::new(Evidence::OutputsNotKept {
                limit: None,
                message: format!("reading the `outputs` of task `{}` failed: {e}", task.task_ref),
            }))
        }))
    }

    /// Before `task_ref` runs: every upstream task's recorded outputs in
    /// this workspace (of two declaring one path, the one that depends on
    /// the other wins); `None`: before the goal's acceptance checks, every
    /// task's outputs. A tampered blob is `STORE_TAMPERED` before anything
    /// is written.
    pub fn materialize(&mut self, ledger: &mut LeaseGuard, scope: &Scope<'_>, task_ref: Option<&str>) -> Result<()> {
        if !self.outputs_declared {
            return Ok(());
        }
        let plan = scope.plan;
        let upstream: Vec<String> = match task_ref {
            Some(r) => {
                upstream_with_outputs(&plan.file.tasks, &plan.index, r).into_iter().map(str::to_string).collect()
            }
            None => {
                let tasks = plan.order.iter().filter_map(|&i| plan.file.tasks.get(i));
                tasks.filter(|t| !t.outputs.is_empty()).map(|t| t.task_ref.clone()).collect()
            }
        };
        let memo = (!ledger.shared()).then_some(&mut self.upstream);
        let written = materialize_from(ledger, scope, &upstream, task_ref, (&mut self.cache, memo));
        if !matches!(written, Ok(0)) {
            self.disturbed();
        }
        written.map(|_| ())
    }
}

/// The protected paths (`globs`) as they are now, with every file of the
/// workspace when `whole`.
fn observe_judged(
    (workspace, root): (&std::path::Path, Option<&std::path::Path>),
    globs: &[String],
    whole: bool,
    cache: &mut FileCache,
) -> std::result::Result<Checkpoint, String> {
    let cp = checkpoint::observe_protected_with(expander(root, workspace)?, workspace, globs, cache)?;
    if !whole {
        return Ok(cp);
    }
    // The protected paths first, as they were just observed: the two
    // looks agree on them.
    let mut files = cp.files.clone();
    checkpoint::observe_workspace(workspace, cache, &mut files)?;
    Ok(Checkpoint { workspace: Some(std::sync::Arc::new(files)), ..cp })
}

/// An `Expander` for a look at `workspace`: under its real path resolved
/// at the run's start (`root`), else resolving it now.
fn expander(
    root: Option<&std::path::Path>,
    workspace: &std::path::Path,
) -> std::result::Result<crate::workspace::Expander, String> {
    match root {
        Some(root) => Ok(crate::workspace::Expander::resolved(root.to_path_buf())),
        None => crate::workspace::Expander::new(workspace),
    }
}

/// A task's own declared paths: what its attempts may write.
fn own_paths(task: &Task) -> Vec<String> {
    task.outputs.iter().chain(&task.may_change).cloned().collect()
}

/// An attempt whose state before is kept only by the digest of the
/// workspace outside its declared paths (`digest`: the engine restarted
/// while it ran): nothing when that part is unchanged; else it wrote
/// something undeclared (or a task beside it did) that cannot be named,
/// and the attempt is not judged clean (default deny: a person looks).
fn unnamed_writes(task: &Task, digest: &str, after: &constraints::Files) -> Option<Evidence> {
    let own = own_paths(task);
    if checkpoint::entries_digest(declared::outside_entries(after, &own)) == digest {
        return None;
    }
    // Stored by an engine that recorded no mode: compared on content.
    if checkpoint::content_digest(declared::outside_entries(after, &own)) == digest {
        return None;
    }
    let message = format!(
        "the workspace outside task `{}`'s declared outputs changed during this attempt, and the engine, \
         restarted since, kept the state before it only by its digest: which files changed cannot be named",
        task.task_ref
    );
    Some(Evidence::ProtectedPathsNotObserved { message })
}

/// The files an attempt of `task` wrote that it does not declare
/// (`decide::declared`), between `before` and `after`, leaving out the
/// protected paths already judged (`changes`): evidence, or none.
fn undeclared_writes(
    scope: &Scope,
    task: &Task,
    (before, after): (&constraints::Files, &constraints::Files),
    changes: &[PathChange],
) -> Option<Evidence> {
    let judged: std::collections::BTreeSet<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    let own = own_paths(task);
    let found = declared::undeclared(before, after, Declared { own: &own, beside: &[] }, &judged);
    if found.changes.is_empty() {
        return None;
    }
    // Only now (rarely): what the tasks that may run beside it declare.
    let plan = scope.plan;
    let beside = declared::beside(&plan.file.tasks, &plan.index, &task.task_ref);
    let found = declared::undeclared(before, after, Declared { own: &own, beside: &beside }, &judged);
    if found.changes.is_empty() {
        return None;
    }
    let outputs = declared::outputs_line(&task.outputs, &found.changes);
    Some(Evidence::UndeclaredWrite { changes: found.changes, more: found.more, outputs })
}

/// The protected paths the task's last judged attempt changed in
/// violation, and that attempt's revision (`None` if it did not).
fn last_violation(
    ledger: &LeaseGuard,
    scope: &Scope,
    task_ref: &str,
) -> Result<Option<(Vec<PathChange>, crate::ids::Revision)>> {
    let read = ledger.read();
    let attempts = read.attempts_of_task(&scope.goal_id, task_ref)?;
    let judged = attempts.iter().rev().find(|a| matches!(a.state, AttemptState::Failed | AttemptState::Succeeded));
    let violated = |rule: &str| rule == "protected_path_changed" || rule == "undeclared_write";
    let Some(a) = judged.filter(|a| a.classification.as_ref().is_some_and(|c| violated(&c.rule))) else {
        return Ok(None);
    };
    let evidence = read.evidence_of_attempt(a.id)?;
    let changes = evidence
        .into_iter()
        .filter_map(|r| match r.evidence {
            Evidence::ProtectedPathChanged { changes } | Evidence::UndeclaredWrite { changes, .. } => Some(changes),
            _ => None,
        })
        .flatten()
        .collect();
    Ok(Some((changes, a.revision)))
}

/// The outputs of `upstream` (in order: a later one wins a path) in this
/// workspace, for `task_ref` (`None`: the goal's checks), and an event
/// saying what was written; the files written. What is there is compared
/// through `cache`; completions read are kept in `memo` (when there is
/// one) for the next task's turn.
fn materialize_from(
    ledger: &mut LeaseGuard,
    scope: &Scope,
    upstream: &[String],
    task_ref: Option<&str>,
    (cache, mut memo): (&mut FileCache, Option<&mut HashMap<String, Vec<OutputFile>>>),
) -> Result<usize> {
    if upstream.is_empty() {
        return Ok(0);
    }
    let (goal_id, revision) = (&scope.goal_id, scope.revision);
    let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
    let read = ledger.read();
    for r in upstream {
        let files = match memo.as_deref().and_then(|m| m.get(r)) {
            Some(files) => files.clone(),
            None => {
                // Not complete (yet): read again at the next turn.
                let Some(attempt) = outputs::completed_by(&*read, goal_id, revision, r)? else { continue };
                let files = read.outputs_of_attempt(attempt)?;
                if let Some(m) = memo.as_deref_mut() {
                    m.insert(r.clone(), files.clone());
                }
                files
            }
        };
        for file in files {
            wanted.insert(file.path.clone(), Wanted { file, from: r.clone() });
        }
    }
    let wanted: Vec<Wanted> = wanted.into_values().collect();
    let done = materialize::materialize(&scope.plan.workspace, &wanted, &|d| read.blob(d), cache);
    drop(read);
    let done = match done {
        Ok(d) => d,
        Err(e) => return Err(refused(ledger, scope, task_ref, e)),
    };
    if done.files == 0 {
        return Ok(0);
    }
    let data = json!({
        "files": done.files, "bytes": done.bytes, "left_alone": done.left_alone, "paths": done.paths,
        "from": upstream, "for": task_ref.unwrap_or("acceptance"),
    });
    ledger.write(Durability::Normal, |tx| {
        let mut e = Event::goal(EventKind::OutputsMaterialized, goal_id, revision, data.clone());
        e.task_ref = task_ref;
        tx.append_event(&e).map(|_| ())
    })?;
    Ok(done.files)
}

/// Say in the ledger why nothing was started, then stop with `e`.
fn refused(ledger: &mut LeaseGuard, scope: &Scope, task_ref: Option<&str>, e: Error) -> Error {
    let data = json!({"code": e.code, "message": e.message, "place": e.place, "why": "outputs_not_materialized"});
    let written = ledger.write(Durability::Normal, |tx| {
        let mut event = Event::goal(EventKind::CallRefused, &scope.goal_id, scope.revision, data.clone());
        event.task_ref = task_ref;
        tx.append_event(&event).map(|_| ())
    });
    match written {
        Ok(()) => e,
        Err(w) if w.code == Code::StaleClaim => w,
        Err(_) => e,
    }
}
