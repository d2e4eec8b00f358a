//! A whole-store check this process's connection just made (`examine`,
//! as `engine verify` checks), and the proof that the store is still
//! exactly what it checked: `engine run`'s look at a store not known to be
//! whole checks it, then its writer, on the same connection
//! (`Db::open_rw_after`), takes the lease over from the dead writer and
//! would check it whole again — about a tenth of a simulated seed's
//! instructions (callgrind, `engine-sim`). The second check is skipped
//! only when nothing can have changed the store between the two: no other
//! connection committed (SQLite's `data_version`, read in the check's own
//! snapshot and again under the writer's lock), this connection wrote no
//! row (`total_changes`), and the store file and its WAL are the files
//! the check read (inode, size, times: a write outside SQLite shows; a
//! writer's open sets the side files' mode only when it differs, so
//! their change time holds still). The proof is taken before the check
//! and again after it, and kept only when the two agree: a write outside
//! SQLite during the check, to a page it had already read, would
//! otherwise be in the proof unseen. Anything else, and the store is
//! checked again.

use rusqlite::Connection;

use super::files::StoreFiles;
use super::mark::Fingerprint;
use super::sql::qrow;
use crate::error::Result;

/// What the store was when a check found it whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Checked {
    data_version: i64,
    changes: u64,
    db: Option<Fingerprint>,
    wal: Option<Fingerprint>,
}

impl Checked {
    /// Read inside the read transaction the check read in.
    pub(super) fn now(conn: &Connection, files: &StoreFiles) -> Result<Checked> {
        Ok(Checked {
            data_version: qrow(conn, "PRAGMA data_version", [], |r| r.get(0))?,
            changes: conn.total_changes(),
            db: Fingerprint::of(&files.db).ok(),
            wal: Fingerprint::of(&files.side("-wal")).ok(),
        })
    }

    /// Under the writer's lock, on the connection that made the check: is
    /// the store still what was checked? Any doubt (a read that fails
    /// included) is a no: the store is checked again.
    pub(super) fn still(&self, conn: &Connection, files: &StoreFiles) -> bool {
        Checked::now(conn, files).is_ok_and(|now| now == *self && self.db.is_some())
    }
}
