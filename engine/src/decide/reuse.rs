//! The reuse decision (SPEC.md "Reuse decision"): may a completed task's
//! result stand for the *current* goal on the *current* inputs? A pure
//! function of what the ledger recorded and what is observed now; the
//! first condition that fails is the recorded reason.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoint::{Checkpoint, RecordedCheckpoint};
use crate::ids::{AttemptId, EvidenceId, Revision};
use crate::plan::model::{Effect, Task};

pub mod cutoff;
pub mod tool;

/// Why reuse was refused, in SPEC.md's order of checking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Refusal {
    GoalDigestChanged,
    NoPriorCompletion,
    MeaningChanged {
        field: String,
    },
    DependenciesChanged,
    UpstreamNotReused {
        dependency: String,
        /// Why its run again cuts nothing off here (`cutoff`): no outputs,
        /// an external effect, outputs that changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    ExternalEffect,
    ValidationSetChanged,
    ValidationNotPassed {
        validation: String,
        why: String,
    },
    CheckpointChanged {
        path: String,
    },
    /// Who does the work changed: a command's executable or script, an
    /// MCP server's identity or its tool's schema (`tool`).
    ToolChanged {
        what: String,
        old: String,
        new: String,
    },
    /// The completion's recorded output `path` is not in this workspace
    /// with its recorded digest, and the ledger holds no bytes to write it
    /// back (`run::driver::restore`); `why`: the ledger kept no record
    /// of its outputs at all (`path` is then the first declared one).
    OutputsMissing {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::GoalDigestChanged => "GOAL_DIGEST_CHANGED",
            Refusal::NoPriorCompletion => "NO_PRIOR_COMPLETION",
            Refusal::MeaningChanged { .. } => "MEANING_CHANGED",
            Refusal::DependenciesChanged => "DEPENDENCIES_CHANGED",
            Refusal::UpstreamNotReused { .. } => "UPSTREAM_NOT_REUSED",
            Refusal::ExternalEffect => "EXTERNAL_EFFECT",
            Refusal::ValidationSetChanged => "VALIDATION_SET_CHANGED",
            Refusal::ValidationNotPassed { .. } => "VALIDATION_NOT_PASSED",
            Refusal::CheckpointChanged { .. } => "CHECKPOINT_CHANGED",
            Refusal::ToolChanged { .. } => "TOOL_CHANGED",
            Refusal::OutputsMissing { .. } => "OUTPUTS_MISSING",
        }
    }

    /// The detail a person needs: the field, the path, the dependency.
    pub fn detail(&self) -> String {
        match self {
            Refusal::MeaningChanged { field } => format!("`{field}` changed"),
            Refusal::UpstreamNotReused { dependency, why: None } => format!("dependency {dependency} runs again"),
            Refusal::UpstreamNotReused { dependency, why: Some(why) } => {
                format!("dependency {dependency} runs again: {why}")
            }
            Refusal::ValidationNotPassed { validation, why } => format!("{validation}: {why}"),
            Refusal::CheckpointChanged { path } => format!("first differing: {path}"),
            Refusal::ToolChanged { what, old, new } => format!("{what} {old} → {new}"),
            Refusal::OutputsMissing { path, why: None } => format!(
                "its recorded output {path} is not in this workspace, and the ledger holds no bytes to write it back"
            ),
            Refusal::OutputsMissing { path, why: Some(why) } => {
                format!("{why}: nothing shows this workspace holds its declared output {path}")
            }
            Refusal::GoalDigestChanged => "the goal contract changed".into(),
            Refusal::NoPriorCompletion => "no succeeded attempt in the earlier revision".into(),
            Refusal::DependenciesChanged => "its incoming dependencies changed".into(),
            Refusal::ExternalEffect => "external effects are never reused by local observation".into(),
            Refusal::ValidationSetChanged => "its set of validation ids changed".into(),
        }
    }
}

/// Where a reused result came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub revision: Revision,
    pub attempt_id: AttemptId,
    pub checkpoint: String,
    pub evidence_ids: Vec<EvidenceId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Reuse { provenance: Provenance },
    Run { refusal: Refusal },
}

