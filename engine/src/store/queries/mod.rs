//! The queries both stores run, written once in the one SQL dialect both
//! read: SQLite's numbered parameters (`?1`) and `IS NOT DISTINCT FROM` for
//! a null-safe equality (SQLite reads it since 3.39; the bundled one is
//! newer). PostgreSQL's text of such a query numbers its parameters `$1`
//! (`postgres`). Each store runs them through its own executor; this module
//! names neither backend's crate. `ddl`: the tables both create.

pub(crate) mod ddl;

/// The latest result of each check of a scope (`evidence::ChecksOf`: ?1
/// goal, ?2 revision, ?3 scope, ?4 task), its columns as
/// `evidence::CheckResultRow` reads them.
pub(crate) const LATEST_CHECK_RESULTS: &str =
    "SELECT c.id, c.check_id, c.passed, c.attempt_id, c.checkpoint, c.evidence_id FROM check_results c
     WHERE c.goal_id = ?1 AND c.revision = ?2 AND c.scope = ?3 AND c.task_ref IS NOT DISTINCT FROM ?4
       AND c.id = (SELECT MAX(id) FROM check_results d WHERE d.goal_id = c.goal_id AND d.revision = c.revision
                   AND d.scope = c.scope AND d.task_ref IS NOT DISTINCT FROM c.task_ref AND d.check_id = c.check_id)
     ORDER BY c.check_id";

/// The columns an attempt's finish sets beside its state (`?1` the
/// attempt, `?2` the state it moves to): `attempts::Finish`, `?3`..`?9`.
pub(crate) const FINISH_COLUMNS: &str =
    ", finished_at_ms = ?3, class = ?4, class_rule = ?5, class_evidence_ids = ?6, class_claim_ids = ?7,
               class_next = ?8, unknown_reason = COALESCE(?9, unknown_reason)";

/// One piece of evidence (`evidence::EvidenceRow`, in its order).
pub(crate) const INSERT_EVIDENCE: &str =
    "INSERT INTO evidence (goal_id, revision, attempt_id, kind, data, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// A receipt: ?1 the attempt, ?2 when, ?3 its JSON.
pub(crate) const INSERT_RECEIPT: &str = "INSERT INTO receipts (attempt_id, at_ms, data) VALUES (?1, ?2, ?3)";

/// The attempts of a task in every revision (?1 goal, ?2 task).
pub(crate) const ATTEMPTS_OF_TASK: &str = "goal_id = ?1 AND task_ref = ?2";
/// A goal's attempts left between intent and receipt (?1 goal).
pub(crate) const ATTEMPTS_IN_DOUBT: &str = "goal_id = ?1 AND state IN ('intent_recorded','dispatched')";
/// A goal's attempts in one state (?1 goal, ?2 state).
pub(crate) const ATTEMPTS_IN_STATE: &str = "goal_id = ?1 AND state = ?2";
/// The attempts in a state (?3) that are their task's latest in a
/// revision (?1 goal, ?2 revision); the table is named `a`.
pub(crate) const LATEST_ATTEMPTS_IN_STATE: &str = "goal_id = ?1 AND revision = ?2 AND state = ?3
               AND id = (SELECT MAX(id) FROM attempts b WHERE b.goal_id = a.goal_id AND b.revision = a.revision AND b.task_ref = a.task_ref)";

/// A parameter of a shared query, as either store binds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg<'a> {
    Text(&'a str),
    Int(i64),
}

/// `sql` as PostgreSQL reads it: each `?N` parameter written `$N`.
pub(crate) fn postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let numbered = c == '?' && chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if numbered { '$' } else { c });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::postgres;

    #[test]
    fn numbered_parameters_are_written_the_postgresql_way() {
        let sql = "SELECT a FROM t WHERE b = ?1 AND c IS NOT DISTINCT FROM ?12 AND d = '?'";
        assert_eq!(postgres(sql), "SELECT a FROM t WHERE b = $1 AND c IS NOT DISTINCT FROM $12 AND d = '?'");
    }
}
