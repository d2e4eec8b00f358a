//! The plan's providers as the providers crate's adapters. Every provider
//! config and every read-back rule goes through the providers' own parsers
//! (`HttpProvider::from_config`, `McpProvider::from_config`,
//! `Provider::check_observe`), so `engine check` and a run read them one
//! way, and an error names its exact place in the plan.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use providers::builtin::BuiltinProvider;
use providers::command::CommandProvider;
use providers::http::HttpProvider;
use providers::mcp::McpProvider;
use providers::{ConfigError, Provider};
use serde_json::Value;

use crate::error::{Code, Error, Result};
use crate::plan::model::{Protocol, ProviderSpec};

/// One provider of a plan, built.
pub enum Adapter {
    Builtin(BuiltinProvider),
    Command(CommandProvider),
    Http(HttpProvider),
    Mcp(McpProvider),
}

impl Adapter {
    /// Parse `spec` with the providers' parser; a `ca_file` and a client
    /// secret's `file` are resolved against `workspace` (kept as written
    /// when there is none: the structural check never reads them).
    pub fn parse(spec: &ProviderSpec, workspace: Option<&Path>) -> std::result::Result<Adapter, ConfigError> {
        let mut config = spec.provider_config();
        if let (Some(ws), Some(Value::String(ca))) = (workspace, config.get_mut("ca_file")) {
            *ca = resolve(ws, ca).to_string_lossy().into_owned();
        }
        // A client secret's file too (the secret itself is read at login only).
        if let (Some(ws), Some(Value::String(f))) = (workspace, config.pointer_mut("/auth/oauth/client_secret/file")) {
            *f = resolve(ws, f).to_string_lossy().into_owned();
        }
        Ok(match spec {
            ProviderSpec::Builtin {} => Adapter::Builtin(BuiltinProvider),
            ProviderSpec::Command { protocol, .. } => Adapter::Command(CommandProvider {
                protocol: protocol.map(|p| match p {
                    Protocol::AgentJson => "agent-json".to_string(),
                }),
            }),
            ProviderSpec::Http { .. } => Adapter::Http(HttpProvider::from_config(&config)?),
            ProviderSpec::Mcp { .. } => Adapter::Mcp(McpProvider::from_config(&config)?),
        })
    }

    /// The checks that read nothing: URLs against the scheme and host
    /// policy (a bare observe URL's placeholders included).
    pub fn check_urls(spec: &ProviderSpec) -> std::result::Result<(), ConfigError> {
        let mut config = spec.provider_config();
        if let Some(obj) = config.as_object_mut() {
            obj.remove("ca_file");
        }
        match spec {
            ProviderSpec::Command { .. } | ProviderSpec::Builtin {} => Ok(()),
            ProviderSpec::Http { .. } => HttpProvider::from_config(&config)?.check(),
            ProviderSpec::Mcp { .. } => McpProvider::from_config(&config)?.check(),
        }
    }

    pub fn provider(&self) -> &dyn Provider {
        match self {
            Adapter::Builtin(p) => p,
            Adapter::Command(p) => p,
            Adapter::Http(p) => p,
            Adapter::Mcp(p) => p,
        }
    }

    pub fn into_provider(self) -> Arc<dyn Provider> {
        match self {
            Adapter::Builtin(p) => Arc::new(p),
            Adapter::Command(p) => Arc::new(p),
            Adapter::Http(p) => Arc::new(p),
            Adapter::Mcp(p) => Arc::new(p),
        }
    }
}

/// A path of the plan, relative to the workspace unless absolute.
pub fn resolve(workspace: &Path, path: &str) -> PathBuf {
    workspace.join(path)
}

/// Build a validated plan's provider for a run.
pub fn build(name: &str, spec: &ProviderSpec, workspace: &Path) -> Result<Arc<dyn Provider>> {
    build_for(name, spec, workspace, None)
}

