//! The sandbox, tried as a hostile provider would: real processes (python3,
//! sh) started under the policy try to write the protected store, escape the
//! workspace, and route around the rules (links, renames, /proc, mounts,
//! grandchildren). Every denial is checked on the file itself afterwards, and
//! `without_the_sandbox_the_same_attempts_succeed` shows each attempt would
//! work unconfined, so a denial here is the sandbox's doing. These tests run
//! as root on CI: root is bound by Landlock too.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use providers::command::CommandProvider;
use providers::sandbox::{
    Kernel, Namespaces, NetBy, NetStatus, Network, NsStatus, Origin, Policy, PolicyError, Sandbox, Status, Unavailable,
};
use providers::{Call, ExitStatus, Outcome, Provider, Receipt};

#[path = "../../tests/support/places.rs"]
mod places;

/// A workspace, a store folder beside it (outside every writable path), a
/// private temporary folder and a plain folder outside.
struct Layout {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    store: PathBuf,
    db: PathBuf,
    tmp: PathBuf,
    outside: PathBuf,
}

/// Outside the system's temporary folder (cargo's target folder, or the
/// user's state folder when the clone is under /tmp): the default policy
/// makes /tmp writable, and "outside" must really be outside.
fn layout() -> Layout {
    let place = places::outside_temp(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::tempdir_in(place).unwrap();
    let root = dir.path().canonicalize().unwrap();
    let [ws, store, tmp, outside] = ["ws", "store", "tmp", "outside"].map(|d| root.join(d));
    for d in [&ws, &store, &tmp, &outside] {
        fs::create_dir(d).unwrap();
    }
    let db = store.join("ledger.db");
    let made = Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE approvals(id INTEGER PRIMARY KEY, note TEXT)'); c.commit()"])
        .arg(&db)
        .status()
        .unwrap();
    assert!(made.success());
    Layout { _dir: dir, root, ws, store, db, tmp, outside }
}

fn confined(l: &Layout) -> Sandbox {
    let policy = Policy::builder(&l.ws).temp_dirs([l.tmp.clone()]).protect(&l.store).build().unwrap();
    let sandbox = policy.prepare().unwrap();
    assert!(matches!(sandbox.status(), Status::Enforced { .. }), "this machine must enforce: {}", sandbox.status());
    sandbox
}

const PRELUDE: &str = r#"
import errno, os, subprocess, sys
def attempt(label, fn):
    try:
        fn()
        print(label, "OK", flush=True)
    except OSError as e:
        print(label, "ERR", errno.errorcode.get(e.errno, e.errno), flush=True)
    except Exception as e:
        print(label, "EXC", type(e).__name__, str(e).replace(" ", "_"), flush=True)
def append(p, text="forged\n"):
    with open(p, "a") as f:
        f.write(text)
"#;

/// Run a python script (after `PRELUDE`) under `sandbox`, in the workspace,
/// with `args` as `sys.argv[1:]`; returns each attempt's label → result.
/// It runs as every provider process does: started by the command provider
/// (`clone(CLONE_VM | CLONE_VFORK)`, the child restricting itself).
fn py(sandbox: &Sandbox, cwd: &Path, script: &str, args: &[&Path]) -> HashMap<String, String> {
    let mut run = vec!["python3".to_owned(), "-c".to_owned(), format!("{PRELUDE}\n{script}")];
    run.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    let call = Call {
        operation_id: "op".into(),
        try_no: 1,
        request: serde_json::json!({ "run": run }),
        workspace: cwd.to_path_buf(),
        timeout: Some(std::time::Duration::from_secs(60)),
        output_bytes_max: 1 << 20,
        stdin: None,
        env: vec![],
        secrets: vec![],
        sandbox: sandbox.clone(),
        traceparent: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (tx, _rx) = providers::progress_channel();
    let outcome = rt.block_on(CommandProvider::default().dispatch(&call, tx));
    let Outcome::Received(Receipt::Command(r)) = outcome else { panic!("python not started: {outcome:?}") };
    assert_eq!(r.exit, Some(ExitStatus::Code { code: 0 }), "python failed: {}", r.stderr.text);
    lines(&r.stdout.text)
}

/// [`py`] through `std::process::Command` with [`Sandbox::apply`] (a
/// `pre_exec` hook after `fork`), the API for callers outside this crate.
fn py_std(sandbox: &Sandbox, cwd: &Path, script: &str, args: &[&Path]) -> HashMap<String, String> {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(format!("{PRELUDE}\n{script}")).args(args).current_dir(cwd);
    sandbox.apply(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    results(&out)
}

fn results(out: &Output) -> HashMap<String, String> {
    lines(&String::from_utf8_lossy(&out.stdout))
}

fn lines(text: &str) -> HashMap<String, String> {
    text.lines().filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_owned(), v.to_owned()))).collect()
}

fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

