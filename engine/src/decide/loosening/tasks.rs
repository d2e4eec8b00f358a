//! A task's authority, old -> new (by ref): its provider, its effect, its
//! cost, what stops its calls for a person (`requires_approval`), what
//! lets them go again on their own (`idempotent`) or spend
//! (`may_spend`), what judges its work (`validations`), how its effects
//! are read back (`observe`), what it may write (`outputs`) or change
//! (`may_change`), and what its processes reach (`network`, `env`). Its
//! title, action, inputs, dependencies, timeout and context are none of
//! it.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use super::fields::{self, gate_flag, widening_flag, widening_list};
use super::{push, Change, Kind, Loosening, Place, Standing};
use crate::plan::model::{Effect, ProviderSpec};
use crate::plan::{PlanFile, Task};

/// A task's authority: every field of `Task` is named (no `..`), so a
/// new field does not build until it is placed here or among the rest.
struct Authority<'a> {
    provider: &'a str,
    effect: Effect,
    cost_micros: i64,
    may_spend: bool,
    requires_approval: bool,
    idempotent: bool,
    validations: &'a [crate::plan::model::Validation],
    observe: Option<&'a Value>,
    may_change: &'a [String],
    outputs: &'a [String],
    network: Option<&'a crate::plan::model::NetworkSpec>,
    env: &'a [String],
}

fn authority(task: &Task) -> Authority<'_> {
    let Task {
        // What it is called, asked, reads, waits for, how long it may
        // take and what its checkpoint records: no authority.
        task_ref: _,
        title: _,
        action: _,
        inputs: _,
        depends_on: _,
        timeout_seconds: _,
        context: _,
        provider,
        effect,
        cost: _,
        may_spend,
        requires_approval,
        idempotent,
        validations,
        observe,
        may_change,
        outputs,
        network,
        env,
    } = task;
    Authority {
        provider,
        effect: *effect,
        cost_micros: task.cost().micros(),
        may_spend: *may_spend,
        requires_approval: *requires_approval,
        idempotent: *idempotent,
        validations,
        observe: observe.as_deref(),
        may_change,
        outputs,
        network: network.as_ref(),
        env,
    }
}

/// Every task of `after` against its ref in `before`; a task new in the
/// plan that makes exactly the request of one `before` had and `after`
/// drops (same provider, same action) against that one, as a rename; the
/// other tasks `before` had and `after` drops, by what the ledger says of
/// them.
pub fn compare(out: &mut Vec<Loosening>, before: &PlanFile, after: &PlanFile, dropped: &BTreeMap<String, Standing>) {
    let then: HashMap<&str, &Task> = before.tasks.iter().map(|t| (t.task_ref.as_str(), t)).collect();
    let now: HashMap<&str, &Task> = after.tasks.iter().map(|t| (t.task_ref.as_str(), t)).collect();
    let gone: Vec<&Task> = before.tasks.iter().filter(|t| !now.contains_key(t.task_ref.as_str())).collect();
    let mut renamed: Vec<&str> = Vec::new();
    for task in &after.tasks {
        let spec = after.providers.get(&task.provider);
        let old = then.get(task.task_ref.as_str()).copied().or_else(|| {
            let same = gone.iter().find(|g| {
                g.provider == task.provider && g.action == task.action && !renamed.contains(&g.task_ref.as_str())
            })?;
            renamed.push(&same.task_ref);
            Some(*same)
        });
        match old {
            Some(old) => kept(out, &task.task_ref, (&authority(old), &authority(task)), spec),
            None => new(out, &task.task_ref, &authority(task), spec),
        }
    }
    for task in gone.into_iter().filter(|t| !renamed.contains(&t.task_ref.as_str())) {
        let standing = dropped.get(&task.task_ref).copied().unwrap_or_default();
        self::gone(out, task, standing);
    }
}

fn unconfined(spec: Option<&ProviderSpec>) -> bool {
    spec.is_some_and(ProviderSpec::unconfined)
}

