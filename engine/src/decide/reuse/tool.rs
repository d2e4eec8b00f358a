//! The tool's own identity (SPEC.md "Additions (2026-12-06)", `TOOL_CHANGED`):
//! a task's checkpoint carries who does the work — a command's resolved
//! executable and an interpreter's script file by their digests
//! (`exe:<program>`, `script:<path>`), an MCP server's `serverInfo`, its
//! tool's schema and its inventory (`mcp-server:`, `tool:`, `tools:`) — so a
//! new `python3`, a new agent CLI or a new script behind the same argv makes
//! the completion stale, named apart from a changed input. Pure: the run
//! reads the files.

use crate::checkpoint::Checkpoint;

use super::Refusal;

/// The checkpoint context name of a command's program.
pub fn exe_name(program: &str) -> String {
    format!("exe:{program}")
}

/// The checkpoint context name of an interpreter's script file.
pub fn script_name(path: &str) -> String {
    format!("script:{path}")
}

/// Does a checkpoint context name say who the tool is?
pub fn is_tool(name: &str) -> bool {
    ["exe:", "script:", "tool:", "tools:", "mcp-server:"].iter().any(|p| name.starts_with(p))
}

/// Programs whose first operand is the program they run.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "fish", "node", "nodejs", "deno", "bun", "ruby", "perl", "php", "lua",
    "Rscript", "tclsh", "pwsh",
];

/// An interpreter's script argument: the first operand (not an option)
/// after the program, when the program is an interpreter and no option
/// before it takes code inline (`sh -c`, `python -c`, `node -e`, `-m`).
pub fn script_arg(argv: &[String]) -> Option<&str> {
    let (program, args) = argv.split_first()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    let python = base.strip_prefix("python").is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if !python && !INTERPRETERS.contains(&base) {
        return None;
    }
    for a in args {
        if matches!(a.as_str(), "-c" | "-e" | "-m" | "--eval" | "-r" | "--") {
            return None;
        }
        if !a.starts_with('-') {
            return Some(a);
        }
    }
    None
}

/// Why a checkpoint observed now does not match the recorded one: the
/// first differing input path; else the first differing context value that
/// is not a tool's (`CHECKPOINT_CHANGED`, an upstream's outputs read as
/// its re-run by `cutoff::named`); else the first tool's
/// (`TOOL_CHANGED`, with its old and new identity). Only a refusal that
/// is `TOOL_CHANGED` differs by the tool alone.
pub fn difference(then: &Checkpoint, now: &Checkpoint) -> Refusal {
    let mut paths: Vec<&String> = then.files.keys().chain(now.files.keys()).collect();
    paths.sort();
    paths.dedup();
    if let Some(path) = paths.into_iter().find(|p| then.files.get(*p) != now.files.get(*p)) {
        return Refusal::CheckpointChanged { path: path.clone() };
    }
    let mut names: Vec<&String> = then.context.keys().chain(now.context.keys()).collect();
    names.sort();
    names.dedup();
    let differs = |n: &&&String| then.context.get(**n) != now.context.get(**n);
    if let Some(n) = names.iter().filter(|n| !is_tool(n)).find(differs) {
        return Refusal::CheckpointChanged { path: format!("context:{n}") };
    }
    match names.iter().find(differs) {
        Some(n) => {
            Refusal::ToolChanged { what: what(n), old: shown(then.context.get(*n)), new: shown(now.context.get(*n)) }
        }
        None => Refusal::CheckpointChanged { path: "(context)".into() },
    }
}

/// A tool's context name as a person reads it: a command's program, an
/// interpreter's script; an MCP entry by its context name (`mcp-server:P`,
/// `tool:P/T`, `tools:P`).
fn what(name: &str) -> String {
    if let Some(p) = name.strip_prefix("exe:") {
        return p.to_string();
    }
    match name.strip_prefix("script:") {
        Some(p) => format!("script {p}"),
        None => name.to_string(),
    }
}

