//! Every limit of the engine, in one place (TigerStyle: a limit on
//! everything — every input, capture, queue and wait). Units are in the
//! names; sizes are in bytes of UTF-8, counts in items. ARCHITECTURE.md
//! lists the engine's and the providers' own; docs/limits.md lists the plan's
//! in a table — keep them in step.
//!
//! The plan's bounds are checked by `engine check` — and so by every
//! command that loads a plan — before anything else happens, each refusal
//! `PLAN_INVALID` with the exact JSON path.

use std::time::Duration;

// ------------------------------------------------------------ the plan

/// A plan file. Read at most this plus one byte, whatever the file's size
/// field says (a device or a `/proc` file says 0).
/// 256 MiB holds a fan-out of a million short tasks (about 90 bytes each).
pub const PLAN_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Nesting of objects and arrays, counted from the document (`{"tasks":
/// [{"action": {...}}]}` is 4 deep at the action's members). serde_json
/// stops anything past 128 while parsing; this bound names the place.
pub const PLAN_DEPTH_MAX: usize = 64;

/// Tasks in one plan. `engine check` and `engine run` grow linearly with
/// it: the figures at 10,000, 100,000 and 1,000,000 tasks are in
/// docs/limits.md (bench/, workload "growth").
pub const TASKS_MAX: usize = 1_000_000;

/// An identifier: task ref, goal id, provider name, acceptance and
/// validation id, context name. 1 to this many bytes of
/// `[A-Za-z0-9_.:/-]`, starting with a letter or digit: refs are typed on
/// command lines and printed in tables, so they carry no spaces, quotes
/// or control characters.
pub const ID_BYTES_MAX: usize = 128;

/// A task's title.
pub const TITLE_BYTES_MAX: usize = 1024;

/// A statement: the goal's, an acceptance criterion's, a constraint.
pub const STATEMENT_BYTES_MAX: usize = 16 * 1024;

/// Acceptance criteria of the goal, and constraints (each).
pub const ACCEPTANCE_MAX: usize = 1000;
pub const CONSTRAINTS_MAX: usize = 1000;

/// Providers of a plan.
pub const PROVIDERS_MAX: usize = 1000;

/// Per task: declared inputs, dependencies, validations, context values.
pub const INPUTS_MAX: usize = 10_000;
pub const DEPENDENCIES_MAX: usize = 10_000;
pub const VALIDATIONS_MAX: usize = 1000;
pub const CONTEXT_MAX: usize = 1000;

/// Per constraint: protected paths or globs; per task: `may_change` paths
/// or globs.
pub const PROTECT_PATHS_MAX: usize = 1000;
pub const MAY_CHANGE_MAX: usize = 1000;

/// Per task: `outputs` paths or globs.
pub const OUTPUT_PATTERNS_MAX: usize = 1000;

/// An MCP provider's `tools` allow-list, and the tools a server's
/// `tools/list` may name before the engine refuses its inventory.
pub const TOOLS_MAX: usize = 4096;

/// An input path or glob (Linux's `PATH_MAX`).
pub const PATH_BYTES_MAX: usize = 4096;

/// Files one declared input may expand to; more is an error, not a cut.
pub const INPUT_FILES_MAX: usize = 1_000_000;

/// An argv (a command action, a check, an MCP server's command, a context
/// command): items, and bytes of each item (Linux refuses a single
/// argument over 128 KiB anyway).
pub const ARGV_ITEMS_MAX: usize = 4096;
pub const ARG_BYTES_MAX: usize = 128 * 1024;

/// Names of secret variables, and the bytes of each name.
pub const SECRETS_MAX: usize = 1000;

/// A URL (HTTP endpoint, observe template).
pub const URL_BYTES_MAX: usize = 8 * 1024;

/// A read-back rule (`observe`, a task's or a provider's), as JSON.
pub const OBSERVE_RULE_BYTES_MAX: usize = 64 * 1024;

/// A task's, validation's or check's `timeout_seconds` (30 days).
pub const TIMEOUT_SECONDS_MAX: u64 = 30 * 24 * 3600;

/// Paths a provider declares writable (`"sandbox": {"write": [...]}`);
/// each is bounded by `PATH_BYTES_MAX`.
pub const SANDBOX_WRITES_MAX: usize = 256;

/// User names in each list of `people` (each bounded by `ID_BYTES_MAX`).
pub const PEOPLE_MAX: usize = 1000;

/// `network.connect` entries of a provider or a task, and the bytes of one
/// (`HOST:PORT`: a DNS name is at most 253 bytes).
pub const CONNECT_MAX: usize = 256;
pub const ENDPOINT_BYTES_MAX: usize = 300;

/// `env` names of a provider or a task (each bounded by `ID_BYTES_MAX`).
pub const ENV_NAMES_MAX: usize = 256;

// ------------------------------------------------------------ a run

/// Captured output kept per stream (stdout, stderr, an HTTP body, a tool's
/// result): its head and its tail; the rest is counted, and the cut is
/// recorded, never silent.
pub const OUTPUT_BYTES_MAX: usize = 1024 * 1024;

/// The excerpt of captured output kept in evidence, beside its blob.
pub const EXCERPT_LINES_MAX: usize = 20;
pub const EXCERPT_BYTES_MAX: usize = 2000;

/// Messages from in-flight work to the run's coordinator waiting to be
/// handled; a sender waits for room (each call sends at most three).
pub const RUN_MESSAGES_MAX: usize = 256;

/// The longest `Retry-After` the engine waits out before a retry; a longer
/// one is refused with the time to come back.
pub const RETRY_AFTER_WAIT_MAX_S: u64 = 300;

/// A file a person hands in with a settlement (`--evidence`).
pub const EVIDENCE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// A context command (a checkpoint's `context` value): its deadline, the
/// output captured, and the characters of its value kept.
pub const CONTEXT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
pub const CONTEXT_OUTPUT_BYTES_MAX: usize = 64 * 1024;
pub const CONTEXT_VALUE_CHARS_MAX: usize = 4096;

/// A checkpoint the run loop observes in place, on its coordinator thread:
/// at most this many literal input files and bytes to read, and no context
/// command; any other is observed on a blocking thread.
pub const OBSERVE_INLINE_FILES_MAX: usize = 64;
pub const OBSERVE_INLINE_BYTES_MAX: u64 = 1024 * 1024;

/// A cost (per call, or a `max_cost` budget), in the plan's units: 10^12
/// units is 10^18 micro-units, under `i64::MAX` (9.2 × 10^18), and a
/// budget's use never passes its limit by more than one call.
pub const COST_UNITS_MAX: f64 = 1e12;

/// An agent's report of what it spent (`spent`, docs/agent-json.md): its
/// entries, and the characters of each entry's `what` kept.
pub const SPENT_ITEMS_MAX: usize = 1000;
pub const SPENT_WHAT_CHARS_MAX: usize = 512;

/// The failing assertion quoted from a check's output (characters).
pub const FAILING_ASSERTION_CHARS_MAX: usize = 500;

/// A check (validation or acceptance) without its own `timeout_seconds`.
pub const CHECK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);

