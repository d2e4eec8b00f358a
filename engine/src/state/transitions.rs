//! The one table of state changes. Every change of an attempt's, a task's
//! or a goal's state in the ledger is checked against it where it is
//! written (the store refuses any other move), and `tests` walks every
//! (from, to) pair: each allowed move succeeds, every other one is refused.
//!
//! A row reads "from this state, these states may follow". Staying in a
//! state (a new detail for a waiting task) is a move like any other: it is
//! allowed only where the table says so.

use super::{AttemptState as A, GoalState as G, TaskState as T};

/// A state with a transition table.
pub trait Lifecycle: Copy + Eq + std::fmt::Display + 'static {
    /// What is changing state (for messages): "attempt", "task", "goal".
    const NOUN: &'static str;
    const ALL: &'static [Self];

    /// The states that may follow `self`.
    fn next(self) -> &'static [Self];

    fn may_become(self, to: Self) -> bool {
        self.next().contains(&to)
    }

    /// The states from which `to` may be reached.
    fn sources(to: Self) -> Vec<Self> {
        Self::ALL.iter().copied().filter(|from| from.may_become(to)).collect()
    }

    /// Check one move: `Ok` if the table allows it.
    fn check(self, to: Self) -> Result<(), Refused> {
        if self.may_become(to) {
            Ok(())
        } else {
            Err(Refused { noun: Self::NOUN, from: self.to_string(), to: to.to_string() })
        }
    }
}

/// A move the table does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub noun: &'static str,
    pub from: String,
    pub to: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} state {} -> {} is not an allowed transition", self.noun, self.from, self.to)
    }
}

/// An attempt is born `intent_recorded`; a receipt, an observation, a
/// person's settlement or a person's stop moves it on; `succeeded`,
/// `failed`, `settled_not_run`, `abandoned` and `cancelled` are final.
impl Lifecycle for A {
    const NOUN: &'static str = "attempt";
    const ALL: &'static [A] = A::ALL;

    fn next(self) -> &'static [A] {
        match self {
            // Handed over, answered (a receipt, or one from observation),
            // refused before dispatch, observed absent, or left in doubt.
            // A person's stop cancels it (never handed over, or its effect is
            // one a new try may repeat).
            A::IntentRecorded => {
                &[A::Dispatched, A::ReceiptRecorded, A::Failed, A::EffectUnknown, A::Abandoned, A::Cancelled]
            }
            A::Dispatched => &[A::ReceiptRecorded, A::Failed, A::EffectUnknown, A::Abandoned, A::Cancelled],
            // Judged by its validations; a deadline that cut an external
            // command part-way makes it unknown.
            // the server's answer is a question for a person (in the
            // receipt's own transaction).
            A::ReceiptRecorded => &[A::Succeeded, A::Failed, A::EffectUnknown, A::InputAsked],
            // Only a person moves an unknown outcome.
            A::EffectUnknown => &[A::SettledOk, A::SettledNotRun],
            // A person's `ok` stands in for the receipt; the validations
            // may still fail it (a pass leaves it `settled_ok`).
            A::SettledOk => &[A::Failed],
            A::Succeeded | A::Failed | A::SettledNotRun | A::Abandoned | A::Cancelled | A::InputAsked => &[],
        }
    }
}

/// A task is born `pending`. `ready` is the scheduler's word for a task
/// whose dependencies are complete; it is never written to the ledger.
impl Lifecycle for T {
    const NOUN: &'static str = "task";
    const ALL: &'static [T] = T::ALL;

    fn next(self) -> &'static [T] {
        // Where a call may be decided: it starts, waits on a person, or
        // stops on an earlier unknown try; or its dependencies hold it.
        // A call site may find the person's answer it carries expired
        // (`engine answer --for`): the task asks again (`awaiting_input`).
        const CALL_SITE: &[T] =
            &[T::Pending, T::Running, T::AwaitingApproval, T::EffectUnknown, T::Blocked, T::AwaitingInput];
        match self {
            // A revision decides reuse; a repair refused by a budget is
            // still the failure it was.
            T::Pending => &[
                T::Pending,
                T::Running,
                T::AwaitingApproval,
                T::EffectUnknown,
                T::Blocked,
                T::Reused,
                T::Failed,
                T::AwaitingInput,
            ],
            // Answered and judged; left in doubt; run again; stopped by a
            // person; or its server asks a person for input.
            T::Running => &[
                T::Pending,
                T::Running,
                T::AwaitingApproval,
                T::EffectUnknown,
                T::Blocked,
                T::Succeeded,
                T::Failed,
                T::Cancelled,
                T::AwaitingInput,
            ],
            // A cancelled task is looked at afresh by the next run, like a
            // blocked one (its kept receipt judged: `running`).
            T::Blocked | T::AwaitingApproval | T::Cancelled => CALL_SITE,
            // A person settled it (`ok`: judged next; `not_run`: pending a
            // retry), or the try it waited on was settled.
            T::EffectUnknown => CALL_SITE,
            // A person's answer (`engine answer`): the next run sends it.
            T::AwaitingInput => &[T::Pending],
            // A person's retry or repair.
            T::Failed => &[T::Pending],
            // Its completion went stale.
            T::Succeeded | T::Reused => &[T::Pending],
            T::Ready => &[],
        }
    }
}

/// A goal's state is the verdict of its latest run (or of a person's act,
/// or of a revision), recomputed from the whole ledger each time: any
/// verdict may follow any other.
impl Lifecycle for G {
    const NOUN: &'static str = "goal";
    const ALL: &'static [G] = G::ALL;

