//! The plan file's types, exactly as a person writes them. serde reads them
//! with `deny_unknown_fields`; schemars derives the shipped JSON Schema from
//! the same types, so the two cannot drift. Their `///` comments are the
//! schema's descriptions: they are written for the plan's author (what a
//! field does, its default), never about the code.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cost::Cost;

mod provider;
pub use provider::*;

/// An `engine` plan file: one goal, and the tasks (a DAG) that reach it,
/// each done by a provider. Unknown fields are refused (`PLAN_INVALID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "engine plan file")]
pub struct PlanFile {
    /// The JSON Schema this file follows, for editors (`engine schema`
    /// prints it). Not part of the plan's meaning: changing it changes no
    /// digest.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The plan format's version: 1.
    pub version: u32,
    /// What the plan is for. Required (`GOAL_REQUIRED` without it).
    // An `Option` so that a missing goal is GOAL_REQUIRED rather than a
    // generic parse error; the schema says it is required.
    #[schemars(schema_with = "required_goal")]
    pub goal: Option<Goal>,
    /// Limits on the work done for the goal. Every one has a default.
    #[serde(default)]
    pub budgets: Budgets,
    /// The providers tasks name, by name: how the engine reaches each.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSpec>,
    /// The tasks, in any order: `depends_on` makes the graph.
    pub tasks: Vec<Task>,
    /// Names of environment variables whose values are secrets: redacted
    /// (`[REDACTED]`) from all captured output, and recorded only as
    /// digests in checkpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Who may do each of a person's acts, by operating-system user name
    /// (default: any local user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub people: Option<People>,
    /// How a person's approvals (and answers) last (default: until spent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Approvals>,
}

/// `approvals`: `{"expire_after": "30m"}` — an approval (or an answer)
/// given without `--for` ends after this long (`90s`, `5m`, `2h`, `1d`);
/// past it, it is `expired` and pays for no call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Approvals {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
}

impl PlanFile {
    /// Everything but the tasks (cheap even for a 100,000-task plan).
    pub fn clone_without_tasks(&self) -> PlanFile {
        PlanFile {
            schema: self.schema.clone(),
            version: self.version,
            goal: self.goal.clone(),
            budgets: self.budgets.clone(),
            providers: self.providers.clone(),
            tasks: Vec::new(),
            secrets: self.secrets.clone(),
            people: self.people.clone(),
            approvals: self.approvals.clone(),
        }
    }
}

/// The goal: what must be true when the work is done. Its statement,
/// acceptance criteria and constraints make the goal contract digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    /// The goal's id in the store (1-128 of `A-Z a-z 0-9 _ . : / -`).
    /// Every run of a plan with this id is the same goal.
    pub id: String,
    /// What must be true, in a sentence.
    pub statement: String,
    /// The criteria; one with a `check` is verified by running it after
    /// every task completed. Without any check, nothing but the tasks' own
    /// validations judges the goal. Default: none.
    #[serde(default)]
    pub acceptance: Vec<Acceptance>,
    /// Rules the work must keep (handed to agents with the goal): plain
    /// statements (recorded, not checked by the engine) and checkable
    /// constraints (`protect`, `check`). Default: none.
    #[serde(default)]
    pub constraints: Vec<Constraint>,
}

/// One of the goal's constraints: a plain statement the engine records but
/// does not check, or a checkable one.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Constraint {
    /// Recorded in the goal contract, reported as not checked by the engine.
    Statement(String),
    /// Checked by the engine from evidence: its protected paths before and
    /// after every attempt, its check after every attempt's validations.
    Checked(CheckedConstraint),
}

/// A constraint the engine checks: at least one of `protect` and `check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckedConstraint {
    pub id: String,
    pub statement: String,
    /// Workspace-relative paths or globs no attempt may change, create or
    /// delete (unless its task's `may_change` allows it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<String>,
    /// A command run after every attempt's validations and before the
    /// acceptance checks; its exit code is the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

impl Constraint {
    /// The checkable constraint, if this is one.
    pub fn checked(&self) -> Option<&CheckedConstraint> {
        match self {
            Constraint::Statement(_) => None,
            Constraint::Checked(c) => Some(c),
        }
    }

    pub fn statement(&self) -> &str {
        match self {
            Constraint::Statement(s) => s,
            Constraint::Checked(c) => &c.statement,
        }
    }
}

