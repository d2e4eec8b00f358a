//! What a person does next, as the exact commands to type: one decision
//! from a task's state and its latest attempt's classification, used by
//! every printer (`status`, `explain`, `run`'s summary, the report's
//! buttons, `--json`, the refusals of `retry`, `repair` and `revise`), so
//! no two of them can send a person round in a circle.
//!
//! A way out is a command that works as printed in that state. Where the
//! engine cannot do a part itself (correct the plan, bring a service back,
//! put a file right), the way says so first (`Before`), in words; the only
//! placeholder in a command is `SAY`, where a person must supply the text
//! (a note, a reason).

use crate::decide::budget::BudgetName;
use crate::state::{AttemptKind, AttemptState, FailureClass, TaskState};

/// The placeholder for text only a person can give (`--note "…"`).
pub const SAY: &str = "\"…\"";

/// Where the commands apply.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub goal_id: &'a str,
    /// A command without `--goal` acts on this goal (it is the store's
    /// latest); otherwise the commands that take `--goal` name it.
    pub goal_is_default: bool,
    /// The plan file the active revision was recorded from.
    pub plan_path: &'a str,
}

/// A task of the active revision, as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct Task<'a> {
    pub task_ref: &'a str,
    pub state: TaskState,
    /// Its latest attempt in the active revision (abandoned ones aside).
    pub latest: Option<Latest<'a>>,
    /// For `awaiting_approval`: the operation it waits on, and whether a
    /// person already approved it (then the call that spends it is next).
    pub awaiting: Option<Awaiting<'a>>,
    /// For a task blocked because its request is the same as another
    /// operation's whose outcome is unknown: that operation (a person
    /// settles it, then the task goes on).
    pub same_request: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
pub struct Latest<'a> {
    pub operation_id: &'a str,
    pub state: AttemptState,
    pub class: Option<FailureClass>,
    pub rule: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
pub struct Awaiting<'a> {
    pub operation_id: &'a str,
    pub approved: bool,
    /// The kind of call the gate stopped: the same command makes it again.
    pub asked_by: Option<AttemptKind>,
    /// A stopped repair's instruction (it is part of the request).
    pub instruction: Option<&'a str>,
}

/// What a person must do before the command, because the engine cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// The request itself is wrong: change it in the plan file.
    CorrectRequest,
    /// The request was right; what it needs (a file, a service) was not.
    FixWhatItNeeds,
    /// A program, a permission or an input the engine named is missing.
    FixEnvironment,
    /// The provider said it is unavailable: wait until it answers again.
    ProviderBack,
    /// The attempt changed a protected path: put back whatever of it is
    /// still changed (nothing, when it is back as it was).
    UndoProtectedChange,
    /// A goal constraint's own check failed after the attempt.
    FixWhatTheConstraintCheckFound,
    /// The task spent (by its provider's report) without `may_spend`.
    DeclareSpending,
    /// The attempt wrote files its task does not declare: declare them.
    DeclareOutputs,
    /// … or undo them.
    UndoUndeclaredWrite,
    /// The call ran out of time.
    MoreTime,
    /// A task's declared `outputs` passed a bound.
    NarrowOutputs,
    /// No rule explains the failure: a person reads the evidence.
    ReadTheEvidence,
    /// A check of the goal (acceptance or constraint) failed.
    FixWhatTheCheckFound,
    /// A repair would only repeat the last two failures.
    ChangeAnInput,
}

impl Before {
    /// In words, for `plan` and `task_ref`; the command follows ", then".
    pub fn words(self, plan: &str, task_ref: &str) -> String {
        let explain = format!("`engine explain {}`", shell_word(task_ref));
        match self {
            Before::CorrectRequest => format!("correct task {task_ref}'s request in {plan}"),
            Before::FixWhatItNeeds => format!("if the request was right, fix what it needs ({explain} shows it)"),
            Before::FixEnvironment => format!("fix what {explain} names (a program, a permission, an input)"),
            Before::ProviderBack => "once the provider answers again".to_string(),
            Before::UndoProtectedChange => {
                format!("put back any protected path {explain} names that is still changed (none, if it is back as it was)")
            }
            Before::FixWhatTheConstraintCheckFound => format!("fix what the constraint check {explain} shows found"),
            Before::DeclareSpending => format!(
                "if task {task_ref} may make paid calls, declare `\"may_spend\": true` for it in {plan} (a loosening a person approves)"
            ),
            Before::DeclareOutputs => {
                format!("if task {task_ref} should write them, put the `outputs` line {explain} names in {plan}")
            }
            Before::UndoUndeclaredWrite => format!("undo the undeclared writes {explain} names"),
            Before::MoreTime => format!("raise task {task_ref}'s `timeout_seconds` in {plan}"),
            Before::NarrowOutputs => format!("narrow task {task_ref}'s `outputs` in {plan}"),
            Before::ReadTheEvidence => format!("read {explain} and fix what it shows"),
            Before::FixWhatTheCheckFound => "fix what the failed check found".to_string(),
            Before::ChangeAnInput => format!("change what task {task_ref} reads (an input it declares)"),
        }
    }
}

