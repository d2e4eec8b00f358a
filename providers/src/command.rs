//! The command provider: runs a local program (argv, no shell) in the
//! workspace, in its own process group and cgroup, and reports what it
//! observed — including a descendant still running when it exited, which
//! the engine ends after a grace and says so (`Descendants`).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::capture::Bounded;
use crate::sandbox::Status;
use crate::{
    BoxFuture, Call, CommandReceipt, Descendant, Descendants, ExitStatus, LostReason, NotDispatched, NotDispatchedKind,
    Outcome, Progress, ProgressSender, Provider, Receipt,
};

/// After the process group is killed, how long to keep draining the pipes.
/// Killing the group normally closes them at once; the bound only matters if
/// something outside the group and without a cgroup to end it (a daemon
/// that called `setsid`) still holds them.
pub(crate) const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

/// After the command exited, how long a process it started may go on
/// before the engine ends it: a moment to finish writing and exit, never a
/// daemon left behind.
pub const DESCENDANT_GRACE: Duration = Duration::from_secs(2);

/// How often to look whether a call's tree emptied.
const TREE_POLL: Duration = Duration::from_millis(10);

/// How long to wait to reap the killed child.
pub(crate) const REAP_AFTER_KILL: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandProvider {
    /// `Some("agent-json")` for an agent CLI. The provider only feeds
    /// `call.stdin`; parsing the agent's report is the engine's job.
    pub protocol: Option<String>,
}

impl Provider for CommandProvider {
    fn identity(&self) -> Value {
        let mut id = json!({ "kind": "command" });
        if let Some(p) = &self.protocol {
            id["protocol"] = json!(p);
        }
        id
    }

    fn dispatch<'a>(&'a self, call: &'a Call, progress: ProgressSender) -> BoxFuture<'a, Outcome> {
        Box::pin(run(call, progress))
    }
}

pub(crate) fn not_dispatched(kind: NotDispatchedKind, message: String) -> Outcome {
    Outcome::NotDispatched(NotDispatched { kind, message })
}

