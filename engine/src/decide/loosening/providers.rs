//! A provider's authority, old -> new: what it is (kind, program, URL,
//! endpoint, protocol, authorization, trusted certificates), where its
//! processes may write, connect and read variables from, how its effects
//! are read back, which tools a plan may call on it. Only `concurrent`
//! (whether its calls take turns) is none of it.

use serde_json::{json, Value};

use super::fields::{self, allow_list, removable, same_or, widening_list};
use super::{push, Change, Kind, Loosening, Place};
use crate::plan::model::{NetworkSpec, ProviderSpec, SandboxSpec};
use crate::plan::PlanFile;

/// A provider's authority, whatever its kind: every field of every kind
/// is named here (no `..`), so a new one does not build until it is
/// placed.
struct View<'a> {
    /// What it is: its kind and the fields that say where calls go.
    target: Value,
    ca_file: Option<&'a String>,
    sandbox: Option<&'a SandboxSpec>,
    network: Option<&'a NetworkSpec>,
    env: &'a [String],
    hosts: &'a [String],
    /// Its default read-back (`observe`, an MCP `observe_tool`).
    observe: Option<Value>,
    tools: Option<&'a [String]>,
}

fn view(spec: &ProviderSpec) -> View<'_> {
    match spec {
        // An agent's pinned `model`: what its report is held to, no
        // authority (a new pin only refuses more).
        ProviderSpec::Command { protocol, sandbox, network, env, model: _ } => View {
            target: json!({"kind": "command", "protocol": protocol}),
            ca_file: None,
            sandbox: sandbox.as_ref(),
            network: network.as_ref(),
            env,
            hosts: &[],
            observe: None,
            tools: None,
        },
        // Which answer header names the service's version: no authority.
        ProviderSpec::Http { endpoint, observe, hosts, ca_file, sandbox, version_header: _ } => View {
            target: json!({"kind": "http", "endpoint": endpoint}),
            ca_file: ca_file.as_ref(),
            sandbox: sandbox.as_ref(),
            network: None,
            env: &[],
            hosts,
            observe: observe.clone(),
            tools: None,
        },
        ProviderSpec::Mcp {
            command,
            url,
            observe_tool,
            observe,
            // Whether its calls take turns: no authority.
            concurrent: _,
            hosts,
            ca_file,
            sandbox,
            network,
            env,
            tools,
            auth,
            // How long a question waits for a person: no authority (a
            // person answers, or nobody does).
            ask: _,
        } => View {
            target: json!({"kind": "mcp", "command": command, "url": url, "auth": auth}),
            ca_file: ca_file.as_ref(),
            sandbox: sandbox.as_ref(),
            network: network.as_ref(),
            env,
            hosts,
            observe: match (observe_tool, observe) {
                (None, None) => None,
                (tool, rule) => Some(json!({"observe_tool": tool, "observe": rule})),
            },
            tools: tools.as_deref(),
        },
        ProviderSpec::Builtin {} => View {
            target: json!({"kind": "builtin"}),
            ca_file: None,
            sandbox: None,
            network: None,
            env: &[],
            hosts: &[],
            observe: None,
            tools: None,
        },
    }
}

/// Every provider of `after` against the same name in `before` (a new
/// one against the defaults: no sandbox opening, no network, the default
/// environment, loopback only).
pub fn compare(out: &mut Vec<Loosening>, before: &PlanFile, after: &PlanFile) {
    for (name, spec) in &after.providers {
        let on: Vec<String> = after.tasks.iter().filter(|t| t.provider == *name).map(|t| t.task_ref.clone()).collect();
        let place = |field: &str| Place {
            at: format!("$.providers.{name}.{field}"),
            provider: Some(name.clone()),
            tasks: on.clone(),
            ..Place::default()
        };
        let a = view(spec);
        let b = before.providers.get(name).map(view);
        reach(out, &place, b.as_ref(), &a);
        if let Some(b) = &b {
            what_it_is(out, &place, b, &a);
        }
    }
}

/// Where its processes may write and connect, and the variables they get.
fn reach(out: &mut Vec<Loosening>, place: &dyn Fn(&str) -> Place, b: Option<&View>, a: &View) {
    let sandbox = fields::sandbox(b.and_then(|b| b.sandbox), a.sandbox);
    push(out, Kind::Sandbox, place("sandbox"), (json!(b.and_then(|b| b.sandbox)), json!(a.sandbox)), sandbox);
    let network = fields::network(b.and_then(|b| b.network), a.network);
    push(out, Kind::Network, place("network"), (json!(b.and_then(|b| b.network)), json!(a.network)), network);
    let hosts = widening_list(b.map_or(&[], |b| b.hosts), a.hosts, "hosts");
    push(out, Kind::Network, place("hosts"), (json!(b.map(|b| b.hosts)), json!(a.hosts)), hosts);
    let env = fields::provider_env(b.map_or(&[], |b| b.env), a.env);
    push(out, Kind::Env, place("env"), (json!(b.map(|b| b.env)), json!(a.env)), env);
}

/// What it is, how it reads effects back, which tools it may be asked for.
fn what_it_is(out: &mut Vec<Loosening>, place: &dyn Fn(&str) -> Place, b: &View, a: &View) {
    let target = same_or(&b.target, &a.target, "what the provider is changed: calls go elsewhere or otherwise");
    push(out, Kind::Target, place("kind"), (b.target.clone(), a.target.clone()), target);
    let ca = removable(b.ca_file, a.ca_file, "more certificate authorities are trusted");
    push(out, Kind::Target, place("ca_file"), (json!(b.ca_file), json!(a.ca_file)), ca);
    let observe = removable(
        b.observe.as_ref(),
        a.observe.as_ref(),
        "its read-back changed: it decides, without a person, what became of a call whose answer was lost",
    );
    push(out, Kind::Observe, place("observe"), (json!(b.observe), json!(a.observe)), observe);
    let tools = match (b.tools, a.tools) {
        // A provider that was of another kind had no list in force.
        _ if b.target["kind"] != a.target["kind"] => Change::Same,
        (b, a) => allow_list(b, a, "tools"),
    };
    push(out, Kind::ToolAllowList, place("tools"), (json!(b.tools), json!(a.tools)), tools);
}
