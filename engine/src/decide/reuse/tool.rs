//! The tool's own identity (SPEC.md "Additions (2026-12-06)", `TOOL_CHANGED`):
//! a task's checkpoint carries who does the work — a command's resolved
//! executable and an interpreter's script file by their digests
//! (`exe:<program>`, `script:<path>`), an MCP server's `serverInfo`, its
//! tool's schema and its inventory (`mcp-server:`, `tool:`, `tools:`) — so a
//! new `python3`, a new agent CLI or a new script behind the same argv makes
//! the completion stale, named apart from a changed input. What a provider
//! says of itself only in a call's answer — an HTTP service's declared
//! `version_header`, an agent's reported `model` — is recorded with the
//! completion (`version:<provider>`, `model:<provider>`) and compared with
//! what is known before a call: an agent provider's pinned `model`, else
//! the newest value a completion of the same provider recorded. Pure: the
//! run reads the files and the ledger.

use std::collections::BTreeMap;

use crate::checkpoint::Checkpoint;
use crate::ids::AttemptId;
use crate::plan::model::{Protocol, ProviderSpec, Task};

use super::Refusal;

/// The checkpoint context name of a command's program.
pub fn exe_name(program: &str) -> String {
    format!("exe:{program}")
}

/// The checkpoint context name of an interpreter's script file.
pub fn script_name(path: &str) -> String {
    format!("script:{path}")
}

/// The checkpoint context name of an HTTP service's reported version.
pub fn version_name(provider: &str) -> String {
    format!("version:{provider}")
}

/// The checkpoint context name of the model an agent reported.
pub fn model_name(provider: &str) -> String {
    format!("model:{provider}")
}

/// Does a checkpoint context name say who the tool is?
pub fn is_tool(name: &str) -> bool {
    ["exe:", "script:", "tool:", "tools:", "mcp-server:", "version:", "model:"].iter().any(|p| name.starts_with(p))
}

/// Is it an identity known only from a call's answer (`reported`)?
fn is_reported(name: &str) -> bool {
    name.starts_with("version:") || name.starts_with("model:")
}

/// Does this provider say who it is only in its answers: an HTTP service
/// that declares a `version_header`, an `agent-json` agent (its report's
/// `model`)?
pub fn reports_identity(spec: &ProviderSpec) -> bool {
    match spec {
        ProviderSpec::Http { version_header, .. } => version_header.is_some(),
        ProviderSpec::Command { protocol, .. } => protocol.is_some(),
        _ => false,
    }
}

/// What a call's answer said of who did the work, as the completion's
/// checkpoint records it: the declared `version_header`'s value
/// (`(absent)` when the answer lacks it), the `model` of an agent's report
/// (nothing when it names none). `report`: the agent's report, if read.
pub fn reported(
    spec: &ProviderSpec,
    provider: &str,
    receipt: &providers::Receipt,
    report: Option<&serde_json::Value>,
) -> Option<(String, String)> {
    match (spec, receipt) {
        (ProviderSpec::Http { version_header: Some(_), .. }, providers::Receipt::Http(r)) => {
            Some((version_name(provider), r.version.clone().unwrap_or_else(|| "(absent)".into())))
        }
        (ProviderSpec::Command { protocol: Some(Protocol::AgentJson), .. }, providers::Receipt::Command(_)) => {
            let model = report?.get("model")?.as_str()?;
            Some((model_name(provider), model.chars().take(256).collect()))
        }
        _ => None,
    }
}

/// The newest value of each reported identity among completions (by
/// attempt: the ledger's ids grow): what the latest answer of each
/// provider said.
pub fn newest<'a>(
    completions: impl IntoIterator<Item = (AttemptId, &'a Checkpoint)>,
) -> BTreeMap<String, (AttemptId, String)> {
    let mut out: BTreeMap<String, (AttemptId, String)> = BTreeMap::new();
    for (attempt, cp) in completions {
        for (name, value) in cp.context.iter().filter(|(n, _)| is_reported(n)) {
            if out.get(name).is_none_or(|(a, _)| *a < attempt) {
                out.insert(name.clone(), (attempt, value.clone()));
            }
        }
    }
    out
}

