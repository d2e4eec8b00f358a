//! Tool authority as decisions: the MCP tools a plan's tasks call, checked
//! against what each server listed (`tools/list`) before the run's first
//! intent, and the inventory entries a task's checkpoint carries so that a
//! changed tool schema makes its completion not reusable. Pure: the run
//! loop asks the servers, this compares.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::digest::{Digester, Kind};
use crate::plan::{PlanFile, ProviderSpec, Task};

/// One provider's tools as its server listed them: name → digest of the
/// tool's input schema (domain-separated, over canonical JSON).
pub type Inventory = BTreeMap<String, String>;

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
    uses.iter().copied().find(|u| listed.get(u.provider).is_some_and(|inv| !inv.contains_key(u.tool)))
}

/// The checkpoint context name of a tool's schema digest.
pub fn context_name(provider: &str, tool: &str) -> String {
    format!("tool:{provider}/{tool}")
}

/// The inventory entry `task`'s checkpoint carries: its tool's schema
/// digest, or `absent` when the server listed no such tool (nothing when
/// the task calls no MCP tool or its server could not be asked).
pub fn context_of(plan: &PlanFile, task: &Task, listed: &BTreeMap<String, Inventory>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let (Some(tool), Some(inv)) = (tool_of(plan, task), listed.get(&task.provider)) {
        let value = inv.get(tool).cloned().unwrap_or_else(|| "absent".to_string());
        out.insert(context_name(&task.provider, tool), value);
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

    fn listed(tools: &[(&str, Value)]) -> BTreeMap<String, Inventory> {
        let inv = tools.iter().map(|(n, s)| (n.to_string(), schema_digest(s))).collect();
        BTreeMap::from([("fs".to_string(), inv)])
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
        assert_eq!(a.keys().collect::<Vec<_>>(), ["tool:fs/write_file"]);
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
    fn schema_digests_are_their_own_domain() {
        let s = json!({"type": "object"});
        assert_ne!(schema_digest(&s), Digester::new(Kind::Checkpoint).json("input_schema", &s).finish());
    }
}
