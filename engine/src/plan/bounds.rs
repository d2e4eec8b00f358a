//! A parsed plan against `crate::limits`: every count, length and depth a
//! person can write is bounded, and the first one over its bound is
//! `PLAN_INVALID` at its exact JSON path. Pure; runs before any other
//! check, so nothing later (tables, digests, the store) meets an input
//! without a bound.

use std::collections::BTreeMap;
use std::fmt::Display;

use serde_json::Value;

use crate::error::{Code, Error, Result};
use crate::limits::*;
use crate::plan::model::{
    Acceptance, Check, CheckedConstraint, Constraint, ContextSource, Goal, NetworkSpec, PlanFile, ProviderSpec, Task,
    Validation,
};

pub fn check(plan: &PlanFile) -> Result<()> {
    count(plan.tasks.len(), TASKS_MAX, "$.tasks", "tasks")?;
    count(plan.providers.len(), PROVIDERS_MAX, "$.providers", "providers")?;
    count(plan.secrets.len(), SECRETS_MAX, "$.secrets", "secret names")?;
    for (i, name) in plan.secrets.iter().enumerate() {
        bytes(name, ID_BYTES_MAX, format_args!("$.secrets[{i}]"), "a secret's name")?;
    }
    if let Some(goal) = &plan.goal {
        goal_bounds(goal)?;
    }
    for (name, spec) in &plan.providers {
        identifier(name, format_args!("$.providers{}", key(name)), "a provider name")?;
        provider_bounds(spec, format_args!("$.providers{}", key(name)))?;
        let writes = spec.declared_writes();
        let at = format!("$.providers{}.sandbox.write", key(name));
        count(writes.len(), SANDBOX_WRITES_MAX, &at, "sandbox write paths")?;
        for (i, w) in writes.iter().enumerate() {
            bytes(w, PATH_BYTES_MAX, format_args!("{at}[{i}]"), "a sandbox write path")?;
        }
        network_env_bounds(spec.network(), spec.env(), format_args!("$.providers{}", key(name)))?;
    }
    if let Some(people) = &plan.people {
        for (act, names) in people.lists() {
            let at = format!("$.people.{act}");
            count(names.len(), PEOPLE_MAX, &at, "user names")?;
            for (i, n) in names.iter().enumerate() {
                bytes(n, ID_BYTES_MAX, format_args!("{at}[{i}]"), "a user name")?;
            }
        }
    }
    for (i, task) in plan.tasks.iter().enumerate() {
        task_bounds(task, format_args!("$.tasks[{i}]"))?;
    }
    Ok(())
}

fn goal_bounds(goal: &Goal) -> Result<()> {
    identifier(&goal.id, "$.goal.id", "the goal id")?;
    bytes(&goal.statement, STATEMENT_BYTES_MAX, "$.goal.statement", "the goal statement")?;
    count(goal.acceptance.len(), ACCEPTANCE_MAX, "$.goal.acceptance", "acceptance criteria")?;
    for (i, a) in goal.acceptance.iter().enumerate() {
        acceptance_bounds(a, format_args!("$.goal.acceptance[{i}]"))?;
    }
    count(goal.constraints.len(), CONSTRAINTS_MAX, "$.goal.constraints", "constraints")?;
    for (i, c) in goal.constraints.iter().enumerate() {
        let at = format!("$.goal.constraints[{i}]");
        match c {
            Constraint::Statement(s) => bytes(s, STATEMENT_BYTES_MAX, &at, "a constraint")?,
            Constraint::Checked(c) => constraint_bounds(c, &at)?,
        }
    }
    Ok(())
}

fn constraint_bounds(c: &CheckedConstraint, at: impl Display + Copy) -> Result<()> {
    identifier(&c.id, format_args!("{at}.id"), "a constraint id")?;
    bytes(&c.statement, STATEMENT_BYTES_MAX, format_args!("{at}.statement"), "a constraint statement")?;
    paths(&c.protect, PROTECT_PATHS_MAX, format_args!("{at}.protect"), "protected paths")?;
    if let Some(check) = &c.check {
        check_bounds(check, format_args!("{at}.check"))?;
    }
    Ok(())
}

