//! The command line: clap arguments (`args`, also read by the build
//! script) wired to library calls, and the one place that turns results
//! into output and exit codes. No decisions here.

pub mod args;
mod complete;
pub mod shipped;

use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches};
use serde_json::json;

pub use args::{Cli, ColorChoice, Command, GraphFormat, OutcomeArg, ProgressMode, Shell, Show};

use crate::commands::worker::{SubmitOptions, WorkerOptions};
use crate::commands::{self, repair::RepairRequest, revise::ReviseRequest, run::RunOptions};
use crate::error::{Error, Result};
use crate::ids::{GoalId, OperationId, Seq};
use crate::once::{self, Given};
use crate::plan::Plan;
use crate::report::{self, emit, Output};
use crate::run::orphans::take_lease;
use crate::state::SettlementOutcome;
use crate::store::{self, Store};

/// The command line as the binary parses it: `args::Cli` with the version
/// line (the build script builds the same for the man pages).
pub fn command() -> clap::Command {
    Cli::command().version(report::VERSION)
}

/// Parse arguments, run the command, print, and return the exit code.
pub fn main() -> i32 {
    // A shell asking for completions (`COMPLETE=SHELL`): answered, nothing run.
    if let Some(code) = complete::answer_if_asked() {
        return code;
    }
    let cli = match command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            // Plain text (no colours), escaped: the arguments it quotes
            // back may hold control characters.
            let text = e.render().to_string();
            let text = report::escape::for_terminal(&text);
            return if e.use_stderr() {
                crate::say_text!("{text}");
                2
            } else {
                emit(&text);
                0
            };
        }
    };
    let json = cli.global.json;
    let painted = !cli.command.prints_a_format();
    report::paint::choose(match (json, cli.global.color) {
        (true, _) | (_, ColorChoice::Never) => report::paint::Choice::Never,
        (false, ColorChoice::Always) => report::paint::Choice::Always,
        (false, ColorChoice::Auto) => report::paint::Choice::Auto,
    });
    if cli.command.runs_work() {
        // From here on a person's Ctrl-C, SIGTERM or SIGHUP is the run's to
        // act on: it ends its providers and records them, then exits.
        if let Err(e) = crate::signals::catch() {
            print_error(&e);
            return e.code.exit_code();
        }
    }
    // A run's trace, when asked for: set up before the command (a URL that
    // is none is refused), sent (or said lost) after it, within a bound.
    let traced = match cli.command.show() {
        Some(show) => crate::trace::start(show.otlp.as_deref()),
        None => Ok(()),
    };
    let result = traced.and_then(|()| dispatch(cli));
    crate::trace::finish();
    match result {
        Ok(out) => {
            if json {
                emit(&format!("{}\n", report::escape::json_pretty(&out.json)));
            } else if !out.text.is_empty() {
                let text = report::escape::for_terminal(&out.text);
                emit(&if painted { report::paint::text(&text) } else { text.into_owned() });
            }
            stopped_exit(out.exit_code)
        }
        Err(e) => {
            if json {
                emit(&format!("{}\n", report::escape::json_pretty(&json!({"ok": false, "error": e}))));
            }
            print_error(&e);
            e.code.exit_code()
        }
    }
}

/// Run one command line as the binary would, printing nothing: its output,
/// or its error (the exit code is `Output::exit_code` or the error code's).
/// The same parsing and dispatch as `main`: the simulator's way in.
pub fn invoke<I, T>(args: I) -> Result<Output>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // The parser is built once per thread and kept: building it is most
    // of what parsing one command line costs, and the simulator parses
    // tens of thousands (`main` parses one, with a parser of its own).
    thread_local! {
        static PARSER: std::cell::RefCell<clap::Command> = std::cell::RefCell::new(command());
    }
    let cli = PARSER
        .with(|p| p.borrow_mut().try_get_matches_from_mut(args))
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| Error::usage(e.to_string()))?;
    dispatch(cli)
}

