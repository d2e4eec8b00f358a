//! One seed's session: a person runs the plan and acts on what each run
//! ends waiting on — settles unknown outcomes, approves, retries, repairs,
//! revises, raises a budget, gives a request id twice — through the
//! command line's own parsing and dispatch (`cli::invoke`), each command
//! one simulated engine process that may die at any step; the invariants
//! checked as it goes (`checks`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::Value;

use super::checks::{self, Checker, Finding};
use super::files;
use super::plan::{self, Traits};
use super::rng::Rng;
use super::world::{self, Shared, Universe};
use super::{Config, Report};
use crate::error::Code;
use crate::failpoint::sim as process;
use crate::ids::GoalId;

use super::EPOCH_MS;
/// Commands of a session, at most.
const COMMANDS_MAX: u64 = 80;
/// In a hundred deaths of an engine process, how many are a power loss.
const POWER_LOSS_PERCENT: u64 = 40;
/// Mixed into the seed for the power's own draws.
const POWER_SEED: u64 = 0x9e37_79b9_7f4a_7c15;
/// Mixed into the seed for the tool's own draws (`tools`).
const TOOLS_SEED: u64 = 0x5851_f42d_4c95_7f2d;
/// Before a plain run, in a hundred: the service moves to a new version;
/// the person runs with `--reuse-across-tool-change`.
const NEW_VERSION_PERCENT: u64 = 12;
const ACROSS_TOOL_CHANGE_PERCENT: u64 = 10;

/// What one command ended with.
enum Ended {
    /// It finished: its exit code and JSON.
    Out(i32, Value),
    /// It was refused or failed: its exit code, code and message.
    Err(i32, Code, String),
    /// Its process died (a simulated crash).
    Died,
}

struct Session {
    u: Shared,
    rng: Rng,
    dir: PathBuf,
    plan_path: PathBuf,
    store: PathBuf,
    plan: Value,
    revision: u64,
    steps: u64,
    commands: u64,
    crashes: u64,
    request_ids: u64,
    /// The last person's act given a request id: its arguments and end.
    last_act: Option<(Vec<String>, String, i32)>,
    /// Whether a death is a power loss, and what of the WAL a power loss
    /// keeps: drawn apart from `rng`, so the rest of a seed's story is
    /// drawn as before until the first power loss.
    power: Rng,
    power_losses: u64,
    /// Whether the service moves on before a run, and whether the person
    /// reuses across it: drawn apart from `rng` too, so a seed whose service
    /// never moves draws its story as before.
    tools: Rng,
    /// What the person holds (`engine hold`): tasks, and the goal.
    holding: Vec<String>,
    holding_goal: bool,
    /// Whether the person edits an input before a run (`files`): drawn
    /// apart too; and how many edits so far.
    files: Rng,
    edits: u64,
    /// The person edits an input before the next plain run.
    edit_next: bool,
}

