//! The checks of the file as SQLite holds it: no interrupted transaction,
//! SQLite's own integrity and foreign-key checks, the schema, every JSON
//! column and blob, and the stored plans against their digests.

use std::path::PathBuf;

use serde_json::Value;

use super::ctx::{first_row, found, Ctx, Finding};
use crate::error::Result;

// ------------------------------------------------------------ SQLite

/// A non-empty `-journal` beside the store: a transaction in rollback mode
/// (the store's creation, before it turns to WAL) was interrupted, and
/// only a writer that opens the store can roll it back.
pub(super) fn no_hot_journal(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let journal = PathBuf::from(format!("{}-journal", ctx.path.display()));
    Ok(match std::fs::symlink_metadata(&journal) {
        Ok(meta) if meta.len() > 0 => found(
            journal.display().to_string(),
            format!(
                "an interrupted transaction's rollback journal ({} bytes): the store is not as any commit left it until a writer rolls it back (verify does not write)",
                meta.len()
            ),
        ),
        _ => None,
    })
}

pub(super) fn sqlite_integrity(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let mut stmt = ctx.conn.prepare("PRAGMA integrity_check(20)")?;
    let lines: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    if lines == ["ok"] {
        return Ok(None);
    }
    Ok(found("the database file", lines.join("; ")))
}

const TABLES: &[&str] = &[
    "lease",
    "events",
    "blobs",
    "goals",
    "revisions",
    "tasks",
    "attempts",
    "receipts",
    "evidence",
    "claims",
    "check_results",
    "checkpoints",
    "file_cache",
    "settlements",
    "approvals",
    "store_meta",
    "pending_requests",
    "person_requests",
    "act_chain",
    "request_ids",
    "outputs",
];
const TRIGGERS: &[&str] = &[
    "events_append_only_update",
    "events_append_only_delete",
    "act_chain_append_only_update",
    "act_chain_append_only_delete",
];

pub(super) fn schema_present(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let version: i64 = ctx.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Ok(found(
            "the schema",
            "version 0: the file holds no ledger (a creation that never finished, or a ledger that lost its write-ahead log)",
        ));
    }
    let present = |kind: &str, name: &str| -> Result<bool> {
        Ok(ctx.conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = ?1 AND name = ?2)",
            [kind, name],
            |r| r.get(0),
        )?)
    };
    for t in TABLES {
        if !present("table", t)? {
            return Ok(found(format!("table {t}"), "is missing"));
        }
    }
    for t in TRIGGERS {
        if !present("trigger", t)? {
            return Ok(found(
                format!("trigger {t}"),
                "is missing: the event log or the act chain is no longer append-only",
            ));
        }
    }
    Ok(None)
}

pub(super) fn foreign_keys(ctx: &mut Ctx) -> Result<Option<Finding>> {
    first_row(
        &ctx.conn,
        "SELECT \"table\" || ' row ' || COALESCE(rowid, '?'), 'refers to a missing ' || parent || ' row'
         FROM pragma_foreign_key_check LIMIT 1",
    )
}

// ------------------------------------------------------------ content

/// (table, key column, JSON column, may be NULL)
const JSON_COLUMNS: &[(&str, &str, &str)] = &[
    ("revisions", "goal_id || ' r' || revision", "plan_json"),
    ("tasks", "goal_id || ' r' || revision || ' ' || task_ref", "detail"),
    ("attempts", "id", "request_json"),
    ("attempts", "id", "class_evidence_ids"),
    ("attempts", "id", "class_claim_ids"),
    ("attempts", "id", "process"),
    ("receipts", "attempt_id", "data"),
    ("claims", "id", "data"),
    ("events", "seq", "data"),
    ("checkpoints", "digest", "data"),
];

pub(super) fn json_columns(ctx: &mut Ctx) -> Result<Option<Finding>> {
    for (table, key, column) in JSON_COLUMNS {
        let sql = format!("SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL");
        let mut stmt = ctx.conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get::<_, rusqlite::types::Value>(0).map(|v| sql_text(&v))?;
            let text: String = r.get(1)?;
            if let Err(e) = serde_json::from_str::<Value>(&text) {
                return Ok(found(format!("{table} {key}"), format!("`{column}` is not JSON: {e}")));
            }
        }
    }
    let mut stmt = ctx.conn.prepare("SELECT id, data FROM evidence ORDER BY id")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (id, text): (i64, String) = (r.get(0)?, r.get(1)?);
        if let Err(e) = serde_json::from_str::<crate::evidence::Evidence>(&text) {
            return Ok(found(format!("evidence {id}"), format!("does not parse as evidence: {e}")));
        }
    }
    Ok(None)
}

fn sql_text(v: &rusqlite::types::Value) -> String {
    use rusqlite::types::Value as V;
    match v {
        V::Null => "NULL".into(),
        V::Integer(i) => i.to_string(),
        V::Real(f) => f.to_string(),
        V::Text(t) => t.clone(),
        V::Blob(b) => format!("<{} bytes>", b.len()),
    }
}

pub(super) fn blobs_addressed(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let mut stmt = ctx.conn.prepare("SELECT digest, size, data FROM blobs ORDER BY digest")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (digest, size, data): (String, i64, Vec<u8>) = (r.get(0)?, r.get(1)?, r.get(2)?);
        if size != data.len() as i64 {
            return Ok(found(format!("blob {digest}"), format!("records {size} bytes but holds {}", data.len())));
        }
        let actual = crate::digest::content(&data);
        if actual != digest {
            return Ok(found(format!("blob {digest}"), format!("its bytes hash to {actual}")));
        }
    }
    Ok(None)
}

pub(super) fn plan_digests(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let recorded: Vec<(String, i64, String, String)> = {
        let mut stmt = ctx.conn.prepare("SELECT goal_id, revision, plan_digest, goal_contract FROM revisions")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    let plans = &ctx.plans;
    for (goal, revision, plan_digest, goal_contract) in recorded {
        let entry = format!("goal {goal} revision {revision}");
        let Some(file) = plans.get(&(goal.clone(), revision)) else { continue };
        let mut file = file.clone();
        if let Err(e) = crate::plan::validate::validate_structure(&file) {
            return Ok(found(entry, format!("stored plan is not a valid plan: {e}")));
        }
        for task in &mut file.tasks {
            crate::digest::sort_keys(&mut task.action);
        }
        let digests = crate::plan::PlanDigests::compute(&file);
        if digests.plan != plan_digest {
            return Ok(found(entry, format!("stored plan digests to {}, recorded {plan_digest}", digests.plan)));
        }
        if digests.goal_contract != goal_contract {
            return Ok(found(entry, "stored plan's goal contract digest differs from the recorded one"));
        }
        if file.goal.as_ref().is_some_and(|g| g.id != goal) {
            return Ok(found(entry, "stored plan names another goal"));
        }
    }
    Ok(None)
}
