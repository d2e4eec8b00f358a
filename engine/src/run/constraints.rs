//! The goal's checkable constraints in the run loop: the protected paths
//! observed before every attempt (the state it is judged against, stored
//! with its intent) and again after the attempt, its validations and the
//! constraint checks; the constraint checks themselves, after every
//! attempt's validations and once more before the acceptance checks. The
//! comparisons are `decide::constraints`; this is the I/O around them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::checks::CheckSpec;
use super::Runner;
use crate::checkpoint::{self, Checkpoint};
use crate::decide::constraints::{self, Protected};
use crate::error::Result;
use crate::evidence::{Evidence, PathChange};
use crate::ids::AttemptId;
use crate::plan::{Constraint, Goal, Task};
use crate::state::AttemptState;

/// The goal's checkable constraints, as the run loop uses them.
#[derive(Debug, Default)]
pub(super) struct Guard {
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

    fn protected(&self) -> Vec<Protected<'_>> {
        self.protected.iter().map(|(id, globs)| Protected { id, globs }).collect()
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

impl Runner<'_> {
    /// The protected paths as they are now (off the coordinator's thread:
    /// a protected folder may hold many files).
    async fn observe_protected(&mut self) -> std::result::Result<Checkpoint, String> {
        let (workspace, globs, mut cache) =
            (self.plan.workspace.clone(), self.guard.globs.clone(), std::mem::take(&mut self.cache));
        let observed = tokio::task::spawn_blocking(move || {
            let cp = checkpoint::observe_protected(&workspace, &globs, &mut cache);
            (cp, cache)
        })
        .await;
        match observed {
            Ok((cp, cache)) => {
                self.cache = cache;
                cp
            }
            Err(e) => Err(format!("observing the protected paths failed: {e}")),
        }
    }

    /// The state a new attempt of `task_ref` will be judged against: the
    /// protected paths now, with the paths the task's last judged attempt
    /// changed in violation put back to their state before it
    /// (`decide::constraints::baseline`). `None`: the goal protects nothing,
    /// or they could not be observed (the attempt is then judged as not
    /// observed).
    pub(super) async fn protected_baseline(&mut self, task_ref: &str) -> Result<Option<Checkpoint>> {
        if !self.guard.protects() {
            return Ok(None);
        }
        let Ok(now) = self.observe_protected().await else { return Ok(None) };
        let earlier = self.last_violation(task_ref)?;
        Ok(Some(Checkpoint::of(constraints::baseline(now.files, &earlier), BTreeMap::new())))
    }

    /// The protected paths the task's last judged attempt changed in
    /// violation (none if it did not).
    fn last_violation(&self, task_ref: &str) -> Result<Vec<PathChange>> {
        let read = self.ledger.read();
        let attempts = read.attempts_of_task(&self.goal_id, task_ref)?;
        let judged = attempts.iter().rev().find(|a| matches!(a.state, AttemptState::Failed | AttemptState::Succeeded));
        let Some(a) = judged.filter(|a| a.classification.as_ref().is_some_and(|c| c.rule == "protected_path_changed"))
        else {
            return Ok(Vec::new());
        };
        let evidence = read.evidence_of_attempt(a.id)?;
        Ok(evidence
            .into_iter()
            .filter_map(|r| match r.evidence {
                Evidence::ProtectedPathChanged { changes } => Some(changes),
                _ => None,
            })
            .flatten()
            .collect())
    }

    /// The protected paths after an attempt (and its validations and the
    /// constraint checks), against the state it was judged against: the
    /// evidence of every change its task may not make, or of why it could
    /// not be judged. Empty when nothing protected changed.
    pub(super) async fn judge_protected(&mut self, attempt_id: AttemptId, task: &Task) -> Result<Vec<Evidence>> {
        if !self.guard.protects() {
            return Ok(Vec::new());
        }
        let before = match self.in_flight.get(&attempt_id).and_then(|f| f.protected.clone()) {
            Some(cp) => Some(cp),
            None => match self.ledger.read().attempt(attempt_id)?.protected_at_intent {
                Some(digest) => self.ledger.read().checkpoint(&digest)?,
                None => None,
            },
        };
        let after = self.observe_protected().await;
        let not_judged = |message: String| vec![Evidence::ProtectedPathsNotObserved { message }];
        let evidence = match (before, after) {
            (None, _) => not_judged(
                "the goal's protected paths were not observed before this attempt, so whether \
                                     it changed them cannot be told"
                    .into(),
            ),
            (_, Err(e)) => {
                not_judged(format!("the goal's protected paths could not be observed after this attempt: {e}"))
            }
            (Some(b), Ok(a)) => {
                let changes = constraints::changes(&b.files, &a.files, &self.guard.protected(), &task.may_change);
                if changes.is_empty() {
                    Vec::new()
                } else {
                    vec![Evidence::ProtectedPathChanged { changes }]
                }
            }
        };
        Ok(evidence)
    }
}
