//! What a person holds: `engine hold REF|--goal` keeps a task (or every
//! task of the goal) from being started or retried until `engine release`
//! ends the hold. The holds in force follow from the person's acts, in
//! ledger order: a later act on the same target replaces an earlier one.
//! A held task's dependants wait on it; the rest of the goal goes on; a
//! run that has only held work left ends `HELD`.

use std::collections::BTreeMap;

/// What a hold or release names: one task, or the whole goal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Goal,
    Task(String),
}

impl Target {
    /// The task ref as recorded (`None`: the goal).
    pub fn of(task_ref: Option<&str>) -> Target {
        task_ref.map_or(Target::Goal, |r| Target::Task(r.to_string()))
    }
}

/// One recorded act, as `holds` weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Act {
    pub target: Target,
    /// `true`: a hold; `false`: a release.
    pub hold: bool,
    pub by: String,
    pub reason: String,
    pub at_ms: i64,
}

/// A hold in force: who, why, since when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Hold {
    pub by: String,
    pub reason: String,
    pub at_ms: i64,
}

/// The holds in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds {
    pub goal: Option<Hold>,
    pub tasks: BTreeMap<String, Hold>,
}

impl Holds {
    /// The hold that keeps `task_ref` from starting, if any: its own
    /// first, else the goal's.
    pub fn of(&self, task_ref: &str) -> Option<&Hold> {
        self.tasks.get(task_ref).or(self.goal.as_ref())
    }

    pub fn is_held(&self, task_ref: &str) -> bool {
        self.of(task_ref).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.goal.is_none() && self.tasks.is_empty()
    }

    /// Is `target` itself held (what `engine release` ends)?
    pub fn holds(&self, target: &Target) -> bool {
        match target {
            Target::Goal => self.goal.is_some(),
            Target::Task(r) => self.tasks.contains_key(r),
        }
    }
}

/// The holds in force after `acts`, in ledger order.
pub fn holds<'a>(acts: impl IntoIterator<Item = &'a Act>) -> Holds {
    let mut h = Holds::default();
    for a in acts {
        let hold = a.hold.then(|| Hold { by: a.by.clone(), reason: a.reason.clone(), at_ms: a.at_ms });
        match (&a.target, hold) {
            (Target::Goal, hold) => h.goal = hold,
            (Target::Task(r), Some(hold)) => {
                h.tasks.insert(r.clone(), hold);
            }
            (Target::Task(r), None) => {
                h.tasks.remove(r);
            }
        }
    }
    h
}

/// Why a hold or release records nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// `engine hold` of what is held already.
    AlreadyHeld(Hold),
    /// `engine release` of what is not held.
    NotHeld,
}

/// May a person hold (`hold`) or release (`!hold`) `target` now?
pub fn may(h: &Holds, target: &Target, hold: bool) -> Result<(), Refused> {
    let own = match target {
        Target::Goal => h.goal.as_ref(),
        Target::Task(r) => h.tasks.get(r),
    };
    match (hold, own) {
        (true, Some(held)) => Err(Refused::AlreadyHeld(held.clone())),
        (false, None) => Err(Refused::NotHeld),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(target: Target, hold: bool, at_ms: i64) -> Act {
        Act { target, hold, by: "ann".into(), reason: format!("r{at_ms}"), at_ms }
    }

    fn task(r: &str) -> Target {
        Target::Task(r.into())
    }

    #[test]
    fn a_hold_lasts_until_its_own_release() {
        let acts = [act(task("T1"), true, 1), act(task("T2"), true, 2), act(task("T1"), false, 3)];
        let h = holds(&acts);
        assert!(!h.is_held("T1") && h.is_held("T2") && !h.is_held("T3"));
        assert_eq!(h.of("T2").map(|x| x.reason.as_str()), Some("r2"));
        assert!(holds(&[]).is_empty());
    }

    #[test]
    fn a_goal_hold_holds_every_task_until_the_goal_is_released() {
        let h = holds(&[act(Target::Goal, true, 1)]);
        assert!(h.is_held("T1") && h.is_held("anything"));
        // Releasing a task the goal's hold covers does not let it go.
        assert_eq!(may(&h, &task("T1"), false), Err(Refused::NotHeld));
        let h = holds(&[act(Target::Goal, true, 1), act(task("T1"), true, 2), act(Target::Goal, false, 3)]);
        assert!(h.is_held("T1") && !h.is_held("T2"), "the task's own hold stays");
    }

    #[test]
    fn holding_twice_or_releasing_nothing_is_refused() {
        let h = holds(&[act(task("T1"), true, 1)]);
        assert!(matches!(may(&h, &task("T1"), true), Err(Refused::AlreadyHeld(x)) if x.at_ms == 1));
        assert_eq!(may(&h, &task("T2"), false), Err(Refused::NotHeld));
        assert_eq!(may(&h, &task("T1"), false), Ok(()));
        assert_eq!(may(&h, &Target::Goal, true), Ok(()));
        assert_eq!(may(&h, &Target::Goal, false), Err(Refused::NotHeld));
    }
}
