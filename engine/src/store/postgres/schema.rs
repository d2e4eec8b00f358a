//! The ledger's schema on PostgreSQL and its migrations, versioned like
//! SQLite's: `schema_meta.version` holds the version; a database newer
//! than this binary is refused (`SCHEMA_TOO_NEW`); a migration is never
//! edited once released. Migrating takes an advisory lock in its
//! transaction, so of several engines starting at once one migrates and
//! the others find nothing left to do.
//!
//! The tables are SQLite's schema 3 with PostgreSQL's types (`BIGINT`
//! ids from identity columns, `BYTEA` blobs, `BOOLEAN` flags), plus what
//! workers on several machines need: `workers` (who is alive), `claims`
//! (a lease per task with its fencing generation), `commit_tokens` (what
//! tells whether a commit whose answer was lost happened) and `outputs`
//! (a task's declared output files, content-addressed in `blobs`).

use super::client::{p, Conn};
use crate::error::{Code, Error, Result};
use crate::store::queries::ddl::{render, Dialect};

/// Migrations in order; migration `i` takes the schema from `i` to `i + 1`.
const MIGRATIONS: &[&str] =
    &[MIGRATION_1, MIGRATION_2, MIGRATION_3, MIGRATION_4, MIGRATION_5, MIGRATION_6, MIGRATION_7, MIGRATION_8];

/// The migration after which the acts already in the store are put on the
/// act chain (`chain::adopt`): schema 3 brings the chain (SQLite's 6).
const CHAIN_FROM: usize = 3;

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock key migrations take (any fixed number; "engine" in ASCII).
const MIGRATION_LOCK: i64 = 0x656e_6769_6e65;

const MIGRATION_1: &str = r#"
{events}
CREATE INDEX events_by_goal_kind ON events(goal_id, kind, seq);
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'events are append-only'; END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION events_append_only();

{blobs}

{goals_head}
    calls_used       BIGINT NOT NULL DEFAULT 0,
    cost_used_micros BIGINT NOT NULL DEFAULT 0,
    created          BIGINT GENERATED ALWAYS AS IDENTITY
);

{revisions}

{tasks}
CREATE INDEX tasks_by_operation ON tasks(operation_id);

{attempts_head}
    cost_micros      BIGINT NOT NULL DEFAULT 0 CHECK (cost_micros >= 0),
{attempts_progress}
    class            TEXT CHECK (class IS NULL OR class IN ('validation_failed','provider_rejected','provider_unavailable','timeout','killed','environment','effect_unknown','unclassified')),
    class_rule       TEXT,
    class_evidence_ids TEXT,
    class_claim_ids  TEXT,
    class_next       TEXT,
    unknown_reason   TEXT,
    reusable         BOOLEAN,
    checkpoint       TEXT,
    inputs_at_intent TEXT,
    instruction      TEXT,
    process          TEXT,
{attempts_tail}

{evidence_tables}

-- The file-state cache is per machine: keyed by host as well as path.
CREATE TABLE file_cache (
    host         TEXT NOT NULL,
    path         TEXT NOT NULL,
{file_state},
    PRIMARY KEY (host, path)
);

{settlements}

{approvals}
CREATE INDEX approvals_by_operation ON approvals(operation_id);

{pending_requests}