/// An error for a person, on stderr: `error: CODE: message (at place)`,
/// and under it the source line it points into, when it has one (a plan's
/// JSON syntax error: the line and a caret under the column).
fn print_error(e: &Error) {
    let line = format!("error: {}", report::escape::for_terminal(&e.to_string()));
    crate::say_line!("{}", report::paint::error(&line));
    if let Some(shown) = report::plan::source_excerpt(&e.details) {
        crate::say_line!("{shown}");
    }
}

/// A stop signal the run did not act on (it came after the run ended, or
/// the command ran nothing) still ends the process as that signal would.
fn stopped_exit(exit_code: i32) -> i32 {
    match crate::signals::received() {
        Some(signal) if exit_code != signal.exit_code() => {
            crate::say_line!("engine: {signal} received after the command had done its work; nothing was stopped");
            signal.exit_code()
        }
        _ => exit_code,
    }
}

impl Command {
    /// The commands whose text is a format another program reads (a
    /// schema, a shell's completions, a man page, a graph): never painted.
    fn prints_a_format(&self) -> bool {
        matches!(self, Command::Schema | Command::Completions { .. } | Command::Man { .. } | Command::Graph { .. })
    }

    /// How a command that runs work shows itself (`None`: it runs none).
    fn show(&self) -> Option<&Show> {
        match self {
            Command::Run { show, .. }
            | Command::Worker { show, .. }
            | Command::Retry { show, .. }
            | Command::Repair { show, .. }
            | Command::Rerun { show, .. }
            | Command::Revise { show, .. } => Some(show),
            _ => None,
        }
    }

    /// The commands that run work, and so catch a person's stop signals.
    fn runs_work(&self) -> bool {
        matches!(
            self,
            Command::Run { .. }
                | Command::Worker { .. }
                | Command::Retry { .. }
                | Command::Repair { .. }
                | Command::Rerun { .. }
                | Command::Revise { .. }
        )
    }
}

impl Show {
    fn sink(&self) -> std::sync::Arc<dyn crate::run::progress::Sink> {
        let mode = match (self.quiet, self.progress) {
            (true, _) => report::progress::Mode::Quiet,
            (false, ProgressMode::Auto) => report::progress::Mode::Auto,
            (false, ProgressMode::Plain) => report::progress::Mode::Plain,
        };
        report::progress::sink(mode)
    }
}

/// `--raise NAME=VALUE`, checked (`decide::raise`).
fn parse_raise(arg: &str) -> Result<crate::decide::raise::Raise> {
    crate::decide::raise::parse(arg).map_err(|e| Error::usage(format!("--raise {e}")).at(format!("--raise {arg}")))
}

