//! Evidence, blobs, claims, check results, checkpoints and the file-state
//! cache in SQLite.

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use super::sql::{exec, json_text, qrow, rows, Sql};
use crate::checkpoint::{Checkpoint, FileState};
use crate::digest;
use crate::error::Result;
use crate::ids::{AttemptId, EvidenceId};
use crate::store::evidence::{
    CheckResultRecord, CheckResultRow, ChecksOf, ClaimRecord, EvidenceRead, EvidenceRow, EvidenceWrite, NewCheckResult,
    TimedEvidence,
};
use crate::store::queries::{self, LATEST_CHECK_RESULTS};

fn timed_from_row(r: &rusqlite::Row) -> rusqlite::Result<(EvidenceId, i64, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

fn parse_timed((id, at_ms, data): (EvidenceId, i64, String)) -> Result<TimedEvidence> {
    TimedEvidence::from_row(id, at_ms, &data)
}

impl EvidenceRead for Sql<'_> {
    fn timed_evidence_of_attempt(&self, attempt: AttemptId) -> Result<Vec<TimedEvidence>> {
        let list: Vec<(EvidenceId, i64, String)> = rows(
            self.conn,
            "SELECT id, at_ms, data FROM evidence WHERE attempt_id = ?1 ORDER BY id",
            [attempt],
            timed_from_row,
        )?;
        list.into_iter().map(parse_timed).collect()
    }

    fn blob(&self, digest: &str) -> Result<Option<Vec<u8>>> {
        Ok(qrow(self.conn, "SELECT data FROM blobs WHERE digest = ?1", [digest], |r| r.get(0)).optional()?)
    }

    fn evidence_by_id(&self, id: EvidenceId) -> Result<Option<TimedEvidence>> {
        let row =
            qrow(self.conn, "SELECT id, at_ms, data FROM evidence WHERE id = ?1", [id], timed_from_row).optional()?;
        row.map(parse_timed).transpose()
    }

    fn claims_of_attempt(&self, attempt: AttemptId) -> Result<Vec<ClaimRecord>> {
        rows(self.conn, "SELECT id, authority, data FROM claims WHERE attempt_id = ?1 ORDER BY id", [attempt], |r| {
            let d: String = r.get(2)?;
            Ok(ClaimRecord {
                id: r.get(0)?,
                authority: r.get(1)?,
                data: serde_json::from_str(&d).unwrap_or(Value::Null),
            })
        })
    }

    fn claim_ids(&self, attempt: AttemptId) -> Result<Vec<i64>> {
        rows(self.conn, "SELECT id FROM claims WHERE attempt_id = ?1 ORDER BY id", [attempt], |r| r.get(0))
    }

    fn latest_check_results(&self, of: ChecksOf<'_>) -> Result<Vec<CheckResultRecord>> {
        let params = params![of.goal, of.revision, of.scope.as_str(), of.task_ref];
        let row = |r: &rusqlite::Row| -> rusqlite::Result<CheckResultRow> {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        };
        let list = rows(self.conn, LATEST_CHECK_RESULTS, params, row)?;
        Ok(list.into_iter().map(CheckResultRecord::from).collect())
    }

    fn is_judged(&self, attempt: AttemptId) -> Result<bool> {
        Ok(qrow(self.conn, "SELECT EXISTS(SELECT 1 FROM check_results WHERE attempt_id = ?1)", [attempt], |r| {
            r.get(0)
        })?)
    }

    fn checkpoint(&self, digest: &str) -> Result<Option<Checkpoint>> {
        let data: Option<String> =
            qrow(self.conn, "SELECT data FROM checkpoints WHERE digest = ?1", [digest], |r| r.get(0)).optional()?;
        Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
    }

    fn file_states(&self) -> Result<Vec<FileState>> {
        rows(
            self.conn,
            "SELECT path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns FROM file_cache",
            [],
            |r| {
                Ok(FileState {
                    path: r.get(0)?,
                    size: r.get::<_, i64>(1)? as u64,
                    mtime_ns: r.get(2)?,
                    ctime_ns: r.get(3)?,
                    inode: r.get::<_, i64>(4)? as u64,
                    dev: r.get::<_, i64>(5)? as u64,
                    digest: r.get(6)?,
                    hashed_at_ns: r.get(7)?,
                })
            },
        )
    }
}