fn check_bounds(check: &Check, at: impl Display + Copy) -> Result<()> {
    argv(&check.run, format_args!("{at}.run"))?;
    timeout(check.timeout_seconds, format_args!("{at}.timeout_seconds"))
}

/// A list of paths or globs: its count, and each one's bytes.
fn paths(list: &[String], max: usize, at: impl Display + Copy, what: impl Display + Copy) -> Result<()> {
    count(list.len(), max, at, what)?;
    for (i, p) in list.iter().enumerate() {
        bytes(p, PATH_BYTES_MAX, format_args!("{at}[{i}]"), "a path")?;
    }
    Ok(())
}

fn acceptance_bounds(a: &Acceptance, at: impl Display + Copy) -> Result<()> {
    identifier(&a.id, format_args!("{at}.id"), "an acceptance id")?;
    bytes(&a.statement, STATEMENT_BYTES_MAX, format_args!("{at}.statement"), "an acceptance statement")?;
    if let Some(check) = &a.check {
        check_bounds(check, format_args!("{at}.check"))?;
    }
    Ok(())
}

/// A provider's or a task's `network.connect` and `env`.
fn network_env_bounds(network: Option<&NetworkSpec>, env: &[String], at: impl Display + Copy) -> Result<()> {
    let connect = network.map(|n| n.connect.as_slice()).unwrap_or_default();
    count(connect.len(), CONNECT_MAX, format_args!("{at}.network.connect"), "`network.connect` entries")?;
    for (i, c) in connect.iter().enumerate() {
        bytes(c, ENDPOINT_BYTES_MAX, format_args!("{at}.network.connect[{i}]"), "a HOST:PORT")?;
    }
    count(env.len(), ENV_NAMES_MAX, format_args!("{at}.env"), "`env` names")?;
    for (i, n) in env.iter().enumerate() {
        bytes(n, ID_BYTES_MAX, format_args!("{at}.env[{i}]"), "a variable name")?;
    }
    Ok(())
}

fn provider_bounds(spec: &ProviderSpec, at: impl Display + Copy) -> Result<()> {
    match spec {
        ProviderSpec::Command { .. } | ProviderSpec::Builtin { .. } => Ok(()),
        ProviderSpec::Http { endpoint, observe, hosts, ca_file, .. } => {
            bytes(endpoint, URL_BYTES_MAX, format_args!("{at}.endpoint"), "an endpoint")?;
            match observe {
                Some(Value::String(url)) => bytes(url, URL_BYTES_MAX, format_args!("{at}.observe"), "an observe URL")?,
                Some(rule) => rule_bounds(rule, format_args!("{at}.observe"))?,
                None => {}
            }
            reach_bounds(hosts, ca_file.as_deref(), at)
        }
        ProviderSpec::Mcp { command, url, observe_tool, observe, hosts, ca_file, tools, .. } => {
            if let Some(command) = command {
                argv(command, format_args!("{at}.command"))?;
            }
            if let Some(url) = url {
                bytes(url, URL_BYTES_MAX, format_args!("{at}.url"), "a URL")?;
            }
            if let Some(t) = observe_tool {
                bytes(t, ID_BYTES_MAX, format_args!("{at}.observe_tool"), "a tool name")?;
            }
            if let Some(rule) = observe {
                rule_bounds(rule, format_args!("{at}.observe"))?;
            }
            let tools = tools.as_deref().unwrap_or_default();
            count(tools.len(), TOOLS_MAX, format_args!("{at}.tools"), "tools")?;
            for (i, t) in tools.iter().enumerate() {
                bytes(t, ID_BYTES_MAX, format_args!("{at}.tools[{i}]"), "a tool name")?;
            }
            reach_bounds(hosts, ca_file.as_deref(), at)
        }
    }
}

