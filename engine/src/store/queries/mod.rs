//! The queries both stores run, written once in the one SQL dialect both
//! read: SQLite's numbered parameters (`?1`) and `IS NOT DISTINCT FROM` for
//! a null-safe equality (SQLite reads it since 3.39; the bundled one is
//! newer). PostgreSQL's text of such a query numbers its parameters `$1`
//! (`postgres`). Each store runs them through its own executor; this module
//! names neither backend's crate.

/// The latest result of each check of a scope (`evidence::ChecksOf`: ?1
/// goal, ?2 revision, ?3 scope, ?4 task), its columns as
/// `evidence::CheckResultRow` reads them.
pub(crate) const LATEST_CHECK_RESULTS: &str =
    "SELECT c.id, c.check_id, c.passed, c.attempt_id, c.checkpoint, c.evidence_id FROM check_results c
     WHERE c.goal_id = ?1 AND c.revision = ?2 AND c.scope = ?3 AND c.task_ref IS NOT DISTINCT FROM ?4
       AND c.id = (SELECT MAX(id) FROM check_results d WHERE d.goal_id = c.goal_id AND d.revision = c.revision
                   AND d.scope = c.scope AND d.task_ref IS NOT DISTINCT FROM c.task_ref AND d.check_id = c.check_id)
     ORDER BY c.check_id";

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
