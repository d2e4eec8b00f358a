//! Early cutoff, the driver's side (`decide::reuse::cutoff`): the context
//! a checkpoint carries from the ledger, and the decision, once a put-off
//! task's upstream is complete, whether its completion stands — the same
//! `decide::reuse` the reuse pass takes, now that the upstream's new
//! outputs are recorded.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::restore::{self, Here};
use super::scope::Scope;
use crate::checkpoint::{self, FileCache};
use crate::decide::reuse::{self, cutoff, Candidate, Decision, Refusal};
use crate::error::{Error, Result};
use crate::plan::Task;
use crate::run::fresh::weighed;
use crate::run::identity;
use crate::store::LeaseGuard;

/// `context` with the entries the ledger and the machine add for `task`
/// (its dependencies' recorded outputs, its tool's identity: `run::identity`).
pub fn with_identity(
    ledger: &LeaseGuard,
    scope: &Scope,
    task: &Task,
    mut context: BTreeMap<String, String>,
    cache: &mut FileCache,
) -> Result<BTreeMap<String, String>> {
    let read = ledger.read();
    context.extend(identity::upstream_context(&*read, (&scope.goal_id, scope.revision), scope.plan, task)?);
    context.extend(identity::tool_context(scope.plan, task, cache));
    Ok(context)
}

/// Does `task_ref`'s completion stand, its upstream complete again? `Ok`:
/// it does (the `completion_kept` event's data); `Err`: why it runs again
/// (the `completion_stale` event's data). `tools`: its tools' entries.
pub fn decide(
    ledger: &mut LeaseGuard,
    scope: &Scope,
    task_ref: &str,
    tools: BTreeMap<String, String>,
    (cache, sandbox): (&mut FileCache, &providers::sandbox::Sandbox),
) -> Result<std::result::Result<Value, Value>> {
    let plan = scope.plan;
    let task = scope.task(task_ref)?;
    let d =
        plan.digests().tasks.get(task_ref).ok_or_else(|| Error::internal(format!("task {task_ref} has no digests")))?;
    let done = ledger.read().completion(&scope.goal_id, scope.revision, task_ref)?;
    let done = done.map(|c| weighed(c, task, d.meaning_core.clone()));
    let mut context = with_identity(ledger, scope, task, tools, cache)?;
    let recorded = done.as_ref().and_then(|c| c.checkpoint.as_ref());
    if recorded.is_some() && crate::decide::reuse::tool::reports_identity(plan.provider_of(task)) {
        let newest = identity::newest_reported(&*ledger.read(), (&scope.goal_id, scope.revision), plan)?;
        context.extend(identity::reported_context(plan, task, recorded, &newest));
    }
    let candidate =
        Candidate { task, meaning: &d.meaning, meaning_core: &d.meaning_core, dependencies: &d.dependencies };
    let decision = reuse::decide(false, done.as_ref(), &candidate, None, || {
        let cp = checkpoint::observe(&plan.workspace, task, &plan.file.secrets, sandbox, cache)?;
        Ok(cp.with_context(context))
    });
    let refusal = match decision {
        Decision::Run { refusal } => cutoff::named(refusal),
        // Kept only with its outputs in this workspace.
        Decision::Reuse { provenance } => match restore::here(&*ledger.read(), scope, task, cache)? {
            Here::Missing { path, why } => Refusal::OutputsMissing { path, why },
            here => {
                if matches!(here, Here::Restorable) {
                    restore::restore(ledger, scope, &[task_ref.to_string()], cache)?;
                }
                return Ok(Ok(json!({
                    "kept": "UPSTREAM_OUTPUT_UNCHANGED", "attempt_id": provenance.attempt_id,
                    "revision": provenance.revision, "checkpoint": provenance.checkpoint,
                })));
            }
        },
    };
    Ok(Err(json!({"stale": refusal.code(), "detail": refusal.detail()})))
}
