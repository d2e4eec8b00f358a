//! The README's demo (`fixtures/money/demo.sh`) uses the `engine` on PATH
//! when it was built from exactly the tree the demo sits in, and otherwise
//! builds once, with the lock file. Run on a copy of the demo in a git
//! checkout of its own (its commit known, clean or edited), with an
//! `engine` on PATH that says which commit it was built from and runs the
//! engine under test, and a `cargo` that only notes how it was called.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::*;

/// What `target/release/engine` is in a demo's checkout.
#[derive(Clone, Copy)]
enum Built {
    /// The engine under test: the demo runs to its end.
    Real,
    /// A stand-in noting the commands it was given.
    Noted,
}

/// A checkout holding the demo and the paths whose changes make a build
/// (engine/, providers/, Cargo.toml, Cargo.lock), committed.
struct Checkout {
    _tmp: tempfile::TempDir,
    top: PathBuf,
    bin: PathBuf,
}

fn git(top: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=demo", "-c", "user.email=demo@example.invalid"])
        .args(args)
        .current_dir(top)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn script(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

impl Checkout {
    fn new() -> Checkout {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("clone");
        let demo = top.join("fixtures/money");
        fs::create_dir_all(&demo).unwrap();
        copy_tree(&repo_root().join("fixtures/money"), &demo);
        for dir in ["engine", "providers"] {
            fs::create_dir(top.join(dir)).unwrap();
            fs::write(top.join(dir).join("src.rs"), "// a source\n").unwrap();
        }
        fs::write(top.join("Cargo.toml"), "[package]\n").unwrap();
        fs::write(top.join("Cargo.lock"), "# a lock\n").unwrap();
        git(&top, &["init", "-q"]);
        git(&top, &["add", "-A"]);
        git(&top, &["commit", "-q", "-m", "the tree"]);
        let bin = tmp.path().join("bin");
        fs::create_dir(&bin).unwrap();
        Checkout { _tmp: tmp, top, bin }
    }

    fn head(&self) -> String {
        git(&self.top, &["rev-parse", "--short=12", "HEAD"])
    }

    /// An `engine` at `path` that says it was built from `commit` and is
    /// otherwise the engine under test.
    fn engine_of(&self, path: &Path, commit: &str) {
        script(
            path,
            &format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'engine 0.1.0 ({commit})'; exit 0; fi\nexec {} \"$@\"\n",
                sh_quote(ENGINE)
            ),
        );
    }

    /// `bash fixtures/money/demo.sh` with `bin/` first on PATH, a `cargo`
    /// there that notes its arguments in `cargo.log` and succeeds, and
    /// `target/release/engine` the engine under test (`Built::Real`) or a
    /// stand-in that notes each command it is given in `built.log` and
    /// succeeds (`Built::Noted`); and what cargo was asked, if anything.
    fn demo(&self, home: &Path, built_engine: Built) -> (Out, Option<String>) {
        let log = self.top.join("cargo.log");
        script(&self.bin.join("cargo"), &format!("#!/bin/sh\necho \"$@\" >> {}\n", sh_quote(&log)));
        let built = self.top.join("target/release");
        fs::create_dir_all(&built).unwrap();
        match built_engine {
            Built::Real => self.engine_of(&built.join("engine"), "built-here"),
            Built::Noted => script(
                &built.join("engine"),
                &format!("#!/bin/sh\necho \"$@\" >> {}\n", sh_quote(self.top.join("built.log"))),
            ),
        }
        let path = format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap_or_default());
        let mut cmd = Command::new("bash");
        cmd.arg(self.top.join("fixtures/money/demo.sh")).env("PATH", path).env("HOME", home);
        cmd.env_remove("CARGO_TARGET_DIR").env_remove("XDG_STATE_HOME");
        let out = Ws::new().run_command(cmd);
        (out, fs::read_to_string(&log).ok())
    }
}

#[test]
fn the_demo_runs_the_installed_engine_built_from_its_tree_and_builds_nothing() {
    let c = Checkout::new();
    c.engine_of(&c.bin.join("engine"), &c.head());
    let ws = Ws::new();
    let (out, cargo) = c.demo(&ws.state_home(), Built::Real);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!(cargo, None, "the demo built although the engine on PATH was built from its tree");
    assert!(out.stdout.contains(&format!("using {}", c.bin.join("engine").display())), "{}", out.stdout);
    assert!(repaired(&out.stdout), "{}", out.stdout);
}

/// The demo's run failed its validation and its repair exited 0: the
/// engine really ran, to the end — and the showcase ends `goal satisfied`
/// (its constraint is checked, so never `completed (… not checked)`).
fn repaired(stdout: &str) -> bool {
    let Some((run, repair)) = stdout.split_once("$ engine repair T2") else { return false };
    let Some((repair, status)) = repair.split_once("$ engine status") else { return false };
    run.contains("(exit 1)")
        && repair.contains("(exit 0)")
        && repair.contains("goal satisfied:")
        && !stdout.contains("not checked")
        && status.contains("state     satisfied")
}

#[test]
fn the_demo_builds_once_with_the_lock_file_when_the_engine_on_path_is_another_build() {
    let c = Checkout::new();
    let ws = Ws::new();
    let locked =
        format!("build --quiet --release --locked -p engine --manifest-path {}\n", c.top.join("Cargo.toml").display());
    // Built from another commit; from this one, but with changes; or this
    // one, and the tree has changed since. The first runs the demo to its
    // end with the engine it built; the other two (the same path after
    // the choice) with a stand-in for what cargo built, which shows that
    // the demo's four steps ran that, not the `engine` on PATH (issue 35:
    // two whole demos fewer).
    let head = c.head();
    for (commit, edit, built) in [
        ("0123456789ab", false, Built::Real),
        (&*format!("{head}+dirty"), false, Built::Noted),
        (&*head, true, Built::Noted),
    ] {
        c.engine_of(&c.bin.join("engine"), commit);
        if edit {
            fs::write(c.top.join("engine/src.rs"), "// edited\n").unwrap();
        }
        let _ = fs::remove_file(c.top.join("cargo.log"));
        let _ = fs::remove_file(c.top.join("built.log"));
        let (out, cargo) = c.demo(&ws.state_home(), built);
        assert_eq!(out.code(), 0, "{}", out.describe());
        assert_eq!(cargo.as_deref(), Some(&*locked), "engine built from {commit}, tree edited: {edit}");
        match built {
            Built::Real => assert!(repaired(&out.stdout), "{}", out.stdout),
            Built::Noted => {
                let steps = fs::read_to_string(c.top.join("built.log")).unwrap_or_default();
                assert_eq!(
                    steps, "run plan.json\nexplain T2\nrepair T2\nstatus\n",
                    "engine built from {commit}: {}",
                    out.stdout
                );
            }
        }
    }
}