/// The same, with the run's person's side: an MCP provider that holds its
/// server's questions open (`ask.wait_seconds`) puts them to `person`.
pub fn build_for(
    name: &str,
    spec: &ProviderSpec,
    workspace: &Path,
    person: Option<Arc<dyn providers::Person>>,
) -> Result<Arc<dyn Provider>> {
    Ok(match Adapter::parse(spec, Some(workspace)).map_err(|e| at_provider(name, e))? {
        Adapter::Mcp(p) => Arc::new(p.with_person(person)),
        other => other.into_provider(),
    })
}

/// The files a provider's config names (a `ca_file`), read now: a missing
/// or unusable one is refused at `engine check`, not at the first call.
pub fn check_files(name: &str, spec: &ProviderSpec, workspace: &Path) -> Result<()> {
    let ca_file = match spec {
        ProviderSpec::Http { ca_file, .. } | ProviderSpec::Mcp { ca_file, .. } => ca_file.as_deref(),
        ProviderSpec::Command { .. } | ProviderSpec::Builtin {} => None,
    };
    match ca_file {
        Some(p) => providers::tls::read_ca_file(&resolve(workspace, p))
            .map(|_| ())
            .map_err(|m| at_provider(name, ConfigError::new("ca_file", m))),
        None => Ok(()),
    }
}

/// A provider config error, placed in the plan.
pub fn at_provider(name: &str, e: ConfigError) -> Error {
    let place = ConfigError::new(e.path.clone(), "").under(&format!("$.providers.{name}")).path;
    Error::new(Code::PlanInvalid, format!("provider `{name}`: {}", e.message)).at(place)
}

/// A task's `observe` checked by its provider's parser, placed in the plan.
pub fn check_task_rule(provider: &dyn Provider, rule: &Value, at: &str) -> Result<()> {
    provider.check_observe(rule).map_err(|e| {
        let place = ConfigError::new(e.path.clone(), "").under(&format!("{at}.observe")).path;
        Error::new(Code::PlanInvalid, format!("observe: {}", e.message)).at(place)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> ProviderSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn errors_are_placed_inside_the_provider() {
        let e = Adapter::parse(
            &spec(json!({"kind": "http", "endpoint": "http://127.0.0.1:1/x",
                        "observe": {"url": "http://127.0.0.1:1/{operation_id}", "present_if": {"status": [200, 99]}}})),
            None,
        )
        .err()
        .unwrap();
        assert_eq!(at_provider("r", e).place.as_deref(), Some("$.providers.r.observe.present_if.status[1]"));
        let e = Adapter::parse(&spec(json!({"kind": "mcp"})), None).err().unwrap();
        assert_eq!(at_provider("m", e).place.as_deref(), Some("$.providers.m"));
        let e = Adapter::check_urls(&spec(json!({"kind": "mcp", "url": "https://far.example/mcp"}))).unwrap_err();
        assert_eq!(e.path, "url");
    }

    #[test]
    fn the_tools_allow_list_is_the_engines_not_the_servers() {
        let s = spec(json!({"kind": "mcp", "command": ["srv"], "tools": ["read_file"]}));
        assert!(Adapter::parse(&s, None).is_ok());
        assert!(Adapter::check_urls(&s).is_ok());
    }

    #[test]
    fn a_command_provider_cannot_read_back() {
        let a = Adapter::parse(&spec(json!({"kind": "command"})), None).ok().unwrap();
        let e =
            check_task_rule(a.provider(), &json!({"tool": "t", "present_if": {"text_contains": "x"}}), "$.tasks[0]")
                .unwrap_err();
        assert_eq!(e.place.as_deref(), Some("$.tasks[0].observe"));
    }

    #[test]
    fn a_relative_ca_file_is_the_workspaces() {
        assert_eq!(resolve(Path::new("/ws"), "ca.pem"), Path::new("/ws/ca.pem"));
        assert_eq!(resolve(Path::new("/ws"), "/etc/ca.pem"), Path::new("/etc/ca.pem"));
    }
}
