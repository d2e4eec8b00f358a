//! A provider's answer judged on the provider's own terms: the receipt's
//! verdict, as a pure decision. The driver reports the facts it read in
//! the receipt's transaction and records what this decides
//! (`run::driver::receipt`); it picks nothing itself. Whether an answer
//! is a success on the provider's own terms is decided here too, by kind.

use providers::{BuiltinReceipt, CommandReceipt, ExitStatus, McpReceipt};
use serde_json::Value;

/// What the receipt's verdict looks at: `Q`, the question a server asked a
/// person; `S`, the scope it wants; `O`, what a task judged by its
/// receipt alone is checked against (each passed through to the verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<Q, S, O> {
    /// The answer is a question for a person (an MCP server asked).
    pub question: Option<Q>,
    /// The server refused the call for want of this scope.
    pub step_up_scope: Option<S>,
    /// On the provider's terms the answer is a success (exit 0, a 2xx, a
    /// result that is no error, an agent's report that says so, no
    /// undeclared spending).
    pub ok: bool,
    /// The task is judged by its receipt alone: the checkpoint observed now.
    pub unchecked: Option<O>,
    /// The attempt changed a path the engine protects (judged with the
    /// receipt when the task is judged by it alone).
    pub protected_changed: bool,
    /// The engine's deadline killed an external-effect command part-way.
    pub timed_out_unsafe: bool,
}

/// The receipt's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement<Q, S, O> {
    /// A question for a person: the task waits `awaiting_input`.
    AwaitingInput(Q),
    /// Refused for want of a scope: failed, the task waits for a login.
    AwaitsLogin(S),
    /// Judged by its receipt alone, and it holds: succeeded.
    Succeeded(O),
    /// Its validations (or the goal's checks) judge it next.
    Validate,
    /// Nobody can tell whether the effect happened: `effect_unknown`.
    Unknown,
    /// Failed, to be classified from its evidence.
    Failed,
}

/// The receipt's verdict: a person's question first, then a refusal for
/// scope, then success (unless a task judged by its receipt alone changed
/// a protected path), then an external command the deadline cut part-way
/// (unknown: a crash must not leave it looking like an ordinary receipt),
/// else a failure.
pub fn judge<Q, S, O>(f: Facts<Q, S, O>) -> Judgement<Q, S, O> {
    if let Some(q) = f.question {
        return Judgement::AwaitingInput(q);
    }
    if let Some(s) = f.step_up_scope {
        return Judgement::AwaitsLogin(s);
    }
    if f.ok {
        match f.unchecked {
            None => return Judgement::Validate,
            Some(o) if !f.protected_changed => return Judgement::Succeeded(o),
            Some(_) => {}
        }
    }
    if f.timed_out_unsafe {
        return Judgement::Unknown;
    }
    Judgement::Failed
}

/// A command's answer is a success on its own terms: it exited 0, within
/// its time, and left no process of its own behind.
pub fn command_ok(r: &CommandReceipt) -> bool {
    !r.timed_out && r.descendants.is_none() && matches!(r.exit, Some(ExitStatus::Code { code: 0 }))
}

/// An HTTP answer is a success on its own terms: a 2xx status.
pub fn http_ok(status: u16) -> bool {
    (200..300).contains(&status)
}

/// An MCP tool's answer is a success on its own terms: no tool error, and
/// a result that matches the tool's declared output.
pub fn mcp_ok(r: &McpReceipt) -> bool {
    r.tool_error.is_none() && r.output_invalid.is_none()
}

/// A builtin's answer is a success unless its time ran out.
pub fn builtin_ok(r: &BuiltinReceipt) -> bool {
    !r.timed_out
}

/// What an agent said of its own work: its report is the last line of its
/// stdout that is not blank, a JSON object whose `status` is `done` or
/// `failed`; anything else is output the engine cannot read.
pub fn agent_report(stdout_tail: &str) -> Result<Value, String> {
    let line = stdout_tail.lines().rev().find(|l| !l.trim().is_empty()).ok_or("no report line on stdout")?;
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| format!("last stdout line is not JSON: {e}"))?;
    match v.get("status").and_then(Value::as_str) {
        Some("done") | Some("failed") => Ok(v),
        _ => Err("report has no `status` of \"done\" or \"failed\"".to_string()),
    }
}