fn dispatch(cli: Cli) -> Result<Output> {
    let Cli { global, command } = cli;
    let json = global.json;
    let at = Places { store: global.store, workspace: global.workspace };
    let ws = at.workspace.as_deref();
    match command {
        Command::Init { dir } => crate::init::write(dir.as_deref().unwrap_or(Path::new("."))).map(report::init::render),
        Command::Check { plan } => check(&plan, ws, at.store.as_deref()),
        Command::Digest { plan } => Ok(report::plan::digests(&Plan::load(&plan, ws)?)),
        Command::Graph { plan, format: GraphFormat::Dot } => Ok(report::plan::dot(&Plan::load(&plan, ws)?)),
        Command::Graph { plan, format: GraphFormat::Mermaid } => Ok(report::plan::mermaid(&Plan::load(&plan, ws)?)),
        Command::Schema => Ok(schema()),
        Command::Completions { shell } => Ok(shipped::completions(shell)),
        Command::Man { command, dir } => shipped::man(command.as_deref(), dir.as_deref()),
        Command::Run { plan, dry_run: true, .. } => dry_run(at, plan),
        Command::Run { plan, jobs, store_group, reuse_across_tool_change, show, .. } => {
            run(at, plan, (jobs, show), store_group, reuse_across_tool_change)
        }
        Command::Submit { plan } => submit(SubmitOptions { plan_path: plan, workspace: at.workspace, store: at.store }),
        Command::Worker { jobs, goal, show } => worker(at, jobs, goal, show),
        Command::Settle { operation_id, outcome, note, actor, evidence, request_id } => {
            let said = Settling { outcome: settlement_outcome(outcome), note, evidence };
            settle(&at, OperationId::new(operation_id), said, actor, request_id)
        }
        Command::Approve { operation_id, note, expect_cost, for_, actor, request_id } => {
            approve(&at, OperationId::new(operation_id), (&note, expect_cost, for_.as_deref()), actor, request_id)
        }
        Command::Answer { task_ref, fields, accept, decline, goal, for_, asker } => {
            answer(&at, (task_ref, goal, crate::decide::answer::Said { fields, accept, decline }), for_, asker)
        }
        Command::Hold { task_ref, goal, reason, asker } => hold(&at, (task_ref, goal), (true, &reason), asker),
        Command::Release { task_ref, goal, reason, asker } => {
            hold(&at, (task_ref, goal), (false, reason.as_deref().unwrap_or("")), asker)
        }
        Command::Retry { task_ref, goal, without_read_back, reason, jobs, asker, show } => {
            let waived = without_read_back.then(|| reason.unwrap_or_default());
            retry(&at, (&task_ref, goal.map(GoalId::new).as_ref(), waived.as_deref()), (jobs, show), asker)
        }
        Command::Repair { task_ref, instruction, provider, force, note, goal, jobs, asker, show } => {
            let (goal, jobs, progress) = (goal.map(GoalId::new), jobs_or_default(jobs), show.sink());
            let force_note = force.then_some(note).flatten();
            repair(&at, RepairRequest { goal, task_ref, instruction, provider, force_note, jobs, progress }, asker)
        }
        Command::Rerun { task_ref, downstream, reason, goal, jobs, asker, show } => {
            let (goal, jobs, progress) = (goal.map(GoalId::new), jobs_or_default(jobs), show.sink());
            let request = commands::rerun::RerunRequest { goal, task_ref, downstream, reason, jobs, progress };
            rerun(&at, request, asker)
        }
        Command::Revise { plan, reason, no_run, jobs, asker, raise, approve_loosening, people, show } => {
            revise(&at, (plan, reason, no_run), (approve_loosening, people, &raise), (jobs, show), asker)
        }
        Command::Status { goal } => report::status::render(&at.reader()?, goal.map(GoalId::new).as_ref()),
        Command::Goals => report::goals::render(&at.reader()?),
        Command::Login { plan, provider, timeout: t, scope: s } => commands::login::login(&plan, ws, &provider, (t, s)),
        Command::Stores { prune, force } => Ok(report::stores::render(&commands::stores::stores(prune, force)?)),
        Command::Explain { task_ref, goal } => {
            report::explain::render(&at.reader()?, goal.map(GoalId::new).as_ref(), &task_ref)
        }
        Command::Output { task_ref, attempt, stderr, goal } => output(&at, (goal, task_ref), (attempt, stderr), json),
        Command::Report { goal, revision, html, no_timestamp } => {
            goal_report(&at, (goal, revision), html, no_timestamp, json)
        }
        Command::Verify => verify(&at.store_path()?),
        Command::Log { follow, after, goal, task_ref } => log(&at, (goal, task_ref), (after, follow), json),
    }
}

/// `engine output`: what an attempt of a task printed.
fn output(
    at: &Places,
    (goal, task_ref): (Option<String>, String),
    (attempt, stderr): (Option<i64>, bool),
    json: bool,
) -> Result<Output> {
    let which = report::output::Which { goal: goal.map(GoalId::new), task_ref, attempt, stderr };
    report::output::render(&at.reader()?, &which, json)
}

/// `engine log`: the ledger's events, as they come with `--follow`.
fn log(
    at: &Places,
    (goal, task_ref): (Option<String>, Option<String>),
    (after, follow): (i64, bool),
    json: bool,
) -> Result<Output> {
    let which = report::log::Which { after: Seq(after), goal: goal.map(GoalId::new), task_ref, follow };
    report::log::render(&at.reader()?, &which, json)
}

