//! The comparisons every field is judged by: what proves a tightening for
//! a set, a flag, an order, a check. Anything none of them proves is a
//! loosening.

use std::collections::BTreeSet;

use super::Change;
use crate::plan::model::{Check, Effect, NetworkSpec, SandboxSpec, Validation};

/// The environment a provider's processes get whatever its plan declares.
pub const DEFAULT_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

fn set<'a>(items: impl IntoIterator<Item = &'a String>) -> BTreeSet<&'a str> {
    items.into_iter().map(String::as_str).collect()
}

/// A list whose entries each widen (write paths, hosts, names): the same
/// set, or fewer, is no wider.
pub fn widening_list(before: &[String], after: &[String], noun: &str) -> Change {
    let (b, a) = (set(before), set(after));
    if b == a {
        return Change::Same;
    }
    let more: Vec<&str> = a.difference(&b).copied().collect();
    match more.is_empty() {
        true => Change::Tightens,
        false => Change::Loosens(format!("{noun} added: {}", more.join(", "))),
    }
}

/// A list whose entries each narrow (protected paths, secrets): dropping
/// one widens.
pub fn narrowing_list(before: &[String], after: &[String], noun: &str) -> Change {
    match widening_list(after, before, noun) {
        Change::Same => Change::Same,
        Change::Tightens => Change::Tightens,
        Change::Loosens(_) => {
            let (b, a) = (set(before), set(after));
            let gone: Vec<&str> = b.difference(&a).copied().collect();
            Change::Loosens(format!("{noun} dropped: {}", gone.join(", ")))
        }
    }
}

/// An allow-list, absent meaning "anything": dropping it, or naming more,
/// widens; one where there was none narrows.
pub fn allow_list(before: Option<&[String]>, after: Option<&[String]>, noun: &str) -> Change {
    match (before, after) {
        (None, None) => Change::Same,
        (None, Some(_)) => Change::Tightens,
        (Some(_), None) => Change::Loosens(format!("the {noun} list is dropped: anyone or anything is allowed")),
        (Some(b), Some(a)) => widening_list(b, a, noun),
    }
}

/// A flag that gates when on (`requires_approval`): turning it off widens.
pub fn gate_flag(before: bool, after: bool, off: &str) -> Change {
    match (before, after) {
        (b, a) if b == a => Change::Same,
        (false, true) => Change::Tightens,
        _ => Change::Loosens(off.to_string()),
    }
}

/// A flag that widens when on (`may_spend`, `idempotent`).
pub fn widening_flag(before: bool, after: bool, on: &str) -> Change {
    gate_flag(!before, !after, on)
}

/// How careful the engine is with a task's work, by its effect: `none`
/// runs again on its own, `local` is judged again by its checkpoint,
/// `external` needs a person for every repeat.
fn care(effect: Effect) -> u8 {
    match effect {
        Effect::None => 0,
        Effect::Local => 1,
        Effect::External => 2,
    }
}

pub fn effect(before: Effect, after: Effect) -> Change {
    match care(after).cmp(&care(before)) {
        std::cmp::Ordering::Equal => Change::Same,
        std::cmp::Ordering::Greater => Change::Tightens,
        std::cmp::Ordering::Less => Change::Loosens(format!(
            "the effect is declared {} where it was {}: its repeats need less of a person",
            after.as_str(),
            before.as_str()
        )),
    }
}

/// A call's cost: more spends the budget sooner (and a paid call needs an
/// approval for every repeat); less is a loosening.
pub fn cost(before: i64, after: i64) -> Change {
    match after.cmp(&before) {
        std::cmp::Ordering::Equal => Change::Same,
        std::cmp::Ordering::Greater => Change::Tightens,
        std::cmp::Ordering::Less if after == 0 => {
            Change::Loosens("the cost is dropped to 0: its repeats need no approval for being paid".into())
        }
        std::cmp::Ordering::Less => Change::Loosens("the cost is lowered: the budget counts less for it".into()),
    }
}

