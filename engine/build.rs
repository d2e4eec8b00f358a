//! Records the source commit the binary is built from (`engine --version`),
//! with `+dirty` when the sources that build it (engine/, providers/,
//! Cargo.toml, Cargo.lock) had uncommitted changes.
use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
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
    let version = format!("{} ({}{})", env!("CARGO_PKG_VERSION"), commit, if dirty { "+dirty" } else { "" });
    println!("cargo:rustc-env=ENGINE_VERSION_LINE={version}");
    if let Some(top) = git(&["rev-parse", "--show-toplevel"]) {
        // A commit moves HEAD and the index; an edit moves a source file
        // (cargo scans a watched folder for any change).
        for path in [".git/HEAD", ".git/index", "engine", "providers", "Cargo.toml", "Cargo.lock"] {
            println!("cargo:rerun-if-changed={top}/{path}");
        }
    }
}
