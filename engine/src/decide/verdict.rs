//! The goal's verdict at the end of a run: its state, the stable code of
//! the stop and the exit code, from what the ledger holds. When several
//! stops apply at once, the first in SPEC's order decides (3, 4, 5, 1: what
//! needs a person's settlement first); the run's text names the others.

use crate::error::{Code, EXIT_SATISFIED, EXIT_TASK_FAILED};
use crate::state::{GoalState, StopSignal};

/// What the run ends on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// Operations whose outcome is unknown.
    pub unknown: usize,
    /// Calls not sent: their request is the same as an operation nobody
    /// knows the outcome of (in this goal or another).
    pub same_request: usize,
    /// Operations a person settled as not run, not re-sent, and not
    /// waiting on an approval for their re-send.
    pub settled_not_run: usize,
    /// Operations waiting on a person's approval, and whether one of those
    /// has a stale approval.
    pub awaiting_approval: usize,
    pub approval_stale: bool,
    /// Tasks waiting on a person's answer to their server's question.
    pub awaiting_input: usize,
    pub budget_exhausted: bool,
    pub failed_tasks: usize,
    /// Goal constraints whose check failed when it ran before the
    /// acceptance checks. (An attempt that broke a constraint failed its
    /// task: that is `failed_tasks`.)
    pub constraints_violated: usize,
    /// The acceptance checks' result; `None` when they did not run (some
    /// task is not complete, or a person's stop came first). A goal that
    /// declares no acceptance check has `Some(true)`: SPEC's exit 0 says
    /// "acceptance checks passed", and none failed — the run's words say
    /// that nothing was checked.
    pub acceptance_passed: Option<bool>,
    /// Incomplete tasks a person holds (`engine hold`).
    pub held: usize,
    /// A person stopped the run with this signal.
    pub stopped: Option<StopSignal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub goal_state: GoalState,
    /// The stable code of the stop (`None`: satisfied, or a task failure).
    pub code: Option<Code>,
    pub exit_code: i32,
}

fn stop(goal_state: GoalState, code: Code) -> Verdict {
    Verdict { goal_state, code: Some(code), exit_code: code.exit_code() }
}

/// A run a person stopped exits as a process ended by its signal would
/// (130, 143, 129), whatever else it waits on: the goal's state is still
/// the ledger's, and the run's text names every other stop.
pub fn verdict(f: &Facts) -> Verdict {
    let v = verdict_of_ledger(f);
    match f.stopped {
        Some(signal) => Verdict { goal_state: v.goal_state, code: None, exit_code: signal.exit_code() },
        None => v,
    }
}

fn verdict_of_ledger(f: &Facts) -> Verdict {
    if f.same_request > 0 {
        // The most precise word for what waits: it names the unknown
        // operation too, and settling it lets both go on.
        let state = if f.unknown > 0 { GoalState::NeedsSettlement } else { GoalState::Open };
        return stop(state, Code::SameRequestUnsettled);
    }
    if f.unknown > 0 {
        return stop(GoalState::NeedsSettlement, Code::ExternalEffectUnknown);
    }
    if f.settled_not_run > 0 {
        // A person said these did not run; until they are re-sent the
        // goal's outcome is not proven.
        return stop(GoalState::Open, Code::GoalOutcomeUnproven);
    }
    if f.awaiting_approval > 0 {
        return stop(GoalState::Open, if f.approval_stale { Code::ApprovalStale } else { Code::ApprovalRequired });
    }
    if f.awaiting_input > 0 {
        // A person's answer, like an approval: exit 4.
        return stop(GoalState::Open, Code::InputRequired);
    }
    if f.budget_exhausted {
        return stop(GoalState::Open, Code::BudgetExhausted);
    }
    let broken = f.failed_tasks > 0 || f.constraints_violated > 0 || f.acceptance_passed == Some(false);
    if f.held > 0 && !broken {
        // Only held work is left (and what waits on it): a person's
        // release goes on. Exit 4, as a run waiting on a person's act.
        return stop(GoalState::Open, Code::Held);
    }
    let (goal_state, exit_code) = if broken {
        (GoalState::Failed, EXIT_TASK_FAILED)
    } else if f.acceptance_passed == Some(true) {
        (GoalState::Satisfied, EXIT_SATISFIED)
    } else {
        (GoalState::Open, EXIT_TASK_FAILED)
    };
    Verdict { goal_state, code: None, exit_code }
}

