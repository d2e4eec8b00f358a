//! One MCP server per provider per run: started on first use, `initialize`d
//! once (its protocol version checked), reused by every call, observation
//! and task poll, restarted when it died, closed at the end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::{OnceCell, Semaphore, SemaphorePermit};

use super::inbound::Inbound;
use super::jsonrpc::{Answer, RpcEnd};
use super::link::Link;
use super::revision::{self, Probe};
use super::stderr::StderrHub;
use super::stdio::StdioLink;
use super::streamable::HttpLink;
use super::{Transport, PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use crate::oauth::Bearer;
use crate::tls::Tls;
use crate::{Call, Inventory, NotDispatched, NotDispatchedKind, ServerInfo, Tool};

/// Bound on starting and initializing a server when the call has no
/// deadline (an `npx` start can take a while).
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a closing server may take to exit after its stdin closed.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long a server may take to answer the `server/discover` probe
/// before it is taken for a legacy server that ignores it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the pages of one `tools/list`.
const TOOL_PAGES_MAX: usize = 20;
/// Bound on the tools one server may list (more is refused, not cut).
pub const TOOLS_MAX: usize = 4096;
/// Bound on a server's name and version as we keep them.
const SERVER_INFO_CHARS_MAX: usize = 256;
/// Bound on calls in flight to a server declared `concurrent`.
const CONCURRENT_CALLS_MAX: usize = 64;

/// What a tool says about task augmentation (`execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

/// A started, initialized server.
pub(crate) struct Live {
    pub link: Link,
    pub protocol: String,
    /// Who the server says it is (`serverInfo`), if it said.
    pub server: Option<ServerInfo>,
    /// The server declared `tasks.requests.tools.call`.
    pub tasks: bool,
    /// Its `tools/list`, asked once per server start.
    tools: OnceCell<Listing>,
}

/// A server's `tools/list`: each tool as listed, and its task support.
#[derive(Debug, Clone, Default)]
struct Listing {
    tools: HashMap<String, (Tool, TaskSupport)>,
}

pub(crate) struct Session {
    transport: Transport,
    tls: Arc<Tls>,
    /// The OAuth token source of a server that wants one.
    bearer: Option<Arc<Bearer>>,
    hosts: Vec<String>,
    concurrent: bool,
    gate: Semaphore,
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    pub hub: Arc<StderrHub>,
    /// The server's questions and progress, routed to the calls in flight.
    pub inbound: Arc<Inbound>,
    starts: AtomicU32,
    /// The first inventory read in this run: a server started later (after
    /// one died) must be the same server offering the same tools.
    first: std::sync::Mutex<Option<Box<Inventory>>>,
}

impl Session {
    pub fn new(transport: Transport, hosts: Vec<String>, tls: Arc<Tls>, concurrent: bool) -> Self {
        let permits = if concurrent { CONCURRENT_CALLS_MAX } else { 1 };
        Session {
            transport,
            tls,
            bearer: None,
            hosts,
            concurrent,
            gate: Semaphore::new(permits),
            live: tokio::sync::Mutex::new(None),
            hub: Arc::default(),
            inbound: Arc::default(),
            starts: AtomicU32::new(0),
            first: std::sync::Mutex::new(None),
        }
    }

    pub fn with_bearer(mut self: Box<Self>, bearer: Option<Arc<Bearer>>) -> Box<Self> {
        self.bearer = bearer;
        self
    }

    pub fn concurrent(&self) -> bool {
        self.concurrent
    }

    /// How many times a server was started (or an HTTP session opened).
    pub fn starts(&self) -> u32 {
        self.starts.load(Ordering::SeqCst)
    }

    /// Wait for our turn (one call at a time unless `concurrent`).
    /// `None`: the deadline passed first.
    pub async fn permit(&self, deadline: Option<Instant>) -> Option<SemaphorePermit<'_>> {
        match deadline {
            None => self.gate.acquire().await.ok(),
            Some(at) => tokio::time::timeout_at(at.into(), self.gate.acquire()).await.ok()?.ok(),
        }
    }

    /// The live server, started and initialized if needed. Nothing of any
    /// call is sent while starting, so every failure is `NotDispatched`.
    pub async fn live(&self, call: &Call, deadline: Option<Instant>) -> Result<Arc<Live>, NotDispatched> {
        let start_by = deadline.unwrap_or_else(|| Instant::now() + START_TIMEOUT);
        let Ok(mut slot) = tokio::time::timeout_at(start_by.into(), self.live.lock()).await else {
            return Err(start_deadline(deadline, "waiting for the MCP server to start"));
        };
        if let Some(l) = slot.as_ref().filter(|l| l.link.alive()) {
            return Ok(Arc::clone(l));
        }
        if let Some(old) = slot.take() {
            old.link.kill();
        }
        let link = self.open(call)?;
        self.starts.fetch_add(1, Ordering::SeqCst);
        let live = match negotiate(link, start_by).await {
            Ok(l) => Arc::new(l),
            Err((link, end)) => {
                link.kill();
                link.pump_stderr();
                let mut nd = start_failure(end, deadline);
                nd.message.push_str(&self.hub.tail());
                return Err(nd);
            }
        };
        *slot = Some(Arc::clone(&live));
        Ok(live)
    }

    fn open(&self, call: &Call) -> Result<Link, NotDispatched> {
        match &self.transport {
            Transport::Stdio { command } => StdioLink::spawn(command, call, &self.hub, &self.inbound).map(Link::Stdio),
            Transport::Http { url } => {
                HttpLink::new(url, &self.hosts, Arc::clone(&self.tls), call.output_bytes_max, Arc::clone(&self.inbound))
                    .map(|l| Link::Http(l.with_bearer(self.bearer.clone())))
                    .map_err(|m| NotDispatched {
                        kind: NotDispatchedKind::BadRequest,
                        message: format!("url {url}: {m}"),
                    })
            }
        }
    }

    /// For a handle from another session of the same HTTP server: a link
    /// into that session (`None` when the current one is it, or for stdio).
    pub fn other_session(&self, live: &Live, session: &str) -> Option<Link> {
        match &live.link {
            Link::Http(l) if l.session_id().as_deref() != Some(session) => {
                Some(Link::Http(l.resume(session, &live.protocol)))
            }
            _ => None,
        }
    }

    /// Close the live server (stdin closed, group killed after a grace; or
    /// the HTTP session deleted).
    pub async fn shutdown(&self) {
        let live = self.live.lock().await.take();
        if let Some(l) = live {
            l.link.close(CLOSE_GRACE).await;
        }
    }
}