fn rows(db: &Path) -> String {
    let out = Command::new("python3")
        .args(["-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM approvals').fetchone()[0])"])
        .arg(db)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn workspace_writes_succeed_and_appending_to_the_store_is_refused() {
    let l = layout();
    let before = fs::read(&l.db).unwrap();
    let r = py(
        &confined(&l),
        &l.ws,
        "attempt('workspace', lambda: append('out.txt', 'done\\n'))\n\
         attempt('store', lambda: append(sys.argv[1]))\n\
         attempt('store_new_file', lambda: append(os.path.join(os.path.dirname(sys.argv[1]), 'ledger.db-journal')))\n\
         attempt('store_truncate', lambda: os.truncate(sys.argv[1], 0))\n\
         import stat\n\
         attempt('mknod_block', lambda: os.mknod('blk', stat.S_IFBLK | 0o600, os.makedev(7, 0)))\n\
         attempt('mknod_char', lambda: os.mknod('chr', stat.S_IFCHR | 0o600, os.makedev(1, 3)))",
        &[&l.db],
    );
    assert_eq!(r["workspace"], "OK");
    assert_eq!(fs::read_to_string(l.ws.join("out.txt")).unwrap(), "done\n");
    assert_eq!(r["store"], "ERR EACCES");
    assert_eq!(r["store_new_file"], "ERR EACCES");
    assert_eq!(r["store_truncate"], "ERR EACCES");
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
    assert_eq!(fs::read_dir(&l.store).unwrap().count(), 1, "a file appeared in the store folder");
    // Root could otherwise make a device node for the disk in the workspace
    // and write the store's blocks underneath every file rule.
    // (Landlock is asked before the capability check: EACCES for anyone.)
    assert_eq!(r["mknod_block"], "ERR EACCES");
    assert_eq!(r["mknod_char"], "ERR EACCES");
}

#[test]
fn an_sql_insert_into_the_store_fails_and_the_store_is_unchanged() {
    let l = layout();
    let before = fs::read(&l.db).unwrap();
    let r = py(
        &confined(&l),
        &l.ws,
        "import sqlite3\n\
         def forge(target, uri=False):\n\
         \x20   c = sqlite3.connect(target, uri=uri)\n\
         \x20   c.execute(\"INSERT INTO approvals(note) VALUES ('forged by a provider')\")\n\
         \x20   c.commit()\n\
         attempt('insert', lambda: forge(sys.argv[1]))\n\
         attempt('insert_rw_uri', lambda: forge('file:' + sys.argv[1] + '?mode=rw', True))\n\
         attempt('read', lambda: print('rows', sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True).execute('SELECT count(*) FROM approvals').fetchone()[0]))",
        &[&l.db],
    );
    assert!(r["insert"].starts_with("EXC OperationalError"), "{r:?}");
    assert!(r["insert_rw_uri"].starts_with("EXC OperationalError"), "{r:?}");
    assert_eq!(r["read"], "OK", "reading the store is allowed: {r:?}");
    assert_eq!(rows(&l.db), "0");
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
}

#[test]
fn writes_outside_the_workspace_fail() {
    let l = layout();
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let pid = std::process::id();
    // Probes in shared places; removed before any assertion so that even a
    // failing run leaves nothing behind.
    let in_home = home.join(format!(".providers-sandbox-probe-{pid}"));
    let in_etc = PathBuf::from(format!("/etc/providers-sandbox-probe-{pid}"));
    let r = py(
        &confined(&l),
        &l.ws,
        "attempt('sibling', lambda: append(os.path.join(sys.argv[1], 'x')))\n\
         attempt('sibling_dir', lambda: os.mkdir(os.path.join(sys.argv[1], 'd')))\n\
         attempt('home', lambda: append(sys.argv[2]))\n\
         attempt('parent_of_ws', lambda: append(os.path.join(sys.argv[3], 'x')))\n\
         attempt('etc', lambda: append(sys.argv[4]))",
        &[&l.outside, &in_home, &l.root, &in_etc],
    );
    let leaked: Vec<&PathBuf> = [&in_home, &in_etc].into_iter().filter(|p| p.exists()).collect();
    for p in &leaked {
        let _ = fs::remove_file(p);
    }
    assert!(leaked.is_empty(), "written outside: {leaked:?}");
    for label in ["sibling", "sibling_dir", "home", "parent_of_ws", "etc"] {
        assert_eq!(r[label], "ERR EACCES", "{label}: {r:?}");
    }
    assert_eq!(fs::read_dir(&l.outside).unwrap().count(), 0);
    assert!(!l.root.join("x").exists());
}

#[test]
fn links_and_renames_cannot_reach_the_store() {
    let l = layout();
    let before = fs::read(&l.db).unwrap();
    let r = py(
        &confined(&l),
        &l.ws,
        "db, store = sys.argv[1], sys.argv[2]\n\
         attempt('symlink', lambda: os.symlink(db, 'link'))\n\
         attempt('through_symlink', lambda: append('link'))\n\
         attempt('dir_symlink', lambda: os.symlink(store, 'storelink'))\n\
         attempt('through_dir_symlink', lambda: append('storelink/ledger.db'))\n\
         attempt('hardlink', lambda: os.link(db, 'hard'))\n\
         attempt('rename_in', lambda: os.rename(db, 'stolen.db'))\n\
         attempt('rename_dir_in', lambda: os.rename(store, 'stolen'))",
        &[&l.db, &l.store],
    );
    // Making a symlink in the workspace is allowed; Landlock checks the
    // target a write lands on, so writing through it is not.
    assert_eq!(r["symlink"], "OK");
    assert_eq!(r["through_symlink"], "ERR EACCES");
    assert_eq!(r["dir_symlink"], "OK");
    assert_eq!(r["through_dir_symlink"], "ERR EACCES");
    // A hard link into the workspace would give the store's file more rights
    // than it has where it is: Landlock refuses it (REFER) with EXDEV. A
    // rename must first remove the name from the store's folder: EACCES.
    assert_eq!(r["hardlink"], "ERR EXDEV");
    assert_eq!(r["rename_in"], "ERR EACCES");
    assert_eq!(r["rename_dir_in"], "ERR EACCES");
    assert!(!l.ws.join("hard").exists() && !l.ws.join("stolen.db").exists() && !l.ws.join("stolen").exists());
    assert_eq!(fs::metadata(&l.db).unwrap().nlink(), 1);
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
}

#[test]
fn the_parents_store_descriptor_and_memory_cannot_be_reached_through_proc() {
    let l = layout();
    // The engine holds the store open for writing while providers run.
    let held = fs::OpenOptions::new().append(true).open(&l.db).unwrap();
    let fd_path = PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), std::os::fd::AsRawFd::as_raw_fd(&held)));
    let before = fs::read(&l.db).unwrap();
    let mem = PathBuf::from(format!("/proc/{}/mem", std::process::id()));
    let r = py(
        &confined(&l),
        &l.ws,
        "attempt('proc_fd', lambda: append(sys.argv[1]))\n\
         attempt('proc_mem', lambda: open(sys.argv[2], 'rb').close())",
        &[&fd_path, &mem],
    );
    assert_eq!(r["proc_fd"], "ERR EACCES", "{r:?}");
    // Nor the engine's memory: Landlock forbids ptrace-like access to a
    // process outside the sandbox.
    assert_eq!(r["proc_mem"], "ERR EACCES", "{r:?}");
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
    drop(held);
}

