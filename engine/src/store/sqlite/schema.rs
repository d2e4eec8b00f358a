//! The ledger's schema and its migrations. `user_version` holds the schema
//! version; a file newer than this binary is refused (`SCHEMA_TOO_NEW`)
//! rather than half-understood. A migration is never edited once released:
//! a store made by an older engine is migrated step by step (a schema-1
//! store is kept as a test fixture, `tests/fixtures/store-v1.sql`).

use rusqlite::Connection;

use crate::error::{Code, Error, Result};
use crate::store::queries::ddl::{render, Dialect};

/// Migrations in order; migration `i` takes the schema from `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
    MIGRATION_10,
    MIGRATION_11,
    MIGRATION_12,
    MIGRATION_13,
    MIGRATION_14,
    MIGRATION_15,
    MIGRATION_16,
    MIGRATION_17,
];

/// The migration after which the acts already in the store are put on the
/// act chain (`chain::adopt`): schema 6 brings the chain.
const CHAIN_FROM: usize = 6;

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const MIGRATION_1: &str = r#"
-- One writer at a time: the lease row (id = 1) names it.
CREATE TABLE lease (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    pid          INTEGER,
    host         TEXT,
    proc_start   TEXT,      -- the holder's start time, so a reused pid is not taken for it
    generation   INTEGER NOT NULL,
    acquired_at  INTEGER NOT NULL
);

-- Append-only event log; seq is the ledger's own order (never wall time).
{events}
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

-- Content-addressed blobs (BLAKE3 of the stored bytes).
{blobs}

{goals_head}
    -- Budget use, kept with the attempts it counts (same transactions):
    -- every attempt not abandoned, and the sum of its cost.
    calls_used       INTEGER NOT NULL DEFAULT 0,
    cost_used        REAL NOT NULL DEFAULT 0
);

{revisions}

{tasks}

-- An attempt row is born as the intent: the engine's durable decision to
-- send this exact request. (operation_id, try_no) is unique: the same try is
-- never dispatched twice.
{attempts_head}
    cost            REAL NOT NULL DEFAULT 0,
{attempts_progress}
    classification  TEXT,                    -- JSON: class, rule, evidence ids, next
    unknown_reason  TEXT,
    reusable        INTEGER,
    checkpoint      TEXT,                    -- checkpoint digest the validations judged
    inputs_at_intent TEXT,                   -- checkpoint digest observed when the intent was written
    instruction     TEXT,                    -- a repair's instruction, if any
{attempts_tail}

{evidence_tables}

-- The file-state cache: a file whose (size, mtime, ctime, inode, device) match was not
-- rewritten since it was hashed, unless it was modified within the mtime
-- granularity of the moment it was hashed (then it is hashed again).
CREATE TABLE file_cache (
    path         TEXT PRIMARY KEY,
{file_state}
);

{settlements}

{approvals}
"#;

/// The store's identity and its commit count (see `identity.rs`):
/// every `synchronous=FULL` write transaction and the lease's taking and
/// giving back add one to `commits` (a `NORMAL` commit is not counted: the
/// mark never records one), and the mark file beside
/// the store keeps the count outside the WAL, so a store that lost commits
/// is told from a new one. The id comes from SQLite's randomness (the OS's).
const MIGRATION_2: &str = r#"
CREATE TABLE store_meta (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    store_id       TEXT NOT NULL,
    commits        INTEGER NOT NULL CHECK (commits >= 0),
    created_at_ms  INTEGER NOT NULL
);
INSERT INTO store_meta (id, store_id, commits, created_at_ms)
VALUES (1, lower(hex(randomblob(16))), 0, CAST(unixepoch('subsec') * 1000 AS INTEGER));
"#;

/// Schema 3: the ledger's data as typed columns, where schemas 1 and 2
/// kept JSON or floats.
/// - A classification in columns of its own (class, rule, the evidence and
///   claim ids it cites, the next step) — never read back from JSON.
/// - Cost as integer micro-units (millionths): sums and budgets exact.
/// - The provider process an attempt runs in, recorded with its dispatch
///   (schema 1 kept it only in the `dispatched` event; carried over).
/// - The requests the engine asks a person to approve, as rows: an
///   approval binds to one by its operation id (schema 1 found a repair's
///   request by searching the `approval_required` events; those are
///   carried over).
const MIGRATION_3: &str = r#"
ALTER TABLE attempts ADD COLUMN class TEXT
    CHECK (class IS NULL OR class IN ('validation_failed','provider_rejected','provider_unavailable','timeout','killed','environment','effect_unknown','unclassified'));
ALTER TABLE attempts ADD COLUMN class_rule TEXT;
ALTER TABLE attempts ADD COLUMN class_evidence_ids TEXT;   -- JSON array of evidence ids
ALTER TABLE attempts ADD COLUMN class_claim_ids TEXT;      -- JSON array of claim ids
ALTER TABLE attempts ADD COLUMN class_next TEXT;
UPDATE attempts SET
    class = json_extract(classification, '$.class'),
    class_rule = json_extract(classification, '$.rule'),
    class_evidence_ids = COALESCE(json_extract(classification, '$.evidence_ids'), '[]'),
    class_claim_ids = COALESCE(json_extract(classification, '$.claims'), '[]'),
    class_next = json_extract(classification, '$.next')
  WHERE classification IS NOT NULL;
ALTER TABLE attempts DROP COLUMN classification;

ALTER TABLE attempts ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0 CHECK (cost_micros >= 0);
UPDATE attempts SET cost_micros = CAST(round(cost * 1000000) AS INTEGER);
ALTER TABLE attempts DROP COLUMN cost;
ALTER TABLE goals ADD COLUMN cost_used_micros INTEGER NOT NULL DEFAULT 0;
UPDATE goals SET cost_used_micros = CAST(round(cost_used * 1000000) AS INTEGER);
ALTER TABLE goals DROP COLUMN cost_used;

ALTER TABLE attempts ADD COLUMN process TEXT;             -- JSON: pid, pgid, start_time
UPDATE attempts SET process = (
    SELECT json_extract(e.data, '$.process') FROM events e
     WHERE e.attempt_id = attempts.id AND e.kind = 'dispatched' ORDER BY e.seq DESC LIMIT 1)
  WHERE dispatched_at_ms IS NOT NULL;

-- A request the engine asked a person to approve.
{pending_requests}
INSERT INTO pending_requests (operation_id, goal_id, revision, task_ref, request_digest, asked_at_ms)
  SELECT json_extract(data, '$.operation_id'), goal_id, revision, task_ref, json_extract(data, '$.request_digest'), at_ms
  FROM events WHERE kind = 'approval_required' ORDER BY seq;
