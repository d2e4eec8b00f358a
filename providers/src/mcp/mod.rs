//! The MCP provider: tool calls on an MCP server, over stdio (a server
//! process of ours) or Streamable HTTP (`url`), one server per provider per
//! run.
//!
//! The server is started on first use, its revision negotiated once per
//! start (`revision`: the 2026-07-28 `server/discover` probe, else
//! `initialize` asking `2025-11-25`; an answer outside
//! `SUPPORTED_PROTOCOL_VERSIONS` is refused), its tools listed before its
//! first call (no call without them), and reused by every call, read-back
//! and task poll; calls take
//! turns unless the provider is `concurrent`. A server that dies is started
//! again for the next call; the call it died under is `Lost`. `shutdown`
//! closes it (stdin closed, its process group killed after a grace; or the
//! HTTP session deleted); dropping the provider kills it.
//!
//! The idempotency identity travels in each call's `params._meta`
//! (`{"operation_id": ..., "try": n}`).
//!
//! Phases and what each failure means:
//! - bad request (no `tool`, `arguments` not an object) →
//!   `NotDispatched{BadRequest}`;
//! - the server cannot be started, negotiation fails or ends on a protocol
//!   version we do not speak, `tools/list` fails, the tool is not listed,
//!   or another server answers after a restart → `NotDispatched`
//!   (`DeadlineBeforeDispatch` when the call's deadline passed meanwhile);
//! - from the moment the `tools/call` starts being written: the server dies
//!   or the connection breaks before the answer → `Lost{ResponseLost}`; the
//!   deadline → `Lost{DeadlineAfterDispatch}` (a stdio server serving one
//!   call at a time is then killed, as a command's group is; others get
//!   `notifications/cancelled`); a write error on stdio means the server had
//!   closed its stdin and never read the call: `NotDispatched`;
//! - an answer → `Received`, with `stdout` = the JSON of its `result` (or
//!   `error`), `stderr` = what the server wrote to stderr during the call,
//!   and `tool_error` set for `isError: true`, a JSON-RPC error or an HTTP
//!   error status.
//!
//! Tasks: when the server declares `tasks.requests.tools.call` and the tool
//! says `execution.taskSupport` `required` or `optional`, the call is
//! task-augmented. The task id is reported as `Progress::Handle` the moment
//! the server answers; `tasks/get` is polled (the server's `pollInterval`,
//! else backoff, under the call's deadline), and `tasks/result` is the
//! receipt. At the deadline the task is cancelled (`tasks/cancel`) and the
//! call is `Lost{DeadlineAfterDispatch}`.
//!
//! Under 2026-07-28 the server makes a task on its own (`resultType:
//! "task"`); `tasks/get` carries its end. An `input_required` result (or
//! task) is never answered by the client: a receipt with a tool error.
//!
//! `Progress::Dispatched` is sent once the `tools/call` is wholly written.

mod call;
mod events;
mod inbound;
pub mod input;
mod jsonrpc;
mod link;
mod listen;
mod output;
mod revision;
mod session;
mod sse;
mod stderr;
mod stdio;
mod streamable;
mod tasks;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::http::url::Target;
use crate::oauth::store::TokenStore;
use crate::oauth::{Bearer, OAuthConfig};
use crate::observe::{ConfigError, McpObserve};
use crate::tls::Tls;
use crate::{BoxFuture, Call, Cancelled, Handle, Outcome, Person, ProgressSender, Provider, ReadBack, Resumed};
use session::Session;

pub use call::OBSERVE_TIMEOUT;

/// The MCP protocol revision this client asks for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Revisions a server may answer with (tasks only with the first).
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// How to reach the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// argv of a server of ours (no shell), run in the workspace.
    Stdio { command: Vec<String> },
    /// A Streamable HTTP endpoint (`http://` or `https://`).
    Http { url: String },
}