/// `path` opened for appending *without* close-on-exec, as a careless
/// library might: the descriptor would survive `exec`.
fn open_inheritable(path: &Path) -> fs::File {
    let file = fs::OpenOptions::new().append(true).open(path).unwrap();
    // SAFETY: plain fcntl on a descriptor we own.
    assert_eq!(unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_SETFD, 0) }, 0);
    file
}

#[test]
fn an_inherited_store_descriptor_is_closed_before_exec() {
    // Landlock checks a file when it is opened; a writable descriptor that
    // leaks into the child is not checked again. The sandbox closes them.
    let l = layout();
    let script = "attempt('inherited', lambda: os.write(int(sys.argv[1]), b'forged'))";
    let decoy = l.outside.join("decoy.db");
    fs::copy(&l.db, &decoy).unwrap();
    let held = open_inheritable(&decoy);
    let fd = PathBuf::from(std::os::fd::AsRawFd::as_raw_fd(&held).to_string());
    let control = py_std(&Sandbox::disabled(), &l.ws, script, &[&fd]);
    assert_eq!(control["inherited"], "OK", "unconfined, the leaked descriptor writes: {control:?}");
    // A provider process never inherits it, even one the plan opts out.
    let r = py(&Sandbox::disabled(), &l.ws, script, &[&fd]);
    assert_eq!(r["inherited"], "ERR EBADF", "{r:?}");
    drop(held);

    let before = fs::read(&l.db).unwrap();
    let held = open_inheritable(&l.db);
    let fd = PathBuf::from(std::os::fd::AsRawFd::as_raw_fd(&held).to_string());
    let r = py(&confined(&l), &l.ws, script, &[&fd]);
    assert_eq!(r["inherited"], "ERR EBADF", "{r:?}");
    let r = py_std(&confined(&l), &l.ws, script, &[&fd]);
    assert_eq!(r["inherited"], "ERR EBADF", "the pre_exec hook closes it too: {r:?}");
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
    drop(held);
}