/// `{"run": ["prog", "arg", ...]}` → argv; `None` if malformed or empty.
fn parse_argv(request: &Value) -> Option<Vec<String>> {
    let argv =
        request.get("run")?.as_array()?.iter().map(|a| a.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>()?;
    match argv.first() {
        Some(prog) if !prog.is_empty() => Some(argv),
        _ => None,
    }
}

/// Start a provider process: argv (no shell) in the workspace, in its own
/// process group, dying with the engine, confined by the call's sandbox,
/// stdout and stderr piped, stdin piped when `piped_stdin` (else
/// `/dev/null`). Its environment: the engine's (read at its first provider
/// start: the engine does not change its own) minus every `ENGINE_*`
/// variable (`ENGINE_STORE` above all: a provider never sees the store
/// path), then `call.env`, then — when `identity` — the idempotency
/// identity and the call's `TRACEPARENT` (when the run exports a trace),
/// set last so they cannot be overridden.
pub(crate) fn provider_spawn(
    call: &Call,
    argv: &[String],
    identity: bool,
    piped_stdin: bool,
) -> io::Result<crate::spawn::Child> {
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::with_capacity(call.env.len() + 2);
    let ours = |k: &str| k == "ENGINE_STORE" || (identity && k == "TRACEPARENT");
    env.extend(call.env.iter().filter(|(k, _)| !ours(k)).map(|(k, v)| (k.into(), v.into())));
    if identity {
        env.push(("ENGINE_OPERATION_ID".into(), call.operation_id.clone().into()));
        env.push(("ENGINE_TRY".into(), call.try_no.to_string().into()));
        if let Some(tp) = &call.traceparent {
            env.push(("TRACEPARENT".into(), tp.into()));
        }
    }
    crate::spawn::spawn(crate::spawn::Spec { argv, env, cwd: &call.workspace, piped_stdin, sandbox: &call.sandbox })
}

/// Why provider processes run without a cgroup of their own here (a
/// process that leaves its process group is then not tracked); `None`:
/// each gets one.
pub fn cgroups_unavailable() -> Option<String> {
    crate::process::cgroup::unavailable()
}

/// Why confined provider processes are started by the thread that asks
/// for them and drop their privileges themselves, where the providers'
/// spawner thread, which would start them with most of those dropped
/// once, could not be made (made now if it was not yet); `None`: it was,
/// or it would not start them here (no cgroups, no `clone3`).
pub fn spawner_unavailable() -> Option<String> {
    crate::spawn::spawner::unavailable()
}

fn spawn_error(prog: &str, e: &io::Error, sandbox: &Status) -> Outcome {
    Outcome::NotDispatched(spawn_failure(prog, e, sandbox))
}

/// A process that could not be started; when it was to run confined, the
/// message says so (a refusal to confine shows as the spawn's errno).
pub(crate) fn spawn_failure(prog: &str, e: &io::Error, sandbox: &Status) -> NotDispatched {
    let kind = match e.kind() {
        io::ErrorKind::NotFound => NotDispatchedKind::ExecutableMissing,
        io::ErrorKind::PermissionDenied => NotDispatchedKind::PermissionDenied,
        _ => NotDispatchedKind::Other,
    };
    let message = if sandbox.is_confined() && e.kind() != io::ErrorKind::NotFound {
        format!("cannot start `{prog}` in the sandbox ({sandbox}): {e}")
    } else {
        format!("cannot start `{prog}`: {e}")
    };
    NotDispatched { kind, message }
}

/// SIGKILL a whole provider tree by its leader's pid (= its process
/// group): its cgroup, every descendant, and its process group.
pub(crate) fn kill_group(pgid: u32) {
    crate::spawn::kill_tree(pgid);
}

/// A process that started but cannot be followed: handed over, no receipt.
fn started_unwatched(progress: &ProgressSender, prog: &str) -> Outcome {
    let _ = progress.try_send(Progress::Dispatched { detail: format!("`{prog}` started") });
    Outcome::Lost { reason: LostReason::ResponseLost, detail: format!("`{prog}` started but could not be followed") }
}

fn exit_status(st: std::process::ExitStatus) -> ExitStatus {
    match (st.code(), st.signal()) {
        (Some(code), _) => ExitStatus::Code { code },
        (None, Some(signal)) => ExitStatus::Signal { signal },
        // Not reachable on unix; never report an unknown end as success.
        (None, None) => ExitStatus::Code { code: -1 },
    }
}

async fn run(call: &Call, progress: ProgressSender) -> Outcome {
    let Some(argv) = parse_argv(&call.request) else {
        return not_dispatched(
            NotDispatchedKind::BadRequest,
            format!("command request needs {{\"run\": [program, args...]}}, got {}", call.request),
        );
    };
    let started = Instant::now();
    let child = match provider_spawn(call, &argv, true, call.stdin.is_some()) {
        Ok(c) => c,
        // A missing cwd makes the spawn fail too (the child's `chdir`):
        // say what is missing. Looked at only then, not before each spawn.
        Err(_) if !call.workspace.is_dir() => {
            return not_dispatched(
                NotDispatchedKind::Other,
                format!("workspace {} is not a directory; `{}` not started", call.workspace.display(), argv[0]),
            )
        }
        Err(e) => return spawn_error(&argv[0], &e, call.sandbox.status()),
    };
    // pgid == pid: the child made its own group.
    let pid = child.id();
    let start_time = child.start_time();
    if let Some(start_time) = start_time {
        let marker = crate::process::adopted::marker(&call.operation_id, call.try_no);
        let process = crate::process::ProcessId::started(pid, start_time);
        let process = process.tracked(child.cgroup().map(Path::to_path_buf), marker);
        let _ = progress.try_send(Progress::Spawned { process });
    }
    let _ = progress.try_send(Progress::Dispatched { detail: format!("pid {pid}") });

    let tree = tree_of(&child, start_time.unwrap_or(0), call);
    watch(child, tree, call, started, &argv[0], &progress).await
}

/// Drain a started child's output (bounded), feed its stdin, wait for it
/// within the call's timeout (killing its tree past it), end what it left
/// running after a grace, and make the receipt.
async fn watch(
    mut child: crate::spawn::Child,
    mut tree: Tree,
    call: &Call,
    started: Instant,
    program: &str,
    progress: &ProgressSender,
) -> Outcome {
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        kill_group(child.id());
        return started_unwatched(progress, program);
    };
    let stdin = child.stdin.take();
    let deadline = call.timeout.map(|d| tokio::time::Instant::from_std(started) + d);
    let mut out = Bounded::new(call.output_bytes_max);
    let mut err = Bounded::new(call.output_bytes_max);

    let feed = feed(stdin, call.stdin.as_deref());
    // The drain borrows both captures; it ends with this block.
    let (status, timed_out, descendants) = {
        let drain = async {
            let _ = tokio::join!(out.drain_from(&mut stdout), err.drain_from(&mut stderr), feed);
        };
        tokio::pin!(drain);
        // Never polled again once done (a finished future must not be).
        let drained = std::sync::atomic::AtomicBool::new(false);
        // The command's own exit, its output read meanwhile and first: until
        // it ends the command likely runs (`Child::wait_for_exit`).
        let exited = within(deadline, async {
            loop {
                tokio::select! {
                    biased;
                    _ = &mut drain, if !drained.load(Relaxed) => drained.store(true, Relaxed),
                    status = child.wait_for_exit(drained.load(Relaxed)) => break status,
                }
            }
        })
        .await;
        // Reaped: its cgroup removed at once if its tree ended (most often).
        if exited.as_ref().is_some_and(Result::is_ok) && child.remove_cgroup_if_ended() {
            tree = Tree::Ended;
        }
        // Then what it left: until the tree is empty and the output ended,
        // for a grace at most (its cgroup, or without one what the engine
        // adopted carrying the call's marks: `process::adopted`), within
        // the deadline.
        let (timed_out, descendants) = match exited {
            None => (true, None),
            Some(_) => left_behind(&mut drain, &drained, &tree, deadline).await,
        };
        let status = exited.and_then(Result::ok);
        let status = if timed_out { status.or(kill_and_reap(&mut child, &tree).await) } else { status };
        if !drained.load(Relaxed) {
            // The pipes close once every holder is dead; bounded in case
            // something outside the tree still holds them. A drain cut short
            // here is reported as truncated.
            let _ = tokio::time::timeout(DRAIN_AFTER_KILL, &mut drain).await;
        }
        (status, timed_out, descendants)
    };

    let mut stdout = out.finish();
    let mut stderr = err.finish();
    stdout.redact(&call.secrets);
    stderr.redact(&call.secrets);
    // `exit` is `None` only if waiting failed; never mistaken for success.
    let exit = status.map(exit_status);
    let duration_ms = started.elapsed().as_millis() as u64;
    Outcome::Received(Receipt::Command(CommandReceipt { exit, stdout, stderr, timed_out, duration_ms, descendants }))
}