impl Live {
    /// The tool's task support (from `tools/list`, asked once per server
    /// start).
    pub async fn task_support(&self, tool: &str, deadline: Option<Instant>) -> Result<TaskSupport, String> {
        if !self.tasks {
            return Ok(TaskSupport::Forbidden);
        }
        let listing = self.listing(deadline).await?;
        Ok(listing.tools.get(tool).map_or(TaskSupport::Forbidden, |(_, s)| *s))
    }

    /// A tool as this server start listed it (`None` before the listing,
    /// or when it does not list the tool).
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.get()?.tools.get(name).map(|(t, _)| t)
    }

    async fn listing(&self, deadline: Option<Instant>) -> Result<&Listing, String> {
        self.tools.get_or_try_init(|| list_tools(&self.link, deadline)).await
    }

    /// What the server offers: who it says it is, the revision spoken, and
    /// every tool sorted by name (asks `tools/list` once per server start).
    pub async fn inventory(&self, deadline: Option<Instant>) -> Result<Inventory, String> {
        let listing = self.listing(deadline).await?;
        let mut tools: Vec<Tool> = listing.tools.values().map(|(t, _)| t.clone()).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Inventory { server: self.server.clone(), protocol: self.protocol.clone(), tools })
    }
}

impl Session {
    /// May `tool` be called on this server: its inventory was read (no
    /// call without one), it lists the tool, and it is the server (and the
    /// inventory) this run first read — not another one behind the same
    /// command after a restart. `Err`: why not; nothing is sent.
    pub async fn authorize(&self, live: &Live, tool: &str, deadline: Option<Instant>) -> Result<(), NotDispatched> {
        let refused = |kind, message| NotDispatched { kind, message };
        let now = live.inventory(deadline).await.map_err(|m| {
            refused(NotDispatchedKind::Other, format!("{m}; the server's tools could not be read, tools/call not sent"))
        })?;
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        let first = first.get_or_insert_with(|| Box::new(now.clone()));
        if **first != now {
            let who = |i: &Inventory| match &i.server {
                Some(s) => format!("{} {}", s.name, s.version),
                None => "a server without serverInfo".into(),
            };
            let what = if first.server == now.server { "another inventory".into() } else { who(&now) };
            let m = format!(
                "the MCP server changed since this run first listed its tools ({} then, {what} now); tools/call not sent",
                who(first)
            );
            return Err(refused(NotDispatchedKind::Other, m));
        }
        if !now.tools.iter().any(|t| t.name == tool) {
            let m = format!("the MCP server does not offer tool `{tool}` (its tools/list); tools/call not sent");
            return Err(refused(NotDispatchedKind::BadRequest, m));
        }
        Ok(())
    }
}