#[test]
fn reading_and_executing_still_work_everywhere() {
    let l = layout();
    fs::write(l.outside.join("notes.txt"), "outside\n").unwrap();
    let r = py(
        &confined(&l),
        &l.ws,
        "attempt('passwd', lambda: open('/etc/passwd').read())\n\
         attempt('outside', lambda: print('text', open(os.path.join(sys.argv[1], 'notes.txt')).read().strip()))\n\
         attempt('store', lambda: open(sys.argv[2], 'rb').read())\n\
         attempt('list_root', lambda: os.listdir('/'))\n\
         attempt('exec', lambda: subprocess.run(['sh', '-c', 'exit 0'], check=True))",
        &[&l.outside, &l.db],
    );
    for label in ["passwd", "outside", "store", "list_root", "exec"] {
        assert_eq!(r[label], "OK", "{label}: {r:?}");
    }
    assert_eq!(r["text"], "outside");
}

#[test]
fn a_grandchild_inherits_the_restriction() {
    let l = layout();
    let before = fs::read(&l.db).unwrap();
    let r = py(
        &confined(&l),
        &l.ws,
        "def grandchild(cmd):\n\
         \x20   p = subprocess.run(['sh', '-c', cmd, 'sh', sys.argv[1]], capture_output=True, text=True)\n\
         \x20   print('code', p.returncode, 'msg', p.stderr.strip().replace(' ', '_'))\n\
         \x20   if p.returncode: raise PermissionError(errno.EACCES, p.stderr)\n\
         attempt('gc_store', lambda: grandchild('echo forged >> \"$1\"'))\n\
         attempt('gc_detached', lambda: grandchild('setsid sh -c \"echo forged >> $1\"'))\n\
         attempt('gc_workspace', lambda: grandchild('echo ok > gc.txt'))",
        &[&l.db],
    );
    assert_eq!(r["gc_store"], "ERR EACCES", "{r:?}");
    assert_eq!(r["gc_detached"], "ERR EACCES", "{r:?}");
    assert_eq!(r["gc_workspace"], "OK", "{r:?}");
    assert_eq!(fs::read_to_string(l.ws.join("gc.txt")).unwrap(), "ok\n");
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
}

#[test]
fn the_system_temporary_folder_and_common_devices_are_writable() {
    let l = layout();
    // The default policy: the system's temporary folder, not a private one.
    let sandbox = Policy::builder(&l.ws).protect(&l.store).build().unwrap().prepare().unwrap();
    let probe = std::env::temp_dir().join(format!("providers-sandbox-probe-{}", std::process::id()));
    let r = py(
        &sandbox,
        &l.ws,
        "attempt('temp', lambda: append(sys.argv[1], 'tmp\\n'))\n\
         attempt('dev_null', lambda: subprocess.run(['sh', '-c', 'echo x > /dev/null'], check=True))\n\
         attempt('dev_stdout', lambda: subprocess.run(['sh', '-c', 'echo piped ok > /dev/stdout'], check=True))\n\
         def pty():\n\
         \x20   m, s = os.openpty(); os.write(s, b'hi\\n'); assert os.read(m, 16).strip() == b'hi'\n\
         attempt('pty', pty)\n\
         attempt('tmpfile', lambda: __import__('tempfile').NamedTemporaryFile().write(b'x'))",
        &[&probe],
    );
    let written = fs::read_to_string(&probe);
    let _ = fs::remove_file(&probe);
    for label in ["temp", "dev_null", "dev_stdout", "pty", "tmpfile"] {
        assert_eq!(r[label], "OK", "{label}: {r:?}");
    }
    assert_eq!(written.unwrap(), "tmp\n");
    assert_eq!(r["piped"], "ok", "{r:?}");
}

#[test]
fn a_declared_path_is_writable_and_created_when_missing() {
    let l = layout();
    let home = l.root.join("home");
    fs::create_dir(&home).unwrap();
    let policy = Policy::builder(&l.ws)
        .temp_dirs([l.tmp.clone()])
        .home(&home)
        .write("~/.cache/tool")
        .protect(&l.store)
        .build()
        .unwrap();
    let declared = home.join(".cache/tool");
    assert!(policy
        .writable()
        .iter()
        .any(|w| w.path == declared && w.origin == Origin::Declared { as_written: "~/.cache/tool".into() }));
    assert!(!declared.exists());
    let sandbox = policy.prepare().unwrap();
    assert!(declared.is_dir(), "prepare creates a missing declared folder");
    let r = py(
        &sandbox,
        &l.ws,
        "attempt('declared', lambda: append(os.path.join(sys.argv[1], 'cache.bin')))\n\
         attempt('beside', lambda: append(os.path.join(sys.argv[2], 'other')))",
        &[&declared, &home],
    );
    assert_eq!(r["declared"], "OK");
    assert_eq!(r["beside"], "ERR EACCES");
    assert!(declared.join("cache.bin").is_file() && !home.join("other").exists());
}