/// Run one seed.
pub fn simulate(config: &Config) -> Report {
    let mut rng = Rng::new(config.seed);
    let mut generated = plan::generate(&mut rng, config.seed);
    let mut files_rng = Rng::new(config.seed ^ files::FILES_SEED);
    files::declare(&mut generated, &mut files_rng);
    // A folder of its own: two runs of one seed at once (two tests) never meet.
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = config.base.join(format!("engine-sim-{}-{}-{run}", config.seed, std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ws, store) = (dir.join("ws"), dir.join("store").join("engine.db"));
    let made = set_up(&config.base, &generated, (&ws, &store));
    let mut report =
        Report { seed: config.seed, steps_max: config.steps, faults: config.faults.clone(), ..Report::default() };
    if let Err(e) = made {
        report.findings.push(Finding { invariant: "the simulation could set up", detail: e.to_string() });
        return report;
    }
    let u = universe(config, Rng::new(rng.next()), generated.traits, (&store, &dir));
    u.borrow_mut().files = Some(files::Writer::new(Rng::new(config.seed ^ files::FILES_SEED ^ 1), ws.clone()));
    process::plant(&config.faults);
    crate::run::world::simulated::set(Some(world::maker(u.clone())));
    let mut s = Session {
        u: u.clone(),
        rng,
        dir: dir.clone(),
        plan_path: ws.join("plan.json"),
        store,
        plan: generated.plan,
        revision: 0,
        steps: 0,
        commands: 0,
        crashes: 0,
        request_ids: 0,
        last_act: None,
        power: Rng::new(config.seed ^ POWER_SEED),
        tools: Rng::new(config.seed ^ TOOLS_SEED),
        power_losses: 0,
        holding: Vec::new(),
        holding_goal: false,
        files: files_rng,
        edits: 0,
        edit_next: false,
    };
    super::disk::forget();
    s.session(config.steps);
    s.verify();
    super::disk::forget();
    crate::run::world::simulated::set(None);
    process::plant(&[]);
    crate::clock::sim::set(None);
    let mut u = u.borrow_mut();
    report.steps = s.steps;
    report.commands = s.commands;
    report.crashes = s.crashes;
    report.power_losses = s.power_losses;
    report.deliveries = u.deliveries.len() as u64;
    report.answered = u.deliveries.iter().filter(|d| d.answers.is_some()).count() as u64;
    (report.kept_by_cutoff, report.ran_on_new_outputs) = u.checker.cutoffs;
    report.findings = std::mem::take(&mut u.checker.findings);
    report.trace = std::mem::take(&mut u.trace);
    drop(u);
    if keep() {
        report.trace.push(format!("the seed's folder is kept: {}", dir.display()));
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    report
}

/// The seed's folder: its workspace (the plan, the declared inputs) and
/// an empty store.
fn set_up(base: &Path, generated: &plan::Generated, (ws, store): (&Path, &Path)) -> std::io::Result<()> {
    std::fs::create_dir_all(ws)
        .and_then(|()| {
            std::fs::write(ws.join("plan.json"), serde_json::to_vec_pretty(&generated.plan).unwrap_or_default())
        })
        .and_then(|()| files::lay_out(ws, &generated.traits))
        .and_then(|()| empty_store(base, store))
}

/// The seed's world: its universe, its folder named, the service's own
/// draws (`Universe::moves`), the checks' reader open.
fn universe(config: &Config, world_rng: Rng, traits: BTreeMap<String, Traits>, (store, dir): (&Path, &Path)) -> Shared {
    let goal = GoalId::new(format!("sim-{}", config.seed));
    let depends_on = traits.iter().map(|(r, t)| (r.clone(), t.depends_on.clone())).collect();
    let made = checks::Made::new(dir.join("ws"), depends_on);
    let checker = Checker::new(store.to_path_buf(), goal, made);
    let u = Rc::new(RefCell::new(Universe::new(world_rng, EPOCH_MS, traits, checker)));
    u.borrow_mut().folder = dir.display().to_string();
    u.borrow_mut().moves = Some(Rng::new(config.seed ^ TOOLS_SEED ^ 1));
    u.borrow_mut().checker.open_reader();
    u
}

impl Session {
    fn session(&mut self, steps_max: u64) {
        let mut next = vec!["run".to_string(), self.plan_path.display().to_string()];
        while self.steps < steps_max && self.commands < COMMANDS_MAX && self.u.borrow().checker.findings.is_empty() {
            let ended = self.command(&next, true);
            // A person takes a moment between two commands; now and then
            // a long one (an approval given for a while may expire).
            let think = match self.rng.chance(8) {
                true => self.rng.range(5_000, 300_000),
                false => self.rng.range(10, 2_000),
            } as i64;
            let now = self.u.borrow().now_ms();
            self.u.borrow_mut().advance_to(now + think);
            match self.next_after(&next, ended) {
                Some(n) => next = n,
                None => break,
            }
        }
    }

    /// One command as its own engine process, which may die at any step.
    fn command(&mut self, args: &[String], may_die: bool) -> Ended {
        let args = &self.tool_moves(args);
        self.commands += 1;
        let is_run = matches!(args.first().map(String::as_str), Some("run" | "retry" | "repair" | "revise" | "rerun"));
        if args.first().is_some_and(|c| c == "rerun") {
            self.u.borrow_mut().checker.before_rerun();
        }
        let signal = is_run && self.rng.chance(10);
        let dies_at = (may_die && self.rng.chance(25)).then(|| self.rng.range(1, 120));
        self.u.borrow_mut().begin_process(signal);
        let told = args.join(" ");
        self.u
            .borrow_mut()
            .note(format!("$ engine {told} (dies at step {dies_at:?}{})", if signal { ", signalled" } else { "" }));
        process::begin_process(dies_at);
        let mut argv = vec!["engine".to_string(), "--store".to_string(), self.store.display().to_string()];
        argv.extend(args.iter().cloned());
        let result = catch_unwind(AssertUnwindSafe(|| crate::cli::invoke(argv)));
        let died = process::crashed();
        self.steps += process::steps() + 1;
        process::end_process();
        let ended = match result {
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                self.find(
                    checks::NO_INTERNAL_ERROR,
                    format!("`engine {}` panicked: {}", args.join(" "), why.unwrap_or_default()),
                );
                Ended::Err(101, Code::Internal, "panic".into())
            }
            Ok(_) if died => Ended::Died,
            Ok(Ok(out)) => Ended::Out(out.exit_code, out.json),
            Ok(Err(e)) => Ended::Err(e.code.exit_code(), e.code, e.message.clone()),
        };
        match &ended {
            Ended::Died => {
                self.crashes += 1;
                self.u.borrow_mut().note("the engine process died".into());
            }
            Ended::Out(code, _) => self.u.borrow_mut().note(format!("exit {code}")),
            Ended::Err(code, c, m) => {
                self.u.borrow_mut().note(format!("exit {code}: {c:?}: {m}"));
                if *c == Code::Internal {
                    self.find(checks::NO_INTERNAL_ERROR, format!("`engine {}` ended in {c:?}: {m}", args.join(" ")));
                }
            }
        }
        {
            let mut u = self.u.borrow_mut();
            let u = &mut *u;
            let mut found = u.checker.after_step(&u.deliveries);
            found.extend(u.checker.after_command());
            found.extend(u.checker.after_run(matches!(ended, Ended::Out(..)) && !signal, &u.traits));
            u.checker.findings.extend(found);
        }
        if matches!(ended, Ended::Died) {
            if self.power.chance(POWER_LOSS_PERCENT) {
                self.power_loss();
            }
            self.verify();
        }
        ended
    }

    /// Before a plain run, now and then: the service moves to a new
    /// version (its answers say so from now on), and the person runs with
    /// `--reuse-across-tool-change`. The checks note what the run starts
    /// on (`checks::tools`).
    fn tool_moves(&mut self, args: &[String]) -> Vec<String> {
        let mut args = args.to_vec();
        if args.first().is_none_or(|c| c != "run") {
            return args;
        }
        let mut u = self.u.borrow_mut();
        if let Some(path) = files::edit(
            self.plan_path.parent().unwrap_or(&self.dir),
            &u.traits,
            (&mut self.files, std::mem::take(&mut self.edit_next)),
            self.edits + 1,
        ) {
            self.edits += 1;
            u.note(format!("the person edits {path}"));
        }
        if self.tools.chance(NEW_VERSION_PERCENT) {
            u.service_version += 1;
            let v = u.service_version;
            u.note(format!("the service moves to version v{v}"));
        }
        let act = self.tools.chance(ACROSS_TOOL_CHANGE_PERCENT);
        if act {
            args.push("--reuse-across-tool-change".into());
        }
        u.checker.before_run(act);
        args
    }

    /// The machine loses power as the engine dies: the store keeps what
    /// was flushed (`disk`), and what the checks learnt is reconciled.
    fn power_loss(&mut self) {
        let mut u = self.u.borrow_mut();
        let u = &mut *u;
        u.checker.close();
        let power = &mut self.power;
        let kept = |n: usize| if power.chance(50) { 0 } else { power.below(n as u64 + 1) as usize };
        let Some(told) = super::disk::power_loss(kept) else {
            u.note("the power failed; nothing was waiting for the disk".into());
            return;
        };
        self.power_losses += 1;
        u.note(format!("the power failed: {told}"));
        let found = u.checker.power_lost(&u.sends, &u.traits);
        for f in found {
            u.note(format!("FINDING {f}"));
            u.checker.findings.push(f);
        }
    }

    fn find(&mut self, invariant: &'static str, detail: String) {
        let mut u = self.u.borrow_mut();
        u.note(format!("FINDING {invariant}: {detail}"));
        u.checker.findings.push(Finding { invariant, detail });
    }

    /// `engine verify`: the act chain, the ledger's own invariants.
    fn verify(&mut self) {
        if !self.store.exists() {
            return;
        }
        process::begin_process(None);
        let argv = ["engine", "--store", &self.store.display().to_string(), "verify"].map(String::from);
        let result = catch_unwind(AssertUnwindSafe(|| crate::cli::invoke(argv)));
        process::end_process();
        let detail = match result {
            Ok(Ok(out)) if out.exit_code == 0 => return,
            Ok(Ok(out)) => out.text,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "panicked".to_string(),
        };
        self.find(checks::VERIFY_PASSES, detail);
    }

    /// A request id for a person's act, half the time.
    fn request_id(&mut self, args: &mut Vec<String>) {
        if self.rng.chance(50) {
            self.request_ids += 1;
            args.extend(["--request-id".to_string(), format!("sim-{}", self.request_ids)]);
        }
    }

    /// What the person does next, from how the last command ended.
    fn next_after(&mut self, last: &[String], ended: Ended) -> Option<Vec<String>> {
        let run = || vec!["run".to_string(), String::new()];
        let mut next = match ended {
            Ended::Died | Ended::Err(..) => run(),
            Ended::Out(code, json)
                if last
                    .first()
                    .is_some_and(|c| matches!(c.as_str(), "approve" | "settle" | "answer" | "hold" | "release")) =>
            {
                self.held_or_released(last);
                self.remember(last, &json, code);
                if last.first().is_some_and(|c| c == "settle")
                    && last.iter().any(|a| a == "not_run")
                    && self.rng.chance(60)
                {
                    vec!["retry".to_string(), last.get(1).cloned().unwrap_or_default()]
                } else {
                    run()
                }
            }
            Ended::Out(code, json) => self.after_run(code, &json)?,
        };
        if next.first().is_some_and(|c| c == "run") {
            next = vec!["run".to_string(), self.plan_path.display().to_string()];
            if let Some(act) = self.hold_or_release() {
                return Some(act);
            }
        }
        if self.rng.chance(8) {
            if let Some(again) = self.again() {
                return Some(again);
            }
        }
        Some(next)
    }

    /// Before a run, now and then: the person holds a task (or the goal),
    /// or releases what they hold.
    fn hold_or_release(&mut self) -> Option<Vec<String>> {
        if (!self.holding.is_empty() || self.holding_goal) && self.rng.chance(35) {
            return Some(self.release());
        }
        if !self.rng.chance(6) {
            return None;
        }
        let mut act = vec!["hold".to_string()];
        if self.rng.chance(15) {
            act.push("--goal".into());
        } else {
            let tasks = self.plan["tasks"].as_array()?.len() as u64;
            act.push(format!("T{}", self.rng.range(1, tasks)));
        }
        act.extend(["--reason".to_string(), "simulated hold".to_string()]);
        self.request_id(&mut act);
        Some(act)
    }

    /// The person releases one thing they hold (the goal's hold first).
    fn release(&mut self) -> Vec<String> {
        let mut act = vec!["release".to_string()];
        match self.holding.first() {
            Some(t) if !self.holding_goal || self.rng.chance(50) => act.push(t.clone()),
            _ => act.push("--goal".into()),
        }
        self.request_id(&mut act);
        act
    }

    /// A hold or release the engine took: what the person holds now.
    fn held_or_released(&mut self, act: &[String]) {
        let (Some(verb), Some(what)) = (act.first(), act.get(1)) else { return };
        match (verb.as_str(), what.as_str()) {
            ("hold", "--goal") => self.holding_goal = true,
            ("release", "--goal") => self.holding_goal = false,
            ("hold", t) if !self.holding.iter().any(|h| h == t) => self.holding.push(t.to_string()),
            ("release", t) => self.holding.retain(|h| h != t),
            _ => {}
        }
    }

    /// A person's rerun of a succeeded task (and, half the time, of what
    /// depends on it).
    fn rerun(&mut self, r: &Value) -> Option<Vec<String>> {
        let done: Vec<String> = r["tasks"]
            .as_array()?
            .iter()
            .filter(|t| t["state"] == "succeeded" || t["state"] == "reused")
            .filter_map(|t| t["task_ref"].as_str().map(str::to_string))
            .collect();
        let task = done.get(self.rng.below(done.len() as u64) as usize)?.clone();
        let mut act = vec!["rerun".to_string(), task];
        if self.rng.chance(50) {
            act.push("--downstream".into());
        }
        act.extend(["--reason".to_string(), "simulated: not trusted".to_string()]);
        self.request_id(&mut act);
        Some(act)
    }

    fn remember(&mut self, args: &[String], json: &Value, code: i32) {
        if let Some(i) = args.iter().position(|a| a == "--request-id") {
            let id = args.get(i + 1).cloned().unwrap_or_default();
            self.last_act = Some((args.to_vec(), id, code));
        }
        let _ = json;
    }

    /// The person gives an act's request id again: the same act (a repeat,
    /// which changes nothing), or another command under it (a conflict).
    fn again(&mut self) -> Option<Vec<String>> {
        let (args, id, _) = self.last_act.clone()?;
        if self.rng.chance(50) {
            return Some(args);
        }
        Some(vec![
            "settle".into(),
            "op-of-another-command".into(),
            "--outcome".into(),
            "ok".into(),
            "--note".into(),
            "sim".into(),
            "--request-id".into(),
            id,
        ])
    }

    /// After a run (or retry, repair, revise): act on what it waits on.
    fn after_run(&mut self, code: i32, r: &Value) -> Option<Vec<String>> {
        let first = |key: &str| {
            r[key].as_array().and_then(|a| a.first()).and_then(|u| u["operation_id"].as_str()).map(str::to_string)
        };
        let mut act = match code {
            0 => {
                if self.rng.chance(15) {
                    return self.revise(None);
                }
                if self.rng.chance(25) {
                    return self.rerun(r);
                }
                if files::again(&self.u.borrow().traits, &mut self.files) {
                    self.edit_next = true;
                    return Some(vec!["run".into(), String::new()]);
                }
                return None;
            }
            3 => {
                let op = first("unknown")?;
                let outcome = if self.rng.chance(50) { "ok" } else { "not_run" };
                vec![
                    "settle".into(),
                    op,
                    "--outcome".into(),
                    outcome.into(),
                    "--note".into(),
                    "simulated person".into(),
                ]
            }
            4 if r["code"] == "INPUT_REQUIRED" => {
                // A simulated person answers what a server asked.
                let task = r["awaiting_input"].as_array()?.first()?["task_ref"].as_str()?.to_string();
                vec!["answer".into(), task, "--field".into(), "name=simulated person".into()]
            }
            4 => self.after_asked(r)?,
            5 => {
                if self.rng.chance(40) {
                    return None;
                }
                let budget = r["budget"]["budget"].as_str().unwrap_or("max_provider_calls").to_string();
                let to = r["budget"]["limit"].as_f64().unwrap_or(1.0) as u64 + self.rng.range(1, 4);
                return self.revise(Some(format!("{budget}={to}")));
            }
            1 => {
                let failed = r["failed"].as_array().and_then(|f| f.first()).and_then(Value::as_str)?.to_string();
                let tasks = r["tasks"].as_array()?;
                let op = tasks.iter().find(|t| t["task_ref"] == failed.as_str())?["operation_id"].as_str()?.to_string();
                match self.rng.below(3) {
                    0 => vec!["retry".into(), op],
                    1 => vec!["repair".into(), failed],
                    _ => return None,
                }
            }
            _ => vec!["run".into(), String::new()],
        };
        if act.first().is_some_and(|c| c != "run") {
            self.request_id(&mut act);
        }
        Some(act)
    }

    /// After a run that waits on a person (exit 4, not a question): approve
    /// what waits (now and then for a while), or release what is held (a
    /// run that ends `HELD`), or leave it. Reruns still asked for go on.
    fn after_asked(&mut self, r: &Value) -> Option<Vec<String>> {
        let first = |key: &str| {
            r[key].as_array().and_then(|a| a.first()).and_then(|u| u["operation_id"].as_str()).map(str::to_string)
        };
        let Some(op) = first("awaiting_approval") else {
            // Only held work is left (`HELD`): release it, or leave it.
            let held = r["held"].as_array().and_then(|h| h.first())?;
            if !self.rng.chance(70) {
                return None;
            }
            let what = match held["goal"].as_bool() {
                Some(true) => "--goal".to_string(),
                _ => held["task_ref"].as_str()?.to_string(),
            };
            return Some(vec!["release".to_string(), what]);
        };
        let mut act = vec!["approve".into(), op, "--note".into(), "simulated person".into()];
        if self.rng.chance(30) {
            // An approval for a while: the simulated clock may pass it.
            let d = if self.rng.chance(70) { format!("{}s", self.rng.range(1, 5)) } else { "2m".into() };
            act.extend(["--for".to_string(), d]);
        }
        Some(act)
    }

    /// A person's revision: one task's action changed, or a budget raised.
    fn revise(&mut self, raise: Option<String>) -> Option<Vec<String>> {
        self.revision += 1;
        if raise.is_none() {
            let tasks = self.plan["tasks"].as_array()?.len() as u64;
            let task_ref = format!("T{}", self.rng.range(1, tasks));
            self.plan = plan::revised(&self.plan, &task_ref, self.revision);
            write(&self.plan_path, &self.plan);
        }
        let mut args =
            vec!["revise".into(), self.plan_path.display().to_string(), "--reason".into(), "simulated".into()];
        if let Some(r) = raise {
            args.extend(["--raise".to_string(), r]);
        }
        self.request_id(&mut args);
        Some(args)
    }
}

/// An empty store at `store`: a copy of one made once per process (each
/// seed would otherwise spend a third of its time making the same empty
/// store; making one is the crash sweep's and the store tests' business).
/// The copy is a store the engine closed cleanly, moved: its first writer
/// checks it whole (`integrity_check`), as for any store file that changed
/// since the engine closed it. The template's files are kept in memory and
/// its folder removed at once: a process leaves no folder behind.
fn empty_store(base: &Path, store: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    static TEMPLATE: std::sync::OnceLock<std::result::Result<[Vec<u8>; 2], String>> = std::sync::OnceLock::new();
    let template = TEMPLATE.get_or_init(|| template(base)).as_ref().map_err(|e| std::io::Error::other(e.clone()))?;
    let dir = store.parent().unwrap_or(base);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    for (suffix, bytes) in ["", ".mark"].iter().zip(template) {
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(with(store, suffix))?;
        file.write_all(bytes)?;
    }
    crate::store::Store::adopt_copy(store).map_err(|e| std::io::Error::other(e.to_string()))
}

/// The template store's files (the store file, its mark): made as the
/// engine makes any store, closed cleanly, read, and its folder removed.
fn template(base: &Path) -> std::result::Result<[Vec<u8>; 2], String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = base.join(format!("engine-sim-empty-{}", std::process::id()));
    let at = dir.join("store").join("engine.db");
    let _ = std::fs::remove_dir_all(&dir);
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(at.parent().unwrap_or(base))
        .map_err(|e| e.to_string())
        .and_then(|()| crate::store::Store::open_rw(&at).and_then(|s| s.lease().map(drop)).map_err(|e| e.to_string()))
        .and_then(|()| {
            let read = |suffix| std::fs::read(with(&at, suffix)).map_err(|e| e.to_string());
            Ok([read("")?, read(".mark")?])
        });
    let _ = std::fs::remove_dir_all(&dir);
    made
}

fn with(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

fn write(path: &Path, plan: &Value) {
    let _ = std::fs::write(path, serde_json::to_vec_pretty(plan).unwrap_or_default());
}

/// `ENGINE_SIM_KEEP=1`: keep each seed's folder (its workspace and store)
/// for `engine --store … status`, `explain`, `verify` after the story.
fn keep() -> bool {
    std::env::var_os("ENGINE_SIM_KEEP").is_some_and(|v| v == "1")
}

impl Drop for Session {
    fn drop(&mut self) {
        if !keep() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
