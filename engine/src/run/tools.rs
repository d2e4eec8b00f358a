//! Tool authority before the run's first intent: each MCP server the plan
//! calls is asked for its tools (`tools/list`, on the provider the run's
//! calls then use), the inventory is recorded (the server's `serverInfo`,
//! the protocol revision, input-schema digests and the whole inventory's
//! digest), a server whose tools cannot be read stops the run with
//! `TOOL_INVENTORY_UNAVAILABLE` and a task calling a tool its server does
//! not offer with `UNKNOWN_TOOL`, before anything is sent. The comparisons are
//! `decide::tools`; this is the I/O around them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use providers::{Call, Provider};
use serde_json::json;

use super::{Runner, Sandboxes};
use crate::decide::tools::{self, Inventory};
use crate::error::{Code, Error, Result};
use crate::limits::OUTPUT_BYTES_MAX;
use crate::plan::{Effect, Plan};
use crate::store::events::EventKind;
use crate::store::Durability;

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
    }
}

/// Outside a run (`engine revise`): the inventories of the MCP servers
/// whose tasks a revision may reuse (effect `none` or `local`: an external
/// effect is never reused), each server started for this and ended after.
/// A server that could not be asked is absent.
pub fn list_now(plan: &Plan, secrets: &[String], sandboxes: &Sandboxes) -> Result<BTreeMap<String, Inventory>> {
    let named: BTreeSet<&str> = tools::uses(&plan.file)
        .iter()
        .filter(|u| plan.file.tasks.get(u.index).is_some_and(|t| t.effect != Effect::External))
        .map(|u| u.provider)
        .collect();
    let mut asked: Vec<(String, Arc<dyn Provider>)> = Vec::with_capacity(named.len());
    for n in named {
        if let Some(spec) = plan.file.providers.get(n) {
            asked.push((n.to_string(), crate::plan::adapters::build(n, spec, &plan.workspace)?));
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

impl Runner<'_> {
    /// List the tools of every MCP server a task calls, record each
    /// inventory, and refuse the run if a task calls a tool its server does
    /// not offer (no intent, no call).
    pub(super) async fn check_tools(&mut self) -> Result<()> {
        let named: BTreeSet<String> = tools::uses(&self.plan.file).iter().map(|u| u.provider.to_string()).collect();
        let asked: Vec<(String, Arc<dyn Provider>)> =
            named.into_iter().filter_map(|n| self.providers.get(&n).cloned().map(|p| (n, p))).collect();
        if asked.is_empty() {
            return Ok(());
        }
        self.forget_first_look();
        let call = listing_call(&self.plan.workspace, &self.secrets, &self.sandboxes);
        let listed = inventories(&asked, &call, &self.sandboxes).await;
        for (provider, inventory) in &listed {
            let data = match inventory {
                Ok(inv) => json!({"provider": provider, "server": inv.server, "protocol": inv.protocol,
                                  "digest": inv.digest, "tools": inv.tools, "annotations": inv.annotations}),
                Err(why) => json!({"provider": provider, "error": why}),
            };
            self.write_event(Durability::Normal, EventKind::ToolInventory, None, None, data)?;
            if let Ok(inv) = inventory {
                self.tools.insert(provider.clone(), inv.clone());
            }
        }
        if let Some(refusal) = self.unlisted(&listed) {
            return self.refuse_call(refusal);
        }
        match self.unknown_tool() {
            Some(refusal) => self.refuse_call(refusal),
            None => Ok(()),
        }
    }

    /// The first task whose server's tools could not be read, as an error:
    /// no call is made to a server whose inventory is unknown.
    fn unlisted(&self, listed: &BTreeMap<String, std::result::Result<Inventory, String>>) -> Option<(String, Error)> {
        let uses = tools::uses(&self.plan.file);
        let (unlisted, provider) = tools::first_unlisted(&uses, listed)?;
        let why = match listed.get(provider) {
            Some(Err(why)) => why.clone(),
            _ => "the provider gave no inventory".to_string(),
        };
        let message = format!(
            "task `{}` calls tool `{}` on MCP provider `{provider}`, whose tools could not be read ({why}); \
             nothing was sent",
            unlisted.task_ref, unlisted.tool
        );
        let details = json!({"task_ref": unlisted.task_ref, "provider": provider, "tool": unlisted.tool, "why": why});
        let error = Error::new(Code::ToolInventoryUnavailable, message)
            .at(format!("$.tasks[{}].action.tool", unlisted.index))
            .with_details(details);
        Some((unlisted.task_ref.to_string(), error))
    }

    /// The first task calling a tool its server did not list, as an error.
    fn unknown_tool(&self) -> Option<(String, Error)> {
        let uses = tools::uses(&self.plan.file);
        let unknown = tools::first_unknown(&uses, &self.tools)?;
        let offered: Vec<&String> =
            self.tools.get(unknown.provider).map(|i| i.tools.keys().collect()).unwrap_or_default();
        let message = format!(
            "task `{}` calls tool `{}`, which MCP provider `{}` does not offer (its tools/list: {offered:?}); \
             nothing was sent",
            unknown.task_ref, unknown.tool, unknown.provider
        );
        let details = json!({"task_ref": unknown.task_ref, "provider": unknown.provider, "tool": unknown.tool,
            "offered": offered});
        let error = Error::new(Code::UnknownTool, message)
            .at(format!("$.tasks[{}].action.tool", unknown.index))
            .with_details(details);
        Some((unknown.task_ref.to_string(), error))
    }

    /// Say in the ledger why the run stops, then stop.
    fn refuse_call(&mut self, (task_ref, error): (String, Error)) -> Result<()> {
        let data = json!({"code": error.code, "message": error.message, "details": error.details});
        self.write_event(Durability::Normal, EventKind::CallRefused, Some(&task_ref), None, data)?;
        Err(error)
    }

    /// The inventory entries `task`'s checkpoint carries (see
    /// `decide::tools::context_of`).
    pub(super) fn tool_context(&self, task: &crate::plan::Task) -> BTreeMap<String, String> {
        tools::context_of(&self.plan.file, task, &self.tools)
    }
}