impl Decision {
    pub fn is_reuse(&self) -> bool {
        matches!(self, Decision::Reuse { .. })
    }
}

/// The latest recorded result of one validation (ledger order).
#[derive(Debug, Clone)]
pub struct ValidationResult {
    pub id: String,
    pub passed: bool,
    pub checkpoint: Option<String>,
    pub evidence_id: EvidenceId,
}

/// A completed task of the earlier revision, as the ledger recorded it.
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    pub revision: Revision,
    pub attempt_id: AttemptId,
    /// The earlier task definition (to name a changed field), borrowed
    /// from the plan that defined it.
    pub task: &'a Task,
    pub meaning: String,
    /// Its meaning without the validations (`digests::meaning_core_digest`).
    pub meaning_core: String,
    pub dependencies: String,
    /// The checkpoint its validations judged (`None`: not recorded); its
    /// files are read only to name a difference.
    pub checkpoint: Option<RecordedCheckpoint>,
    /// False when its inputs changed while its validations ran.
    pub reusable: bool,
    pub validations: Vec<ValidationResult>,
}

/// The task as the new revision defines it.
pub struct Candidate<'a> {
    pub task: &'a Task,
    pub meaning: &'a str,
    pub meaning_core: &'a str,
    pub dependencies: &'a str,
}

/// Decide one task. `upstream_run` is the first dependency being run
/// again, if any; `observe` reads the checkpoint now (called last, and only
/// if every cheaper condition holds).
pub fn decide(
    goal_changed: bool,
    completion: Option<&Completion<'_>>,
    candidate: &Candidate,
    upstream_run: Option<&str>,
    observe: impl FnOnce() -> Result<Checkpoint, String>,
) -> Decision {
    let run = |refusal| Decision::Run { refusal };
    if goal_changed {
        return run(Refusal::GoalDigestChanged);
    }
    let Some(done) = completion else { return run(Refusal::NoPriorCompletion) };
    // A change to the set of validations alone is VALIDATION_SET_CHANGED,
    // decided in its place below; any other change is MEANING_CHANGED.
    if done.meaning != candidate.meaning && !only_validation_set_differs(done, candidate) {
        return run(Refusal::MeaningChanged { field: changed_field(done.task, candidate.task) });
    }
    if done.dependencies != candidate.dependencies {
        return run(Refusal::DependenciesChanged);
    }
    if let Some(dep) = upstream_run {
        return run(Refusal::UpstreamNotReused { dependency: dep.to_string(), why: None });
    }
    if candidate.task.effect == Effect::External {
        return run(Refusal::ExternalEffect);
    }
    let cp = match validations_hold(done, candidate.task) {
        Ok(cp) => cp,
        Err(refusal) => return run(refusal),
    };
    if !done.reusable {
        return run(Refusal::CheckpointChanged { path: "(inputs changed while its validations ran)".into() });
    }
    match observe() {
        Ok(now) if now.digest == cp.digest() || same_as_recorded_before_tools(cp, &now) => Decision::Reuse {
            provenance: Provenance {
                revision: done.revision,
                attempt_id: done.attempt_id,
                checkpoint: cp.digest().to_string(),
                evidence_ids: done.validations.iter().map(|v| v.evidence_id).collect(),
            },
        },
        Ok(now) => match cp.checkpoint() {
            Some(then) => run(tool::difference(&then, &now)),
            None => run(Refusal::CheckpointChanged { path: "(context)".into() }),
        },
        Err(e) => run(Refusal::CheckpointChanged { path: format!("(cannot observe: {e})") }),
    }
}

/// Does the checkpoint observed now match one an older engine recorded,
/// before it kept who does the work? A recorded checkpoint with no tool's
/// identity and no upstream's outputs in it is compared without those
/// entries, so an upgrade alone runs nothing again (a second model call
/// nobody asked for); a later change of the tool is seen once the next
/// completion records it. (MCP's entries predate both: kept as they are.)
fn same_as_recorded_before_tools(cp: &RecordedCheckpoint, now: &Checkpoint) -> bool {
    let newer = |n: &String| tool::is_tool(n) || cutoff::dependency_of(n).is_some();
    match cp.checkpoint() {
        Some(then) if !then.context.keys().any(newer) && now.context.keys().any(newer) => {
            let context = now.context.iter().filter(|(n, _)| !newer(n)).map(|(n, v)| (n.clone(), v.clone())).collect();
            Checkpoint::of(now.files.clone(), context).digest == cp.digest()
        }
        _ => false,
    }
}