/// One way out: what comes first (if anything), then the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Way {
    pub before: Option<Before>,
    pub command: String,
}

impl Way {
    fn run(command: String) -> Way {
        Way { before: None, command }
    }

    fn after(before: Before, command: String) -> Way {
        Way { before: Some(before), command }
    }

    /// `` `engine retry T` `` or `` fix …, then `engine retry T` ``.
    pub fn words(&self, plan: &str, task_ref: &str) -> String {
        match self.before {
            Some(b) => format!("{}, then `{}`", b.words(plan, task_ref), self.command),
            None => format!("`{}`", self.command),
        }
    }
}

/// Every way out, in one line: `a; or b`.
pub fn sentence(ways: &[Way], plan: &str, task_ref: &str) -> String {
    ways.iter().map(|w| w.words(plan, task_ref)).collect::<Vec<_>>().join("; or ")
}

/// `[{"first": words or null, "command": line}]`, as `--json` gives them.
pub fn json(ways: &[Way], plan: &str, task_ref: &str) -> serde_json::Value {
    let ways = ways
        .iter()
        .map(|w| serde_json::json!({"first": w.before.map(|b| b.words(plan, task_ref)), "command": w.command}));
    serde_json::Value::Array(ways.collect())
}

/// The commands, one per way (the report's buttons, scripts).
pub fn commands(ways: &[Way]) -> Vec<String> {
    ways.iter().map(|w| w.command.clone()).collect()
}

/// The ways out of `task`'s state; none when nothing waits on a person
/// (it succeeded, it runs, it waits on a dependency).
pub fn of_task(t: &Task, scope: &Scope) -> Vec<Way> {
    let cmd = Commands { scope, task_ref: t.task_ref };
    if let Some(a) = t.awaiting.filter(|_| t.state == TaskState::AwaitingApproval) {
        return vec![match a.approved {
            false => Way::run(format!("engine approve {} --note {SAY}", shell_word(a.operation_id))),
            true => Way::run(cmd.spending(&a, t.latest.and_then(|l| l.class))),
        }];
    }
    if let Some(first) = t.same_request.filter(|_| t.state == TaskState::Blocked) {
        return settle(first);
    }
    let latest = t.latest;
    match (t.state, latest.map(|l| l.state)) {
        // Settled `not_run`, then a retry's read-back could not tell
        // whether it took effect (nothing sent): a plain retry would only
        // read back again. The way out is the person's word instead.
        (TaskState::EffectUnknown, Some(AttemptState::SettledNotRun)) => vec![Way::run(cmd.retry_without_read_back())],
        (TaskState::EffectUnknown, _) | (_, Some(AttemptState::EffectUnknown)) => match latest {
            Some(l) if l.state == AttemptState::EffectUnknown => settle(l.operation_id),
            // An earlier try is unknown: `status` names the operation.
            _ => vec![Way::run(cmd.on_goal("engine status"))],
        },
        (_, Some(AttemptState::SettledNotRun)) => vec![Way::run(cmd.retry())],
        (TaskState::Failed, _) => {
            let class = latest.and_then(|l| l.class).unwrap_or(FailureClass::Unclassified);
            of_failure(class, latest.and_then(|l| l.rule), &cmd)
        }
        // Left by a stopped run or a settlement `ok` waiting for its
        // validations: a plain run goes on. A pending task waits on a run
        // already (or on a budget: the goal's way out, `of_budget`).
        (TaskState::Cancelled, _) | (TaskState::Running, Some(AttemptState::SettledOk)) => vec![Way::run(cmd.run())],
        _ => Vec::new(),
    }
}