impl EvidenceWrite for Sql<'_> {
    fn insert_evidence_row(&mut self, row: &EvidenceRow<'_>) -> Result<EvidenceId> {
        let params = params![row.goal, row.revision, row.attempt, row.kind, row.data, row.at_ms];
        exec(self.conn, queries::INSERT_EVIDENCE, params)?;
        Ok(EvidenceId(self.conn.last_insert_rowid()))
    }

    fn put_blob(&mut self, bytes: &[u8]) -> Result<String> {
        let d = digest::content(bytes);
        exec(
            self.conn,
            "INSERT OR IGNORE INTO blobs (digest, size, data) VALUES (?1, ?2, ?3)",
            params![d, bytes.len() as i64, bytes],
        )?;
        Ok(d)
    }

    fn insert_claim(&mut self, attempt: AttemptId, authority: &str, data: &Value) -> Result<i64> {
        exec(
            self.conn,
            "INSERT INTO claims (attempt_id, authority, data) VALUES (?1, ?2, ?3)",
            params![attempt, authority, json_text("claim", data)?],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn insert_check_result(&mut self, c: &NewCheckResult) -> Result<i64> {
        exec(self.conn,
            "INSERT INTO check_results (goal_id, revision, scope, task_ref, attempt_id, check_id, passed, checkpoint, evidence_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![c.goal_id, c.revision, c.scope.as_str(), c.task_ref, c.attempt_id, c.check_id, c.passed, c.checkpoint, c.evidence_id],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn put_checkpoint(&mut self, cp: &Checkpoint) -> Result<()> {
        // Looked up before it is serialized: a run's tasks mostly record a
        // checkpoint already stored (the same inputs), and its JSON was
        // most of the cost of an `INSERT OR IGNORE` that kept nothing.
        let stored = "SELECT EXISTS(SELECT 1 FROM checkpoints WHERE digest = ?1)";
        if qrow(self.conn, stored, [&cp.digest], |r| r.get::<_, bool>(0))? {
            return Ok(());
        }
        exec(
            self.conn,
            "INSERT OR IGNORE INTO checkpoints (digest, data) VALUES (?1, ?2)",
            params![cp.digest, json_text("checkpoint", cp)?],
        )?;
        Ok(())
    }

    fn put_file_states(&mut self, states: &[FileState]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO file_cache (path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT(path) DO UPDATE SET size = ?2, mtime_ns = ?3, ctime_ns = ?4, inode = ?5, dev = ?6,
               digest = ?7, hashed_at_ns = ?8",
        )?;
        for e in states {
            stmt.execute(params![
                e.path,
                e.size as i64,
                e.mtime_ns,
                e.ctime_ns,
                e.inode as i64,
                e.dev as i64,
                e.digest,
                e.hashed_at_ns
            ])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::checkpoint::FileState;
    use crate::store::{Durability, Store};

    #[test]
    fn the_file_states_read_beside_are_the_ones_read_in_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Store::open_rw(&dir.path().join("store/engine.db")).unwrap().lease().unwrap();
        let state = |i: u64| FileState {
            path: format!("src/f{i}.txt"),
            size: i,
            mtime_ns: 10 + i as i64,
            ctime_ns: 20 + i as i64,
            inode: 100 + i,
            dev: 7,
            digest: format!("{i:064x}"),
            hashed_at_ns: 1_000 + i as i64,
        };
        let states: Vec<FileState> = (0..50).map(state).collect();
        ledger.write(Durability::Normal, |tx| tx.put_file_states(&states)).unwrap();
        // Committed by this writer, read through another connection.
        let beside = ledger.read_beside(|l| l.file_states()).expect("SQLite reads beside");
        let mut beside = beside.join().unwrap().unwrap();
        let mut in_line = ledger.read().file_states().unwrap();
        in_line.sort_by(|a, b| a.path.cmp(&b.path));
        beside.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(beside, in_line);
        assert_eq!(in_line.len(), 50);
    }

    /// A checkpoint is stored once under its digest: put again, in the
    /// same transaction or a later one, it leaves the row as it was; a
    /// new digest is stored beside it.
    #[test]
    fn a_checkpoint_put_again_keeps_its_row_and_a_new_one_is_stored() {
        use crate::checkpoint::Checkpoint;
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Store::open_rw(&dir.path().join("store/engine.db")).unwrap().lease().unwrap();
        let cp = |file: &str, digest: &str| Checkpoint {
            files: [(file.to_string(), Some("d".to_string()))].into(),
            context: Default::default(),
            digest: digest.to_string(),
            workspace: None,
        };
        let (a, b) = (cp("a.txt", "da"), cp("b.txt", "db"));
        ledger.write(Durability::Normal, |tx| tx.put_checkpoint(&a).and_then(|()| tx.put_checkpoint(&a))).unwrap();
        // The same digest again (its content as the first put wrote it), then a new one.
        let again = cp("changed.txt", "da");
        ledger.write(Durability::Normal, |tx| tx.put_checkpoint(&again).and_then(|()| tx.put_checkpoint(&b))).unwrap();
        let read = ledger.read();
        let files = |d: &str| read.checkpoint(d).unwrap().map(|c| c.files.keys().cloned().collect::<Vec<_>>());
        assert_eq!(files("da"), Some(vec!["a.txt".to_string()]));
        assert_eq!(files("db"), Some(vec!["b.txt".to_string()]));
        assert_eq!(files("dc"), None);
    }
}
