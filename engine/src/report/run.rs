//! The end of `engine run`: each task's state, the acceptance checks, and
//! one final line that names what the run waits on.

use serde_json::json;

use super::Output;
use crate::error::{Code, EXIT_TASK_FAILED};
use crate::run::{RunReport, StopReport};
use crate::state::GoalState;

pub fn render(r: &RunReport) -> Output {
    let mut text = format!("goal {} (revision {})\n", r.goal_id, r.revision);
    let width = r.tasks.iter().map(|t| t.task_ref.len()).max().unwrap_or(4).max(4);
    for t in &r.tasks {
        text.push_str(&format!("  {}  {}", super::pad(&t.task_ref, width), t.state));
        if let Some(class) = &t.class {
            text.push_str(&format!("  {class}"));
        }
        if let Some(why) = &t.why {
            text.push_str(&format!(" ({why})"));
        }
        text.push('\n');
    }
    for a in &r.acceptance {
        text.push_str(&format!("  acceptance {}  {}\n", a.id, if a.passed { "passed" } else { "FAILED" }));
    }
    for u in &r.unknown {
        text.push_str(&format!(
            "  unknown: {} (task {}, try {}, request {}, last state {}) — {}\n    settle with: engine settle {} --outcome ok|not_run --note TEXT\n",
            u.operation_id, u.task_ref, u.try_no, super::short(u.request_digest.as_str()), u.last_state, u.reason_text(), u.operation_id
        ));
    }
    text.push_str(&final_line(r));
    text.push('\n');
    // The exit code names the first stop that applies; every other one the
    // run also waits on is named too.
    for also in also_waits_on(r) {
        text.push_str(&format!("  also: {also}\n"));
    }
    Output { text, json: json!(r), exit_code: r.exit_code }
}

/// Stops besides the one the exit code reports (SPEC: every stop names
/// what it waits on).
fn also_waits_on(r: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    let join = |ids: Vec<String>| ids.join(", ");
    if r.code != Some(Code::ExternalEffectUnknown) && !r.unknown.is_empty() {
        out.push(format!(
            "EXTERNAL_EFFECT_UNKNOWN: {}",
            join(r.unknown.iter().map(|u| u.operation_id.to_string()).collect())
        ));
    }
    if r.code != Some(Code::GoalOutcomeUnproven) && !r.settled_not_run.is_empty() {
        out.push(format!(
            "GOAL_OUTCOME_UNPROVEN: settled not_run, not re-sent: {}",
            join(r.settled_not_run.iter().map(|o| o.to_string()).collect())
        ));
    }
    if !matches!(r.code, Some(Code::ApprovalRequired | Code::ApprovalStale)) && !r.awaiting_approval.is_empty() {
        out.push(format!(
            "APPROVAL_REQUIRED: {}",
            join(r.awaiting_approval.iter().map(|a| format!("{} ({})", a.operation_id, a.task_ref)).collect())
        ));
    }
    if r.code != Some(Code::BudgetExhausted) {
        if let Some(b) = &r.budget {
            out.push(format!("BUDGET_EXHAUSTED: {b}{}", way_out(r)));
        }
    }
    if r.exit_code != EXIT_TASK_FAILED && !r.failed.is_empty() {
        out.push(format!("failed task(s): {} (see `engine explain REF`)", r.failed.join(", ")));
    }
    out
}

/// `; <the way out>` of an exhausted budget (its command), if known.
fn way_out(r: &RunReport) -> String {
    r.way_out.as_deref().map(|w| format!("; {w}")).unwrap_or_default()
}

fn final_line(r: &RunReport) -> String {
    if let Some(stop) = &r.stopped {
        return stopped_line(stop);
    }
    match r.code {
        None if r.goal_state == GoalState::Satisfied && r.acceptance_unchecked.is_empty() => {
            "goal satisfied: every task succeeded or was reused, every acceptance check passed, no unknown outcome left".into()
        }
        None if r.goal_state == GoalState::Satisfied => format!(
            "goal satisfied: every task succeeded or was reused, every acceptance check passed, no unknown outcome left; \
             acceptance criteria without a check were not verified: {}",
            r.acceptance_unchecked.join(", ")
        ),
        Some(Code::ExternalEffectUnknown) => format!(
            "EXTERNAL_EFFECT_UNKNOWN: {} operation(s) may or may not have taken effect; a person must settle: {}",
            r.unknown.len(),
            r.unknown.iter().map(|u| format!("{} ({})", u.operation_id, u.task_ref)).collect::<Vec<_>>().join(", ")
        ),
        Some(Code::GoalOutcomeUnproven) => format!(
            "GOAL_OUTCOME_UNPROVEN: settled as not run and not re-sent: {} (re-send with `engine retry OPERATION_ID`)",
            r.settled_not_run.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", ")
        ),
        Some(code @ (Code::ApprovalRequired | Code::ApprovalStale)) => format!(
            "{code}: waiting on a person's approval of {} (give it with `engine approve OPERATION_ID --note TEXT`)",
            r.awaiting_approval
                .iter()
                .map(|u| format!("{} ({}, request {})", u.operation_id, u.task_ref, super::short(u.request_digest.as_str())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(Code::BudgetExhausted) => match &r.budget {
            Some(b) => format!("BUDGET_EXHAUSTED: {b}; nothing was dispatched past the limit{}", way_out(r)),
            None => "BUDGET_EXHAUSTED".into(),
        },
        _ if !r.failed.is_empty() => {
            format!("stopped: task(s) failed: {} (see `engine explain REF`)", r.failed.join(", "))
        }
        _ if r.acceptance.iter().any(|a| !a.passed) => format!(
            "goal not satisfied: acceptance check(s) failed: {}",
            r.acceptance.iter().filter(|a| !a.passed).map(|a| a.id.as_str()).collect::<Vec<_>>().join(", ")
        ),
        _ => "goal not satisfied: some tasks did not complete".into(),
    }
}

/// A run a person stopped: what the stop did, and the command that goes on.
fn stopped_line(s: &StopReport) -> String {
    let mut line = format!("stopped by {}: nothing new was started", s.signal);
    if s.grace_cut {
        line.push_str(" (a second signal: SIGKILL at once)");
    }
    if !s.cancelled.is_empty() {
        line.push_str(&format!("; cancelled, not failed: {}", s.cancelled.join(", ")));
    }
    if !s.acceptance_stopped.is_empty() {
        line.push_str(&format!("; acceptance checks stopped: {}", s.acceptance_stopped.join(", ")));
    }
    line.push_str(&format!("; go on with `{}`", s.next));
    line
}
