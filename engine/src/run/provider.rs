//! Building a provider adapter from its plan spec, and the requests and
//! outputs the engine exchanges with it.

use std::sync::Arc;

use providers::command::CommandProvider;
use providers::http::HttpProvider;
use providers::mcp::McpProvider;
use providers::Provider;

use crate::plan::{Protocol, ProviderSpec};

pub fn build(spec: &ProviderSpec) -> Arc<dyn Provider> {
    match spec {
        ProviderSpec::Command { protocol } => Arc::new(CommandProvider {
            protocol: protocol.map(|p| match p {
                Protocol::AgentJson => "agent-json".to_string(),
            }),
        }),
        ProviderSpec::Http { endpoint, observe, hosts } => {
            let mut p = HttpProvider::new(endpoint.clone(), observe.clone());
            p.allowed_hosts = hosts.clone();
            Arc::new(p)
        }
        ProviderSpec::Mcp { command, observe_tool } => {
            Arc::new(McpProvider { command: command.clone(), observe_tool: observe_tool.clone() })
        }
    }
}