#[test]
fn a_store_inside_a_writable_path_is_refused_naming_both() {
    let l = layout();
    let base = || Policy::builder(&l.ws).temp_dirs([l.tmp.clone()]);
    let cases: Vec<(Result<Policy, PolicyError>, PathBuf, PathBuf)> = vec![
        (base().protect(l.ws.join(".engine")).build(), l.ws.join(".engine"), l.ws.clone()),
        (base().protect(&l.ws).build(), l.ws.clone(), l.ws.clone()),
        (base().protect(l.tmp.join("state")).build(), l.tmp.join("state"), l.tmp.clone()),
        (base().write(l.root.to_str().unwrap()).protect(&l.store).build(), l.store.clone(), l.root.clone()),
    ];
    for (result, protected, writable) in cases {
        let err = result.expect_err("must be refused");
        let text = err.to_string();
        assert!(
            matches!(&err, PolicyError::Overlap { protected: p, writable: w } if p == &protected && w.path == writable),
            "{text}"
        );
        assert!(text.contains(protected.to_str().unwrap()) && text.contains(writable.to_str().unwrap()), "{text}");
    }
    // Through a symlink too: the link's target is what counts.
    std::os::unix::fs::symlink(&l.ws, l.outside.join("ws-link")).unwrap();
    let err = base().protect(l.outside.join("ws-link/.engine")).build().unwrap_err();
    assert!(matches!(&err, PolicyError::Overlap { protected, .. } if protected == &l.ws.join(".engine")), "{err}");
    // And a writable path inside the protected folder.
    let err = base().write(l.store.join("sub").to_str().unwrap()).protect(&l.store).build().unwrap_err();
    assert!(err.to_string().contains("is inside the protected path"), "{err}");
}

#[test]
fn a_hard_link_to_the_store_made_before_the_run_is_refused() {
    let l = layout();
    let policy = Policy::builder(&l.ws).temp_dirs([l.tmp.clone()]).protect(&l.store).build().unwrap();
    // Made by something unconfined: Landlock checks the path a file is
    // opened by, so this name in the workspace would be writable.
    fs::hard_link(&l.db, l.ws.join("ledger-copy.db")).unwrap();
    let err = policy.prepare().unwrap_err();
    assert!(matches!(&err, PolicyError::HardLinked { path, links: 2 } if path == &l.db), "{err}");
}

#[test]
fn root_cannot_mount_its_way_out() {
    if !is_root() {
        eprintln!("not root: mounting is refused by the kernel anyway; nothing to show");
        return;
    }
    let l = layout();
    let before = fs::read(&l.db).unwrap();
    // In a private mount namespace, bind a writable folder over the store's
    // folder, then write "the store". Unconfined root can do the mount;
    // Landlock refuses every mount.
    let script = r#"mount --bind "$2" "$1" && echo forged >> "$1/ledger.db""#;
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"]).arg(&l.store).arg(&l.ws);
    confined(&l).apply(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "mount under the sandbox succeeded");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"), "{out:?}");
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
    // Control: unconfined, the same mount works (in its own namespace; the
    // write lands in the workspace, not the store).
    let mut control = Command::new("unshare");
    control.args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"]).arg(&l.store).arg(&l.ws);
    assert!(control.status().unwrap().success());
    assert_eq!(fs::read_to_string(l.ws.join("ledger.db")).unwrap(), "forged\n");
}

#[test]
fn without_the_sandbox_the_same_attempts_succeed() {
    // The control for every test above: the attempts are real ones that
    // work unconfined, so a denial under the sandbox is the sandbox's doing.
    let l = layout();
    let held = fs::OpenOptions::new().append(true).open(&l.db).unwrap();
    let fd_path = PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), std::os::fd::AsRawFd::as_raw_fd(&held)));
    let disabled = Policy::disabled().prepare().unwrap();
    assert_eq!(disabled.status(), &Status::Disabled);
    let r = py(
        &disabled,
        &l.ws,
        "import sqlite3\n\
         def forge():\n\
         \x20   c = sqlite3.connect(sys.argv[1]); c.execute(\"INSERT INTO approvals(note) VALUES ('forged')\"); c.commit(); c.close()\n\
         attempt('insert', forge)\n\
         attempt('sibling', lambda: append(os.path.join(sys.argv[2], 'x')))\n\
         attempt('symlink', lambda: os.symlink(sys.argv[1], 'link'))\n\
         attempt('through_symlink', lambda: append('link', ''))\n\
         attempt('proc_fd', lambda: append(sys.argv[3], ''))\n\
         attempt('proc_mem', lambda: open(sys.argv[4], 'rb').close())\n\
         attempt('hardlink', lambda: os.link(sys.argv[1], 'hard'))\n\
         import stat\n\
         attempt('mknod_block', lambda: os.mknod('blk', stat.S_IFBLK | 0o600, os.makedev(7, 0)))",
        &[&l.db, &l.outside, &fd_path, &PathBuf::from(format!("/proc/{}/mem", std::process::id()))],
    );
    for label in ["insert", "sibling", "symlink", "through_symlink", "proc_fd", "proc_mem", "hardlink"] {
        assert_eq!(r[label], "OK", "{label}: {r:?}");
    }
    assert_eq!(r["mknod_block"], if is_root() { "OK" } else { "ERR EPERM" });
    assert_eq!(rows(&l.db), "1");
    drop(held);
}

