//! What a new revision loosens: every way it lets providers do more, or
//! checks less, than the revision in force. A loosening is a person's
//! decision (`engine revise --approve-loosening`, from someone in
//! `people.revise`), never a plan file's: a provider that rewrites the
//! plan file gets its gate back only through a person who read this diff.
//! Pure: two plan files (and the budgets in force) in, a list out.
//!
//! Compared, each against the revision in force (a provider, task or list
//! new in the plan against the default it would otherwise have):
//! a provider's sandbox (off, or more write paths), its network and hosts,
//! its environment; a task's network, environment, `may_spend` and
//! `may_change`; the budgets (above the limit in force, `max_revisions`
//! aside: only `--raise` lifts it); the goal's constraints (one dropped, a
//! protected path dropped, a check dropped or changed); the `people` lists
//! (a name added, a list dropped); an MCP provider's `tools` allow-list (a
//! name added, the list dropped). `network`, `env` and `may_spend` are read
//! from the plan's JSON, so the comparison holds whatever their typed form.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{json, Value};

use super::budget::BudgetName;
use super::raise::{self, Raise};
use crate::plan::model::{Budgets, Constraint, People, ProviderSpec, SandboxSpec};
use crate::plan::{PlanFile, Task};

/// The environment a provider gets when its plan declares none.
pub const DEFAULT_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// What a loosening widens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Sandbox,
    Network,
    Env,
    Budget,
    Constraint,
    ProtectedPath,
    MayChange,
    MaySpend,
    People,
    ToolAllowList,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Sandbox => "sandbox",
            Kind::Network => "network",
            Kind::Env => "env",
            Kind::Budget => "budget",
            Kind::Constraint => "constraint",
            Kind::ProtectedPath => "protected_path",
            Kind::MayChange => "may_change",
            Kind::MaySpend => "may_spend",
            Kind::People => "people",
            Kind::ToolAllowList => "tool_allow_list",
        }
    }
}

/// One way the new revision loosens the one in force.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Loosening {
    pub kind: Kind,
    /// Where, as a JSON path (of the new plan; of the old one for what was
    /// dropped).
    pub at: String,
    /// The value in force, and the new one (`null`: absent).
    pub before: Value,
    pub after: Value,
    /// What widens, in words.
    pub what: String,
}

impl Loosening {
    /// The diff line: `- $.providers.sh.sandbox (sandbox): off: {…} -> "none"`.
    pub fn line(&self) -> String {
        format!("{} ({}): {}: {} -> {}", self.at, self.kind.as_str(), self.what, self.before, self.after)
    }
}

/// Everything `after` loosens against `before`, whose budgets in force
/// (with a person's recorded raises) are `in_force`; `raised`: the raises
/// asked with this revision, which are a person's explicit act already (a
/// budget the plan sets no higher than a raise asked now is not listed).
pub fn loosenings(before: &PlanFile, in_force: &Budgets, after: &PlanFile, raised: &[Raise]) -> Vec<Loosening> {
    let mut out = Vec::new();
    for (name, spec) in &after.providers {
        providers(&mut out, name, before.providers.get(name), spec);
    }
    let then: HashMap<&str, &Task> = before.tasks.iter().map(|t| (t.task_ref.as_str(), t)).collect();
    for task in &after.tasks {
        tasks(&mut out, then.get(task.task_ref.as_str()).copied(), task);
    }
    budgets(&mut out, in_force, &after.budgets, raised);
    if let (Some(b), Some(a)) = (&before.goal, &after.goal) {
        constraints(&mut out, &b.constraints, &a.constraints);
    }
    people(&mut out, before.people.as_ref(), after.people.as_ref());
    out
}

fn push(out: &mut Vec<Loosening>, kind: Kind, at: String, (before, after): (Value, Value), what: String) {
    out.push(Loosening { kind, at, before, after, what });
}

