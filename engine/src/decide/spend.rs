//! What an approval is for, and which command spends it. A person's
//! approval answers a question that stands now (`waits`): a call the gate
//! stopped for want of one, or a repeat only a person can ask for that
//! will need one; nothing else (`NOTHING_TO_APPROVE`). The call that waits
//! on it is made again by the command that asked for it — a plain run, a
//! person's retry, or a person's repair (`spending_command`).

use crate::state::{AttemptKind, AttemptState, TaskState};

/// What decides whether an operation waits on an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The state of the task of a goal's active revision the operation
    /// belongs to (`None`: no such task).
    pub task: Option<TaskState>,
    /// The gate stopped a call of this operation for want of an approval
    /// and the task still waits on it (`awaiting_approval` on it).
    pub asked: bool,
    /// The state of the operation's latest attempt in that revision.
    pub latest: Option<AttemptState>,
    /// A repeat of the task's call needs an approval (paid, external, or
    /// `requires_approval`).
    pub repeat_needs_approval: bool,
}

/// Why nothing waits on an approval of the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nothing {
    /// No task of a goal's active revision has it.
    Unknown,
    /// The engine never asked, and no repeat of it stands.
    NotAsked { task: TaskState },
    /// Its repeat needs no approval.
    NeedsNone { task: TaskState },
}

/// Does the operation wait on a person's approval now? It does when the
/// gate asked and the task still waits; or when its latest attempt failed
/// or was settled not run — only a person's retry sends it again — and
/// that repeat needs one (approving ahead of the retry).
pub fn waits(s: &Standing) -> Result<(), Nothing> {
    let Some(task) = s.task else { return Err(Nothing::Unknown) };
    if s.asked {
        return Ok(());
    }
    let repeat_stands = matches!(s.latest, Some(AttemptState::Failed | AttemptState::SettledNotRun))
        && !matches!(task, TaskState::Succeeded | TaskState::Reused | TaskState::Running);
    match (repeat_stands, s.repeat_needs_approval) {
        (true, true) => Ok(()),
        (true, false) => Err(Nothing::NeedsNone { task }),
        (false, _) => Err(Nothing::NotAsked { task }),
    }
}

/// The command line that makes the call an approval was given for.
/// `asked_by`: the kind of the call the gate stopped (`None` for one
/// recorded before the ledger kept it: a plain run).
pub fn spending_command(asked_by: Option<AttemptKind>, operation_id: &str, task_ref: &str, plan_path: &str) -> String {
    match asked_by {
        Some(AttemptKind::Retry) => format!("engine retry {operation_id}"),
        Some(AttemptKind::Repair) => format!("engine repair {task_ref} (with the same --instruction, if it had one)"),
        Some(AttemptKind::Run) | None => format!("engine run {plan_path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(task: Option<TaskState>, asked: bool, latest: Option<AttemptState>, needs: bool) -> Standing {
        Standing { task, asked, latest, repeat_needs_approval: needs }
    }

    #[test]
    fn an_approval_answers_a_question_that_stands() {
        use AttemptState::*;
        use TaskState as T;
        // The gate asked: whatever else is true.
        assert_eq!(waits(&standing(Some(T::AwaitingApproval), true, None, false)), Ok(()));
        // A repeat only a person can ask for, which will need one.
        assert_eq!(waits(&standing(Some(T::Failed), false, Some(Failed), true)), Ok(()));
        assert_eq!(waits(&standing(Some(T::Pending), false, Some(SettledNotRun), true)), Ok(()));
        // Nothing waits: unknown, never asked, done, or a repeat that needs none.
        assert_eq!(waits(&standing(None, false, None, true)), Err(Nothing::Unknown));
        assert_eq!(waits(&standing(Some(T::Pending), false, None, true)), Err(Nothing::NotAsked { task: T::Pending }));
        assert_eq!(
            waits(&standing(Some(T::Succeeded), false, Some(Succeeded), true)),
            Err(Nothing::NotAsked { task: T::Succeeded })
        );
        assert_eq!(
            waits(&standing(Some(T::Failed), false, Some(Failed), false)),
            Err(Nothing::NeedsNone { task: T::Failed })
        );
        // A task that ran again since (its latest attempt is a later one).
        assert_eq!(
            waits(&standing(Some(T::Running), false, Some(Failed), true)),
            Err(Nothing::NotAsked { task: T::Running })
        );
    }

    #[test]
    fn the_command_that_asked_spends_it() {
        let cmd = |k| spending_command(k, "op_1", "T3", "/w/plan.json");
        assert_eq!(cmd(Some(AttemptKind::Run)), "engine run /w/plan.json");
        assert_eq!(cmd(None), "engine run /w/plan.json");
        assert_eq!(cmd(Some(AttemptKind::Retry)), "engine retry op_1");
        assert!(cmd(Some(AttemptKind::Repair)).starts_with("engine repair T3"));
    }
}