-- A process that writes: a worker (or a person's command). Its heartbeat
-- renews its claims; nothing reads liveness from here but people.
CREATE TABLE workers (
    id          TEXT PRIMARY KEY,
    host        TEXT NOT NULL,
    pid         BIGINT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A lease per task (task_ref '' is a goal's acceptance and verdict).
-- `generation` is the fencing token: every takeover adds one, and every
-- write about the task checks it in its own transaction.
CREATE TABLE task_claims (
    goal_id     TEXT NOT NULL REFERENCES goals(id),
    task_ref    TEXT NOT NULL,
    worker_id   TEXT NOT NULL,
    generation  BIGINT NOT NULL CHECK (generation >= 1),
    expires_at  TIMESTAMPTZ NOT NULL,
    released    BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (goal_id, task_ref)
);
CREATE INDEX task_claims_by_worker ON task_claims(worker_id) WHERE NOT released;

-- One row per write transaction, written inside it: after a connection
-- lost during COMMIT, its presence says the commit happened.
CREATE TABLE commit_tokens (
    token TEXT PRIMARY KEY,
    at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A succeeded attempt's declared outputs: path, mode and content digest
-- (the bytes in `blobs`).
CREATE TABLE outputs (
    attempt_id BIGINT NOT NULL REFERENCES attempts(id),
    path       TEXT NOT NULL,
    mode       BIGINT NOT NULL,
    digest     TEXT NOT NULL REFERENCES blobs(digest),
    size       BIGINT NOT NULL,
    PRIMARY KEY (attempt_id, path)
);
"#;

/// Schema 2: what SQLite's schemas 4 and 5 brought, in one step.
/// - The failure class `constraint_violated` (a violated constraint of the
///   goal) is allowed by the class CHECK.
/// - `attempts.protected_at_intent`: the checkpoint digest of the goal's
///   protected paths an attempt is judged against (observed before its
///   intent), so an attempt judged after a restart or a takeover is judged
///   against the same state.
/// - `cancelled`, the state of an attempt and of a task a person stopped,
///   is allowed by the state CHECKs.
///
/// PostgreSQL alters a CHECK in place: each is dropped by the name it was
/// given (`<table>_<column>_check`) and added again, wider; no row is copied.
const MIGRATION_2: &str = r#"
ALTER TABLE attempts DROP CONSTRAINT attempts_class_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_class_check
    CHECK (class IS NULL OR class IN ('validation_failed','provider_rejected','provider_unavailable','timeout','killed','environment','effect_unknown','unclassified','constraint_violated'));
ALTER TABLE attempts ADD COLUMN protected_at_intent TEXT;
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('intent_recorded','dispatched','receipt_recorded','succeeded','failed','effect_unknown','settled_ok','settled_not_run','abandoned','cancelled'));
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('pending','ready','running','succeeded','reused','failed','blocked','effect_unknown','awaiting_approval','cancelled'));
"#;

/// Schema 3: SQLite's schemas 6 (the trust boundary, issue 11) and 7 (the
/// provider's handle of a request, issue 15), with the same columns,
/// tables and CHECKs:
/// - the sandbox an attempt's provider process ran under (JSON);
/// - the operating-system uid and user of a person's acts;
/// - the retries, repairs and revisions a person asks for (`person_requests`);
/// - the act chain over all of them, append-only (a trigger refuses an
///   UPDATE or DELETE); the acts already in the store are chained when it
///   is migrated;
/// - `--request-id`s with the fingerprint of their command and its answer;
/// - an attempt's handle (JSON with a `kind`) and when it was recorded.
const MIGRATION_3: &str = r#"
{person_acts}
CREATE FUNCTION act_chain_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the act chain is append-only'; END;
$$;
CREATE TRIGGER act_chain_append_only BEFORE UPDATE OR DELETE ON act_chain
    FOR EACH ROW EXECUTE FUNCTION act_chain_append_only();

{request_ids}

ALTER TABLE attempts ADD COLUMN handle TEXT
    CHECK (handle IS NULL OR (handle::jsonb ->> 'kind') IS NOT NULL);
ALTER TABLE attempts ADD COLUMN handle_at_ms BIGINT;
"#;

/// Schema 4: SQLite's schema 8. The `outputs` table has been here since
/// schema 1; it now gets SQLite's CHECKs (a mode of `0644` or `0755`, a
/// size of at least 0, a path), as the engine starts writing it.
const MIGRATION_4: &str = r#"
ALTER TABLE outputs ADD CONSTRAINT outputs_mode_check CHECK (mode IN (420, 493));
ALTER TABLE outputs ADD CONSTRAINT outputs_size_check CHECK (size >= 0);
ALTER TABLE outputs ADD CONSTRAINT outputs_path_check CHECK (length(path) > 0);
"#;

/// Schema 5: SQLite's schema 13. `approvals.cost_micros`: the cost of the
/// call a person approved (`NULL` on approvals recorded before);
/// `attempts.spent_micros`: what its provider reported it spent.
const MIGRATION_5: &str = r#"
{spending}
"#;

/// Schema 6: SQLite's schema 14 (issue 27): the attempt state
/// `input_asked`, the task state `awaiting_input`, and a person's answer
/// (`answer`) among the person's requests and on the act chain.
const MIGRATION_6: &str = r#"
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('intent_recorded','dispatched','receipt_recorded','succeeded','failed','effect_unknown','settled_ok','settled_not_run','abandoned','cancelled','input_asked'));
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('pending','ready','running','succeeded','reused','failed','blocked','effect_unknown','awaiting_approval','cancelled','awaiting_input'));
ALTER TABLE person_requests DROP CONSTRAINT person_requests_kind_check;
ALTER TABLE person_requests ADD CONSTRAINT person_requests_kind_check
    CHECK (kind IN ('retry','repair','revise','answer'));
