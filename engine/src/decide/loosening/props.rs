//! The loosening rule against the engine's own decisions, over random
//! old/new plan pairs: whenever some call would need a person under the
//! old plan — its gate stops it for an approval or a budget
//! (`decide::gate`), its lost answer waits on a person's settlement
//! (`decide::in_doubt`), it runs confined — but not under the new one,
//! the new plan is a loosening, named by that task or by a budget. And a
//! plan changed only in ways that tighten is no loosening at all.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{loosenings, Before, Kind, Loosening};
use crate::cost::Cost;
use crate::decide::budget::Usage;
use crate::decide::gate::{self, ApprovalFacts, Decision, Facts};
use crate::decide::in_doubt::{self, Observed, Resolution, Situation};
use crate::ids::{RequestDigest, Revision};
use crate::plan::model::Budgets;
use crate::plan::{PlanFile, Task};

/// One task, as the generator varies it.
#[derive(Debug, Clone)]
struct TaskShape {
    /// 0: `sh` (confined), 1: `raw` (`"sandbox": "none"`), 2: `api` (HTTP).
    provider: u8,
    /// 0 none, 1 local, 2 external.
    effect: u8,
    cost: u8,
    requires_approval: bool,
    idempotent: bool,
    may_spend: bool,
    /// Which of two validations it has.
    validations: u8,
    /// Its own read-back rule (HTTP tasks only).
    observe: bool,
}

#[derive(Debug, Clone)]
struct PlanShape {
    tasks: [Option<TaskShape>; 3],
    max_cost: u8,
    max_calls: u8,
    max_attempts: u8,
    deadline: u8,
    /// `api`'s default read-back.
    api_observe: bool,
}

fn task_shape() -> impl Strategy<Value = TaskShape> {
    (0u8..3, 0u8..3, 0u8..3, any::<bool>(), any::<bool>(), any::<bool>(), 0u8..4, any::<bool>()).prop_map(
        |(provider, effect, cost, requires_approval, idempotent, may_spend, validations, observe)| TaskShape {
            provider,
            effect,
            cost,
            requires_approval,
            idempotent,
            may_spend,
            validations,
            observe,
        },
    )
}

fn plan_shape() -> impl Strategy<Value = PlanShape> {
    (
        [
            proptest::option::weighted(0.85, task_shape()),
            proptest::option::weighted(0.85, task_shape()),
            proptest::option::weighted(0.85, task_shape()),
        ],
        0u8..5,
        1u8..5,
        1u8..4,
        1u8..4,
        any::<bool>(),
    )
        .prop_map(|(tasks, max_cost, max_calls, max_attempts, deadline, api_observe)| PlanShape {
            tasks,
            max_cost,
            max_calls,
            max_attempts,
            deadline,
            api_observe,
        })
}

fn task_json(i: usize, t: &TaskShape) -> Value {
    let provider = ["sh", "raw", "api"][t.provider as usize];
    let action = match t.provider {
        2 => json!({"body": {"n": i}}),
        _ => json!({"run": ["true"]}),
    };
    let validations: Vec<Value> = [(1, "V1", "true"), (2, "V2", "test")]
        .iter()
        .filter(|(bit, _, _)| t.validations & bit != 0)
        .map(|(_, id, run)| json!({"id": id, "run": [run]}))
        .collect();
    let effect = ["none", "local", "external"][t.effect as usize];
    let mut task = json!({"ref": format!("T{i}"), "title": "t", "provider": provider, "action": action,
        "effect": effect, "cost": t.cost,
        "requires_approval": t.requires_approval, "idempotent": t.idempotent, "may_spend": t.may_spend,
        "validations": validations});
    if t.observe && t.provider == 2 {
        task["observe"] = json!({"url": "http://127.0.0.1:9/ops/{operation_id}", "present_if": {"status": [200]}});
    }
    task
}

fn build(s: &PlanShape) -> PlanFile {
    let tasks: Vec<Value> =
        s.tasks.iter().enumerate().filter_map(|(i, t)| t.as_ref().map(|t| task_json(i, t))).collect();
    let mut api = json!({"kind": "http", "endpoint": "http://127.0.0.1:9/pay"});
    if s.api_observe {
        api["observe"] = json!("http://127.0.0.1:9/ops/{operation_id}");
    }
    let plan = json!({"version": 1, "goal": {"id": "g", "statement": "s"},
        "budgets": {"max_cost": s.max_cost, "max_provider_calls": s.max_calls,
                    "max_attempts_per_task": s.max_attempts, "deadline_seconds": s.deadline},
        "providers": {"sh": {"kind": "command"}, "raw": {"kind": "command", "sandbox": "none"}, "api": api},
        "tasks": tasks});
    serde_json::from_value(plan).expect("a generated plan parses")
}

/// One situation a call may be in.
#[derive(Debug, Clone, Copy)]
struct Situation2 {
    attempts: u64,
    calls: u64,
    cost_units: u8,
    elapsed: u64,
    asked_repeat: bool,
    prior_dispatch: bool,
}

fn situations() -> Vec<Situation2> {
    let mut out = Vec::new();
    for attempts in 0..4 {
        for calls in 0..5 {
            for cost_units in 0..5 {
                for elapsed in [0, 2, 4] {
                    for (asked_repeat, prior_dispatch) in [(false, false), (true, false), (false, true), (true, true)] {
                        out.push(Situation2 { attempts, calls, cost_units, elapsed, asked_repeat, prior_dispatch });
                    }
                }
            }
        }
    }
    out
}

