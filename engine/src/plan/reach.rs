//! What a task's processes may reach and get (docs/sandbox.md, "Network"
//! and "Environment"): the network they may connect to and the engine's
//! environment variables they receive — its provider's declarations and its
//! own, together. Pure: the checks of the declarations (each `HOST:PORT`,
//! each variable name, where each may be declared) and the part of a task's
//! meaning they make.

use providers::sandbox::Network;
use serde_json::json;

use crate::error::{Code, Error, Result};
use crate::plan::model::{NetworkSpec, ProviderSpec, Task};

/// A task's (or a provider's) declarations, each list sorted and without
/// repeats.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Reach {
    pub connect: Vec<String>,
    pub env: Vec<String>,
}

impl Reach {
    /// A provider's own declarations.
    pub fn of_provider(spec: &ProviderSpec) -> Reach {
        Reach::of(&[spec.network()], &[spec.env()])
    }

    /// A task's: its provider's and its own.
    pub fn of_task(task: &Task, spec: &ProviderSpec) -> Reach {
        Reach::of(&[spec.network(), task.network.as_ref()], &[spec.env(), &task.env])
    }

    fn of(networks: &[Option<&NetworkSpec>], envs: &[&[String]]) -> Reach {
        let mut connect: Vec<String> = networks.iter().flatten().flat_map(|n| n.connect.iter().cloned()).collect();
        connect.sort_unstable();
        connect.dedup();
        let mut env: Vec<String> = envs.iter().flat_map(|e| e.iter().cloned()).collect();
        env.sort_unstable();
        env.dedup();
        Reach { connect, env }
    }

    /// Does the task add to its provider's declarations?
    pub fn adds_to(&self, provider: &Reach) -> bool {
        self != provider
    }

    /// What its processes may connect to (the entries were checked at load).
    pub fn network(&self) -> Network {
        Network::connect(&self.connect).unwrap_or_default()
    }

    /// The part of a task's meaning: `None` when nothing is declared (the
    /// task then digests as it did before these fields existed).
    pub fn meaning(&self) -> Option<String> {
        if self.connect.is_empty() && self.env.is_empty() {
            return None;
        }
        Some(crate::digest::canonical_json(&json!({"connect": self.connect, "env": self.env})))
    }
}

/// A provider's `network` and `env`: each entry well formed, and declared
/// only where a process of the provider's own would get it.
pub fn check_provider(name: &str, spec: &ProviderSpec) -> Result<()> {
    let at = format!("$.providers.{name}");
    if spec.unconfined() && spec.network().is_some() {
        return Err(Error::new(
            Code::PlanInvalid,
            format!("provider `{name}` says \"sandbox\": \"none\": its processes run unconfined, so a `network` declaration could not be kept; remove one of them"),
        )
        .at(format!("{at}.network")));
    }
    if let ProviderSpec::Mcp { url: Some(_), network, env, .. } = spec {
        let field = if network.is_some() { "network" } else { "env" };
        if network.is_some() || !env.is_empty() {
            return Err(Error::new(
                Code::PlanInvalid,
                format!("provider `{name}` is a Streamable HTTP server (`url`): the engine starts no process for it, so `{field}` has nothing to apply to"),
            )
            .at(format!("{at}.{field}")));
        }
    }
    entries(spec.network(), spec.env(), &at)
}

/// A task's own `network` and `env`: well formed, and on a task whose
/// provider starts a process per call (a command provider's).
pub fn check_task(task: &Task, spec: &ProviderSpec, at: &str) -> Result<()> {
    let field = if task.network.is_some() { "network" } else { "env" };
    if task.network.is_none() && task.env.is_empty() {
        return Ok(());
    }
    match spec {
        ProviderSpec::Command { .. } if spec.unconfined() && task.network.is_some() => Err(Error::new(
            Code::PlanInvalid,
            format!("provider `{}` says \"sandbox\": \"none\": its processes run unconfined, so the task's `network` could not be kept", task.provider),
        )
        .at(format!("{at}.network"))),
        ProviderSpec::Command { .. } => entries(task.network.as_ref(), &task.env, at),
        ProviderSpec::Mcp { .. } => Err(Error::new(
            Code::PlanInvalid,
            format!("an MCP server is one process for every task of its provider `{}`: declare `{field}` on the provider", task.provider),
        )
        .at(format!("{at}.{field}"))),
        ProviderSpec::Http { .. } | ProviderSpec::Builtin {} => Err(Error::new(
            Code::PlanInvalid,
            format!("provider `{}` starts no process: `{field}` has nothing to apply to", task.provider),
        )
        .at(format!("{at}.{field}"))),
    }
}

