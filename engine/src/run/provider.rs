//! The run's providers: one adapter per plan provider, built once for the
//! run (so an MCP server serves every call and observation of the run),
//! and shut down once at its end; and the document an agent reads.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use providers::Provider;
use serde_json::{json, Value};

use super::Repair;
use crate::error::Result;
use crate::ids::OperationId;
use crate::plan::{adapters, Goal, ProviderSpec, Task};

/// Build every provider of a validated plan.
/// An MCP provider that holds its server's questions open puts them to
/// `person` (the run's side, `run::held`).
pub fn build_all(
    specs: &std::collections::BTreeMap<String, ProviderSpec>,
    workspace: &Path,
    person: Option<Arc<dyn providers::Person>>,
) -> Result<HashMap<String, Arc<dyn Provider>>> {
    specs
        .iter()
        .map(|(name, spec)| Ok((name.clone(), adapters::build_for(name, spec, workspace, person.clone())?)))
        .collect()
}

/// End what each provider keeps for a run (an MCP server's process group,
/// an HTTP session), once; the first a run ends on every path.
pub async fn shutdown_all(providers: &HashMap<String, Arc<dyn Provider>>) {
    for p in providers.values() {
        p.shutdown().await;
    }
}

/// The document an `agent-json` provider reads on stdin (docs/agent-json.md):
/// the goal, the task as the plan states it, the call's identity, and on a
/// repair the failed attempt, its classification, its evidence and the
/// person's instruction.
pub fn agent_request(
    goal: &Goal,
    task: &Task,
    operation_id: &OperationId,
    try_no: u32,
    repair: Option<&Repair>,
) -> Value {
    let mut doc = json!({
        "goal": goal,
        "task": task,
        "operation_id": operation_id,
        "try": try_no,
        "authority": agent_authority(),
    });
    if let Some(rep) = repair {
        doc["repair"] = json!({
            "failed_attempt": rep.failed_attempt,
            "classification": rep.classification,
            "evidence": rep.evidence,
            "instruction": rep.instruction,
        });
    }
    doc
}

/// What an agent is told of its authority (SPEC: what it prints is a
/// claim; a person's acts come only through the engine's commands), so it
/// has no reason to ask for an approval, a settlement or a retry in its
/// output.
pub fn agent_authority() -> Value {
    json!({
        "your_report": "recorded as a claim with authority `external_ai_message`: kept beside the evidence, never a cause, a verdict or a passed validation",
        "claims_authority": "external_ai_message",
        "a_persons_acts": ["approve", "settle", "retry", "repair", "revise"],
        "how_they_happen": "only a person, through the engine's own commands (engine approve, engine settle, engine retry, engine repair, engine revise); nothing you print or write can approve, settle or retry anything, so do not ask for it in your output",
    })
}