ALTER TABLE act_chain DROP CONSTRAINT act_chain_kind_check;
ALTER TABLE act_chain ADD CONSTRAINT act_chain_kind_check
    CHECK (kind IN ('approval','settlement','retry','repair','revise','approval_spent','approval_voided','answer'));
"#;

/// Schema 7: SQLite's schema 15 (issue 42): a person's hold, release and
/// rerun among the person's requests and on the act chain; an approval's
/// end (`approvals.expires_at_ms`).
const MIGRATION_7: &str = r#"
ALTER TABLE person_requests DROP CONSTRAINT person_requests_kind_check;
ALTER TABLE person_requests ADD CONSTRAINT person_requests_kind_check
    CHECK (kind IN ('retry','repair','revise','answer','hold','release','rerun'));
ALTER TABLE act_chain DROP CONSTRAINT act_chain_kind_check;
ALTER TABLE act_chain ADD CONSTRAINT act_chain_kind_check
    CHECK (kind IN ('approval','settlement','retry','repair','revise','approval_spent','approval_voided','answer','hold','release','rerun'));
ALTER TABLE approvals ADD COLUMN expires_at_ms BIGINT CHECK (expires_at_ms IS NULL OR expires_at_ms > 0);
"#;

/// Schema 8: SQLite's schema 16 (issue 43): a person's
/// `engine run --reuse-across-tool-change` among the person's requests and
/// on the act chain.
const MIGRATION_8: &str = r#"
ALTER TABLE person_requests DROP CONSTRAINT person_requests_kind_check;
ALTER TABLE person_requests ADD CONSTRAINT person_requests_kind_check
    CHECK (kind IN ('retry','repair','revise','answer','hold','release','rerun','reuse_across_tool_change'));
ALTER TABLE act_chain DROP CONSTRAINT act_chain_kind_check;
ALTER TABLE act_chain ADD CONSTRAINT act_chain_kind_check
    CHECK (kind IN ('approval','settlement','retry','repair','revise','approval_spent','approval_voided','answer','hold','release','rerun','reuse_across_tool_change'));
"#;

/// The schema version of the database, `None` when the engine never made
/// its tables there.
pub fn version(conn: &Conn) -> Result<Option<i64>> {
    let rows = conn.query("SELECT to_regclass('schema_meta') IS NOT NULL", p![])?;
    let exists: bool = rows.first().map(|r| r.try_get(0)).transpose().map_err(col)?.unwrap_or(false);
    if !exists {
        return Ok(None);
    }
    let rows = conn.query("SELECT version FROM schema_meta WHERE id = 1", p![])?;
    rows.first().map(|r| r.try_get(0)).transpose().map_err(col)
}

fn col(e: tokio_postgres::Error) -> Error {
    Error::new(Code::StoreCorrupt, format!("the store's schema_meta does not read: {e}"))
}

/// Refuse a database newer than this engine.
pub fn refuse_newer(version: Option<i64>, place: &str) -> Result<()> {
    match version {
        Some(v) if v > SCHEMA_VERSION => Err(Error::new(
            Code::SchemaTooNew,
            format!("the store has schema version {v}; this engine knows up to {SCHEMA_VERSION}. Use a newer engine."),
        )
        .at(place.to_string())),
        _ => Ok(()),
    }
}

