//! Building a provider adapter from its plan spec, and the requests and
//! outputs the engine exchanges with it.

use std::sync::Arc;

use providers::command::CommandProvider;
use providers::http::HttpProvider;
use providers::mcp::McpProvider;
use providers::observe::HttpObserve;
use providers::Provider;

use crate::plan::{Protocol, ProviderSpec};

pub fn build(spec: &ProviderSpec) -> Arc<dyn Provider> {
    match spec {
        ProviderSpec::Command { protocol, .. } => Arc::new(CommandProvider {
            protocol: protocol.map(|p| match p {
                Protocol::AgentJson => "agent-json".to_string(),
            }),
        }),
        ProviderSpec::Http { endpoint, observe, hosts, .. } => Arc::new(
            // The plan's bare observe URL keeps its old meaning (404 is
            // absence) until the plan can say `absent_if` itself.
            HttpProvider::new(endpoint.clone())
                .with_observe(observe.as_deref().map(HttpObserve::legacy_status_url))
                .with_hosts(hosts.clone()),
        ),
        ProviderSpec::Mcp { command, observe_tool, .. } => {
            Arc::new(McpProvider::stdio(command.clone(), observe_tool.clone()))
        }
    }
}
