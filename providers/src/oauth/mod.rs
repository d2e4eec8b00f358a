//! OAuth 2.1 for MCP servers over Streamable HTTP, as the MCP authorization
//! specification (2025-11-25, unchanged in 2026-07-28) asks of a client:
//! protected resource metadata (RFC 9728), authorization server metadata
//! (RFC 8414, OpenID discovery as fallback), the authorization code flow
//! with PKCE S256, resource indicators (RFC 8707), dynamic client
//! registration (RFC 7591) or a pre-registered client (public, or
//! confidential with its secret), refresh with rotation, and a person's
//! step-up to more scope when the server answers `403 insufficient_scope`.
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
//! Modules: `config` (the plan field), `client` (how the client proves
//! itself at the token endpoint: public, `client_secret_basic`,
//! `client_secret_post`), `pkce` (verifier, challenge, state),
//! `metadata` (discovery and its checks, pure where it can be), `grant`
//! (token and registration requests), `store` (the token file), `bearer`
//! (a run's token source), `login` (the person's flow), `web` (the few
//! HTTP requests, on the HTTP provider's wire and TLS).

mod bearer;
mod client;
mod config;
mod grant;
mod login;
mod metadata;
mod pkce;
pub mod store;
mod web;

pub use bearer::Bearer;
pub use client::TokenAuth;
pub use config::{OAuthConfig, SecretSource};
pub use login::{login, Asked, Authorized, Reach};
pub use metadata::canonical_resource;
pub(crate) use web::plain_allowed;

/// Starts the message of every failure that a person's `engine login`
/// cures: no token kept, a refresh refused, a 401 after a refresh. The
/// engine turns a tool listing that failed with it into
/// `AUTHORIZATION_REQUIRED`.
pub const AUTHORIZATION_REQUIRED: &str = "authorization required: ";

/// Opens the words of a step-up (after `AUTHORIZATION_REQUIRED`): the
/// scope a person's login must ask for, between backquotes.
const STEP_UP: &str = "insufficient scope: a login must ask for scope `";

/// A `WWW-Authenticate` challenge of a `403`: when it says
/// `insufficient_scope` and names a scope the kept token was not granted
/// (`granted`: its scope, `None` when not said), the scope a person's
/// login must ask for — what was granted, then what the server asks
/// (RFC 6750 §3.1; the MCP specification's step-up). `None`: not that
/// challenge, or a login for that scope would not help.
pub fn step_up(challenge: &str, granted: Option<&str>) -> Option<String> {
    if metadata::challenge_param(challenge, "error").as_deref() != Some("insufficient_scope") {
        return None;
    }
    let asked = metadata::challenge_param(challenge, "scope")?;
    let had: Vec<&str> = granted.map(|g| g.split_whitespace().collect()).unwrap_or_default();
    let missing: Vec<&str> = asked.split_whitespace().filter(|s| !had.contains(s)).collect();
    if missing.is_empty() {
        return None;
    }
    let mut scope: Vec<&str> = had;
    scope.extend(missing);
    let scope = scope.join(" ");
    // A scope that could not be asked for as a plan's scope is not relayed.
    let token_char = |b: u8| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\';
    scope.bytes().all(|b| b == b' ' || token_char(b)).then_some(scope)
}

/// The words of a step-up `AuthError::Required` (`what`: who refused).
pub fn step_up_words(scope: &str, what: &str) -> String {
    format!("{STEP_UP}{scope}` ({what})")
}

/// The scope a step-up's words name (`None`: other words).
pub fn step_up_scope(message: &str) -> Option<&str> {
    let rest = &message[message.find(STEP_UP)? + STEP_UP.len()..];
    rest.get(..rest.find('`')?)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_up_asks_for_what_was_granted_and_what_is_missing() {
        let h = r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://h/x", error="insufficient_scope""#;
        assert_eq!(step_up(h, Some("mcp:basic")).as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(step_up(h, Some("other")).as_deref(), Some("other mcp:basic mcp:write"));
        assert_eq!(step_up(h, None).as_deref(), Some("mcp:basic mcp:write"), "granted scope not said");
        // A login for what the token already has would not help.
        assert_eq!(step_up(h, Some("mcp:write mcp:basic")), None);
        assert_eq!(step_up(r#"Bearer error="invalid_token""#, None), None);
        assert_eq!(step_up(r#"Bearer error="insufficient_scope""#, None), None, "no scope named");
        let words = step_up_words("mcp:basic mcp:write", "the server answered 403");
        let e = AuthError::Required(words);
        assert_eq!(step_up_scope(&e.message()), Some("mcp:basic mcp:write"));
        assert!(e.message().starts_with(AUTHORIZATION_REQUIRED));
        assert_eq!(step_up_scope("authorization required: no token"), None);
    }
}
