//! Durability follows the effect: how durable must an attempt's records
//! be (its intent, its dispatch mark, its receipt) before the engine acts
//! on them?
//!
//! The fsync before a call is owed where losing the intent could cost
//! something: a second external call, a second payment, an approval or a
//! person's act forgotten. A task whose effect is `none` or `local`, free,
//! never spending and needing no approval owes nothing of the sort: if a
//! power loss takes its intent (or its receipt), the next run finds no
//! attempt and runs it again, and its outputs are judged by digest as
//! always. Its records are committed with `synchronous=NORMAL` in WAL:
//! durable across a crash of the engine process (SIGKILL included), not
//! across a power loss. Everything else — an `external` effect, a cost,
//! `may_spend`, `requires_approval` — is committed with
//! `synchronous=FULL` before the call, as is every person's act and every
//! settlement (those are recorded by the commands, always `Full`).

use crate::plan::model::Effect;
use crate::plan::Task;
use crate::state::Durability;

/// What an attempt's task risks when its records are lost, as far as
/// durability cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stakes {
    pub effect: Effect,
    /// A cost per call, or `may_spend` (the agent's own paid calls).
    pub paid: bool,
    /// Every call waits on a person's approval.
    pub approval: bool,
}

impl Stakes {
    pub fn of_task(task: &Task) -> Stakes {
        Stakes { effect: task.effect, paid: !task.cost().is_zero() || task.may_spend, approval: task.requires_approval }
    }
}

/// The two classes of the rule (docs/guarantees.md's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Lost to a power loss, it is run again and judged by digest:
    /// `synchronous=NORMAL`.
    Replayable,
    /// Lost, it could be sent or paid twice, or a person's word forgotten:
    /// `synchronous=FULL` before the call.
    Owed,
}

/// The class of an attempt's records.
pub fn class(s: Stakes) -> Class {
    match (s.effect, s.paid, s.approval) {
        (Effect::None | Effect::Local, false, false) => Class::Replayable,
        _ => Class::Owed,
    }
}

/// The commit durability an attempt's intent, dispatch mark and receipt
/// are written with.
pub fn of_attempt(s: Stakes) -> Durability {
    match class(s) {
        Class::Replayable => Durability::Normal,
        Class::Owed => Durability::Full,
    }
}

/// A write the run loop would commit `asked` (a failure, a verdict),
/// for an attempt of these stakes: never more durable than the attempt's
/// class needs, never less than asked when it is owed.
pub fn for_write(asked: Durability, s: Stakes) -> Durability {
    match class(s) {
        Class::Replayable => Durability::Normal,
        Class::Owed => asked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EFFECTS: [Effect; 3] = [Effect::None, Effect::Local, Effect::External];

    fn stakes(effect: Effect, paid: bool, approval: bool) -> Stakes {
        Stakes { effect, paid, approval }
    }

    #[test]
    fn every_class_of_attempt_gets_its_durability() {
        for effect in EFFECTS {
            for paid in [false, true] {
                for approval in [false, true] {
                    let s = stakes(effect, paid, approval);
                    let replayable = effect != Effect::External && !paid && !approval;
                    let want = if replayable { Durability::Normal } else { Durability::Full };
                    assert_eq!(of_attempt(s), want, "{s:?}");
                    assert_eq!(class(s) == Class::Replayable, replayable, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn only_free_none_or_local_work_without_approval_waits_for_no_disk() {
        assert_eq!(of_attempt(stakes(Effect::None, false, false)), Durability::Normal);
        assert_eq!(of_attempt(stakes(Effect::Local, false, false)), Durability::Normal);
        assert_eq!(of_attempt(stakes(Effect::External, false, false)), Durability::Full);
        assert_eq!(of_attempt(stakes(Effect::None, true, false)), Durability::Full, "paid");
        assert_eq!(of_attempt(stakes(Effect::Local, false, true)), Durability::Full, "approved");
    }

    #[test]
    fn a_write_asked_full_stays_full_only_where_it_is_owed() {
        for effect in EFFECTS {
            for paid in [false, true] {
                for approval in [false, true] {
                    let s = stakes(effect, paid, approval);
                    assert_eq!(for_write(Durability::Full, s), of_attempt(s), "{s:?}");
                    assert_eq!(for_write(Durability::Normal, s), Durability::Normal, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn a_task_is_judged_by_its_plan_fields() {
        let plan = r#"{"ref": "t", "provider": "p", "action": {"run": ["true"]}, "effect": "local"}"#;
        let mut task: Task = serde_json::from_str(plan).expect("a task");
        assert_eq!(Stakes::of_task(&task), stakes(Effect::Local, false, false));
        task.may_spend = true;
        assert!(Stakes::of_task(&task).paid);
        task.may_spend = false;
        task.cost = 0.5;
        assert!(Stakes::of_task(&task).paid);
        task.cost = 0.0;
        task.requires_approval = true;
        assert_eq!(class(Stakes::of_task(&task)), Class::Owed);
    }
}
