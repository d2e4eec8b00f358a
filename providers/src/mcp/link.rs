//! One connection to an MCP server, whichever the transport.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::jsonrpc::RpcEnd;
use super::revision;
use super::stdio::StdioLink;
use super::streamable::HttpLink;

/// Bound on one notification over HTTP.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) enum Link {
    Stdio(StdioLink),
    Http(HttpLink),
}

impl Link {
    /// One request under `deadline`; `on_sent` runs once it is wholly
    /// written (the moment of dispatch).
    pub async fn request(
        &self,
        method: &str,
        params: &Value,
        deadline: Option<Instant>,
        on_sent: impl FnOnce() + Send,
    ) -> RpcEnd {
        // 2026-07-28: every request says its revision, who asks, and what
        // the client can do.
        let modern;
        let params = if self.modern() {
            modern = revision::with_modern_meta(params);
            &modern
        } else {
            params
        };
        match self {
            Link::Stdio(l) => l.request(method, params, deadline, on_sent).await,
            Link::Http(l) => l.request(method, params, deadline, on_sent).await,
        }
    }

    /// The revision requests now speak (`None`: not negotiated yet, or a
    /// legacy `initialize` under way).
    pub fn set_protocol(&self, v: Option<&str>) {
        match self {
            Link::Stdio(l) => l.set_protocol(v),
            Link::Http(l) => l.set_protocol(v),
        }
    }

    /// Requests speak 2026-07-28.
    pub fn modern(&self) -> bool {
        match self {
            Link::Stdio(l) => l.protocol().as_deref() == Some(revision::MODERN),
            Link::Http(l) => l.protocol().as_deref() == Some(revision::MODERN),
        }
    }

    pub async fn notify(&self, method: &str, params: Option<&Value>) -> Result<(), String> {
        match self {
            Link::Stdio(l) => l.notify(method, params).await,
            Link::Http(l) => l.notify(method, params, NOTIFY_TIMEOUT).await,
        }
    }

    pub fn alive(&self) -> bool {
        match self {
            Link::Stdio(l) => l.alive(),
            Link::Http(l) => l.alive(),
        }
    }

    /// Where requests go, for messages: `MCP server pid N` or the URL.
    pub fn describe(&self) -> String {
        match self {
            Link::Stdio(l) => format!("MCP server pid {}", l.pid()),
            Link::Http(l) => format!("MCP server {}", l.url()),
        }
    }

    /// The Streamable HTTP session the server gave us.
    pub fn session_id(&self) -> Option<String> {
        match self {
            Link::Stdio(_) => None,
            Link::Http(l) => l.session_id(),
        }
    }

    pub fn pump_stderr(&self) {
        if let Link::Stdio(l) = self {
            l.pump_stderr();
        }
    }

    /// End it now (a stdio server's group is killed; an HTTP link is only
    /// marked dead, its session's stream no longer read).
    pub fn kill(&self) {
        match self {
            Link::Stdio(l) => l.kill(),
            Link::Http(l) => l.mark_dead(),
        }
    }

    /// End it cleanly: stdin closed and the group killed after `grace`, or
    /// the HTTP session deleted.
    pub async fn close(&self, grace: Duration) {
        match self {
            Link::Stdio(l) => l.close(grace).await,
            Link::Http(l) => l.close(grace).await,
        }
    }
}