"#;

/// Schema 4: the goal's constraints checked from evidence.
/// - The failure class `constraint_violated`: the class column's CHECK
///   names it (SQLite cannot alter a CHECK, so the column is copied into a
///   new one with the wider CHECK, the old one dropped, the new renamed).
/// - `protected_at_intent`: the digest of the checkpoint of the goal's
///   protected paths an attempt is judged against (observed before its
///   intent), so an attempt judged after a restart is judged against the
///   same state.
const MIGRATION_4: &str = r#"
ALTER TABLE attempts ADD COLUMN class_v4 TEXT
    CHECK (class_v4 IS NULL OR class_v4 IN ('validation_failed','provider_rejected','provider_unavailable','timeout','killed','environment','effect_unknown','unclassified','constraint_violated'));
UPDATE attempts SET class_v4 = class;
ALTER TABLE attempts DROP COLUMN class;
ALTER TABLE attempts RENAME COLUMN class_v4 TO class;
ALTER TABLE attempts ADD COLUMN protected_at_intent TEXT;
"#;

/// Schema 5: `cancelled`, the state of an attempt and of a task a person
/// stopped (SIGINT, SIGTERM, SIGHUP while it was in flight), is allowed by
/// the state CHECKs. Widening a CHECK changes no stored row, so the table
/// definitions are edited in place (SQLite's documented procedure for
/// changes that leave the content as it is: `writable_schema`, then the
/// schema reloaded and its cookie moved on by a throwaway view — a view
/// takes no page, so no free page is left behind — so every
/// other connection reloads it too) rather than rebuilt: a rebuild would
/// have to copy every column another migration may have added. A definition
/// that is not the expected one fails the migration (`json()` of text that
/// is not JSON is an error), and the whole transaction rolls back.
const MIGRATION_5: &str = r#"
SELECT CASE WHEN instr(sql, '''settled_not_run'',''abandoned'')') > 0 THEN 1
            ELSE json('migration 5: the attempts state CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'attempts';
SELECT CASE WHEN instr(sql, '''effect_unknown'',''awaiting_approval'')') > 0 THEN 1
            ELSE json('migration 5: the tasks state CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'tasks';
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, '''settled_not_run'',''abandoned'')', '''settled_not_run'',''abandoned'',''cancelled'')')
 WHERE type = 'table' AND name = 'attempts';
UPDATE sqlite_master
   SET sql = replace(sql, '''effect_unknown'',''awaiting_approval'')', '''effect_unknown'',''awaiting_approval'',''cancelled'')')
 WHERE type = 'table' AND name = 'tasks';
PRAGMA writable_schema = RESET;
CREATE VIEW migration_5_schema_cookie AS SELECT 1;
DROP VIEW migration_5_schema_cookie;
"#;

/// Schema 6: the trust boundary (issue 11).
/// - Each attempt records the sandbox its provider process ran under (JSON:
///   `{"state": "enforced", "abi": 7}`, ...; NULL before schema 6).
/// - A person's acts record the operating-system uid and user name beside
///   the `--actor` label (NULL on acts recorded before).
/// - The retries, repairs and revisions a person asks for, as rows.
/// - The act chain over all of them, append-only (`store::chain`); the
///   acts already in the store are chained when it is migrated (they were
///   recorded before the chain existed, so what they held then is taken as
///   given).
/// - `--request-id`s with the fingerprint of their command and its answer.
const MIGRATION_6: &str = r#"
{person_acts}
CREATE TRIGGER act_chain_append_only_update BEFORE UPDATE ON act_chain
BEGIN SELECT RAISE(ABORT, 'the act chain is append-only'); END;
CREATE TRIGGER act_chain_append_only_delete BEFORE DELETE ON act_chain
BEGIN SELECT RAISE(ABORT, 'the act chain is append-only'); END;

{request_ids}
"#;

/// Schema 7: the provider's own name for a request it accepted (an MCP
/// task id, and the HTTP session it lives in), committed the moment it
/// arrives, so an engine restarted after a crash asks the provider about
/// that request instead of guessing. `dispatched` with a handle claims the
/// provider accepted the request, not that it did the work.
const MIGRATION_7: &str = r#"
ALTER TABLE attempts ADD COLUMN handle TEXT
    CHECK (handle IS NULL OR (json_valid(handle) AND json_extract(handle, '$.kind') IS NOT NULL));
ALTER TABLE attempts ADD COLUMN handle_at_ms INTEGER;
"#;

/// Schema 8: a succeeded attempt's declared outputs (a task's `outputs`):
/// each file's path, content digest (its bytes in `blobs`, kept once per
/// content), size and mode (`0644`, or `0755` for an executable), written
/// in the transaction that records the success. The same table as
/// PostgreSQL's, with its CHECKs.
const MIGRATION_8: &str = r#"
CREATE TABLE outputs (
    attempt_id INTEGER NOT NULL REFERENCES attempts(id),
    path       TEXT NOT NULL CHECK (length(path) > 0),
    mode       INTEGER NOT NULL CHECK (mode IN (420, 493)),
    digest     TEXT NOT NULL REFERENCES blobs(digest),
    size       INTEGER NOT NULL CHECK (size >= 0),
    PRIMARY KEY (attempt_id, path)
);
"#;

