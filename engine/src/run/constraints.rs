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
use crate::evidence::Evidence;
use crate::ids::AttemptId;
use crate::plan::{Constraint, Goal};

/// The goal's checkable constraints, as the run loop uses them.
#[derive(Debug, Default)]
pub struct Guard {
    /// Each constraint with protected paths: its id and its globs.
    protected: Vec<(String, Vec<String>)>,
    /// Every protected glob, of every constraint.
    globs: Vec<String>,
    /// Each constraint's check.
    pub checks: Vec<CheckSpec>,
}

impl Guard {
    pub fn of(goal: &Goal) -> Guard {
        let mut g = Guard::default();
        for c in goal.constraints.iter().filter_map(Constraint::checked) {
            if !c.protect.is_empty() {
                g.protected.push((c.id.clone(), c.protect.clone()));
                g.globs.extend(c.protect.iter().cloned());
            }
            if let Some(check) = &c.check {
                g.checks.push(CheckSpec::of_constraint(&c.id, check));
            }
        }
        g
    }

    pub fn protects(&self) -> bool {
        !self.protected.is_empty()
    }

    /// Nothing to judge after an attempt: no protected path, no check.
    pub fn is_empty(&self) -> bool {
        self.protected.is_empty() && self.checks.is_empty()
    }

    /// Every protected glob, of every constraint.
    pub fn globs(&self) -> &[String] {
        &self.globs
    }

    pub fn protected(&self) -> Vec<Protected<'_>> {
        self.protected.iter().map(|(id, globs)| Protected { id, globs }).collect()
    }
}

/// What this run saw of each checkable constraint: how many attempts were
/// judged against it, which broke it, and the goal-level check.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Tally {
    /// Attempts whose protected paths were compared before and after.
    pub attempts_judged: usize,
    /// Constraint id → the attempts that broke it (`T1 attempt 4`).
    pub violated_by: BTreeMap<String, Vec<String>>,
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
        let by = format!("{task_ref} attempt {attempt}");
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