/// Plan config: `{"kind": "mcp", "command": [...] | "url": URL,
/// "observe"?: rule, "observe_tool"?: name, "concurrent"?: bool,
/// "hosts"?: [...], "ca_file"?: path, "auth"?: …, "ask"?: {"wait_seconds": N}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    pub transport: Transport,
    /// The pre-rule observe tool (kept for the identity); `observe` holds
    /// its migrated rule.
    pub observe_tool: Option<String>,
    /// The default read-back, for tasks that declare none.
    pub observe: Option<McpObserve>,
    /// Calls may be in flight together on this server.
    pub concurrent: bool,
    /// Hosts besides loopback a `url` may name.
    pub hosts: Vec<String>,
    /// A PEM file of CA certificates to trust besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// `auth.oauth`: the server wants an OAuth bearer token (`url` only).
    pub oauth: Option<OAuthConfig>,
    /// `ask.wait_seconds`: how long a question the server puts during a
    /// call is held open for a person (zero, the default: dismissed at
    /// once, `cancel`). Never past the call's deadline.
    pub ask_wait: Duration,
}

/// The longest a plan may hold a server's question open for a person
/// (`ask.wait_seconds`): an hour.
pub const ASK_WAIT_SECONDS_MAX: u64 = 3600;

impl McpConfig {
    pub fn stdio(command: Vec<String>) -> Self {
        McpConfig {
            transport: Transport::Stdio { command },
            observe_tool: None,
            observe: None,
            concurrent: false,
            hosts: Vec::new(),
            ca_file: None,
            oauth: None,
            ask_wait: Duration::ZERO,
        }
    }

    pub fn http(url: impl Into<String>) -> Self {
        McpConfig { transport: Transport::Http { url: url.into() }, ..McpConfig::stdio(Vec::new()) }
    }

    /// `observe_tool` (answers `structuredContent.state`), migrated to a rule.
    pub fn with_observe_tool(mut self, tool: Option<String>) -> Self {
        self.observe = tool.as_deref().map(McpObserve::status_tool);
        self.observe_tool = tool;
        self
    }
}

pub struct McpProvider {
    config: McpConfig,
    /// Boxed: a session is large, and providers travel in an enum.
    session: Box<Session>,
    /// Who answers a question held open (`ask.wait_seconds`); without one
    /// every question is dismissed at once.
    person: Option<Arc<dyn Person>>,
}

impl std::fmt::Debug for McpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpProvider").field("config", &self.config).finish_non_exhaustive()
    }
}

impl McpProvider {
    pub fn new(config: McpConfig) -> Self {
        let tls = Arc::new(Tls::new(config.ca_file.clone()));
        let bearer = match (&config.transport, &config.oauth) {
            (Transport::Http { url }, Some(oauth)) => Some(Arc::new(Bearer::new(
                url,
                oauth.clone(),
                TokenStore::user(),
                config.hosts.clone(),
                Arc::clone(&tls),
            ))),
            _ => None,
        };
        let session = Box::new(Session::new(config.transport.clone(), config.hosts.clone(), tls, config.concurrent));
        McpProvider { config, session: session.with_bearer(bearer), person: None }
    }

    /// The person a run puts the server's questions to, when its plan holds
    /// them open (`ask.wait_seconds` above zero).
    pub fn with_person(mut self, person: Option<Arc<dyn Person>>) -> Self {
        self.person = person;
        self
    }

    /// Does this provider hold a server's questions open for a person?
    pub fn holds_questions(&self) -> bool {
        !self.config.ask_wait.is_zero()
    }

    /// A stdio server with the pre-rule `observe_tool` (the plan's shape today).
    pub fn stdio(command: Vec<String>, observe_tool: Option<String>) -> Self {
        McpProvider::new(McpConfig::stdio(command).with_observe_tool(observe_tool))
    }

    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    /// How many times this provider started its server (or opened an HTTP
    /// session): 1 for a run whose server never died.
    pub fn server_starts(&self) -> u32 {
        self.session.starts()
    }