/// Feed stdin, then close it. A child that exits without reading gives
/// EPIPE, which is not our concern.
async fn feed(stdin: Option<tokio::net::unix::pipe::Sender>, bytes: Option<&[u8]>) {
    if let (Some(mut w), Some(bytes)) = (stdin, bytes) {
        let _ = w.write_all(bytes).await;
        let _ = w.shutdown().await;
    }
}

/// Past the deadline: the group and the tree killed, and the child's
/// status if it comes within a bound (`wait` returns the cached status if
/// the child already exited).
async fn kill_and_reap(child: &mut crate::spawn::Child, tree: &Tree) -> Option<std::process::ExitStatus> {
    if group_by_number(child.reaped(), tree) {
        kill_group(child.id());
    }
    tree.kill();
    tokio::time::timeout(REAP_AFTER_KILL, child.wait()).await.ok().and_then(Result::ok)
}

/// May the tree's process group be signalled by its number (the leader's
/// pid)? Until the leader is reaped that number is held by it; after, it
/// is held only while a member of the group lives, and once none does it
/// may name another process's group. A cgroup (or its end, `Ended`)
/// reaches every descendant without the number, so then it is not used;
/// without one, the group is the only net for a descendant that shed the
/// call's marks, and is kept.
fn group_by_number(leader_reaped: bool, tree: &Tree) -> bool {
    !leader_reaped || matches!(tree, Tree::Adopted(_))
}