/// The ways out of an unknown outcome: a person's settlement, either way.
pub fn settle(operation_id: &str) -> Vec<Way> {
    ["ok", "not_run"]
        .iter()
        .map(|o| Way::run(format!("engine settle {} --outcome {o} --note {SAY}", shell_word(operation_id))))
        .collect()
}

/// The ways out of a failure, by its class (and, where one class holds
/// failures with different ways out, its rule).
fn of_failure(class: FailureClass, rule: Option<&str>, cmd: &Commands) -> Vec<Way> {
    let revise = || cmd.revise();
    match class {
        FailureClass::ValidationFailed => vec![Way::run(cmd.repair(false))],
        FailureClass::ConstraintViolated => of_violation(rule, cmd),
        FailureClass::ProviderRejected => {
            vec![Way::after(Before::CorrectRequest, revise()), Way::after(Before::FixWhatItNeeds, cmd.repair(true))]
        }
        FailureClass::ProviderUnavailable => vec![Way::after(Before::ProviderBack, cmd.retry())],
        // Out of time after the call left: more time is a change of plan.
        FailureClass::Timeout if rule == Some("engine_deadline_after_dispatch") => {
            vec![Way::run(cmd.retry()), Way::after(Before::MoreTime, revise())]
        }
        FailureClass::Timeout => vec![Way::run(cmd.retry())],
        FailureClass::Killed => vec![Way::run(cmd.retry()), Way::run(cmd.repair(false))],
        FailureClass::Environment if rule == Some("outputs_over_limit") => {
            vec![Way::after(Before::NarrowOutputs, revise())]
        }
        FailureClass::Environment => vec![Way::after(Before::FixEnvironment, cmd.retry())],
        // A failed attempt is never unknown; should the ledger say so, the
        // task's status is where to look.
        FailureClass::EffectUnknown => vec![Way::run(cmd.on_goal("engine status"))],
        FailureClass::Unclassified => {
            vec![Way::after(Before::ReadTheEvidence, cmd.repair(true)), Way::after(Before::CorrectRequest, revise())]
        }
    }
}

/// The ways out of a violated constraint, by its rule: what a person
/// does first differs (put a file back, fix what a check found, declare
/// what the task may do), the repair after it does not.
fn of_violation(rule: Option<&str>, cmd: &Commands) -> Vec<Way> {
    let loosen = || format!("{} --approve-loosening", cmd.revise());
    match rule {
        Some("constraint_check_failed") => vec![Way::after(Before::FixWhatTheConstraintCheckFound, cmd.repair(false))],
        Some("spending_not_declared") => {
            vec![
                Way::after(Before::DeclareSpending, loosen()),
                Way::run(format!("{} --instruction {SAY}", cmd.repair(false))),
            ]
        }
        Some("undeclared_write") => {
            vec![
                Way::after(Before::DeclareOutputs, cmd.revise()),
                Way::after(Before::UndoUndeclaredWrite, cmd.repair(false)),
            ]
        }
        _ => vec![Way::after(Before::UndoProtectedChange, cmd.repair(false))],
    }
}

/// The ways out of a repair refused as a repetition (its last two
/// failures alike, and neither its inputs nor the instruction changed):
/// something must be new.
pub fn after_repetition(task_ref: &str, class: FailureClass, scope: &Scope) -> Vec<Way> {
    let cmd = Commands { scope, task_ref };
    let force = crate::decide::repair::needs_force(class);
    vec![
        Way::after(Before::ChangeAnInput, cmd.repair(force)),
        Way::run(format!("{} --instruction {SAY}", cmd.repair(force))),
        Way::after(Before::CorrectRequest, cmd.revise()),
    ]
}

/// The ways out of an exhausted budget: a person raises it to `to` (one
/// more run is no way past a count or a cost); the deadline bounds one run
/// of work, so a new run is a way too.
pub fn of_budget(budget: BudgetName, to: &str, scope: &Scope) -> Vec<Way> {
    let plan = shell_word(scope.plan_path);
    let raise = Way::run(format!("engine revise {plan} --reason {SAY} --raise {budget}={to}"));
    match budget {
        BudgetName::DeadlineSeconds => vec![Way::run(format!("engine run {plan}")), raise],
        _ => vec![raise],
    }
}