    /// Parse the plan's provider config. Unknown keys are an error.
    pub fn from_config(config: &Value) -> Result<Self, ConfigError> {
        let obj = config.as_object().ok_or_else(|| ConfigError::new("", "mcp provider config must be an object"))?;
        let known =
            ["kind", "command", "url", "observe", "observe_tool", "concurrent", "hosts", "ca_file", "auth", "ask"];
        if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ConfigError::new(k.as_str(), "unknown field in mcp provider config"));
        }
        if obj.get("kind").and_then(Value::as_str) != Some("mcp") {
            return Err(ConfigError::new("kind", "mcp provider config needs \"kind\": \"mcp\""));
        }
        let transport = match (obj.get("command"), obj.get("url")) {
            (Some(c), None) => Transport::Stdio {
                command: strings(c).filter(|c| !c.is_empty()).ok_or_else(|| {
                    ConfigError::new("command", "must be a non-empty list of strings (argv, no shell)")
                })?,
            },
            (None, Some(Value::String(u))) => Transport::Http { url: u.clone() },
            (None, Some(_)) => return Err(ConfigError::new("url", "must be a string URL")),
            _ => return Err(ConfigError::new("", "needs exactly one of `command` (stdio) or `url` (Streamable HTTP)")),
        };
        let mut c = McpConfig { transport, ..McpConfig::stdio(Vec::new()) };
        c.concurrent = match obj.get("concurrent") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ConfigError::new("concurrent", "must be true or false")),
        };
        if let Some(h) = obj.get("hosts") {
            c.hosts = strings(h).ok_or_else(|| ConfigError::new("hosts", "must be a list of host names"))?;
        }
        if let Some(p) = obj.get("ca_file") {
            let p =
                p.as_str().filter(|p| !p.is_empty()).ok_or_else(|| ConfigError::new("ca_file", "must be a path"))?;
            c.ca_file = Some(PathBuf::from(p));
        }
        if let Some(auth) = obj.get("auth") {
            if !matches!(c.transport, Transport::Http { .. }) {
                return Err(ConfigError::new("auth", "only a `url` (Streamable HTTP) server takes `auth`"));
            }
            c.oauth = Some(OAuthConfig::from_json(auth).map_err(|e| e.under("auth"))?);
        }
        if let Some(ask) = obj.get("ask") {
            c.ask_wait = ask_wait(ask)?;
        }
        match (obj.get("observe_tool"), obj.get("observe")) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new("observe", "give `observe` or `observe_tool`, not both"))
            }
            (Some(Value::String(t)), None) if !t.trim().is_empty() => c = c.with_observe_tool(Some(t.clone())),
            (Some(_), None) => return Err(ConfigError::new("observe_tool", "must be a tool name")),
            (None, Some(r)) => c.observe = Some(McpObserve::from_json(r).map_err(|e| e.under("observe"))?),
            (None, None) => {}
        }
        Ok(McpProvider::new(c))
    }

    /// Check what can be checked without starting the server: the URL
    /// against the host policy, and that a `ca_file` loads.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Transport::Http { url } = &self.config.transport {
            Target::parse(url, &self.config.hosts).map_err(|m| ConfigError::new("url", m))?;
        }
        if let Some(p) = &self.config.ca_file {
            crate::tls::read_ca_file(p).map_err(|m| ConfigError::new("ca_file", m))?;
        }
        Ok(())
    }
}

impl McpProvider {
    /// A person's authorization of this server (`engine login`): the
    /// whole OAuth flow, the tokens kept in `store`. `show` gets the lines
    /// to show the person (the URL to open).
    pub async fn login(
        &self,
        store: &TokenStore,
        (asked, timeout): (&crate::oauth::Asked, std::time::Duration),
        show: impl FnMut(&str),
    ) -> Result<crate::oauth::Authorized, crate::oauth::AuthError> {
        use crate::oauth::AuthError;
        let (Transport::Http { url }, Some(oauth)) = (&self.config.transport, &self.config.oauth) else {
            return Err(AuthError::Refused("this provider declares no `auth.oauth` on a `url`".into()));
        };
        let tls = Tls::new(self.config.ca_file.clone());
        let reach = crate::oauth::Reach { url, hosts: &self.config.hosts, tls: &tls };
        crate::oauth::login(reach, (oauth, asked), store, timeout, show).await
    }
}