/// What a child's whole tree is: its cgroup, or without one what the
/// engine adopts carrying the call's marks (`process::adopted`).
fn tree_of(child: &crate::spawn::Child, start_time: u64, call: &Call) -> Tree {
    match child.cgroup() {
        Some(c) => Tree::Cgroup(c.to_path_buf()),
        None => Tree::Adopted(crate::process::adopted::Marked {
            leader: child.id(),
            start_time,
            marker: crate::process::adopted::marker(&call.operation_id, call.try_no),
        }),
    }
}

/// After the command exited: what it left, until the tree is empty and
/// the output ended, for a grace at most, within the deadline. Whether the
/// deadline passed meanwhile, and the descendants ended past the grace.
async fn left_behind<F: std::future::Future<Output = ()>>(
    drain: &mut std::pin::Pin<&mut F>,
    drained: &std::sync::atomic::AtomicBool,
    tree: &Tree,
    deadline: Option<tokio::time::Instant>,
) -> (bool, Option<Box<Descendants>>) {
    let settled = async {
        if !drained.load(Relaxed) {
            drain.as_mut().await;
            drained.store(true, Relaxed);
        }
        while tree.populated() {
            tokio::time::sleep(TREE_POLL).await;
        }
    };
    let grace_end = tokio::time::Instant::now() + DESCENDANT_GRACE;
    let until = deadline.map_or(grace_end, |d| d.min(grace_end));
    if tokio::time::timeout_at(until, settled).await.is_err() {
        if deadline.is_some_and(|d| d <= grace_end) {
            return (true, None);
        } else if tree.populated() {
            return (false, Some(Box::new(end_descendants(tree).await)));
        }
    }
    (false, None)
}

/// `f` until `deadline` (none: no limit); `None` past it.
async fn within<F: std::future::Future>(deadline: Option<tokio::time::Instant>, f: F) -> Option<F::Output> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at, f).await.ok(),
        None => Some(f.await),
    }
}

/// A call's process tree: its cgroup, or (where none can be made) what
/// the engine adopted carrying the call's marks; `Ended` once its cgroup
/// was removed (nothing ran in it any more).
enum Tree {
    Cgroup(std::path::PathBuf),
    Adopted(crate::process::adopted::Marked),
    Ended,
}

impl Tree {
    /// Does any of it run (its leader aside)?
    fn populated(&self) -> bool {
        match self {
            Tree::Cgroup(c) => crate::process::cgroup::populated(c),
            Tree::Adopted { .. } => !self.pids().is_empty(),
            Tree::Ended => false,
        }
    }

    fn pids(&self) -> Vec<u32> {
        match self {
            Tree::Cgroup(c) => crate::process::cgroup::pids(c),
            Tree::Adopted(m) => m.tree(&crate::spawn::is_spawned),
            Tree::Ended => Vec::new(),
        }
    }

    /// SIGKILL all of it (what it adopted is reaped by the engine).
    fn kill(&self) {
        match self {
            Tree::Cgroup(c) => {
                crate::process::cgroup::kill(c, Duration::ZERO);
            }
            Tree::Adopted(m) => {
                m.kill(&crate::spawn::is_spawned);
            }
            Tree::Ended => {}
        }
    }
}

/// End what still runs of the tree after the command exited and the grace
/// passed: who they were (read first), then SIGKILL, then up to
/// `REAP_AFTER_KILL` for them to be gone.
async fn end_descendants(tree: &Tree) -> Descendants {
    let processes: Vec<Descendant> = tree
        .pids()
        .into_iter()
        .take(DESCENDANTS_NAMED_MAX)
        .map(|pid| Descendant { pid, name: process_name(pid) })
        .collect();
    // Killed again while any is left: without a cgroup, a process that
    // forked while `/proc` was walked is found by the next walk.
    let gone = tokio::time::timeout(REAP_AFTER_KILL, async {
        while tree.populated() {
            tree.kill();
            tokio::time::sleep(TREE_POLL).await;
        }
    })
    .await
    .is_ok();
    Descendants { processes, grace_ms: DESCENDANT_GRACE.as_millis() as u64, ended: gone }
}

