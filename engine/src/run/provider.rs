//! Building a provider adapter from its plan spec, and the requests and
//! outputs the engine exchanges with it.

use std::sync::Arc;

use providers::command::CommandProvider;
use providers::http::HttpProvider;
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
    }
}
