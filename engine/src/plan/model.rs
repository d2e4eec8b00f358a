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
    /// Who may do each of a person's acts, by operating-system user name
    /// (default: any local user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub people: Option<People>,
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
            people: self.people.clone(),
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

/// Who may do a person's acts: operating-system user names per act. An
/// act without a list is open to any local user; an act whose list does
/// not name the user is refused (`NOT_PERMITTED`) and recorded nowhere.
/// `retry` covers `engine repair` too (both send a task's work again).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct People {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Vec<String>>,
}

impl People {
    /// Each act that has a list, with its list, by its plan key.
    pub fn lists(&self) -> Vec<(&'static str, &[String])> {
        [("approve", &self.approve), ("settle", &self.settle), ("retry", &self.retry)]
            .into_iter()
            .filter_map(|(act, list)| list.as_deref().map(|l| (act, l)))
            .collect()
    }
}

/// A provider's sandbox (docs/sandbox.md): `{"write": [paths]}` opens
/// more paths for writing (absolute, `~` or `~/…`) besides the workspace
/// and the temporary folder; `"none"` runs its processes unconfined.
/// Not part of a task's meaning: it changes where a provider may write,
/// not what it is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxSpec {
    Off(SandboxOff),
    Confined(SandboxWrite),
}

/// `"sandbox": "none"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxOff {
    None,
}

/// `"sandbox": {"write": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxWrite {
    #[serde(default)]
    pub write: Vec<String>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxSpec>,
    },
    /// An HTTP service; each task's `action.body` is POSTed to `endpoint`.
    Http {
        endpoint: String,
        /// URL template with `{operation_id}`: 200 = effect present,
        /// 404 = absent, anything else = inconclusive.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observe: Option<String>,
        /// Hosts besides loopback this provider may contact.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<String>,
        /// An HTTP provider starts no process; accepted for uniformity.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxSpec>,
    },
    /// An MCP tool server over stdio, started per call (argv, no shell, in
    /// the workspace); each task's `action.tool` is called with
    /// `action.arguments`, and `_meta` carries `operation_id` and `try`.
    Mcp {
        command: Vec<String>,
        /// A tool called with `{"operation_id": ...}` whose result's
        /// `structuredContent.state` is `present` or `absent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observe_tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxSpec>,
    },
}

impl ProviderSpec {
    /// The provider's sandbox as the plan states it (`None`: the default).
    pub fn sandbox(&self) -> Option<&SandboxSpec> {
        match self {
            ProviderSpec::Command { sandbox, .. }
            | ProviderSpec::Http { sandbox, .. }
            | ProviderSpec::Mcp { sandbox, .. } => sandbox.as_ref(),
        }
    }

    /// The paths it declares writable (none when unconfined or default).
    pub fn declared_writes(&self) -> &[String] {
        match self.sandbox() {
            Some(SandboxSpec::Confined(w)) => &w.write,
            _ => &[],
        }
    }

    /// Does the plan opt this provider out (`"sandbox": "none"`)?
    pub fn unconfined(&self) -> bool {
        matches!(self.sandbox(), Some(SandboxSpec::Off(SandboxOff::None)))
    }
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
