// The command line's definition: every command, argument, help text and
// example. Only `clap` and `std` here: the build script includes this file
// (`include!`) to write the shell completions and the man pages, so the
// binary and what it ships cannot disagree. `cli/mod.rs` wires each
// command to the library.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// What the top-level `--help` says after the command list.
pub const AFTER_HELP: &str = "\
Start here:
  engine init first-plan          write a starter plan and its agent script
  engine check first-plan/plan.json
  engine run first-plan/plan.json

Exit codes: 0 goal satisfied, 1 a task failed, 2 bad input or usage,
3 an outcome is unknown (settle it), 4 an approval is needed, 5 a budget
is spent, 6 another engine holds the store, 70 internal error.
The reference (plan format, commands, codes, states) is in docs/.";

#[derive(Debug, Parser)]
#[command(
    name = "engine",
    about = "A goal-aware plan engine for work done by tools and AI agents",
    long_about = "A goal-aware plan engine for work done by tools and AI agents.\n\n\
        You hand it a plan file: a goal (statement, acceptance checks, constraints) and a DAG of \
        tasks, each done by a provider (a local command, an HTTP service, an MCP tool server, an AI \
        agent CLI). It runs the tasks and keeps a ledger: an intent before every provider call, a \
        receipt after it, evidence for every verdict, and a stop that names what a person must do \
        when it cannot tell whether an effect happened.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Print one JSON document on stdout instead of text (errors too, as
    /// {"ok": false, "error": {...}}).
    #[arg(long, global = true)]
    pub json: bool,
    /// The ledger: a SQLite file, or a shared PostgreSQL ledger
    /// (postgres://USER@HOST:PORT/DB). Default: $ENGINE_STORE, else the
    /// workspace's store under ${XDG_STATE_HOME:-~/.local/state}/engine/stores/
    /// (outside the workspace, where no task can write).
    #[arg(long, global = true, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// The workspace folder: where tasks run and inputs are read. Default: the
    /// plan file's folder, else the current folder.
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Colour for people: `auto` on a terminal unless NO_COLOR is set,
    /// `always` (even in a pipe, and over NO_COLOR), `never`. --json is
    /// never coloured.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set (or TERM is dumb).
    Auto,
    /// Always, even when the output is not a terminal, and over NO_COLOR.
    Always,
    /// Never.
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a starter plan (and the small agent script it uses) into DIR.
    #[command(
        long_about = "Write a starter plan into DIR: plan.json (a command task, an agent-json task, a \
            validation, an acceptance check, budgets) and agent.sh, the small agent it uses. \
            `engine run DIR/plan.json` takes it to `satisfied` as it is. Existing files are never \
            overwritten: init refuses and names them.",
        after_help = "Examples:\n  engine init first-plan\n  engine init            # into the current folder"
    )]
    Init {
        /// The folder to write into (created if missing). Default: the current folder.
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Validate a plan file, and warn about its traps; runs nothing.
    #[command(
        long_about = "Validate a plan file (schema, references, cycles, providers, paths, every bound) and \
            runs nothing. Errors exit 2 with their code and place. Warnings (a task without `effect`, \
            an executable not found, an input that matches no file, a cost over `max_cost`, a goal \
            without acceptance checks) go to stderr, and to `warnings` with --json; they do not change \
            the exit code.",
        after_help = "Examples:\n  engine check plan.json\n  engine check plan.json --json | jq .warnings"
    )]
    Check {
        /// The plan file (JSON, "version": 1).
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
    },
    /// Print the plan's digests: goal contract, and each task's meaning, dependencies, request and operation id.
    #[command(after_help = "Example:\n  engine digest plan.json")]
    Digest {
        /// The plan file.
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
    },
    /// Print the task graph (Graphviz dot or Mermaid).
    #[command(
        after_help = "Examples:\n  engine graph plan.json | dot -Tsvg > plan.svg\n  engine graph plan.json --format mermaid"
    )]
    Graph {
        /// The plan file.
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
        /// The output format.
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
    },
    /// Run a plan: register goal and plan, reconcile in-doubt operations, run ready tasks, then acceptance checks.
    #[command(
        long_about = "Register the goal and the plan (the first run) or check that the plan is the goal's \
            active revision (a changed plan is refused with PLAN_CHANGED: use `engine revise`), \
            reconcile any operation left in doubt, run the ready tasks, then the goal's acceptance \
            checks. A re-run keeps what still holds: tasks it did not run are shown as `kept`, \
            `reused` or `failed earlier`.",
        after_help = "Examples:\n  engine run plan.json\n  engine run plan.json --jobs 1 --json\n  engine run plan.json --dry-run   # what it would do; does nothing"
    )]
    Run {
        /// The plan file.
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
        /// How many ready tasks run at once. Default: the number of CPUs.
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// Share the store (a --store PATH or ENGINE_STORE file, not the
        /// state folder's) with this OS group, as its owner: folder 2770,
        /// files 0660, that group's; recorded in PATH.group, so every
        /// member's engine can act on it. See docs/store.md.
        #[arg(long, value_name = "GROUP")]
        store_group: Option<String>,
        /// A person's act: keep completions whose tool changed (a new
        /// executable, script, MCP server or tool schema: TOOL_CHANGED)
        /// instead of running them again; each is recorded naming you.
        #[arg(long)]
        reuse_across_tool_change: bool,
        /// Say what a run would do now, task by task (kept, reused, would run, would wait for
        /// approval, blocked), with what it would spend: starts no process, opens no connection,
        /// writes nothing to the store.
        #[arg(long, conflicts_with = "store_group")]
        dry_run: bool,
        #[command(flatten)]
        show: Show,
    },
    /// Shared (PostgreSQL) store: register the goal and its plan revision for workers, and return.
    #[command(
        long_about = "Register the goal and its plan revision on a shared PostgreSQL store (or check that \
            the plan is the goal's active revision: a changed plan is PLAN_CHANGED) and mark the goal \
            open for workers; runs nothing. `engine worker` on any machine takes its ready tasks up.",
        after_help = "Example:\n  engine submit plan.json --store postgres://engine@db.internal:5432/engine"
    )]
    Submit {
        /// The plan file.
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
    },
    /// Shared (PostgreSQL) store: claim and run ready tasks of any open goal (or one), in this workspace.
    #[command(
        long_about = "Claim ready tasks of any open goal on a shared PostgreSQL store (or of --goal only), \
            each under a lease with a heartbeat and a fencing generation, run them in this worker's \
            --workspace and record their receipts. Without --goal a worker works until it is stopped; \
            with --goal it returns that goal's report once the goal is judged.",
        after_help = "Examples:\n  engine worker --store postgres://engine@db.internal:5432/engine --jobs 4\n  \
            engine worker --goal money-totals --workspace /srv/checkout"
    )]
    Worker {
        /// How many ready tasks this worker runs at once. Default: the number of CPUs.
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// Work this goal only, and return its report once it is judged.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
        #[command(flatten)]
        show: Show,
    },
    /// Show a goal: its revision, every task's state, what waits on a person, budgets used.
    #[command(after_help = "Examples:\n  engine status\n  engine status --goal money-totals --json")]
    Status {
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
    },
    /// List the goals in the store, with their state, revision and last change.
    #[command(after_help = "Example:\n  engine goals")]
    Goals,
    /// List the default stores in the state folder; --prune removes those whose workspace is gone.
    #[command(
        long_about = "List the stores in the state folder (${XDG_STATE_HOME:-~/.local/state}/engine/stores): \
            each one's workspace and whether it still exists, its size, when it was last written, and the \
            operations in it whose outcome no one knows yet. With --prune, remove the stores whose \
            workspace is gone, except one a live engine holds or one with an operation whose outcome is \
            unknown or in doubt (or that cannot be read), which --force removes too. Says what was removed, \
            what was kept and why. A store chosen with --store or ENGINE_STORE is not in the state folder \
            and is never listed.",
        after_help = "Examples:\n  engine stores\n  engine stores --prune\n  engine stores --prune --force --json"
    )]
    Stores {
        /// Remove the stores whose workspace is gone (and wait on nothing).
        #[arg(long)]
        prune: bool,
        /// With --prune: remove them even with unknown or in-doubt operations, or unreadable.
        #[arg(long, requires = "prune")]
        force: bool,
    },
    /// Authorize the engine, as a person, for an MCP server that wants OAuth (shows the URL to open).
    #[command(
        long_about = "Authorize the engine for a plan's MCP provider whose server wants OAuth (`auth.oauth`): \
            finds the server's authorization server (its protected resource metadata, then the server's \
            own metadata), registers a client when the plan names none, shows the authorization URL on \
            stderr, waits for the browser's redirect on 127.0.0.1 (an ephemeral port; a redirect whose \
            state is not this login's ends it), exchanges the code (PKCE S256, the server named as the \
            `resource`) and keeps the tokens in ${XDG_STATE_HOME:-~/.local/state}/engine/oauth (a 0600 \
            file), never in a workspace or a store. A pre-registered client's secret is read from where \
            the plan names it (`client_secret`: an environment variable or a file) and kept with them. \
            Runs then use and refresh them; no run ever asks for a new one. A run that stopped \
            AUTHORIZATION_REQUIRED because the server asked for more scope names the --scope to log in with.",
        after_help = "Example:\n  engine login plan.json notes\n  engine login plan.json notes --timeout 600 --json\n  engine login plan.json notes --scope 'notes:read notes:write'"
    )]
    Login {
        /// The plan file.
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
        /// The MCP provider's name in the plan's `providers`.
        #[arg(value_name = "PROVIDER")]
        provider: String,
        /// How long to wait for the browser's redirect, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 300)]
        timeout: u64,
        /// The scopes to ask for, space-separated, instead of the plan's and the server's (a step-up the
        /// server asked for: a stopped run names them).
        #[arg(long, value_name = "SCOPES")]
        scope: Option<String>,
    },
    /// Explain a task: its attempts, evidence, classification, claims kept apart, and reuse decision.
    #[command(after_help = "Examples:\n  engine explain T2\n  engine explain T2 --goal money-totals --json")]
    Explain {
        /// The task's ref, as in the plan.
        #[arg(value_name = "REF")]
        task_ref: String,
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
    },
    /// Print a task's whole captured output, bytes as they are.
    #[command(
        long_about = "Print the output the engine captured from a task's provider (stdout, or stderr with \
            --stderr): the whole of what was kept, bytes as they are. Nothing is escaped, since you \
            asked for the raw output: control characters reach your terminal. Output over 1 MiB was \
            kept as its first and last 512 KiB; where the middle is missing, stderr says how many \
            bytes and where.",
        after_help = "Examples:\n  engine output T2\n  engine output T2 --attempt 2 --stderr > t2-stderr.txt"
    )]
    Output {
        /// The task's ref, as in the plan.
        #[arg(value_name = "REF")]
        task_ref: String,
        /// The task's attempt N (1 is its first, as `engine explain` numbers them). Default: its latest attempt with output.
        #[arg(long, value_name = "N")]
        attempt: Option<i64>,
        /// Print what the provider wrote on stderr instead of stdout.
        #[arg(long)]
        stderr: bool,
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
    },
    /// Print the event log, in ledger order: one readable line per event (--json: the raw events).
    #[command(
        long_about = "Print the event log in ledger order. For a person, one line per event: its sequence \
            number, time (UTC), task and attempt (numbered as the task counts them), and what happened, \
            digests cut to 16 characters. --json prints the raw events, digests whole.",
        after_help = "Examples:\n  engine log --task T2\n  engine log --follow --json\n  engine log --goal money-totals --after 120"
    )]
    Log {
        /// Keep printing new events as they are written (Ctrl-C to stop).
        #[arg(long)]
        follow: bool,
        /// Only this task's events (of --goal's goal; default: the goal most
        /// recently run).
        #[arg(long = "task", value_name = "REF")]
        task_ref: Option<String>,
        /// Only events after this sequence number.
        #[arg(long, value_name = "SEQ", default_value_t = 0)]
        after: i64,
        /// Only this goal's events. Default: every event.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
    },
    /// Settle an operation whose outcome is unknown (a person's act); runs nothing.
    #[command(
        long_about = "Record a person's settlement of an operation whose outcome the engine could not \
            establish (`effect_unknown`): `ok` (it took effect) or `not_run` (it did not). Runs \
            nothing; an operation settled `not_run` is sent again only by `engine retry`.",
        after_help = "Examples:\n  engine settle op_3f2a9c0d1e2b4c5d6e7f8091 --outcome ok --note \"the invoice is in the billing system\"\n  engine settle op_3f2a9c0d1e2b4c5d6e7f8091 --outcome not_run --note \"not in the receiver's log\" --evidence log.txt\n  engine settle op_3f2a9c0d1e2b4c5d6e7f8091 --outcome ok --note \"paid\" --request-id ticket-4711   # safe to repeat"
    )]
    Settle {
        /// The operation id (`op_` and 24 hex digits), as `engine status` shows it.
        #[arg(value_name = "OPERATION_ID")]
        operation_id: String,
        /// What happened: `ok` (it took effect) or `not_run` (it did not).
        #[arg(long, value_enum)]
        outcome: OutcomeArg,
        /// What you checked (required, non-empty); recorded.
        #[arg(long, value_name = "TEXT")]
        note: String,
        /// Who settles. Default: the OS user.
        #[arg(long, value_name = "NAME")]
        actor: Option<String>,
        /// A file kept with the settlement as evidence.
        #[arg(long, value_name = "FILE")]
        evidence: Option<PathBuf>,
        /// Given again, the same command gives its first answer and does nothing new;
        /// the same id with other arguments is REQUEST_ID_CONFLICT.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Approve the exact request an operation waits on (a person's act); consumed by one call.
    #[command(
        long_about = "Record a person's approval of the request an operation waits on \
            (`awaiting_approval`). It is bound to that operation, its request digest and the plan \
            revision, and spent by the one call it allows: the next `engine run PLAN`, or `engine \
            retry OPERATION_ID` or `engine repair REF` when a person's retry or repair asked for it \
            (`engine status` names which).",
        after_help = "Examples:\n  engine approve op_3f2a9c0d1e2b4c5d6e7f8091 --note \"checked the amount: 12.40 EUR\"\n  engine approve op_3f2a9c0d1e2b4c5d6e7f8091 --note \"today only\" --for 2h --expect-cost 12.4"
    )]
    Approve {
        /// The operation id, as `engine status` shows it.
        #[arg(value_name = "OPERATION_ID")]
        operation_id: String,
        /// Why this request may go (required, non-empty); recorded.
        #[arg(long, value_name = "TEXT")]
        note: String,
        /// The cost the person expects the call to have: refused, nothing
        /// recorded, when the waiting call's cost differs.
        #[arg(long, value_name = "N")]
        expect_cost: Option<f64>,
        /// How long it lasts (`90s`, `5m`, `2h`, `1d`; default: the plan's `approvals.expire_after`).
        #[arg(long = "for", value_name = "DURATION")]
        for_: Option<String>,
        /// Who approves. Default: the OS user.
        #[arg(long, value_name = "NAME")]
        actor: Option<String>,
        /// Given again, the same command gives its first answer and does nothing new;
        /// the same id with other arguments is REQUEST_ID_CONFLICT.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Answer what a task's MCP server asked a person (a person's act); the next run sends it (external or paid work: once a person approves that call).
    #[command(
        long_about = "Record a person's answer to the question a task's MCP server asked \
            (the task is `awaiting_input`; `engine status` and `engine explain REF` show the question). \
            The fields are checked against the question's schema: an unknown field, a required one \
            missing or a value of the wrong type is ANSWER_INVALID naming the field, and nothing is \
            recorded. The answer goes on the act chain; the next `engine run PLAN` sends it in the \
            call that resumes the task.",
        after_help = "Examples:\n  engine answer T2 --field name=Ada --field count=3\n  engine answer T2 --field name=Ada --for 2h   # not sent after two hours\n  engine answer T2 --field q1.name=Ada --field q2.agree=true   # several questions: KEY.FIELD\n  engine answer T2 --accept    # a URL question: you went there and did what it asks\n  engine answer T2 --decline"
    )]
    Answer {
        /// The task's ref, as in the plan.
        #[arg(value_name = "REF")]
        task_ref: String,
        /// A field of the question's form, typed by its schema (repeat for each field).
        #[arg(long = "field", value_name = "NAME=VALUE")]
        fields: Vec<String>,
        /// Accept the URL questions (you went to the URL and did what it asks).
        #[arg(long)]
        accept: bool,
        /// Decline every question (the server is told the person said no).
        #[arg(long)]
        decline: bool,
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
        /// How long it lasts (`90s`, `5m`, `2h`, `1d`; default: the plan's `approvals.expire_after`).
        #[arg(long = "for", value_name = "DURATION")]
        for_: Option<String>,
        #[command(flatten)]
        asker: Asker,
    },
    /// Hold a task (or, with --goal and no REF, the whole goal): nothing of it starts or is retried until released (a person's act).
    #[command(
        long_about = "Record a person's hold on a task of the goal's active revision (or, with --goal and no REF, \
            on every task of the goal): no run starts or retries it until `engine release`; its dependants wait \
            on it, the rest of the goal goes on, and a run with only held work left ends HELD (exit 4). \
            On the act chain; `people.hold` (default: the `retry` people) says who may. Runs nothing.",
        after_help = "Examples:\n  engine hold T3 --reason \"the vendor's API is down until Monday\"\n  engine hold --goal --reason \"freeze during the audit\"\n  engine hold T3 --goal money-totals --reason \"wait for the new price list\""
    )]
    Hold {
        /// The task's ref, as in the plan (none with --goal: the whole goal).
        #[arg(value_name = "REF", required_unless_present = "goal")]
        task_ref: Option<String>,
        /// With a REF: the goal id of the task (default: the goal most recently run). Without: hold the whole goal (that id, or the latest).
        #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
        goal: Option<String>,
        /// Why (required, non-empty); recorded.
        #[arg(long, value_name = "WHY")]
        reason: String,
        #[command(flatten)]
        asker: Asker,
    },
    /// End a person's hold on a task (or, with --goal and no REF, the goal's): the next run may start it.
    #[command(after_help = "Examples:\n  engine release T3\n  engine release --goal")]
    Release {
        /// The held task's ref (none with --goal: the goal's hold).
        #[arg(value_name = "REF", required_unless_present = "goal")]
        task_ref: Option<String>,
        /// With a REF: the goal id of the task. Without: release the goal's own hold (that id, or the latest goal).
        #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
        goal: Option<String>,
        /// Why (optional); recorded.
        #[arg(long, value_name = "WHY")]
        reason: Option<String>,
        #[command(flatten)]
        asker: Asker,
    },
    /// Send a task's latest call again: one settled `not_run`, or one that failed retryably (same operation id, next try).
    #[command(
        long_about = "Send a task's latest call again, with the same operation id and the next try number: \
            one a person settled `not_run`, or one that failed in a way a re-send can fix \
            (provider_unavailable, timeout, environment, killed). An approval is checked again where \
            the task needs one. Then the run goes on.",
        after_help = "Examples:\n  engine retry T3\n  engine retry T3 --goal money-totals\n  engine retry op_3f2a9c0d1e2b4c5d6e7f8091   # an operation id works too"
    )]
    Retry {
        /// The task's ref, as in the plan (or the operation id of a task's
        /// latest call, as `engine status` shows it).
        #[arg(value_name = "REF")]
        task_ref: String,
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
        /// Re-send an operation settled `not_run` without reading it back
        /// first, when its read-back cannot answer (a person's act, with
        /// --reason).
        #[arg(long, requires = "reason")]
        without_read_back: bool,
        /// Why it is re-sent without its read-back (recorded).
        #[arg(long, value_name = "WHY", requires = "without_read_back")]
        reason: Option<String>,
        /// How many ready tasks run at once. Default: the number of CPUs.
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        #[command(flatten)]
        asker: Asker,
        #[command(flatten)]
        show: Show,
    },
    /// A new attempt of a failed task in the same plan, with the failure evidence handed to its provider.
    #[command(
        after_help = "Examples:\n  engine repair T2\n  engine repair T2 --instruction \"sum cents, not float dollars\"\n  engine repair T3 --force --note \"the service was fixed\""
    )]
    Repair {
        /// The failed task's ref.
        #[arg(value_name = "REF")]
        task_ref: String,
        /// Guidance for the provider (part of the request: a new instruction is a new operation).
        #[arg(long, value_name = "TEXT")]
        instruction: Option<String>,
        /// The provider to repair with. Only the plan's own is allowed; another is refused (revise the plan instead).
        #[arg(long, value_name = "NAME")]
        provider: Option<String>,
        /// Repair a failure whose class does not suggest a repair (needs --note).
        #[arg(long, requires = "note")]
        force: bool,
        /// Why the forced repair is right; recorded.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
        /// How many ready tasks run at once. Default: the number of CPUs.
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        #[command(flatten)]
        asker: Asker,
        #[command(flatten)]
        show: Show,
    },
    /// Run a succeeded task again in a new attempt (and, with --downstream, what depends on it), keeping every other completion.
    #[command(
        long_about = "A person's act: a succeeded task whose result you do not trust runs again in a new \
            attempt, as a new operation (its own operation id); with --downstream every task that depends \
            on it, transitively, runs again too; every other completion is kept. An external or paid task's \
            re-run waits on a person's approval like any new call. A task with an operation whose outcome \
            is unknown is refused (settle it first); a held task too. On the act chain; `people.retry` says \
            who may. Then the run goes on.",
        after_help = "Examples:\n  engine rerun T2 --reason \"the report it wrote looks truncated\"\n  engine rerun T2 --downstream --reason \"the price list was wrong\""
    )]
    Rerun {
        /// The succeeded task's ref.
        #[arg(value_name = "REF")]
        task_ref: String,
        /// Run every task that depends on it (transitively) again too.
        #[arg(long)]
        downstream: bool,
        /// Why (required, non-empty); recorded.
        #[arg(long, value_name = "WHY")]
        reason: String,
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
        /// How many ready tasks run at once. Default: the number of CPUs.
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        #[command(flatten)]
        asker: Asker,
        #[command(flatten)]
        show: Show,
    },
    /// Record a new plan revision (goal or tasks changed), show which tasks are reused and why, then run it.
    #[command(
        after_help = "Examples:\n  engine revise plan.json --reason \"T3 posts to the new endpoint\"\n  engine revise plan.json --reason \"drop T4\" --no-run\n  engine revise plan.json --reason \"two more tries\" --raise max_attempts_per_task=5\n  engine revise plan.json --reason \"T2 needs the network\" --approve-loosening"
    )]
    Revise {
        /// The changed plan file.
        #[arg(value_name = "PLAN")]
        plan: PathBuf,
        /// Why the plan changed (required); recorded with the revision.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Record the revision and show the reuse decisions, but run nothing.
        #[arg(long)]
        no_run: bool,
        /// How many ready tasks run at once. Default: the number of CPUs.
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        #[command(flatten)]
        asker: Asker,
        /// Raise a budget, as your recorded act (repeatable): any of
        /// deadline_seconds, max_attempts_per_task, max_provider_calls,
        /// max_cost, max_revisions, above the limit in force. With the plan
        /// unchanged, only the raise is recorded.
        #[arg(long, value_name = "NAME=VALUE")]
        raise: Vec<String>,
        /// Approve what this revision loosens (sandbox, network, env,
        /// budgets, constraints, protected paths, people, a tool
        /// allow-list), as your recorded act; without it such a revision is
        /// refused with LOOSENING_NEEDS_APPROVAL, listing each loosening.
        #[arg(long)]
        approve_loosening: bool,
        /// Change the plan's `people` as the store's owner (its folder's
        /// owner), though the lists in force do not name you: the way out
        /// when the only people they name are gone. Recorded with the
        /// reason on the act chain. SQLite stores only.
        #[arg(long)]
        people: bool,
        #[command(flatten)]
        show: Show,
    },
    /// Print the JSON Schema of the plan file.
    #[command(
        after_help = "Example:\n  engine schema > plan.schema.json   # then \"$schema\": \"plan.schema.json\" in the plan"
    )]
    Schema,
    /// A goal's revision as one self-contained HTML page (--html FILE) or one JSON document (--json).
    #[command(
        after_help = "Examples:\n  engine report --html report.html\n  engine report --goal money-totals --revision 1 --json"
    )]
    Report {
        /// The goal id. Default: the goal most recently run in this store.
        #[arg(long, value_name = "ID")]
        goal: Option<String>,
        /// The revision. Default: the goal's active one.
        #[arg(long, value_name = "N")]
        revision: Option<i64>,
        /// Write the page to FILE (it fetches nothing; open it from disk).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Leave the generation time out, so the same ledger gives the same bytes
        /// (otherwise $SOURCE_DATE_EPOCH, when set, is the time printed).
        #[arg(long)]
        no_timestamp: bool,
    },
    /// Check the store: SQLite's integrity, foreign keys, then the ledger's own invariants; read-only.
    #[command(
        after_help = "Examples:\n  engine verify\n  engine verify --store /backups/engine.db --json\n  engine verify --store 'postgres://engine@db:5432/ledger?sslmode=verify-full'"
    )]
    Verify,
    /// Print the shell completions for bash, zsh or fish.
    #[command(
        long_about = "Print the completion script for a shell (written when the engine was built, from \
            this very command line). Install it where your shell looks for completions.",
        after_help = "Examples:\n  engine completions bash > ~/.local/share/bash-completion/completions/engine\n  engine completions zsh > ~/.zfunc/_engine\n  engine completions fish > ~/.config/fish/completions/engine.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum, value_name = "SHELL")]
        shell: Shell,
    },
    /// Print a man page (engine, or one command's), or write them all into a folder.
    #[command(
        after_help = "Examples:\n  engine man | man -l -\n  engine man run | man -l -\n  engine man --dir ~/.local/share/man/man1"
    )]
    Man {
        /// The command whose page to print. Default: the page of `engine` itself.
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
        /// Write every page (engine.1, engine-run.1, ...) into DIR instead of printing one.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
}

