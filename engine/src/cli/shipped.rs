//! The shell completions and man pages the build wrote (engine/build.rs,
//! from `args`), embedded in the binary: `engine completions SHELL`,
//! `engine man [COMMAND]`, `engine man --dir DIR`.

use std::path::Path;

use serde_json::json;

use super::args::Shell;
use crate::error::{Error, Result};
use crate::report::Output;

const BASH: &str = include_str!(concat!(env!("OUT_DIR"), "/completions/engine.bash"));
const ZSH: &str = include_str!(concat!(env!("OUT_DIR"), "/completions/_engine"));
const FISH: &str = include_str!(concat!(env!("OUT_DIR"), "/completions/engine.fish"));

/// Every man page: (file name, roff text), `engine.1` and one per command.
pub const MAN_PAGES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/man_pages.rs"));

/// The completion script the build wrote for `shell`.
pub fn completion_script(shell: Shell) -> &'static str {
    match shell {
        Shell::Bash => BASH,
        Shell::Zsh => ZSH,
        Shell::Fish => FISH,
    }
}

pub fn completions(shell: Shell) -> Output {
    let script = completion_script(shell);
    Output {
        text: script.to_string(),
        json: json!({"shell": format!("{shell:?}").to_lowercase(), "file": shell.file_name(), "script": script}),
        exit_code: 0,
    }
}

/// The page of `engine` (no command) or of one command.
pub fn man_page(command: Option<&str>) -> Option<&'static str> {
    let name = match command {
        None => "engine.1".to_string(),
        Some(c) => format!("engine-{c}.1"),
    };
    MAN_PAGES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

pub fn man(command: Option<&str>, dir: Option<&Path>) -> Result<Output> {
    if let Some(dir) = dir {
        return write_pages(dir);
    }
    let page = man_page(command).ok_or_else(|| {
        let known: Vec<&str> =
            MAN_PAGES.iter().filter_map(|(n, _)| n.strip_prefix("engine-")?.strip_suffix(".1")).collect();
        Error::usage(format!("no man page for `{}`; the commands are: {}", command.unwrap_or(""), known.join(", ")))
    })?;
    // A terminal reads the page as text; a pipe (`| man -l -`) gets roff.
    use std::io::IsTerminal;
    let text = match std::io::stdout().is_terminal() {
        true => crate::report::roff::to_text(page),
        false => page.to_string(),
    };
    Ok(Output { text, json: json!({"page": page}), exit_code: 0 })
}

/// Write every page into `dir` (created if missing); existing pages of the
/// same names are replaced: they are generated, not edited by hand.
fn write_pages(dir: &Path) -> Result<Output> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::usage(format!("cannot create {}: {e}", dir.display())).at(dir.display().to_string()))?;
    let mut written = Vec::new();
    for (name, text) in MAN_PAGES {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| {
            Error::usage(format!("cannot write {}: {e}", path.display())).at(path.display().to_string())
        })?;
        written.push(path.display().to_string());
    }
    let text = written.iter().map(|p| format!("wrote {p}\n")).collect();
    Ok(Output { text, json: json!({"written": written}), exit_code: 0 })
}
