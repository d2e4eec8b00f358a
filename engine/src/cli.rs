//! The command line: clap arguments wired to library calls, and the one
//! place that turns results into output and exit codes. No decisions here.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

use clap::builder::PossibleValue;

use crate::commands::worker::{SubmitOptions, WorkerOptions};
use crate::commands::{self, repair::RepairRequest, revise::ReviseRequest, run::RunOptions};
use crate::error::{Error, Result};
use crate::ids::{GoalId, OperationId, Seq};
use crate::plan::Plan;
use crate::report::{self, emit, Output};
use crate::state::SettlementOutcome;
use crate::store::{self, Store};

#[derive(Debug, Parser)]
#[command(name = "engine", version = crate::report::VERSION, about = "A goal-aware plan engine for work done by tools and AI agents")]
pub struct Cli {
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The ledger file (default: <workspace>/.engine/engine.db; or $ENGINE_STORE), or a shared PostgreSQL ledger: postgres://USER@HOST:PORT/DB.
    #[arg(long, global = true, value_name = "PATH")]
    store: Option<PathBuf>,
    /// The workspace folder (default: the plan file's folder, else the current folder).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a plan file only (schema, cycles, refs, providers, paths).
    Check { plan: PathBuf },
    /// Print the plan's digests.
    Digest { plan: PathBuf },
    /// Print the task DAG.
    Graph {
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
    },
    /// Register the goal and plan, reconcile in-doubt operations, run ready tasks, then acceptance checks.
    Run {
        plan: PathBuf,
        /// Parallel ready tasks (default: number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Shared (PostgreSQL) store: register the goal and its plan revision for workers, and return.
    Submit { plan: PathBuf },
    /// Shared (PostgreSQL) store: claim and run ready tasks of any open goal (or one), in this workspace.
    Worker {
        /// Parallel tasks of this worker (default: number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
        /// Work this goal only, and return its report once it is judged.
        #[arg(long)]
        goal: Option<String>,
    },
    /// Goal, revision, every task's state, pending unknowns, budgets used.
    Status {
        /// The goal (default: the one most recently run in this store).
        #[arg(long)]
        goal: Option<String>,
    },
    /// Attempts, evidence, classification and claims of one task.
    Explain {
        #[arg(value_name = "REF")]
        task_ref: String,
        #[arg(long)]
        goal: Option<String>,
    },
    /// The event log.
    Log {
        /// Keep printing new events as they are written.
        #[arg(long)]
        follow: bool,
        /// Only events after this sequence number.
        #[arg(long, default_value_t = 0)]
        after: i64,
    },
    /// A person's settlement of an unknown effect; runs nothing.
    Settle {
        operation_id: String,
        #[arg(long, value_enum)]
        outcome: SettlementOutcome,
        /// What you checked (required, non-empty).
        #[arg(long)]
        note: String,
        /// Who settles (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
        /// A file kept with the settlement as evidence.
        #[arg(long, value_name = "FILE")]
        evidence: Option<PathBuf>,
    },
    /// A person's approval of the exact pending request; consumed by one call.
    Approve {
        operation_id: String,
        #[arg(long)]
        note: String,
        #[arg(long)]
        actor: Option<String>,
    },
    /// Re-send a settled-not-run or retryable operation (same operation id, next try).
    Retry {
        operation_id: String,
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// A new attempt of a failed task in the same plan, with the failure evidence handed to its provider.
    Repair {
        #[arg(value_name = "REF")]
        task_ref: String,
        /// Guidance for the provider (part of the request: a new instruction is a new operation).
        #[arg(long)]
        instruction: Option<String>,
        /// Only the plan's provider is allowed; another is refused (revise the plan instead).
        #[arg(long)]
        provider: Option<String>,
        /// Repair a failure whose class does not suggest repair (needs --note).
        #[arg(long, requires = "note")]
        force: bool,
        /// Why the forced repair is right; recorded.
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        goal: Option<String>,
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Record a new plan revision (goal or tasks changed); shows which tasks are reused and why, then runs.
    Revise {
        plan: PathBuf,
        #[arg(long)]
        reason: String,
        /// Record the revision and show the decisions, but run nothing.
        #[arg(long)]
        no_run: bool,
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Print the JSON Schema of the plan file.
    Schema,
    /// A goal's revision as one document (`--json`) or one self-contained HTML page (`--html FILE`).
    Report {
        /// The goal (default: the one most recently run in this store).
        #[arg(long)]
        goal: Option<String>,
        /// The revision (default: the goal's active one).
        #[arg(long)]
        revision: Option<i64>,
        /// Write the page to FILE (it fetches nothing; open it from disk).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Leave the generation time out, so the same ledger gives the same bytes
        /// (otherwise $SOURCE_DATE_EPOCH, when set, is the time printed).
        #[arg(long)]
        no_timestamp: bool,
    },
    /// Check the store (SQLite integrity, foreign keys, the ledger's invariants); read-only.
    Verify,
}

impl ValueEnum for SettlementOutcome {
    fn value_variants<'a>() -> &'a [Self] {
        SettlementOutcome::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.as_str()))
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum GraphFormat {
    Dot,
    Mermaid,
}

/// Parse arguments, run the command, print, and return the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Plain text (no colours), escaped: the arguments it quotes
            // back may hold control characters.
            let text = e.render().to_string();
            let text = report::escape::for_terminal(&text);
            return if e.use_stderr() {
                eprint!("{text}");
                2
            } else {
                emit(&text);
                0
            };
        }
    };
    let json = cli.json;
    match dispatch(cli) {
        Ok(out) => {
            if json {
                emit(&format!("{}\n", serde_json::to_string_pretty(&out.json).expect("serializes")));
            } else if !out.text.is_empty() {
                emit(&report::escape::for_terminal(&out.text));
            }
            out.exit_code
        }
        Err(e) => {
            if json {
                emit(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&json!({"ok": false, "error": e})).expect("serializes")
                ));
            }
            eprintln!("error: {}", report::escape::for_terminal(&e.to_string()));
            e.code.exit_code()
        }
    }
}

