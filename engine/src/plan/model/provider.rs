//! The plan file's providers, as a person writes them: how the engine
//! reaches each (`kind`), its sandbox and network, and the protocol a
//! command provider speaks. (Read as `plan::model`'s own types.)

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// What a provider's processes may connect to (docs/sandbox.md,
/// "Network"). Without it they have no network at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// `HOST:PORT` entries (`api.example.com:443`, `127.0.0.1:*`, `[::1]:8080`,
    /// `*:5432`). The kernel filters TCP by port only: every entry allows
    /// its port on any host, and a `*` port allows every TCP port.
    #[serde(default)]
    pub connect: Vec<String>,
}

/// How the engine reaches a provider.
/// How the engine reaches a provider (`kind`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "Provider")]
pub enum ProviderSpec {
    /// A local program, started once per call in the workspace, in its own
    /// process group, with `ENGINE_OPERATION_ID` and `ENGINE_TRY` set. Its
    /// program and arguments are each task's `action.run`. It succeeded
    /// when it exits 0.
    Command {
        /// `agent-json`: the program is an agent. It gets one JSON document
        /// on stdin (goal, task, operation_id, try, and on a repair the
        /// failure evidence) and prints its report, a JSON object, as its
        /// last stdout line (see docs/agent-json.md). Default: none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<Protocol>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxSpec>,
        /// What its processes may connect to. Default: no network at all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<NetworkSpec>,
        /// The names of the engine's environment variables its processes
        /// get besides PATH, HOME, LANG and TMPDIR (an API key by its name:
        /// its value is never in the plan or the ledger). Default: none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
        /// `agent-json` only: the model the plan expects the agent to
        /// report (its report's `model`). A report naming another model, or
        /// none, fails the attempt (`provider_output_invalid`); a completion
        /// whose reported model differs from the pin, or that recorded
        /// none, is stale (`TOOL_CHANGED: model a → b`). Not sent to the
        /// agent, not part of the task's meaning. Default: none (a
        /// completion's model is compared with the newest one a completion
        /// of this provider reported in the goal's revision).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// An HTTP service: each task's `action.body` is sent to `endpoint`
    /// (POST unless `action.method` says otherwise), with the headers
    /// `Idempotency-Key` (the operation id) and `Engine-Try`. A 2xx answer
    /// is success. `https://` is verified against the system's roots and
    /// `ca_file`.
    Http {
        /// The URL (`http://` or `https://`). Only loopback hosts unless
        /// `hosts` lists more.
        endpoint: String,
        /// The read-back for tasks that declare none, so an operation whose
        /// answer was lost can be looked up: a URL template with
        /// `{operation_id}` (200 is present; nothing is absent, so a 404 is
        /// inconclusive) or a rule `{"url", "present_if", "absent_if"}` (see
        /// the task's `observe`). Checked by the providers' own parser.
        /// Default: none (a lost answer is then `effect_unknown`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::plan::observe::http_default_schema")]
        observe: Option<serde_json::Value>,
        /// Hosts besides loopback this provider may contact. Default: none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<String>,
        /// A PEM file of CA certificates trusted besides the system's
        /// roots (relative to the workspace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<String>,
        /// An HTTP provider starts no process; accepted for uniformity.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxSpec>,
        /// A response header whose value is the service's version (e.g.
        /// `X-Service-Version`). Each answer's value is recorded with the
        /// completion; a completion whose value differs from the newest one
        /// a completion of this provider recorded in the goal's revision is
        /// stale (`TOOL_CHANGED`).
        /// The service is never called to learn it. Default: none (the
        /// service's version is not compared, and `engine explain` says
        /// so).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version_header: Option<String>,
    },
    /// An MCP tool server, one per provider per run: over stdio (`command`:
    /// argv, no shell, started in the workspace by the first call of a run
    /// that needs it) or Streamable HTTP (`url`); every call of the run
    /// goes to it. Each task's `action.tool` is called with
    /// `action.arguments`; `_meta` carries `operation_id` and `try`.
    Mcp {
        /// The server's program and arguments, for a stdio server (exactly
        /// one of `command`, `url`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Vec<String>>,
        /// A Streamable HTTP endpoint (`http://` or `https://`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// A tool the engine calls with `{"operation_id": ...}` to learn
        /// whether an operation whose answer was lost took effect: its
        /// result's `structuredContent.state` is `present` or `absent`.
        /// Default: none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observe_tool: Option<String>,
        /// The read-back rule for tasks that declare none (instead of
        /// `observe_tool`): `{"tool", "arguments", "present_if", "absent_if"}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::plan::observe::mcp_rule_schema")]
        observe: Option<serde_json::Value>,
        /// Calls may be in flight together on this server (else they take
        /// turns). Default: false.
        #[serde(default, skip_serializing_if = "is_false")]
        concurrent: bool,
        /// Hosts besides loopback a `url` may name. Default: none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<String>,
        /// A PEM file of CA certificates trusted besides the system's
        /// roots, for an `https://` `url` (relative to the workspace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxSpec>,
        /// What a stdio server's process may connect to. Default: no
        /// network at all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<NetworkSpec>,
        /// The names of the engine's environment variables a stdio
        /// server's process gets besides PATH, HOME, LANG and TMPDIR.
        /// Default: none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
        /// The tools a plan may call on this server (an allow-list checked
        /// by `engine check`); absent: any tool the server offers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<Vec<String>>,
        /// A `url` server that wants an OAuth bearer token:
        /// `{"oauth": {"client_id"?: "...", "client_secret"?: {"env": NAME}
        /// | {"file": PATH}, "scopes"?: ["..."]}}` (no `client_id`: dynamic
        /// client registration). A person authorizes it with `engine login
        /// PLAN PROVIDER`; the tokens (and a client secret, read at login
        /// from where the plan names it) are kept outside every workspace
        /// (docs/providers.md). Checked by the providers' own parser.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::plan::auth::auth_schema")]
        auth: Option<serde_json::Value>,
        /// A question the server puts during a call (an elicitation) held
        /// open for a person: `{"wait_seconds": N}`, 0 to 3600. The run
        /// shows it with the `engine answer` command and waits up to N
        /// seconds (within the task's deadline) for a person's answer from
        /// another terminal; none in time: `cancel`, and the task waits
        /// for `engine answer`. Default: 0, dismissed at once. Checked by
        /// the providers' own parser.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::plan::auth::ask_schema")]
        ask: Option<serde_json::Value>,
    },
    /// Work the engine does itself, with no process and no I/O of its own
    /// (a testing and benchmarking aid): each task's `action` is
    /// `{"op": "noop"}` or `{"op": "sleep", "ms": N}`. Its calls go through
    /// the same intent, receipt, validation and classification as any
    /// provider's; the task's declared `effect` still governs them.
    Builtin {},
}

impl ProviderSpec {
    /// The provider's config as the providers' parser reads it and as a
    /// task's meaning sees it: without `sandbox` (the engine applies it to
    /// the processes it starts; it changes where a provider may write, not
    /// what it is asked), without `network` and `env` (the engine's too;
    /// a task's meaning takes them apart, `plan::reach`) and without an MCP
    /// provider's `tools` allow-list (the engine's own check before
    /// anything runs, never the server's business).
    pub fn provider_config(&self) -> serde_json::Value {
        // A derived `Serialize` of strings, numbers and string-keyed maps
        // cannot fail; `Null` would only make a parse fail with its place.
        let mut config = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(obj) = config.as_object_mut() {
            obj.remove("sandbox");
            obj.remove("network");
            obj.remove("env");
            if let ProviderSpec::Mcp { .. } = self {
                obj.remove("tools");
            }
        }
        config
    }

