//! The end of `engine run`: each task's state, the acceptance checks, and
//! one final line that names what the run waits on.

use serde_json::json;

use super::Output;
use crate::decide::advice::{self, Awaiting, Latest, Scope, Way};
use crate::error::{Code, EXIT_TASK_FAILED};
use crate::run::{ConstraintLine, RunReport, StopReport, TaskLine};
use crate::state::{AttemptState, FailureClass, GoalState, TaskState};

pub fn render(r: &RunReport) -> Output {
    let mut text = format!("goal {} (revision {})\n", r.goal_id, r.revision);
    let next = next_steps(r);
    task_lines(r, &next, &mut text);
    for c in &r.constraints {
        text.push_str(&format!("  {}\n", constraint_line(c)));
    }
    for a in &r.acceptance {
        text.push_str(&format!("  acceptance {}  {}\n", a.id, if a.passed { "passed" } else { "FAILED" }));
    }
    for u in &r.unknown {
        text.push_str(&format!(
            "  unknown: {} (task {}, try {}, request {}): {} — {}\n",
            u.operation_id,
            u.task_ref,
            u.try_no,
            super::short(u.request_digest.as_str()),
            u.known(),
            u.reason_text()
        ));
        // Its task's line says the same ways already: not said twice.
        let ways = advice::settle(u.operation_id.as_str());
        if !next.iter().any(|n| n.task_ref == Some(u.task_ref.as_str()) && n.ways == ways) {
            text.push_str(&super::next::lines(&ways, &r.plan_path, &u.task_ref, "    "));
        }
    }
    if let Some(c) = &r.plan_file_changed {
        text.push_str(&format!(
            "  plan file {} changed during this run (run {}), not by `engine revise`: this run executed revision {} as recorded; \
             `engine revise {} --reason TEXT` shows what the change loosens\n",
            super::escape::for_terminal(&c.path),
            c.run,
            r.revision,
            super::escape::for_terminal(&c.path)
        ));
    }
    text.push_str(&final_line(r));
    text.push('\n');
    // The goal's own way out (a failed check of it); a spent budget's is
    // in the final line already.
    for n in next.iter().filter(|n| n.task_ref.is_none() && r.budget.is_none()) {
        text.push_str(&super::next::lines(&n.ways, &r.plan_path, "", "  "));
    }
    // The exit code names the first stop that applies; every other one the
    // run also waits on is named too.
    for also in also_waits_on(r) {
        text.push_str(&format!("  also: {also}\n"));
    }
    let mut json = json!(r);
    json["next"] = next
        .iter()
        .map(|n| {
            let ways = advice::json(&n.ways, &r.plan_path, n.task_ref.unwrap_or_default());
            json!({"task_ref": n.task_ref, "about": n.about, "ways": ways})
        })
        .collect();
    Output { text, json, exit_code: r.exit_code }
}

/// A line a task: its state, what holds it, the questions it asks, and
/// its ways out.
fn task_lines(r: &RunReport, next: &[Next<'_>], text: &mut String) {
    let width = r.tasks.iter().map(|t| t.task_ref.len()).max().unwrap_or(4).max(4);
    for t in &r.tasks {
        text.push_str(&format!("  {}  {}", super::pad(&t.task_ref, width), task_words(t)));
        if t.settled_by_person {
            text.push_str("  on a person's settlement (settled_ok): its effect was not verified by the engine");
        }
        text.push('\n');
        if let Some(h) = r.held.iter().find(|h| h.task_ref == t.task_ref) {
            text.push_str(&format!("    {}\n", held_words(h)));
        }
        for a in r.awaiting_input.iter().filter(|a| a.task_ref == t.task_ref) {
            for q in &a.questions {
                for line in super::question::lines(q) {
                    text.push_str(&format!("    {line}\n"));
                }
            }
            text.push_str(&format!("    answer with: {}\n", a.answer_with));
        }
        if let Some(n) = next.iter().find(|n| n.task_ref == Some(t.task_ref.as_str())) {
            text.push_str(&super::next::lines(&n.ways, &r.plan_path, &t.task_ref, "    "));
        }
    }
}

/// A task's (or, without a ref, the goal's) ways out.
struct Next<'a> {
    task_ref: Option<&'a str>,
    about: Option<String>,
    ways: Vec<Way>,
}