/// Schema 9: the CHECKs a step meets at every state change — an attempt's
/// and a task's state, an attempt's failure class — as comparisons joined
/// by `OR` instead of `IN (…)` lists. The same values are allowed; SQLite
/// evaluates an `IN` list of more than two constants by building a
/// temporary b-tree (a page allocated and zeroed) every time the statement
/// runs: seven times per `builtin` step, a fifth of its instructions
/// (callgrind: 0.90 M per step before, 0.70 M after).
/// Edited in place as migration 5 was (no stored row changes): an
/// unexpected definition fails the migration, which rolls back whole.
const MIGRATION_9: &str = r#"
SELECT CASE WHEN instr(sql, 'state IN (''intent_recorded'',''dispatched'',''receipt_recorded'',''succeeded'',''failed'',''effect_unknown'',''settled_ok'',''settled_not_run'',''abandoned'',''cancelled'')') > 0 THEN 1
            ELSE json('migration 9: the attempts state CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'attempts';
SELECT CASE WHEN instr(sql, 'state IN (''pending'',''ready'',''running'',''succeeded'',''reused'',''failed'',''blocked'',''effect_unknown'',''awaiting_approval'',''cancelled'')') > 0 THEN 1
            ELSE json('migration 9: the tasks state CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'tasks';
SELECT CASE WHEN instr(sql, 'class IN (''validation_failed'',''provider_rejected'',''provider_unavailable'',''timeout'',''killed'',''environment'',''effect_unknown'',''unclassified'',''constraint_violated'')') > 0 THEN 1
            ELSE json('migration 9: the attempts class CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'attempts';
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, 'state IN (''intent_recorded'',''dispatched'',''receipt_recorded'',''succeeded'',''failed'',''effect_unknown'',''settled_ok'',''settled_not_run'',''abandoned'',''cancelled'')',
                     '(state = ''intent_recorded'' OR state = ''dispatched'' OR state = ''receipt_recorded'' OR state = ''succeeded'' OR state = ''failed'' OR state = ''effect_unknown'' OR state = ''settled_ok'' OR state = ''settled_not_run'' OR state = ''abandoned'' OR state = ''cancelled'')')
 WHERE type = 'table' AND name = 'attempts';
UPDATE sqlite_master
   SET sql = replace(sql, 'state IN (''pending'',''ready'',''running'',''succeeded'',''reused'',''failed'',''blocked'',''effect_unknown'',''awaiting_approval'',''cancelled'')',
                     '(state = ''pending'' OR state = ''ready'' OR state = ''running'' OR state = ''succeeded'' OR state = ''reused'' OR state = ''failed'' OR state = ''blocked'' OR state = ''effect_unknown'' OR state = ''awaiting_approval'' OR state = ''cancelled'')')
 WHERE type = 'table' AND name = 'tasks';
UPDATE sqlite_master
   SET sql = replace(sql, 'class IN (''validation_failed'',''provider_rejected'',''provider_unavailable'',''timeout'',''killed'',''environment'',''effect_unknown'',''unclassified'',''constraint_violated'')',
                     '(class = ''validation_failed'' OR class = ''provider_rejected'' OR class = ''provider_unavailable'' OR class = ''timeout'' OR class = ''killed'' OR class = ''environment'' OR class = ''effect_unknown'' OR class = ''unclassified'' OR class = ''constraint_violated'')')
 WHERE type = 'table' AND name = 'attempts';
PRAGMA writable_schema = RESET;
CREATE VIEW migration_9_schema_cookie AS SELECT 1;
DROP VIEW migration_9_schema_cookie;
"#;

/// Schema 10: the plan cache (`plan::cache`): per plan file's bytes (their
/// key), the revision they were registered as and what the full plan load
/// derived from them, sealed (the seal, not a CHECK, vouches for the body:
/// parsing 300 KB of JSON at every first run is what it would cost). A
/// cache: a row lost or refused only means the full path next time.
const MIGRATION_10: &str = r#"
CREATE TABLE plan_cache (
    file_key  TEXT PRIMARY KEY,
    goal_id   TEXT NOT NULL,
    revision  INTEGER NOT NULL,
    body      TEXT NOT NULL,
    seal      TEXT NOT NULL,
    FOREIGN KEY (goal_id, revision) REFERENCES revisions(goal_id, revision)
);
"#;

/// Schema 11: one index of a task's attempts where there were two. Every
/// intent wrote an entry into both `attempts_by_task` (goal, revision,
/// task, id) and `attempts_by_goal_task` (goal, task): a page each in the
/// step's WAL commit. Keyed (goal, task, revision, id), the one index
/// serves both kinds of lookup — a task's attempts in one revision (its
/// count, its latest) and across revisions (an earlier dispatch, an
/// unsettled attempt, `verify`'s repeats) — and a revision's completions
/// read it in task order as before.
const MIGRATION_11: &str = r#"
DROP INDEX attempts_by_goal_task;
DROP INDEX attempts_by_task;
CREATE INDEX attempts_by_task ON attempts(goal_id, task_ref, revision, id);
"#;

/// Schema 12: the event kinds read by goal (budget raises at every run's
/// start, a run's start and finish, revisions recorded) each get a partial
/// index of their own rows (`sqlite::events`): a run no longer reads the
/// whole event log to find a goal's budget raises, and the events a step
/// writes touch no index page.
const MIGRATION_12: &str = r#"
CREATE INDEX events_budget_raised ON events (goal_id, seq) WHERE kind = 'budget_raised';
CREATE INDEX events_run_started ON events (goal_id, seq) WHERE kind = 'run_started';
CREATE INDEX events_run_finished ON events (goal_id, seq) WHERE kind = 'run_finished';
CREATE INDEX events_revision_recorded ON events (goal_id, seq) WHERE kind = 'revision_recorded';
"#;

/// Schema 13: what a person's approval binds, and what a provider
/// reported it spent.
/// - `approvals.cost_micros`: the cost of the call the person approved,
///   beside its request, plan and revision (`NULL` on approvals recorded
///   before: they bind request and plan only, and their act chain
///   entries, made then, still match).
/// - `attempts.spent_micros`: the spending an agent's report stated for
///   the call (`may_spend`), counted in the goal's `cost_used_micros`
///   beside the call's declared cost.
const MIGRATION_13: &str = r#"
{spending}
"#;

/// Schema 14: input a server asks a person for (issue 27).
/// - The attempt state `input_asked` (the provider's answer was a question
///   for a person) and the task state `awaiting_input`.
/// - A person's answer (`engine answer`) as a person's request of kind
///   `answer`, on the act chain.
///
/// Edited in place as migrations 5 and 9 were (no stored row changes); an
/// unexpected definition fails the migration, which rolls back whole.
const MIGRATION_14: &str = r#"
SELECT CASE WHEN instr(sql, 'state = ''abandoned'' OR state = ''cancelled'')') > 0 THEN 1
            ELSE json('migration 14: the attempts state CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'attempts';
SELECT CASE WHEN instr(sql, 'state = ''awaiting_approval'' OR state = ''cancelled'')') > 0 THEN 1
            ELSE json('migration 14: the tasks state CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'tasks';
SELECT CASE WHEN instr(sql, 'kind IN (''retry'',''repair'',''revise'')') > 0 THEN 1
            ELSE json('migration 14: the person_requests kind CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'person_requests';
SELECT CASE WHEN instr(sql, '''approval_spent'',''approval_voided'')') > 0 THEN 1
            ELSE json('migration 14: the act_chain kind CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'act_chain';
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, 'state = ''abandoned'' OR state = ''cancelled'')', 'state = ''abandoned'' OR state = ''cancelled'' OR state = ''input_asked'')')
 WHERE type = 'table' AND name = 'attempts';
UPDATE sqlite_master
   SET sql = replace(sql, 'state = ''awaiting_approval'' OR state = ''cancelled'')', 'state = ''awaiting_approval'' OR state = ''cancelled'' OR state = ''awaiting_input'')')
 WHERE type = 'table' AND name = 'tasks';
UPDATE sqlite_master
   SET sql = replace(sql, 'kind IN (''retry'',''repair'',''revise'')', 'kind IN (''retry'',''repair'',''revise'',''answer'')')
 WHERE type = 'table' AND name = 'person_requests';
UPDATE sqlite_master
   SET sql = replace(sql, '''approval_spent'',''approval_voided'')', '''approval_spent'',''approval_voided'',''answer'')')
 WHERE type = 'table' AND name = 'act_chain';
PRAGMA writable_schema = RESET;
CREATE VIEW migration_14_schema_cookie AS SELECT 1;
DROP VIEW migration_14_schema_cookie;
"#;

/// Schema 15: a person's controls (issue 42).
/// - A person's hold, release and rerun (`engine hold`, `engine release`,
///   `engine rerun`) as requests of their own kinds, on the act chain.
/// - An approval's end (`approvals.expires_at_ms`, `NULL`: it does not
///   expire): past it the approval is `expired` and never spent.
///
/// Edited in place as migration 14 was (no stored row changes); an
/// unexpected definition fails the migration, which rolls back whole.
const MIGRATION_15: &str = r#"
SELECT CASE WHEN instr(sql, 'kind IN (''retry'',''repair'',''revise'',''answer'')') > 0 THEN 1
            ELSE json('migration 15: the person_requests kind CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'person_requests';
SELECT CASE WHEN instr(sql, '''approval_spent'',''approval_voided'',''answer'')') > 0 THEN 1
            ELSE json('migration 15: the act_chain kind CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'act_chain';
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, 'kind IN (''retry'',''repair'',''revise'',''answer'')', 'kind IN (''retry'',''repair'',''revise'',''answer'',''hold'',''release'',''rerun'')')
 WHERE type = 'table' AND name = 'person_requests';
UPDATE sqlite_master
   SET sql = replace(sql, '''approval_spent'',''approval_voided'',''answer'')', '''approval_spent'',''approval_voided'',''answer'',''hold'',''release'',''rerun'')')
 WHERE type = 'table' AND name = 'act_chain';
PRAGMA writable_schema = RESET;
CREATE VIEW migration_15_schema_cookie AS SELECT 1;
DROP VIEW migration_15_schema_cookie;
ALTER TABLE approvals ADD COLUMN expires_at_ms INTEGER CHECK (expires_at_ms IS NULL OR expires_at_ms > 0);
"#;

/// Schema 16: a person's `engine run --reuse-across-tool-change` (issue 43)
/// as a request of its own kind, on the act chain: each completion it keeps
/// although its tool changed names that act.
///
/// Edited in place as migration 15 was (no stored row changes); an
/// unexpected definition fails the migration, which rolls back whole.
const MIGRATION_16: &str = r#"
SELECT CASE WHEN instr(sql, '''answer'',''hold'',''release'',''rerun'')') > 0 THEN 1
            ELSE json('migration 16: the person_requests kind CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'person_requests';
SELECT CASE WHEN instr(sql, '''approval_voided'',''answer'',''hold'',''release'',''rerun'')') > 0 THEN 1
            ELSE json('migration 16: the act_chain kind CHECK is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name = 'act_chain';
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, '''answer'',''hold'',''release'',''rerun'')', '''answer'',''hold'',''release'',''rerun'',''reuse_across_tool_change'')')
 WHERE type = 'table' AND name IN ('person_requests', 'act_chain');
PRAGMA writable_schema = RESET;
CREATE VIEW migration_16_schema_cookie AS SELECT 1;
DROP VIEW migration_16_schema_cookie;
"#;

/// Schema 17: the rows a run writes at every task numbered without
/// `AUTOINCREMENT`. An `AUTOINCREMENT` key reads and rewrites its table's
/// row of `sqlite_sequence` at every insert: a page of its own in every
/// commit a task makes (2 of a process task's 19 WAL frames, counted in a
/// 300-task chain). Events, attempts, evidence, claims and check results
/// are never deleted (the events' triggers refuse it; no statement of the
/// engine deletes the others), so SQLite's own choice of key, one more
/// than the table's largest, is the number `AUTOINCREMENT` gave: the ids
/// stay in ledger order and no committed row's id is given again (those
/// of a transaction rolled back, or of commits a power loss took, are, as
/// they were with `AUTOINCREMENT`, whose row rolls back with them). A person's acts (approvals,
/// settlements, requests), which the act chain names by id, keep theirs.
/// The key's type and the tables' b-trees do not change, so the
/// definitions are edited in place as migration 5's were (an unexpected
/// one fails the migration, which rolls back whole); then those tables'
/// rows of `sqlite_sequence` go, since nothing reads them any more.
const MIGRATION_17: &str = r#"
SELECT CASE WHEN COUNT(*) = 5 THEN 1
            ELSE json('migration 17: the key of events, attempts, evidence, claims or check_results is not the expected one') END
  FROM sqlite_master WHERE type = 'table' AND name IN ('events', 'attempts', 'evidence', 'claims', 'check_results')
   AND length(sql) - length(replace(sql, 'INTEGER PRIMARY KEY AUTOINCREMENT', '')) = length('INTEGER PRIMARY KEY AUTOINCREMENT');
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, 'INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY')
 WHERE type = 'table' AND name IN ('events', 'attempts', 'evidence', 'claims', 'check_results');
PRAGMA writable_schema = RESET;
CREATE VIEW migration_17_schema_cookie AS SELECT 1;
DROP VIEW migration_17_schema_cookie;
DELETE FROM sqlite_sequence WHERE name IN ('events', 'attempts', 'evidence', 'claims', 'check_results');
"#;

/// Bring the schema up to `SCHEMA_VERSION` in one IMMEDIATE transaction.
/// The version is read again under the write lock, so of two engines
/// migrating the same store the second finds nothing left to do.
pub fn migrate(conn: &Connection) -> Result<()> {
    if too_new(conn)? >= SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let applied = (|| -> Result<()> {
        let version = too_new(conn)?;
        // A version below 0 is no version: `open::judge` names it first.
        let from = usize::try_from(version).map_err(|_| Error::internal("a negative schema version"))?;
        apply(conn, from, MIGRATIONS.len())
    })();
    match applied {
        Ok(()) => Ok(conn.execute_batch("COMMIT")?),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Migrations `from + 1 ..= to`, each setting its version, inside the
/// caller's transaction (if any).
pub(super) fn apply(conn: &Connection, from: usize, to: usize) -> Result<()> {
    for (i, sql) in MIGRATIONS.iter().enumerate().take(to).skip(from) {
        conn.execute_batch(&format!("{}\nPRAGMA user_version = {};", render(sql, Dialect::Sqlite), i + 1))?;
        if i + 1 == CHAIN_FROM {
            super::chain::adopt(conn)?;
        }
    }
    Ok(())
}

/// Migration `n`'s text as SQLite runs it.
#[cfg(test)]
pub(super) fn rendered_migration(n: usize) -> String {
    render(MIGRATIONS[n - 1], Dialect::Sqlite)
}

/// The schema version, refused (`SCHEMA_TOO_NEW`) if newer than this engine.
fn too_new(conn: &Connection) -> Result<i64> {
    let version: i64 = super::sql::qrow(conn, "PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(Error::new(
            Code::SchemaTooNew,
            format!(
                "the store has schema version {version}; this engine knows up to {SCHEMA_VERSION}. Use a newer engine."
            ),
        ));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(conn: &Connection, table: &str, state: &str) -> rusqlite::Result<usize> {
        match table {
            "tasks" => conn.execute(
                "INSERT INTO tasks (goal_id, revision, task_ref, state, meaning, dependencies, operation_id, request_digest)
                 VALUES ('g', 1, ?1, ?2, 'm', 'd', 'op', 'r')",
                [format!("T-{state}"), state.to_string()],
            ),
            _ => conn.execute(
                "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, state, generation, intent_at_ms)
                 VALUES ('g', 1, 'T', ?1, 1, 'run', 'r', '{}', 'none', ?2, 1, 0)",
                [format!("op-{state}"), state.to_string()],
            ),
        }
    }

    /// The migrations in `range`, one text, as SQLite runs them.
    fn rendered(range: std::ops::RangeTo<usize>) -> String {
        render(&MIGRATIONS[range].concat(), Dialect::Sqlite)
    }

    /// Each migration's text as SQLite runs it, pinned: a released
    /// migration is never edited (the shared pieces, `queries::ddl`,
    /// render it byte for byte as it was released).
    #[test]
    fn every_released_migration_is_the_text_it_was() {
        const RELEASED: [&str; 17] = [
            "36d9554caf135e085a36356177d517efe4cba8929271ce7aa2a126611044a61e",
            "c838560dd604ca21a98ced6c8ae61fe58ea5bea33f87c84d20f231b2788a3240",
            "0b0d401812e064dd23e80d8d0ab0572ebeffc4fc25997ca7f60b8f586476ac26",
            "c0e14fddaa5be5fbaf70675a52ea627b4f07c50ab92f346658b54535903b9478",
            "f6f0d8535d22dab8233f5cfc127151ca2f9027be756788e2d674dacf0ba40eb6",
            "1f0922c6d49125f58ad36c3c313122a93c23744420aaf1d1cdba80acc49d33a1",
            "f07519f33ec3d3f4dd109cf5a52dc59e42f493122b425d51a7b50dcd043ce1b0",
            "7d8cc2f40a0cb5d41cdcae3ad66b933b81c931b953979f98614559e84db872f8",
            "f06e21e68bbcbe21ab5a36f41b8981f4e5aaa090cb0a6f8a2cb85fc724b39538",
            "42d2a57320ae4528abbe5a10d448db2bf6808b1af20386633eafaef1887a2d28",
            "9b569f6b0184f8b63fa54a7acc68e9c7d4fbacd18f1685d0fe78670c1e054c4a",
            "715751f8fd8c8a267cda9e32f07bc5ac6de4659a26814dda741a0150b3303bcd",
            "caafbcd4494d0a06438081c6f167a178b95500a50aec49687ac58a63b85a8b46",
            "6e7eab45a0e20e0723ab399c2610680e82c5e3af78bc3932f50bf56071b871c9",
            "ee460fd7cee09d61cc52c900cec113e36988496e48bf2cfdc1780e97f9339ea4",
            "d81676bb5cd497f5f54ea6294deae688a64d8a2d3edc7a1e63da9c119fea6f38",
            "59a255f816b315f2dc96422d39f375117b7ecfa9287a7855da8558ec4dd9ff4b",
        ];
        for (i, (sql, digest)) in MIGRATIONS.iter().zip(RELEASED).enumerate() {
            assert_eq!(crate::digest::content(render(sql, Dialect::Sqlite).as_bytes()), digest, "migration {}", i + 1);
        }
    }

    /// `migrate`, stopped at `version`.
    fn migrate_to(conn: &Connection, version: usize) {
        let from: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        apply(conn, from as usize, version).unwrap();
    }

    #[test]
    fn migration_5_widens_the_state_checks_and_nothing_else() {
        let conn = Connection::open_in_memory().unwrap();
        // Rows without their goal and revision: only the CHECKs are tested.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        conn.execute_batch(&format!("{}PRAGMA user_version = 3;", rendered(..3))).unwrap();
        for table in ["tasks", "attempts"] {
            assert!(insert(&conn, table, "cancelled").is_err(), "schema 3 has no `cancelled` {table}");
        }
        // No page left free behind them (a zeroed free page would go
        // unnoticed); schema 11 drops two indexes, whose pages it frees.
        migrate_to(&conn, 10);
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
        assert_eq!(free, 0);
        migrate(&conn).unwrap();
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), SCHEMA_VERSION);
        for table in ["tasks", "attempts"] {
            insert(&conn, table, "cancelled").unwrap_or_else(|e| panic!("{table}: {e}"));
            let e = insert(&conn, table, "canceled").unwrap_err().to_string();
            assert!(e.contains("CHECK constraint failed"), "{table}: {e}");
        }
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
        let left: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'migration_5_schema_cookie'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }

    /// How many temporary b-trees `sql` opens when it runs (`EXPLAIN`).
    fn ephemeral_tables(conn: &Connection, sql: &str) -> usize {
        let mut st = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let ops: Vec<String> = st.query_map([], |r| r.get(1)).unwrap().map(|r| r.unwrap()).collect();
        ops.iter().filter(|op| op.as_str() == "OpenEphemeral").count()
    }

    #[test]
    fn migration_9_keeps_every_allowed_value_and_builds_no_temporary_table() {
        use crate::state::{AttemptState, FailureClass, TaskState};
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let to_8 = rendered(..8);
        conn.execute_batch(&format!("{to_8}PRAGMA user_version = 8;")).unwrap();
        let state_move = "UPDATE attempts SET state = 'dispatched' WHERE id = 1";
        let task_move = "UPDATE tasks SET state = 'running' WHERE goal_id = 'g' AND revision = 1 AND task_ref = 'T'";
        let classed = "UPDATE attempts SET class = 'timeout' WHERE id = 1";
        for sql in [state_move, task_move, classed] {
            assert!(ephemeral_tables(&conn, sql) > 0, "schema 8 builds one for its CHECK: {sql}");
        }
        // No page left free behind them (a zeroed free page would go
        // unnoticed); schema 11 drops two indexes, whose pages it frees.
        migrate_to(&conn, 10);
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
        assert_eq!(free, 0);
        migrate(&conn).unwrap();
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), SCHEMA_VERSION);
        for sql in [state_move, task_move, classed] {
            assert_eq!(ephemeral_tables(&conn, sql), 0, "{sql}");
        }
        // The same values allowed, and only those.
        for s in AttemptState::ALL {
            insert(&conn, "attempts", s.as_str()).unwrap_or_else(|e| panic!("attempt {s}: {e}"));
        }
        for s in TaskState::ALL {
            insert(&conn, "tasks", s.as_str()).unwrap_or_else(|e| panic!("task {s}: {e}"));
        }
        for table in ["tasks", "attempts"] {
            let e = insert(&conn, table, "canceled").unwrap_err().to_string();
            assert!(e.contains("CHECK constraint failed"), "{table}: {e}");
        }
        let set_class =
            |class: Option<&str>| conn.execute("UPDATE attempts SET class = ?1 WHERE state = 'failed'", [class]);
        for c in FailureClass::ALL {
            set_class(Some(c.as_str())).unwrap_or_else(|e| panic!("class {c}: {e}"));
        }
        set_class(None).unwrap();
        assert!(set_class(Some("timed_out")).unwrap_err().to_string().contains("CHECK constraint failed"));
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
    }

    #[test]
    fn migration_9_refuses_a_check_it_does_not_recognise() {
        let conn = Connection::open_in_memory().unwrap();
        let to_8 = rendered(..8);
        conn.execute_batch(&format!("{to_8}PRAGMA user_version = 8;")).unwrap();
        conn.execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = replace(sql, '''awaiting_approval'',', '''awaiting'',') WHERE name = 'tasks';
             PRAGMA writable_schema = RESET;",
        )
        .unwrap();
        let e = migrate(&conn).unwrap_err();
        assert!(e.to_string().contains("JSON"), "{e}");
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 8, "rolled back");
    }

    #[test]
    fn migration_5_refuses_a_table_it_does_not_recognise() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("{}PRAGMA user_version = 3;", rendered(..3))).unwrap();
        conn.execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = replace(sql, '''abandoned'')', '''abandoned'', ''other'')')
              WHERE name = 'attempts';
             PRAGMA writable_schema = RESET;",
        )
        .unwrap();
        let e = migrate(&conn).unwrap_err();
        assert!(e.to_string().contains("malformed JSON") || e.to_string().contains("JSON"), "{e}");
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 3, "rolled back");
    }

    /// `EXPLAIN QUERY PLAN`'s details of `sql`.
    fn query_plan(conn: &Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> Vec<String> {
        let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        st.query_map(params, |r| r.get(3)).unwrap().map(|r| r.unwrap()).collect()
    }

    /// Every row of `sql`, every column as SQLite holds it.
    fn answer(conn: &Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> Vec<Vec<rusqlite::types::Value>> {
        let mut st = conn.prepare(sql).unwrap();
        let n = st.column_count();
        st.query_map(params, |r| (0..n).map(|i| r.get(i)).collect()).unwrap().map(|r| r.unwrap()).collect()
    }

    #[test]
    fn migration_11_keeps_one_index_for_every_lookup_of_a_tasks_attempts() {
        use super::super::attempts::{ATTEMPT_COUNT, FIRST_UNSETTLED, PRIOR_DISPATCH};
        use super::super::completions::completed_sql;
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let to_10 = rendered(..10);
        conn.execute_batch(&format!("{to_10}PRAGMA user_version = 10;")).unwrap();
        // Two goals, two revisions, tasks with attempts in one or both.
        let rows = [
            ("g", 1, "T", "succeeded", Some(5)),
            ("g", 1, "U", "failed", Some(6)),
            ("g", 2, "T", "dispatched", Some(7)),
            ("g", 2, "T", "intent_recorded", None),
            ("g", 2, "U", "succeeded", Some(8)),
            ("h", 1, "T", "effect_unknown", None),
            ("g", 2, "V", "intent_recorded", None),
        ];
        for (i, (goal, revision, task, state, dispatched)) in rows.into_iter().enumerate() {
            conn.execute(
                "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest,
                   request_json, effect, state, generation, intent_at_ms, dispatched_at_ms)
                 VALUES (?1, ?2, ?3, ?4, 1, 'run', 'r', '{}', 'none', ?5, 1, 0, ?6)",
                rusqlite::params![goal, revision, task, format!("op-{i}"), state, dispatched],
            )
            .unwrap();
        }
        let completed = completed_sql();
        let lookups: [(&str, &[&dyn rusqlite::ToSql]); 10] = [
            (FIRST_UNSETTLED, &[&"g", &"T"]),
            (FIRST_UNSETTLED, &[&"h", &"T"]),
            (FIRST_UNSETTLED, &[&"g", &"U"]),
            (PRIOR_DISPATCH, &[&"g", &"T"]),
            (PRIOR_DISPATCH, &[&"g", &"V"]),
            (ATTEMPT_COUNT, &[&"g", &2, &"T"]),
            (ATTEMPT_COUNT, &[&"g", &1, &"V"]),
            (&completed, &[&"g", &1]),
            (&completed, &[&"g", &2]),
            (&completed, &[&"h", &1]),
        ];
        let before: Vec<_> = lookups.iter().map(|(sql, p)| answer(&conn, sql, p)).collect();
        migrate(&conn).unwrap();
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), SCHEMA_VERSION);
        let indexes = answer(&conn, "SELECT name FROM pragma_index_list('attempts') ORDER BY name", &[]);
        let names: Vec<String> = indexes.into_iter().map(|r| format!("{:?}", r[0])).collect();
        assert_eq!(
            names,
            ["Text(\"attempts_by_state\")", "Text(\"attempts_by_task\")", "Text(\"sqlite_autoindex_attempts_1\")"]
        );
        let columns: Vec<String> =
            answer(&conn, "SELECT name FROM pragma_index_info('attempts_by_task') ORDER BY seqno", &[])
                .into_iter()
                .map(|r| format!("{:?}", r[0]))
                .collect();
        assert_eq!(columns, ["Text(\"goal_id\")", "Text(\"task_ref\")", "Text(\"revision\")", "Text(\"id\")"]);
        for ((sql, p), before) in lookups.iter().zip(before) {
            assert_eq!(answer(&conn, sql, p), before, "the same answer: {sql}");
            let plan = query_plan(&conn, sql, p);
            let on_attempts: Vec<&String> =
                plan.iter().filter(|d| d.contains(" a ") || d.contains(" attempts ")).collect();
            assert!(!on_attempts.is_empty(), "{plan:?}");
            // Every step on `attempts` a search: through the index, or by
            // the id it found.
            let by_task = |d: &&String| d.contains("INDEX attempts_by_task (goal_id=?");
            assert!(on_attempts.iter().any(by_task), "{sql}: {plan:?}");
            for step in on_attempts {
                let by_id = step.contains("INTEGER PRIMARY KEY (rowid=?)");
                assert!(step.starts_with("SEARCH") && (by_task(&step) || by_id), "{sql}: {plan:?}");
            }
            // No sort and no constant list in a temporary b-tree.
            assert!(plan.iter().all(|d| !d.contains("TEMP B-TREE")), "{sql}: {plan:?}");
            assert_eq!(
                ephemeral_tables(&conn, &sql.replace("?1", "'g'").replace("?2", "1").replace("?3", "'T'")),
                0,
                "{sql}"
            );
        }
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
    }

    /// The same-request query (the gate's rule 3, read at every intent)
    /// answers as the `OR`ed form it replaced, on six of the states (the
    /// three it reads, three it must not) in both insertion orders (so
    /// each state's part decides some answer), every goal, operation and
    /// fingerprint, and runs without a sorter or a temporary table.
    #[test]
    fn the_same_request_query_answers_as_before_without_a_sort() {
        use super::super::attempts::SAME_REQUEST_UNSETTLED;
        const BEFORE: &str = "SELECT id FROM attempts
          WHERE (state = 'effect_unknown' OR ((state = 'intent_recorded' OR state = 'dispatched') AND goal_id != ?3))
            AND operation_id != ?2 AND json_extract(request_json, '$.fingerprint') = ?1
          ORDER BY id LIMIT 1";
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        migrate(&conn).unwrap();
        let states = ["succeeded", "dispatched", "effect_unknown", "intent_recorded", "failed", "settled_ok"];
        let mut n = 0;
        for goal in ["g", "h"] {
            for op in ["o1", "o2"] {
                // Reversed for one operation: otherwise `dispatched` always
                // comes before `intent_recorded` and the latter's part
                // never decides an answer.
                let order: Vec<&str> =
                    if op == "o2" { states.iter().rev().copied().collect() } else { states.to_vec() };
                for state in order {
                    for fp in ["f", "e"] {
                        n += 1;
                        conn.execute(
                            "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind,
                               request_digest, request_json, effect, state, generation, intent_at_ms)
                             VALUES (?1, 1, 'T', ?2, ?3, 'run', 'r', json_object('fingerprint', ?4), 'none', ?5, 1, 0)",
                            rusqlite::params![goal, op, n, fp, state],
                        )
                        .unwrap();
                    }
                }
            }
        }
        let mut answered = 0;
        for fp in ["f", "e", "x"] {
            for except in ["o1", "o2", "o3"] {
                for goal in ["g", "h", "k"] {
                    let p: [&dyn rusqlite::ToSql; 3] = [&fp, &except, &goal];
                    let before: Option<i64> =
                        rusqlite::OptionalExtension::optional(conn.query_row(BEFORE, p, |r| r.get(0))).unwrap();
                    let now: Option<i64> = conn.query_row(SAME_REQUEST_UNSETTLED, p, |r| r.get(0)).unwrap();
                    assert_eq!(now, before, "{fp} {except} {goal}");
                    answered += usize::from(now.is_some());
                }
            }
        }
        assert!(answered > 0 && answered < 27, "{answered}: both answers were asked for");
        let mut st = conn.prepare(&format!("EXPLAIN {SAME_REQUEST_UNSETTLED}")).unwrap();
        let ops: Vec<String> =
            st.query_map(rusqlite::params!["f", "o1", "g"], |r| r.get(1)).unwrap().map(|r| r.unwrap()).collect();
        for op in ["SorterOpen", "OpenEphemeral", "OpenAutoindex"] {
            assert!(!ops.iter().any(|o| o == op), "{op} in {ops:?}");
        }
        let plan = query_plan(&conn, SAME_REQUEST_UNSETTLED, &[&"f", &"o1", &"g"]);
        let on_attempts: Vec<&String> = plan.iter().filter(|d| d.contains(" attempts ")).collect();
        assert_eq!(on_attempts.len(), 3, "{plan:?}");
        assert!(on_attempts.iter().all(|d| d.contains("INDEX attempts_by_state (state=?)")), "{plan:?}");
    }

    /// The gate's one statement (`GATE_ATTEMPTS`) answers as its five
    /// reads, asked one by one, for every goal, revision, task, operation
    /// and request of a store holding every kind of attempt a read tells
    /// apart (each unsettled state, a cancelled one, one dispatched and
    /// failed, one failed unsent, one settled, one read back, tries of one
    /// operation under two requests); each step on `attempts` a search,
    /// no temporary b-tree.
    #[test]
    fn the_gate_attempts_statement_answers_as_its_five_reads() {
        use super::super::attempts::{
            ATTEMPT_COUNT, CONFLICTING_REQUEST, FIRST_UNSETTLED, GATE_ATTEMPTS, LAST_TRY, PRIOR_DISPATCH,
        };
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        migrate(&conn).unwrap();
        let rows = [
            ("g", 1, "T", "o1", 1, "r", "failed", Some(5)),
            ("g", 1, "T", "o1", 2, "r", "succeeded", Some(6)),
            ("g", 2, "T", "o2", 1, "r", "cancelled", None),
            ("g", 2, "T", "o2", 2, "s", "dispatched", Some(7)),
            ("g", 2, "T", "o3", 1, "r", "intent_recorded", None),
            ("g", 1, "U", "o4", 1, "r", "failed", None),
            ("g", 2, "U", "o5", 1, "r", "settled_not_run", None),
            ("g", 2, "V", "o6", 1, "r", "failed", None),
            ("g", 2, "V", "o6", 2, "r", "effect_unknown", None),
            ("h", 1, "T", "o7", 1, "r", "abandoned", None),
            ("h", 1, "U", "o8", 1, "r", "cancelled", None),
            ("h", 1, "V", "o9", 1, "r", "receipt_recorded", Some(8)),
            ("g", 2, "W", "oa", 1, "r", "failed", None),
        ];
        for (goal, revision, task, op, try_no, request, state, dispatched) in rows {
            conn.execute(
                "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest,
                   request_json, effect, state, generation, intent_at_ms, dispatched_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'run', ?6, '{}', 'none', ?7, 1, 0, ?8)",
                rusqlite::params![goal, revision, task, op, try_no, request, state, dispatched],
            )
            .unwrap();
        }
        // `h`/`U`'s cancelled try settled by a person; `g`/`W`'s unsent
        // failure read back: each one's only sign of a dispatch.
        conn.execute_batch(
            "INSERT INTO settlements (attempt_id, operation_id, outcome, actor, note, at_ms) VALUES (11, 'o8', 'not_run', 'p', 'n', 1);
             INSERT INTO evidence (goal_id, revision, attempt_id, kind, data, at_ms) VALUES ('g', 2, 13, 'observation', '{}', 1);",
        )
        .unwrap();
        let one = |sql: &str, p: &[&dyn rusqlite::ToSql]| answer(&conn, sql, p).into_iter().next();
        let mut told = std::collections::BTreeSet::new();
        for goal in ["g", "h", "k"] {
            for revision in [1, 2] {
                for task in ["T", "U", "V", "W", "X"] {
                    for op in ["o1", "o2", "o6", "o9", "ox"] {
                        for request in ["r", "s"] {
                            let mut parts = one(ATTEMPT_COUNT, &[&goal, &revision, &task]).unwrap();
                            let unsettled = one(FIRST_UNSETTLED, &[&goal, &task]);
                            parts.extend(unsettled.unwrap_or(vec![rusqlite::types::Value::Null; 2]));
                            parts.extend(one(PRIOR_DISPATCH, &[&goal, &task]).unwrap());
                            parts.push(
                                one(CONFLICTING_REQUEST, &[&op, &request])
                                    .map_or(rusqlite::types::Value::Null, |r| r[0].clone()),
                            );
                            parts.extend(one(LAST_TRY, &[&op]).unwrap());
                            let p: [&dyn rusqlite::ToSql; 5] = [&goal, &task, &revision, &op, &request];
                            let now = answer(&conn, GATE_ATTEMPTS, &p);
                            assert_eq!(now, vec![parts.clone()], "{goal} {revision} {task} {op} {request}");
                            told.insert(format!("{parts:?}"));
                        }
                    }
                }
            }
        }
        assert!(told.len() >= 20, "{}: the store tells many answers apart", told.len());
        let p: [&dyn rusqlite::ToSql; 5] = [&"g", &"T", &2, &"o2", &"r"];
        let plan = query_plan(&conn, GATE_ATTEMPTS, &p);
        let on_attempts: Vec<&String> = plan.iter().filter(|d| d.contains(" a ") || d.contains(" attempts ")).collect();
        assert!(on_attempts.len() >= 5, "{plan:?}");
        assert!(on_attempts.iter().all(|d| d.starts_with("SEARCH")), "{plan:?}");
        assert!(plan.iter().all(|d| !d.contains("TEMP B-TREE")), "{plan:?}");
    }

    /// The tables that keep `AUTOINCREMENT`, and `sqlite_sequence`'s rows.
    fn sequences(conn: &Connection) -> (Vec<String>, Vec<(String, i64)>) {
        let keyed = "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%' ORDER BY name";
        let tables = conn.prepare(keyed).unwrap().query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect();
        let mut st = conn.prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name").unwrap();
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(|r| r.unwrap()).collect();
        (tables, rows)
    }

    /// One row each in events, attempts and evidence; their new ids.
    fn insert_a_step(conn: &Connection) -> (i64, i64, i64) {
        conn.execute("INSERT INTO events (at_ms, kind, data) VALUES (1, 'run_started', '{}')", []).unwrap();
        let event = conn.last_insert_rowid();
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0)).unwrap();
        conn.execute(
            "INSERT INTO attempts (goal_id, revision, task_ref, operation_id, try_no, kind, request_digest, request_json, effect, state, generation, intent_at_ms)
             VALUES ('g', 1, 'T', ?1, 1, 'run', 'r', '{}', 'none', 'intent_recorded', 1, 0)",
            [format!("op-{n}")],
        )
        .unwrap();
        let attempt = conn.last_insert_rowid();
        conn.execute(
            "INSERT INTO evidence (goal_id, revision, attempt_id, kind, data, at_ms) VALUES ('g', 1, ?1, 'process_exit', '{}', 1)",
            [attempt],
        )
        .unwrap();
        (event, attempt, conn.last_insert_rowid())
    }

    #[test]
    fn migration_17_numbers_a_runs_rows_on_from_their_largest_without_sqlite_sequence() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        conn.execute_batch(&format!("{}PRAGMA user_version = 16;", rendered(..16))).unwrap();
        let steps: Vec<_> = (0..3).map(|_| insert_a_step(&conn)).collect();
        assert_eq!(steps, [(1, 1, 1), (2, 2, 2), (3, 3, 3)]);
        let (keyed, rows) = sequences(&conn);
        assert_eq!(keyed.len(), 9, "{keyed:?}");
        assert!(rows.contains(&("events".to_string(), 3)), "{rows:?}");
        migrate(&conn).unwrap();
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), SCHEMA_VERSION);
        let (keyed, rows) = sequences(&conn);
        assert_eq!(keyed, ["approvals", "pending_requests", "person_requests", "settlements"]);
        // The migrated tables' rows are gone; the one left is migration 3's
        // (its `INSERT … SELECT` into `pending_requests` of no rows).
        let others = vec![("pending_requests".to_string(), 0)];
        assert_eq!(rows, others);
        // Numbered on from the largest, as AUTOINCREMENT numbered them, and
        // nothing written to sqlite_sequence.
        assert_eq!(insert_a_step(&conn), (4, 4, 4));
        assert_eq!(insert_a_step(&conn), (5, 5, 5));
        assert_eq!(sequences(&conn).1, others);
        // The events stay append-only.
        assert!(conn.execute("DELETE FROM events WHERE seq = 5", []).is_err());
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
        let left: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'migration_17_schema_cookie'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn migration_17_refuses_a_key_it_does_not_recognise() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("{}PRAGMA user_version = 16;", rendered(..16))).unwrap();
        conn.execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = replace(sql, 'INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY') WHERE name = 'evidence';
             PRAGMA writable_schema = RESET;",
        )
        .unwrap();
        let e = migrate(&conn).unwrap_err();
        assert!(e.to_string().contains("JSON"), "{e}");
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 16, "rolled back");
        assert_eq!(sequences(&conn).0.len(), 8, "nothing edited");
    }
}
