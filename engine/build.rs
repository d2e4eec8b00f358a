//! Build-time work:
//! - the source commit the binary is built from (`engine --version`), with
//!   `+dirty` when the sources that build it (engine/, providers/,
//!   Cargo.toml, Cargo.lock) had uncommitted changes;
//! - a hash of the sources that decide what a plan file's bytes mean (the
//!   plan module, digests, limits, ids): part of the plan cache's key, so a
//!   build that validates or digests differently never trusts a row an
//!   earlier build wrote, even between commits;
//! - the shell completions and the man pages, generated from the command
//!   line's own definition (`src/cli/args.rs`, included here) into
//!   OUT_DIR, where the binary embeds them (`engine completions`, `engine man`).
use std::path::Path;
use std::process::Command;

#[allow(dead_code)]
mod args {
    include!("src/cli/args.rs");
}

fn main() {
    let version = version_line();
    println!("cargo:rustc-env=ENGINE_VERSION_LINE={version}");
    println!("cargo:rerun-if-changed=engine/src/cli/args.rs");
    println!("cargo:rustc-env=ENGINE_PLAN_SOURCES={}", plan_sources());
    let out = std::env::var_os("OUT_DIR").map(std::path::PathBuf::from).expect("cargo sets OUT_DIR");
    if let Err(e) = generate(&out, &version) {
        panic!("cannot write the completions and man pages into {}: {e}", out.display());
    }
}

fn version_line() -> String {
    // `--no-optional-locks`: `git status` refreshes the index's file
    // times and writes the index back when it can; the index is watched
    // below, so that write made the next cargo invocation run this script
    // again and compile the engine again (5 minutes of a fresh clone's
    // `.ci/test`, whose build and test are two invocations).
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("--no-optional-locks")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        "engine",
        "providers",
        "Cargo.toml",
        "Cargo.lock",
    ])
    .is_some_and(|s| !s.is_empty());
    if let Some(top) = git(&["rev-parse", "--show-toplevel"]) {
        // A commit moves HEAD and the index; an edit moves a source file
        // (cargo scans a watched folder for any change). Git names where
        // HEAD and the index are (in a second worktree `.git` is a file):
        // a watched path that does not exist would make every build
        // compile the engine again.
        let top = std::path::Path::new(&top);
        // (`--git-path` answers relative to this folder, the package's.)
        let here = std::env::current_dir().unwrap_or_default();
        for name in ["HEAD", "index"] {
            if let Some(path) = git(&["rev-parse", "--git-path", name]) {
                println!("cargo:rerun-if-changed={}", here.join(path).display());
            }
        }
        for path in ["engine", "providers", "Cargo.toml", "Cargo.lock"] {
            println!("cargo:rerun-if-changed={}", top.join(path).display());
        }
    }
    format!("{} ({}{})", env!("CARGO_PKG_VERSION"), commit, if dirty { "+dirty" } else { "" })
}

/// A hash of every file that decides a plan's validity and digests.
fn plan_sources() -> String {
    use std::hash::{Hash, Hasher};
    let mut files: Vec<std::path::PathBuf> = ["engine/src/digest.rs", "engine/src/limits.rs", "engine/src/ids.rs"]
        .iter()
        .map(std::path::PathBuf::from)
        .collect();
    let mut dirs = vec![std::path::PathBuf::from("engine/src/plan")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        f.hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// The command line as the binary builds it (cli::command does the same).
fn command(version: &str) -> clap::Command {
    use clap::CommandFactory;
    // clap takes a &'static str; the build script runs once.
    args::Cli::command().version(&*Box::leak(version.to_string().into_boxed_str()))
}

fn generate(out: &Path, version: &str) -> std::io::Result<()> {
    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)?;
    for (shell, ours) in [
        (clap_complete::Shell::Bash, args::Shell::Bash),
        (clap_complete::Shell::Zsh, args::Shell::Zsh),
        (clap_complete::Shell::Fish, args::Shell::Fish),
    ] {
        let path = clap_complete::generate_to(shell, &mut command(version), "engine", &completions)?;
        assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(ours.file_name()), "clap_complete renamed a file");
    }
    let man = out.join("man");
    std::fs::create_dir_all(&man)?;
    clap_mangen::generate_to(command(version), &man)?;
    // The pages, for the binary to embed: (file name, its text).
    let mut names: Vec<String> = std::fs::read_dir(&man)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".1"))
        .collect();
    names.sort();
    let mut list = String::from("&[\n");
    for n in &names {
        list.push_str(&format!("    ({n:?}, include_str!(concat!(env!(\"OUT_DIR\"), \"/man/{n}\"))),\n"));
    }
    list.push_str("]\n");
    std::fs::write(out.join("man_pages.rs"), list)
}