/// Events read from the ledger per page by `engine log`, and how often
/// `engine log --follow` looks for new ones.
pub const LOG_PAGE_EVENTS: i64 = 10_000;
pub const LOG_FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Goals `engine goals` lists (the most recently changed first; it says
/// how many more the store holds), and goal ids a "did you mean" reads.
pub const GOALS_LISTED_MAX: i64 = 1_000;

/// Stores `engine stores` examines in the state folder (by folder name;
/// it says how many more there are).
pub const STORES_LISTED_MAX: usize = 10_000;

/// A provider process a stopped engine left running gets this long
/// between SIGTERM and SIGKILL when the next writer ends its group.
pub const PROCESS_END_GRACE: Duration = Duration::from_secs(2);

/// A person stopped a run (SIGINT, SIGTERM, SIGHUP): its providers' and
/// checks' process groups get this long between SIGTERM and SIGKILL (a
/// second signal cuts it short), and calls without a process (HTTP, MCP)
/// this long to answer before the engine stops waiting for them.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// After SIGKILL, how long a stopped run waits for its calls and checks to
/// report before it records them as stopped without an answer.
pub const STOP_DRAIN_MAX: Duration = Duration::from_secs(10);

// ------------------------------------------------------------ the store

/// How long a writer waits for another connection's lock (a reader's
/// snapshot, a racing engine) before giving up.
pub const STORE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Prepared statements kept per connection (every statement the engine
/// runs fits, so none is parsed twice).
pub const STORE_STATEMENTS_CACHED: usize = 256;

/// How much of the store file a connection reads through a memory map
/// (SQLite's `mmap_size`) instead of copying each page with `pread` into
/// its own cache: address space, not memory (the pages are the kernel's
/// page cache). A store larger than this reads the rest with `pread`.
pub const STORE_MAP_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// The most bytes of WAL frames a ledger connection gathers into one
/// write (`store/sqlite/walbuf.rs`): SQLite's unix VFS writes at most
/// 0x1ffff bytes a call (`seekAndWriteFd` masks the length to 17 bits).
/// 31 frames of 4 KiB pages; a chain task's commits are 8 or 9 each, a
/// larger transaction is written in writes of up to this size.
pub const WAL_GATHER_BYTES_MAX: usize = 0x1ffff;

/// `--request-id`: its bytes (a UUID is 36; room for a caller's own
/// scheme, never for a document).
pub const REQUEST_ID_BYTES_MAX: usize = 256;

/// Ancestors of the current folder searched for a store (a path of at
/// most `PATH_BYTES_MAX` bytes has fewer).
pub const STORE_SEARCH_DEPTH_MAX: usize = 2048;

/// How long giving the lease back waits for a reader holding the WAL back
/// before it gives up on folding the WAL in (a checkpoint that could not
/// finish loses nothing).
pub const RELEASE_CHECKPOINT_WAIT: Duration = Duration::from_millis(200);

// ------------------------------------------------------- the PostgreSQL store

/// One attempt to connect to PostgreSQL.
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a lost connection is tried again (backoff from 50 ms doubling
/// to 2 s) before the command gives up.
pub const PG_RECONNECT_WAIT_MAX: Duration = Duration::from_secs(60);

/// One statement; past it the connection is taken for lost (a row lock a
/// live worker holds is released within one of its transactions).
pub const PG_STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// A write transaction is run again at most this many times after its
/// connection was lost before its commit, or after a serialization
/// failure; never after a commit that is known to have happened.
pub const PG_WRITE_TRIES_MAX: u32 = 5;

/// A task claim's lease unless `ENGINE_CLAIM_LEASE_MS` says otherwise; a
/// worker renews its claims every third of it.
pub const CLAIM_LEASE_DEFAULT: Duration = Duration::from_secs(30);

/// Bounds of `ENGINE_CLAIM_LEASE_MS`.
pub const CLAIM_LEASE_MIN: Duration = Duration::from_millis(500);
pub const CLAIM_LEASE_MAX: Duration = Duration::from_secs(3600);

/// How often a worker looks at the ledger for work other workers freed or
/// finished while it has nothing of its own to do.
pub const WORKER_POLL: Duration = Duration::from_millis(100);

/// Commit tokens (what tells a commit in doubt) are kept this long.
pub const COMMIT_TOKEN_KEEP: Duration = Duration::from_secs(3600);

/// Declared outputs a task may leave in the ledger, per succeeded attempt:
/// files, bytes of one file, bytes in all. More fails the task (class
/// `environment`, rule `outputs_over_limit`, naming the task and the
/// limit): its outputs are read into memory and committed in the
/// transaction that records its success, so they are kept small.
pub const OUTPUT_FILES_MAX: usize = 1_000;
pub const OUTPUT_FILE_BYTES_MAX: u64 = 64 * 1024 * 1024;
pub const OUTPUT_TASK_BYTES_MAX: u64 = 256 * 1024 * 1024;
