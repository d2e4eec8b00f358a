//! `engine check`'s warnings: a valid plan that will still surprise its
//! author. Pure: the plan, which tasks declared `effect`, and a `Probe` of
//! the environment (is a program there, does an input match a file) go in;
//! the warnings come out, each with a stable code and its JSON path.
//! Warnings never change an exit code.

use serde::Serialize;

use crate::plan::model::{Effect, PlanFile, ProviderSpec, Task};

mod handoff;
pub mod network;

macro_rules! warning_codes {
    ($($(#[$m:meta])* $variant:ident = $s:literal),+ $(,)?) => {
        /// The stable code of each warning (scripts match on them).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum WarningCode { $($(#[$m])* $variant),+ }

        impl WarningCode {
            pub const ALL: &'static [WarningCode] = &[$(WarningCode::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $(WarningCode::$variant => $s),+ }
            }
        }
    };
}

warning_codes! {
    /// A task without `effect`: it is `external`, so every repair and
    /// every repeat waits on a person's approval.
    EffectDefaulted = "EFFECT_DEFAULTED",
    /// A program a task, check or server would start is not on PATH or
    /// at its path in the workspace.
    ExecutableNotFound = "EXECUTABLE_NOT_FOUND",
    /// An input matches no file now.
    InputMatchesNothing = "INPUT_MATCHES_NOTHING",
    /// A task's `cost` is above `max_cost`: its first call is refused.
    CostOverBudget = "COST_OVER_BUDGET",
    /// The goal has no acceptance check: nothing verifies it beyond the
    /// tasks' own validations.
    NoAcceptanceCheck = "NO_ACCEPTANCE_CHECK",
    /// An acceptance criterion without `check`: stated, never verified.
    AcceptanceUnchecked = "ACCEPTANCE_UNCHECKED",
    /// A task's input is a path an upstream task evidently writes (its
    /// command names it, or its `may_change` covers it) without declaring
    /// it in `outputs`: workers in separate workspaces may run the task
    /// without the file.
    OutputUndeclared = "OUTPUT_UNDECLARED",
    /// A goal constraint that is a plain statement: nothing checks it, so
    /// a met goal ends `completed (N constraints not checked)`.
    ConstraintUnchecked = "CONSTRAINT_UNCHECKED",
    /// A task that may change files (not `effect: none`), whose provider
    /// starts processes, with no `outputs`: any file it writes fails it
    /// (`undeclared_write`).
    NoOutputsDeclared = "NO_OUTPUTS_DECLARED",
    /// A command or agent task's processes get no network (nothing
    /// declared) while its command, inputs or provider name a URL or host.
    NetworkUndeclared = "NETWORK_UNDECLARED",
}

impl Serialize for WarningCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for WarningCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub code: WarningCode,
    /// The JSON path of what it is about (`$.tasks[2].effect`).
    pub path: String,
    pub message: String,
}

/// What the warnings ask of the machine the plan will run on.
pub trait Probe {
    /// Would a task find `program`: on PATH (a bare name), or at that path
    /// (relative to the workspace), as an executable file?
    fn finds_executable(&self, program: &str) -> bool;
    /// Does `input` (a path, a folder or a glob in the workspace) match at
    /// least one file now?
    fn matches_a_file(&self, input: &str) -> bool;
}

/// Every warning for `plan`, in plan order. `effect_declared[i]`: task `i`
/// wrote `effect` (serde fills in the default, so the typed plan cannot
/// tell).
pub fn warnings(plan: &PlanFile, effect_declared: &[bool], probe: &dyn Probe) -> Vec<Warning> {
    let mut out = goal_warnings(plan);
    out.extend(constraint_warnings(plan));
    let mut programs = ProgramCheck { probe, seen: Default::default(), out: Vec::new() };
    for (name, spec) in &plan.providers {
        if let ProviderSpec::Mcp { command: Some(command), .. } = spec {
            programs.check(command, &format!("$.providers.{name}.command[0]"), &format!("provider `{name}`"));
        }
    }
    if let Some(goal) = &plan.goal {
        for (i, a) in goal.acceptance.iter().enumerate() {
            if let Some(check) = &a.check {
                let at = format!("$.goal.acceptance[{i}].check.run[0]");
                programs.check(&check.run, &at, &format!("acceptance check `{}`", a.id));
            }
        }
    }
    for (i, task) in plan.tasks.iter().enumerate() {
        let declared = effect_declared.get(i).copied().unwrap_or(true);
        out.extend(task_warnings(plan, task, i, declared, probe));
        task_programs(plan, task, i, &mut programs);
    }
    out.extend(programs.finish());
    out.extend(handoff::warnings(plan));
    out.extend(network::warnings(plan));
    out
}

