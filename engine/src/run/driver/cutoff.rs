//! Early cutoff, the driver's side (`decide::reuse::cutoff`): the context
//! a checkpoint carries from the ledger, and the decision, once a put-off
//! task's upstream is complete, whether its completion stands — the same
//! `decide::reuse` the reuse pass takes, now that the upstream's new
//! outputs are recorded.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::restore;
use super::scope::Scope;
use crate::checkpoint::{self, FileCache};
use crate::decide::outputs::{self, Standing};
use crate::decide::reuse::{self, cutoff, Candidate, Decision};
use crate::error::{Error, Result};
use crate::plan::Task;
use crate::run::fresh::weighed;
use crate::run::identity;
use crate::store::LeaseGuard;

/// `context` with the entries the ledger and the machine add for `task`
/// (its dependencies' recorded outputs, its tool's identity: `run::identity`).
/// `programs`: the run's (each program's file found earlier in the run;
/// its entry made again, as something may have run since).
pub fn with_identity(
    ledger: &LeaseGuard,
    scope: &Scope,
    task: &Task,
    context: BTreeMap<String, String>,
    (cache, programs): (&mut FileCache, &mut identity::Programs),
) -> Result<BTreeMap<String, String>> {
    let upstream = identity::upstream_context(&*ledger.read(), (&scope.goal_id, scope.revision), scope.plan, task)?;
    programs.forget();
    Ok(identity::carried(scope.plan, task, (context, upstream), (cache, programs)))
}

/// Does `task_ref`'s completion stand, its upstream complete again? `Ok`:
/// it does (the `completion_kept` event's data); `Err`: why it runs again
/// (the `completion_stale` event's data). `tools`: its tools' entries.
pub fn decide(
    ledger: &mut LeaseGuard,
    scope: &Scope,
    task_ref: &str,
    tools: BTreeMap<String, String>,
    (cache, programs, sandbox): (&mut FileCache, &mut identity::Programs, &providers::sandbox::Sandbox),
) -> Result<std::result::Result<Value, Value>> {
    let plan = scope.plan;
    let task = scope.task(task_ref)?;
    let d =
        plan.digests().tasks.get(task_ref).ok_or_else(|| Error::internal(format!("task {task_ref} has no digests")))?;
    let done = ledger.read().completion(&scope.goal_id, scope.revision, task_ref)?;
    let done = done.map(|c| weighed(c, task, d.meaning_core.clone()));
    let mut context = with_identity(ledger, scope, task, tools, (cache, programs))?;
    let recorded = done.as_ref().and_then(|c| c.checkpoint.as_ref());
    if recorded.is_some() {
        let newest = identity::newest_reported(&*ledger.read(), (&scope.goal_id, scope.revision), plan)?;
        context.extend(identity::reported_context(plan, task, recorded, &newest));
    }
    let candidate =
        Candidate { task, meaning: &d.meaning, meaning_core: &d.meaning_core, dependencies: &d.dependencies };
    let decision = reuse::decide(false, done.as_ref(), &candidate, None, || {
        let observed = checkpoint::observe_with(&mut None, &plan.workspace, task, &plan.file.secrets, sandbox, cache)?;
        Ok(observed.hashed(context))
    });
    let decision = planted(decision, done.as_ref());
    let refusal = match decision {
        Decision::Run { refusal } => cutoff::named(refusal),
        // Kept only with its outputs in this workspace.
        Decision::Reuse { provenance } => {
            match outputs::standing(restore::here(&*ledger.read(), scope, task, cache)?, task.effect) {
                Standing::Stale(refusal) | Standing::StaleAsIs(refusal) => refusal,
                Standing::Stands { restore: write_back } => {
                    if write_back {
                        restore::restore(ledger, scope, &[task_ref.to_string()], cache)?;
                    }
                    return Ok(Ok(json!({
                        "kept": "UPSTREAM_OUTPUT_UNCHANGED", "attempt_id": provenance.attempt_id,
                        "revision": provenance.revision, "checkpoint": provenance.checkpoint,
                    })));
                }
            }
        }
    };
    Ok(Err(json!({"stale": refusal.code(), "detail": refusal.detail()})))
}

/// Planted fault `cutoff-ignores-outputs` (armed by the simulator only):
/// a checkpoint whose first difference is an upstream's recorded outputs
/// is taken for the same, and the completion kept.
fn planted(decision: Decision, done: Option<&reuse::Completion>) -> Decision {
    let upstream = |d: &Decision| match d {
        Decision::Run { refusal: reuse::Refusal::CheckpointChanged { path } } => {
            path.strip_prefix("context:").and_then(cutoff::dependency_of).is_some()
        }
        _ => false,
    };
    match done {
        Some(c) if crate::failpoint::fault(crate::failpoint::Fault::CutoffIgnoresOutputs) && upstream(&decision) => {
            let checkpoint = c.checkpoint.as_ref().map(|cp| cp.digest().to_string()).unwrap_or_default();
            let provenance = reuse::Provenance {
                revision: c.revision,
                attempt_id: c.attempt_id,
                checkpoint,
                evidence_ids: Vec::new(),
            };
            Decision::Reuse { provenance }
        }
        _ => decision,
    }
}
