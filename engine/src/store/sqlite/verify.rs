//! `engine verify` on a SQLite store: the file opened read-only (never
//! migrated, never checkpointed, no lease taken, so it runs beside a live
//! engine and on a damaged store), its rows given to the shared checks
//! (`store::verify`), and the checks only a SQLite file has: an
//! interrupted rollback journal, SQLite's integrity and foreign-key
//! checks, the schema's tables and triggers, the store lease's generation.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::schema;
use crate::error::{Error, Result};
use crate::store::verify::{self as checks, found, Cell, Finding, Own, Verdict, Verified, VerifyDb, CHECKS};

/// Run every check on the store at `path`.
pub fn verify(path: &Path) -> Result<Verified> {
    let conn = super::open::open_existing(&super::files::StoreFiles::new(path), OpenFlags::SQLITE_OPEN_READ_ONLY)?
        .ok_or_else(|| Error::usage(format!("no store at {}", path.display())).at(path.display().to_string()))?;
    let place = path.display().to_string();
    let mut db = SqliteVerify { path: path.to_path_buf(), conn };
    // A read-only connection cannot roll a hot journal back, so it must be
    // named before anything reads the file (the schema version included).
    if let Some(f) = db.hot_journal() {
        return Err(checks::failed(&place, &CHECKS[0], &f, &[]));
    }
    let version = super::open::refuse_newer_schema(&db.conn, path)?;
    if version > 0 && version < schema::SCHEMA_VERSION {
        // Not damage: a writing command migrates it; verify never does.
        return Err(Error::usage(format!(
            "the store has schema version {version}, older than this engine's {}: `engine run` migrates it, then verify checks it",
            schema::SCHEMA_VERSION
        ))
        .at(place));
    }
    db.conn.busy_timeout(crate::limits::STORE_BUSY_TIMEOUT)?;
    checks::run(&mut db, &place)
}

struct SqliteVerify {
    path: PathBuf,
    conn: Connection,
}

impl VerifyDb for SqliteVerify {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Cell>>> {
        let mut stmt = self.conn.prepare(sql)?;
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push((0..n).map(|i| r.get::<_, rusqlite::types::Value>(i).map(cell)).collect::<rusqlite::Result<_>>()?);
        }
        Ok(out)
    }

    fn own(&mut self, check: Own) -> Result<Verdict> {
        let found = match check {
            Own::HotJournal => self.hot_journal(),
            Own::Integrity => self.integrity()?,
            Own::Schema => self.schema()?,
            Own::ForeignKeys => self.first_row(
                "SELECT \"table\" || ' row ' || COALESCE(rowid, '?'), 'refers to a missing ' || parent || ' row'
                 FROM pragma_foreign_key_check LIMIT 1",
            )?,
            Own::Generation => self.first_row(&format!(
                "SELECT {}, 'was written by generation ' || a.generation || ', newer than the lease''s '
                        || COALESCE((SELECT generation FROM lease WHERE id = 1), 'none')
                 FROM attempts a
                 WHERE a.generation > COALESCE((SELECT generation FROM lease WHERE id = 1), 0)
                 ORDER BY a.id LIMIT 1",
                checks::ATTEMPT
            ))?,
            Own::ActChain => {
                super::chain::first_problem(&self.conn)?.and_then(|(entry, problem)| found(entry, problem))
            }
        };
        Ok(Verdict::Checked(found))
    }
}

fn cell(v: rusqlite::types::Value) -> Cell {
    use rusqlite::types::Value as V;
    match v {
        V::Null => Cell::Null,
        V::Integer(i) => Cell::Int(i),
        V::Real(f) => Cell::Text(f.to_string()),
        V::Text(t) => Cell::Text(t),
        V::Blob(b) => Cell::Bytes(b),
    }
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
    "plan_cache",
];
const TRIGGERS: &[&str] = &[
    "events_append_only_update",
    "events_append_only_delete",
    "act_chain_append_only_update",
    "act_chain_append_only_delete",
];

impl SqliteVerify {
    fn first_row(&mut self, sql: &str) -> Result<Option<Finding>> {
        Ok(self.rows(sql)?.into_iter().next().map(|r| Finding {
            entry: r.first().map(Cell::text).unwrap_or_default(),
            problem: r.get(1).map(Cell::text).unwrap_or_default(),
        }))
    }

    /// A non-empty `-journal` beside the store: a transaction in rollback
    /// mode (the store's creation, before it turns to WAL) was interrupted,
    /// and only a writer that opens the store can roll it back.
    fn hot_journal(&self) -> Option<Finding> {
        let journal = PathBuf::from(format!("{}-journal", self.path.display()));
        match std::fs::symlink_metadata(&journal) {
            Ok(meta) if meta.len() > 0 => found(
                journal.display().to_string(),
                format!(
                    "an interrupted transaction's rollback journal ({} bytes): the store is not as any commit left it until a writer rolls it back (verify does not write)",
                    meta.len()
                ),
            ),
            _ => None,
        }
    }

    fn integrity(&mut self) -> Result<Option<Finding>> {
        let lines: Vec<String> = self
            .rows("PRAGMA integrity_check(20)")?
            .iter()
            .map(|r| r.first().map(Cell::text).unwrap_or_default())
            .collect();
        if lines == ["ok"] {
            return Ok(None);
        }
        Ok(found("the database file", lines.join("; ")))
    }

    fn schema(&mut self) -> Result<Option<Finding>> {
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == 0 {
            return Ok(found(
                "the schema",
                "version 0: the file holds no ledger (a creation that never finished, or a ledger that lost its write-ahead log)",
            ));
        }
        let present = |kind: &str, name: &str| -> Result<bool> {
            Ok(self.conn.query_row(
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
}
