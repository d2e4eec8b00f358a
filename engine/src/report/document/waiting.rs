//! What waits on a person, with the exact commands to run. Pure: built
//! from the document's tasks, the goal's unknown / in-doubt attempts, and
//! each task's ways out as `decide::advice` gave them (`read` asks it in
//! the same snapshot, exactly as `engine status` does).

use super::model::{TaskReport, Waiting};
use crate::decide::advice;

/// An attempt of the goal (any revision) whose effect is unknown.
pub fn settle(task_ref: &str, op: &str, try_no: i64, reason: Option<&str>) -> Waiting {
    Waiting {
        kind: "settle".into(),
        task_ref: task_ref.into(),
        operation_id: Some(op.into()),
        try_no: Some(try_no),
        why: format!("effect_unknown ({}): it may or may not have taken effect", reason.unwrap_or("no receipt")),
        cost: None,
        commands: advice::commands(&advice::settle(op)),
    }
}

/// A task whose MCP server asked a person (`awaiting_input`): the
/// question in words (every word of the server's escaped) and the
/// command that answers it.
pub fn answer(task_ref: &str, detail: &serde_json::Value) -> Option<Waiting> {
    let a = crate::run::AwaitingInput::of(task_ref, detail)?;
    let words: Vec<String> = a.questions.iter().flat_map(crate::report::question::lines).collect();
    Some(Waiting {
        kind: "answer".into(),
        task_ref: task_ref.into(),
        operation_id: Some(a.operation_id.to_string()),
        try_no: None,
        why: format!("awaiting_input: its MCP server asks a person: {}", words.join("; ")),
        cost: None,
        commands: vec![a.answer_with],
    })
}

/// An attempt left between intent and receipt.
pub fn in_doubt(task_ref: &str, op: &str, try_no: i64, state: &str) -> Waiting {
    Waiting {
        kind: "in_doubt".into(),
        task_ref: task_ref.into(),
        operation_id: Some(op.into()),
        try_no: Some(try_no),
        why: format!(
            "{state} with no receipt: an engine running now may still get it; otherwise the next `engine run` reconciles it"
        ),
        cost: None,
        commands: Vec::new(),
    }
}

/// A task of the active revision that waits on a person: an approval, the
/// re-send of an operation settled as not run, or a decision on a failure.
/// `awaiting_op` is the operation the engine recorded as awaiting approval;
/// `commands` its ways out (`decide::advice`).
pub fn of_task(t: &TaskReport, revision: i64, awaiting_op: Option<&str>, commands: Vec<String>) -> Option<Waiting> {
    let latest = t.attempts.iter().rev().find(|a| a.revision == revision && a.state != "abandoned");
    let (kind, op, why) = match t.state.as_str() {
        "awaiting_approval" => {
            let op = awaiting_op.unwrap_or(&t.operation_id).to_string();
            ("approve", op, t.why.clone().unwrap_or_else(|| "approval required".into()))
        }
        _ if latest.is_some_and(|a| a.state == "settled_not_run") => {
            let why = "settled not_run by a person and not re-sent: the goal's outcome is unproven".to_string();
            ("retry", latest?.operation_id.clone(), why)
        }
        "failed" => {
            let a = latest?;
            let why = match &a.classification {
                Some(c) => format!("failed: {} (rule {})", c.class, c.rule),
                None => "failed".to_string(),
            };
            ("failed", a.operation_id.clone(), why)
        }
        _ => return None,
    };
    Some(Waiting {
        kind: kind.into(),
        task_ref: t.task_ref.clone(),
        operation_id: Some(op),
        try_no: None,
        cost: (kind == "approve").then_some(t.cost),
        why,
        commands,
    })
}

#[cfg(test)]
mod tests {
    use super::{of_task, settle};
    use crate::report::document::testdoc::{attempt, task};
    use crate::report::document::Classification;

    #[test]
    fn each_wait_carries_the_commands_it_was_given() {
        let t = task("T1", &[], "awaiting_approval", Vec::new());
        let w = of_task(&t, 1, Some("op_repair"), vec!["engine approve op_repair --note \"…\"".into()]).unwrap();
        assert_eq!((w.kind.as_str(), w.operation_id.as_deref()), ("approve", Some("op_repair")));
        assert_eq!(w.commands, vec!["engine approve op_repair --note \"…\""]);

        let t = task("T2", &[], "pending", vec![attempt(3, "settled_not_run", "")]);
        let w = of_task(&t, 1, None, vec!["engine retry T2".into()]).unwrap();
        assert_eq!((w.kind.as_str(), w.commands.clone()), ("retry", vec!["engine retry T2".to_string()]));

        let mut t = task("T 3", &[], "failed", vec![attempt(4, "failed", "")]);
        t.attempts[0].classification =
            Some(Classification { class: "c".into(), rule: "r".into(), evidence_ids: vec![1], next: "repair".into() });
        let w = of_task(&t, 1, None, vec!["engine repair 'T 3'".into()]).unwrap();
        assert_eq!((w.why.as_str(), w.commands.len()), ("failed: c (rule r)", 1));
        // Nothing waits on a task that succeeded, or on another revision's failure.
        assert!(of_task(&task("T4", &[], "succeeded", Vec::new()), 1, None, Vec::new()).is_none());
        assert!(of_task(&t, 2, None, Vec::new()).is_none());
    }

    #[test]
    fn an_unknown_outcome_is_settled_either_way() {
        let w = settle("T1", "op_9", 2, None);
        assert_eq!(
            w.commands,
            vec!["engine settle op_9 --outcome ok --note \"…\"", "engine settle op_9 --outcome not_run --note \"…\""]
        );
    }
}