/// Each plain-statement constraint: nothing checks it.
fn constraint_warnings(plan: &PlanFile) -> Vec<Warning> {
    let Some(goal) = &plan.goal else { return Vec::new() };
    goal.constraints
        .iter()
        .enumerate()
        .filter(|(_, c)| c.checked().is_none())
        .map(|(i, c)| Warning {
            code: WarningCode::ConstraintUnchecked,
            path: format!("$.goal.constraints[{i}]"),
            message: format!(
                "constraint {:?} is a plain statement: the engine does not check it, so a met goal ends \
                 `goal completed (N constraints not checked)`, never `satisfied`; make it \
                 `{{\"id\", \"statement\", \"protect\": [paths]}}` or `{{…, \"check\": {{\"run\": [...]}}}}` to have it checked",
                c.statement()
            ),
        })
        .collect()
}

fn goal_warnings(plan: &PlanFile) -> Vec<Warning> {
    let Some(goal) = &plan.goal else { return Vec::new() };
    if goal.acceptance.iter().all(|a| a.check.is_none()) {
        return vec![Warning {
            code: WarningCode::NoAcceptanceCheck,
            path: "$.goal.acceptance".into(),
            message: format!(
                "goal `{}` has no acceptance check: a run can end `satisfied` on the tasks' own validations alone; \
                 add `{{\"id\", \"statement\", \"check\": {{\"run\": [...]}}}}` to goal.acceptance",
                goal.id
            ),
        }];
    }
    let unchecked = goal.acceptance.iter().enumerate().filter(|(_, a)| a.check.is_none());
    unchecked
        .map(|(i, a)| Warning {
            code: WarningCode::AcceptanceUnchecked,
            path: format!("$.goal.acceptance[{i}]"),
            message: format!("acceptance criterion `{}` has no `check`: it is stated, never verified", a.id),
        })
        .collect()
}

fn task_warnings(plan: &PlanFile, task: &Task, i: usize, effect_declared: bool, probe: &dyn Probe) -> Vec<Warning> {
    let mut out = Vec::new();
    let at = format!("$.tasks[{i}]");
    if !effect_declared {
        out.push(Warning {
            code: WarningCode::EffectDefaulted,
            path: format!("{at}.effect"),
            message: format!(
                "task `{}` has no `effect`, so it is `external`: every repair and every repeat of it waits on a \
                 person's `engine approve`, and a lost answer is never re-sent; say \"none\" (reads only) or \
                 \"local\" (changes workspace files) if that is what it does",
                task.task_ref
            ),
        });
    }
    if task.cost() > plan.budgets.max_cost() {
        out.push(Warning {
            code: WarningCode::CostOverBudget,
            path: format!("{at}.cost"),
            message: format!(
                "task `{}` costs {} per call and budgets.max_cost is {}: its first call is refused with \
                 BUDGET_EXHAUSTED; raise max_cost",
                task.task_ref, task.cost, plan.budgets.max_cost
            ),
        });
    }
    if let Some(w) = no_outputs(plan, task, &at) {
        out.push(w);
    }
    for (j, input) in task.inputs.iter().enumerate() {
        if !probe.matches_a_file(input) {
            out.push(Warning {
                code: WarningCode::InputMatchesNothing,
                path: format!("{at}.inputs[{j}]"),
                message: format!(
                    "input `{input}` of task `{}` matches no file now (fine if an earlier task writes it)",
                    task.task_ref
                ),
            });
        }
    }
    out
}