/// `engine report`: the goal's report, as text, JSON or an HTML page.
fn goal_report(
    at: &Places,
    (goal, revision): (Option<String>, Option<i64>),
    html: Option<PathBuf>,
    no_timestamp: bool,
    json: bool,
) -> Result<Output> {
    let (goal, html) = (goal.as_deref(), html.as_deref());
    let options = report::goal_report::Options { goal, revision, html, json, no_timestamp };
    report::goal_report::run(&at.reader()?, &options)
}

/// `engine submit`: the goal registered on a shared store, for workers.
fn submit(options: SubmitOptions) -> Result<Output> {
    let s = commands::worker::submit(options)?;
    let text = format!(
        "goal {} (revision {}) submitted to {}: workers take it up (`engine worker --goal {}`)\n",
        s.goal_id, s.revision, s.store, s.goal_id
    );
    Ok(Output { text, json: json!(s), exit_code: 0 })
}

/// What a person says when settling.
struct Settling {
    outcome: SettlementOutcome,
    note: String,
    evidence: Option<PathBuf>,
}

/// `engine settle`: a person's act, under the lease; once per request id.
fn settle(
    at: &Places,
    op: OperationId,
    said: Settling,
    actor: Option<String>,
    request_id: Option<String>,
) -> Result<Output> {
    let person = commands::person::who(actor.as_deref());
    let Settling { outcome, note, evidence } = said;
    let args = json!({"operation_id": op.as_str(), "outcome": outcome.as_str(), "note": note, "actor": actor,
        "evidence": evidence_digest(evidence.as_deref())?});
    let given = Given::new(request_id, "settle", args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    commands::settle::permitted(&*store.read(), &op, &person)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        let said = commands::settle::Said { outcome, note: &note, person: &person, evidence: evidence.as_deref() };
        Ok(report::acts::settled(&commands::settle::settle(ledger, &op, said, id)?))
    })
}

/// `engine approve`: a person's act, under the lease; once per request id.
fn approve(
    at: &Places,
    op: OperationId,
    (note, expect_cost, for_): (&str, Option<f64>, Option<&str>),
    actor: Option<String>,
    request_id: Option<String>,
) -> Result<Output> {
    let for_ms = for_ms(for_)?;
    let expect_cost = expect_cost
        .map(|n| {
            crate::cost::Cost::from_units(n)
                .map_err(|e| Error::usage(format!("--expect-cost {n}: {e}")).at(format!("--expect-cost {n}")))
        })
        .transpose()?;
    let person = commands::person::who(actor.as_deref());
    let mut args = json!({"operation_id": op.as_str(), "note": note, "actor": actor});
    if let Some(c) = expect_cost {
        args["expect_cost"] = json!(c);
    }
    if let Some(d) = for_ {
        args["for"] = json!(d);
    }
    let given = Given::new(request_id, "approve", args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    commands::approve::permitted(&*store.read(), &op, &person)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        Ok(report::acts::approved(&commands::approve::record(ledger, &op, (note, expect_cost, for_ms), &person, id)?))
    })
}

/// `--for DURATION` of approve and answer, in milliseconds.
fn for_ms(for_: Option<&str>) -> Result<Option<u64>> {
    for_.map(|d| {
        crate::decide::expiry::parse(d).map_err(|why| Error::usage(format!("--for {why}")).at(format!("--for {d}")))
    })
    .transpose()
}

