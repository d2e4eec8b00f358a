//! The pinned official MCP servers (`fixtures/node/`) the tests drive with
//! Node.js. Shared by the engine's test binaries and the providers' own
//! (`#[path]`): std and serde_json only.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `dist/index.js` of the pinned `@modelcontextprotocol/<package>` in the
/// clone at `repo`, after checking that Node.js runs and the installed
/// version is the pinned one. Fails (never skips) saying exactly what to
/// run.
pub fn node_server(repo: &Path, package: &str) -> PathBuf {
    // The command, ready to paste: the script finds its folder itself,
    // and the clone's path may hold spaces.
    let repo_shown = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let script = repo_shown.join(".ci/install-node-fixtures").display().to_string().replace('\'', r"'\''");
    let fail = |what: String| -> ! {
        panic!(
            "{what}. These tests drive the official MCP servers (pinned in fixtures/node) with Node.js 20 or \
             later. Run:\n\n    bash '{script}'\n\nthen the tests again (or run `bash .ci/test` in the clone, the \
             README's test command, which installs what every test needs and runs them all)"
        )
    };
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => fail("Node.js is not installed (no `node` on PATH)".into()),
    }
    let pins = std::fs::read_to_string(repo.join("fixtures/node/package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or_else(|| fail("fixtures/node/package.json cannot be read".into()));
    let name = format!("@modelcontextprotocol/{package}");
    let pinned = pins["dependencies"][&name].as_str().unwrap_or_default().to_string();
    let dir = repo.join("fixtures/node/node_modules").join(&name);
    let installed = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string));
    match installed {
        Some(v) if v == pinned => dir.join("dist/index.js"),
        Some(v) => fail(format!("{name} {v} is installed in fixtures/node, but {pinned} is pinned")),
        None => fail(format!("{name} {pinned} is not installed in fixtures/node/node_modules")),
    }
}