    /// Does it hold a question its server puts during a call open for a
    /// person (an MCP `ask.wait_seconds` above zero)?
    pub fn holds_questions(&self) -> bool {
        match self {
            ProviderSpec::Mcp { ask: Some(ask), .. } => {
                ask.get("wait_seconds").and_then(serde_json::Value::as_u64).is_some_and(|n| n > 0)
            }
            _ => false,
        }
    }

    /// Does it read back, for tasks without a rule of their own, what
    /// became of a call whose answer was lost (an HTTP `observe`, an MCP
    /// `observe_tool` or `observe`)?
    pub fn reads_back(&self) -> bool {
        match self {
            ProviderSpec::Http { observe, .. } => observe.is_some(),
            ProviderSpec::Mcp { observe_tool, observe, .. } => observe_tool.is_some() || observe.is_some(),
            ProviderSpec::Command { .. } | ProviderSpec::Builtin {} => false,
        }
    }

    /// The provider's sandbox as the plan states it (`None`: the default).
    pub fn sandbox(&self) -> Option<&SandboxSpec> {
        match self {
            ProviderSpec::Command { sandbox, .. }
            | ProviderSpec::Http { sandbox, .. }
            | ProviderSpec::Mcp { sandbox, .. } => sandbox.as_ref(),
            // No process of its own: the engine does the work.
            ProviderSpec::Builtin {} => None,
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

    /// Its `network` as declared (`None`: no network).
    pub fn network(&self) -> Option<&NetworkSpec> {
        match self {
            ProviderSpec::Command { network, .. } | ProviderSpec::Mcp { network, .. } => network.as_ref(),
            ProviderSpec::Http { .. } | ProviderSpec::Builtin {} => None,
        }
    }

    /// Its `env` names as declared.
    pub fn env(&self) -> &[String] {
        match self {
            ProviderSpec::Command { env, .. } | ProviderSpec::Mcp { env, .. } => env,
            ProviderSpec::Http { .. } | ProviderSpec::Builtin {} => &[],
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The protocol a command provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// A JSON document on stdin, a JSON report as the last stdout line.
    AgentJson,
}
