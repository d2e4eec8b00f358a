//! Tool authority before the run's first intent: each MCP server the plan
//! calls is asked for its tools (`tools/list`, on the provider the run's
//! calls then use), the inventory is recorded (the server's `serverInfo`,
//! the protocol revision, input-schema digests and the whole inventory's
//! digest), a server whose tools cannot be read stops the run with
//! `TOOL_INVENTORY_UNAVAILABLE` and a task calling a tool its server does
//! not offer with `UNKNOWN_TOOL`, before anything is sent. The comparisons
//! are `decide::tools`; the refusals are pure functions of the listing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::state::Run;
use crate::decide::tools::{self, Inventory, ToolUse};
use crate::error::{Code, Error, Result};
use crate::store::events::EventKind;
use crate::store::Durability;

/// What the listing gave: each asked provider's inventory, or why not.
type Listed = BTreeMap<String, std::result::Result<Inventory, String>>;

impl Run<'_> {
    /// List the tools of every MCP server a task calls, record each
    /// inventory, and refuse the run (no intent, no call) if a task calls a
    /// server whose tools could not be read, or a tool its server does not
    /// offer.
    pub async fn check_tools(&mut self) -> Result<()> {
        let uses = tools::uses(&self.plan.file);
        let named: BTreeSet<String> = uses.iter().map(|u| u.provider.to_string()).collect();
        if named.is_empty() {
            return Ok(());
        }
        self.io.forget().await;
        let listed = self.io.list_tools(named).await;
        for (provider, inventory) in &listed {
            let data = match inventory {
                Ok(inv) => json!({"provider": provider, "server": inv.server, "protocol": inv.protocol,
                                  "digest": inv.digest, "tools": inv.tools, "annotations": inv.annotations}),
                Err(why) => json!({"provider": provider, "error": why}),
            };
            self.write_event(Durability::Normal, EventKind::ToolInventory, None, None, data).await?;
            if let Ok(inv) = inventory {
                self.tools.insert(provider.clone(), inv.clone());
            }
        }
        let unlisted = unlisted(&uses, &listed, self.plan.source.as_deref());
        let unlisted = match crate::failpoint::fault(crate::failpoint::Fault::SendWithoutInventory) {
            // Planted fault: a server whose tools could not be read is let be.
            true => None,
            false => unlisted,
        };
        let Some((task_ref, error)) = unlisted.or_else(|| unknown_tool(&uses, &self.tools)) else {
            return Ok(());
        };
        // Say in the ledger why the run stops, then stop.
        let data = json!({"code": error.code, "message": error.message, "details": error.details});
        self.write_event(Durability::Normal, EventKind::CallRefused, Some(&task_ref), None, data).await?;
        Err(error)
    }
}

/// The first task whose server's tools could not be read, as an error: no
/// call is made to a server whose inventory is unknown. A server that
/// wants an OAuth token the engine does not have is a person's to
/// authorize: `AUTHORIZATION_REQUIRED`, with the command that does it.
fn unlisted(uses: &[ToolUse<'_>], listed: &Listed, plan: Option<&std::path::Path>) -> Option<(String, Error)> {
    let (unlisted, provider) = tools::first_unlisted(uses, listed)?;
    let why = match listed.get(provider) {
        Some(Err(why)) => why.clone(),
        _ => "the provider gave no inventory".to_string(),
    };
    if let Some(at) = why.find(providers::oauth::AUTHORIZATION_REQUIRED) {
        let why = why[at + providers::oauth::AUTHORIZATION_REQUIRED.len()..].to_string();
        return Some((unlisted.task_ref.to_string(), authorization_required(&unlisted, provider, why, plan)));
    }
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

/// The stop of a run whose MCP server has no usable OAuth token: nothing
/// was sent to it, the task stays as it was, and the advice is the exact
/// login command.
fn authorization_required(
    unlisted: &ToolUse<'_>,
    provider: &str,
    why: String,
    plan: Option<&std::path::Path>,
) -> Error {
    let login = login_command(plan, provider, providers::oauth::step_up_scope(&why));
    let message = format!(
        "task `{}` calls tool `{}` on MCP provider `{provider}`, which needs an OAuth token the engine does not \
         have ({why}); nothing was sent. A person authorizes it: `{login}`, then runs again",
        unlisted.task_ref, unlisted.tool
    );
    let details = json!({"task_ref": unlisted.task_ref, "provider": provider, "tool": unlisted.tool,
        "why": why, "advice": login});
    Error::new(Code::AuthorizationRequired, message).at(format!("$.providers.{provider}.auth")).with_details(details)
}

/// The stop of a run whose MCP server refused `task`'s call for want of
/// scope (`403 insufficient_scope`): by the server's answer nothing was
/// done, the task is pending again, and the advice is the exact login —
/// with the scope — after which a plain run sends the call once more.
pub(super) fn step_up_required(task: &crate::plan::Task, scope: &str, plan: Option<&std::path::Path>) -> Error {
    let provider = task.provider.as_str();
    let tool = task.action.get("tool").and_then(serde_json::Value::as_str).unwrap_or("");
    let login = login_command(plan, provider, Some(scope));
    let message = format!(
        "task `{}` called tool `{tool}` on MCP provider `{provider}`, whose server refused it for want of scope \
         (403 insufficient_scope: it asks for `{scope}`, which the kept token was not granted); by its answer it \
         did nothing, and the task is pending again. A person authorizes that scope: `{login}`, then runs again \
         (the call goes once more; external or paid work waits for a person's `engine approve` first)",
        task.task_ref
    );
    let details = json!({"task_ref": task.task_ref, "provider": provider, "tool": tool, "scope": scope,
        "advice": login});
    Error::new(Code::AuthorizationRequired, message).at(format!("$.providers.{provider}.auth")).with_details(details)
}

/// The command a person runs to authorize `provider`: with `--scope` for a
/// step-up the server asked for.
pub(super) fn login_command(plan: Option<&std::path::Path>, provider: &str, scope: Option<&str>) -> String {
    use crate::decide::advice::shell_word;
    let plan = plan.map_or_else(|| "PLAN".to_string(), |p| shell_word(&p.to_string_lossy()));
    let scope = scope.map(|s| format!(" --scope {}", shell_word(s))).unwrap_or_default();
    format!("engine login {plan} {}{scope}", shell_word(provider))
}

/// The first task calling a tool its server did not list, as an error.
fn unknown_tool(uses: &[ToolUse<'_>], inventories: &BTreeMap<String, Inventory>) -> Option<(String, Error)> {
    let unknown = tools::first_unknown(uses, inventories)?;
    let offered: Vec<&String> = inventories.get(unknown.provider).map(|i| i.tools.keys().collect()).unwrap_or_default();
    let message = format!(
        "task `{}` calls tool `{}`, which MCP provider `{}` does not offer (its tools/list: {offered:?}); \
         nothing was sent",
        unknown.task_ref, unknown.tool, unknown.provider
    );
    let details = json!({"task_ref": unknown.task_ref, "provider": unknown.provider,
        "tool": unknown.tool, "offered": offered});
    let error = Error::new(Code::UnknownTool, message)
        .at(format!("$.tasks[{}].action.tool", unknown.index))
        .with_details(details);
    Some((unknown.task_ref.to_string(), error))
}