fn dispatch(cli: Cli) -> Result<Output> {
    let Cli { json, store, workspace, command } = cli;
    let at = Places { store, workspace };
    let ws = at.workspace.as_deref();
    match command {
        Command::Check { plan } => check(&plan, ws),
        Command::Digest { plan } => Ok(report::plan::digests(&Plan::load(&plan, ws)?)),
        Command::Graph { plan, format: GraphFormat::Dot } => Ok(report::plan::dot(&Plan::load(&plan, ws)?)),
        Command::Graph { plan, format: GraphFormat::Mermaid } => Ok(report::plan::mermaid(&Plan::load(&plan, ws)?)),
        Command::Schema => Ok(schema()),
        Command::Run { plan, jobs } => {
            let options =
                RunOptions { plan_path: plan, workspace: at.workspace, store: at.store, jobs: jobs_or_default(jobs) };
            Ok(report::run::render(&commands::run::run(options)?))
        }
        Command::Submit { plan } => {
            let options = SubmitOptions { plan_path: plan, workspace: at.workspace, store: at.store };
            let s = commands::worker::submit(options)?;
            let text = format!(
                "goal {} (revision {}) submitted to {}: workers take it up (`engine worker --goal {}`)\n",
                s.goal_id, s.revision, s.store, s.goal_id
            );
            Ok(Output { text, json: json!(s), exit_code: 0 })
        }
        Command::Worker { jobs, goal } => {
            let options = WorkerOptions {
                workspace: at.workspace,
                store: at.store,
                jobs: jobs_or_default(jobs),
                goal: goal.map(GoalId::new),
            };
            match commands::worker::work(options)? {
                Some(r) => Ok(report::run::render(&r)),
                None => Ok(Output { text: String::new(), json: json!({"ok": true}), exit_code: 0 }),
            }
        }
        Command::Settle { operation_id, outcome, note, actor, evidence } => {
            let mut ledger = at.lease()?;
            let actor = actor.unwrap_or_else(commands::os_user);
            let op = OperationId::new(operation_id);
            let s = commands::settle::settle(&mut ledger, &op, outcome, &note, &actor, evidence.as_deref())?;
            Ok(report::acts::settled(&s))
        }
        Command::Approve { operation_id, note, actor } => {
            let mut ledger = at.lease()?;
            let actor = actor.unwrap_or_else(commands::os_user);
            let a = commands::approve::record(&mut ledger, &OperationId::new(operation_id), &note, &actor)?;
            Ok(report::acts::approved(&a, &actor))
        }
        Command::Retry { operation_id, jobs } => {
            let report =
                commands::retry::retry(at.existing()?, &OperationId::new(operation_id), jobs_or_default(jobs))?;
            Ok(report::run::render(&report))
        }
        Command::Repair { task_ref, instruction, provider, force, note, goal, jobs } => {
            let force_note = if force { note } else { None };
            let request = RepairRequest {
                goal: goal.map(GoalId::new),
                task_ref,
                instruction,
                provider,
                force_note,
                jobs: jobs_or_default(jobs),
            };
            Ok(report::run::render(&commands::repair::repair(at.existing()?, request)?))
        }
        Command::Revise { plan, reason, no_run, jobs } => {
            let (workspace, store, jobs) = (at.workspace, at.store, jobs_or_default(jobs));
            let r =
                commands::revise::revise(ReviseRequest { plan_path: plan, workspace, store, reason, no_run, jobs })?;
            Ok(report::revise::render(&r))
        }
        Command::Status { goal } => report::status::render(&at.reader()?, goal.map(GoalId::new).as_ref()),
        Command::Explain { task_ref, goal } => {
            report::explain::render(&at.reader()?, goal.map(GoalId::new).as_ref(), &task_ref)
        }
        Command::Report { goal, revision, html, no_timestamp } => {
            let options = report::goal_report::Options {
                goal: goal.as_deref(),
                revision,
                html: html.as_deref(),
                json,
                no_timestamp,
            };
            report::goal_report::run(&at.reader()?, &options)
        }
        Command::Verify => verify(&at.store_path()),
        Command::Log { follow, after } => report::log::render(&at.reader()?, Seq(after), follow, json),
    }
}