/// The agent's report says its work failed (the answer is then no success,
/// whatever the command's exit).
pub fn agent_failed(report: &Value) -> bool {
    report.get("status").and_then(Value::as_str) == Some("failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    type F = Facts<&'static str, &'static str, ()>;

    fn ok() -> F {
        Facts {
            question: None,
            step_up_scope: None,
            ok: true,
            unchecked: None,
            protected_changed: false,
            timed_out_unsafe: false,
        }
    }

    #[test]
    fn a_question_for_a_person_comes_before_anything_else() {
        let f = Facts { question: Some("q"), step_up_scope: Some("repo"), timed_out_unsafe: true, ..ok() };
        assert_eq!(judge(f), Judgement::AwaitingInput("q"));
        assert_eq!(judge(Facts { step_up_scope: Some("repo"), ok: false, ..ok() }), Judgement::AwaitsLogin("repo"));
    }

    #[test]
    fn a_good_answer_is_validated_or_succeeds_by_its_receipt_alone() {
        assert_eq!(judge(ok()), Judgement::Validate);
        // Protected paths are judged with the receipt only for a task judged by it.
        assert_eq!(judge(Facts { protected_changed: true, ..ok() }), Judgement::Validate);
        assert_eq!(judge(Facts { unchecked: Some(()), ..ok() }), Judgement::Succeeded(()));
        let broke = Facts { unchecked: Some(()), protected_changed: true, ..ok() };
        assert_eq!(judge(broke), Judgement::Failed);
    }

    #[test]
    fn an_external_command_cut_by_the_deadline_is_unknown_never_failed() {
        assert_eq!(judge(Facts { ok: false, timed_out_unsafe: true, ..ok() }), Judgement::Unknown);
        let broke = Facts { unchecked: Some(()), protected_changed: true, timed_out_unsafe: true, ..ok() };
        assert_eq!(judge(broke), Judgement::Unknown);
        assert_eq!(judge(Facts { ok: false, ..ok() }), Judgement::Failed);
    }

    fn command(exit: Option<ExitStatus>, timed_out: bool) -> CommandReceipt {
        CommandReceipt {
            exit,
            stdout: Default::default(),
            stderr: Default::default(),
            timed_out,
            duration_ms: 1,
            descendants: None,
        }
    }

    #[test]
    fn a_command_succeeds_only_by_exit_0_in_time_and_leaving_nothing_behind() {
        assert!(command_ok(&command(Some(ExitStatus::Code { code: 0 }), false)));
        assert!(!command_ok(&command(Some(ExitStatus::Code { code: 1 }), false)));
        assert!(!command_ok(&command(Some(ExitStatus::Signal { signal: 9 }), false)));
        assert!(!command_ok(&command(None, false)), "no exit seen is no success");
        assert!(!command_ok(&command(Some(ExitStatus::Code { code: 0 }), true)), "cut by its deadline");
        let left = providers::Descendants { processes: vec![], grace_ms: 100, ended: true };
        let behind =
            CommandReceipt { descendants: Some(Box::new(left)), ..command(Some(ExitStatus::Code { code: 0 }), false) };
        assert!(!command_ok(&behind), "a process left behind");
    }

    #[test]
    fn an_http_answer_succeeds_only_with_a_2xx() {
        assert!(http_ok(200) && http_ok(204) && http_ok(299));
        assert!(!http_ok(199) && !http_ok(300) && !http_ok(304) && !http_ok(429) && !http_ok(500));
    }

    #[test]
    fn a_tool_result_succeeds_without_a_tool_error_or_an_invalid_output() {
        let r = McpReceipt {
            result: Default::default(),
            tool_error: None,
            stderr: Default::default(),
            http_status: None,
            retry_after_seconds: None,
            duration_ms: 1,
            output_invalid: None,
            input: None,
            step_up_scope: None,
        };
        assert!(mcp_ok(&r));
        assert!(!mcp_ok(&McpReceipt { tool_error: Some("no such repo".into()), ..r.clone() }));
        assert!(!mcp_ok(&McpReceipt { output_invalid: Some("missing `id`".into()), ..r }));
    }

    #[test]
    fn a_builtin_succeeds_unless_its_time_ran_out() {
        let r = BuiltinReceipt { op: providers::builtin::Op::Noop, timed_out: false, duration_ms: 1 };
        assert!(builtin_ok(&r));
        assert!(!builtin_ok(&BuiltinReceipt { timed_out: true, ..r }));
    }

    #[test]
    fn an_agent_report_is_its_last_line_and_says_done_or_failed() {
        let done = agent_report("working\n{\"status\": \"done\"}\n\n").expect("a report");
        assert!(!agent_failed(&done));
        let failed = agent_report("{\"status\": \"failed\", \"why\": \"tests\"}").expect("a report");
        assert!(agent_failed(&failed));
        assert!(agent_report("").is_err_and(|e| e.contains("no report line")));
        assert!(agent_report("{\"status\": \"done\"}\nbye").is_err_and(|e| e.contains("not JSON")));
        assert!(agent_report("{\"status\": \"maybe\"}").is_err_and(|e| e.contains("`status`")));
    }
}
