//! Checkpoints: the observed state of a task's declared inputs (globs
//! expanded, sorted, each file's BLAKE3) plus declared context values.
//! Validations are judged against a checkpoint; reuse compares them.
//!
//! This file holds the data (pure); `observe` reads the workspace through
//! `cache`, the file-state cache that spares re-hashing unchanged files.

mod cache;
mod context;
mod observe;
mod protect;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::{Digester, Kind};

pub use cache::{hash_regular_file, FileCache, RACY_WINDOW_NS};
pub use observe::{observe, observe_with, observes_quickly};
pub use protect::observe_protected;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Workspace-relative path → content digest (`None`: absent).
    pub files: BTreeMap<String, Option<String>>,
    /// Context name → value (or `digest:<hex>` for secrets).
    pub context: BTreeMap<String, String>,
    pub digest: String,
}

impl Checkpoint {
    /// A checkpoint of these files and context values, with its digest.
    pub fn of(files: BTreeMap<String, Option<String>>, context: BTreeMap<String, String>) -> Checkpoint {
        let digest =
            Digester::new(Kind::Checkpoint).serialized("files", &files).serialized("context", &context).finish();
        Checkpoint { files, context, digest }
    }

    /// This checkpoint with `extra` context values added (a provider's
    /// tool inventory entries), its digest recomputed.
    pub fn with_context(self, extra: BTreeMap<String, String>) -> Checkpoint {
        if extra.is_empty() {
            return self;
        }
        let mut context = self.context;
        context.extend(extra);
        Checkpoint::of(self.files, context)
    }

    /// The first path whose digest differs between two checkpoints.
    pub fn first_difference(&self, other: &Checkpoint) -> Option<String> {
        let mut paths: Vec<&String> = self.files.keys().chain(other.files.keys()).collect();
        paths.sort();
        paths.dedup();
        for p in paths {
            if self.files.get(p) != other.files.get(p) {
                return Some(p.clone());
            }
        }
        let mut names: Vec<&String> = self.context.keys().chain(other.context.keys()).collect();
        names.sort();
        names.dedup();
        names.into_iter().find(|n| self.context.get(*n) != other.context.get(*n)).map(|n| format!("context:{n}"))
    }
}

/// One file as the file-state cache last saw it: a file whose size, times,
/// inode and device all still match was not rewritten since it was hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i64,
    /// The inode's change time: user space cannot set it back, so an
    /// in-place rewrite with its mtime restored is still caught.
    pub ctime_ns: i64,
    pub inode: u64,
    pub dev: u64,
    pub digest: String,
    pub hashed_at_ns: i64,
}
