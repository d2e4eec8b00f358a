//! A succeeded attempt's declared outputs in PostgreSQL (`outputs`,
//! beside the content-addressed `blobs`).

use super::client::p;
use super::sql::{get, PgSql};
use crate::error::{Error, Result};
use crate::ids::AttemptId;
use crate::store::evidence::EvidenceWrite;
use crate::store::outputs::{OutputFile, OutputsRead, OutputsWrite};

impl OutputsRead for PgSql<'_> {
    fn outputs_of_attempt(&self, attempt: AttemptId) -> Result<Vec<OutputFile>> {
        let rows =
            self.q("SELECT path, digest, size, mode FROM outputs WHERE attempt_id = $1 ORDER BY path", p![attempt])?;
        rows.iter()
            .map(|r| {
                Ok(OutputFile {
                    path: get(r, 0)?,
                    digest: get(r, 1)?,
                    size: get::<i64>(r, 2)?.max(0) as u64,
                    executable: get::<i64>(r, 3)? & 0o100 != 0,
                })
            })
            .collect()
    }
}

impl OutputsWrite for PgSql<'_> {
    fn insert_output(&mut self, attempt: AttemptId, file: &OutputFile, bytes: &[u8]) -> Result<()> {
        self.fence_attempt(attempt)?;
        if self.put_blob(bytes)? != file.digest {
            return Err(Error::internal(format!("output {} changed between its digest and its blob", file.path)));
        }
        self.q(
            "INSERT INTO outputs (attempt_id, path, digest, size, mode) VALUES ($1, $2, $3, $4, $5)",
            p![attempt, file.path.clone(), file.digest.clone(), file.size as i64, i64::from(file.mode())],
        )?;
        Ok(())
    }
}