/// The hosts a provider may contact and the CA file it trusts.
fn reach_bounds(hosts: &[String], ca_file: Option<&str>, at: impl Display + Copy) -> Result<()> {
    count(hosts.len(), PROVIDERS_MAX, format_args!("{at}.hosts"), "hosts")?;
    for (i, h) in hosts.iter().enumerate() {
        bytes(h, URL_BYTES_MAX, format_args!("{at}.hosts[{i}]"), "a host")?;
    }
    if let Some(p) = ca_file {
        bytes(p, PATH_BYTES_MAX, format_args!("{at}.ca_file"), "a ca_file path")?;
    }
    Ok(())
}

/// A read-back rule (a provider's default or a task's): its nesting, its
/// size as JSON, and its URL. It sits 4 deep (document, `providers` or
/// `tasks`, the provider or task, the rule).
fn rule_bounds(rule: &Value, at: impl Display + Copy) -> Result<()> {
    depth(rule, 4, at)?;
    let size = serde_json::to_string(rule).map_or(usize::MAX, |t| t.len());
    if size > OBSERVE_RULE_BYTES_MAX {
        return Err(Error::new(
            Code::PlanInvalid,
            format!("an observe rule of {size} bytes as JSON; the limit is {OBSERVE_RULE_BYTES_MAX}"),
        )
        .at(at.to_string()));
    }
    if let Some(url) = rule.get("url").and_then(Value::as_str) {
        bytes(url, URL_BYTES_MAX, format_args!("{at}.url"), "an observe URL")?;
    }
    Ok(())
}

fn task_bounds(t: &Task, at: impl Display + Copy) -> Result<()> {
    identifier(&t.task_ref, format_args!("{at}.ref"), "a task ref")?;
    bytes(&t.title, TITLE_BYTES_MAX, format_args!("{at}.title"), "a title")?;
    bytes(&t.provider, ID_BYTES_MAX, format_args!("{at}.provider"), "a provider name")?;
    // The task object sits 3 deep (document, `tasks`, the task).
    depth(&t.action, 4, format_args!("{at}.action"))?;
    if let Some(run) = t.action.get("run").and_then(Value::as_array) {
        count(run.len(), ARGV_ITEMS_MAX, format_args!("{at}.action.run"), "arguments")?;
        for (i, arg) in run.iter().enumerate() {
            if let Some(s) = arg.as_str() {
                bytes(s, ARG_BYTES_MAX, format_args!("{at}.action.run[{i}]"), "an argument")?;
            }
        }
    }
    if let Some(tool) = t.action.get("tool").and_then(Value::as_str) {
        bytes(tool, ID_BYTES_MAX, format_args!("{at}.action.tool"), "a tool name")?;
    }
    count(t.inputs.len(), INPUTS_MAX, format_args!("{at}.inputs"), "inputs")?;
    for (i, input) in t.inputs.iter().enumerate() {
        bytes(input, PATH_BYTES_MAX, format_args!("{at}.inputs[{i}]"), "an input path")?;
    }
    paths(&t.may_change, MAY_CHANGE_MAX, format_args!("{at}.may_change"), "`may_change` paths")?;
    paths(&t.outputs, OUTPUT_PATTERNS_MAX, format_args!("{at}.outputs"), "`outputs` paths")?;
    network_env_bounds(t.network.as_ref(), &t.env, at)?;
    count(t.depends_on.len(), DEPENDENCIES_MAX, format_args!("{at}.depends_on"), "dependencies")?;
    for (i, d) in t.depends_on.iter().enumerate() {
        bytes(d, ID_BYTES_MAX, format_args!("{at}.depends_on[{i}]"), "a task ref")?;
    }
    count(t.validations.len(), VALIDATIONS_MAX, format_args!("{at}.validations"), "validations")?;
    for (i, v) in t.validations.iter().enumerate() {
        validation_bounds(v, format_args!("{at}.validations[{i}]"))?;
    }
    timeout(t.timeout_seconds, format_args!("{at}.timeout_seconds"))?;
    if let Some(rule) = &t.observe {
        rule_bounds(rule, format_args!("{at}.observe"))?;
    }
    context_bounds(&t.context, format_args!("{at}.context"))
}