/// Each task's ways out (`decide::advice`), from what the run reports of
/// it; then the goal's own: a spent budget, or a failed check of the goal
/// when no task is to blame. The goal just run is the store's latest: no
/// `--goal` is needed.
fn next_steps(r: &RunReport) -> Vec<Next<'_>> {
    let scope = Scope { goal_id: r.goal_id.as_str(), goal_is_default: true, plan_path: &r.plan_path };
    let mut out: Vec<Next> = r
        .tasks
        .iter()
        .map(|t| Next { task_ref: Some(&t.task_ref), about: None, ways: advice::of_task(&advice_task(t, r), &scope) })
        .filter(|n| !n.ways.is_empty())
        .collect();
    if let Some(b) = &r.budget {
        let ways = advice::of_budget(b.budget, &crate::decide::raise::suggested(b), &scope);
        out.push(Next { task_ref: None, about: Some(format!("the run stopped on a budget: {b}")), ways });
    }
    if out.is_empty() && r.goal_state == GoalState::Failed {
        let about = Some("the goal's own check failed (an acceptance check, or a constraint's)".to_string());
        out.push(Next { task_ref: None, about, ways: advice::of_goal_check(&scope) });
    }
    out
}

/// A task line as the advice reads it: its latest call is the operation
/// the report names for it (failed, unknown, settled not run, awaiting).
fn advice_task<'a>(t: &'a TaskLine, r: &'a RunReport) -> advice::Task<'a> {
    let unknown = r.unknown.iter().find(|u| u.task_ref == t.task_ref && t.state == TaskState::EffectUnknown);
    let not_run = r.settled_not_run.iter().find(|op| **op == t.operation_id);
    let latest = match (unknown, not_run, t.state) {
        (Some(u), _, _) => Some(Latest {
            operation_id: u.operation_id.as_str(),
            state: AttemptState::EffectUnknown,
            class: None,
            rule: None,
        }),
        (None, Some(op), _) => {
            Some(Latest { operation_id: op.as_str(), state: AttemptState::SettledNotRun, class: None, rule: None })
        }
        (None, None, TaskState::Failed) => Some(Latest {
            operation_id: t.operation_id.as_str(),
            state: AttemptState::Failed,
            class: t.class.as_deref().and_then(FailureClass::parse),
            rule: t.why.as_deref(),
        }),
        _ => None,
    };
    let awaiting = r.awaiting_approval.iter().find(|a| a.task_ref == t.task_ref).map(|a| Awaiting {
        operation_id: a.operation_id.as_str(),
        approved: false,
        asked_by: None,
        instruction: None,
    });
    let same_request = r
        .same_request_unsettled
        .iter()
        .find(|w| w.task_ref == t.task_ref && w.settle.is_some())
        .map(|w| w.first.operation_id.as_str());
    advice::Task { task_ref: &t.task_ref, state: t.state, latest, awaiting, same_request }
}

