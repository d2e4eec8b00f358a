//! Real operating-system users and a group for a test, made with
//! `groupadd`/`useradd` (so only when the tests run as root, as CI does)
//! and removed again on drop; commands run as one of them with `runuser`.
//! Names are unique per test process and call (tests run in parallel).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::process::{Out, ENGINE, RUN_DEADLINE};
use super::workspace::Ws;

static MADE: AtomicUsize = AtomicUsize::new(0);

/// A group and the users a test made; all removed on drop.
pub struct OsUsers {
    pub group: String,
    pub gid: u32,
    users: Vec<String>,
}

/// One user a test made.
#[derive(Debug, Clone)]
pub struct OsUser {
    pub name: String,
    pub uid: u32,
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
        let group = name("g");
        sh(Command::new("groupadd").arg(&group));
        let gid = id_of("getent", &["group", &group], 2);
        Some(OsUsers { group, gid, users: Vec::new() })
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
        OsUser { name, uid }
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
    cmd.args(["-u", &user.name, "--", ENGINE]).args(args).current_dir(&ws.dir);
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
