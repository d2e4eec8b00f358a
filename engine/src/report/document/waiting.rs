//! What waits on a person, with the exact command to run. Pure: built from
//! the document's tasks and the goal's unknown / in-doubt attempts.

use super::model::{TaskReport, Waiting};

/// Quote `s` for a POSIX shell when it holds anything but plain
/// characters, so a pasted command means exactly this argument.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Where the commands apply.
pub struct Context<'a> {
    pub goal_id: &'a str,
    pub plan_path: &'a str,
}

/// An attempt of the goal (any revision) whose effect is unknown.
pub fn settle(task_ref: &str, op: &str, try_no: i64, reason: Option<&str>) -> Waiting {
    Waiting {
        kind: "settle".into(),
        task_ref: task_ref.into(),
        operation_id: Some(op.into()),
        try_no: Some(try_no),
        why: format!("effect_unknown ({}): it may or may not have taken effect", reason.unwrap_or("no receipt")),
        commands: ["ok", "not_run"]
            .iter()
            .map(|o| format!("engine settle {} --outcome {o} --note TEXT", shell_word(op)))
            .collect(),
    }
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
        commands: Vec::new(),
    }
}

/// A task of the active revision that waits on a person: an approval, the
/// re-send of an operation settled as not run, or a decision on a failure.
/// `awaiting_op` is the operation the engine recorded as awaiting approval.
pub fn of_task(t: &TaskReport, revision: i64, awaiting_op: Option<&str>, cx: &Context) -> Option<Waiting> {
    let latest = t.attempts.iter().rev().find(|a| a.revision == revision);
    let (kind, op, why, commands) = match t.state.as_str() {
        "awaiting_approval" => {
            let op = awaiting_op.unwrap_or(&t.operation_id).to_string();
            let why = t.why.clone().unwrap_or_else(|| "approval required".into());
            let cmd = format!("engine approve {} --note TEXT", shell_word(&op));
            ("approve", op, why, vec![cmd])
        }
        _ if latest.is_some_and(|a| a.state == "settled_not_run") => {
            let a = latest?;
            let why = "settled not_run by a person and not re-sent: the goal's outcome is unproven".to_string();
            ("retry", a.operation_id.clone(), why, vec![format!("engine retry {}", shell_word(&a.operation_id))])
        }
        "failed" => {
            let a = latest?;
            let c = a.classification.as_ref();
            let next = c.map_or("a person decides", |c| c.next.as_str());
            let why = match c {
                Some(c) => format!("failed: {} (rule {}); next: {next}", c.class, c.rule),
                None => "failed".to_string(),
            };
            ("failed", a.operation_id.clone(), why, failure_commands(next, &t.task_ref, &a.operation_id, cx))
        }
        _ => return None,
    };
    Some(Waiting {
        kind: kind.into(),
        task_ref: t.task_ref.clone(),
        operation_id: Some(op),
        try_no: None,
        why,
        commands,
    })
}

/// The commands SPEC's "next step" of a failure class points to.
fn failure_commands(next: &str, task_ref: &str, op: &str, cx: &Context) -> Vec<String> {
    let repair = format!("engine repair {} --goal {}", shell_word(task_ref), shell_word(cx.goal_id));
    let retry = format!("engine retry {}", shell_word(op));
    let revise = format!("engine revise {} --reason TEXT", shell_word(cx.plan_path));
    match next {
        "repair" => vec![repair],
        "revise" => vec![revise],
        "retry or repair" => vec![retry, repair],
        n if n.contains("retry") => vec![retry],
        _ => vec![format!("{repair} --force --note TEXT"), revise],
    }
}

#[cfg(test)]
mod tests {
    use super::{of_task, shell_word, Context};
    use crate::report::document::testdoc::{attempt, task};
    use crate::report::document::Classification;

    const CX: Context = Context { goal_id: "g 1", plan_path: "plans/p.json" };

    #[test]
    fn each_wait_names_its_exact_command() {
        let t = task("T1", &[], "awaiting_approval", Vec::new());
        let w = of_task(&t, 1, Some("op_repair"), &CX).unwrap();
        assert_eq!(
            (w.kind.as_str(), w.commands.clone()),
            ("approve", vec!["engine approve op_repair --note TEXT".to_string()])
        );

        let t = task("T2", &[], "pending", vec![attempt(3, "settled_not_run", "")]);
        let w = of_task(&t, 1, None, &CX).unwrap();
        assert_eq!(
            (w.kind.as_str(), w.commands.clone()),
            ("retry", vec![format!("engine retry {}", t.attempts[0].operation_id)])
        );

        let mut t = task("T 3", &[], "failed", vec![attempt(4, "failed", "")]);
        let class = |next: &str| Classification {
            class: "c".into(),
            rule: "r".into(),
            evidence_ids: vec![1],
            next: next.into(),
        };
        t.attempts[0].classification = Some(class("repair"));
        assert_eq!(of_task(&t, 1, None, &CX).unwrap().commands, vec!["engine repair 'T 3' --goal 'g 1'"]);
        t.attempts[0].classification = Some(class("revise"));
        assert_eq!(of_task(&t, 1, None, &CX).unwrap().commands, vec!["engine revise plans/p.json --reason TEXT"]);
        t.attempts[0].classification = Some(class("a person decides"));
        assert_eq!(
            of_task(&t, 1, None, &CX).unwrap().commands[0],
            "engine repair 'T 3' --goal 'g 1' --force --note TEXT"
        );
        // Nothing waits on a task that succeeded, or on another revision's failure.
        assert!(of_task(&task("T4", &[], "succeeded", Vec::new()), 1, None, &CX).is_none());
        assert!(of_task(&t, 2, None, &CX).is_none());
    }

    #[test]
    fn shell_words_are_quoted_unless_plain() {
        assert_eq!(shell_word("op_0123abc"), "op_0123abc");
        assert_eq!(shell_word("plan.json"), "plan.json");
        assert_eq!(shell_word("T 1"), "'T 1'");
        assert_eq!(shell_word("$(rm -rf ~)"), "'$(rm -rf ~)'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
