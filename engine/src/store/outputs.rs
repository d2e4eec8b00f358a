//! A succeeded attempt's declared outputs: each file's workspace-relative
//! path, content digest, size and whether it is executable. The bytes are
//! in the ledger's content-addressed blobs (one copy per content, however
//! many attempts or tasks made it), so a worker on another machine can
//! write the files into its own workspace before a dependent task runs.

use serde::Serialize;

use crate::error::Result;
use crate::ids::AttemptId;

/// One output file as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputFile {
    /// Workspace-relative, `/`-separated, without `..`.
    pub path: String,
    /// The content digest of its bytes (the blob's key).
    pub digest: String,
    pub size: u64,
    /// Its owner's execute bit was set: written back `0755`, else `0644`.
    pub executable: bool,
}

impl OutputFile {
    /// The permission bits it is written back with (what the ledger keeps).
    pub fn mode(&self) -> u32 {
        if self.executable {
            0o755
        } else {
            0o644
        }
    }
}

pub trait OutputsRead {
    /// The outputs `attempt` recorded when it succeeded, by path.
    fn outputs_of_attempt(&self, attempt: AttemptId) -> Result<Vec<OutputFile>>;
}

pub trait OutputsWrite {
    /// Record one output of `attempt`: its bytes as a blob (kept once per
    /// content) and its row. In the transaction that records the
    /// attempt's success: a success is never recorded without its outputs.
    fn insert_output(&mut self, attempt: AttemptId, file: &OutputFile, bytes: &[u8]) -> Result<()>;
}