/// A task's line after its ref: its state as this run left it, and for
/// a task this run did not run, that it did not (`kept`, `reused`,
/// `failed earlier`) — never `succeeded` for work it did not do.
fn task_words(t: &TaskLine) -> String {
    let class = t.class.as_deref().map(|c| format!("  {c}")).unwrap_or_default();
    let why = t.why.as_deref().map(|w| format!(" ({w})")).unwrap_or_default();
    let words = match (t.this_run, t.state) {
        _ if t.upstream.is_some() => {
            t.upstream.as_ref().map(|u| format!("{}  ({})", u.word(), u.reason())).unwrap_or_default()
        }
        (false, TaskState::Succeeded) => "kept  (succeeded in an earlier run; not run this time)".into(),
        (false, TaskState::Reused) => "reused  (from an earlier revision; not run this time)".into(),
        (false, TaskState::Failed) => format!("failed earlier{class}{why}"),
        (true, TaskState::Succeeded) if t.read_back.is_some() => {
            format!("succeeded — {}, read back as present", t.read_back.map_or("", lost_words))
        }
        (_, state) => format!("{state}{class}{why}"),
    };
    // Why the reuse pass ran it again, or kept it (issue 43).
    match &t.rechecked {
        Some(r) => format!("{words}  [{}]", super::escape::for_terminal(r)),
        None => words,
    }
}

/// Why an answer was lost, as the summary says it.
fn lost_words(r: crate::evidence::UnknownReason) -> &'static str {
    use crate::evidence::UnknownReason as R;
    match r {
        R::ResponseLost => "answer lost",
        R::EngineRestarted => "answer lost when the engine stopped",
        R::DeadlineAfterDispatch => "no answer before the deadline",
        R::StoppedAfterDispatch => "answer lost when the run was stopped",
    }
}

/// The command that re-sends an operation settled not run: by its task's
/// ref, as every other advice names it (the goal just run is the default).
/// Its task's own way out when it has one (after a read-back that could
/// not tell, the re-send without it).
fn resend(r: &RunReport, op: &crate::ids::OperationId) -> String {
    let scope = Scope { goal_id: r.goal_id.as_str(), goal_is_default: true, plan_path: &r.plan_path };
    match r.tasks.iter().find(|t| t.operation_id == *op) {
        Some(t) => advice::commands(&advice::of_task(&advice_task(t, r), &scope))
            .into_iter()
            .next()
            .unwrap_or_else(|| format!("engine retry {}", advice::shell_word(&t.task_ref))),
        None => format!("engine retry {}", advice::shell_word(op.as_str())),
    }
}

/// `engine explain T1`, `engine explain T2`: one per failed task.
fn explain_each(refs: &[String]) -> String {
    refs.iter().map(|r| format!("`engine explain {}`", advice::shell_word(r))).collect::<Vec<_>>().join(", ")
}

/// `send_again waits on op_… (task T1 of goal docs, effect_unknown): settle it first: `engine settle …``.
fn same_request_words(w: &crate::run::SameRequestWait) -> String {
    let f = &w.first;
    let way = match &w.settle {
        Some(command) => format!("settle it first: `{command}`"),
        None => format!("a run of goal {} reconciles it first", f.goal_id),
    };
    format!(
        "task {} waits on {} (task {} of goal {}, {}): {way}",
        w.task_ref,
        f.operation_id,
        super::escape::for_terminal(&f.task_ref),
        super::escape::for_terminal(f.goal_id.as_str()),
        f.state
    )
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
    if r.code != Some(Code::InputRequired) && !r.awaiting_input.is_empty() {
        out.push(format!(
            "INPUT_REQUIRED: {}",
            join(r.awaiting_input.iter().map(|a| format!("{} (`{}`)", a.task_ref, a.answer_with)).collect())
        ));
    }
    if r.code != Some(Code::BudgetExhausted) {
        if let Some(b) = &r.budget {
            out.push(format!("BUDGET_EXHAUSTED: {b}{}", way_out(r)));
        }
    }
    if r.code != Some(Code::Held) && !r.held.is_empty() {
        let refs: Vec<&str> = r.held.iter().map(|h| h.task_ref.as_str()).collect();
        out.push(format!("HELD: {} (release with {})", refs.join(", "), release_commands(r)));
    }
    if r.exit_code != EXIT_TASK_FAILED && !r.failed.is_empty() {
        let tasks = super::number(r.failed.len(), "task");
        out.push(format!("failed {tasks}: {} (see {})", r.failed.join(", "), explain_each(&r.failed)));
    }
    out
}

