//! The simulated world: providers that take a call and, as the seed
//! says, do its effect and answer, fail, refuse it before dispatch, lose
//! the answer after the effect or before it, answer without the effect, or
//! take longer than the task's deadline; an MCP server whose tools list
//! may not be read; checks that pass or fail; a
//! person's stop signal; and one clock, moved only here. It keeps the
//! truth the engine can only observe — which calls each provider received
//! and which effects happened — and outlives every engine process: a call
//! a dead engine sent still has its effect, its answer goes nowhere.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use providers::observe::{Decider, Decision, Verdict};
use providers::sandbox::{Record, Status};
use providers::{Captured, ExitStatus, Handle, HttpReceipt, LostReason, McpReceipt, NotDispatched, NotDispatchedKind};
use providers::{Outcome, ServerInfo, Tool};
use providers::{Progress, ReadBack, Receipt};
use serde_json::json;

use super::checks::Checker;
use super::plan::Traits;
use super::rng::Rng;
use crate::decide::in_doubt;
use crate::decide::tools::Inventory;
use crate::evidence::HandleFound;
use crate::ids::AttemptId;
use crate::plan::{Plan, ProviderSpec, Task};
use crate::run::check::{CheckRun, CheckSpec};
use crate::run::core::{Level, Msg, Sending, StopWait, Validating, Wait, Wake};
use crate::run::looked::Looked;
use crate::run::progress::Update;
use crate::run::world::{Fut, Job, World};
use crate::state::StopSignal;
use crate::store::attempts::AttemptRecord;

/// Something due at a moment of the simulation.
enum Due {
    /// For engine process `process` (dropped if it died).
    Msg {
        process: u64,
        msg: Msg,
    },
    Accepted {
        process: u64,
        runs: (Vec<CheckRun>, Vec<CheckRun>),
    },
    /// At a provider: an operation's effect happens.
    Effect {
        op: String,
    },
}

/// A call as its provider lives it.
struct Call {
    /// When the provider is done with it, and what it answers then.
    done_at: i64,
    receipt: Option<Receipt>,
}

/// One call a provider received.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub op: String,
    pub try_no: i64,
    pub attempt: AttemptId,
    pub task_ref: String,
    /// A person's answers the call carries (`engine answer`), as sent.
    pub answers: Option<serde_json::Value>,
}

/// How a provider takes one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Ok,
    Fails,
    Refused,
    LostAfterEffect,
    LostBeforeEffect,
    AnswerWithoutEffect,
    Slow,
}

/// Everything outside the engine, for one seed.
pub struct Universe {
    pub rng: Rng,
    now_ms: i64,
    seq: u64,
    due: BTreeMap<(i64, u64), Due>,
    /// The engine process running now (each command is one).
    pub process: u64,
    pub traits: BTreeMap<String, Traits>,
    /// Every call the engine handed to a provider, and those that reached it.
    pub sends: Vec<Delivery>,
    pub deliveries: Vec<Delivery>,
    /// Effects that happened, by operation.
    pub effects: BTreeMap<String, u32>,
    calls: BTreeMap<(String, i64), Call>,
    started: BTreeMap<String, i64>,
    /// The MCP servers whose tools this engine process read (`true`) or
    /// asked for and could not read (`false`).
    listed: BTreeMap<String, bool>,
    /// A person's stop signal for this process, and whether it was acted on.
    signal_at: Option<i64>,
    /// Which signal the person sends (SIGINT, SIGTERM or SIGHUP).
    signal: StopSignal,
    signal_acted: bool,
    timer: Option<i64>,
    pub checker: Checker,
    /// What happened, most recent last, for a failure's story.
    pub trace: Vec<String>,
    /// The seed's folder, as the story leaves it out.
    pub folder: String,
    /// The simulated HTTP service's version, named in each answer
    /// (`X-Sim-Version`); the session moves it on now and then between
    /// runs, and `moves` (its own draws) now and then between two calls.
    pub service_version: u64,
    pub moves: Option<Rng>,
    /// The providers' hands on the workspace's files (`files`).
    pub files: Option<super::files::Writer>,
}