#[test]
fn the_status_is_computed_once_and_says_what_happened() {
    let l = layout();
    let policy = Policy::builder(&l.ws).temp_dirs([l.tmp.clone()]).protect(&l.store).build().unwrap();
    let Kernel::Landlock { abi } = providers::sandbox::kernel() else { panic!("this machine has Landlock") };
    assert!(abi >= 5, "ABI {abi}");
    assert_eq!(policy.status(), Status::Enforced { abi });
    assert_eq!(Policy::disabled().status(), Status::Disabled);
    // On a kernel without Landlock the sandbox says so and confines nothing:
    // the write outside goes through, and the status is what gets recorded.
    let none = Namespaces::unavailable("none made");
    let unavailable = policy.prepare_on(Kernel::Unavailable(Unavailable::NotEnabled), &none).unwrap();
    assert_eq!(unavailable.status(), &Status::Unavailable { reason: Unavailable::NotEnabled });
    let r =
        py(&unavailable, &l.ws, "attempt('sibling', lambda: append(os.path.join(sys.argv[1], 'x')))", &[&l.outside]);
    assert_eq!(r["sibling"], "OK");
    // An older kernel: partial, naming the rights it lacks.
    let old = policy.prepare_on(Kernel::Landlock { abi: 2 }, &none).unwrap();
    assert!(matches!(old.status(), Status::Partial { abi: 2, missing } if missing.len() == 2), "{}", old.status());
}

#[test]
fn a_refused_restriction_fails_the_spawn_instead_of_running_unconfined() {
    // Landlock stacks at most 16 domains; the 17th restriction is refused
    // (E2BIG). The process must then not start at all.
    let l = layout();
    let sandbox = confined(&l);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo ran > ran.txt"]).current_dir(&l.ws);
    for _ in 0..17 {
        sandbox.apply(&mut cmd);
    }
    let err = cmd.status().expect_err("the spawn must fail");
    assert_eq!(err.raw_os_error(), Some(libc::E2BIG), "{err}");
    assert!(!l.ws.join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokio_commands_from_many_threads_are_confined() {
    // Many spawns at once from a multi-threaded runtime: the pre-exec hook
    // must be safe after fork whatever the other threads hold.
    let l = layout();
    let sandbox = confined(&l);
    let before = fs::read(&l.db).unwrap();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let (sandbox, ws, db) = (sandbox.clone(), l.ws.clone(), l.db.clone());
        tasks.push(tokio::spawn(async move {
            let mut cmd = tokio::process::Command::new("sh");
            cmd.args(["-c", "echo $2 > \"out-$2\"; echo forged >> \"$1\" 2>/dev/null && echo wrote", "sh"])
                .arg(&db)
                .arg(i.to_string())
                .current_dir(&ws);
            sandbox.apply(cmd.as_std_mut());
            cmd.output().await.unwrap()
        }));
    }
    for t in tasks {
        let out = t.await.unwrap();
        assert!(!out.status.success() && out.stdout.is_empty(), "{out:?}");
    }
    for i in 0..24 {
        assert_eq!(fs::read_to_string(l.ws.join(format!("out-{i}"))).unwrap(), format!("{i}\n"));
    }
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn provider_processes_started_from_many_threads_are_confined() {
    // The command provider's spawn shares the engine's memory until exec
    // (CLONE_VM | CLONE_VFORK): many at once from several threads must
    // each be confined, and each write its own output.
    let l = layout();
    let sandbox = confined(&l);
    let before = fs::read(&l.db).unwrap();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let script = "echo $2 > \"out-$2\"; echo forged >> \"$1\" 2>/dev/null && echo wrote; echo \"done $2\"";
        let call = Call {
            operation_id: format!("op-{i}"),
            try_no: 1,
            request: serde_json::json!({ "run": ["sh", "-c", script, "sh", l.db, i.to_string()] }),
            workspace: l.ws.clone(),
            timeout: Some(std::time::Duration::from_secs(60)),
            output_bytes_max: 1 << 20,
            stdin: None,
            env: vec![],
            secrets: vec![],
            sandbox: sandbox.clone(),
            traceparent: None,
        };
        tasks.push(tokio::spawn(async move {
            let (tx, _rx) = providers::progress_channel();
            (i, CommandProvider::default().dispatch(&call, tx).await)
        }));
    }
    for t in tasks {
        let (i, outcome) = t.await.unwrap();
        let Outcome::Received(Receipt::Command(r)) = outcome else { panic!("{outcome:?}") };
        assert_eq!(r.stdout.text, format!("done {i}\n"), "{r:?}");
    }
    for i in 0..24 {
        assert_eq!(fs::read_to_string(l.ws.join(format!("out-{i}"))).unwrap(), format!("{i}\n"));
    }
    assert_eq!(fs::read(&l.db).unwrap(), before, "the store changed");
}

// ------------------------------------------------------------ the network

/// A TCP listener and a UDP socket on the machine's loopback, and what
/// reached each (bounded waits: a datagram not there in 300 ms is not).
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
}