/// How many of the processes left running a receipt names.
const DESCENDANTS_NAMED_MAX: usize = 32;

/// `/proc/PID/comm`: the process's name (at most 15 bytes), or empty.
fn process_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim_end().to_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn call(dir: &Path, argv: &[&str]) -> Call {
        Call {
            operation_id: "op-1".into(),
            try_no: 2,
            request: json!({ "run": argv }),
            workspace: dir.to_path_buf(),
            timeout: Some(Duration::from_secs(20)),
            output_bytes_max: 1 << 20,
            stdin: None,
            env: vec![],
            secrets: vec![],
            sandbox: crate::sandbox::Sandbox::disabled(),
            traceparent: None,
        }
    }

    async fn go(c: &Call) -> Outcome {
        let (tx, _rx) = crate::progress_channel();
        CommandProvider::default().dispatch(c, tx).await
    }

    fn receipt(o: Outcome) -> CommandReceipt {
        match o {
            Outcome::Received(Receipt::Command(r)) => r,
            other => panic!("expected a command's receipt, got {other:?}"),
        }
    }

    fn sh(dir: &Path, script: &str) -> Call {
        call(dir, &["sh", "-c", script])
    }

    /// The call's sandbox binds the process it starts: the workspace is
    /// writable, a folder outside it (and outside the temporary folder) is
    /// not, and the same script unconfined writes both.
    #[tokio::test]
    async fn the_calls_sandbox_confines_the_process() {
        let root = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR").to_string() + "/../target").unwrap();
        let (ws, outside) = (root.path().join("ws"), root.path().join("outside"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // The folder is the script's `$0`, not part of its text: a clone's
        // path may hold spaces and quotes.
        let script = "echo in > in.txt; echo out > \"$0/out.txt\"";
        let policy =
            crate::sandbox::Policy::builder(&ws).temp_dirs([]).protect(root.path().join("store")).build().unwrap();
        let argv = ["sh", "-c", script, outside.to_str().unwrap()];
        let mut c = call(&ws, &argv);
        c.sandbox = policy.prepare().unwrap();
        assert!(c.sandbox.status().is_confined(), "this machine must enforce Landlock: {}", c.sandbox.status());
        let r = receipt(go(&c).await);
        assert_ne!(r.exit, Some(ExitStatus::Code { code: 0 }));
        assert!(r.stderr.text.contains("Permission denied"), "{}", r.stderr.text);
        assert!(ws.join("in.txt").exists() && !outside.join("out.txt").exists());
        let r = receipt(go(&call(&ws, &argv)).await);
        assert_eq!(r.exit, Some(ExitStatus::Code { code: 0 }));
        assert!(outside.join("out.txt").exists());
    }

    #[tokio::test]
    async fn exit_code_and_output_captured() {
        let d = tempfile::tempdir().unwrap();
        let r = receipt(go(&sh(d.path(), "echo out; echo err >&2; exit 3")).await);
        assert_eq!(r.exit, Some(ExitStatus::Code { code: 3 }));
        assert_eq!(r.stdout.text, "out\n");
        assert_eq!(r.stderr.text, "err\n");
        assert!(!r.timed_out && !r.stdout.truncated);
    }

    #[tokio::test]
    async fn runs_in_workspace_without_shell() {
        let d = tempfile::tempdir().unwrap();
        // No shell: `$HOME` and `;` reach the program literally.
        let r = receipt(go(&call(d.path(), &["echo", "$HOME;", "x"])).await);
        assert_eq!(r.stdout.text, "$HOME; x\n");
        let r = receipt(go(&call(d.path(), &["pwd"])).await);
        let want = d.path().canonicalize().unwrap();
        assert_eq!(Path::new(r.stdout.text.trim()).canonicalize().unwrap(), want);
    }

    #[tokio::test]
    async fn signal_exit_is_not_success() {
        let d = tempfile::tempdir().unwrap();
        let r = receipt(go(&sh(d.path(), "kill -9 $$")).await);
        assert_eq!(r.exit, Some(ExitStatus::Signal { signal: 9 }));
        assert!(!r.timed_out);
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let mut c = sh(d.path(), "sleep 30 & echo $! > pidfile; wait");
        c.timeout = Some(Duration::from_secs(1));
        let t = Instant::now();
        let r = receipt(go(&c).await);
        assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
        assert!(r.timed_out);
        assert_eq!(r.exit, Some(ExitStatus::Signal { signal: 9 }));
        assert!(r.duration_ms >= 1000);

        let pid: i32 = std::fs::read_to_string(d.path().join("pidfile")).unwrap().trim().parse().unwrap();
        let dead = crate::test_support::wait_gone(pid, Duration::from_secs(1)).await;
        assert!(dead, "grandchild {pid} survived the timeout");
    }

    #[tokio::test]
    async fn timeout_after_leader_exited_but_grandchild_holds_pipe() {
        let d = tempfile::tempdir().unwrap();
        let mut c = sh(d.path(), "echo started; sleep 30 &");
        c.timeout = Some(Duration::from_secs(1));
        let t = Instant::now();
        let r = receipt(go(&c).await);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(r.timed_out);
        assert_eq!(r.exit, Some(ExitStatus::Code { code: 0 }));
        assert_eq!(r.stdout.text, "started\n");
    }

    #[tokio::test]
    async fn output_over_bound_is_truncated_not_silently() {
        let d = tempfile::tempdir().unwrap();
        let r = receipt(go(&call(d.path(), &["head", "-c", "3000000", "/dev/zero"])).await);
        assert_eq!(r.exit, Some(ExitStatus::Code { code: 0 }));
        assert!(r.stdout.truncated);
        assert_eq!(r.stdout.total_bytes, 3_000_000);
        assert_eq!(r.stdout.text.len(), 1 << 20);
    }

    #[tokio::test]
    async fn missing_executable_is_not_dispatched() {
        let d = tempfile::tempdir().unwrap();
        match go(&call(d.path(), &["/nonexistent/definitely-not-here"])).await {
            Outcome::NotDispatched(nd) => {
                assert_eq!(nd.kind, NotDispatchedKind::ExecutableMissing);
                assert!(nd.message.contains("definitely-not-here"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn not_executable_is_permission_denied() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("script");
        std::fs::write(&f, "#!/bin/sh\n").unwrap(); // mode 0644
        match go(&call(d.path(), &[f.to_str().unwrap()])).await {
            Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::PermissionDenied),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn bad_requests_are_not_dispatched() {
        let d = tempfile::tempdir().unwrap();
        for req in [json!({"run": []}), json!({"run": "echo hi"}), json!({"run": [1]}), json!({})] {
            let mut c = call(d.path(), &["x"]);
            c.request = req;
            match go(&c).await {
                Outcome::NotDispatched(nd) => assert_eq!(nd.kind, NotDispatchedKind::BadRequest),
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn env_carries_identity_not_engine_vars() {
        // Parent sets engine-internal vars; the child must not see them.
        std::env::set_var("ENGINE_STORE", "/secret/store.db");
        std::env::set_var("ENGINE_OTHER", "x");
        let d = tempfile::tempdir().unwrap();
        let mut c = call(d.path(), &["env"]);
        c.env = vec![("EXTRA".into(), "1".into()), ("ENGINE_STORE".into(), "/nope".into())];
        let r = receipt(go(&c).await);
        let env = r.stdout.text;
        assert!(env.lines().any(|l| l == "ENGINE_OPERATION_ID=op-1"), "{env}");
        assert!(env.lines().any(|l| l == "ENGINE_TRY=2"));
        assert!(env.lines().any(|l| l == "EXTRA=1"));
        assert!(!env.contains("ENGINE_STORE") && !env.contains("ENGINE_OTHER"), "{env}");
        assert!(env.lines().any(|l| l.starts_with("PATH=")), "parent env inherited");
        assert!(!env.contains("TRACEPARENT"), "no trace, no TRACEPARENT: {env}");
    }

    #[tokio::test]
    async fn a_traced_call_gets_its_traceparent_over_any_other() {
        let d = tempfile::tempdir().unwrap();
        let mut c = call(d.path(), &["env"]);
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        c.traceparent = Some(tp.into());
        c.env = vec![("TRACEPARENT".into(), "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01".into())];
        let env = receipt(go(&c).await).stdout.text;
        let seen: Vec<&str> = env.lines().filter(|l| l.starts_with("TRACEPARENT=")).collect();
        assert_eq!(seen, vec![format!("TRACEPARENT={tp}")], "{env}");
    }

    #[tokio::test]
    async fn dispatched_is_sent_before_completion() {
        let d = tempfile::tempdir().unwrap();
        let c = sh(d.path(), "sleep 0.5");
        let (tx, mut rx) = crate::progress_channel();
        let p = CommandProvider::default();
        let fut = p.dispatch(&c, tx);
        tokio::pin!(fut);
        tokio::select! {
            msg = rx.recv() => {
                let Some(Progress::Spawned { process }) = msg else { panic!("{msg:?}") };
                assert_eq!(process.pgid, process.pid, "its own process group");
                let Ok(Progress::Dispatched { detail }) = rx.try_recv() else { panic!("Dispatched follows Spawned") };
                assert_eq!(detail, format!("pid {}", process.pid));
            }
            _ = &mut fut => panic!("completed before Dispatched arrived"),
        }
        receipt(fut.await);
    }

    #[tokio::test]
    async fn secrets_redacted_in_both_streams() {
        let d = tempfile::tempdir().unwrap();
        let mut c = sh(d.path(), "echo token=hunter2; echo hunter2 >&2");
        c.secrets = vec!["hunter2".into(), String::new()];
        let r = receipt(go(&c).await);
        assert_eq!(r.stdout.text, "token=[REDACTED]\n");
        assert_eq!(r.stderr.text, "[REDACTED]\n");
    }

    #[tokio::test]
    async fn stdin_delivered_and_closed() {
        let d = tempfile::tempdir().unwrap();
        let mut c = call(d.path(), &["cat"]);
        c.stdin = Some(b"{\"goal\": \"g\"}".to_vec());
        let r = receipt(go(&c).await);
        assert_eq!(r.stdout.text, "{\"goal\": \"g\"}");
        assert_eq!(r.exit, Some(ExitStatus::Code { code: 0 }));
        // Without stdin, the child reads /dev/null and does not hang.
        let r = receipt(go(&call(d.path(), &["cat"])).await);
        assert_eq!(r.stdout.text, "");
    }

    #[test]
    fn identity_shape() {
        assert_eq!(CommandProvider::default().identity(), json!({"kind": "command"}));
        let p = CommandProvider { protocol: Some("agent-json".into()) };
        assert_eq!(p.identity(), json!({"kind": "command", "protocol": "agent-json"}));
    }

    /// A reaped leader's number is sent no signal where a cgroup (or its
    /// end) reaches the tree; without one it is, the group being the only
    /// net for a descendant without the call's marks. A leader not yet
    /// reaped holds its number, so its group is signalled in every case.
    #[test]
    fn a_reaped_leaders_group_is_signalled_by_number_only_without_a_cgroup() {
        let adopted = Tree::Adopted(crate::process::adopted::Marked {
            leader: 1,
            start_time: 0,
            marker: crate::process::adopted::marker("op-1", 1),
        });
        let cgroup = Tree::Cgroup(std::path::PathBuf::from("/sys/fs/cgroup/none"));
        for tree in [&adopted, &cgroup, &Tree::Ended] {
            assert!(group_by_number(false, tree), "a leader not reaped holds the number");
        }
        assert!(group_by_number(true, &adopted));
        assert!(!group_by_number(true, &cgroup));
        assert!(!group_by_number(true, &Tree::Ended));
    }
}