/// A budget's limit: higher widens.
pub fn limit(before: f64, after: f64) -> Change {
    if after > before {
        Change::Loosens(format!("raised above the limit in force ({before} -> {after})"))
    } else if after < before {
        Change::Tightens
    } else {
        Change::Same
    }
}

/// A task's validations, by id: every one kept as it was, others added,
/// is no looser; one dropped or changed is.
pub fn validations(before: &[Validation], after: &[Validation]) -> Change {
    let (mut dropped, mut changed) = (Vec::new(), Vec::new());
    for v in before {
        match after.iter().find(|a| a.id == v.id) {
            None => dropped.push(v.id.as_str()),
            Some(a) if a != v => changed.push(v.id.as_str()),
            Some(_) => {}
        }
    }
    let mut words = Vec::new();
    if !dropped.is_empty() {
        words.push(format!("validations dropped: {}", dropped.join(", ")));
    }
    if !changed.is_empty() {
        words.push(format!("validations changed: {}", changed.join(", ")));
    }
    match (words.is_empty(), before.len() == after.len()) {
        (false, _) => Change::Loosens(words.join("; ")),
        (true, true) => Change::Same,
        (true, false) => Change::Tightens,
    }
}

/// A check that judges (an acceptance criterion's, a constraint's): one
/// added narrows; dropped or changed in any way widens.
pub fn check(before: Option<&Check>, after: Option<&Check>, whose: &str) -> Change {
    match (before, after) {
        (b, a) if b == a => Change::Same,
        (None, _) => Change::Tightens,
        (Some(_), None) => Change::Loosens(format!("{whose}: its check is dropped")),
        (Some(_), Some(a)) => Change::Loosens(format!("{whose}: its check is changed (now `{}`)", a.run.join(" "))),
    }
}

/// The ports and hosts a process may connect to (absent: none).
pub fn network(before: Option<&NetworkSpec>, after: Option<&NetworkSpec>) -> Change {
    let connect = |n: Option<&NetworkSpec>| n.map(|n| n.connect.clone()).unwrap_or_default();
    widening_list(&connect(before), &connect(after), "network access")
}

/// A provider's environment: the default set and the names it declares.
pub fn provider_env(before: &[String], after: &[String]) -> Change {
    let with_default = |names: &[String]| {
        let mut all: Vec<String> = DEFAULT_ENV.iter().map(|s| s.to_string()).collect();
        all.extend(names.iter().cloned());
        all
    };
    widening_list(&with_default(before), &with_default(after), "variables")
}

/// Where a provider's processes may write (absent: the workspace and the
/// temporary folder; `"none"`: anywhere its user may).
pub fn sandbox(before: Option<&SandboxSpec>, after: Option<&SandboxSpec>) -> Change {
    let writes = |s: Option<&SandboxSpec>| match s {
        Some(SandboxSpec::Confined(w)) => Some(w.write.clone()),
        Some(SandboxSpec::Off(_)) => None,
        None => Some(Vec::new()),
    };
    match (writes(before), writes(after)) {
        (None, None) => Change::Same,
        (None, Some(_)) => Change::Tightens,
        (Some(_), None) => Change::Loosens("the sandbox is turned off: its processes run unconfined".into()),
        (Some(b), Some(a)) => widening_list(&b, &a, "write paths"),
    }
}

/// A field whose change the engine cannot weigh: the same, or a loosening.
pub fn same_or<T: PartialEq>(before: &T, after: &T, what: &str) -> Change {
    match before == after {
        true => Change::Same,
        false => Change::Loosens(what.to_string()),
    }
}

/// A field whose removal narrows (a read-back rule, a trusted CA file):
/// dropped is no looser, added or changed is.
pub fn removable<T: PartialEq>(before: Option<&T>, after: Option<&T>, what: &str) -> Change {
    match (before, after) {
        (b, a) if b == a => Change::Same,
        (Some(_), None) => Change::Tightens,
        _ => Change::Loosens(what.to_string()),
    }
}
