//! The goal's checkable constraints as the run uses them: the protected
//! paths observed before every attempt (the state it is judged against,
//! stored with its intent) and again after the attempt, its validations
//! and the constraint checks (`driver::workspace`); the constraint checks
//! themselves, after every attempt's validations and once more before the
//! acceptance checks; and what the run saw of each (`Tally`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::check::CheckSpec;
use crate::decide::constraints::Protected;
use crate::decide::shadow;
use crate::evidence::Evidence;
use crate::ids::AttemptId;
use crate::plan::model::ProviderSpec;
use crate::plan::{Constraint, Goal, Plan};

/// The goal's checkable constraints, as the run loop uses them, and the
/// engine's own protected paths (`decide::constraints::engine_protected`).
#[derive(Debug, Default, Clone)]
pub struct Guard {
    /// Each constraint with protected paths: its id and its globs.
    protected: Vec<(String, Vec<String>)>,
    /// The engine's own, judged for attempts of providers that start
    /// processes (nothing else can write the workspace).
    engine: Vec<(String, Vec<String>)>,
    /// Each constraint's check.
    pub checks: Vec<CheckSpec>,
}

impl Guard {
    /// `shadows`: what the plan's checks would load from the working folder
    /// in place of what they name (`decide::shadow`), protected with every
    /// constraint that protects paths.
    pub fn of(goal: &Goal, shadows: &[String], engine: Vec<(String, Vec<String>)>) -> Guard {
        let mut g = Guard { engine, ..Guard::default() };
        for c in goal.constraints.iter().filter_map(Constraint::checked) {
            if !c.protect.is_empty() {
                let mut globs = c.protect.clone();
                globs.extend(shadows.iter().filter(|s| !c.protect.contains(s)).cloned());
                g.protected.push((c.id.clone(), globs));
            }
            if let Some(check) = &c.check {
                g.checks.push(CheckSpec::of_constraint(&c.id, check));
            }
        }
        g
    }

    /// Does the goal itself protect paths (its constraints' `protect`)?
    pub fn goal_protects(&self) -> bool {
        !self.protected.is_empty()
    }

    /// Are an attempt's protected paths compared, for a task whose provider
    /// starts processes (`process`) or not?
    pub fn protects(&self, process: bool) -> bool {
        self.goal_protects() || (process && !self.engine.is_empty())
    }

    /// Is an attempt's verdict whole at its receipt, when its task has no
    /// validations? The engine's own protected paths are judged with the
    /// receipt (`core::messages`, the outcome of a call); the goal's protected paths and checks
    /// take the validation path, which runs and judges them.
    pub fn judged_at_receipt(&self) -> bool {
        self.protected.is_empty() && self.checks.is_empty()
    }

    fn all(&self, process: bool) -> impl Iterator<Item = &(String, Vec<String>)> {
        self.protected.iter().chain(self.engine.iter().filter(move |_| process))
    }

    pub fn protected(&self, process: bool) -> Vec<Protected<'_>> {
        self.all(process).map(|(id, globs)| Protected { id, globs }).collect()
    }

    pub fn globs(&self, process: bool) -> Vec<String> {
        self.all(process).flat_map(|(_, globs)| globs.iter().cloned()).collect()
    }
}

/// What every check of `plan` (acceptance, constraint, validation) would
/// load from the working folder in place of what it names.
pub fn shadows(plan: &Plan) -> Vec<String> {
    let goal = plan.goal();
    let acceptance = goal.acceptance.iter().filter_map(|a| a.check.as_ref()).map(|c| &c.run);
    let constraint = goal.constraints.iter().filter_map(Constraint::checked).filter_map(|c| c.check.as_ref());
    let validations = plan.file.tasks.iter().flat_map(|t| t.validations.iter().map(|v| &v.run));
    let mut out: Vec<String> = Vec::new();
    for argv in acceptance.chain(constraint.map(|c| &c.run)).chain(validations) {
        for p in shadow::shadows(argv) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Does this provider start processes that could write the workspace?
pub fn starts_process(spec: &ProviderSpec) -> bool {
    match spec {
        ProviderSpec::Command { .. } => true,
        ProviderSpec::Mcp { command, .. } => command.is_some(),
        ProviderSpec::Http { .. } | ProviderSpec::Builtin {} => false,
    }
}

/// What this run saw of each checkable constraint: how many attempts were
/// judged against it, which broke it, and the goal-level check.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Tally {
    /// Attempts whose protected paths were compared before and after.
    pub attempts_judged: usize,
    /// Constraint id → the attempts that broke it (task ref, ledger id;
    /// the report numbers each as its task counts it).
    pub violated_by: BTreeMap<String, Vec<(String, AttemptId)>>,
    /// Constraint id → did its check pass before the acceptance checks.
    pub goal_checks: BTreeMap<String, bool>,
}

impl Tally {
    /// Note an attempt's recorded verdict on the constraints (`protected`:
    /// its protected paths were compared).
    pub fn judged(&mut self, task_ref: &str, attempt: AttemptId, protected: bool, evidence: &[Evidence]) {
        if protected {
            self.attempts_judged += 1;
        }
        let by = (task_ref.to_string(), attempt);
        for e in evidence {
            let ids: Vec<&String> = match e {
                Evidence::ProtectedPathChanged { changes } => changes.iter().flat_map(|c| &c.constraints).collect(),
                Evidence::CheckResult { check_id, of_constraint: true, passed: false, .. } => vec![check_id],
                _ => Vec::new(),
            };
            for id in ids {
                let list = self.violated_by.entry(id.clone()).or_default();
                if !list.contains(&by) {
                    list.push(by.clone());
                }
            }
        }
    }
}