/// Could this completion stand for a later revision that changes nothing
/// (the same goal, task, dependencies and inputs)? `None` when it could;
/// otherwise the reason it never will — an external effect, inputs that
/// changed while its validations ran, a validation not bound to its
/// checkpoint. What a later revision does change is decided then.
pub fn standing(done: &Completion<'_>) -> Option<Refusal> {
    let same = Candidate {
        task: done.task,
        meaning: &done.meaning,
        meaning_core: &done.meaning_core,
        dependencies: &done.dependencies,
    };
    let unchanged = || {
        done.checkpoint
            .as_ref()
            .and_then(RecordedCheckpoint::checkpoint)
            .ok_or_else(|| "no checkpoint was recorded".to_string())
    };
    match decide(false, Some(done), &same, None, unchanged) {
        Decision::Reuse { .. } => None,
        Decision::Run { refusal } => Some(refusal),
    }
}

/// The completion's validations are the ones the task declares now, each
/// with a latest result that passed on the completion's checkpoint: that
/// checkpoint, or the first reason they are not.
fn validations_hold<'d>(done: &'d Completion<'_>, task: &Task) -> Result<&'d RecordedCheckpoint, Refusal> {
    let wanted: BTreeSet<&str> = task.validations.iter().map(|v| v.id.as_str()).collect();
    let have: BTreeSet<&str> = done.validations.iter().map(|v| v.id.as_str()).collect();
    let declared_then: BTreeSet<&str> = done.task.validations.iter().map(|v| v.id.as_str()).collect();
    if wanted != declared_then {
        return Err(Refusal::ValidationSetChanged);
    }
    let Some(cp) = &done.checkpoint else {
        return Err(Refusal::ValidationNotPassed {
            validation: "*".into(),
            why: "no checkpoint was recorded for the completion".into(),
        });
    };
    for id in &wanted {
        if !have.contains(id) {
            return Err(Refusal::ValidationNotPassed { validation: id.to_string(), why: "no recorded result".into() });
        }
    }
    for v in &done.validations {
        if !wanted.contains(v.id.as_str()) {
            continue;
        }
        if !v.passed {
            return Err(Refusal::ValidationNotPassed {
                validation: v.id.clone(),
                why: "its latest result is a failure".into(),
            });
        }
        if v.checkpoint.as_deref() != Some(cp.digest()) {
            return Err(Refusal::ValidationNotPassed {
                validation: v.id.clone(),
                why: "its latest pass is not bound to the completion's checkpoint".into(),
            });
        }
    }
    Ok(cp)
}

/// Do two definitions of a task differ only in which validations they
/// declare: the same meaning without validations, another set of
/// validation ids, and every validation both declare unchanged?
fn only_validation_set_differs(done: &Completion<'_>, candidate: &Candidate) -> bool {
    if done.meaning_core != candidate.meaning_core {
        return false;
    }
    let ids = |t: &Task| t.validations.iter().map(|v| v.id.clone()).collect::<BTreeSet<String>>();
    if ids(done.task) == ids(candidate.task) {
        return false;
    }
    done.task
        .validations
        .iter()
        .all(|then| candidate.task.validations.iter().all(|now| now.id != then.id || now == then))
}

/// The first meaning field that differs between two task definitions.
pub fn changed_field(then: &Task, now: &Task) -> String {
    let a = serde_json::to_value(then).unwrap_or(Value::Null);
    let b = serde_json::to_value(now).unwrap_or(Value::Null);
    for field in ["provider", "action", "effect", "inputs", "validations", "idempotent", "may_change"] {
        if a.get(field) != b.get(field) {
            return field.to_string();
        }
    }
    "provider config".to_string()
}

#[cfg(test)]
mod tests;