/// Does the gate stop this call for a person (an approval, a budget)?
fn gate_needs_person(budgets: &Budgets, task: &Task, s: Situation2) -> bool {
    let digest = RequestDigest::new("r");
    let (always, paid_or_external) = ApprovalFacts::of_task(task);
    let facts = Facts {
        revision: Revision(1),
        active_revision: Revision(1),
        plan_digest: "p",
        active_plan_digest: "p",
        unsettled: None,
        same_request: None,
        conflict: None,
        request_digest: &digest,
        budgets,
        usage: Usage {
            attempts_of_task: s.attempts,
            provider_calls: s.calls,
            cost: Cost::of_plan(f64::from(s.cost_units)),
            elapsed_seconds: s.elapsed,
        },
        call_cost: task.cost(),
        may_spend: task.may_spend,
        approval: ApprovalFacts {
            always,
            paid_or_external,
            asked_repeat: s.asked_repeat,
            prior_dispatch: s.prior_dispatch,
            open: &[],
        },
        now_ms: 0,
    };
    match gate::decide(&facts) {
        Decision::Go { .. } => false,
        Decision::AwaitApproval(_) | Decision::Budget(_) => true,
        other => panic!("facts without a stop of their own gave {other:?}"),
    }
}

/// Does a call whose answer is missing wait on a person's settlement?
fn in_doubt_needs_person(plan: &PlanFile, task: &Task, situation: Situation, found: Observed) -> bool {
    let reads_back = task.observe.is_some()
        || plan.providers.get(&task.provider).is_some_and(crate::plan::model::ProviderSpec::reads_back);
    let observed = if reads_back { found } else { Observed::NotObservable };
    let facts = in_doubt::Facts { situation, effect: task.effect, idempotent: task.idempotent, observed };
    in_doubt::resolve(facts) == Resolution::Unknown
}

/// A way a task's call needed a person (or confinement) under `old` and
/// not under `new`, if any.
fn freed(old: &PlanFile, new: &PlanFile, t_old: &Task, t_new: &Task) -> Option<String> {
    for s in situations() {
        if gate_needs_person(&old.budgets, t_old, s) && !gate_needs_person(&new.budgets, t_new, s) {
            return Some(format!("gate, {s:?}"));
        }
    }
    for situation in [Situation::Restarted, Situation::AnswerLost] {
        for found in [Observed::Present, Observed::Absent, Observed::Inconclusive] {
            if in_doubt_needs_person(old, t_old, situation, found)
                && !in_doubt_needs_person(new, t_new, situation, found)
            {
                return Some(format!("in doubt, {situation:?}, {found:?}"));
            }
        }
    }
    let unconfined = |p: &PlanFile, t: &Task| p.providers.get(&t.provider).is_some_and(|s| s.unconfined());
    (unconfined(new, t_new) && !unconfined(old, t_old)).then(|| "runs unconfined".to_string())
}

fn about(l: &Loosening, task_ref: &str) -> bool {
    l.task.as_deref() == Some(task_ref) || l.kind == Kind::Budget || l.tasks.iter().any(|t| t == task_ref)
}

fn compare(old: &PlanFile, new: &PlanFile) -> Vec<Loosening> {
    let dropped = BTreeMap::new();
    loosenings(&Before { file: old, in_force: &old.budgets, dropped: &dropped }, new, &[])
}

/// Only edits that tighten: a cost raised, an approval added, the effect
/// made more careful, a validation added, `idempotent` dropped, budgets
/// lowered. (`may_spend` dropped is not one: the gate keeps room in the
/// budget only for a task that may spend.)
fn tightened(s: &PlanShape, edits: &[u8; 6]) -> PlanShape {
    let mut t = s.clone();
    for task in t.tasks.iter_mut().flatten() {
        task.cost = task.cost.saturating_add(edits[0] % 2);
        task.requires_approval |= edits[1] % 2 == 1;
        task.effect = task.effect.max(edits[2] % 3);
        task.validations |= edits[3] % 4;
        task.idempotent &= edits[4] & 1 == 0;
    }
    t.max_cost = t.max_cost.saturating_sub(edits[5] % 2);
    t.max_calls = t.max_calls.saturating_sub(edits[5] % 3).max(1);
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_call_that_needed_a_person_and_no_longer_does_is_a_loosening(old in plan_shape(), new in plan_shape()) {
        let (old, new) = (build(&old), build(&new));
        let got = compare(&old, &new);
        for t_new in &new.tasks {
            let Some(t_old) = old.tasks.iter().find(|t| t.task_ref == t_new.task_ref) else { continue };
            if let Some(how) = freed(&old, &new, t_old, t_new) {
                prop_assert!(
                    got.iter().any(|l| about(l, &t_new.task_ref)),
                    "{} needed a person under the old plan and not the new ({how}), yet nothing about it is listed: {got:#?}",
                    t_new.task_ref
                );
            }
        }
    }

    #[test]
    fn a_plan_changed_only_to_tighten_is_no_loosening(old in plan_shape(), edits in any::<[u8; 6]>()) {
        let new = tightened(&old, &edits);
        let got = compare(&build(&old), &build(&new));
        prop_assert!(got.is_empty(), "{got:#?}");
    }
}