/// The reported identities `task`'s completion recorded (`then`), as they
/// are known now, before any call: an agent's model is the provider's
/// pinned `model` when the plan pins one — for every completion, one whose
/// report named no model included (it is not known to be the pinned
/// one); otherwise each is the newest value a completion of the same
/// provider recorded (`newest`), or the completion's own. A provider that
/// no longer reports its identity (its `version_header` or `agent-json`
/// dropped) compares nothing: what a completion recorded stands as it
/// was. Otherwise only what the completion recorded is compared: one
/// recorded before the engine kept it stands on what it recorded.
pub fn reported_now(
    spec: Option<&ProviderSpec>,
    task: &Task,
    then: &BTreeMap<String, String>,
    newest: &BTreeMap<String, (AttemptId, String)>,
) -> BTreeMap<String, String> {
    let reports = spec.is_some_and(reports_identity);
    let pin = match spec {
        Some(ProviderSpec::Command { model: Some(m), .. }) => Some(m),
        _ => None,
    };
    let mine = [version_name(&task.provider), model_name(&task.provider)];
    let mut now: BTreeMap<String, String> = then
        .iter()
        .filter(|(n, _)| mine.contains(n))
        .map(|(n, v)| {
            let now = match (reports, n.starts_with("model:"), pin) {
                (false, _, _) => v.clone(),
                (true, true, Some(pin)) => pin.clone(),
                (true, _, _) => newest.get(n).map_or_else(|| v.clone(), |(_, v)| v.clone()),
            };
            (n.clone(), now)
        })
        .collect();
    if let Some(pin) = pin {
        now.entry(model_name(&task.provider)).or_insert_with(|| pin.clone());
    }
    now
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
    if let Some(p) = name.strip_prefix("version:") {
        return format!("{p} version");
    }
    if name.starts_with("model:") {
        return "model".to_string();
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
/// words; what a reported identity is compared with (known before a call
/// only as a pin or as an earlier answer); and what is not compared and
/// why — an HTTP service that declares no `version_header` (the engine
/// cannot learn its version without calling it), an agent's model its
/// completion did not record. `spec`: the task's provider; `model`: the
/// model the completion's report named, if any.
pub fn identity_words<'a>(
    context: impl IntoIterator<Item = (&'a String, &'a String)>,
    spec: Option<&ProviderSpec>,
    model: Option<&str>,
) -> (String, serde_json::Value) {
    let context: Vec<(&String, &String)> = context.into_iter().filter(|(n, _)| is_tool(n)).collect();
    let compared: Vec<String> = context.iter().map(|(n, v)| format!("{} {}", what(n), shown(Some(v)))).collect();
    let has = |prefix: &str| context.iter().any(|(n, _)| n.starts_with(prefix));
    let (with, not_compared) = match spec {
        Some(ProviderSpec::Http { version_header: None, .. }) => (None, Some(
            "an HTTP service's version: the plan declares no `version_header`, and the engine does not call a service to learn it".to_string())),
        Some(ProviderSpec::Http { .. }) if !has("version:") => {
            (None, Some("an HTTP service's version: this completion recorded none".to_string()))
        }
        Some(ProviderSpec::Http { .. }) => (Some(
            "its version with the newest one a completion of this provider recorded in this revision (the service is not asked before a call)".to_string()), None),
        Some(ProviderSpec::Command { protocol: Some(_), model: pin, .. }) => match (has("model:"), pin, model) {
            (true, Some(pin), _) => (Some(format!("its model with the plan's pinned `model`, {pin}")), None),
            (false, Some(pin), _) => {
                (Some(format!("its model with the plan's pinned `model`, {pin}: this completion recorded none")), None)
            }
            (true, None, _) => (Some(
                "its model (from the agent's report, a claim) with the newest one a completion of this provider reported in this revision; known only after a call".to_string()), None),
            (false, _, Some(m)) => (None, Some(format!("the model the agent reported, {m}: this completion did not record it for comparison"))),
            (false, _, None) => (None, Some("the agent's model: its report named none".to_string())),
        },
        _ => (None, None),
    };
    let mut text = match compared.is_empty() {
        true => "its tool's identity: none recorded".to_string(),
        false => format!("its tool's identity: {}", compared.join("; ")),
    };
    if let Some(how) = &with {
        text.push_str(&format!("; compared: {how}"));
    }
    if let Some(why) = &not_compared {
        text.push_str(&format!("; not compared: {why}"));
    }
    let json =
        serde_json::json!({"compared": compared, "compared_with": with, "not_compared": not_compared, "model": model});
    (text, json)
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

    fn spec(v: serde_json::Value) -> ProviderSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn identity_words_name_what_is_compared_and_what_is_not() {
        let h = "c".repeat(64);
        let c = cp(&[("a.txt", "1")], &[("exe:sh", &format!("/bin/sh {h}")), ("mode", "x")]);
        let (text, json) = identity_words(&c.context, Some(&spec(serde_json::json!({"kind": "command"}))), None);
        assert_eq!(text, format!("its tool's identity: sh /bin/sh {}", &h[..12]));
        assert_eq!(json["not_compared"], serde_json::Value::Null);
        let http = spec(serde_json::json!({"kind": "http", "endpoint": "http://127.0.0.1/"}));
        let (text, _) = identity_words(&BTreeMap::new(), Some(&http), None);
        assert!(text.starts_with("its tool's identity: none recorded; not compared: an HTTP service's version: the plan declares no `version_header`"), "{text}");
        let versioned =
            spec(serde_json::json!({"kind": "http", "endpoint": "http://127.0.0.1/", "version_header": "X-V"}));
        let v = cp(&[], &[("version:svc", "2.1")]);
        let (text, _) = identity_words(&v.context, Some(&versioned), None);
        assert!(
            text.starts_with("its tool's identity: svc version 2.1; compared: its version with the newest one"),
            "{text}"
        );
        let agent = spec(serde_json::json!({"kind": "command", "protocol": "agent-json"}));
        let (text, json) = identity_words(&c.context, Some(&agent), Some("m-1"));
        assert!(
            text.ends_with(
                "not compared: the model the agent reported, m-1: this completion did not record it for comparison"
            ),
            "{text}"
        );
        assert_eq!(json["model"], "m-1");
        let pinned = spec(serde_json::json!({"kind": "command", "protocol": "agent-json", "model": "m-2"}));
        let m = cp(&[], &[("model:agent", "m-1")]);
        let (text, _) = identity_words(&m.context, Some(&pinned), Some("m-1"));
        assert_eq!(text, "its tool's identity: model m-1; compared: its model with the plan's pinned `model`, m-2");
    }

    #[test]
    fn a_reported_identity_is_compared_with_the_pin_else_the_newest_answer() {
        let task: Task = serde_json::from_value(serde_json::json!(
            {"ref": "T1", "provider": "agent", "action": {"run": ["sh", "a.sh"]}}))
        .unwrap();
        let old = cp(&[], &[("model:agent", "m-1"), ("exe:sh", "x")]);
        let newer = cp(&[], &[("model:agent", "m-2")]);
        let other = cp(&[], &[("model:other", "m-9")]);
        let newest = newest([(AttemptId(7), &newer), (AttemptId(3), &old), (AttemptId(9), &other)]);
        let agent = spec(serde_json::json!({"kind": "command", "protocol": "agent-json"}));
        let now = reported_now(Some(&agent), &task, &old.context, &newest);
        assert_eq!(now, BTreeMap::from([("model:agent".to_string(), "m-2".to_string())]), "only what it recorded");
        let r = difference(&old, &cp(&[], &[("model:agent", "m-2"), ("exe:sh", "x")]));
        assert_eq!(r.detail(), "model m-1 → m-2");
        let pinned = spec(serde_json::json!({"kind": "command", "protocol": "agent-json", "model": "m-1"}));
        assert_eq!(reported_now(Some(&pinned), &task, &old.context, &newest)["model:agent"], "m-1", "the pin wins");
        assert!(
            reported_now(Some(&agent), &task, &BTreeMap::new(), &newest).is_empty(),
            "nothing recorded, nothing compared"
        );
        // A pin holds a completion whose report named no model too.
        let unnamed = cp(&[], &[("exe:sh", "x")]);
        let now = reported_now(Some(&pinned), &task, &unnamed.context, &newest);
        assert_eq!(now, BTreeMap::from([("model:agent".to_string(), "m-1".to_string())]));
        let r = difference(&unnamed, &cp(&[], &[("model:agent", "m-1"), ("exe:sh", "x")]));
        assert_eq!(r.detail(), "model (none) → m-1");
        // A provider that no longer reports (agent-json dropped): what the
        // completion recorded stands, not `→ (none)`.
        let plain = spec(serde_json::json!({"kind": "command"}));
        assert_eq!(reported_now(Some(&plain), &task, &old.context, &newest)["model:agent"], "m-1");
    }
}