/// `held by ann: the vendor is down (release with `engine release T2`)`.
fn held_words(h: &crate::run::HeldTask) -> String {
    let what = if h.goal { "the goal is held" } else { "held" };
    format!(
        "{what} by {}: {} (release with `{}`)",
        super::escape::for_terminal(&h.by),
        super::escape::for_terminal(&h.reason),
        h.release
    )
}

/// Each distinct release command, quoted.
fn release_commands(r: &RunReport) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for h in &r.held {
        if !seen.contains(&h.release.as_str()) {
            seen.push(&h.release);
        }
    }
    seen.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
}

/// `; <the way out>` of an exhausted budget (its command), if known.
fn way_out(r: &RunReport) -> String {
    r.way_out.as_deref().map(|w| format!("; {w}")).unwrap_or_default()
}

/// A constraint and exactly what this run verified of it.
fn constraint_line(c: &ConstraintLine) -> String {
    let Some(id) = &c.id else {
        return format!("constraint {:?}  not checked by the engine (a plain statement)", c.statement);
    };
    if !c.violated_by.is_empty() {
        return format!("constraint {id}  VIOLATED by {}", c.violated_by.join(", "));
    }
    let mut said = Vec::new();
    if c.protects {
        said.push(match c.attempts_judged {
            0 => "no attempt ran in this run, so its protected paths were not compared".to_string(),
            n => format!(
                "no protected path changed in the {} judged in this run (beyond `may_change`)",
                super::count(n, "attempt")
            ),
        });
    }
    if c.has_check {
        said.push(
            match c.check_passed {
                Some(true) => "its check passed before the acceptance checks",
                Some(false) => "its check FAILED before the acceptance checks",
                None => "its check did not run at the goal's end (not every task completed)",
            }
            .to_string(),
        );
    }
    format!("constraint {id}  {}", said.join("; "))
}

/// The tasks' part of a satisfied run's line: a task that succeeded on a
/// person's settlement is named, never folded into "every task succeeded".
fn tasks_part(r: &RunReport) -> String {
    let settled: Vec<&str> = r.tasks.iter().filter(|t| t.settled_by_person).map(|t| t.task_ref.as_str()).collect();
    if settled.is_empty() {
        return "every task succeeded or was reused".into();
    }
    let rest = if settled.len() == r.tasks.len() { "" } else { ", every other task succeeded or was reused" };
    format!(
        "{} completed only on a person's settlement `settled_ok` (its effect was not verified by the engine){rest}",
        settled.join(", ")
    )
}

fn satisfied_line(r: &RunReport) -> String {
    let tasks = tasks_part(r);
    let mut line = if r.acceptance_checks == 0 {
        format!(
            "goal completed{}: {tasks} and no unknown outcome is left; no acceptance check is declared, so nothing \
             beyond the tasks' own validations was verified",
            match r.constraints_not_checked {
                0 => String::new(),
                n => format!(" ({} not checked)", super::count(n, "constraint")),
            }
        )
    } else if r.constraints_not_checked > 0 {
        format!(
            "goal completed ({} not checked): {tasks}, every acceptance check passed, no unknown \
             outcome left; the plain-statement constraints are not checked by the engine",
            super::count(r.constraints_not_checked, "constraint")
        )
    } else {
        format!("goal satisfied: {tasks}, every acceptance check passed, no unknown outcome left")
    };
    if !r.acceptance_unchecked.is_empty() {
        line.push_str(&format!(
            "; acceptance criteria without a check were not verified: {}",
            r.acceptance_unchecked.join(", ")
        ));
    }
    line
}

