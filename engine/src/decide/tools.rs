//! Tool authority as decisions: the MCP tools a plan's tasks call, checked
//! against what each server listed (`tools/list`) before the run's first
//! intent, and the inventory entries a task's checkpoint carries so that a
//! changed tool schema makes its completion not reusable. Pure: the run
//! loop asks the servers, this compares.

use std::collections::BTreeMap;

use providers::ServerInfo;
use serde::Serialize;
use serde_json::Value;

use crate::digest::{Digester, Kind};
use crate::plan::{PlanFile, ProviderSpec, Task};

/// One provider's server as it answered before the run's first intent:
/// who it says it is, the protocol revision spoken, each tool's input
/// schema digest by name, and the digest of the whole listing (every tool
/// as listed, with the server's identity).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inventory {
    pub server: Option<ServerInfo>,
    pub protocol: String,
    pub tools: BTreeMap<String, String>,
    /// Each tool's annotations as the server gave them: recorded and shown,
    /// never a permission nor a task's effect.
    pub annotations: BTreeMap<String, Value>,
    pub digest: String,
}

impl Inventory {
    /// The engine's view of what a provider listed.
    pub fn of(listed: &providers::Inventory) -> Inventory {
        let tools = listed.tools.iter().map(|t| (t.name.clone(), schema_digest(&t.input_schema))).collect();
        let whole = serde_json::to_value(&listed.tools).unwrap_or(Value::Null);
        let server = serde_json::to_value(&listed.server).unwrap_or(Value::Null);
        let digest = Digester::new(Kind::ToolInventory).json("server", &server).json("tools", &whole).finish();
        let annotations = listed.tools.iter().filter_map(|t| Some((t.name.clone(), t.annotations.clone()?))).collect();
        Inventory { server: listed.server.clone(), protocol: listed.protocol.clone(), tools, annotations, digest }
    }

    /// `name version`, or what stands for a server that gave no
    /// `serverInfo`.
    pub fn server_words(&self) -> String {
        match &self.server {
            Some(s) => format!("{} {}", s.name, s.version),
            None => "(no serverInfo)".into(),
        }
    }
}

/// The digest of one tool's input schema.
pub fn schema_digest(schema: &Value) -> String {
    Digester::new(Kind::ToolSchema).json("input_schema", schema).finish()
}

/// A task's call of an MCP tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolUse<'a> {
    /// Position of the task in the plan's `tasks`.
    pub index: usize,
    pub task_ref: &'a str,
    pub provider: &'a str,
    pub tool: &'a str,
}

/// The MCP tool `task` calls, if its provider is an MCP server.
pub fn tool_of<'a>(plan: &PlanFile, task: &'a Task) -> Option<&'a str> {
    match plan.providers.get(&task.provider) {
        Some(ProviderSpec::Mcp { .. }) => task.action.get("tool").and_then(Value::as_str),
        _ => None,
    }
}

/// Every task's MCP tool call, in plan order.
pub fn uses(plan: &PlanFile) -> Vec<ToolUse<'_>> {
    plan.tasks
        .iter()
        .enumerate()
        .filter_map(|(index, t)| {
            tool_of(plan, t).map(|tool| ToolUse { index, task_ref: &t.task_ref, provider: &t.provider, tool })
        })
        .collect()
}

/// The first call of a tool its server does not offer. A provider without
/// an inventory (its server could not be asked) is not judged here: its
/// calls fail, and are classified, as any call to an unavailable server.
pub fn first_unknown<'a>(uses: &[ToolUse<'a>], listed: &BTreeMap<String, Inventory>) -> Option<ToolUse<'a>> {
    uses.iter().copied().find(|u| listed.get(u.provider).is_some_and(|inv| !inv.tools.contains_key(u.tool)))
}

/// The first call on a server whose inventory could not be read: no call
/// may be made to a server whose tools are not known.
pub fn first_unlisted<'a, E>(
    uses: &[ToolUse<'a>],
    listed: &BTreeMap<String, Result<Inventory, E>>,
) -> Option<(ToolUse<'a>, &'a str)> {
    uses.iter().copied().find(|u| matches!(listed.get(u.provider), Some(Err(_)) | None)).map(|u| (u, u.provider))
}

/// The checkpoint context name of a tool's schema digest.
pub fn context_name(provider: &str, tool: &str) -> String {
    format!("tool:{provider}/{tool}")
}

/// The checkpoint context name of a server's identity (`serverInfo`).
pub fn server_context_name(provider: &str) -> String {
    format!("mcp-server:{provider}")
}

/// The checkpoint context name of a server's whole inventory digest.
pub fn inventory_context_name(provider: &str) -> String {
    format!("tools:{provider}")
}

