//! Building a provider adapter from its plan spec, and the requests and
//! outputs the engine exchanges with it.

use std::sync::Arc;

use providers::builtin::BuiltinProvider;
use providers::command::CommandProvider;
use providers::http::HttpProvider;
use providers::mcp::McpProvider;
use providers::observe::HttpObserve;
use providers::Provider;

use serde_json::{json, Value};

use super::Repair;
use crate::ids::OperationId;
use crate::plan::{Goal, Protocol, ProviderSpec, Task};

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

pub fn build(spec: &ProviderSpec) -> Arc<dyn Provider> {
    match spec {
        ProviderSpec::Command { protocol } => Arc::new(CommandProvider {
            protocol: protocol.map(|p| match p {
                Protocol::AgentJson => "agent-json".to_string(),
            }),
        }),
        ProviderSpec::Http { endpoint, observe, hosts } => Arc::new(
            // The plan's bare observe URL keeps its old meaning (404 is
            // absence) until the plan can say `absent_if` itself.
            HttpProvider::new(endpoint.clone())
                .with_observe(observe.as_deref().map(HttpObserve::legacy_status_url))
                .with_hosts(hosts.clone()),
        ),
        ProviderSpec::Mcp { command, observe_tool, .. } => {
            Arc::new(McpProvider::stdio(command.clone(), observe_tool.clone()))
        }
        ProviderSpec::Builtin {} => Arc::new(BuiltinProvider),
    }
}
