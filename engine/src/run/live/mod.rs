//! The real world of a run: provider calls and checks as tokio tasks on
//! the run's current-thread runtime, reporting back over one bounded
//! channel, so the driver records everything in one place, in the order it
//! happened; a person's stop signals, the process groups they reach, the
//! stop's timer; the clock; the progress a person watches.

mod checks;
mod look;
mod stop;
mod tools;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use providers::sandbox::Record;
use providers::{Call, Provider};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use super::asked::Repair;
use super::check::{CheckRun, CheckSpec};
use super::core::{Level, Msg, Sending, StopWait, Validating, Wait, Wake};
use super::looked::Looked;
use super::progress::{Sink, Update};
use super::provider;
use super::sandboxes::Sandboxes;
use super::world::{Fut, Job, World};
use crate::decide::tools::Inventory;
use crate::ids::{AttemptId, GoalId, OperationId};
use crate::limits::{OUTPUT_BYTES_MAX, RUN_MESSAGES_MAX, WORKER_POLL};
use crate::plan::{Plan, ProviderSpec, Task};
use crate::signals::{self, StopSignal};
use crate::store::attempts::AttemptRecord;
pub use stop::Groups;
pub use tools::list_now;
pub use tools::reusable_servers;

/// Constraint checks, then acceptance checks, as they ran.
type Accepted = (Vec<CheckRun>, Vec<CheckRun>);

pub struct Live<'p> {
    plan: &'p Plan,
    goal_id: GoalId,
    providers: HashMap<String, Arc<dyn Provider>>,
    /// Secret values (from the variables the plan names), for redaction.
    secrets: Vec<String>,
    /// Where each process the run starts may write.
    sandboxes: Sandboxes,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    /// The process groups of the calls and checks in flight, which a
    /// person's stop reaches.
    groups: Groups,
    /// Stop signals already acted on.
    seen: usize,
    /// The stop's timer (SIGKILL after the grace; give up after the drain).
    timer: Option<Instant>,
    progress: Arc<dyn Sink>,
    /// When each task this run started began, for its duration.
    started: HashMap<String, std::time::Instant>,
    /// The task running each attempt's call or validations.
    work: HashMap<AttemptId, AbortHandle>,
    accept: Option<JoinHandle<Accepted>>,
}

impl<'p> Live<'p> {
    pub fn new(
        plan: &'p Plan,
        sandboxes: Sandboxes,
        progress: Arc<dyn Sink>,
        person: Option<Arc<dyn providers::Person>>,
    ) -> crate::error::Result<Live<'p>> {
        let providers = provider::build_all(&plan.file.providers, &plan.workspace, person)?;
        let secrets =
            plan.file.secrets.iter().filter_map(|name| std::env::var(name).ok()).filter(|v| !v.is_empty()).collect();
        let (tx, rx) = mpsc::channel(RUN_MESSAGES_MAX);
        Ok(Live {
            plan,
            goal_id: GoalId::new(&plan.goal().id),
            providers,
            secrets,
            sandboxes,
            tx,
            rx,
            groups: Groups::default(),
            seen: 0,
            timer: None,
            progress,
            started: HashMap::new(),
            work: HashMap::new(),
            accept: None,
        })
    }

    /// The call as the provider receives it. An agent gets, on stdin, the
    /// goal, the task, its identity, and on a repair the classified failure
    /// evidence and the person's instruction.
    fn call_for(&self, task: &Task, operation_id: &OperationId, try_no: u32, repair: Option<&Repair>) -> Call {
        let stdin = match self.plan.provider_of(task) {
            ProviderSpec::Command { protocol: Some(_), .. } => {
                let doc = provider::agent_request(self.plan.goal(), task, operation_id, try_no, repair);
                serde_json::to_vec(&doc).ok()
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
            sandbox: self.sandboxes.task(task),
            traceparent: None,
        }
    }

    /// Where checks run for `operation_id`, in `sandbox`.
    fn place(&self, operation_id: String, sandbox: providers::sandbox::Sandbox) -> checks::Place {
        checks::Place {
            workspace: self.plan.workspace.clone(),
            operation_id,
            secrets: self.secrets.clone(),
            groups: self.groups.clone(),
            sandbox,
        }
    }
}