/// Who asks for a person's act that starts work (retry, repair, revise),
/// and the request id that makes asking again safe.
#[derive(Debug, Args)]
pub struct Asker {
    /// Who asks. Default: the OS user. Refused (NOT_PERMITTED) when the plan's
    /// `people` does not name them for this act.
    #[arg(long, value_name = "NAME")]
    pub actor: Option<String>,
    /// Given again, the same command gives its first answer and does nothing new;
    /// the same id with other arguments is REQUEST_ID_CONFLICT.
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
}

/// How a run shows itself: its progress (on stderr; stdout keeps the
/// summary), and its trace.
#[derive(Debug, Args)]
pub struct Show {
    /// `auto`: a live view on a terminal, plain lines elsewhere; `plain`:
    /// one line per task start and end, always.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Print only the summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Export the run's OpenTelemetry trace (OTLP over HTTP, protobuf) to
    /// the collector at URL (`/v1/traces` appended). Default:
    /// $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
    /// $OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces`; neither: no trace.
    /// See docs/observation.md.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

/// `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProgressMode {
    /// A live view on a terminal, plain lines elsewhere.
    Auto,
    /// One line per task start and end.
    Plain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

/// A person's settlement outcome, as typed on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutcomeArg {
    /// The operation took effect.
    #[value(name = "ok")]
    Ok,
    /// The operation did not take effect.
    #[value(name = "not_run")]
    NotRun,
}

/// The shells `engine completions` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub const ALL: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

    /// The file the build writes its completions to (clap_complete's name).
    pub fn file_name(self) -> &'static str {
        match self {
            Shell::Bash => "engine.bash",
            Shell::Zsh => "_engine",
            Shell::Fish => "engine.fish",
        }
    }
}
