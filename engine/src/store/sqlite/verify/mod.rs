//! `engine verify`: check a store and name the first bad thing.
//!
//! The checks are a list of named entries (`CHECKS`), run in order, each
//! returning the first entry it finds wrong; the first failure stops the
//! list (later checks may only restate it). SQLite's own checks come first
//! (a damaged file makes every later answer doubtful), then the ledger's
//! invariants: what the code that writes the ledger guarantees in one
//! transaction, restated as a query over what is there now.
//!
//! Read-only: the file is opened with `SQLITE_OPEN_READ_ONLY`, never
//! migrated, never checkpointed, and no lease is taken, so it can run
//! beside a live engine and on a store that is damaged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::OpenFlags;
use serde::Serialize;
use serde_json::json;

mod ctx;
mod file;
mod invariants;

pub use ctx::Finding;
use ctx::{found, Ctx};
use file::*;
use invariants::*;

use super::schema;
use crate::error::{Code, Error, Result};

/// One named check: `run` returns the first bad entry it finds.
pub struct Check {
    pub name: &'static str,
    /// What it asserts, in a line (printed by `engine verify`).
    pub asserts: &'static str,
    run: fn(&mut Ctx) -> Result<Option<Finding>>,
}

/// The checks, in the order they run. A new invariant is one more entry.
pub const CHECKS: &[Check] = &[
    // First: `verify` runs it before anything reads the file.
    Check {
        name: "no_hot_journal",
        asserts: "no interrupted transaction's rollback journal waits beside the store",
        run: no_hot_journal,
    },
    Check { name: "sqlite_integrity", asserts: "PRAGMA integrity_check says ok", run: sqlite_integrity },
    Check {
        name: "schema",
        asserts: "the schema version is this engine's, with every table and the append-only triggers",
        run: schema_present,
    },
    Check { name: "foreign_keys", asserts: "PRAGMA foreign_key_check finds nothing", run: foreign_keys },
    Check { name: "json_columns", asserts: "every JSON column parses (evidence as evidence)", run: json_columns },
    Check { name: "blobs", asserts: "every blob's BLAKE3 digest and size match its bytes", run: blobs_addressed },
    Check {
        name: "plan_digests",
        asserts: "every revision's stored plan is valid and reproduces its plan and goal contract digests",
        run: plan_digests,
    },
    Check {
        name: "lease_generation",
        asserts: "no attempt was written by a generation newer than the lease's",
        run: lease_generation,
    },
    Check {
        name: "budget_counters",
        asserts: "each goal's calls and cost counters equal a recount of its attempts",
        run: budget_counters,
    },
    Check {
        name: "tries_contiguous",
        asserts: "an operation's tries are 1, 2, … n, each once",
        run: tries_contiguous,
    },
    Check {
        name: "one_request_per_operation",
        asserts: "all tries of an operation carry the same request digest",
        run: one_request_per_operation,
    },
    Check {
        name: "attempt_traces",
        asserts: "an attempt's state matches its traces (dispatch time, receipt)",
        run: attempt_traces,
    },
    Check {
        name: "settlements",
        asserts: "settled attempts have exactly one settlement, with their outcome and operation",
        run: settlements,
    },
    Check {
        name: "succeeded_validated",
        asserts: "a succeeded attempt (or task) has a passing result of every validation bound to its checkpoint",
        run: succeeded_validated,
    },
    Check {
        name: "approvals",
        asserts: "an approval is consumed or voided at most once, by one attempt of its own operation and request",
        run: approvals,
    },
    Check {
        name: "repeats_approved",
        asserts: "every repeat of paid or external work, and every call of a task that requires approval, consumed an approval",
        run: repeats_approved,
    },
    Check {
        name: "task_follows_attempt",
        asserts: "a task's state agrees with its latest attempt (in doubt: running; unknown: effect_unknown)",
        run: task_follows_attempt,
    },
    Check {
        name: "goal_verdicts",
        asserts: "a satisfied goal has no unknown or unsettled outcome, every task complete, every acceptance check passed",
        run: goal_verdicts,
    },
    // Last: a more specific check names a bad row for what it is first.
    Check {
        name: "act_chain",
        asserts: "every person's act (approval, settlement, retry, repair, revision) and every spending of an approval is on the act chain as recorded, and the chain is whole",
        run: act_chain,
    },
];

/// What `engine verify` reports when every check passed.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub store: PathBuf,
    pub checks: Vec<&'static str>,
}

/// Run every check on the store at `path`; `STORE_CORRUPT` naming the
/// first check that failed and its first bad entry.
pub fn verify(path: &Path) -> Result<Verified> {
    let conn = super::open::open_existing(&super::files::StoreFiles::new(path), OpenFlags::SQLITE_OPEN_READ_ONLY)?
        .ok_or_else(|| Error::usage(format!("no store at {}", path.display())).at(path.display().to_string()))?;
    let mut ctx = Ctx { path: path.to_path_buf(), conn, plans: HashMap::new(), plans_loaded: false };
    // A read-only connection cannot roll a hot journal back, so it must be
    // named before anything reads the file (the schema version included).
    if let Some(f) = no_hot_journal(&mut ctx)? {
        return Err(corrupt(path, &CHECKS[0], &f, &[]));
    }
    let version = super::open::refuse_newer_schema(&ctx.conn, path)?;
    if version > 0 && version < schema::SCHEMA_VERSION {
        // Not damage: a writing command migrates it; verify never does.
        return Err(Error::usage(format!(
            "the store has schema version {version}, older than this engine's {}: `engine run` migrates it, then verify checks it",
            schema::SCHEMA_VERSION
        ))
        .at(path.display().to_string()));
    }
    ctx.conn.busy_timeout(crate::limits::STORE_BUSY_TIMEOUT)?;
    let mut passed = Vec::new();
    for check in CHECKS {
        // A check that cannot even read what it checks has found damage.
        let finding =
            (check.run)(&mut ctx).unwrap_or_else(|e| found("the store", format!("cannot be read: {}", e.message)));
        if let Some(f) = finding {
            return Err(corrupt(path, check, &f, &passed));
        }
        passed.push(check.name);
    }
    Ok(Verified { store: path.to_path_buf(), checks: passed })
}

/// The act chain, entry by entry, and every act against its entry.
fn act_chain(ctx: &mut Ctx) -> Result<Option<Finding>> {
    Ok(super::chain::first_problem(&ctx.conn)?.and_then(|(entry, problem)| found(entry, problem)))
}

/// A broken act chain is tampering (`STORE_TAMPERED`, exit 2); anything
/// else is damage (`STORE_CORRUPT`).
fn corrupt(path: &Path, check: &Check, f: &Finding, passed: &[&str]) -> Error {
    let code = if check.name == "act_chain" { Code::StoreTampered } else { Code::StoreCorrupt };
    Error::new(code, format!("check `{}` failed: {}: {}", check.name, f.entry, f.problem))
        .at(path.display().to_string())
        .with_details(json!({"check": check.name, "entry": f.entry, "problem": f.problem, "passed": passed}))
}
