//! `engine verify` on a SQLite store: the file opened read-only (never
//! migrated, never checkpointed, no lease taken, so it runs beside a live
//! engine and on a damaged store), its rows given to the shared checks
//! (`store::verify`), and the checks only a SQLite file has: an
//! interrupted rollback journal, SQLite's integrity and foreign-key
//! checks, the schema's tables and triggers, the store lease's generation.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::files::StoreFiles;
use super::schema;
use crate::error::{Code, Error, Result};
use crate::store::verify::{self as checks, found, Cell, Finding, Own, Verdict, Verified, VerifyDb, CHECKS};

/// Run every check on the store at `path`: first what every open checks
/// (the files' kinds, owners and modes, the header, the schema version and
/// the store against its mark: `open.rs`, the same code and words as any
/// command), then every check of `CHECKS`.
pub fn verify(path: &Path) -> Result<Verified> {
    let files = super::files::StoreFiles::new(path);
    let conn = open_to_check(&files, path)?;
    let place = path.display().to_string();
    // A read-only connection cannot roll a hot journal back, so it must be
    // named before anything reads the file (the schema version included).
    if let Some(f) = hot_journal(path) {
        return Err(checks::failed(&place, &CHECKS[0], &f, &[]));
    }
    let (version, _) = super::open::judge(&conn, &files)?;
    if version > 0 && version < schema::SCHEMA_VERSION {
        // Not damage: a writing command migrates it; verify never does.
        return Err(Error::usage(format!(
            "the store has schema version {version}, older than this engine's {}: `engine run` migrates it, then verify checks it",
            schema::SCHEMA_VERSION
        ))
        .at(place));
    }
    conn.busy_timeout(crate::limits::STORE_BUSY_TIMEOUT)?;
    // In one snapshot: beside a live engine, every check reads the same
    // commit.
    super::read_in_one_snapshot(&conn, || check(&conn, path))
}

/// Every check of `CHECKS` over an open connection to the store at
/// `path`: `engine verify`'s, and every open's when the store is not known
/// to be whole (`open::examine`).
pub(super) fn check(conn: &Connection, path: &Path) -> Result<Verified> {
    let mut db = SqliteVerify { path: path.to_path_buf(), conn, columns: HashMap::new() };
    checks::run(&mut db, &path.display().to_string())
}

/// What a store is opened for, as `examine` weighs a person's act edited
/// outside the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opened {
    /// Reading (`status`, `explain`, `log`, `report`): an act the chain
    /// does not vouch for is the reader's to show as such; nothing acts
    /// on it (every act is checked against the chain before it is).
    Reading,
    /// Writing (under the lease): refused before anything is written.
    Writing,
}

/// A store not known to be whole (`why`: its last writer died holding it,
/// did not close it, or its file changed since the engine closed it) is
/// checked as `engine verify` checks it — SQLite's integrity check, then
/// every invariant of the ledger and the act chain — before anything
/// trusts it: a command that would read a damaged row refuses as verify
/// does, with the same code and the same words. A person's act edited
/// outside the engine (`STORE_TAMPERED`) refuses a writer; a reader shows
/// it marked as such. `true`: every check passed (a reader's tolerated
/// tampered act is `false`: a writer must still be refused it).
pub(super) fn examine(conn: &Connection, files: &StoreFiles, why: &str, opened: Opened) -> Result<bool> {
    #[cfg(test)]
    EXAMINED.with(|n| n.set(n.get() + 1));
    match check(conn, &files.db) {
        Ok(_) => Ok(true),
        Err(e) if e.code == Code::StoreTampered && opened == Opened::Reading => Ok(false),
        Err(e) => Err(Error {
            message: format!("the store is not known to be whole ({why}) and was checked: {}", e.message),
            ..e
        }),
    }
}

/// The store opened for `verify`: read-only, and read by copy, not
/// through the memory map that other connections read by
/// (`open::connect`; a writer until its 64th commit): a disk that fails a read then gives the checker an
/// I/O error to name, where a map would end it with SIGBUS
/// (docs/store.md). `PRAGMA mmap_size` itself reads nothing.
fn open_to_check(files: &StoreFiles, path: &Path) -> Result<Connection> {
    let conn = super::open::open_existing(files, OpenFlags::SQLITE_OPEN_READ_ONLY)?
        .ok_or_else(|| crate::store::location::no_store_at(path))?;
    conn.execute_batch("PRAGMA mmap_size = 0").map_err(|e| super::open::store_open_error(e, path))?;
    Ok(conn)
}

#[cfg(test)]
thread_local! {
    /// How many checks on open this thread made (the tests of `checked.rs`).
    pub(super) static EXAMINED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

struct SqliteVerify<'c> {
    path: PathBuf,
    conn: &'c Connection,
    /// Each table's columns as the store holds them, (name, declared
    /// type) by `cid`: read once per verify, for `schema` and
    /// `column_types` (in one snapshot, they cannot change between the two).
    columns: HashMap<&'static str, Vec<(String, String)>>,
}