pub type Shared = Rc<RefCell<Universe>>;

const TRACE_LINES_MAX: usize = 400;
/// In a hundred HTTP answers, how many come from a service that has just
/// moved to a new version.
const SERVICE_MOVES_PERCENT: u64 = 5;

impl Universe {
    pub fn new(rng: Rng, now_ms: i64, traits: BTreeMap<String, Traits>, checker: Checker) -> Universe {
        crate::clock::sim::set(Some(now_ms));
        Universe {
            rng,
            now_ms,
            seq: 0,
            due: BTreeMap::new(),
            process: 0,
            traits,
            sends: Vec::new(),
            deliveries: Vec::new(),
            effects: BTreeMap::new(),
            calls: BTreeMap::new(),
            started: BTreeMap::new(),
            listed: BTreeMap::new(),
            signal_at: None,
            signal: StopSignal::Interrupt,
            signal_acted: false,
            timer: None,
            checker,
            trace: Vec::new(),
            folder: String::new(),
            service_version: 1,
            moves: None,
            files: None,
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    pub fn note(&mut self, line: String) {
        if self.trace.len() >= TRACE_LINES_MAX {
            self.trace.remove(0);
        }
        // The seed's folder differs from run to run; the story does not.
        let line = if self.folder.is_empty() { line } else { line.replace(&self.folder, "SEED") };
        self.trace.push(format!("{:>8} {line}", self.now_ms - super::EPOCH_MS));
    }

    /// Time passes to `t`: the effects due by then happen; messages for
    /// processes that are gone are dropped (the live one's are kept for
    /// its `wait`).
    pub fn advance_to(&mut self, t: i64) {
        let keys: Vec<(i64, u64)> = self.due.range(..(t + 1, 0)).map(|(k, _)| *k).collect();
        let process = self.process;
        for key in keys {
            let live = matches!(self.due.get(&key),
                Some(Due::Msg { process: p, .. } | Due::Accepted { process: p, .. }) if *p == process);
            if live {
                continue;
            }
            if let Some(Due::Effect { op }) = self.due.remove(&key) {
                self.now_ms = self.now_ms.max(key.0);
                *self.effects.entry(op.clone()).or_default() += 1;
                self.note(format!("effect of {op}"));
            }
        }
        self.now_ms = self.now_ms.max(t);
        crate::clock::sim::set(Some(self.now_ms));
    }

    /// A new engine process: nothing of the last one is waited for; a
    /// person may stop this one (`signal`).
    pub fn begin_process(&mut self, signal: bool) {
        self.process += 1;
        self.started.clear();
        self.listed.clear();
        self.timer = None;
        self.signal_acted = false;
        self.signal_at = signal.then(|| self.now_ms + self.rng.range(0, 400) as i64);
        if signal {
            self.signal =
                [StopSignal::Interrupt, StopSignal::Terminate, StopSignal::Hangup][self.rng.below(3) as usize];
        }
        let process = self.process;
        self.due.retain(
            |_, d| !matches!(d, Due::Msg { process: p, .. } | Due::Accepted { process: p, .. } if *p != process),
        );
    }

    fn schedule(&mut self, at: i64, due: Due) {
        self.seq += 1;
        self.due.insert((at.max(self.now_ms), self.seq), due);
    }

    /// A call reaches its provider.
    fn deliver(&mut self, s: &Sending) {
        let traits = self.traits.get(&s.task_ref).cloned();
        let Some(traits) = traits else { return };
        let now = self.now_ms;
        let behaviour = self.behaviour(&traits);
        self.check_delivery(s, &traits, behaviour);
        let (process, attempt_id, op) = (self.process, s.attempt_id, s.operation_id.to_string());
        let msg = |progress| Due::Msg { process, msg: Msg::Progress { attempt_id, progress } };
        if behaviour == Behaviour::Refused {
            let nd = NotDispatched { kind: NotDispatchedKind::ConnectionRefused, message: "simulated: refused".into() };
            let outcome = Outcome::NotDispatched(nd);
            self.schedule(
                now + 1,
                Due::Msg { process, msg: Msg::Finished { attempt_id, outcome: Box::new(outcome), level: Level::None } },
            );
            self.calls.insert((op, s.try_no), Call { done_at: now + 1, receipt: None });
            return;
        }
        self.schedule(now + 1, msg(Progress::Dispatched { detail: "simulated: request written".into() }));
        if traits.handles {
            let handle = Handle::McpTask { task_id: format!("sim-{op}-{}", s.try_no), session: None };
            self.schedule(now + 2, msg(Progress::Handle { handle, detail: "simulated: task accepted".into() }));
        }
        let latency = match behaviour {
            Behaviour::Slow => self.rng.range(1_000, 6_000) as i64,
            _ => self.rng.range(5, 300) as i64,
        };
        let effect_at = now + self.rng.range(3, latency.max(4) as u64) as i64;
        // Now and then an MCP server asks a person first (never on a call
        // that carries a person's answer): no effect, a question.
        let asks = traits.mcp && behaviour == Behaviour::Ok && s.answers.is_none() && self.rng.chance(10);
        if asks {
            self.note(format!("{} asks a person for input", s.task_ref));
        }
        if !asks && matches!(behaviour, Behaviour::Ok | Behaviour::LostAfterEffect | Behaviour::Slow) {
            self.schedule(effect_at, Due::Effect { op: op.clone() });
            // Its output is written as it takes the call (`files`).
            if let Some(w) = self.files.as_mut().and_then(|f| f.write(&s.task_ref, &traits)) {
                self.note(format!("{} writes {w}", s.task_ref));
            }
        }
        let receipt = self.receipt(&traits, behaviour, asks, latency);
        let deadline = traits.timeout_ms.filter(|&t| t < latency);
        let (at, outcome) = finished(behaviour, deadline, (now, latency), receipt.clone());
        let answer =
            matches!(behaviour, Behaviour::Ok | Behaviour::Fails | Behaviour::AnswerWithoutEffect | Behaviour::Slow)
                .then_some(receipt);
        self.calls.insert((op, s.try_no), Call { done_at: now + latency, receipt: answer });
        self.schedule(
            at,
            Due::Msg { process, msg: Msg::Finished { attempt_id, outcome: Box::new(outcome), level: Level::None } },
        );
    }

    /// How the provider treats this call: as it should, or (as often as
    /// the task is flaky) one of the ways a call goes wrong.
    fn behaviour(&mut self, traits: &Traits) -> Behaviour {
        if self.rng.chance(traits.flaky) {
            use Behaviour::*;
            [Fails, Refused, LostAfterEffect, LostBeforeEffect, AnswerWithoutEffect, Slow]
                [self.rng.weighted(&[4, 2, 4, 3, 2, 3])]
        } else {
            Behaviour::Ok
        }
    }

    /// Every send is checked; only one that reached its provider (not
    /// refused before a byte left) counts as a delivery.
    fn check_delivery(&mut self, s: &Sending, traits: &Traits, behaviour: Behaviour) {
        let delivery = Delivery {
            op: s.operation_id.to_string(),
            try_no: s.try_no,
            attempt: s.attempt_id,
            task_ref: s.task_ref.clone(),
            answers: s.answers.as_deref().cloned(),
        };
        let listed = traits.mcp.then(|| self.listed.get("tools").copied().unwrap_or(false));
        let findings = self.checker.delivered(&delivery, (&self.sends, &self.deliveries), traits, listed);
        for f in findings {
            self.note(format!("FINDING {f}"));
            self.checker.findings.push(f);
        }
        self.sends.push(delivery.clone());
        if behaviour != Behaviour::Refused {
            self.deliveries.push(delivery);
        }
        self.note(format!("{} try {} ({}) reaches its provider: {behaviour:?}", s.task_ref, s.try_no, s.operation_id));
    }

    /// The provider's answer: a question for a person, a tool's result, or
    /// an HTTP status (a 2xx when it did the work).
    fn receipt(&mut self, traits: &Traits, behaviour: Behaviour, asks: bool, latency: i64) -> Receipt {
        let ok = matches!(behaviour, Behaviour::Ok | Behaviour::AnswerWithoutEffect | Behaviour::Slow);
        match traits.mcp {
            true if asks => asking(latency),
            true => self.tool_answer(ok, latency),
            false => {
                let status = if ok { 200 } else { [500, 503, 409][self.rng.below(3) as usize] };
                if self.moves.as_mut().is_some_and(|m| m.chance(SERVICE_MOVES_PERCENT)) {
                    self.service_version += 1;
                    self.note(format!("the service moves to version v{} as it answers", self.service_version));
                }
                Receipt::Http(HttpReceipt {
                    status,
                    retry_after_seconds: None,
                    body: captured(&json!({"simulated": status}).to_string()),
                    duration_ms: latency as u64,
                    body_cut: None,
                    version: Some(format!("v{}", self.service_version)),
                })
            }
        }
    }

    /// An MCP tool's answer: its result, or a tool error, or a result that
    /// does not match the tool's `outputSchema`.
    fn tool_answer(&mut self, ok: bool, latency: i64) -> Receipt {
        let (tool_error, output_invalid) = match (ok, self.rng.chance(50)) {
            (true, _) => (None, None),
            (false, true) => (Some("simulated: the tool failed".to_string()), None),
            (false, false) => (None, Some("$.state: simulated: not one of the declared values".to_string())),
        };
        Receipt::Mcp(McpReceipt {
            result: captured(&json!({"structuredContent": {"simulated": ok}}).to_string()),
            tool_error,
            stderr: captured(""),
            http_status: None,
            retry_after_seconds: None,
            duration_ms: latency as u64,
            output_invalid,
            // The simulated servers ask no person anything (yet).
            input: None,
            step_up_scope: None,
        })
    }

    /// The tools of the MCP servers `named`, as this process reads them:
    /// now and then a server that cannot be read.
    fn list_tools(&mut self, named: &BTreeSet<String>) -> BTreeMap<String, std::result::Result<Inventory, String>> {
        let mut out = BTreeMap::new();
        for name in named {
            let listed = match self.rng.chance(15) {
                true => Err("simulated: the server closed its stdio before answering tools/list".to_string()),
                false => Ok(Inventory::of(&providers::Inventory {
                    server: Some(ServerInfo { name: "sim-tools".into(), version: "1".into() }),
                    protocol: "2025-11-25".into(),
                    tools: vec![Tool {
                        name: "act".into(),
                        input_schema: json!({"type": "object"}),
                        output_schema: None,
                        annotations: None,
                    }],
                })),
            };
            self.note(format!("tools/list of {name}: {}", if listed.is_ok() { "read" } else { "unreadable" }));
            self.listed.insert(name.clone(), listed.is_ok());
            out.insert(name.clone(), listed);
        }
        out
    }

    /// What looking at an attempt finds, from the truth.
    fn look(&mut self, a: &AttemptRecord, traits: Option<Traits>, ask_handle: bool) -> Looked {
        let Some(traits) = traits else { return Looked::nothing() };
        let op = a.operation_id.to_string();
        let mut by_handle = None;
        if let (true, true, Some(h)) = (ask_handle, traits.handles, a.handle.clone()) {
            match self.calls.get(&(op.clone(), a.try_no)) {
                Some(c) if c.done_at <= self.now_ms && c.receipt.is_some() => {
                    let words = "simulated: the task ended; its answer is the receipt".to_string();
                    return Looked {
                        observed: in_doubt::Observed::Answered,
                        answer: c.receipt.clone(),
                        by_handle: Some((h, HandleFound::Answered, words)),
                        read_back: None,
                    };
                }
                Some(c) if c.done_at > self.now_ms => {
                    by_handle = Some((h, HandleFound::Running, "simulated: still working".to_string()))
                }
                _ => by_handle = Some((h, HandleFound::Unknown, "simulated: not known".to_string())),
            }
        }
        let read_back = traits.observable.then(|| {
            let request = json!({"method": "GET", "url": format!("http://127.0.0.1:9/sim/{op}")});
            if self.rng.chance(10) {
                return ReadBack::failed(request, serde_json::Value::Null, "simulated: no answer".into());
            }
            let present = self.effects.get(&op).is_some_and(|&n| n > 0);
            let (verdict, decider, status) = match present {
                true => (Verdict::Present, Decider::PresentIf, 200),
                false => (Verdict::Absent, Decider::AbsentIf, 404),
            };
            let matched = vec![format!("status {status}")];
            ReadBack::decided(request, json!({"status": status}), Decision { verdict, decider, matched })
        });
        let observed = in_doubt::looked(by_handle.as_ref().map(|b| b.1), read_back.as_ref().map(|r| r.verdict));
        Looked { observed, answer: None, by_handle, read_back }
    }

    /// Checks' results, as the seed says.
    fn check_runs(&mut self, specs: Vec<CheckSpec>, passes: u64) -> Vec<CheckRun> {
        specs
            .into_iter()
            .map(|spec| {
                let code = if self.rng.chance(passes) { spec.expect_exit } else { spec.expect_exit + 1 };
                let mut run = CheckRun::empty(spec, None, None);
                run.exit = Some(ExitStatus::Code { code });
                run
            })
            .collect()
    }

    /// The next thing `w` listens for, the clock moved to it.
    fn wait(&mut self, w: Wait) -> Wake {
        let (signal, timer) = match w.stop {
            StopWait::Signal => (true, false),
            StopWait::SignalOrTimer => (true, true),
            StopWait::Timer => (false, true),
            StopWait::Nothing => (false, false),
        };
        loop {
            let process = self.process;
            let next = self.due.iter().find_map(|(&(at, seq), d)| match d {
                Due::Effect { .. } => Some((at, seq)),
                Due::Msg { process: p, .. } if *p == process && w.messages => Some((at, seq)),
                Due::Accepted { process: p, .. } if *p == process && w.accepted => Some((at, seq)),
                _ => None,
            });
            let signal_at = self.signal_at.filter(|_| signal && !self.signal_acted);
            let timer_at = self.timer.filter(|_| timer);
            let stop_at = [signal_at, timer_at].into_iter().flatten().min();
            let take_due = match (next, stop_at) {
                (Some((at, _)), Some(stop)) => at <= stop,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if let (true, Some((at, seq))) = (take_due, next) {
                self.now_ms = self.now_ms.max(at);
                crate::clock::sim::set(Some(self.now_ms));
                match self.due.remove(&(at, seq)) {
                    Some(Due::Effect { op }) => {
                        *self.effects.entry(op.clone()).or_default() += 1;
                        self.note(format!("effect of {op}"));
                    }
                    Some(Due::Msg { msg, .. }) => return Wake::Message(msg),
                    Some(Due::Accepted { runs, .. }) => return Wake::Accepted(Some(runs)),
                    None => {}
                }
                continue;
            }
            let Some(at) = stop_at else { return Wake::Closed };
            self.advance_to(at);
            if signal_at == Some(at) {
                self.note(format!("a person's stop signal ({:?})", self.signal));
                return Wake::Signal(self.signal);
            }
            self.timer = None;
            return Wake::Timer;
        }
    }
}

fn captured(text: &str) -> Captured {
    Captured { text: text.to_string(), total_bytes: text.len() as u64, truncated: false, omitted: None }
}

/// One engine process's view of the universe.
pub struct SimWorld {
    pub u: Shared,
}

impl SimWorld {
    fn traits(&self, task_ref: &str) -> Option<Traits> {
        self.u.borrow().traits.get(task_ref).cloned()
    }
}

/// The world a run of `plan` acts on, in `u` (its tasks' traits kept).
pub fn maker(u: Shared) -> crate::run::world::simulated::Maker {
    Box::new(move |_plan: &Plan| Box::new(SimWorld { u: u.clone() }) as Box<dyn World>)
}

impl World for SimWorld {
    fn now_ms(&self) -> i64 {
        self.u.borrow().now_ms
    }

    fn sandbox_record(&self, _task: &Task) -> Record {
        // Nothing is started: what a plan's providers run in is the real
        // world's business. Recorded the same on every machine.
        Record::files_only(Status::Disabled)
    }

    fn off_thread(&mut self, job: Job) -> Fut<'_, std::result::Result<Box<dyn std::any::Any + Send>, String>> {
        Box::pin(std::future::ready(Ok(job())))
    }

    fn list_tools<'a>(
        &'a mut self,
        named: &'a BTreeSet<String>,
    ) -> Fut<'a, BTreeMap<String, std::result::Result<Inventory, String>>> {
        let listed = self.u.borrow_mut().list_tools(named);
        Box::pin(std::future::ready(listed))
    }

