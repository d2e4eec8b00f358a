//! The run's providers: one adapter per plan provider, built once for the
//! run (so an MCP server serves every call and observation of the run),
//! and shut down once at its end.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use providers::Provider;

use crate::error::Result;
use crate::plan::{adapters, ProviderSpec};

/// Build every provider of a validated plan.
pub fn build_all(
    specs: &std::collections::BTreeMap<String, ProviderSpec>,
    workspace: &Path,
) -> Result<HashMap<String, Arc<dyn Provider>>> {
    specs.iter().map(|(name, spec)| Ok((name.clone(), adapters::build(name, spec, workspace)?))).collect()
}

/// End what each provider keeps for a run (an MCP server's process group,
/// an HTTP session), once; the first a run ends on every path.
pub async fn shutdown_all(providers: &HashMap<String, Arc<dyn Provider>>) {
    for p in providers.values() {
        p.shutdown().await;
    }
}
