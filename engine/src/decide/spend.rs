//! What an approval is for, and which command spends it. A person's
//! approval answers a question that stands now (`waits`): a call the gate
//! stopped for want of one, or a repeat only a person can ask for that
//! will need one; nothing else (`NOTHING_TO_APPROVE`). The call that waits
//! on it is made again by the command that asked for it — a plain run, a
//! person's retry, or a person's repair (`spending_command`).

use serde_json::Value;

use crate::cost::Cost;
use crate::evidence::SpentItem;
use crate::limits::{SPENT_ITEMS_MAX, SPENT_WHAT_CHARS_MAX};
use crate::state::{AttemptKind, AttemptState, TaskState};

/// What a provider's report says it spent, read (`reported`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub items: Vec<SpentItem>,
    pub total: Cost,
}

/// The spending an agent's report states (`"spent": [{"amount", "what"}]`):
/// `None` when it states none (no `spent`, or an empty list); an error,
/// naming the place, when `spent` is not a bounded list of costs with
/// their purpose — the money may be gone, so a broken report of it is a
/// broken report, never read as nothing spent.
pub fn reported(report: &Value) -> Result<Option<Reported>, String> {
    let Some(spent) = report.get("spent") else { return Ok(None) };
    let list = spent.as_array().ok_or("`spent` is not a list of {\"amount\", \"what\"}")?;
    if list.len() > SPENT_ITEMS_MAX {
        return Err(format!("`spent` has {} entries; at most {SPENT_ITEMS_MAX} are read", list.len()));
    }
    let mut items = Vec::with_capacity(list.len());
    let mut total = Cost::ZERO;
    for (i, entry) in list.iter().enumerate() {
        let at = format!("spent[{i}]");
        let amount = entry.get("amount").and_then(Value::as_f64).ok_or(format!("{at}.amount is not a number"))?;
        let amount = Cost::from_units(amount).map_err(|why| format!("{at}.amount {why}"))?;
        let what = entry.get("what").and_then(Value::as_str).ok_or(format!("{at}.what is not a string"))?;
        let what: String = what.chars().take(SPENT_WHAT_CHARS_MAX).collect();
        total = total.plus(amount);
        if total.units() > crate::limits::COST_UNITS_MAX {
            return Err(format!(
                "`spent` totals more than {:e}, the most a cost may be",
                crate::limits::COST_UNITS_MAX
            ));
        }
        items.push(SpentItem { amount_micros: amount.micros(), what });
    }
    Ok((!items.is_empty()).then_some(Reported { items, total }))
}

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
        // A person's rerun stays asked for until its call succeeds: any
        // plain run makes it.
        Some(AttemptKind::Run | AttemptKind::Rerun) | None => format!("engine run {plan_path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(task: Option<TaskState>, asked: bool, latest: Option<AttemptState>, needs: bool) -> Standing {
        Standing { task, asked, latest, repeat_needs_approval: needs }
    }

    #[test]
    fn a_report_of_spending_is_read_exactly_and_bounded() {
        use serde_json::json;
        assert_eq!(reported(&json!({"status": "done"})), Ok(None));
        assert_eq!(reported(&json!({"status": "done", "spent": []})), Ok(None));
        let r =
            reported(&json!({"spent": [{"amount": 0.1, "what": "a"}, {"amount": 0.2, "what": "b"}]})).unwrap().unwrap();
        assert_eq!(r.total, Cost::from_units(0.3).unwrap(), "summed in micro-units");
        assert_eq!(r.items[1], SpentItem { amount_micros: 200_000, what: "b".into() });
        for (bad, place) in [
            (json!({"spent": "lots"}), "`spent`"),
            (json!({"spent": [{"what": "a"}]}), "spent[0].amount"),
            (json!({"spent": [{"amount": 1, "what": "a"}, {"amount": -1, "what": "b"}]}), "spent[1].amount"),
            (json!({"spent": [{"amount": 1e13, "what": "a"}]}), "spent[0].amount"),
            (json!({"spent": [{"amount": 1}]}), "spent[0].what"),
        ] {
            let why = reported(&bad).unwrap_err();
            assert!(why.contains(place), "{bad}: {why}");
        }
        let many: Vec<_> = (0..=SPENT_ITEMS_MAX).map(|_| json!({"amount": 0, "what": "x"})).collect();
        assert!(reported(&json!({"spent": many})).unwrap_err().contains("at most"));
        let long = "w".repeat(SPENT_WHAT_CHARS_MAX + 10);
        let r = reported(&json!({"spent": [{"amount": 1, "what": long}]})).unwrap().unwrap();
        assert_eq!(r.items[0].what.chars().count(), SPENT_WHAT_CHARS_MAX);
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