/// The ways out of a goal whose every task completed but whose own check
/// (acceptance, or a constraint's) failed: a plain run checks again.
pub fn of_goal_check(scope: &Scope) -> Vec<Way> {
    vec![Way::after(Before::FixWhatTheCheckFound, format!("engine run {}", shell_word(scope.plan_path)))]
}

/// The command lines, for one task in one scope.
struct Commands<'a> {
    scope: &'a Scope<'a>,
    task_ref: &'a str,
}

impl Commands<'_> {
    /// `base` with `--goal ID` when the goal is not the store's default.
    fn on_goal(&self, base: &str) -> String {
        match self.scope.goal_is_default {
            true => base.to_string(),
            false => format!("{base} --goal {}", shell_word(self.scope.goal_id)),
        }
    }

    fn task(&self, verb: &str) -> String {
        self.on_goal(&format!("engine {verb} {}", shell_word(self.task_ref)))
    }

    fn run(&self) -> String {
        format!("engine run {}", shell_word(self.scope.plan_path))
    }

    fn retry(&self) -> String {
        self.task("retry")
    }

    fn retry_without_read_back(&self) -> String {
        format!("{} --without-read-back --reason {SAY}", self.retry())
    }

    fn repair(&self, force: bool) -> String {
        match force {
            true => format!("{} --force --note {SAY}", self.task("repair")),
            false => self.task("repair"),
        }
    }

    fn revise(&self) -> String {
        format!("engine revise {} --reason {SAY}", shell_word(self.scope.plan_path))
    }

    /// The command whose call spends a given approval: the one that asked
    /// (a repair as it was asked: forced again where the failure it
    /// repairs needs it, with its instruction, part of its request).
    fn spending(&self, a: &Awaiting, failed_as: Option<FailureClass>) -> String {
        match a.asked_by {
            Some(AttemptKind::Retry) => self.retry(),
            Some(AttemptKind::Repair) => {
                let force = failed_as.is_some_and(crate::decide::repair::needs_force);
                match a.instruction {
                    Some(i) => format!("{} --instruction {}", self.repair(force), shell_word(i)),
                    None => self.repair(force),
                }
            }
            Some(AttemptKind::Run | AttemptKind::Rerun) | None => self.run(),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: Scope = Scope { goal_id: "g", goal_is_default: true, plan_path: "plan.json" };

    fn failed(class: FailureClass, rule: &'static str) -> Task<'static> {
        Task {
            task_ref: "T1",
            state: TaskState::Failed,
            latest: Some(Latest {
                operation_id: "op_1",
                state: AttemptState::Failed,
                class: Some(class),
                rule: Some(rule),
            }),
            awaiting: None,
            same_request: None,
        }
    }

    fn lines(t: &Task, scope: &Scope) -> Vec<String> {
        commands(&of_task(t, scope))
    }

    #[test]
    fn every_failure_class_has_a_way_out_and_none_is_a_circle() {
        for class in FailureClass::ALL {
            let ways = of_task(&failed(*class, "r"), &SCOPE);
            assert!(!ways.is_empty(), "{class}");
            for w in &ways {
                assert!(w.command.starts_with("engine "), "{class}: {w:?}");
                // `retry` only where a retry is allowed for the class, and
                // `repair` without --force only where it needs none.
                if w.command.starts_with("engine retry") {
                    assert!(crate::decide::retry::class_is_retryable(*class), "{class}");
                }
                if w.command.starts_with("engine repair") {
                    let forced = w.command.contains("--force --note");
                    assert_eq!(forced, crate::decide::repair::needs_force(*class), "{class}: {}", w.command);
                }
                // `revise` only after the plan changes: a plan unchanged has
                // nothing to revise.
                if w.command.starts_with("engine revise") {
                    assert!(w.before.is_some(), "{class}: revise with nothing changed first");
                }
            }
        }
    }

    #[test]
    fn a_plain_command_failure_leads_out_by_revise_or_a_forced_repair() {
        let t = failed(FailureClass::ProviderRejected, "action_exit_nonzero");
        assert_eq!(
            lines(&t, &SCOPE),
            vec!["engine revise plan.json --reason \"…\"", "engine repair T1 --force --note \"…\""]
        );
        let ways = of_task(&t, &SCOPE);
        assert_eq!(
            sentence(&ways, "plan.json", "T1"),
            "correct task T1's request in plan.json, then `engine revise plan.json --reason \"…\"`; \
             or if the request was right, fix what it needs (`engine explain T1` shows it), then \
             `engine repair T1 --force --note \"…\"`"
        );
    }

    #[test]
    fn each_constraint_rule_gets_advice_that_fits_it() {
        let words =
            |rule| sentence(&of_task(&failed(FailureClass::ConstraintViolated, rule), &SCOPE), "plan.json", "T1");
        // A protected path: put back what is still changed, if anything.
        let protected = words("protected_path_changed");
        assert!(protected.starts_with("put back any protected path `engine explain T1` names that is still changed (none, if it is back as it was), then `engine repair T1`"), "{protected}");
        // Spending: declare it (a loosening), or repair without it; never
        // the protected-path words.
        let spending = words("spending_not_declared");
        assert!(spending.contains("`\"may_spend\": true`"), "{spending}");
        assert!(spending.contains("`engine revise plan.json --reason \"…\" --approve-loosening`"), "{spending}");
        assert!(spending.contains("`engine repair T1 --instruction \"…\"`"), "{spending}");
        assert!(!spending.contains("protected"), "{spending}");
        // A constraint's check: what it found.
        let check = words("constraint_check_failed");
        assert!(check.starts_with("fix what the constraint check `engine explain T1` shows found"), "{check}");
        assert!(!check.contains("protected"), "{check}");
        // Undeclared writes: declare them as outputs, or undo them.
        let writes = words("undeclared_write");
        assert!(
            writes.contains("`outputs` line `engine explain T1` names in plan.json, then `engine revise"),
            "{writes}"
        );
        assert!(
            writes.contains("undo the undeclared writes `engine explain T1` names, then `engine repair T1`"),
            "{writes}"
        );
        assert!(!writes.contains("protected"), "{writes}");
    }

    #[test]
    fn each_class_names_its_commands() {
        let cases = [
            (FailureClass::ValidationFailed, "validation_check_failed", vec!["engine repair T1"]),
            (FailureClass::ConstraintViolated, "protected_path_changed", vec!["engine repair T1"]),
            (
                FailureClass::ConstraintViolated,
                "undeclared_write",
                vec!["engine revise plan.json --reason \"…\"", "engine repair T1"],
            ),
            (FailureClass::ProviderUnavailable, "http_rate_limited_or_unavailable", vec!["engine retry T1"]),
            (FailureClass::Timeout, "deadline_before_dispatch", vec!["engine retry T1"]),
            (
                FailureClass::Timeout,
                "engine_deadline_after_dispatch",
                vec!["engine retry T1", "engine revise plan.json --reason \"…\""],
            ),
            (FailureClass::Killed, "killed_by_signal", vec!["engine retry T1", "engine repair T1"]),
            (FailureClass::Environment, "environment_error", vec!["engine retry T1"]),
            (FailureClass::Environment, "outputs_over_limit", vec!["engine revise plan.json --reason \"…\""]),
            (
                FailureClass::Unclassified,
                "no_direct_evidence",
                vec!["engine repair T1 --force --note \"…\"", "engine revise plan.json --reason \"…\""],
            ),
        ];
        for (class, rule, want) in cases {
            assert_eq!(lines(&failed(class, rule), &SCOPE), want, "{class} {rule}");
        }
    }

    #[test]
    fn a_spent_budget_is_raised_and_a_spent_deadline_may_also_run_again() {
        assert_eq!(
            commands(&of_budget(BudgetName::MaxProviderCalls, "4", &SCOPE)),
            vec!["engine revise plan.json --reason \"…\" --raise max_provider_calls=4"]
        );
        assert_eq!(
            commands(&of_budget(BudgetName::DeadlineSeconds, "120", &SCOPE)),
            vec!["engine run plan.json", "engine revise plan.json --reason \"…\" --raise deadline_seconds=120"]
        );
    }

    #[test]
    fn a_repetition_asks_for_something_new() {
        let ways = after_repetition("T1", FailureClass::ValidationFailed, &SCOPE);
        assert_eq!(
            commands(&ways),
            vec!["engine repair T1", "engine repair T1 --instruction \"…\"", "engine revise plan.json --reason \"…\""]
        );
        assert_eq!(ways[0].before, Some(Before::ChangeAnInput));
        let forced = after_repetition("T1", FailureClass::ProviderRejected, &SCOPE);
        assert_eq!(forced[1].command, "engine repair T1 --force --note \"…\" --instruction \"…\"");
    }

    #[test]
    fn a_goal_that_is_not_the_default_is_named() {
        let scope = Scope { goal_id: "money totals", goal_is_default: false, plan_path: "my plans/p.json" };
        assert_eq!(
            lines(&failed(FailureClass::Killed, "killed_by_signal"), &scope),
            vec!["engine retry T1 --goal 'money totals'", "engine repair T1 --goal 'money totals'"]
        );
        assert_eq!(
            lines(&failed(FailureClass::ProviderRejected, "tool_error"), &scope)[0],
            "engine revise 'my plans/p.json' --reason \"…\""
        );
    }

    #[test]
    fn waits_on_a_person_name_their_act() {
        let unknown = Latest { operation_id: "op_9", state: AttemptState::EffectUnknown, class: None, rule: None };
        let t = Task {
            task_ref: "T1",
            state: TaskState::EffectUnknown,
            latest: Some(unknown),
            awaiting: None,
            same_request: None,
        };
        assert_eq!(
            lines(&t, &SCOPE),
            vec!["engine settle op_9 --outcome ok --note \"…\"", "engine settle op_9 --outcome not_run --note \"…\""]
        );
        let not_run = Latest { state: AttemptState::SettledNotRun, ..unknown };
        let t = Task { state: TaskState::Pending, latest: Some(not_run), ..t };
        assert_eq!(lines(&t, &SCOPE), vec!["engine retry T1"]);
        let settled_ok = Latest { state: AttemptState::SettledOk, ..unknown };
        let t = Task { state: TaskState::Running, latest: Some(settled_ok), ..t };
        assert_eq!(lines(&t, &SCOPE), vec!["engine run plan.json"]);
        // Settled not run, then the retry's read-back could not tell: never
        // a plain retry again (it would only read back again).
        let t = Task { state: TaskState::EffectUnknown, latest: Some(not_run), ..t };
        assert_eq!(lines(&t, &SCOPE), vec!["engine retry T1 --without-read-back --reason \"…\""]);

        let mut awaiting = Awaiting { operation_id: "op_5", approved: false, asked_by: None, instruction: None };
        let t = Task {
            task_ref: "T1",
            state: TaskState::AwaitingApproval,
            latest: None,
            awaiting: Some(awaiting),
            same_request: None,
        };
        assert_eq!(lines(&t, &SCOPE), vec!["engine approve op_5 --note \"…\""]);
        awaiting.approved = true;
        let spend = |asked_by, instruction| {
            let a = Awaiting { asked_by, instruction, ..awaiting };
            lines(&Task { awaiting: Some(a), ..t }, &SCOPE)
        };
        assert_eq!(spend(None, None), vec!["engine run plan.json"]);
        assert_eq!(spend(Some(AttemptKind::Retry), None), vec!["engine retry T1"]);
        assert_eq!(
            spend(Some(AttemptKind::Repair), Some("use cents")),
            vec!["engine repair T1 --instruction 'use cents'"]
        );
        // A repair of a failure that needs a person's word needs it again.
        let failed = Latest {
            operation_id: "op_1",
            state: AttemptState::Failed,
            class: Some(FailureClass::Unclassified),
            rule: None,
        };
        let a = Awaiting { asked_by: Some(AttemptKind::Repair), ..awaiting };
        assert_eq!(
            lines(&Task { latest: Some(failed), awaiting: Some(a), ..t }, &SCOPE),
            vec!["engine repair T1 --force --note \"…\""]
        );
    }

    #[test]
    fn nothing_is_advised_where_nothing_waits_on_a_person() {
        for state in
            [TaskState::Succeeded, TaskState::Reused, TaskState::Blocked, TaskState::Running, TaskState::Pending]
        {
            let t = Task { task_ref: "T1", state, latest: None, awaiting: None, same_request: None };
            assert!(of_task(&t, &SCOPE).is_empty(), "{state}");
        }
        let t = Task { task_ref: "T1", state: TaskState::Cancelled, latest: None, awaiting: None, same_request: None };
        assert_eq!(lines(&t, &SCOPE), vec!["engine run plan.json"]);
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