/// A task that may change files, run by a provider that starts processes,
/// declaring no `outputs` (nor `may_change`): it writes only what it
/// declares, so any file it writes fails it.
fn no_outputs(plan: &PlanFile, task: &Task, at: &str) -> Option<Warning> {
    let starts_process = match plan.providers.get(&task.provider) {
        Some(ProviderSpec::Command { .. }) => true,
        Some(ProviderSpec::Mcp { command, .. }) => command.is_some(),
        _ => false,
    };
    if !starts_process || task.effect == Effect::None || !task.outputs.is_empty() || !task.may_change.is_empty() {
        return None;
    }
    Some(Warning {
        code: WarningCode::NoOutputsDeclared,
        path: format!("{at}.outputs"),
        message: format!(
            "task `{}` is not `effect: none` but declares no `outputs`: a task writes only what it declares, so \
             any file it creates, changes or removes in the workspace fails it (`undeclared_write`); list the \
             files it writes in \"outputs\" (paths or globs), or say \"effect\": \"none\" if it writes nothing",
            task.task_ref
        ),
    })
}

/// The programs a task starts: its command, its validations, its context
/// commands.
fn task_programs(plan: &PlanFile, task: &Task, i: usize, programs: &mut ProgramCheck) {
    let at = format!("$.tasks[{i}]");
    let whose = format!("task `{}`", task.task_ref);
    if let Some(ProviderSpec::Command { .. }) = plan.providers.get(&task.provider) {
        if let Some(run) = task.action.get("run").and_then(|r| r.as_array()) {
            let argv: Vec<String> = run.iter().filter_map(|a| a.as_str().map(str::to_string)).collect();
            programs.check(&argv, &format!("{at}.action.run[0]"), &whose);
        }
    }
    for (j, v) in task.validations.iter().enumerate() {
        programs.check(&v.run, &format!("{at}.validations[{j}].run[0]"), &format!("validation `{}` of {whose}", v.id));
    }
    for (name, source) in &task.context {
        if let crate::plan::model::ContextSource::Command(argv) = source {
            programs.check(argv, &format!("{at}.context.{name}[0]"), &format!("context `{name}` of {whose}"));
        }
    }
}

/// Looks each program up once (a plan of 100,000 tasks names a handful),
/// and warns once per missing program, at the first place that names it.
struct ProgramCheck<'p> {
    probe: &'p dyn Probe,
    /// Each program looked up: found, or (its warning's index, how many
    /// more places name it).
    seen: std::collections::HashMap<String, Option<(usize, usize)>>,
    out: Vec<Warning>,
}

impl ProgramCheck<'_> {
    fn check(&mut self, argv: &[String], at: &str, whose: &str) {
        let Some(program) = argv.first().filter(|p| !p.is_empty()) else { return };
        if let Some(known) = self.seen.get_mut(program) {
            if let Some((_, more)) = known {
                *more += 1;
            }
            return;
        }
        if self.probe.finds_executable(program) {
            self.seen.insert(program.clone(), None);
            return;
        }
        let place = if program.contains('/') { "in the workspace" } else { "on PATH" };
        self.seen.insert(program.clone(), Some((self.out.len(), 0)));
        self.out.push(Warning {
            code: WarningCode::ExecutableNotFound,
            path: at.to_string(),
            message: format!(
                "{whose} starts `{program}`, which is not an executable file {place} now: the call would fail as \
                 `environment` (fine if an earlier task makes it)"
            ),
        });
    }

    /// The warnings, each saying how many more places name its program.
    fn finish(mut self) -> Vec<Warning> {
        for (i, more) in self.seen.values().flatten() {
            if *more > 0 {
                if let Some(w) = self.out.get_mut(*i) {
                    let places = if *more == 1 { "place names" } else { "places name" };
                    w.message.push_str(&format!("; {more} more {places} it"));
                }
            }
        }
        self.out
    }
}

#[cfg(test)]
mod tests;
