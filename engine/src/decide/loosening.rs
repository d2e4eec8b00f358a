//! What a new revision loosens, by default deny. A revision's authority —
//! what its providers may reach and its tasks may do, what stops a call
//! for a person and what judges the work — is compared field by field,
//! old -> new, per provider, per task and for the goal. Only a change the
//! engine can prove tightens passes (a budget lowered, a validation or a
//! check added, an approval added, a network rule or a write path
//! removed, a cost raised); every other change to those fields is a
//! loosening, listed by field and task, which a person approves
//! (`engine revise --approve-loosening`, from someone in
//! `people.revise`), never a plan file alone. Pure: two plan files, the
//! budgets in force and what the ledger says of the dropped tasks in; a
//! list out.
//!
//! Default deny is kept by the compiler: each comparison destructures its
//! type whole (`fields`, `providers`, `tasks`, `goal`), so a field added
//! to the plan does not build until it is named either as authority, with
//! the rule that proves a tightening, or as none of it (a title, an
//! action, inputs, dependencies, a timeout, context).
//!
//! What the old plan had is compared with what the new one has; a task,
//! provider or list new in the plan with the default it would otherwise
//! have; a task dropped before its work was done by the gates it carried
//! (its work could come back under another ref without them).

mod fields;
mod goal;
mod providers;
mod tasks;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::raise::Raise;
use crate::plan::model::Budgets;
use crate::plan::PlanFile;

pub use fields::DEFAULT_ENV;

/// The field a loosening widens (its name in the plan where it has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A task runs on another provider.
    Provider,
    /// What a provider is: its kind, program, URL, endpoint, protocol,
    /// authorization or trusted certificates.
    Target,
    Sandbox,
    Network,
    Env,
    Effect,
    Cost,
    MaySpend,
    RequiresApproval,
    Idempotent,
    Validations,
    /// A goal's acceptance check.
    Acceptance,
    Constraint,
    ProtectedPath,
    Observe,
    Outputs,
    MayChange,
    People,
    ToolAllowList,
    Budget,
    Secrets,
    /// A task dropped before its work was done, with the gates it carried.
    TaskDropped,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Provider => "provider",
            Kind::Target => "target",
            Kind::Sandbox => "sandbox",
            Kind::Network => "network",
            Kind::Env => "env",
            Kind::Effect => "effect",
            Kind::Cost => "cost",
            Kind::MaySpend => "may_spend",
            Kind::RequiresApproval => "requires_approval",
            Kind::Idempotent => "idempotent",
            Kind::Validations => "validations",
            Kind::Acceptance => "acceptance",
            Kind::Constraint => "constraint",
            Kind::ProtectedPath => "protected_path",
            Kind::Observe => "observe",
            Kind::Outputs => "outputs",
            Kind::MayChange => "may_change",
            Kind::People => "people",
            Kind::ToolAllowList => "tool_allow_list",
            Kind::Budget => "budget",
            Kind::Secrets => "secrets",
            Kind::TaskDropped => "task_dropped",
        }
    }
}

/// One way the new revision loosens the one in force.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Loosening {
    pub kind: Kind,
    /// Where, as a JSON path (of the new plan; of the old one for what was
    /// dropped); tasks and acceptance criteria by their ref or id.
    pub at: String,
    /// The task whose field it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The provider whose field it is, and the new plan's tasks on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// The value in force, and the new one (`null`: absent).
    pub before: Value,
    pub after: Value,
    /// What widens, in words.
    pub what: String,
}

impl Loosening {
    /// The diff line: `$.tasks[pay].cost (cost): the cost is lowered: 1.0 -> 0.0`.
    pub fn line(&self) -> String {
        let on = match (self.provider.as_deref(), self.tasks.is_empty()) {
            (Some(p), false) => format!(" (provider {p}, its tasks: {})", self.tasks.join(", ")),
            _ => String::new(),
        };
        format!("{} ({}): {}: {} -> {}{on}", self.at, self.kind.as_str(), self.what, self.before, self.after)
    }
}

/// What the ledger says of a task the new plan drops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// It completed in the revision in force (succeeded or reused): its
    /// gates did their work.
    pub done: bool,
    /// A call of it was (or may have been) sent: a repeat of its work
    /// needs what a repeat needs.
    pub sent: bool,
}

/// The revision in force, as the comparison needs it.
pub struct Before<'a> {
    pub file: &'a PlanFile,
    /// Its budgets with a person's recorded raises.
    pub in_force: &'a Budgets,
    /// Its tasks the new plan drops, by ref (absent: never started).
    pub dropped: &'a BTreeMap<String, Standing>,
}

/// Everything `after` loosens against `before`; `raised`: the raises asked
/// with this revision, a person's explicit act already (a budget the plan
/// sets no higher than a raise asked now is not listed).
pub fn loosenings(before: &Before, after: &PlanFile, raised: &[Raise]) -> Vec<Loosening> {
    let mut out = Vec::new();
    providers::compare(&mut out, before.file, after);
    tasks::compare(&mut out, before.file, after, before.dropped);
    goal::compare(&mut out, before, after, raised);
    out
}

/// The outcome of comparing one field.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Same,
    /// Provably no wider: nothing to approve.
    Tightens,
    /// Anything else, in words.
    Loosens(String),
}

/// Where a loosening is, and whose.
#[derive(Debug, Clone, Default)]
struct Place {
    at: String,
    task: Option<String>,
    provider: Option<String>,
    tasks: Vec<String>,
}

impl Place {
    fn of_task(task_ref: &str, field: &str) -> Place {
        Place { at: format!("$.tasks[{task_ref}].{field}"), task: Some(task_ref.to_string()), ..Place::default() }
    }

    fn at(at: String) -> Place {
        Place { at, ..Place::default() }
    }
}

/// Record `change` as a loosening of `kind` at `place`, with the two values.
fn push(out: &mut Vec<Loosening>, kind: Kind, place: Place, values: (Value, Value), change: Change) {
    if let Change::Loosens(what) = change {
        let Place { at, task, provider, tasks } = place;
        out.push(Loosening { kind, at, task, provider, tasks, before: values.0, after: values.1, what });
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