fn check(plan: &Path, workspace: Option<&Path>) -> Result<Output> {
    let p = Plan::load(plan, workspace)?;
    let out = report::plan::check(&p);
    // The process ends next: freeing a 100,000-task plan piece by piece
    // would only cost time (about a tenth of `check`).
    std::mem::forget(p);
    Ok(out)
}

fn verify(path: &Path) -> Result<Output> {
    let v = store::verify::verify(path)?;
    let text = format!("store verified: {} checks ({})\n", v.checks.len(), v.store.display());
    Ok(Output { text, json: json!({"ok": true, "store": v.store, "checks": v.checks}), exit_code: 0 })
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

/// Where the store is: `--store`, `$ENGINE_STORE`, or the workspace's.
struct Places {
    store: Option<PathBuf>,
    workspace: Option<PathBuf>,
}

impl Places {
    fn store_path(&self) -> PathBuf {
        let ws = self.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        store::resolve_path(self.store.as_deref(), &ws)
    }

    fn reader(&self) -> Result<Store> {
        open_ro(self.store.as_deref(), self.workspace.as_deref())
    }

    fn existing(&self) -> Result<Store> {
        commands::open_existing(self.store.as_deref(), self.workspace.as_deref())
    }

    /// The existing store, its lease taken (a person's act writes).
    fn lease(&self) -> Result<store::LeaseGuard> {
        crate::run::orphans::take_lease(self.existing()?)
    }
}

/// Open the store for reading: `--store`, `$ENGINE_STORE`, or the
/// workspace's (the current folder unless `--workspace`).
fn open_ro(flag: Option<&Path>, workspace: Option<&Path>) -> Result<Store> {
    let ws = workspace.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let path = store::resolve_path(flag, &ws);
    Store::open_ro(&path)?.ok_or_else(|| {
        Error::usage(format!(
            "no store at {}: run `engine run PLAN` first (or pass --store / --workspace)",
            path.display()
        ))
    })
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