/// `items` of `after` that `before` does not hold, joined for a message.
fn added(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Vec<String> {
    after.difference(before).cloned().collect()
}

fn strings(v: Option<&Value>) -> BTreeSet<String> {
    match v {
        Some(Value::Array(items)) => {
            items.iter().map(|i| i.as_str().map(str::to_string).unwrap_or(i.to_string())).collect()
        }
        _ => BTreeSet::new(),
    }
}

/// A field of a provider or task as its JSON (absent: `null`).
fn field(whole: &Value, key: &str) -> Value {
    whole.get(key).cloned().unwrap_or(Value::Null)
}

fn providers(out: &mut Vec<Loosening>, name: &str, before: Option<&ProviderSpec>, after: &ProviderSpec) {
    let at = |key: &str| format!("$.providers.{name}.{key}");
    sandbox(out, at("sandbox"), before.map(ProviderSpec::sandbox).unwrap_or(None), after.sandbox());
    let (b, a) = (before.map(|p| serde_json::to_value(p).unwrap_or(Value::Null)), serde_json::to_value(after));
    let (b, a) = (b.unwrap_or(Value::Null), a.unwrap_or(Value::Null));
    network(out, at("network"), &field(&b, "network"), &field(&a, "network"));
    list_widened(out, (Kind::Network, at("hosts"), "hosts added"), &field(&b, "hosts"), &field(&a, "hosts"));
    env(out, at("env"), &field(&b, "env"), &field(&a, "env"), true);
    if let ProviderSpec::Mcp { tools: after_tools, .. } = after {
        let before_tools = match before {
            Some(ProviderSpec::Mcp { tools, .. }) => tools.as_ref(),
            // A new MCP provider widens no list that was in force.
            _ => return,
        };
        allow_list(out, (Kind::ToolAllowList, at("tools"), "tools"), before_tools, after_tools.as_ref());
    }
}

fn sandbox(out: &mut Vec<Loosening>, at: String, before: Option<&SandboxSpec>, after: Option<&SandboxSpec>) {
    let off = |s: Option<&SandboxSpec>| matches!(s, Some(SandboxSpec::Off(_)));
    let writes = |s: Option<&SandboxSpec>| match s {
        Some(SandboxSpec::Confined(w)) => w.write.iter().cloned().collect(),
        _ => BTreeSet::new(),
    };
    let values = (json!(before), json!(after));
    if off(after) && !off(before) {
        push(out, Kind::Sandbox, at, values, "the sandbox is turned off".into());
    } else if !off(before) {
        let more = added(&writes(before), &writes(after));
        if !more.is_empty() {
            push(out, Kind::Sandbox, at, values, format!("write paths added: {}", more.join(", ")));
        }
    }
}

/// `network`: `{"connect": [...]}` (absent: no network). A form this
/// comparison does not know is a loosening whenever it changes.
fn network(out: &mut Vec<Loosening>, at: String, before: &Value, after: &Value) {
    if before == after || after.is_null() {
        return;
    }
    let connect = |v: &Value| match v {
        Value::Null => Some(BTreeSet::new()),
        Value::Object(o) if o.keys().all(|k| k == "connect") => Some(strings(o.get("connect"))),
        _ => None,
    };
    let what = match (connect(before), connect(after)) {
        (Some(b), Some(a)) => {
            let more = added(&b, &a);
            if more.is_empty() {
                return;
            }
            format!("network access added: {}", more.join(", "))
        }
        _ => "network access changed".to_string(),
    };
    push(out, Kind::Network, at, (before.clone(), after.clone()), what);
}

/// `env`: the names a provider (or task) is given; absent: the default set
/// for a provider (`DEFAULT_ENV`), none beyond its provider's for a task.
fn env(out: &mut Vec<Loosening>, at: String, before: &Value, after: &Value, provider: bool) {
    if after.is_null() || before == after {
        return;
    }
    let names = |v: &Value| match v {
        Value::Null if provider => DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
        v => strings(Some(v)),
    };
    let more = added(&names(before), &names(after));
    if !more.is_empty() || !after.is_array() {
        let what = if more.is_empty() {
            "environment changed".to_string()
        } else {
            format!("variables added: {}", more.join(", "))
        };
        push(out, Kind::Env, at, (before.clone(), after.clone()), what);
    }
}

/// A list whose new entries widen (absent: empty).
fn list_widened(out: &mut Vec<Loosening>, (kind, at, what): (Kind, String, &str), before: &Value, after: &Value) {
    let more = added(&strings(Some(before)), &strings(Some(after)));
    if !more.is_empty() {
        push(out, kind, at, (before.clone(), after.clone()), format!("{what}: {}", more.join(", ")));
    }
}

/// An allow-list (absent: anything): dropping it, or naming more, widens.
fn allow_list(
    out: &mut Vec<Loosening>,
    (kind, at, what): (Kind, String, &str),
    before: Option<&Vec<String>>,
    after: Option<&Vec<String>>,
) {
    let Some(before) = before else { return };
    let values = (json!(before), json!(after));
    match after {
        None => push(out, kind, at, values, format!("the {what} list is dropped: anyone or anything is allowed")),
        Some(after) => {
            let (b, a) = (before.iter().cloned().collect(), after.iter().cloned().collect());
            let more = added(&b, &a);
            if !more.is_empty() {
                push(out, kind, at, values, format!("{what} added: {}", more.join(", ")));
            }
        }
    }
}

fn tasks(out: &mut Vec<Loosening>, before: Option<&Task>, after: &Task) {
    let at = |key: &str| format!("$.tasks[{}].{key}", after.task_ref);
    let (b, a) = (before.map(|t| serde_json::to_value(t).unwrap_or(Value::Null)), serde_json::to_value(after));
    let (b, a) = (b.unwrap_or(Value::Null), a.unwrap_or(Value::Null));
    network(out, at("network"), &field(&b, "network"), &field(&a, "network"));
    env(out, at("env"), &field(&b, "env"), &field(&a, "env"), false);
    may_spend(out, at("may_spend"), &field(&b, "may_spend"), &field(&a, "may_spend"));
    let may_change = |t: Option<&Task>| json!(t.map(|t| t.may_change.clone()).unwrap_or_default());
    let what = (Kind::MayChange, at("may_change"), "protected paths the task may change");
    list_widened(out, what, &may_change(before), &may_change(Some(after)));
}

fn may_spend(out: &mut Vec<Loosening>, at: String, before: &Value, after: &Value) {
    if *after == Value::Bool(true) && *before != Value::Bool(true) {
        push(out, Kind::MaySpend, at, (before.clone(), after.clone()), "the task may make paid calls".into());
    }
}

fn budgets(out: &mut Vec<Loosening>, in_force: &Budgets, after: &Budgets, raised: &[Raise]) {
    for budget in BudgetName::ALL {
        // A plan never lifts its own `max_revisions` (`budgets::in_force`).
        if budget == BudgetName::MaxRevisions {
            continue;
        }
        let (from, to) = (raise::limit_of(in_force, budget), raise::limit_of(after, budget));
        let covered = raised.iter().any(|r| r.budget == budget && r.to >= to);
        if to > from && !covered {
            let what = format!("raised above the limit in force ({from} -> {to})");
            push(out, Kind::Budget, format!("$.budgets.{budget}"), (json!(from), json!(to)), what);
        }
    }
}

fn constraints(out: &mut Vec<Loosening>, before: &[Constraint], after: &[Constraint]) {
    for (i, c) in before.iter().enumerate() {
        let at = format!("$.goal.constraints[{i}]");
        match c {
            Constraint::Statement(s) => {
                if !after.iter().any(|a| matches!(a, Constraint::Statement(t) if t == s)) {
                    push(out, Kind::Constraint, at, (json!(s), Value::Null), "a constraint is dropped".into());
                }
            }
            Constraint::Checked(c) => {
                let Some(now) = after.iter().filter_map(Constraint::checked).find(|a| a.id == c.id) else {
                    let what = format!("constraint {} is dropped", c.id);
                    push(out, Kind::Constraint, at, (json!(c), Value::Null), what);
                    continue;
                };
                let kept: BTreeSet<String> = now.protect.iter().cloned().collect();
                let dropped: Vec<String> = c.protect.iter().filter(|g| !kept.contains(*g)).cloned().collect();
                if !dropped.is_empty() {
                    let what = format!("constraint {}: protected paths dropped: {}", c.id, dropped.join(", "));
                    push(
                        out,
                        Kind::ProtectedPath,
                        format!("{at}.protect"),
                        (json!(c.protect), json!(now.protect)),
                        what,
                    );
                }
                if c.check.is_some() && c.check != now.check {
                    let what = format!(
                        "constraint {}: its check is {}",
                        c.id,
                        if now.check.is_none() { "dropped" } else { "changed" }
                    );
                    push(out, Kind::Constraint, format!("{at}.check"), (json!(c.check), json!(now.check)), what);
                }
            }
        }
    }
}

fn people(out: &mut Vec<Loosening>, before: Option<&People>, after: Option<&People>) {
    let empty = People::default();
    let now = after.unwrap_or(&empty).lists();
    for (act, list) in before.unwrap_or(&empty).lists() {
        let next = now.iter().find(|(k, _)| *k == act).map(|(_, l)| l.to_vec());
        let what = format!("people who may {act}");
        allow_list(out, (Kind::People, format!("$.people.{act}"), &what), Some(&list.to_vec()), next.as_ref());
    }
}

#[cfg(test)]
mod tests;
