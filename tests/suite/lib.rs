//! How the suite finds the `engine` binary it runs (issue 35): the
//! suite is a package of its own (`engine-suite`, tests/Cargo.toml), so
//! cargo does not build the engine binary for it (no
//! `CARGO_BIN_EXE_engine`). Instead, once per process, before the first
//! test starts the engine, the suite runs `cargo build -p engine --bin
//! engine` with the profile and into the target folder it was itself
//! built with, and runs what that build leaves there
//! (`target/<profile>/engine`). Cargo builds it only when it is not
//! fresh (well under a second when it is: `bash .ci/test` built it
//! before), so the binary the suite runs is never an older one: a change
//! to engine/src followed by `cargo test -p engine-suite --test suite
//! e2e::…` runs the changed engine. A failing build fails the test that
//! needed the binary, with cargo's output.
//!
//! `cargo test --release` builds the suite in `target/release/deps/`: the
//! engine is then built with `--release`, as `cargo install --locked
//! --path .` builds it (the one users get); a plain `cargo test` builds
//! both with the dev profile, `--profile NAME` both with that one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `engine` binary, built first if it is not fresh (once per process).
/// Panics when it cannot be built, with cargo's output.
pub fn engine_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(build_engine)
}

/// Where the running test binary was built, as cargo lays it out:
/// `TARGET/[TRIPLE/]PROFILE_DIR/deps/suite-HASH`.
struct Build {
    target_dir: PathBuf,
    triple: Option<String>,
    profile_dir: PathBuf,
}

impl Build {
    fn of_this_process() -> Build {
        let exe = std::env::current_exe().expect("the suite's own path");
        let in_deps = exe.parent().filter(|d| d.file_name().is_some_and(|n| n == "deps"));
        let profile_dir = in_deps.and_then(Path::parent).unwrap_or_else(|| {
            panic!("{} is not in a cargo target folder's PROFILE/deps/: run the suite with cargo test", exe.display())
        });
        // With `--target TRIPLE` the profile's folder is one level further
        // down, in a folder named for the target the suite was compiled
        // for (tests/build.rs); any other name is the target folder itself
        // (one nested in another's included).
        let above = profile_dir.parent().expect("a target folder");
        let target = env!("SUITE_TARGET");
        let (target_dir, triple) = match above.parent() {
            Some(top) if above.file_name().is_some_and(|n| n == target) => {
                (top.to_path_buf(), Some(target.to_string()))
            }
            _ => (above.to_path_buf(), None),
        };
        Build { target_dir, triple, profile_dir: profile_dir.to_path_buf() }
    }

    /// The cargo arguments that select this build's profile: the folder
    /// `release` is `--release`, `debug` the dev profile, any other a
    /// custom profile of that name.
    fn profile_args(&self) -> Vec<String> {
        match self.profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("release") => vec!["--release".into()],
            Some("debug") => vec![],
            Some(custom) => vec!["--profile".into(), custom.into()],
            None => panic!("{}: no profile folder", self.profile_dir.display()),
        }
    }
}

/// Besides `CARGO_PKG_*`, what cargo sets in the environment of the tests
/// it runs (The Cargo Book, "Environment variables Cargo sets for crates").
const SET_FOR_TESTS: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// The suite's package folder (tests/) of the checkout the suite is run
/// from: what cargo sets for the test process, else the one it was
/// compiled in. Two checkouts that share or copy a target folder share
/// the suite binary too, and cargo finds it fresh in both (its paths are
/// the workspace's, relative); the folder compiled in would then build
/// and test the other checkout's engine.
pub fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.join("suite/lib.rs").is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `cargo build -p engine --bin engine` for this build's profile, target
/// folder and target; the path of the binary it leaves.
fn build_engine() -> PathBuf {
    let build = Build::of_this_process();
    // Cargo sets CARGO for the tests it runs; the one that built the suite
    // otherwise.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let manifest = package_dir().join("../Cargo.toml");
    let mut cmd = Command::new(&cargo);
    // What cargo set for this test process says what the suite's package
    // is (CARGO_PKG_DESCRIPTION, CARGO_MANIFEST_DIR, …): seen by the nested
    // cargo, it made the engine look changed and compiled it again.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_") || SET_FOR_TESTS.contains(&name.as_ref()) {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd.args(["build", "-p", "engine", "--bin", "engine", "--manifest-path"]).arg(&manifest);
    cmd.arg("--target-dir").arg(&build.target_dir).args(build.profile_args());
    if let Some(triple) = &build.triple {
        cmd.args(["--target", triple]);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("{}: {e}", cargo.to_string_lossy()));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the engine binary the suite runs could not be built ({cmd:?}):\n{said}");
    // Shown with the output of the test that asked first (`--nocapture`):
    // whether anything was compiled.
    eprint!("engine-suite: {cmd:?}:\n{said}");
    let binary = build.profile_dir.join("engine");
    assert!(binary.is_file(), "{cmd:?} left no {}", binary.display());
    binary
}
