//! Evidence, blobs, claims, check results, checkpoints and the file-state
//! cache (per host) in PostgreSQL.

use serde_json::Value;
use tokio_postgres::Row;

use super::client::p;
use super::sql::{get, json_text, PgSql};
use crate::checkpoint::{Checkpoint, FileState};
use crate::digest;
use crate::error::{Error, Result};
use crate::ids::{AttemptId, EvidenceId};
use crate::store::evidence::{
    CheckResultRecord, CheckResultRow, ChecksOf, ClaimRecord, EvidenceRead, EvidenceRow, EvidenceWrite, NewCheckResult,
    TimedEvidence,
};
use crate::store::lease::hostname;
use crate::store::queries::{self, LATEST_CHECK_RESULTS};

fn parse_timed(r: &Row) -> Result<TimedEvidence> {
    let (id, at_ms, data): (EvidenceId, i64, String) = (get(r, 0)?, get(r, 1)?, get(r, 2)?);
    TimedEvidence::from_row(id, at_ms, &data)
}

impl EvidenceRead for PgSql<'_> {
    fn timed_evidence_of_attempt(&self, attempt: AttemptId) -> Result<Vec<TimedEvidence>> {
        let rows = self.q("SELECT id, at_ms, data FROM evidence WHERE attempt_id = $1 ORDER BY id", p![attempt])?;
        rows.iter().map(parse_timed).collect()
    }

    fn blob(&self, digest: &str) -> Result<Option<Vec<u8>>> {
        self.v("SELECT data FROM blobs WHERE digest = $1", p![digest.to_string()])
    }

    fn evidence_by_id(&self, id: EvidenceId) -> Result<Option<TimedEvidence>> {
        self.q1("SELECT id, at_ms, data FROM evidence WHERE id = $1", p![id])?.map(|r| parse_timed(&r)).transpose()
    }

    fn claims_of_attempt(&self, attempt: AttemptId) -> Result<Vec<ClaimRecord>> {
        let rows = self.q("SELECT id, authority, data FROM claims WHERE attempt_id = $1 ORDER BY id", p![attempt])?;
        rows.iter()
            .map(|r| {
                let d: String = get(r, 2)?;
                Ok(ClaimRecord {
                    id: get(r, 0)?,
                    authority: get(r, 1)?,
                    data: serde_json::from_str(&d).unwrap_or(Value::Null),
                })
            })
            .collect()
    }

    fn claim_ids(&self, attempt: AttemptId) -> Result<Vec<i64>> {
        let rows = self.q("SELECT id FROM claims WHERE attempt_id = $1 ORDER BY id", p![attempt])?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    fn latest_check_results(&self, of: ChecksOf<'_>) -> Result<Vec<CheckResultRecord>> {
        let (goal, scope, task_ref) = (of.goal.clone(), of.scope.as_str().to_string(), of.task_ref.map(str::to_string));
        let rows = self.q(&queries::postgres(LATEST_CHECK_RESULTS), p![goal, of.revision, scope, task_ref])?;
        let row = |r: &Row| -> Result<CheckResultRow> {
            Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?, get(r, 3)?, get(r, 4)?, get(r, 5)?))
        };
        rows.iter().map(|r| row(r).map(CheckResultRecord::from)).collect()
    }

    fn is_judged(&self, attempt: AttemptId) -> Result<bool> {
        Ok(self.v("SELECT EXISTS(SELECT 1 FROM check_results WHERE attempt_id = $1)", p![attempt])?.unwrap_or(false))
    }

    fn checkpoint(&self, digest: &str) -> Result<Option<Checkpoint>> {
        let data: Option<String> = self.v("SELECT data FROM checkpoints WHERE digest = $1", p![digest.to_string()])?;
        Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
    }

    fn file_states(&self) -> Result<Vec<FileState>> {
        let rows = self.q(
            "SELECT path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns FROM file_cache WHERE host = $1",
            p![hostname()],
        )?;
        rows.iter()
            .map(|r| {
                Ok(FileState {
                    path: get(r, 0)?,
                    size: get::<i64>(r, 1)? as u64,
                    mtime_ns: get(r, 2)?,
                    ctime_ns: get(r, 3)?,
                    inode: get::<i64>(r, 4)? as u64,
                    dev: get::<i64>(r, 5)? as u64,
                    digest: get(r, 6)?,
                    hashed_at_ns: get(r, 7)?,
                })
            })
            .collect()
    }
}

impl EvidenceWrite for PgSql<'_> {
    fn insert_evidence_row(&mut self, row: &EvidenceRow<'_>) -> Result<EvidenceId> {
        if let Some(a) = row.attempt {
            self.fence_attempt(a)?;
        }
        let sql = format!("{} RETURNING id", queries::postgres(queries::INSERT_EVIDENCE));
        let params = p![row.goal.clone(), row.revision, row.attempt, row.kind, row.data.clone(), row.at_ms];
        self.v(&sql, params)?.ok_or_else(|| Error::internal("an insert returned no id"))
    }

    fn put_blob(&mut self, bytes: &[u8]) -> Result<String> {
        let d = digest::content(bytes);
        self.q(
            "INSERT INTO blobs (digest, size, data) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
            p![d.clone(), bytes.len() as i64, bytes.to_vec()],
        )?;
        Ok(d)
    }

    fn insert_claim(&mut self, attempt: AttemptId, authority: &str, data: &Value) -> Result<i64> {
        self.fence_attempt(attempt)?;
        self.v(
            "INSERT INTO claims (attempt_id, authority, data) VALUES ($1, $2, $3) RETURNING id",
            p![attempt, authority.to_string(), data.to_string()],
        )?
        .ok_or_else(|| Error::internal("an insert returned no id"))
    }

    fn insert_check_result(&mut self, c: &NewCheckResult) -> Result<i64> {
        if let Some(t) = c.task_ref {
            self.fence_task(c.goal_id, t)?;
        }
        self.v(
            "INSERT INTO check_results (goal_id, revision, scope, task_ref, attempt_id, check_id, passed, checkpoint, evidence_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            p![
                c.goal_id.clone(),
                c.revision,
                c.scope.as_str().to_string(),
                c.task_ref.map(str::to_string),
                c.attempt_id,
                c.check_id.to_string(),
                c.passed,
                c.checkpoint.map(str::to_string),
                c.evidence_id
            ],
        )?
        .ok_or_else(|| Error::internal("an insert returned no id"))
    }

    fn put_checkpoint(&mut self, cp: &Checkpoint) -> Result<()> {
        self.q(
            "INSERT INTO checkpoints (digest, data) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING",
            p![cp.digest.clone(), json_text("checkpoint", cp)?],
        )?;
        Ok(())
    }

    fn put_file_states(&mut self, states: &[FileState]) -> Result<()> {
        let host = hostname();
        for e in states {
            self.q(
                "INSERT INTO file_cache (host, path, size, mtime_ns, ctime_ns, inode, dev, digest, hashed_at_ns)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (host, path) DO UPDATE SET size = $3, mtime_ns = $4, ctime_ns = $5, inode = $6, dev = $7,
                   digest = $8, hashed_at_ns = $9",
                p![
                    host.clone(),
                    e.path.clone(),
                    e.size as i64,
                    e.mtime_ns,
                    e.ctime_ns,
                    e.inode as i64,
                    e.dev as i64,
                    e.digest.clone(),
                    e.hashed_at_ns
                ],
            )?;
        }
        Ok(())
    }
}