impl Listeners {
    fn new() -> Listeners {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        Listeners { tcp, udp }
    }

    fn ports(&self) -> (String, String) {
        (self.tcp.local_addr().unwrap().port().to_string(), self.udp.local_addr().unwrap().port().to_string())
    }

    fn tcp_heard(&self) -> bool {
        self.tcp.accept().is_ok()
    }

    fn udp_heard(&self) -> bool {
        let mut buf = [0u8; 8];
        self.udp.recv_from(&mut buf).is_ok()
    }
}

const NET: &str = r#"
import socket
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2).close())
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", int(sys.argv[2]))))
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
"#;

fn net_policy(l: &Layout, network: Network) -> Policy {
    Policy::builder(&l.ws).temp_dirs([l.tmp.clone()]).protect(&l.store).network(network).build().unwrap()
}

/// Nothing declared: the run's network namespace. A TCP connection and a
/// UDP datagram to the machine's loopback reach nothing, and no name
/// resolves; the same script unconfined reaches both.
#[test]
fn without_a_declared_network_nothing_leaves_tcp_or_udp() {
    let l = layout();
    let ns = Namespaces::make(&[]);
    let sandbox = net_policy(&l, Network::None).prepare_in(&ns).unwrap();
    let listeners = Listeners::new();
    let (tcp, udp) = listeners.ports();
    let r = py(&sandbox, &l.ws, NET, &[Path::new(&tcp), Path::new(&udp)]);
    if !is_root() {
        // No namespace without privileges: Landlock refuses TCP alone, and
        // the status says UDP is not restricted.
        assert!(
            matches!(sandbox.network(), NetStatus::Partial { tcp_connect_ports, .. } if tcp_connect_ports.is_empty())
        );
        assert_eq!(r["tcp"], "ERR EACCES", "{r:?}");
        return;
    }
    assert_eq!(sandbox.network(), &NetStatus::Enforced { by: NetBy::Namespace });
    assert_eq!(r["tcp"], "ERR ECONNREFUSED", "its own loopback, where nothing listens: {r:?}");
    assert!(r["dns"].starts_with("E"), "no name resolves: {r:?}");
    assert!(!listeners.tcp_heard() && !listeners.udp_heard(), "something reached the machine's loopback: {r:?}");
    // The control: unconfined, both arrive.
    let r = py(&Sandbox::disabled(), &l.ws, NET, &[Path::new(&tcp), Path::new(&udp)]);
    assert_eq!(r["tcp"], "OK", "{r:?}");
    assert!(listeners.tcp_heard() && listeners.udp_heard(), "{r:?}");
}

/// Declared: TCP to that port only (Landlock, by port: any host); UDP is
/// not restricted — which the status says, and this test shows.
#[test]
fn a_declared_port_is_the_only_tcp_port_and_udp_is_not_restricted() {
    let l = layout();
    let ns = Namespaces::make(&[]);
    let (open, closed) = (Listeners::new(), Listeners::new());
    let (open_tcp, udp) = open.ports();
    let (closed_tcp, _) = closed.ports();
    let network = Network::connect(&[format!("localhost:{open_tcp}")]).unwrap();
    let sandbox = net_policy(&l, network).prepare_in(&ns).unwrap();
    let port: u16 = open_tcp.parse().unwrap();
    assert_eq!(sandbox.network(), &NetStatus::Partial { by: NetBy::Landlock, tcp_connect_ports: vec![port] });
    let r = py(&sandbox, &l.ws, NET, &[Path::new(&open_tcp), Path::new(&udp)]);
    assert_eq!(r["tcp"], "OK", "{r:?}");
    assert!(open.tcp_heard(), "{r:?}");
    assert!(open.udp_heard(), "UDP is not restricted by Landlock, as the status says: {r:?}");
    let r = py(&sandbox, &l.ws, NET, &[Path::new(&closed_tcp), Path::new(&udp)]);
    assert_eq!(r["tcp"], "ERR EACCES", "{r:?}");
    assert!(!closed.tcp_heard());
}

// ------------------------------------------------------------ the stores