/// The goal's word at the end of a run: the ledger's state, except that a
/// goal whose every check passed but some of whose constraints are plain
/// statements (nothing checks them) is `completed`, never `satisfied` —
/// the ledger keeps SPEC's state `satisfied`, the words say what was not
/// checked (`goal completed (N constraints not checked)`).
pub fn word(goal_state: GoalState, constraints_not_checked: usize) -> &'static str {
    match goal_state {
        GoalState::Satisfied if constraints_not_checked > 0 => "completed",
        other => other.as_str(),
    }
}

/// A verdict's code from its stable string (as a recorded verdict holds it).
pub fn code_named(name: &str) -> Option<Code> {
    [
        Code::SameRequestUnsettled,
        Code::ExternalEffectUnknown,
        Code::GoalOutcomeUnproven,
        Code::ApprovalRequired,
        Code::ApprovalStale,
        Code::InputRequired,
        Code::Held,
        Code::BudgetExhausted,
    ]
    .into_iter()
    .find(|c| c.as_str() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn satisfied() -> Facts {
        Facts { acceptance_passed: Some(true), ..Facts::default() }
    }

    #[test]
    fn satisfied_only_when_nothing_stops_and_acceptance_passed() {
        assert_eq!(verdict(&satisfied()), Verdict { goal_state: GoalState::Satisfied, code: None, exit_code: 0 });
        // Acceptance not run (a task incomplete): open, exit 1.
        assert_eq!(verdict(&Facts::default()), Verdict { goal_state: GoalState::Open, code: None, exit_code: 1 });
        assert_eq!(
            verdict(&Facts { acceptance_passed: Some(false), ..Facts::default() }),
            Verdict { goal_state: GoalState::Failed, code: None, exit_code: 1 }
        );
    }

    #[test]
    fn satisfied_with_unchecked_constraints_is_completed() {
        assert_eq!(word(GoalState::Satisfied, 0), "satisfied");
        assert_eq!(word(GoalState::Satisfied, 2), "completed");
        for other in [GoalState::Open, GoalState::Failed, GoalState::NeedsSettlement] {
            assert_eq!(word(other, 3), other.as_str(), "only a met goal is qualified");
        }
    }

    #[test]
    fn each_stop_alone() {
        let cases = [
            (Facts { unknown: 1, ..satisfied() }, GoalState::NeedsSettlement, Some(Code::ExternalEffectUnknown), 3),
            (Facts { same_request: 1, ..satisfied() }, GoalState::Open, Some(Code::SameRequestUnsettled), 3),
            (Facts { settled_not_run: 1, ..satisfied() }, GoalState::Open, Some(Code::GoalOutcomeUnproven), 3),
            (Facts { awaiting_approval: 1, ..satisfied() }, GoalState::Open, Some(Code::ApprovalRequired), 4),
            (
                Facts { awaiting_approval: 1, approval_stale: true, ..satisfied() },
                GoalState::Open,
                Some(Code::ApprovalStale),
                4,
            ),
            (Facts { budget_exhausted: true, ..satisfied() }, GoalState::Open, Some(Code::BudgetExhausted), 5),
            (Facts { failed_tasks: 1, ..satisfied() }, GoalState::Failed, None, 1),
        ];
        for (facts, state, code, exit) in cases {
            assert_eq!(verdict(&facts), Verdict { goal_state: state, code, exit_code: exit }, "{facts:?}");
        }
    }

    #[test]
    fn several_stops_resolve_in_spec_order_3_4_5_1() {
        let all = Facts {
            unknown: 1,
            same_request: 0,
            settled_not_run: 1,
            awaiting_approval: 1,
            approval_stale: false,
            awaiting_input: 1,
            budget_exhausted: true,
            failed_tasks: 1,
            constraints_violated: 1,
            acceptance_passed: None,
            held: 1,
            stopped: None,
        };
        assert_eq!(verdict(&all).code, Some(Code::ExternalEffectUnknown));
        // The same request waiting on the unknown one names it first; the
        // goal still needs that settlement.
        let same = verdict(&Facts { same_request: 1, ..all });
        assert_eq!(
            (same.code, same.goal_state, same.exit_code),
            (Some(Code::SameRequestUnsettled), GoalState::NeedsSettlement, 3)
        );
        assert_eq!(verdict(&Facts { unknown: 0, ..all }).code, Some(Code::GoalOutcomeUnproven));
        // A person's answer comes after an approval, before a budget: exit 4.
        let input = Facts { unknown: 0, settled_not_run: 0, awaiting_approval: 0, ..all };
        assert_eq!((verdict(&input).code, verdict(&input).exit_code), (Some(Code::InputRequired), 4));
        assert_eq!(verdict(&Facts { unknown: 0, settled_not_run: 0, ..all }).code, Some(Code::ApprovalRequired));
        let only_budget_and_failure =
            Facts { unknown: 0, settled_not_run: 0, awaiting_approval: 0, awaiting_input: 0, ..all };
        assert_eq!(verdict(&only_budget_and_failure).exit_code, 5);
        assert_eq!(verdict(&Facts { budget_exhausted: false, ..only_budget_and_failure }).exit_code, 1);
    }

    #[test]
    fn only_held_work_left_is_held_and_anything_else_comes_first() {
        let held = Facts { held: 1, ..Facts::default() };
        assert_eq!(verdict(&held), Verdict { goal_state: GoalState::Open, code: Some(Code::Held), exit_code: 4 });
        // Held work beside a failure: the failure is the stop.
        assert_eq!(verdict(&Facts { failed_tasks: 1, ..held }).exit_code, 1);
        assert_eq!(verdict(&Facts { budget_exhausted: true, ..held }).code, Some(Code::BudgetExhausted));
        assert_eq!(verdict(&Facts { awaiting_approval: 1, ..held }).code, Some(Code::ApprovalRequired));
        assert_eq!(verdict(&Facts { unknown: 1, ..held }).exit_code, 3);
        assert_eq!(verdict(&Facts { stopped: Some(StopSignal::Interrupt), ..held }).exit_code, 130);
    }

    #[test]
    fn never_satisfied_with_a_violated_constraint() {
        let broken = Facts { constraints_violated: 1, ..satisfied() };
        assert_eq!(verdict(&broken), Verdict { goal_state: GoalState::Failed, code: None, exit_code: 1 });
        // Whatever else holds: acceptance passed, no task failed.
        assert_ne!(verdict(&broken).goal_state, GoalState::Satisfied);
        // A stop that needs a person still comes first.
        assert_eq!(verdict(&Facts { unknown: 1, ..broken }).exit_code, 3);
    }

    #[test]
    fn a_stopped_run_exits_by_its_signal_and_keeps_the_ledgers_state() {
        for (signal, exit) in [(StopSignal::Interrupt, 130), (StopSignal::Terminate, 143), (StopSignal::Hangup, 129)] {
            let stopped = Some(signal);
            let v = verdict(&Facts { stopped, ..Facts::default() });
            assert_eq!(v, Verdict { goal_state: GoalState::Open, code: None, exit_code: exit });
            // Whatever else it waits on, the exit code is the signal's; the
            // goal's state is what the ledger says.
            let v = verdict(&Facts { stopped, unknown: 1, failed_tasks: 1, ..Facts::default() });
            assert_eq!(v, Verdict { goal_state: GoalState::NeedsSettlement, code: None, exit_code: exit });
            let v = verdict(&Facts { stopped, failed_tasks: 1, ..Facts::default() });
            assert_eq!((v.goal_state, v.exit_code), (GoalState::Failed, exit));
        }
    }
}