impl World for Live<'_> {
    fn now_ms(&self) -> i64 {
        crate::clock::now_ms()
    }

    fn sandbox_record(&self, task: &Task) -> Record {
        self.sandboxes.task(task).record()
    }

    fn off_thread(&mut self, job: Job) -> Fut<'_, std::result::Result<Box<dyn std::any::Any + Send>, String>> {
        Box::pin(async move { tokio::task::spawn_blocking(job).await.map_err(|e| e.to_string()) })
    }

    fn list_tools<'a>(
        &'a mut self,
        named: &'a BTreeSet<String>,
    ) -> Fut<'a, BTreeMap<String, std::result::Result<Inventory, String>>> {
        let asked: Vec<(String, Arc<dyn Provider>)> =
            named.iter().filter_map(|n| self.providers.get(n).cloned().map(|p| (n.clone(), p))).collect();
        let call = tools::listing_call(&self.plan.workspace, &self.secrets, &self.sandboxes);
        Box::pin(async move { tools::inventories(&asked, &call, &self.sandboxes).await })
    }

    fn send(&mut self, s: &Sending, traceparent: Option<&str>) {
        let Some(task) = self.plan.task(&s.task_ref) else { return };
        let Some(provider) = self.providers.get(&task.provider).cloned() else { return };
        let mut call = self.call_for(task, &s.operation_id, s.try_no as u32, s.repair.as_ref());
        call.traceparent = traceparent.map(str::to_owned);
        if let Some(answers) = &s.answers {
            // A person's answers (`engine answer`), read by the MCP provider.
            if let Some(keys) = call.request.as_object_mut() {
                keys.insert("answers".into(), (**answers).clone());
            }
        }
        let (tx, groups, attempt_id) = (self.tx.clone(), self.groups.clone(), s.attempt_id);
        let work = tokio::spawn(async move {
            let forward = |progress| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(Msg::Progress { attempt_id, progress }).await;
                }
            };
            let (outcome, level) = stop::watched(provider.as_ref(), &call, &groups, forward).await;
            let _ = tx.send(Msg::Finished { attempt_id, outcome: Box::new(outcome), level }).await;
        });
        self.work.insert(attempt_id, work.abort_handle());
        self.started.insert(s.task_ref.clone(), std::time::Instant::now());
        self.progress.update(&Update::TaskStarted { task_ref: &s.task_ref, title: &task.title, try_no: s.try_no });
    }

    fn look<'a>(&'a mut self, attempt: &'a AttemptRecord, ask_handle: bool, goal_left: Duration) -> Fut<'a, Looked> {
        let found = self.plan.task(&attempt.task_ref).and_then(|t| Some((t, self.providers.get(&t.provider)?.clone())));
        let Some((task, provider)) = found else { return Box::pin(async { Looked::nothing() }) };
        let mut call = self.call_for(task, &attempt.operation_id, attempt.try_no as u32, None);
        call.timeout = look::resume_wait(call.timeout, attempt.dispatched_at_ms, goal_left, crate::clock::now_ms());
        let handle = attempt.handle.as_ref().filter(|_| ask_handle);
        Box::pin(async move { look::look(provider.as_ref(), &call, handle, task.observe.as_deref()).await })
    }

    fn look_superseded<'a>(
        &'a mut self,
        (task, spec, workspace): (&'a Task, &'a ProviderSpec, &'a Path),
        a: &'a AttemptRecord,
        goal_left: Duration,
    ) -> Fut<'a, Looked> {
        // A provider that no longer builds (its CA file gone) cannot look.
        let Ok(provider) = crate::plan::adapters::build(&task.provider, spec, workspace) else {
            return Box::pin(async { Looked::nothing() });
        };
        let call = Call {
            operation_id: a.operation_id.to_string(),
            try_no: a.try_no as u32,
            request: task.action.clone(),
            workspace: workspace.to_path_buf(),
            timeout: look::resume_wait(
                task.timeout_seconds.map(Duration::from_secs),
                a.dispatched_at_ms,
                goal_left,
                crate::clock::now_ms(),
            ),
            output_bytes_max: OUTPUT_BYTES_MAX,
            stdin: None,
            env: Vec::new(),
            secrets: self.secrets.clone(),
            // That revision's provider, confined as this run confines the
            // provider of that name (or as its checks are, when it has none).
            sandbox: self.sandboxes.task(task),
            traceparent: None,
        };
        Box::pin(async move {
            let looked = look::look(provider.as_ref(), &call, a.handle.as_ref(), task.observe.as_deref()).await;
            provider.shutdown().await;
            looked
        })
    }

    fn cancel(&mut self, attempt: &AttemptRecord) {
        let Some(task) = self.plan.task(&attempt.task_ref) else { return };
        let Some(provider) = self.providers.get(&task.provider).cloned() else { return };
        let call = self.call_for(task, &attempt.operation_id, attempt.try_no as u32, None);
        let Some(handle) = attempt.handle.clone() else { return };
        tokio::spawn(async move {
            // The provider's answer arrives as the call's own outcome; a
            // provider that cannot cancel leaves the call to the grace.
            if let Some(fut) = provider.cancel(&call, &handle) {
                fut.await;
            }
        });
    }

    fn abort(&mut self, attempt_id: AttemptId) {
        if let Some(work) = self.work.remove(&attempt_id) {
            work.abort();
        }
    }

    fn validate(&mut self, v: Validating) {
        let Some(task) = self.plan.task(&v.task_ref) else { return };
        let operation_id = self.plan.digests().tasks.get(&v.task_ref).map_or("", |d| d.operation_id.as_str());
        // The task's validations in its provider's sandbox; the goal's
        // constraint checks in the one acceptance checks run in.
        let at = self.place(operation_id.to_string(), self.sandboxes.validation(task));
        let at_goal = self.place(operation_id.to_string(), self.sandboxes.checks());
        let (tx, attempt_id) = (self.tx.clone(), v.attempt_id);
        let (checks, constraint_checks) = (v.checks, v.constraint_checks);
        let work = tokio::spawn(async move {
            let runs = checks::run_checks(checks, &at, OUTPUT_BYTES_MAX).await;
            let constraint_runs = checks::run_checks(constraint_checks, &at_goal, OUTPUT_BYTES_MAX).await;
            let _ = tx.send(Msg::Validated { attempt_id, runs, constraint_runs }).await;
        });
        self.work.insert(attempt_id, work.abort_handle());
    }

    fn accept(&mut self, constraint_checks: Vec<CheckSpec>, checks: Vec<CheckSpec>) {
        let at_constraints = self.place(format!("constraints:{}", self.goal_id), self.sandboxes.checks());
        let at = self.place(format!("acceptance:{}", self.goal_id), self.sandboxes.checks());
        self.accept = Some(tokio::spawn(async move {
            let constraint_runs = checks::run_checks(constraint_checks, &at_constraints, OUTPUT_BYTES_MAX).await;
            (constraint_runs, checks::run_checks(checks, &at, OUTPUT_BYTES_MAX).await)
        }));
    }

    fn abort_accept(&mut self) {
        if let Some(work) = self.accept.take() {
            work.abort();
        }
    }

    fn wait(&mut self, w: Wait) -> Fut<'_, Wake> {
        let (seen, timer) = (self.seen, self.timer);
        let Live { rx, accept, .. } = self;
        Box::pin(async move {
            let signalled = async {
                match w.stop {
                    StopWait::Signal | StopWait::SignalOrTimer => signals::beyond(seen).await,
                    _ => std::future::pending().await,
                }
            };
            let timed = async {
                match (w.stop, timer) {
                    (StopWait::SignalOrTimer | StopWait::Timer, Some(at)) => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            let accepted = async {
                match accept.as_mut() {
                    Some(work) if w.accepted => work.await.ok(),
                    _ => std::future::pending().await,
                }
            };
            let wake = tokio::select! {
                msg = rx.recv(), if w.messages => msg.map_or(Wake::Closed, Wake::Message),
                runs = accepted => Wake::Accepted(runs),
                _ = signalled => Wake::Signal(signals::received().unwrap_or(StopSignal::Interrupt)),
                _ = timed => Wake::Timer,
                _ = tokio::time::sleep(WORKER_POLL), if w.poll => Wake::Poll,
            };
            if matches!(wake, Wake::Accepted(_)) {
                // Ended: never polled again.
                *accept = None;
            }
            wake
        })
    }

    fn try_message(&mut self) -> Option<Msg> {
        self.rx.try_recv().ok()
    }

    fn signal_pending(&mut self) -> Option<StopSignal> {
        (signals::count() > self.seen).then(|| signals::received().unwrap_or(StopSignal::Interrupt))
    }

    fn signal_groups(&mut self, level: Level, timer: Option<Duration>) -> usize {
        self.seen = signals::count();
        self.timer = timer.map(|t| Instant::now() + t);
        self.groups.signal_all(level)
    }

    fn say(&mut self, update: &Update) {
        self.progress.update(update);
    }

    fn ended(&mut self, task_ref: &str) -> Option<Duration> {
        self.started.remove(task_ref).map(|began| began.elapsed())
    }

    fn crashpoint(&mut self, name: &'static str) {
        crate::failpoint::hit(name);
    }

    fn shutdown(&mut self) -> Fut<'_, ()> {
        Box::pin(async move { provider::shutdown_all(&self.providers).await })
    }
}