impl VerifyDb for SqliteVerify<'_> {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Cell>>> {
        let mut stmt = self.conn.prepare(sql)?;
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push((0..n).map(|i| r.get_ref(i).map(cell)).collect::<rusqlite::Result<_>>()?);
        }
        Ok(out)
    }

    fn own(&mut self, check: Own) -> Result<Verdict> {
        let found = match check {
            Own::HotJournal => hot_journal(&self.path),
            Own::Integrity => self.integrity()?,
            Own::Schema => self.schema()?,
            Own::ColumnTypes => self.column_types()?,
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
            Own::ActChain => super::chain::first_problem(self.conn)?.and_then(|(entry, problem)| found(entry, problem)),
        };
        Ok(Verdict::Checked(found))
    }
}

/// A value as the checks read it. Text that is not UTF-8 (which
/// `column_types` names before any other check reads it) is read with its
/// bad bytes replaced, never trusted and never a panic.
fn cell(v: ValueRef<'_>) -> Cell {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(i) => Cell::Int(i),
        ValueRef::Real(f) => Cell::Text(f.to_string()),
        ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
    }
}

/// A table's columns, (name, declared type) by `cid`.
fn table_info(conn: &Connection, table: &str) -> Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached("SELECT name, type FROM pragma_table_info(?1) ORDER BY cid")?;
    let columns = stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    Ok(columns)
}

/// A table's columns, as `name TYPE`, sorted.
fn sorted_columns(columns: &[(String, String)]) -> Vec<String> {
    let mut columns: Vec<String> = columns.iter().map(|(name, kind)| format!("{name} {kind}")).collect();
    columns.sort();
    columns
}

/// Each table's columns (`checks::tables`, in its order) (in its order) as this engine's migrations
/// make them, learned once per process from a fresh in-memory store: the
/// migrations stay the schema's one definition, and running all of them
/// at every verify cost most of a simulated seed's time.
fn reference_columns() -> Result<&'static [Vec<String>]> {
    static COLUMNS: OnceLock<std::result::Result<Vec<Vec<String>>, String>> = OnceLock::new();
    let learn = || -> Result<Vec<Vec<String>>> {
        super::open::process_settings();
        let fresh = Connection::open_in_memory()?;
        schema::migrate(&fresh)?;
        checks::tables(OWN_TABLES).map(|t| Ok(sorted_columns(&table_info(&fresh, t)?))).collect()
    };
    match COLUMNS.get_or_init(|| learn().map_err(|e| e.to_string())) {
        Ok(columns) => Ok(columns),
        Err(e) => Err(Error::internal(format!("cannot build this engine's schema in memory: {e}"))),
    }
}

