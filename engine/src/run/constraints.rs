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
use crate::decide::constraints::{self, Git, Protected};
use crate::decide::shadow;
use crate::error::Result;
use crate::evidence::{Evidence, PathChange};
use crate::ids::AttemptId;
use crate::plan::model::ProviderSpec;
use crate::plan::{Constraint, Goal, Plan, Task};
use crate::state::AttemptState;

/// The goal's checkable constraints, as the run loop uses them, and the
/// engine's own protected paths (`decide::constraints::engine_protected`).
#[derive(Debug, Default)]
pub(super) struct Guard {
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
    /// receipt (`Runner::outcome`); the goal's protected paths and checks
    /// take the validation path, which runs and judges them.
    pub fn judged_at_receipt(&self) -> bool {
        self.protected.is_empty() && self.checks.is_empty()
    }

    fn all(&self, process: bool) -> impl Iterator<Item = &(String, Vec<String>)> {
        self.protected.iter().chain(self.engine.iter().filter(move |_| process))
    }

    fn protected(&self, process: bool) -> Vec<Protected<'_>> {
        self.all(process).map(|(id, globs)| Protected { id, globs }).collect()
    }

    fn globs(&self, process: bool) -> Vec<String> {
        self.all(process).flat_map(|(_, globs)| globs.iter().cloned()).collect()
    }
}

/// What every check of `plan` (acceptance, constraint, validation) would
/// load from the working folder in place of what it names.
pub(super) fn shadows(plan: &Plan) -> Vec<String> {
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
pub(super) fn starts_process(spec: &ProviderSpec) -> bool {
    match spec {
        ProviderSpec::Command { .. } => true,
        ProviderSpec::Mcp { command, .. } => command.is_some(),
        ProviderSpec::Http { .. } | ProviderSpec::Builtin {} => false,
    }
}

/// The engine's own protected paths for a run of `plan` in its workspace
/// (the plan file, `.git`, `.engine`), looked up now.
pub(super) fn engine_protected(plan: &Plan) -> Vec<(String, Vec<String>)> {
    let ws = &plan.workspace;
    let plan_file = plan.source.as_deref().and_then(|p| p.strip_prefix(ws).ok()).and_then(|p| p.to_str());
    let git = match std::fs::symlink_metadata(ws.join(".git")) {
        Ok(m) if m.is_dir() => Git::Folder,
        Ok(_) => Git::File,
        Err(_) => Git::Absent,
    };
    constraints::engine_protected(plan_file, git)
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
    async fn observe_protected(&mut self, process: bool) -> std::result::Result<Checkpoint, String> {
        let (workspace, globs, mut cache) =
            (self.plan.workspace.clone(), self.guard.globs(process), std::mem::take(&mut self.cache));
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
        let process = self.plan.task(task_ref).is_some_and(|t| starts_process(self.plan.provider_of(t)));
        if !self.guard.protects(process) {
            return Ok(None);
        }
        let Ok(now) = self.observe_protected(process).await else { return Ok(None) };
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
        let process = starts_process(self.plan.provider_of(task));
        if !self.guard.protects(process) {
            return Ok(Vec::new());
        }
        let before = match self.in_flight.get(&attempt_id).and_then(|f| f.protected.clone()) {
            Some(cp) => Some(cp),
            None => match self.ledger.read().attempt(attempt_id)?.protected_at_intent {
                Some(digest) => self.ledger.read().checkpoint(&digest)?,
                None => None,
            },
        };
        let after = self.observe_protected(process).await;
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
                let changes =
                    constraints::changes(&b.files, &a.files, &self.guard.protected(process), &task.may_change);
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