async fn list_tools(link: &Link, deadline: Option<Instant>) -> Result<Listing, String> {
    let mut listing = Listing::default();
    let mut cursor: Option<String> = None;
    for _ in 0..TOOL_PAGES_MAX {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let result = match link.request("tools/list", &params, deadline, || {}).await {
            RpcEnd::Answer(a) => a.result().cloned().ok_or_else(|| format!("tools/list: {}", refusal(&a)))?,
            other => return Err(format!("tools/list: {}", end_text(&other))),
        };
        let Some(page) = result.get("tools").and_then(Value::as_array) else {
            return Err("tools/list: the answer has no `tools` list".into());
        };
        for t in page {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                return Err(format!("tools/list: a tool without a name: {}", excerpt(t)));
            };
            let support = match t.pointer("/execution/taskSupport").and_then(Value::as_str) {
                Some("required") => TaskSupport::Required,
                Some("optional") => TaskSupport::Optional,
                _ => TaskSupport::Forbidden,
            };
            let tool = Tool {
                name: name.to_string(),
                input_schema: t.get("inputSchema").cloned().unwrap_or(Value::Null),
                output_schema: t.get("outputSchema").cloned(),
                annotations: t.get("annotations").cloned(),
            };
            listing.tools.insert(name.to_string(), (tool, support));
            if listing.tools.len() > TOOLS_MAX {
                return Err(format!("tools/list: more than {TOOLS_MAX} tools"));
            }
        }
        cursor = result.get("nextCursor").and_then(Value::as_str).map(str::to_string);
        if cursor.is_none() {
            return Ok(listing);
        }
    }
    Err(format!("tools/list: more than {TOOL_PAGES_MAX} pages"))
}

fn excerpt(v: &Value) -> String {
    v.to_string().chars().take(200).collect()
}

fn refusal(a: &Answer) -> String {
    a.refusal().unwrap_or_default()
}

pub(crate) fn end_text(end: &RpcEnd) -> String {
    match end {
        RpcEnd::Answer(a) => a.refusal().unwrap_or_else(|| "answered".into()),
        RpcEnd::NotSent(nd) => nd.message.clone(),
        RpcEnd::Lost(m) => m.clone(),
        RpcEnd::Deadline { .. } => "no answer before the deadline".into(),
    }
}

/// Why a start failed, before any call was sent.
enum StartEnd {
    Rpc(RpcEnd),
    Refused(String),
}

/// Which revision the server speaks: the `server/discover` probe first
/// (2026-07-28), `initialize` when the server is not modern (see
/// `revision`).
async fn negotiate(link: Link, by: Instant) -> Result<Live, (Link, StartEnd)> {
    link.set_protocol(Some(revision::MODERN));
    let probe_by = by.min(Instant::now() + PROBE_TIMEOUT);
    let end = link.request("server/discover", &json!({}), Some(probe_by), || {}).await;
    match revision::probe(&end) {
        Probe::Modern(found) => Ok(modern(link, &found)),
        Probe::Refused(why) => Err((link, StartEnd::Refused(why))),
        Probe::Failed => Err((link, StartEnd::Rpc(end))),
        Probe::Legacy => {
            link.set_protocol(None);
            initialize(link, by).await
        }
    }
}