/// `engine answer`: a person's act, under the lease; once per request id.
fn answer(
    at: &Places,
    (task_ref, goal, said): (String, Option<String>, crate::decide::answer::Said),
    for_: Option<String>,
    asker: crate::cli::args::Asker,
) -> Result<Output> {
    let (actor, request_id) = (asker.actor, asker.request_id);
    let for_ms = for_ms(for_.as_deref())?;
    let a = commands::answer::Answer { goal: goal.map(GoalId::new), task_ref, said, for_ms };
    let person = commands::person::who(actor.as_deref());
    let mut args = json!({"task_ref": a.task_ref, "fields": a.said.fields, "accept": a.said.accept,
        "decline": a.said.decline, "goal": a.goal.as_ref().map(GoalId::as_str), "actor": actor});
    // Only when given: a request id recorded before `--for` still matches.
    if let Some(d) = for_ {
        args["for"] = json!(d);
    }
    let given = Given::new(request_id, "answer", args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    commands::answer::permitted(&*store.read(), a.goal.as_ref(), &person)?;
    // A question a live run holds open during its call: answered beside
    // that run (it holds the lease), which sends the answer now.
    match commands::held_answer::held(&*store.read(), a.goal.as_ref(), &a.task_ref)? {
        commands::held_answer::Held::Open(h) => {
            return once::beside(&store, &h.holder, given.as_ref(), |id| {
                Ok(report::acts::answered(&commands::held_answer::record(&store, &a, &person, &h, id)?))
            })
        }
        commands::held_answer::Held::Over(why) => {
            return Err(crate::error::Error::new(crate::error::Code::NothingToAnswer, why).at(a.task_ref.clone()))
        }
        commands::held_answer::Held::None => {}
    }
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        Ok(report::acts::answered(&commands::answer::record(ledger, &a, &person, id)?))
    })
}

/// `engine hold` (`hold`) and `engine release`: a person's act, under the
/// lease; once per request id. `--goal` alone names the whole goal.
fn hold(
    at: &Places,
    (task_ref, goal): (Option<String>, Option<String>),
    (hold, reason): (bool, &str),
    asker: crate::cli::args::Asker,
) -> Result<Output> {
    let person = commands::person::who(asker.actor.as_deref());
    let goal = goal.filter(|g| !g.is_empty()).map(GoalId::new);
    let command = if hold { "hold" } else { "release" };
    let args = json!({"task_ref": task_ref, "goal": goal.as_ref().map(GoalId::as_str), "reason": reason,
        "actor": asker.actor});
    let given = Given::new(asker.request_id, command, args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    let named = commands::hold::Named { task_ref: task_ref.as_deref(), goal: goal.as_ref() };
    commands::hold::permitted(&*store.read(), &named, &person)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        Ok(report::acts::held(&commands::hold::record(ledger, &named, (hold, reason), &person, id)?))
    })
}

/// `engine retry`: a person's request, under the lease; once per request id.
fn retry(
    at: &Places,
    (arg, goal, without_read_back): (&str, Option<&GoalId>, Option<&str>),
    (jobs, show): (Option<usize>, crate::cli::args::Show),
    asker: crate::cli::args::Asker,
) -> Result<Output> {
    let (actor, request_id, jobs, progress) = (asker.actor, asker.request_id, jobs_or_default(jobs), show.sink());
    let person = commands::person::who(actor.as_deref());
    // The argument as given (a ref or an operation id); the goal only when
    // named, so a request id recorded before `--goal` existed still matches.
    let mut args = json!({"operation_id": arg, "actor": actor});
    if let Some(g) = goal {
        args["goal"] = json!(g.as_str());
    }
    if let Some(why) = without_read_back {
        args["without_read_back"] = json!(why);
    }
    let given = Given::new(request_id, "retry", args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    let named = commands::retry::Named { arg, goal, without_read_back };
    commands::retry::permitted(&*store.read(), &named, &person)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        Ok(report::run::render(&commands::retry::retry(ledger, &named, jobs, &person, id, progress.clone())?))
    })
}

