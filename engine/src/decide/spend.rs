//! Which command spends an approval a person gave: the call that waits on
//! it is made again by the command that asked for it — a plain run, a
//! person's retry, or a person's repair.

use crate::state::AttemptKind;

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

    #[test]
    fn the_command_that_asked_spends_it() {
        let cmd = |k| spending_command(k, "op_1", "T3", "/w/plan.json");
        assert_eq!(cmd(Some(AttemptKind::Run)), "engine run /w/plan.json");
        assert_eq!(cmd(None), "engine run /w/plan.json");
        assert_eq!(cmd(Some(AttemptKind::Retry)), "engine retry op_1");
        assert!(cmd(Some(AttemptKind::Repair)).starts_with("engine repair T3"));
    }
}