    fn send(&mut self, call: &Sending, _traceparent: Option<&str>) {
        if crate::failpoint::crashed() {
            return;
        }
        let mut u = self.u.borrow_mut();
        u.deliver(call);
        let now = u.now_ms;
        u.started.insert(call.task_ref.clone(), now);
    }

    fn look<'a>(&'a mut self, attempt: &'a AttemptRecord, ask_handle: bool, _left: Duration) -> Fut<'a, Looked> {
        let traits = self.traits(&attempt.task_ref);
        let looked = self.u.borrow_mut().look(attempt, traits, ask_handle);
        Box::pin(std::future::ready(looked))
    }

    fn look_superseded<'a>(
        &'a mut self,
        (task, _spec, _workspace): (&'a Task, &'a ProviderSpec, &'a Path),
        attempt: &'a AttemptRecord,
        _left: Duration,
    ) -> Fut<'a, Looked> {
        let traits = self.traits(&task.task_ref);
        let looked = self.u.borrow_mut().look(attempt, traits, true);
        Box::pin(std::future::ready(looked))
    }

    fn cancel(&mut self, _attempt: &AttemptRecord) {
        // The simulated providers cannot cancel: the call is left to the
        // stop's grace, as with any provider that cannot.
    }

    fn abort(&mut self, attempt_id: AttemptId) {
        let mut u = self.u.borrow_mut();
        let process = u.process;
        u.due.retain(|_, d| match d {
            Due::Msg { process: p, msg } => !(*p == process && msg.attempt_id() == attempt_id),
            _ => true,
        });
    }

    fn validate(&mut self, v: Validating) {
        let mut u = self.u.borrow_mut();
        let passes = u.traits.get(&v.task_ref).map_or(100, |t| t.passes);
        let runs = u.check_runs(v.checks, passes);
        let constraint_runs = u.check_runs(v.constraint_checks, 100);
        let (at, process) = (u.now_ms + u.rng.range(1, 50) as i64, u.process);
        let msg = Msg::Validated { attempt_id: v.attempt_id, runs, constraint_runs };
        u.schedule(at, Due::Msg { process, msg });
    }

    fn accept(&mut self, constraint_checks: Vec<CheckSpec>, checks: Vec<CheckSpec>) {
        let mut u = self.u.borrow_mut();
        let runs = (u.check_runs(constraint_checks, 100), u.check_runs(checks, 95));
        let (at, process) = (u.now_ms + u.rng.range(1, 50) as i64, u.process);
        u.schedule(at, Due::Accepted { process, runs });
    }

    fn abort_accept(&mut self) {
        self.u.borrow_mut().due.retain(|_, d| !matches!(d, Due::Accepted { .. }));
    }

    fn wait(&mut self, w: Wait) -> Fut<'_, Wake> {
        let wake = self.u.borrow_mut().wait(w);
        Box::pin(std::future::ready(wake))
    }

    fn try_message(&mut self) -> Option<Msg> {
        let mut u = self.u.borrow_mut();
        let (now, process) = (u.now_ms, u.process);
        let key = u.due.iter().find_map(|(&(at, seq), d)| match d {
            Due::Msg { process: p, .. } if *p == process && at <= now => Some((at, seq)),
            _ => None,
        })?;
        match u.due.remove(&key) {
            Some(Due::Msg { msg, .. }) => Some(msg),
            _ => None,
        }
    }

    fn signal_pending(&mut self) -> Option<StopSignal> {
        let u = self.u.borrow();
        u.signal_at.filter(|&at| at <= u.now_ms && !u.signal_acted).map(|_| u.signal)
    }

    fn signal_groups(&mut self, _level: Level, timer: Option<Duration>) -> usize {
        let mut u = self.u.borrow_mut();
        u.signal_acted = true;
        u.timer = timer.map(|t| u.now_ms + t.as_millis() as i64);
        0
    }

    fn say(&mut self, _update: &Update) {}

    fn ended(&mut self, task_ref: &str) -> Option<Duration> {
        let mut u = self.u.borrow_mut();
        let now = u.now_ms;
        u.started.remove(task_ref).map(|at| Duration::from_millis((now - at).max(0) as u64))
    }

    fn crashpoint(&mut self, _name: &'static str) {
        crate::failpoint::sim::step();
    }

    fn shutdown(&mut self) -> Fut<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    fn dead(&mut self) -> bool {
        let dead = crate::failpoint::sim::step();
        if !dead {
            let mut u = self.u.borrow_mut();
            let u = &mut *u;
            for f in u.checker.after_step(&u.deliveries) {
                u.trace.push(format!("FINDING {f}"));
                u.checker.findings.push(f);
            }
        }
        dead
    }
}