/// A value as a person reads it: digests shortened to 12 hex digits.
fn shown(value: Option<&String>) -> String {
    let Some(v) = value else { return "(none)".into() };
    v.split(' ')
        .map(|w| match w.len() == 64 && w.bytes().all(|b| b.is_ascii_hexdigit()) {
            true => w.get(..12).unwrap_or(w),
            false => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a completion's checkpoint says of who did the work, for a person
/// (`engine explain`, `engine status`): the tool entries it recorded, in
/// words, and what is not compared and why — an HTTP service's version
/// (the engine cannot observe it without calling the service), an
/// agent's model (only its own report names it, after a call: shown, not
/// compared). `kind`: the provider's kind (`command`, `agent-json`,
/// `mcp`, `http`, `builtin`); `model`: the model the completion's report
/// named, if any.
pub fn identity_words<'a>(
    context: impl IntoIterator<Item = (&'a String, &'a String)>,
    kind: &str,
    model: Option<&str>,
) -> (String, serde_json::Value) {
    let compared: Vec<String> = context
        .into_iter()
        .filter(|(n, _)| is_tool(n))
        .map(|(n, v)| format!("{} {}", what(n), shown(Some(v))))
        .collect();
    let not_compared = match (kind, model) {
        ("http", _) => {
            Some("an HTTP service's version: the engine cannot observe it without calling the service".to_string())
        }
        ("agent-json", Some(m)) => {
            Some(format!("the model the agent reported, {m}: known only from its report after a call"))
        }
        ("agent-json", None) => Some("the agent's model: its report named none".to_string()),
        _ => None,
    };
    let mut text = match compared.is_empty() {
        true => "its tool's identity: none recorded".to_string(),
        false => format!("its tool's identity: {}", compared.join("; ")),
    };
    if let Some(why) = &not_compared {
        text.push_str(&format!("; not compared: {why}"));
    }
    (text, serde_json::json!({"compared": compared, "not_compared": not_compared, "model": model}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn cp(files: &[(&str, &str)], context: &[(&str, &str)]) -> Checkpoint {
        Checkpoint::of(
            files.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect(),
            context.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn an_interpreters_script_is_its_first_operand() {
        assert_eq!(script_arg(&argv(&["sh", "/abs/tool.sh", "x"])), Some("/abs/tool.sh"));
        assert_eq!(script_arg(&argv(&["/usr/bin/python3", "-u", "agent.py", "m"])), Some("agent.py"));
        assert_eq!(script_arg(&argv(&["python3.12", "agent.py"])), Some("agent.py"));
        assert_eq!(script_arg(&argv(&["sh", "-c", "echo hi"])), None);
        assert_eq!(script_arg(&argv(&["python3", "-m", "pytest"])), None);
        assert_eq!(script_arg(&argv(&["cat", "in.txt"])), None, "not an interpreter");
        assert_eq!(script_arg(&argv(&["sh"])), None);
    }

    #[test]
    fn inputs_first_then_other_context_then_the_tool() {
        let h1 = "a".repeat(64);
        let h2 = "b".repeat(64);
        let then = cp(&[("a.txt", "1")], &[("exe:sh", &format!("/bin/sh {h1}")), ("mode", "x")]);
        let tool = cp(&[("a.txt", "1")], &[("exe:sh", &format!("/bin/sh {h2}")), ("mode", "x")]);
        let r = difference(&then, &tool);
        assert_eq!(r.code(), "TOOL_CHANGED");
        assert_eq!(r.detail(), format!("sh /bin/sh {} → /bin/sh {}", &h1[..12], &h2[..12]));
        let both = cp(&[("a.txt", "1")], &[("exe:sh", &format!("/bin/sh {h2}")), ("mode", "y")]);
        assert_eq!(difference(&then, &both), Refusal::CheckpointChanged { path: "context:mode".into() });
        let file = cp(&[("a.txt", "2")], &[("exe:sh", &format!("/bin/sh {h2}")), ("mode", "x")]);
        assert_eq!(difference(&then, &file), Refusal::CheckpointChanged { path: "a.txt".into() });
        let new_tool =
            cp(&[("a.txt", "1")], &[("exe:sh", &format!("/bin/sh {h1}")), ("mode", "x"), ("script:t.sh", &h2)]);
        assert_eq!(difference(&then, &new_tool).detail(), format!("script t.sh (none) → {}", &h2[..12]));
    }

    #[test]
    fn identity_words_name_what_is_compared_and_what_is_not() {
        let h = "c".repeat(64);
        let c = cp(&[("a.txt", "1")], &[("exe:sh", &format!("/bin/sh {h}")), ("mode", "x")]);
        let (text, json) = identity_words(&c.context, "command", None);
        assert_eq!(text, format!("its tool's identity: sh /bin/sh {}", &h[..12]));
        assert_eq!(json["not_compared"], serde_json::Value::Null);
        let (text, _) = identity_words(&BTreeMap::new(), "http", None);
        assert!(
            text.starts_with("its tool's identity: none recorded; not compared: an HTTP service's version"),
            "{text}"
        );
        let (text, json) = identity_words(&c.context, "agent-json", Some("m-1"));
        assert!(
            text.ends_with("not compared: the model the agent reported, m-1: known only from its report after a call"),
            "{text}"
        );
        assert_eq!(json["model"], "m-1");
    }
}
