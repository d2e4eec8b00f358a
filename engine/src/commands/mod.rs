//! The commands that change the ledger, one module each: `run` (with
//! `register`, which records a goal and its plan), `revise`, `repair`,
//! `retry`, and a person's acts, `approve` and `settle`. Each opens the
//! store, takes the lease (given back on every return path by the
//! `LeaseGuard`), does its part, and hands the run itself to `run/`.

pub mod approve;
pub mod register;
pub mod repair;
pub mod retry;
pub mod revise;
pub mod run;
pub mod settle;
pub mod worker;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::store::{self, Store};

/// Open an existing store for writing (settle, approve, retry, repair):
/// never creates one.
pub fn open_existing(flag: Option<&Path>, workspace: Option<&Path>) -> Result<Store> {
    let ws = workspace.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let path = store::resolve_path(flag, &ws);
    if !store::is_shared(&path) && std::fs::symlink_metadata(&path).is_err() {
        return Err(Error::usage(format!(
            "no store at {}: run `engine run PLAN` first (or pass --store / --workspace)",
            path.display()
        )));
    }
    Store::open_rw(&path)
}

/// The OS user, for `--actor`'s default.
pub fn os_user() -> String {
    std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| {
        // SAFETY: getuid has no preconditions and cannot fail.
        format!("uid:{}", unsafe { libc::getuid() })
    })
}