/// A non-empty `-journal` beside the store: a transaction in rollback
/// mode (the store's creation, before it turns to WAL) was interrupted,
/// and only a writer that opens the store can roll it back.
fn hot_journal(store: &Path) -> Option<Finding> {
    let journal = PathBuf::from(format!("{}-journal", store.display()));
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

/// The tables of SQLite's alone, beside the ledger's (`checks::tables`).
const OWN_TABLES: &[&str] = &["lease", "store_meta", "plan_cache"];
const TRIGGERS: &[&str] = &[
    "events_append_only_update",
    "events_append_only_delete",
    "act_chain_append_only_update",
    "act_chain_append_only_delete",
];

impl SqliteVerify<'_> {
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

    /// Every value of every table has its column's declared type (or is
    /// NULL), and every text is UTF-8: SQLite stores whatever it is given
    /// (a text column edited to hold bytes, or bytes cast to text), and
    /// every later reader relies on the type. Each table read in one pass
    /// (a statement per column made it most of a simulated seed's time);
    /// the finding is the first column's, in the table's order, and in it
    /// the first row's: a wrong type before text that is not UTF-8.
    fn column_types(&mut self) -> Result<Option<Finding>> {
        for table in checks::tables(OWN_TABLES) {
            let columns = self.columns(table)?;
            if let Some(f) = self.first_mistyped(table, &columns)? {
                return Ok(Some(f));
            }
        }
        Ok(None)
    }

    /// `table`'s columns as the store holds them (`columns`), read at the
    /// first call.
    fn columns(&mut self, table: &'static str) -> Result<Vec<(String, String)>> {
        if let Some(columns) = self.columns.get(table) {
            return Ok(columns.clone());
        }
        let columns = table_info(self.conn, table)?;
        self.columns.insert(table, columns.clone());
        Ok(columns)
    }

    /// `table`'s first value of a wrong type or not UTF-8 (see
    /// `column_types`), its typed columns read in one pass by rowid: a
    /// text column's value (its type is the value's), every other one's
    /// `typeof` (its bytes are never read).
    fn first_mistyped(&self, table: &str, columns: &[(String, String)]) -> Result<Option<Finding>> {
        let typed: Vec<(&str, &str, &str)> = columns
            .iter()
            .filter_map(|(column, declared)| {
                let kind = match declared.as_str() {
                    "INTEGER" => "integer",
                    "TEXT" => "text",
                    "BLOB" => "blob",
                    _ => return None,
                };
                Some((column.as_str(), declared.as_str(), kind))
            })
            .collect();
        if typed.is_empty() {
            return Ok(None);
        }
        let read: Vec<String> = typed
            .iter()
            .map(|(c, _, kind)| if *kind == "text" { format!("\"{c}\"") } else { format!("typeof(\"{c}\")") })
            .collect();
        let sql = format!("SELECT rowid, {} FROM \"{table}\" ORDER BY rowid", read.join(", "));
        // Per column, the first row holding a wrong type, and the first
        // holding text that is not UTF-8.
        let mut wrong: Vec<Option<(i64, String)>> = vec![None; typed.len()];
        let mut not_utf8: Vec<Option<(i64, String)>> = vec![None; typed.len()];
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            for (i, (_, _, kind)) in typed.iter().enumerate() {
                // `typeof`'s word (ASCII), or the text column's own type.
                let (held, text) = match r.get_ref(i + 1)? {
                    ValueRef::Text(t) if *kind != "text" => (std::str::from_utf8(t).unwrap_or("?"), None),
                    ValueRef::Null => ("null", None),
                    ValueRef::Integer(_) => ("integer", None),
                    ValueRef::Real(_) => ("real", None),
                    ValueRef::Text(t) => ("text", Some(t)),
                    ValueRef::Blob(_) => ("blob", None),
                };
                if held != "null" && held != *kind && wrong[i].is_none() {
                    wrong[i] = Some((rowid, held.to_string()));
                }
                if let (Some(Err(e)), None) = (text.map(std::str::from_utf8), &not_utf8[i]) {
                    not_utf8[i] = Some((rowid, e.to_string()));
                }
            }
        }
        let entry = |rowid: i64| format!("{table} row {rowid}");
        for (i, (column, declared, _)) in typed.iter().enumerate() {
            if let Some((rowid, held)) = &wrong[i] {
                let problem = format!("`{column}` holds a value of type {held}, its column is {declared}");
                return Ok(found(entry(*rowid), problem));
            }
            if let Some((rowid, e)) = &not_utf8[i] {
                return Ok(found(entry(*rowid), format!("`{column}` is not UTF-8 text ({e})")));
            }
        }
        Ok(None)
    }

    fn schema(&mut self) -> Result<Option<Finding>> {
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == 0 {
            return Ok(found(
                "the schema",
                "version 0: the file holds no ledger (a creation that never finished, or a ledger that lost its write-ahead log)",
            ));
        }
        // Which of the tables and triggers the schema names, read at once.
        let named: Vec<String> =
            checks::tables(OWN_TABLES).chain(TRIGGERS.iter().copied()).map(|n| format!("'{n}'")).collect();
        let sql = format!(
            "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name IN ({})",
            named.join(", ")
        );
        let schema: HashSet<(String, String)> =
            self.conn.prepare(&sql)?.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
        let present = |kind: &str, name: &str| schema.contains(&(kind.to_string(), name.to_string()));
        for t in checks::tables(OWN_TABLES) {
            if !present("table", t) {
                return Ok(found(format!("table {t}"), "is missing"));
            }
        }
        // Each table's columns as this engine's migrations make them: a
        // column renamed in the schema's text (a damaged byte of it) would
        // otherwise read as the outer query's column of that name.
        for (t, want) in checks::tables(OWN_TABLES).zip(reference_columns()?) {
            let have = sorted_columns(&self.columns(t)?);
            if *want != have {
                let missing: Vec<&String> = want.iter().filter(|c| !have.contains(c)).collect();
                let odd: Vec<&String> = have.iter().filter(|c| !want.contains(c)).collect();
                return Ok(found(
                    format!("table {t}"),
                    format!("has other columns than this engine's schema: missing {missing:?}, unknown {odd:?}"),
                ));
            }
        }
        for t in TRIGGERS {
            if !present("trigger", t) {
                return Ok(found(
                    format!("trigger {t}"),
                    "is missing: the event log or the act chain is no longer append-only",
                ));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_reads_the_store_by_copy_where_every_other_connection_maps_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.db");
        drop(super::super::Db::open_rw(&path).unwrap());
        let mapped = |conn: &Connection| conn.query_row("PRAGMA mmap_size", [], |r| r.get::<_, i64>(0)).unwrap();
        let checking = open_to_check(&StoreFiles::new(&path), &path).unwrap();
        assert_eq!(mapped(&checking), 0);
        let other = super::super::open::connect(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        assert!(mapped(&other) > 0);
    }
}
