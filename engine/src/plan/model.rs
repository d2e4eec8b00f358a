//! The plan file's types, exactly as a person writes them. serde reads them
//! with `deny_unknown_fields`; schemars derives the shipped JSON Schema from
//! the same types, so the two cannot drift.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cost::Cost;

/// A plan file, `"version": 1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Must be 1.
    pub version: u32,
    /// Required; `Option` only so a missing goal gets `GOAL_REQUIRED`
    /// rather than a generic parse error (serde reads a missing `Option`
    /// field as `None`; the schema says it is required).
    #[schemars(schema_with = "required_goal")]
    pub goal: Option<Goal>,
    #[serde(default)]
    pub budgets: Budgets,
    /// Providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSpec>,
    pub tasks: Vec<Task>,
    /// Names of environment variables whose values are secrets: they are
    /// redacted from captured output and recorded only as digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl PlanFile {
    /// Everything but the tasks (cheap even for a 100,000-task plan).
    pub fn clone_without_tasks(&self) -> PlanFile {
        PlanFile {
            version: self.version,
            goal: self.goal.clone(),
            budgets: self.budgets.clone(),
            providers: self.providers.clone(),
            tasks: Vec::new(),
            secrets: self.secrets.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub id: String,
    pub statement: String,
    #[serde(default)]
    pub acceptance: Vec<Acceptance>,
    #[serde(default)]
    pub constraints: Vec<String>,
}

/// One acceptance criterion of the goal; `check` makes it machine-checkable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Acceptance {
    pub id: String,
    pub statement: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

/// A command whose exit code is the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// argv, run without a shell, in the workspace.
    pub run: Vec<String>,
    #[serde(default)]
    pub expect_exit: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// A task's validation: a check with a stable id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    pub id: String,
    pub run: Vec<String>,
    #[serde(default)]
    pub expect_exit: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    #[serde(default = "default_attempts")]
    pub max_attempts_per_task: u32,
    #[serde(default = "default_revisions")]
    pub max_revisions: u32,
    #[serde(default = "default_calls")]
    pub max_provider_calls: u64,
    /// Sum of `cost` of dispatched calls, unknown outcomes included
    /// (counted exactly, in millionths).
    #[serde(default)]
    pub max_cost: f64,
    /// Wall clock from the goal's first run.
    #[serde(default = "default_deadline")]
    pub deadline_seconds: u64,
}

fn required_goal(gen: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
    gen.subschema_for::<Goal>()
}

fn default_attempts() -> u32 {
    3
}
fn default_revisions() -> u32 {
    3
}
fn default_calls() -> u64 {
    100
}
fn default_deadline() -> u64 {
    3600
}

impl Budgets {
    /// `max_cost` as an exact cost (validated at load).
    pub fn max_cost(&self) -> Cost {
        Cost::of_plan(self.max_cost)
    }
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_attempts_per_task: default_attempts(),
            max_revisions: default_revisions(),
            max_provider_calls: default_calls(),
            max_cost: 0.0,
            deadline_seconds: default_deadline(),
        }
    }
}

/// How the engine reaches a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProviderSpec {
    /// A local program; argv comes from each task's `action.run`.
    Command {
        /// `agent-json`: the program gets a JSON document on stdin and
        /// prints its report as the last stdout line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<Protocol>,
    },
    /// An HTTP service; each task's `action.body` is POSTed to `endpoint`
    /// (`http://`, or `https://` verified against the system's roots and
    /// `ca_file`).
    Http {
        endpoint: String,
        /// The read-back for tasks that declare none: a URL template (200
        /// is present; nothing is absent, so a 404 is inconclusive) or a
        /// rule `{"url", "present_if", "absent_if"}` (see the task's
        /// `observe`). Checked by the providers' own parser.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "super::observe::http_default_schema")]
        observe: Option<serde_json::Value>,
        /// Hosts besides loopback this provider may contact.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<String>,
        /// A PEM file of CA certificates trusted besides the system's
        /// roots (relative to the workspace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<String>,
    },
    /// An MCP tool server, one per provider per run: over stdio (`command`:
    /// argv, no shell, started in the workspace) or Streamable HTTP
    /// (`url`); each task's `action.tool` is called with
    /// `action.arguments`, and `_meta` carries `operation_id` and `try`.
    Mcp {
        /// argv of a stdio server (exactly one of `command`, `url`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Vec<String>>,
        /// A Streamable HTTP endpoint (`http://` or `https://`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// A tool called with `{"operation_id": ...}` whose result's
        /// `structuredContent.state` is `present` or `absent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observe_tool: Option<String>,
        /// The read-back rule for tasks that declare none (instead of
        /// `observe_tool`): `{"tool", "arguments", "present_if", "absent_if"}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "super::observe::mcp_rule_schema")]
        observe: Option<serde_json::Value>,
        /// Calls may be in flight together on this server (else they take turns).
        #[serde(default, skip_serializing_if = "is_false")]
        concurrent: bool,
        /// Hosts besides loopback a `url` may name.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<String>,
        /// A PEM file of CA certificates trusted besides the system's
        /// roots, for an `https://` `url` (relative to the workspace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<String>,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    AgentJson,
}

/// What a task's work changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads only; safe to re-run.
    None,
    /// Changes files in the workspace; re-observable through checkpoints.
    Local,
    /// Changes something outside; needs a receipt or a re-observation.
    #[default]
    External,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::None => "none",
            Effect::Local => "local",
            Effect::External => "external",
        }
    }

    pub fn parse(s: &str) -> Option<Effect> {
        [Effect::None, Effect::Local, Effect::External].into_iter().find(|e| e.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    #[serde(rename = "ref")]
    pub task_ref: String,
    #[serde(default)]
    pub title: String,
    pub provider: String,
    /// Provider-specific: `{"run": [...]}` for commands, `{"body": ...}` for
    /// HTTP, `{"tool": ..., "arguments": {...}}` for MCP.
    pub action: serde_json::Value,
    #[serde(default)]
    pub effect: Effect,
    /// Workspace-relative paths or globs whose content the task depends on.
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub validations: Vec<Validation>,
    /// The provider deduplicates repeats of the same operation id.
    #[serde(default)]
    pub idempotent: bool,
    /// Cost per call, budgeted against `max_cost` (counted exactly, in
    /// millionths: 0 or at least 0.000001, at most 10^12).
    #[serde(default)]
    pub cost: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Gate even the first call behind a person's approval.
    #[serde(default)]
    pub requires_approval: bool,
    /// Context values recorded in the checkpoint: a command whose stdout is
    /// recorded (`["python3", "--version"]`) or `{"env": "NAME"}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub context: BTreeMap<String, ContextSource>,
    /// How to read this task's effect back when its answer is lost,
    /// instead of the provider's default: an HTTP rule `{"url",
    /// "present_if", "absent_if"}` or an MCP rule `{"tool", "arguments",
    /// "present_if", "absent_if"}`. Present only when `present_if`
    /// matches, absent only when `absent_if` matches, otherwise
    /// inconclusive. Not part of the task's meaning: it is how the engine
    /// looks, not what it asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::observe::task_rule_schema")]
    pub observe: Option<serde_json::Value>,
}

impl Task {
    /// `cost` as an exact cost (validated at load).
    pub fn cost(&self) -> Cost {
        Cost::of_plan(self.cost)
    }

    /// May this task's work be sent again without a person (SPEC: re-run
    /// only where the effect is `none` or the task is declared idempotent)?
    pub fn safe_to_resend(&self) -> bool {
        self.effect == Effect::None || self.idempotent
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ContextSource {
    Command(Vec<String>),
    Env { env: String },
}