/// `engine repair`: a person's request, under the lease; once per request id.
fn repair(at: &Places, request: RepairRequest, asker: crate::cli::args::Asker) -> Result<Output> {
    let (actor, request_id) = (asker.actor, asker.request_id);
    let person = commands::person::who(actor.as_deref());
    let args = json!({"task_ref": request.task_ref, "instruction": request.instruction,
        "provider": request.provider, "force_note": request.force_note,
        "goal": request.goal.as_ref().map(GoalId::as_str), "actor": actor});
    let given = Given::new(request_id, "repair", args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    commands::repair::permitted(&*store.read(), request.goal.as_ref(), &person)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        Ok(report::run::render(&commands::repair::repair(ledger, request, &person, id)?))
    })
}

/// `engine rerun`: a person's act, under the lease; once per request id.
fn rerun(at: &Places, request: commands::rerun::RerunRequest, asker: crate::cli::args::Asker) -> Result<Output> {
    let person = commands::person::who(asker.actor.as_deref());
    let args = json!({"task_ref": request.task_ref, "downstream": request.downstream, "reason": request.reason,
        "goal": request.goal.as_ref().map(GoalId::as_str), "actor": asker.actor});
    let given = Given::new(asker.request_id, "rerun", args, &person)?;
    let store = at.existing()?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    commands::rerun::permitted(&*store.read(), request.goal.as_ref(), &person)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        Ok(report::run::render(&commands::rerun::rerun(ledger, request, &person, id)?))
    })
}

/// `engine run --dry-run`: what a run would do; does nothing.
fn dry_run(at: Places, plan: PathBuf) -> Result<Output> {
    let options = commands::dry_run::DryOptions { plan_path: plan, workspace: at.workspace, store: at.store };
    let (dry, store) = commands::dry_run::dry_run(&options)?;
    Ok(report::dry_run::render(&dry, store.as_deref()))
}

/// `engine run`.
fn run(
    at: Places,
    plan: PathBuf,
    (jobs, show): (Option<usize>, Show),
    store_group: Option<String>,
    reuse_across_tool_change: bool,
) -> Result<Output> {
    let (workspace, store, jobs, progress) = (at.workspace, at.store, jobs_or_default(jobs), show.sink());
    let options =
        RunOptions { plan_path: plan, workspace, store, store_group, jobs, progress, reuse_across_tool_change };
    Ok(report::run::render(&commands::run::run(options)?))
}

/// `engine worker`: with `--goal`, that goal's report once it is judged.
fn worker(at: Places, jobs: Option<usize>, goal: Option<String>, show: Show) -> Result<Output> {
    let (workspace, store, jobs, progress) = (at.workspace, at.store, jobs_or_default(jobs), show.sink());
    let options = WorkerOptions { workspace, store, jobs, goal: goal.map(GoalId::new), progress };
    match commands::worker::work(options)? {
        Some(r) => Ok(report::run::render(&r)),
        None => Ok(Output { text: String::new(), json: json!({"ok": true}), exit_code: 0 }),
    }
}

/// `engine revise`: a person's new revision, under the lease; once per
/// request id (the plan counts by its digest, not its path alone).
fn revise(
    at: &Places,
    (plan_path, reason, no_run): (PathBuf, String, bool),
    (approve_loosening, as_store_owner, raise): (bool, bool, &[String]),
    (jobs, show): (Option<usize>, Show),
    args::Asker { actor, request_id }: args::Asker,
) -> Result<Output> {
    let raises = raise.iter().map(|r| parse_raise(r)).collect::<Result<Vec<_>>>()?;
    let (jobs, progress) = (jobs_or_default(jobs), show.sink());
    let req = ReviseRequest { plan_path, reason, no_run, jobs, raises, approve_loosening, as_store_owner, progress };
    let person = commands::person::who(actor.as_deref());
    let loaded = Plan::load(&req.plan_path, at.workspace.as_deref())?;
    let args = json!({"plan": req.plan_path, "plan_digest": loaded.digests().plan, "reason": req.reason,
        "no_run": req.no_run, "actor": actor, "raise": raise, "approve_loosening": req.approve_loosening,
        "people": req.as_store_owner});
    let given = Given::new(request_id, "revise", args, &person)?;
    let location = commands::store_for_plan(at.store.as_deref(), &loaded, false)?;
    let store = Store::open_existing(&location.path)?;
    if let Some(first) = once::answered(&*store.read(), given.as_ref())? {
        return Ok(first);
    }
    let owner = req.as_store_owner.then_some(location.path.as_path());
    commands::revise::permitted(&*store.read(), &loaded, &person, owner)?;
    once::run(&mut take_lease(store)?, given.as_ref(), |ledger, id| {
        let revised = commands::revise::revise(ledger, loaded, req, &person, id)?;
        Ok(report::revise::render(&revised, &*ledger.read()))
    })
}