/// A string is a statement; an object is a checkable constraint, read with
/// its own field errors (an untagged enum would only say "no variant
/// matched", without the place).
impl<'de> Deserialize<'de> for Constraint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = Constraint;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a statement (string) or {\"id\", \"statement\", \"protect\", \"check\"}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Constraint, E> {
                Ok(Constraint::Statement(v.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Constraint, E> {
                Ok(Constraint::Statement(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Constraint, A::Error> {
                CheckedConstraint::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Constraint::Checked)
            }
        }
        d.deserialize_any(Either)
    }
}

/// One acceptance criterion of the goal; `check` makes it verified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Acceptance {
    /// The criterion's id, unique in the goal.
    pub id: String,
    /// What it asks, in a sentence.
    pub statement: String,
    /// The command that verifies it. Without one, the criterion is stated
    /// and never verified (the run's summary says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

/// A command whose exit code is the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// The program and its arguments (no shell), run in the workspace.
    pub run: Vec<String>,
    /// The exit code that means "passed". Default: 0.
    #[serde(default)]
    pub expect_exit: i32,
    /// Seconds before the check is killed and counted as failed. Default: 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// A task's validation: a command run after the provider answered, whose
/// exit code decides whether the task succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    /// The validation's id, unique in the task (reuse compares them).
    pub id: String,
    /// The program and its arguments (no shell), run in the workspace.
    pub run: Vec<String>,
    /// The exit code that means "passed". Default: 0.
    #[serde(default)]
    pub expect_exit: i32,
    /// Seconds before the validation is killed and counted as failed. Default: 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// Limits on the work done for the goal. A call that would pass one is
/// not sent: the run stops with `BUDGET_EXHAUSTED`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Attempts of one task in one revision (runs, repairs, retries).
    /// At least 1. Default: 3.
    #[serde(default = "default_attempts")]
    pub max_attempts_per_task: u32,
    /// Revisions of the goal after the first (`engine revise`). The lowest
    /// value any revision set holds: a plan cannot raise it. Default: 3.
    #[serde(default = "default_revisions")]
    pub max_revisions: u32,
    /// Provider calls for the goal, in all revisions; a call whose outcome
    /// is unknown counts. Default: 100.
    #[serde(default = "default_calls")]
    pub max_provider_calls: u64,
    /// The sum of the `cost` of the goal's calls, unknown outcomes
    /// included, counted exactly in millionths. Default: 0, so a task with
    /// a `cost` needs this raised.
    #[serde(default)]
    pub max_cost: f64,
    /// Wall clock of one run of work: no call is sent later than this
    /// after the start of a `run`, `repair`, `retry` or `revise` command
    /// (the next command starts afresh).
    #[serde(default = "default_deadline")]
    pub deadline_seconds: u64,
}

fn required_goal(gen: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
    gen.subschema_for::<Goal>()
}

/// A task's `action` in the schema: one of the shapes a provider kind
/// reads (the plan names its provider, so the schema cannot pick one by
/// kind; `engine check` does).
fn action_schema(gen: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
    use schemars::schema::{Schema, SchemaObject, SubschemaValidation};
    let one_of =
        vec![gen.subschema_for::<CommandAction>(), gen.subschema_for::<HttpAction>(), gen.subschema_for::<McpAction>()];
    Schema::Object(SchemaObject {
        subschemas: Some(Box::new(SubschemaValidation { one_of: Some(one_of), ..Default::default() })),
        ..Default::default()
    })
}

/// The action of a task whose provider is a `command`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // the schema's shape only; `validate` reads actions
struct CommandAction {
    /// The program and its arguments (no shell), run in the workspace.
    run: Vec<String>,
}

/// The action of a task whose provider is `http`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct HttpAction {
    /// The request body: a JSON value, sent as JSON.
    body: serde_json::Value,
    /// The HTTP method. Default: POST.
    #[serde(default)]
    #[schemars(with = "String")]
    method: Option<String>,
    /// Extra request headers, name to value. Default: none.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    headers: Option<BTreeMap<String, String>>,
}

/// The action of a task whose provider is `mcp`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct McpAction {
    /// The name of the tool to call.
    tool: String,
    /// The tool's arguments. Default: `{}`.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
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
    /// Who may record a revision (`engine revise`, `--raise` and
    /// `--approve-loosening` included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revise: Option<Vec<String>>,
    /// Who may answer what an MCP server asks a person (`engine answer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Vec<String>>,
    /// Who may hold and release a task or the goal (`engine hold`,
    /// `engine release`). Default: the `retry` list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Vec<String>>,
}

impl People {
    /// Each act that has a list, with its list, by its plan key.
    pub fn lists(&self) -> Vec<(&'static str, &[String])> {
        [
            ("approve", &self.approve),
            ("settle", &self.settle),
            ("retry", &self.retry),
            ("revise", &self.revise),
            ("answer", &self.answer),
            ("hold", &self.hold),
        ]
        .into_iter()
        .filter_map(|(act, list)| list.as_deref().map(|l| (act, l)))
        .collect()
    }
}

/// What a task's work changes. Default: `external`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads only: safe to run again, and run again after a crash.
    None,
    /// Changes files in the workspace: judged again through the checkpoint
    /// of its inputs.
    Local,
    /// Changes something outside the workspace: a repeat (repair, retry,
    /// re-run) needs a person's approval, and a lost answer is never
    /// re-sent without one.
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