fn validation_bounds(v: &Validation, at: impl Display + Copy) -> Result<()> {
    identifier(&v.id, format_args!("{at}.id"), "a validation id")?;
    argv(&v.run, format_args!("{at}.run"))?;
    timeout(v.timeout_seconds, format_args!("{at}.timeout_seconds"))
}

fn context_bounds(context: &BTreeMap<String, ContextSource>, at: impl Display + Copy) -> Result<()> {
    count(context.len(), CONTEXT_MAX, at, "context values")?;
    for (name, source) in context {
        let here = format!("{at}{}", key(name));
        identifier(name, &here, "a context name")?;
        match source {
            ContextSource::Command(run) => argv(run, &here)?,
            ContextSource::Env { env } => bytes(env, ID_BYTES_MAX, format_args!("{here}.env"), "a variable name")?,
        }
    }
    Ok(())
}

fn argv(run: &[String], at: impl Display + Copy) -> Result<()> {
    count(run.len(), ARGV_ITEMS_MAX, at, "arguments")?;
    for (i, arg) in run.iter().enumerate() {
        bytes(arg, ARG_BYTES_MAX, format_args!("{at}[{i}]"), "an argument")?;
    }
    Ok(())
}

fn count(n: usize, max: usize, at: impl Display + Copy, what: impl Display + Copy) -> Result<()> {
    if n > max {
        return Err(Error::new(Code::PlanInvalid, format!("{n} {what}; the limit is {max}")).at(at.to_string()));
    }
    Ok(())
}

fn bytes(s: &str, max: usize, at: impl Display + Copy, what: impl Display + Copy) -> Result<()> {
    if s.len() > max {
        return Err(Error::new(
            Code::PlanInvalid,
            format!("{what} of {} bytes (`{}…`); the limit is {max}", s.len(), head(s)),
        )
        .at(at.to_string()));
    }
    Ok(())
}

fn timeout(seconds: Option<u64>, at: impl Display + Copy) -> Result<()> {
    match seconds {
        Some(s) if s > TIMEOUT_SECONDS_MAX => Err(Error::new(
            Code::PlanInvalid,
            format!("timeout of {s} s; the limit is {TIMEOUT_SECONDS_MAX} s (30 days)"),
        )
        .at(at.to_string())),
        _ => Ok(()),
    }
}

/// Identifiers: bounded, and only `[A-Za-z0-9_.:/-]`, led by a letter or
/// digit. Blank ones are left to the structural checks, which say "empty".
fn identifier(s: &str, at: impl Display + Copy, what: impl Display + Copy) -> Result<()> {
    if s.trim().is_empty() {
        return Ok(());
    }
    bytes(s, ID_BYTES_MAX, at, what)?;
    let bad = match s.chars().next() {
        Some(c) if !c.is_ascii_alphanumeric() => Some(c),
        _ => s.chars().find(|c| !(c.is_ascii_alphanumeric() || "_.:/-".contains(*c))),
    };
    if let Some(bad) = bad {
        return Err(Error::new(
            Code::PlanInvalid,
            format!(
                "{what} `{}` has {}; use letters, digits and `_ . : / -`, starting with a letter or digit",
                head(s),
                if bad.is_ascii_graphic() { format!("`{bad}`") } else { format!("U+{:04X}", bad as u32) }
            ),
        )
        .at(at.to_string()));
    }
    Ok(())
}