    fn next(self) -> &'static [G] {
        G::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (from, to) pair of a lifecycle, with the table's answer.
    fn pairs<S: Lifecycle>() -> Vec<(S, S, bool)> {
        let mut out = Vec::new();
        for &from in S::ALL {
            for &to in S::ALL {
                out.push((from, to, from.check(to).is_ok()));
            }
        }
        out
    }

    fn allowed<S: Lifecycle>() -> Vec<(String, String)> {
        pairs::<S>().into_iter().filter(|p| p.2).map(|(f, t, _)| (f.to_string(), t.to_string())).collect()
    }

    fn names(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect()
    }

    #[test]
    fn attempt_moves_are_exactly_these() {
        assert_eq!(pairs::<A>().len(), 121);
        assert_eq!(
            allowed::<A>(),
            names(&[
                ("intent_recorded", "dispatched"),
                ("intent_recorded", "receipt_recorded"),
                ("intent_recorded", "failed"),
                ("intent_recorded", "effect_unknown"),
                ("intent_recorded", "abandoned"),
                ("intent_recorded", "cancelled"),
                ("dispatched", "receipt_recorded"),
                ("dispatched", "failed"),
                ("dispatched", "effect_unknown"),
                ("dispatched", "abandoned"),
                ("dispatched", "cancelled"),
                ("receipt_recorded", "succeeded"),
                ("receipt_recorded", "failed"),
                ("receipt_recorded", "effect_unknown"),
                ("receipt_recorded", "input_asked"),
                ("effect_unknown", "settled_ok"),
                ("effect_unknown", "settled_not_run"),
                ("settled_ok", "failed"),
            ])
        );
    }

    #[test]
    fn every_other_attempt_move_is_refused() {
        for (from, to, ok) in pairs::<A>() {
            let r = from.check(to);
            assert_eq!(r.is_ok(), ok, "{from} -> {to}");
            if let Err(refused) = r {
                assert_eq!(refused.to_string(), format!("attempt state {from} -> {to} is not an allowed transition"));
            }
        }
        // The negative space, named: nothing leaves a final state, nothing
        // returns to `intent_recorded`, only a person leaves an unknown.
        for fin in [A::Succeeded, A::Failed, A::SettledNotRun, A::Abandoned, A::Cancelled, A::InputAsked] {
            assert!(A::ALL.iter().all(|&to| !fin.may_become(to)), "{fin} is final");
        }
        assert!(A::ALL.iter().all(|&from| !from.may_become(A::IntentRecorded)));
        assert_eq!(A::sources(A::SettledOk), vec![A::EffectUnknown]);
        assert_eq!(A::sources(A::SettledNotRun), vec![A::EffectUnknown]);
        assert!(!A::EffectUnknown.may_become(A::ReceiptRecorded), "an unknown never becomes a receipt by itself");
        // Only an attempt in flight is cancelled; a receipt is kept, never cancelled.
        assert_eq!(A::sources(A::Cancelled), vec![A::IntentRecorded, A::Dispatched]);
    }

    #[test]
    fn task_moves_are_exactly_these() {
        assert_eq!(pairs::<T>().len(), 121);
        // A call site may find the answer it carries expired: asked again.
        let waiting = ["pending", "running", "awaiting_approval", "effect_unknown", "blocked", "awaiting_input"];
        let mut want: Vec<(&str, &str)> = Vec::new();
        for to in [
            "pending",
            "running",
            "awaiting_approval",
            "effect_unknown",
            "blocked",
            "reused",
            "failed",
            "awaiting_input",
        ] {
            want.push(("pending", to));
        }
        for to in [
            "pending",
            "running",
            "succeeded",
            "failed",
            "blocked",
            "effect_unknown",
            "awaiting_approval",
            "cancelled",
            "awaiting_input",
        ] {
            want.push(("running", to));
        }
        // Only a person's answer moves a task that waits for one.
        want.push(("awaiting_input", "pending"));
        for from in ["blocked", "awaiting_approval", "effect_unknown", "cancelled"] {
            for to in waiting {
                want.push((from, to));
            }
        }
        for from in ["succeeded", "reused", "failed"] {
            want.push((from, "pending"));
        }
        let mut want = names(&want);
        want.sort();
        let mut got = allowed::<T>();
        got.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn every_other_task_move_is_refused() {
        for (from, to, ok) in pairs::<T>() {
            assert_eq!(from.check(to).is_ok(), ok, "{from} -> {to}");
        }
        // `ready` is the scheduler's, never the ledger's.
        assert!(T::ALL.iter().all(|&s| !s.may_become(T::Ready) && !T::Ready.may_become(s)));
        // Only a running task's validations make it succeed; only a revision reuses.
        assert_eq!(T::sources(T::Succeeded), vec![T::Running]);
        assert_eq!(T::sources(T::Reused), vec![T::Pending]);
        // Only a task in flight is cancelled; a cancelled one never succeeds
        // or fails without running again.
        assert_eq!(T::sources(T::Cancelled), vec![T::Running]);
        assert!(!T::Cancelled.may_become(T::Succeeded) && !T::Cancelled.may_become(T::Failed));
        // A finished task runs again only through `pending`.
        for done in [T::Succeeded, T::Reused, T::Failed] {
            assert_eq!(done.next(), &[T::Pending], "{done}");
        }
    }

    #[test]
    fn any_goal_verdict_may_follow_any_other() {
        let all = pairs::<G>();
        assert_eq!(all.len(), 16);
        assert!(all.iter().all(|p| p.2));
    }
}