/// A task in both revisions, field by field.
fn kept(out: &mut Vec<Loosening>, r: &str, (b, a): (&Authority, &Authority), spec: Option<&ProviderSpec>) {
    let place = |field: &str| Place::of_task(r, field);
    let moved = match b.provider == a.provider {
        true => Change::Same,
        false if unconfined(spec) => Change::Loosens(format!(
            "the task moves from provider {} to {}, which runs unconfined (\"sandbox\": \"none\")",
            b.provider, a.provider
        )),
        false => Change::Loosens(format!("the task moves from provider {} to {}", b.provider, a.provider)),
    };
    push(out, Kind::Provider, place("provider"), (json!(b.provider), json!(a.provider)), moved);
    let effect = fields::effect(b.effect, a.effect);
    push(out, Kind::Effect, place("effect"), (json!(b.effect), json!(a.effect)), effect);
    let units = |m: i64| json!(crate::cost::Cost::from_micros(m).units());
    let cost = fields::cost(b.cost_micros, a.cost_micros);
    push(out, Kind::Cost, place("cost"), (units(b.cost_micros), units(a.cost_micros)), cost);
    let approval =
        gate_flag(b.requires_approval, a.requires_approval, "its calls no longer wait for a person's approval");
    let values = (json!(b.requires_approval), json!(a.requires_approval));
    push(out, Kind::RequiresApproval, place("requires_approval"), values, approval);
    let idem = widening_flag(b.idempotent, a.idempotent, "its work may be sent again without a person");
    push(out, Kind::Idempotent, place("idempotent"), (json!(b.idempotent), json!(a.idempotent)), idem);
    let checks = fields::validations(b.validations, a.validations);
    push(out, Kind::Validations, place("validations"), (json!(b.validations), json!(a.validations)), checks);
    let observe = observe(b.observe, a.observe, spec.is_some_and(ProviderSpec::reads_back));
    push(out, Kind::Observe, place("observe"), (json!(b.observe), json!(a.observe)), observe);
    let outputs = widening_list(b.outputs, a.outputs, "paths it may write");
    push(out, Kind::Outputs, place("outputs"), (json!(b.outputs), json!(a.outputs)), outputs);
    reach(out, r, Some(b), a);
}

/// What a task's own fields widen beyond its provider's, against `b`
/// (`None`: a task new in the plan, against the defaults).
fn reach(out: &mut Vec<Loosening>, r: &str, b: Option<&Authority>, a: &Authority) {
    let place = |field: &str| Place::of_task(r, field);
    // Either way: `may_spend` lets the agent spend, and it also makes the
    // gate keep room in the budget for what it may spend; dropped, a call
    // the budget stopped may go.
    let spend = match b {
        Some(b) if b.may_spend && !a.may_spend => Change::Loosens(
            "the task no longer declares spending: its calls no longer need room in the budget for it".into(),
        ),
        b => widening_flag(b.is_some_and(|b| b.may_spend), a.may_spend, "the task may make paid calls"),
    };
    push(out, Kind::MaySpend, place("may_spend"), (json!(b.map(|b| b.may_spend)), json!(a.may_spend)), spend);
    let may_change = widening_list(b.map_or(&[], |b| b.may_change), a.may_change, "protected paths it may change");
    let values = (json!(b.map(|b| b.may_change)), json!(a.may_change));
    push(out, Kind::MayChange, place("may_change"), values, may_change);
    let network = fields::network(b.and_then(|b| b.network), a.network);
    push(out, Kind::Network, place("network"), (json!(b.and_then(|b| b.network)), json!(a.network)), network);
    let env = widening_list(b.map_or(&[], |b| b.env), a.env, "variables");
    push(out, Kind::Env, place("env"), (json!(b.map(|b| b.env)), json!(a.env)), env);
}

/// A task's own read-back rule: dropping it narrows only where no
/// default of its provider takes its place.
fn observe(before: Option<&Value>, after: Option<&Value>, provider_reads_back: bool) -> Change {
    match (before, after) {
        (b, a) if b == a => Change::Same,
        (Some(_), None) if !provider_reads_back => Change::Tightens,
        (Some(_), None) => {
            Change::Loosens("its own read-back is dropped: its provider's default decides instead".into())
        }
        _ => Change::Loosens(
            "its read-back changed: it decides, without a person, what became of a call whose answer was lost".into(),
        ),
    }
}

/// A task new in the plan: what it reaches beyond its provider, and
/// whether its provider runs unconfined.
fn new(out: &mut Vec<Loosening>, r: &str, a: &Authority, spec: Option<&ProviderSpec>) {
    reach(out, r, None, a);
    if unconfined(spec) {
        let what = format!("a new task runs unconfined: its provider {} has \"sandbox\": \"none\"", a.provider);
        push(
            out,
            Kind::Sandbox,
            Place::of_task(r, "provider"),
            (Value::Null, json!(a.provider)),
            Change::Loosens(what),
        );
    }
}

/// A task dropped before its work was done: the gates it carried no
/// longer stand in front of that work, which could come back under
/// another ref without them.
fn gone(out: &mut Vec<Loosening>, task: &Task, standing: Standing) {
    if standing.done {
        return;
    }
    let mut gates = Vec::new();
    if task.requires_approval {
        gates.push("a person's approval of every call".to_string());
    }
    if !task.cost().is_zero() {
        gates.push(format!("a cost of {}", task.cost()));
    }
    if !task.validations.is_empty() {
        let ids: Vec<&str> = task.validations.iter().map(|v| v.id.as_str()).collect();
        gates.push(format!("validations {}", ids.join(", ")));
    }
    if task.effect == Effect::External && standing.sent {
        gates.push("an approval for a repeat of external work already sent".to_string());
    }
    if gates.is_empty() {
        return;
    }
    let what = format!("the task is dropped before its work was done, and with it {}", gates.join(", "));
    let place =
        Place { at: format!("$.tasks[{}]", task.task_ref), task: Some(task.task_ref.clone()), ..Place::default() };
    push(out, Kind::TaskDropped, place, (json!(task.task_ref), Value::Null), Change::Loosens(what));
}