/// Containers nested in `v`, which sits `level` deep; the first one past
/// `PLAN_DEPTH_MAX` is named by its path.
fn depth(v: &Value, level: usize, at: impl Display + Copy) -> Result<()> {
    let container = matches!(v, Value::Object(_) | Value::Array(_));
    if container && level > PLAN_DEPTH_MAX {
        return Err(Error::new(Code::PlanInvalid, format!("JSON nested {level} deep; the limit is {PLAN_DEPTH_MAX}"))
            .at(at.to_string()));
    }
    match v {
        Value::Object(m) => m.iter().try_for_each(|(k, v)| depth(v, level + 1, format_args!("{at}{}", key(k)))),
        Value::Array(a) => a.iter().enumerate().try_for_each(|(i, v)| depth(v, level + 1, format_args!("{at}[{i}]"))),
        _ => Ok(()),
    }
}

/// `.name` for a plain key, `["…"]` (JSON-quoted) for any other.
fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        format!(".{k}")
    } else {
        format!("[{}]", serde_json::Value::String(k.to_string()))
    }
}

/// The first few characters, enough to recognise a value in a message.
fn head(s: &str) -> String {
    s.chars().take(32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(tasks: Vec<Value>) -> PlanFile {
        serde_json::from_value(json!({
            "version": 1,
            "goal": {"id": "g", "statement": "s"},
            "providers": {"sh": {"kind": "command"}},
            "tasks": tasks,
        }))
        .unwrap()
    }

    fn t(r: &str) -> Value {
        json!({"ref": r, "provider": "sh", "action": {"run": ["true"]}})
    }

    fn place(p: &PlanFile) -> Option<String> {
        check(p).err().map(|e| {
            assert_eq!(e.code, Code::PlanInvalid, "{e}");
            e.place.unwrap_or_default()
        })
    }

    #[test]
    fn task_count_at_the_limit_passes_one_more_is_refused() {
        let mut p = file(vec![t("a")]);
        p.tasks = vec![p.tasks[0].clone(); TASKS_MAX];
        assert_eq!(place(&p), None);
        p.tasks.push(p.tasks[0].clone());
        assert_eq!(place(&p).as_deref(), Some("$.tasks"));
    }

    #[test]
    fn identifiers_are_bounded_and_plain() {
        assert_eq!(place(&file(vec![t(&"r".repeat(ID_BYTES_MAX))])), None);
        assert_eq!(place(&file(vec![t(&"r".repeat(ID_BYTES_MAX + 1))])).as_deref(), Some("$.tasks[0].ref"));
        for bad in ["a b", "a\u{1b}[2J", "-x", "a\"b", "é"] {
            assert_eq!(place(&file(vec![t(bad)])).as_deref(), Some("$.tasks[0].ref"), "{bad:?}");
        }
        for good in ["T1", "build/lint", "ns:task-2.b_c"] {
            assert_eq!(place(&file(vec![t(good)])), None, "{good:?}");
        }
    }

    #[test]
    fn depth_names_the_first_container_past_the_bound() {
        // The action object is 4 deep; nest objects under `body` to 65.
        let mut body = json!({});
        for _ in 0..(PLAN_DEPTH_MAX - 5) {
            body = json!({ "a": body });
        }
        let mut task = json!({"ref": "T", "provider": "sh", "action": {"body": body.clone()}});
        assert_eq!(place(&file(vec![task.clone()])), None, "64 deep is allowed");
        task["action"]["body"] = json!([body]);
        let want = format!("$.tasks[0].action.body[0]{}", ".a".repeat(PLAN_DEPTH_MAX - 5));
        assert_eq!(place(&file(vec![task])), Some(want));
    }

    #[test]
    fn odd_keys_are_quoted_in_paths() {
        assert_eq!(key("plain_key-1"), ".plain_key-1");
        assert_eq!(key("a.b"), "[\"a.b\"]");
        assert_eq!(key(""), "[\"\"]");
    }
}
