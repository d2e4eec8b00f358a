//! `engine verify`: check a store and name the first bad thing, on either
//! backend.
//!
//! The checks are a list of named entries (`CHECKS`), run in order, each
//! returning the first entry it finds wrong; the first failure stops the
//! list (later checks may only restate it). The store's own checks come
//! first (a damaged file makes every later answer doubtful), then the
//! ledger's invariants: what the code that writes the ledger guarantees in
//! one transaction, restated as a query over what is there now. Those are
//! written once, in SQL both SQLite and PostgreSQL read the same way, and
//! run through `VerifyDb`; a check only one backend can make (the SQLite
//! file's integrity, the schema's shape, the lease or the claims) is asked
//! of the backend, which may answer that it does not apply there: such a
//! check is reported as not applicable, never as passed.
//!
//! Read-only: a SQLite file is opened read-only, never migrated or
//! checkpointed; PostgreSQL is read in one `REPEATABLE READ READ ONLY`
//! transaction (one consistent snapshot beside live workers). No lease or
//! claim is taken.

use serde::Serialize;
use serde_json::json;

/// The ledger's tables, the same in both stores; each adds its own
/// (`tables`).
pub const LEDGER_TABLES: &[&str] = &[
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
    "pending_requests",
    "person_requests",
    "act_chain",
    "request_ids",
    "outputs",
];

/// Every table a store must have: the ledger's, then its own.
pub fn tables(own: &'static [&'static str]) -> impl Iterator<Item = &'static str> {
    LEDGER_TABLES.iter().chain(own).copied()
}

mod content;
mod ctx;
mod invariants;

use content::*;
pub use ctx::{found, Cell, Ctx, Finding, Own, Verdict, VerifyDb, ATTEMPT};
use invariants::*;

use crate::error::{Code, Error, Result};

/// One named check.
pub struct Check {
    pub name: &'static str,
    /// What it asserts, in a line.
    pub asserts: &'static str,
    run: Run,
}

/// How a check runs: over the ledger's rows (both backends alike), or as
/// the backend's own.
enum Run {
    Ledger(fn(&mut Ctx) -> Result<Option<Finding>>),
    Own(Own),
}

/// The checks, in the order they run. A new invariant is one more entry.
pub const CHECKS: &[Check] = &[
    // First: SQLite's `verify` runs it before anything reads the file.
    Check {
        name: "no_hot_journal",
        asserts: "no interrupted transaction's rollback journal waits beside the store",
        run: Run::Own(Own::HotJournal),
    },
    Check { name: "sqlite_integrity", asserts: "PRAGMA integrity_check says ok", run: Run::Own(Own::Integrity) },
    Check {
        name: "schema",
        asserts: "the schema version is this engine's, with every table and the append-only triggers",
        run: Run::Own(Own::Schema),
    },
    Check { name: "foreign_keys", asserts: "PRAGMA foreign_key_check finds nothing", run: Run::Own(Own::ForeignKeys) },
    // Before any check reads a value as what its column holds.
    Check {
        name: "column_types",
        asserts: "every value has its column's type (integer, UTF-8 text, bytes) or is NULL",
        run: Run::Own(Own::ColumnTypes),
    },
    Check {
        name: "json_columns",
        asserts: "every JSON column parses (evidence as evidence)",
        run: Run::Ledger(json_columns),
    },
    Check {
        name: "blobs",
        asserts: "every blob's BLAKE3 digest and size match its bytes",
        run: Run::Ledger(blobs_addressed),
    },
    Check {
        name: "plan_digests",
        asserts: "every revision's stored plan is valid and reproduces its plan and goal contract digests",
        run: Run::Ledger(plan_digests),
    },
    Check {
        name: "lease_generation",
        asserts: "no attempt was written by a generation newer than the lease's (SQLite) or its task's claim's (PostgreSQL)",
        run: Run::Own(Own::Generation),
    },
    Check {
        name: "budget_counters",
        asserts: "each goal's calls and cost counters equal a recount of its attempts",
        run: Run::Ledger(budget_counters),
    },
    Check {
        name: "tries_contiguous",
        asserts: "an operation's tries are 1, 2, … n, each once",
        run: Run::Ledger(tries_contiguous),
    },
    Check {
        name: "one_request_per_operation",
        asserts: "all tries of an operation carry the same request digest",
        run: Run::Ledger(one_request_per_operation),
    },
    Check {
        name: "attempt_traces",
        asserts: "an attempt's state matches its traces (dispatch time, receipt)",
        run: Run::Ledger(attempt_traces),
    },
    Check {
        name: "settlements",
        asserts: "settled attempts have exactly one settlement, with their outcome and operation",
        run: Run::Ledger(settlements),
    },
    Check {
        name: "succeeded_validated",
        asserts: "a succeeded attempt (or task) has a passing result of every validation bound to its checkpoint",
        run: Run::Ledger(succeeded_validated),
    },
    Check {
        name: "approvals",
        asserts: "an approval is consumed or voided at most once, by one attempt of its own operation and request",
        run: Run::Ledger(approvals),
    },
    Check {
        name: "answers_in_time",
        asserts: "a person's answer given for a time was never sent after it expired",
        run: Run::Ledger(answers_in_time),
    },
    Check {
        name: "repeats_approved",
        asserts: "every repeat of paid or external work, and every call of a task that requires approval, consumed an approval",
        run: Run::Ledger(repeats_approved),
    },
    Check {
        name: "task_follows_attempt",
        asserts: "a task's state agrees with its latest attempt (in doubt: running; unknown: effect_unknown)",
        run: Run::Ledger(task_follows_attempt),
    },
    Check {
        name: "goal_verdicts",
        asserts: "a satisfied goal has no unknown or unsettled outcome, every task complete, every acceptance check passed",
        run: Run::Ledger(goal_verdicts),
    },
    Check {
        name: "outputs_kept",
        asserts: "every kept output names a blob of its size and belongs to a succeeded attempt or one settled ok",
        run: Run::Ledger(outputs_kept),
    },
    // Last: a more specific check names a bad row for what it is first.
    Check {
        name: "act_chain",
        asserts: "every person's act (approval, settlement, retry, repair, revision) and every spending of an approval is on the act chain as recorded, and the chain is whole",
        run: Run::Own(Own::ActChain),
    },
];