/// The inventory entries `task`'s checkpoint carries: who its server says
/// it is, its tool's schema digest (`absent` when the server listed no
/// such tool) and the digest of the server's whole inventory — so another
/// server, another version or another inventory behind the same command
/// makes the completion not reusable, the server named first. Nothing
/// when the task calls no MCP tool or its server could not be asked.
pub fn context_of(plan: &PlanFile, task: &Task, listed: &BTreeMap<String, Inventory>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let (Some(tool), Some(inv)) = (tool_of(plan, task), listed.get(&task.provider)) {
        let value = inv.tools.get(tool).cloned().unwrap_or_else(|| "absent".to_string());
        out.insert(server_context_name(&task.provider), inv.server_words());
        out.insert(context_name(&task.provider, tool), value);
        out.insert(inventory_context_name(&task.provider), inv.digest.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan() -> PlanFile {
        serde_json::from_value(json!({
            "version": 1,
            "goal": {"id": "g", "statement": "s", "acceptance": [], "constraints": []},
            "budgets": {"max_attempts_per_task": 1, "max_revisions": 1, "max_provider_calls": 1, "max_cost": 0,
                        "deadline_seconds": 60},
            "providers": {"fs": {"kind": "mcp", "command": ["server"]}, "sh": {"kind": "command"}},
            "tasks": [
                {"ref": "T1", "title": "t", "provider": "sh", "action": {"run": ["true"]}},
                {"ref": "T2", "title": "t", "provider": "fs", "action": {"tool": "write_file", "arguments": {}}},
                {"ref": "T3", "title": "t", "provider": "fs", "action": {"tool": "delete_all", "arguments": {}}},
            ],
        }))
        .unwrap()
    }

    fn listing(name: &str, version: &str, tools: &[(&str, Value)]) -> providers::Inventory {
        providers::Inventory {
            server: Some(ServerInfo { name: name.into(), version: version.into() }),
            protocol: "2025-11-25".into(),
            tools: tools
                .iter()
                .map(|(n, s)| providers::Tool {
                    name: n.to_string(),
                    input_schema: s.clone(),
                    output_schema: None,
                    annotations: None,
                })
                .collect(),
        }
    }

    fn listed(tools: &[(&str, Value)]) -> BTreeMap<String, Inventory> {
        BTreeMap::from([("fs".to_string(), Inventory::of(&listing("fs-server", "1", tools)))])
    }

    #[test]
    fn the_first_call_of_a_tool_the_server_does_not_offer_is_named() {
        let p = plan();
        let uses = uses(&p);
        assert_eq!(uses.iter().map(|u| u.task_ref).collect::<Vec<_>>(), ["T2", "T3"], "command tasks call no tool");
        let inv = listed(&[("write_file", json!({"type": "object"}))]);
        let unknown = first_unknown(&uses, &inv).unwrap();
        assert_eq!((unknown.index, unknown.task_ref, unknown.tool), (2, "T3", "delete_all"));
        let both = listed(&[("write_file", json!({})), ("delete_all", json!({}))]);
        assert_eq!(first_unknown(&uses, &both), None);
        // A server that could not be asked is not judged here.
        assert_eq!(first_unknown(&uses, &BTreeMap::new()), None);
    }

    #[test]
    fn a_changed_schema_changes_the_tasks_context_and_names_the_tool() {
        let p = plan();
        let t2 = &p.tasks[1];
        let a = context_of(&p, t2, &listed(&[("write_file", json!({"properties": {"path": {}}}))]));
        let b = context_of(&p, t2, &listed(&[("write_file", json!({"properties": {"path": {}, "mode": {}}}))]));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["mcp-server:fs", "tool:fs/write_file", "tools:fs"]);
        assert_eq!(a["mcp-server:fs"], "fs-server 1");
        assert_ne!(a, b);
        // Key order in the schema is not a change (canonical JSON).
        let c = context_of(&p, t2, &listed(&[("write_file", json!({"b": 1, "a": 2}))]));
        let d = context_of(&p, t2, &listed(&[("write_file", json!({"a": 2, "b": 1}))]));
        assert_eq!(c, d);
        assert_eq!(context_of(&p, t2, &listed(&[]))["tool:fs/write_file"], "absent");
        assert!(context_of(&p, &p.tasks[0], &listed(&[])).is_empty(), "a command task has no tool context");
        assert!(context_of(&p, t2, &BTreeMap::new()).is_empty(), "no inventory, no claim");
    }

    #[test]
    fn another_server_or_inventory_behind_the_same_provider_changes_the_context_server_first() {
        let p = plan();
        let t2 = &p.tasks[1];
        let tools = [("write_file", json!({"type": "object"}))];
        let ctx =
            |l: providers::Inventory| context_of(&p, t2, &BTreeMap::from([("fs".to_string(), Inventory::of(&l))]));
        let base = ctx(listing("fs-server", "1", &tools));
        let upgraded = ctx(listing("fs-server", "2", &tools));
        let other = ctx(listing("evil-server", "1", &tools));
        let more = ctx(listing("fs-server", "1", &[("write_file", json!({"type": "object"})), ("rm", json!({}))]));
        let first_difference =
            |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| a.keys().find(|k| a[*k] != b[*k]).cloned();
        assert_eq!(first_difference(&base, &upgraded).as_deref(), Some("mcp-server:fs"));
        assert_eq!(first_difference(&base, &other).as_deref(), Some("mcp-server:fs"));
        assert_eq!(first_difference(&base, &more).as_deref(), Some("tools:fs"), "a tool added is another inventory");
        assert_eq!(base, ctx(listing("fs-server", "1", &tools)), "the same server, the same context");
        let mut anonymous = listing("x", "1", &tools);
        anonymous.server = None;
        assert_eq!(ctx(anonymous)["mcp-server:fs"], "(no serverInfo)");
    }

    #[test]
    fn a_call_on_a_server_without_an_inventory_is_named() {
        let p = plan();
        let uses = uses(&p);
        let mut listed: BTreeMap<String, Result<Inventory, String>> = BTreeMap::new();
        assert_eq!(first_unlisted(&uses, &listed).map(|(u, _)| u.task_ref), Some("T2"), "never asked: not known");
        listed.insert("fs".into(), Err("tools/list: refused".into()));
        assert_eq!(first_unlisted(&uses, &listed).map(|(u, p)| (u.task_ref, p)), Some(("T2", "fs")));
        listed.insert("fs".into(), Ok(Inventory::of(&listing("fs-server", "1", &[]))));
        assert_eq!(first_unlisted(&uses, &listed), None);
    }

    #[test]
    fn schema_digests_are_their_own_domain() {
        let s = json!({"type": "object"});
        assert_ne!(schema_digest(&s), Digester::new(Kind::Checkpoint).json("input_schema", &s).finish());
    }
}