fn settlement_outcome(o: OutcomeArg) -> SettlementOutcome {
    match o {
        OutcomeArg::Ok => SettlementOutcome::Ok,
        OutcomeArg::NotRun => SettlementOutcome::NotRun,
    }
}

/// Validate, then warn: warnings go to stderr (and into `--json`), and
/// never change the exit code.
fn check(plan: &Path, workspace: Option<&Path>, store: Option<&Path>) -> Result<Output> {
    let p = Plan::load(plan, workspace)?;
    // The write rules as `run` would judge them, with the store it would use.
    let store = crate::store::location::Location::for_workspace(store, &p.workspace).ok().map(|l| l.path);
    crate::run::sandboxes::refuse_rules(&p, store.as_deref())?;
    let warnings = crate::plan::probe::check(plan, &p)?;
    for w in &warnings {
        crate::say_line!("{}", report::escape::for_terminal(&report::plan::warning_line(w)));
    }
    let out = report::plan::check(&p, &warnings);
    // The process ends next: freeing a 100,000-task plan piece by piece
    // would only cost time (about a tenth of `check`).
    std::mem::forget(p);
    Ok(out)
}

fn verify(path: &Path) -> Result<Output> {
    let v = store::verify::verify(path)?;
    let mut text = format!("store verified: {} checks ({})\n", v.checks.len(), v.store);
    for n in &v.not_applicable {
        text.push_str(&format!("  not applicable on {}: {} ({})\n", v.backend, n.check, n.why));
    }
    let json = json!({"ok": true, "store": v.store, "backend": v.backend, "checks": v.checks, "not_applicable": v.not_applicable});
    Ok(Output { text, json, exit_code: 0 })
}

fn schema() -> Output {
    let schema = crate::plan::schema();
    Output {
        text: format!("{}\n", serde_json::to_string_pretty(&schema).expect("serializes")),
        json: schema,
        exit_code: 0,
    }
}

fn jobs_or_default(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(default_jobs)
}

/// Where the store is: `--store`, `$ENGINE_STORE`, or the nearest
/// workspace's (`store::location`).
struct Places {
    store: Option<PathBuf>,
    workspace: Option<PathBuf>,
}

impl Places {
    fn store_path(&self) -> Result<PathBuf> {
        Ok(commands::existing_store(self.store.as_deref(), self.workspace.as_deref())?.path)
    }

    /// The store, for reading (status, log, explain, report).
    fn reader(&self) -> Result<Store> {
        let path = self.store_path()?;
        Store::open_ro(&path)?.ok_or_else(|| crate::store::location::no_store_at(&path))
    }

    fn existing(&self) -> Result<Store> {
        commands::open_existing(self.store.as_deref(), self.workspace.as_deref())
    }
}

/// A file handed in as evidence, by its content (the same path with other
/// bytes is another command).
fn evidence_digest(path: Option<&Path>) -> Result<Option<String>> {
    let Some(path) = path else { return Ok(None) };
    // Over the bound, `settle` refuses it with the size; nothing to digest.
    if std::fs::metadata(path).is_ok_and(|m| m.len() > crate::limits::EVIDENCE_BYTES_MAX) {
        return Ok(None);
    }
    let bytes = std::fs::read(path)
        .map_err(|e| Error::usage(format!("cannot read evidence file: {e}")).at(path.display().to_string()))?;
    Ok(Some(crate::digest::content(&bytes)))
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