/// Bring the schema up to `SCHEMA_VERSION` in one transaction, under the
/// migration lock; the version is read again under it.
pub fn migrate(conn: &Conn, place: &str) -> Result<()> {
    let before = version(conn)?;
    refuse_newer(before, place)?;
    if before == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    conn.begin("BEGIN")?;
    let applied = (|| -> Result<()> {
        conn.query("SELECT pg_advisory_xact_lock($1)", p![MIGRATION_LOCK])?;
        conn.query(
            "CREATE TABLE IF NOT EXISTS schema_meta (id INTEGER PRIMARY KEY CHECK (id = 1), version BIGINT NOT NULL,
               store_id TEXT NOT NULL DEFAULT md5(random()::text || clock_timestamp()::text))",
            p![],
        )?;
        let now = version(conn)?.unwrap_or(0);
        refuse_newer(Some(now), place)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(now.max(0) as usize) {
            batch(conn, &render(sql, Dialect::Postgres))?;
            conn.query(
                "INSERT INTO schema_meta (id, version) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET version = $1",
                p![(i + 1) as i64],
            )?;
            if i + 1 == CHAIN_FROM {
                super::chain::adopt(&super::sql::PgSql::reader(conn))?;
            }
        }
        Ok(())
    })();
    match applied {
        Ok(()) => {
            conn.commit()?;
            Ok(())
        }
        Err(e) => {
            let _ = conn.rollback();
            Err(e)
        }
    }
}

/// A migration's statements, one at a time (the extended protocol takes
/// one statement per query). Statements end with `;` at a line's end; a
/// function body between `$$` keeps its own.
fn batch(conn: &Conn, sql: &str) -> Result<()> {
    let mut stmt = String::new();
    let mut in_body = false;
    for line in sql.lines() {
        if line.trim_start().starts_with("--") {
            continue;
        }
        in_body ^= line.matches("$$").count() % 2 == 1;
        stmt.push_str(line);
        stmt.push('\n');
        if !in_body && line.trim_end().ends_with(';') {
            conn.query(stmt.trim().trim_end_matches(';'), p![])?;
            stmt.clear();
        }
    }
    if !stmt.trim().is_empty() {
        conn.query(stmt.trim(), p![])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each migration's text as PostgreSQL runs it, pinned: a released
    /// migration is never edited. (Schemas 1 and 3 have been written
    /// from the pieces SQLite's share, `queries::ddl`, since their
    /// release: the same statements, with SQLite's comments and spacing;
    /// `pg_dump -s` of a store made by either text is the same.)
    #[test]
    fn every_released_migration_is_the_text_it_was() {
        const RELEASED: [&str; 8] = [
            "33c2bfb0a5305eab61687c263bfc203e2f062b4c6ce3622f121b866cfcb5b5b4",
            "899ca8f9b499a4f04639b5093c88c998cfdc0d3d5301084316d944ffcc4cbce3",
            "d8b728e73d31f9ba6227ca1b1d9c9daa3c74168b22bc100482b9c6326dc88919",
            "9188ab3e2ef992893208cd2dcaadcb479d45121bbb2397639d5ef617370c048c",
            "560411a07c8f1857ae37bd7b307bffea17ec310eda6d2956f8f53a53eebb5463",
            "725cf1c132daebd37918eec27289ff97c12b9fdb274a2152f1d3235209490c94",
            "176f48a5da3ab29c09274d9a7c7d9a4fe5da4d35dcc66e0877aa195d56700250",
            "213a9f3b92ee4839ba07874f71419a5d0a60f95b01202d3c160577d082d70f6f",
        ];
        for (i, (sql, digest)) in MIGRATIONS.iter().zip(RELEASED).enumerate() {
            let text = render(sql, Dialect::Postgres);
            assert_eq!(crate::digest::content(text.as_bytes()), digest, "migration {}", i + 1);
        }
    }
}