/// A check that does not apply to this backend, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NotApplicable {
    pub check: &'static str,
    pub why: &'static str,
}

/// What `engine verify` reports when no check failed.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// The store's file, or its URL without the password.
    pub store: String,
    /// The backend: `sqlite` or `postgres`.
    pub backend: &'static str,
    /// The checks that ran and passed, in order.
    pub checks: Vec<&'static str>,
    /// The checks that do not apply to this backend (not passed: not run).
    pub not_applicable: Vec<NotApplicable>,
}

/// Check the store at `location` (a SQLite file or a PostgreSQL URL).
pub fn verify(location: &std::path::Path) -> Result<Verified> {
    if super::is_shared(location) {
        super::postgres::verify::verify(super::url(location))
    } else {
        super::sqlite::verify::verify(location)
    }
}

/// Run every check over `db`; `STORE_CORRUPT` (or `STORE_TAMPERED` for
/// the act chain) naming the first check that failed and its first bad
/// entry. `place` names the store in errors.
pub fn run(db: &mut dyn VerifyDb, place: &str) -> Result<Verified> {
    let backend = db.backend();
    let mut ctx = Ctx::new(db);
    let (mut passed, mut not_applicable) = (Vec::new(), Vec::new());
    for check in CHECKS {
        let verdict = match &check.run {
            Run::Ledger(f) => f(&mut ctx).map(Verdict::Checked),
            Run::Own(own) => ctx.db.own(*own),
        };
        // A check that cannot even read what it checks has found damage.
        let verdict =
            verdict.unwrap_or_else(|e| Verdict::Checked(found("the store", format!("cannot be read: {}", e.message))));
        match verdict {
            Verdict::Checked(Some(f)) => {
                let tampered = tampered_first(&mut ctx, place, check, &passed);
                return Err(tampered.unwrap_or_else(|| failed(place, check, &f, &passed)));
            }
            Verdict::Checked(None) => passed.push(check.name),
            Verdict::NotApplicable(why) => not_applicable.push(NotApplicable { check: check.name, why }),
        }
    }
    Ok(Verified { store: place.to_string(), backend, checks: passed, not_applicable })
}

/// A person's act edited outside the engine is tampering whichever check
/// meets the edit first (an edited settlement's outcome also breaks
/// `settlements`; an approval's request, `approvals`): when a check of the
/// ledger fails, the act chain is asked too, and a break in it is the
/// finding. Not after damage SQLite's own checks found, where the rows the
/// chain would read cannot be trusted to be what was written.
fn tampered_first(ctx: &mut Ctx, place: &str, failed_check: &Check, passed: &[&str]) -> Option<Error> {
    const FILE_CHECKS: [&str; 3] = ["no_hot_journal", "sqlite_integrity", "schema"];
    if FILE_CHECKS.contains(&failed_check.name) || failed_check.name == ACT_CHAIN {
        return None;
    }
    let chain = CHECKS.iter().find(|c| c.name == ACT_CHAIN)?;
    match ctx.db.own(Own::ActChain) {
        Ok(Verdict::Checked(Some(f))) => Some(failed(place, chain, &f, passed)),
        _ => None,
    }
}

/// The check of the act chain (tampering, not damage).
const ACT_CHAIN: &str = "act_chain";

/// A broken act chain is tampering (`STORE_TAMPERED`, exit 2); anything
/// else is damage (`STORE_CORRUPT`).
pub fn failed(place: &str, check: &Check, f: &Finding, passed: &[&str]) -> Error {
    let code = if check.name == ACT_CHAIN { Code::StoreTampered } else { Code::StoreCorrupt };
    Error::new(code, format!("check `{}` failed: {}: {}", check.name, f.entry, f.problem))
        .at(place.to_string())
        .with_details(json!({"check": check.name, "entry": f.entry, "problem": f.problem, "passed": passed}))
}