/// A 2026-07-28 server, from its `DiscoverResult`: nothing more to say to
/// it before the first call.
fn modern(link: Link, found: &Value) -> Live {
    let server = server_info(found.pointer("/_meta").and_then(|m| m.get(revision::META_SERVER)));
    let tasks = found.pointer("/capabilities/extensions").and_then(|e| e.get(revision::TASKS_EXTENSION)).is_some();
    Live { link, protocol: revision::MODERN.to_string(), server, tasks, tools: OnceCell::new() }
}

/// `initialize` → protocol version checked → `notifications/initialized`.
async fn initialize(link: Link, by: Instant) -> Result<Live, (Link, StartEnd)> {
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        // Questions are put to a person (`engine answer`), never answered
        // on anyone's behalf: one the engine cannot answer yet is dismissed
        // and the task waits for the person.
        "capabilities": {"elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": "engine", "version": env!("CARGO_PKG_VERSION")},
    });
    let end = link.request("initialize", &params, Some(by), || {}).await;
    let result = match &end {
        RpcEnd::Answer(a) => match a.result() {
            Some(r) => r.clone(),
            None => return Err((link, StartEnd::Refused(format!("initialize refused: {}", refusal(a))))),
        },
        _ => return Err((link, StartEnd::Rpc(end))),
    };
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    if !SUPPORTED_PROTOCOL_VERSIONS.contains(&version) {
        let why = format!(
            "the MCP server answered protocolVersion {version:?}, which this client does not speak \
             (it speaks {}); refused",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        );
        return Err((link, StartEnd::Refused(why)));
    }
    if let Link::Http(l) = &link {
        l.set_protocol(Some(version));
    }
    if let Err(m) = link.notify("notifications/initialized", None).await {
        return Err((link, StartEnd::Refused(m)));
    }
    // What the server sends outside our requests' streams comes on the
    // session's own stream: its questions, pings and notifications.
    if let Link::Http(l) = &link {
        l.listen();
    }
    let tasks = version == PROTOCOL_VERSION && result.pointer("/capabilities/tasks/requests/tools/call").is_some();
    let server = server_info(result.get("serverInfo"));
    Ok(Live { link, protocol: version.to_string(), server, tasks, tools: OnceCell::new() })
}

/// An `Implementation` object (`serverInfo`) as we keep it: its name and
/// version, each bounded; `None` when the server gave none.
pub(crate) fn server_info(v: Option<&Value>) -> Option<ServerInfo> {
    let v = v?;
    let field = |k: &str| v.get(k).and_then(Value::as_str).map(|s| s.chars().take(SERVER_INFO_CHARS_MAX).collect());
    Some(ServerInfo { name: field("name")?, version: field("version").unwrap_or_default() })
}

fn start_failure(end: StartEnd, deadline: Option<Instant>) -> NotDispatched {
    let other = |message| NotDispatched { kind: NotDispatchedKind::Other, message };
    match end {
        StartEnd::Refused(m) => other(m),
        StartEnd::Rpc(RpcEnd::Deadline { .. }) => start_deadline(deadline, "initializing the MCP server"),
        StartEnd::Rpc(RpcEnd::NotSent(nd)) => nd,
        StartEnd::Rpc(RpcEnd::Lost(m)) => other(format!("{m}; tools/call not sent")),
        StartEnd::Rpc(RpcEnd::Answer(a)) => other(format!("initialize: {}", refusal(&a))),
    }
}

fn start_deadline(deadline: Option<Instant>, what: &str) -> NotDispatched {
    match deadline {
        Some(_) => NotDispatched {
            kind: NotDispatchedKind::DeadlineBeforeDispatch,
            message: format!("deadline passed while {what}; tools/call not sent"),
        },
        None => NotDispatched {
            kind: NotDispatchedKind::Other,
            message: format!("{what} took over {}s; tools/call not sent", START_TIMEOUT.as_secs()),
        },
    }
}
