//! Where a test may keep what provider processes must not write (a store,
//! a folder "outside"): not under the system's temporary folder, which the
//! provider sandbox lets them write, so the engine refuses a store there.
//! Shared by the engine's test binaries and the providers' own (`#[path]`):
//! std and `providers` only.

use std::path::{Path, PathBuf};

/// A folder for such things: cargo's `target_tmp` (`CARGO_TARGET_TMPDIR`)
/// when it is outside every folder providers may write (the usual case),
/// else — a clone under the temporary folder — `engine-tests` in the
/// user's state folder (`$XDG_STATE_HOME`, else `~/.local/state`), where the
/// engine keeps its own stores. Created if missing.
pub fn outside_temp(target_tmp: &Path) -> PathBuf {
    let user = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state")))
        .map(|base| base.join("engine-tests"));
    let candidates: Vec<PathBuf> = std::iter::once(target_tmp.to_path_buf()).chain(user).collect();
    let place = candidates.iter().find(|c| providers_cannot_write(c)).cloned().unwrap_or_else(|| {
        panic!(
            "no folder to keep the tests' stores in: {candidates:?} are all where provider processes may write \
             (the temporary folder), and the engine refuses a store there. Set XDG_STATE_HOME to a folder \
             outside the temporary folder and run the tests again."
        )
    });
    std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("create {}: {e}", place.display()));
    place
}

/// Would the sandbox keep provider processes from writing `dir` (it need
/// not exist yet)? The sandbox's own rule, asked as the engine asks it: a
/// policy protecting `dir` builds.
pub fn providers_cannot_write(dir: &Path) -> bool {
    providers::sandbox::Policy::builder(std::env::temp_dir()).protect(dir).build().is_ok()
}