const MEDDLE: &str = r#"
db, other = sys.argv[1], sys.argv[2]
attempt("read", lambda: open(db, "rb").read(1))
attempt("read_other", lambda: open(other, "rb").read(1))
attempt("chown", lambda: os.chown(db, 65534, 65534))
attempt("chmod", lambda: os.chmod(db, 0o777))
attempt("chmod_folder", lambda: os.chmod(os.path.dirname(db), 0o777))
attempt("utime", lambda: os.utime(db, (946684800, 946684800)))
attempt("setxattr", lambda: os.setxattr(db, "user.forged", b"1"))
attempt("list", lambda: os.listdir(os.path.dirname(db)) or (_ for _ in ()).throw(OSError(errno.ENOENT, "empty")))
"#;

fn meta(p: &Path) -> (u32, u32, u32, i64) {
    let m = fs::metadata(p).unwrap();
    (m.uid(), m.gid(), m.mode(), m.mtime())
}

/// The stores' folders are hidden: the store and another one cannot be
/// read, nor their owner, mode, times or extended attributes changed (none
/// of which Landlock covers); unconfined, every one of those lands.
#[test]
fn a_hidden_store_cannot_be_read_nor_its_metadata_changed() {
    let l = layout();
    let other = l.root.join("other-store");
    fs::create_dir(&other).unwrap();
    fs::write(other.join("engine.db"), b"another workspace's ledger").unwrap();
    let ns = Namespaces::make(&[l.store.clone(), other.clone()]);
    let policy = Policy::builder(&l.ws).temp_dirs([l.tmp.clone()]).protect(&l.store).build().unwrap();
    let sandbox = policy.prepare_in(&ns).unwrap();
    let args = [l.db.as_path(), &other.join("engine.db")];
    let before = (meta(&l.db), meta(&l.store));
    let r = py(&sandbox, &l.ws, MEDDLE, &args);
    if !is_root() {
        assert!(matches!(sandbox.stores(), NsStatus::Unavailable { .. }), "{}", sandbox.stores());
        return;
    }
    assert_eq!(sandbox.stores(), &NsStatus::Hidden);
    for label in ["read", "read_other", "chown", "chmod", "chmod_folder", "utime", "setxattr", "list"] {
        assert!(r[label].starts_with("ERR"), "{label}: {r:?}");
    }
    assert_eq!((meta(&l.db), meta(&l.store)), before, "the store's metadata changed");
    // The control: every one lands unconfined.
    let r = py(&Sandbox::disabled(), &l.ws, MEDDLE, &args);
    for label in ["read", "read_other", "chown", "chmod", "utime", "setxattr", "list"] {
        assert_eq!(r[label], "OK", "{label}: {r:?}");
    }
    assert_ne!(meta(&l.db), before.0);
}

// ------------------------------------------------------------ descendants

/// A command that leaves a `setsid` descendant and exits 0: the descendant
/// is ended after the grace (it left its process group and session, not
/// its cgroup nor its marks), and the receipt says who it was.
#[test]
fn a_setsid_descendant_is_ended_and_named() {
    let l = layout();
    let script = "setsid sh -c 'echo $$ > escapee.pid; exec sleep 30' > /dev/null 2>&1 < /dev/null & \
                  while [ ! -s escapee.pid ]; do sleep 0.05; done";
    let call = Call {
        operation_id: "op".into(),
        try_no: 1,
        request: serde_json::json!({"run": ["sh", "-c", script]}),
        workspace: l.ws.clone(),
        timeout: Some(std::time::Duration::from_secs(60)),
        output_bytes_max: 1 << 20,
        stdin: None,
        env: vec![],
        secrets: vec![],
        sandbox: confined(&l),
        traceparent: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (tx, _rx) = providers::progress_channel();
    let outcome = rt.block_on(CommandProvider::default().dispatch(&call, tx));
    let Outcome::Received(Receipt::Command(r)) = outcome else { panic!("{outcome:?}") };
    let pid: i32 = fs::read_to_string(l.ws.join("escapee.pid")).unwrap().trim().parse().unwrap();
    // With a cgroup, or (no cgroup2 here, or no right to make one) as the
    // subreaper that finds it by the call's marks: ended either way.
    let how = providers::command::cgroups_unavailable().map_or("its cgroup".into(), |why| format!("its marks ({why})"));
    let _cleanup = Kill(pid);
    assert_eq!(r.exit, Some(ExitStatus::Code { code: 0 }));
    let d = r.descendants.expect("what it left is in the receipt");
    assert!(d.ended && d.processes.iter().any(|p| p.pid as i32 == pid && p.name == "sleep"), "by {how}: {d:?}");
    // SAFETY: signal 0 only asks whether the pid exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0
        && fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(!alive, "the escapee {pid} still runs (tracked by {how})");
}

/// SIGKILLs the escapee on drop, if it still runs (a failed assertion
/// leaves no `sleep 30`; a pid reused since is no `sleep`).
struct Kill(i32);

impl Drop for Kill {
    fn drop(&mut self) {
        if fs::read(format!("/proc/{}/cmdline", self.0)).is_ok_and(|c| c.starts_with(b"sleep\0")) {
            // SAFETY: plain syscall on the escapee this test's child started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}
