//! OAuth 2.1 for MCP servers over Streamable HTTP, as the MCP authorization
//! specification (2025-11-25, unchanged in 2026-07-28) asks of a client:
//! protected resource metadata (RFC 9728), authorization server metadata
//! (RFC 8414, OpenID discovery as fallback), the authorization code flow
//! with PKCE S256, resource indicators (RFC 8707), dynamic client
//! registration (RFC 7591) and refresh with rotation.
//!
//! Who does what:
//! - a person authorizes, once, with `engine login` (`login`): the only code
//!   path that asks for an authorization code;
//! - a run only reads the kept token and refreshes it (`Bearer`); a run
//!   that has no usable token sends nothing and says
//!   `AUTHORIZATION_REQUIRED` (the marker below);
//! - tokens live in a 0600 file of a 0700 folder of the user's state
//!   folder (`store`), never in the ledger, a log or a message.
//!
//! Modules: `config` (the plan field), `pkce` (verifier, challenge, state),
//! `metadata` (discovery and its checks, pure where it can be), `grant`
//! (token and registration requests), `store` (the token file), `bearer`
//! (a run's token source), `login` (the person's flow), `web` (the few
//! HTTP requests, on the HTTP provider's wire and TLS).

mod bearer;
mod config;
mod grant;
mod login;
mod metadata;
mod pkce;
pub mod store;
mod web;

pub use bearer::Bearer;
pub use config::OAuthConfig;
pub use login::{login, Authorized, Reach};
pub use metadata::canonical_resource;
pub(crate) use web::plain_allowed;

/// Starts the message of every failure that a person's `engine login`
/// cures: no token kept, a refresh refused, a 401 after a refresh. The
/// engine turns a tool listing that failed with it into
/// `AUTHORIZATION_REQUIRED`.
pub const AUTHORIZATION_REQUIRED: &str = "authorization required: ";

/// Why an OAuth step stopped. Messages name URLs and fields, never a token,
/// a code or a verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No usable token: a person must authorize (`engine login`).
    Required(String),
    /// The metadata is not to be trusted: the resource it names is not this
    /// server, an endpoint is not on its issuer, no PKCE S256.
    Metadata(String),
    /// The flow was refused: a wrong `state`, the authorization server's
    /// error, a redirect that never came.
    Refused(String),
}

impl AuthError {
    pub fn message(&self) -> String {
        match self {
            AuthError::Required(m) => format!("{AUTHORIZATION_REQUIRED}{m}"),
            AuthError::Metadata(m) | AuthError::Refused(m) => m.clone(),
        }
    }
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
