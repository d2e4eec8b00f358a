//! `engine login PLAN PROVIDER`: a person authorizes the engine for an MCP
//! server that wants OAuth. The only way a token is ever asked for: it
//! shows the authorization URL, waits for the browser's redirect on
//! 127.0.0.1, and keeps the tokens in the user's state folder (the
//! providers' `oauth` module does the protocol). No store is opened: a
//! login is not part of any goal's ledger, and no token ever reaches one.

use std::path::Path;
use std::time::Duration;

use providers::oauth::store::TokenStore;
use providers::oauth::{Asked, AuthError, Authorized};
use serde_json::json;

use crate::error::{Code, Error, Result};
use crate::plan::adapters::{at_provider, Adapter};
use crate::plan::model::ProviderSpec;
use crate::plan::Plan;
use crate::report::escape::for_terminal;
use crate::report::Output;

/// Bound on `--timeout`: a day.
pub const TIMEOUT_SECONDS_MAX: u64 = 86_400;

/// Bounds on `--scope`: its scopes, and the characters of one.
const SCOPES_MAX: usize = 64;
const SCOPE_CHARS_MAX: usize = 256;

pub fn login(
    plan_path: &Path,
    workspace: Option<&Path>,
    provider: &str,
    (timeout_s, scope): (u64, Option<String>),
) -> Result<Output> {
    if timeout_s == 0 || timeout_s > TIMEOUT_SECONDS_MAX {
        return Err(Error::usage(format!("--timeout must be 1 to {TIMEOUT_SECONDS_MAX} seconds")).at("--timeout"));
    }
    let asked = Asked { scope: scope.as_deref().map(checked_scope).transpose()? };
    let plan = Plan::load(plan_path, workspace)?;
    let place = format!("$.providers.{provider}");
    let Some(spec) = plan.file.providers.get(provider) else {
        let declared: Vec<&String> = plan.file.providers.keys().collect();
        let m = format!("the plan declares no provider `{provider}` (it declares {declared:?})");
        return Err(Error::new(Code::UnknownProvider, m).at(place));
    };
    if !matches!(spec, ProviderSpec::Mcp { url: Some(_), auth: Some(_), .. }) {
        let m =
            format!("provider `{provider}` is not an MCP server over a `url` with `auth.oauth`: nothing to log in to");
        return Err(Error::usage(m).at(place));
    }
    let Adapter::Mcp(mcp) = Adapter::parse(spec, Some(&plan.workspace)).map_err(|e| at_provider(provider, e))? else {
        return Err(Error::internal("an MCP provider spec built another adapter"));
    };
    let store = TokenStore::user().map_err(Error::usage)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("tokio runtime: {e}")))?;
    let show = |line: &str| crate::say_line!("{}", for_terminal(line));
    let done = rt.block_on(mcp.login(&store, (&asked, Duration::from_secs(timeout_s)), show));
    let done = done.map_err(|e| refused(e, provider))?;
    Ok(render(provider, &done))
}

/// `--scope`: space-separated scope tokens (RFC 6749 §3.3: visible ASCII
/// but `"` and `\`), as one string.
fn checked_scope(scope: &str) -> Result<String> {
    let tokens: Vec<&str> = scope.split_whitespace().collect();
    let token_char = |b: u8| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\';
    let fits = |t: &&str| t.len() <= SCOPE_CHARS_MAX && t.bytes().all(token_char);
    if tokens.is_empty() || tokens.len() > SCOPES_MAX || !tokens.iter().all(fits) {
        return Err(Error::usage(format!(
            "--scope takes 1 to {SCOPES_MAX} scopes separated by spaces, each visible ASCII without quotes or \
             backslashes, at most {SCOPE_CHARS_MAX} characters"
        ))
        .at("--scope"));
    }
    Ok(tokens.join(" "))
}

fn refused(e: AuthError, provider: &str) -> Error {
    let code = match &e {
        AuthError::Required(_) => Code::AuthorizationRequired,
        AuthError::Metadata(_) => Code::OauthMetadataInvalid,
        AuthError::Refused(_) => Code::OauthRefused,
    };
    Error::new(code, format!("{}; no token was kept", e.message())).at(format!("$.providers.{provider}.auth"))
}

/// What was kept, in words that claim no more: the token itself is never
/// shown.
fn render(provider: &str, a: &Authorized) -> Output {
    let how = match a.client_auth {
        "none" => String::new(),
        method => format!(", authenticated by {method}"),
    };
    let client = if a.registered {
        format!("client `{}`{how}, registered now", a.client_id)
    } else {
        format!("client `{}`{how}", a.client_id)
    };
    let lifetime = match a.expires_in {
        Some(s) => format!("an access token for {s} s"),
        None => "an access token with no stated lifetime".to_string(),
    };
    let refresh = if a.refresh_token { ", a refresh token" } else { ", no refresh token" };
    let text = format!(
        "authorized: provider `{provider}` ({}) by {} ({client}{}): {lifetime}{refresh}, kept in {} (mode 0600)",
        a.resource,
        a.issuer,
        a.scope.as_deref().map(|s| format!(", scope `{s}`")).unwrap_or_default(),
        a.file.display()
    );
    let json = json!({"ok": true, "provider": provider, "resource": a.resource, "issuer": a.issuer,
        "client_id": a.client_id, "client_auth": a.client_auth, "registered": a.registered, "scope": a.scope, "expires_in": a.expires_in,
        "refresh_token": a.refresh_token, "file": a.file});
    Output { text: format!("{}\n", for_terminal(&text)), json, exit_code: 0 }
}
