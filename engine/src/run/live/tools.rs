//! Asking MCP servers for their tools (`tools/list`, on the provider the
//! run's calls then use): for a run's tool authority before its first
//! intent (the core records each inventory with the server's
//! `serverInfo` and digest, and refuses a task calling a server whose
//! tools could not be read or a tool its server does not offer,
//! `decide::tools`), and for `engine revise` outside a run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use providers::{Call, Provider};

use crate::decide::tools::{self, Inventory};
use crate::error::Result;
use crate::limits::OUTPUT_BYTES_MAX;
use crate::plan::{Effect, Plan};
use crate::run::sandboxes::Sandboxes;

/// How long one server may take to start and list its tools.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// Ask each of `providers` for its tools: name → inventory, or why it
/// could not be asked. Each server starts in its provider's sandbox (the
/// one its calls then run in).
pub async fn inventories(
    providers: &[(String, Arc<dyn Provider>)],
    call: &Call,
    sandboxes: &Sandboxes,
) -> BTreeMap<String, std::result::Result<Inventory, String>> {
    let mut out = BTreeMap::new();
    for (name, provider) in providers {
        let call = Call { sandbox: sandboxes.provider(name), ..call.clone() };
        let Some(listing) = provider.list_tools(&call) else { continue };
        out.insert(name.clone(), listing.await.map(|listed| Inventory::of(&listed)));
    }
    out
}

/// The call a listing is made under: no operation, nothing sent but
/// `tools/list` (`inventories` gives each provider its own sandbox).
pub fn listing_call(workspace: &std::path::Path, secrets: &[String], sandboxes: &Sandboxes) -> Call {
    Call {
        operation_id: "tools/list".into(),
        try_no: 1,
        request: serde_json::Value::Null,
        workspace: workspace.to_path_buf(),
        timeout: Some(LIST_TIMEOUT),
        output_bytes_max: OUTPUT_BYTES_MAX,
        stdin: None,
        env: Vec::new(),
        secrets: secrets.to_vec(),
        sandbox: sandboxes.checks(),
        traceparent: None,
    }
}

/// The MCP providers whose tasks a revision may reuse (effect `none` or
/// `local`: an external effect is never reused).
pub fn reusable_servers(plan: &Plan) -> BTreeSet<String> {
    tools::uses(&plan.file)
        .iter()
        .filter(|u| plan.file.tasks.get(u.index).is_some_and(|t| t.effect != Effect::External))
        .map(|u| u.provider.to_string())
        .collect()
}

/// Outside a run (`engine revise`): the inventories of the MCP servers
/// whose tasks a revision may reuse (effect `none` or `local`: an external
/// effect is never reused), each server started for this and ended after.
/// A server that could not be asked is absent.
pub fn list_now(plan: &Plan, secrets: &[String], sandboxes: &Sandboxes) -> Result<BTreeMap<String, Inventory>> {
    let named = reusable_servers(plan);
    let mut asked: Vec<(String, Arc<dyn Provider>)> = Vec::with_capacity(named.len());
    for n in named {
        if let Some(spec) = plan.file.providers.get(&n) {
            asked.push((n.clone(), crate::plan::adapters::build(&n, spec, &plan.workspace)?));
        }
    }
    if asked.is_empty() {
        return Ok(BTreeMap::new());
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let call = listing_call(&plan.workspace, secrets, sandboxes);
    let listed = rt.block_on(async {
        let listed = inventories(&asked, &call, sandboxes).await;
        for (_, p) in &asked {
            p.shutdown().await;
        }
        listed
    });
    Ok(listed.into_iter().filter_map(|(name, inv)| inv.ok().map(|i| (name, i))).collect())
}