fn entries(network: Option<&NetworkSpec>, env: &[String], at: &str) -> Result<()> {
    if let Some(n) = network {
        Network::connect(&n.connect).map_err(|(i, message)| {
            Error::new(Code::PlanInvalid, format!("network.connect: {message}"))
                .at(format!("{at}.network.connect[{i}]"))
        })?;
    }
    for (i, name) in env.iter().enumerate() {
        if let Some(why) = bad_name(name) {
            return Err(Error::new(Code::PlanInvalid, format!("env: {name:?} {why}")).at(format!("{at}.env[{i}]")));
        }
    }
    Ok(())
}

/// Why `name` cannot be an `env` entry.
fn bad_name(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("is not a variable name (letters, digits and _, not starting with a digit)");
    }
    if name.starts_with("ENGINE_") {
        return Some("is the engine's own: ENGINE_* variables never reach a provider (ENGINE_OPERATION_ID and ENGINE_TRY are set for every call)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> ProviderSpec {
        serde_json::from_value(v).unwrap()
    }

    fn task(v: serde_json::Value) -> Task {
        let mut t = json!({"ref": "T1", "provider": "p", "action": {"run": ["true"]}});
        t.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
        serde_json::from_value(t).unwrap()
    }

    #[test]
    fn a_tasks_reach_is_its_providers_and_its_own_sorted() {
        let p = spec(json!({"kind": "command", "network": {"connect": ["b.com:443"]}, "env": ["B", "A"]}));
        let t = task(json!({"network": {"connect": ["a.com:80", "b.com:443"]}, "env": ["C", "A"]}));
        let r = Reach::of_task(&t, &p);
        assert_eq!(r.connect, ["a.com:80", "b.com:443"]);
        assert_eq!(r.env, ["A", "B", "C"]);
        assert!(r.adds_to(&Reach::of_provider(&p)));
        assert_eq!(Reach::of_task(&task(json!({})), &p), Reach::of_provider(&p));
        assert_eq!(Reach::default().meaning(), None, "nothing declared: no part of the meaning");
        assert_eq!(r.network().ports(), Some(vec![80, 443]));
    }

    #[test]
    fn bad_declarations_are_refused_at_their_place() {
        let p = spec(json!({"kind": "command", "network": {"connect": ["ok.com:443", "nope"]}}));
        let e = check_provider("p", &p).unwrap_err();
        assert_eq!((e.code, e.place.as_deref()), (Code::PlanInvalid, Some("$.providers.p.network.connect[1]")));
        let p = spec(json!({"kind": "command", "env": ["GOOD", "1BAD"]}));
        assert_eq!(check_provider("p", &p).unwrap_err().place.as_deref(), Some("$.providers.p.env[1]"));
        let p = spec(json!({"kind": "command", "env": ["ENGINE_STORE"]}));
        let e = check_provider("p", &p).unwrap_err();
        assert!(e.message.contains("never reach a provider"), "{}", e.message);
        let p = spec(json!({"kind": "command", "sandbox": "none", "network": {"connect": ["a.com:1"]}}));
        assert_eq!(check_provider("p", &p).unwrap_err().place.as_deref(), Some("$.providers.p.network"));
        let p = spec(json!({"kind": "mcp", "url": "http://127.0.0.1:1/mcp", "env": ["A"]}));
        assert_eq!(check_provider("p", &p).unwrap_err().place.as_deref(), Some("$.providers.p.env"));
        let mcp = spec(json!({"kind": "mcp", "command": ["srv"], "env": ["A"], "network": {"connect": ["x.org:443"]}}));
        check_provider("p", &mcp).unwrap();
        let t = task(json!({"env": ["A"]}));
        let e = check_task(&t, &mcp, "$.tasks[0]").unwrap_err();
        assert_eq!(e.place.as_deref(), Some("$.tasks[0].env"));
        assert!(e.message.contains("declare `env` on the provider"), "{}", e.message);
        let http = spec(json!({"kind": "http", "endpoint": "http://127.0.0.1:1/x"}));
        let t = task(json!({"network": {"connect": ["a.com:1"]}}));
        assert_eq!(check_task(&t, &http, "$.tasks[0]").unwrap_err().place.as_deref(), Some("$.tasks[0].network"));
        let t = task(json!({"network": {"connect": ["a.com:99999"]}}));
        let cmd = spec(json!({"kind": "command"}));
        assert_eq!(
            check_task(&t, &cmd, "$.tasks[3]").unwrap_err().place.as_deref(),
            Some("$.tasks[3].network.connect[0]")
        );
    }
}
