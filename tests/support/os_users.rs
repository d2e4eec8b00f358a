//! Real operating-system users and a group for a test, made with
//! `groupadd`/`useradd` (so only when the tests run as root, as CI does)
//! and removed again on drop; commands run as one of them with `runuser`.
//! Names are unique per test process and call (tests run in parallel).
//!
//! Another user must reach what it runs and writes: the engine binary and
//! the stores. A clone in a home folder closed to others (root's `/root`
//! is 0700) has both out of its reach, so they are kept in a [`Reachable`]
//! folder instead; when none can be had, the test fails saying which
//! folder is closed and what was tried.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use tempfile::TempDir;

use super::process::{Out, ENGINE, RUN_DEADLINE};
use super::workspace::Ws;

static MADE: AtomicUsize = AtomicUsize::new(0);

/// A group and the users a test made; all removed on drop.
pub struct OsUsers {
    pub group: String,
    pub gid: u32,
    users: Vec<String>,
    /// Where its users reach the engine and the test's stores.
    pub place: Reachable,
}

/// One user a test made.
#[derive(Debug, Clone)]
pub struct OsUser {
    pub name: String,
    pub uid: u32,
    /// The engine binary under test, at a path this user may reach.
    engine: PathBuf,
}

impl OsUsers {
    /// A new group, or `None` — with the reason printed — when this test
    /// process cannot make users (not root, or no `useradd`/`runuser`).
    pub fn new(test: &str) -> Option<OsUsers> {
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped {test}: making OS users needs root (useradd, groupadd); CI runs the tests as root");
            return None;
        }
        for tool in ["useradd", "groupadd", "userdel", "groupdel", "runuser"] {
            let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output();
            assert!(found.is_ok_and(|o| o.status.success()), "{test}: running as root but `{tool}` is missing");
        }
        let place = Reachable::new(test);
        let group = name("g");
        sh(Command::new("groupadd").arg(&group));
        let gid = id_of("getent", &["group", &group], 2);
        Some(OsUsers { group, gid, users: Vec::new(), place })
    }

    /// A new user, in the group when `member`.
    pub fn user(&mut self, member: bool) -> OsUser {
        let name = name("u");
        let mut cmd = Command::new("useradd");
        cmd.args(["-M", "-N", "-s", "/usr/sbin/nologin"]);
        if member {
            cmd.args(["-G", &self.group]);
        }
        sh(cmd.arg(&name));
        self.users.push(name.clone());
        let uid = id_of("id", &["-u", &name], 0);
        OsUser { name, uid, engine: self.place.engine().to_path_buf() }
    }

    /// Remove a user now (a person who left).
    pub fn remove(&mut self, user: &OsUser) {
        sh(Command::new("userdel").arg(&user.name));
        self.users.retain(|u| u != &user.name);
    }
}

impl Drop for OsUsers {
    fn drop(&mut self) {
        for u in &self.users {
            let _ = Command::new("userdel").arg(u).output();
        }
        let _ = Command::new("groupdel").arg(&self.group).output();
    }
}

/// `engine ARGS` as `user`, in the workspace, with the workspace's
/// environment (`Ws::command`).
pub fn engine_as(ws: &Ws, user: &OsUser, args: &[&str]) -> Out {
    let base = ws.command(args);
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", &user.name, "--"]).arg(&user.engine).args(args).current_dir(&ws.dir);
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    ws.spawn(cmd).wait(RUN_DEADLINE)
}

/// Give `path` (and everything under it) to `user`.
pub fn chown(path: &Path, user: &OsUser) {
    sh(Command::new("chown").arg("-R").arg(&user.name).arg(path));
}

fn name(kind: &str) -> String {
    format!("engt{}{kind}{}", std::process::id(), MADE.fetch_add(1, Ordering::SeqCst))
}

fn sh(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A number from a command's output: the whole of it, or field `field` of
/// a `getent` line (`name:x:gid:members`).
fn id_of(program: &str, args: &[&str], field: usize) -> u32 {
    let out = Command::new(program).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let text = text.trim();
    let value = if field == 0 { text } else { text.split(':').nth(field).unwrap_or("") };
    value.parse().unwrap_or_else(|_| panic!("{program} {args:?}: {text:?}"))
}

/// A folder every user may pass through (0711), outside the temporary
/// folder (where the engine refuses a store) and outside any folder closed
/// to others: cargo's `target/tmp` when the clone is open to them, else
/// `/var/tmp`. It holds the engine binary under test when the binary's own
/// folders are closed to others (a hard link to the very file, or a copy
/// of it), and the folders a test makes for other users (state folders,
/// stores). Removed on drop.
pub struct Reachable {
    dir: TempDir,
    engine: PathBuf,
}

impl Reachable {
    /// Made for `test`, which fails here, naming what is closed and what
    /// was tried, when no such folder can be had.
    pub fn new(test: &str) -> Reachable {
        let target_tmp = super::places::outside_temp(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let tried = [target_tmp, PathBuf::from("/var/tmp")];
        let why: Vec<String> =
            tried.iter().map(|p| unfit(p).map_or_else(String::new, |w| format!("{}: {w}", p.display()))).collect();
        let Some(base) = tried.iter().zip(&why).find(|(_, w)| w.is_empty()).map(|(p, _)| p) else {
            panic!(
                "{test} runs the engine as another OS user, who must reach the engine binary and the test's stores, \
                 and no folder for them was found: {}. Clone the repository where other users may pass through, \
                 or make /var/tmp such a folder",
                why.join("; ")
            )
        };
        let dir =
            tempfile::Builder::new().prefix("engine-test-users-").tempdir_in(base).expect("a folder for other users");
        open_to_others(dir.path());
        let engine = match closed_to_others(Path::new(ENGINE)) {
            None => PathBuf::from(ENGINE),
            Some(_) => {
                let here = dir.path().join("engine");
                fs::hard_link(ENGINE, &here)
                    .or_else(|_| fs::copy(ENGINE, &here).map(drop))
                    .unwrap_or_else(|e| panic!("{test}: copy {ENGINE} to {} for other users: {e}", here.display()));
                here
            }
        };
        Reachable { dir, engine }
    }

    /// The engine binary under test, at a path every user may reach.
    pub fn engine(&self) -> &Path {
        &self.engine
    }

    /// A new folder in it that every user may pass through, removed with it.
    pub fn folder(&self, prefix: &str) -> TempDir {
        let dir =
            tempfile::Builder::new().prefix(prefix).tempdir_in(self.dir.path()).expect("a folder for other users");
        open_to_others(dir.path());
        dir
    }
}

/// Why `base` cannot hold what other users must reach, if it cannot.
fn unfit(base: &Path) -> Option<String> {
    if !base.is_dir() {
        return Some("not a folder".into());
    }
    if !super::places::providers_cannot_write(base) {
        return Some("provider processes may write there, so the engine refuses a store in it".into());
    }
    closed_to_others(&base.join("x")).map(|closed| format!("{} is closed to other users", closed.display()))
}

/// The first folder above `path` that other users may not pass through
/// (no `x` bit for others).
fn closed_to_others(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|a| fs::metadata(a).map_or(true, |m| m.permissions().mode() & 0o001 == 0))
        .map(Path::to_path_buf)
}

fn open_to_others(dir: &Path) {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o711))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", dir.display()));
}
