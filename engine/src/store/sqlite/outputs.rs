//! A succeeded attempt's declared outputs in SQLite (`outputs`, beside
//! the content-addressed `blobs`).

use rusqlite::params;

use super::sql::{exec, rows, Sql};
use crate::error::{Error, Result};
use crate::ids::AttemptId;
use crate::store::evidence::EvidenceWrite;
use crate::store::outputs::{OutputFile, OutputsRead, OutputsWrite};

impl OutputsRead for Sql<'_> {
    fn outputs_of_attempt(&self, attempt: AttemptId) -> Result<Vec<OutputFile>> {
        rows(
            self.conn,
            "SELECT path, digest, size, mode FROM outputs WHERE attempt_id = ?1 ORDER BY path",
            [attempt],
            |r| {
                Ok(OutputFile {
                    path: r.get(0)?,
                    digest: r.get(1)?,
                    size: r.get::<_, i64>(2)?.max(0) as u64,
                    executable: r.get::<_, i64>(3)? & 0o100 != 0,
                })
            },
        )
    }
}

impl OutputsWrite for Sql<'_> {
    fn insert_output(&mut self, attempt: AttemptId, file: &OutputFile, bytes: &[u8]) -> Result<()> {
        if self.put_blob(bytes)? != file.digest {
            return Err(Error::internal(format!("output {} changed between its digest and its blob", file.path)));
        }
        exec(
            self.conn,
            "INSERT INTO outputs (attempt_id, path, digest, size, mode) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![attempt, file.path, file.digest, file.size as i64, file.mode() as i64],
        )?;
        Ok(())
    }
}