/// A JSON value read as small as it holds: a parsed object or array keeps
/// the room it grew into (four entries at least, 72 to 80 bytes each), so
/// an action of one key and one item took about 600 bytes; with 100,000
/// tasks that was the largest part of `engine check`'s memory. Rebuilt
/// here, as each task is read, so the surplus never adds up.
fn compact_json<'de, D: serde::Deserializer<'de>>(de: D) -> Result<serde_json::Value, D::Error> {
    let mut value = serde_json::Value::deserialize(de)?;
    compact(&mut value);
    Ok(value)
}

/// A list of strings without the room it grew into (the same reason).
fn compact_strings<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Vec<String>, D::Error> {
    let mut list = Vec::<String>::deserialize(de)?;
    list.shrink_to_fit();
    Ok(list)
}

fn compact(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Array(items) => {
            items.iter_mut().for_each(compact);
            items.shrink_to_fit();
        }
        serde_json::Value::Object(map) => {
            // Collected from an exact-size iterator: room for these entries only.
            *map = std::mem::take(map)
                .into_iter()
                .map(|(k, mut v)| {
                    compact(&mut v);
                    (k, v)
                })
                .collect();
        }
        _ => {}
    }
}

/// One task: a call of a provider, then its validations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task's name in the plan, unique (1-128 of `A-Z a-z 0-9 _ . : / -`).
    #[serde(rename = "ref")]
    pub task_ref: String,
    /// A title for people. Default: empty.
    #[serde(default)]
    pub title: String,
    /// The name of a provider in `providers`.
    pub provider: String,
    /// What to ask the provider, in the shape its kind reads.
    #[schemars(schema_with = "action_schema")]
    #[serde(deserialize_with = "compact_json")]
    pub action: serde_json::Value,
    /// What the work changes. Default: `external`, the careful assumption:
    /// every repeat of it then needs a person's approval.
    #[serde(default)]
    pub effect: Effect,
    /// Workspace paths, folders or globs whose content the task depends on;
    /// their digests make the task's checkpoint. Default: none.
    #[serde(default, deserialize_with = "compact_strings")]
    pub inputs: Vec<String>,
    /// Refs of the tasks that must complete first. Default: none.
    #[serde(default, deserialize_with = "compact_strings")]
    pub depends_on: Vec<String>,
    /// Commands that judge the provider's work; the task succeeded only if
    /// every one passed. Default: none.
    #[serde(default)]
    pub validations: Vec<Validation>,
    /// The provider deduplicates repeats of the same operation id, so the
    /// engine may send it again after a crash. Default: false.
    #[serde(default)]
    pub idempotent: bool,
    /// The cost of one call, counted against `budgets.max_cost` (0, or
    /// 0.000001 to 10^12). A task with a cost needs an approval for every
    /// repeat. Default: 0.
    #[serde(default)]
    pub cost: f64,
    /// Seconds before the call is stopped. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Every call, the first too, waits on a person's `engine approve`.
    /// Default: false.
    #[serde(default)]
    pub requires_approval: bool,
    /// An agent task (a command provider speaking `agent-json`) that may
    /// make paid calls of its own: what its report says it spent (`spent`)
    /// is counted against `budgets.max_cost`, and it runs only while the
    /// budget leaves room after its call's `cost`. A report of spending
    /// from a task without it is a constraint violation. Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_spend: bool,
    /// Named values recorded in the task's checkpoint, so a change in them
    /// makes the task run again: a command whose output is the value
    /// (`["python3", "--version"]`) or an environment variable
    /// (`{"env": "NAME"}`). Default: none.
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
    pub observe: Option<Box<serde_json::Value>>,
    /// Protected paths (paths or globs) this task is allowed to change: a
    /// change there by its attempts is no constraint violation. Part of the
    /// task's meaning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub may_change: Vec<String>,
    /// Workspace-relative paths or globs (`dist/**`) of the files this
    /// task makes for the tasks after it: once it succeeds, the engine
    /// keeps their content in the ledger and writes them, digest-checked,
    /// into the workspace of any worker that runs a task depending on it
    /// (directly or through others). Part of the task's meaning.
    /// Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
    /// What this task's processes (its command and validations) may
    /// connect to besides what its provider declares. A command provider's
    /// tasks only. Part of the task's meaning. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// Names of the engine's environment variables this task's processes
    /// get besides its provider's. A command provider's tasks only. Part
    /// of the task's meaning. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
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

/// Where a context value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ContextSource {
    /// A command (program and arguments, no shell, 30 s at most); its
    /// trimmed stdout is the value.
    Command(Vec<String>),
    /// An environment variable's value.
    Env {
        /// The variable's name.
        env: String,
    },
}