/// The INPUT_REQUIRED line: who waits, the command that answers, and what
/// the next run does with it (an approval first, for a repeat of external
/// or paid work).
fn input_required(r: &RunReport) -> String {
    let repeats: Vec<&str> =
        r.awaiting_input.iter().filter(|a| a.approval_first == Some(true)).map(|a| a.task_ref.as_str()).collect();
    let then = match repeats.as_slice() {
        [] => "the next `engine run` sends it".to_string(),
        _ => format!(
            "the next `engine run` sends it; for {} the call that carries it repeats external or paid work, so that run first stops APPROVAL_REQUIRED for a person's `engine approve`",
            repeats.join(", ")
        ),
    };
    format!(
        "INPUT_REQUIRED: waiting on a person's answer to what the MCP server of {} asked (give it with {}; {then})",
        r.awaiting_input.iter().map(|a| a.task_ref.as_str()).collect::<Vec<_>>().join(", "),
        r.awaiting_input.iter().map(|a| format!("`{}`", a.answer_with)).collect::<Vec<_>>().join(", ")
    )
}

fn final_line(r: &RunReport) -> String {
    if let Some(stop) = &r.stopped {
        return stopped_line(stop);
    }
    let broken: Vec<&str> =
        r.constraints.iter().filter(|c| c.check_passed == Some(false)).filter_map(|c| c.id.as_deref()).collect();
    match r.code {
        None if r.goal_state == GoalState::Satisfied => satisfied_line(r),
        Some(Code::SameRequestUnsettled) => format!(
            "SAME_REQUEST_UNSETTLED: not sent, each the same request as an operation whose outcome nobody knows: {}",
            r.same_request_unsettled.iter().map(same_request_words).collect::<Vec<_>>().join("; ")
        ),
        Some(Code::ExternalEffectUnknown) => format!(
            "EXTERNAL_EFFECT_UNKNOWN: {} may or may not have taken effect; a person must settle: {}",
            super::count(r.unknown.len(), "operation"),
            r.unknown.iter().map(|u| format!("{} ({})", u.operation_id, u.task_ref)).collect::<Vec<_>>().join(", ")
        ),
        Some(Code::GoalOutcomeUnproven) => format!(
            "GOAL_OUTCOME_UNPROVEN: settled as not run and not re-sent: {} (re-send with {})",
            r.settled_not_run.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", "),
            r.settled_not_run.iter().map(|o| format!("`{}`", resend(r, o))).collect::<Vec<_>>().join(", ")
        ),
        Some(code @ (Code::ApprovalRequired | Code::ApprovalStale)) => format!(
            "{code}: waiting on a person's approval of {} (give it with {})",
            r.awaiting_approval
                .iter()
                .map(|u| format!(
                    "{} ({}, cost {}, request {})",
                    u.operation_id,
                    u.task_ref,
                    u.cost,
                    super::short(u.request_digest.as_str())
                ))
                .collect::<Vec<_>>()
                .join(", "),
            r.awaiting_approval
                .iter()
                .map(|u| format!("`engine approve {} --note {}`", u.operation_id, advice::SAY))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(Code::InputRequired) => input_required(r),
        Some(Code::Held) => format!(
            "HELD: only work a person holds is left (and what waits on it): {} (release with {})",
            r.held.iter().map(|h| h.task_ref.as_str()).collect::<Vec<_>>().join(", "),
            release_commands(r)
        ),
        Some(Code::BudgetExhausted) => match &r.budget {
            Some(b) => format!("BUDGET_EXHAUSTED: {b}; nothing was dispatched past the limit{}", way_out(r)),
            None => "BUDGET_EXHAUSTED".into(),
        },
        _ if !r.failed.is_empty() => {
            let tasks = super::number(r.failed.len(), "task");
            format!("stopped: {tasks} failed: {} (see {})", r.failed.join(", "), explain_each(&r.failed))
        }
        _ if !broken.is_empty() => format!(
            "goal not satisfied: {} violated: {} (the check failed before the acceptance checks)",
            super::number(broken.len(), "constraint"),
            broken.join(", ")
        ),
        _ if r.acceptance.iter().any(|a| !a.passed) => format!(
            "goal not satisfied: acceptance {} failed: {}",
            super::number(r.acceptance.iter().filter(|a| !a.passed).count(), "check"),
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