/// When the call's end reaches the engine, and how: cut by the task's
/// deadline, lost on the way back, or the provider's answer.
fn finished(
    behaviour: Behaviour,
    deadline: Option<i64>,
    (now, latency): (i64, i64),
    receipt: Receipt,
) -> (i64, Outcome) {
    match (behaviour, deadline) {
        (_, Some(t)) => {
            (now + t, Outcome::Lost { reason: LostReason::DeadlineAfterDispatch, detail: "simulated: deadline".into() })
        }
        (Behaviour::LostAfterEffect | Behaviour::LostBeforeEffect, _) => (
            now + latency,
            Outcome::Lost { reason: LostReason::ResponseLost, detail: "simulated: connection reset".into() },
        ),
        _ => (now + latency, Outcome::Received(receipt)),
    }
}

/// A simulated server's question for a person (2026-07-28's
/// `input_required`: a form asking for a required `name`).
fn asking(latency: i64) -> Receipt {
    let question = json!({"method": "elicitation/create", "mode": "form", "message": "simulated: who is asking?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}});
    Receipt::Mcp(McpReceipt {
        result: captured(&json!({"resultType": "input_required"}).to_string()),
        tool_error: None,
        stderr: captured(""),
        http_status: None,
        retry_after_seconds: None,
        duration_ms: latency as u64,
        output_invalid: None,
        step_up_scope: None,
        input: Some(Box::new(providers::InputAsk {
            task_id: None,
            request_state: Some("simulated-state".into()),
            questions: vec![providers::Question { key: "q".into(), question, elicitation_id: None }],
        })),
    })
}