/// `ask`: `{"wait_seconds": N}`, 0 ≤ N ≤ `ASK_WAIT_SECONDS_MAX`.
fn ask_wait(ask: &Value) -> Result<Duration, ConfigError> {
    let obj = ask.as_object().ok_or_else(|| ConfigError::new("ask", "must be an object: {\"wait_seconds\": N}"))?;
    if let Some(k) = obj.keys().find(|k| k.as_str() != "wait_seconds") {
        return Err(ConfigError::new(format!("ask.{k}"), "unknown field in `ask` (it takes `wait_seconds`)"));
    }
    let Some(n) = obj.get("wait_seconds") else {
        return Err(ConfigError::new(
            "ask.wait_seconds",
            "missing: how long a question waits for a person, in seconds",
        ));
    };
    match n.as_u64() {
        Some(n) if n <= ASK_WAIT_SECONDS_MAX => Ok(Duration::from_secs(n)),
        _ => Err(ConfigError::new(
            "ask.wait_seconds",
            format!("must be a whole number of seconds from 0 to {ASK_WAIT_SECONDS_MAX}"),
        )),
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array()?.iter().map(|s| s.as_str().map(str::to_string)).collect()
}

impl Provider for McpProvider {
    fn identity(&self) -> Value {
        let mut id = match &self.config.transport {
            Transport::Stdio { command } => json!({"kind": "mcp", "command": command}),
            Transport::Http { url } => json!({"kind": "mcp", "url": url}),
        };
        id["observe_tool"] = json!(self.config.observe_tool);
        if self.config.observe_tool.is_none() {
            if let Some(r) = &self.config.observe {
                id["observe"] = r.to_json();
            }
        }
        if self.config.concurrent {
            id["concurrent"] = json!(true);
        }
        if let Some(p) = &self.config.ca_file {
            id["ca_file"] = json!(p.to_string_lossy());
        }
        id
    }

    fn dispatch<'a>(&'a self, call: &'a Call, progress: ProgressSender) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { self.dispatch_inner(call, &progress).await })
    }

    fn check_observe(&self, rule: &Value) -> Result<(), ConfigError> {
        McpObserve::from_json(rule).map(|_| ())
    }

    fn read_back<'a>(&'a self, call: &'a Call, rule: Option<&'a Value>) -> Option<BoxFuture<'a, ReadBack>> {
        let rule = match rule {
            None => self.config.observe.clone()?,
            Some(v) => match McpObserve::from_json(v) {
                Ok(r) => r,
                Err(e) => {
                    let failed = ReadBack::failed(v.clone(), Value::Null, format!("observe rule refused: {e}"));
                    return Some(Box::pin(async move { failed }));
                }
            },
        };
        Some(Box::pin(async move { self.read_back_with(&rule, call).await }))
    }

    fn resume<'a>(&'a self, call: &'a Call, handle: &'a Handle) -> Option<BoxFuture<'a, Resumed>> {
        Some(Box::pin(self.resume_inner(call, handle)))
    }

    fn cancel<'a>(&'a self, call: &'a Call, handle: &'a Handle) -> Option<BoxFuture<'a, Cancelled>> {
        Some(Box::pin(self.cancel_inner(call, handle)))
    }

    fn list_tools<'a>(&'a self, call: &'a Call) -> Option<BoxFuture<'a, Result<crate::Inventory, String>>> {
        Some(Box::pin(self.list_tools_inner(call)))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.session.shutdown())
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_input;
#[cfg(test)]
mod tests_modern;
#[cfg(test)]
mod tests_streams;
