//! A person's authorization (`engine login`): discovery, the loopback
//! redirect, PKCE S256, the authorization code exchanged with the
//! `resource` named, the tokens kept. The only code path that asks an
//! authorization server for a code, and it needs a person at a browser:
//! the URL is shown, nothing opens it on its own.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::client::{self, Client};
use super::grant::{self, CodeGrant};
use super::metadata::{self, canonical_resource, Discovered};
use super::pkce;
use super::store::{TokenRecord, TokenStore};
use super::web::{form, query_value, Web};
use super::{now_s, AuthError, OAuthConfig};
use crate::tls::Tls;

/// Bound on one redirect request's head.
const REDIRECT_HEAD_BYTES_MAX: usize = 16 * 1024;
/// Bound on reading one connection to the redirect listener.
const REDIRECT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on connections that are not the redirect (a browser's favicon…).
const STRAY_CONNECTIONS_MAX: usize = 64;

/// What a login kept (no token: those stay in the file).
#[derive(Debug, Clone)]
pub struct Authorized {
    pub resource: String,
    pub issuer: String,
    pub client_id: String,
    /// How it authenticates at the token endpoint (`none`, `client_secret_basic`, `client_secret_post`).
    pub client_auth: &'static str,
    /// The client was registered now (RFC 7591).
    pub registered: bool,
    pub scope: Option<String>,
    pub expires_in: Option<u64>,
    pub refresh_token: bool,
    pub file: PathBuf,
}

/// Where the server and its authorization server are reached.
pub struct Reach<'a> {
    pub url: &'a str,
    pub hosts: &'a [String],
    pub tls: &'a Tls,
}

/// What a person asks of a login besides the plan: the scope to ask for
/// (`engine login --scope`: a step-up the server asked for), instead of
/// the plan's and the server's.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub scope: Option<String>,
}

/// Run the whole flow; `show` gets the lines a person reads (the URL to
/// open, where the redirect is awaited). `timeout` bounds the wait for the
/// person.
pub async fn login(
    reach: Reach<'_>,
    (config, asked): (&OAuthConfig, &Asked),
    store: &TokenStore,
    timeout: Duration,
    mut show: impl FnMut(&str),
) -> Result<Authorized, AuthError> {
    let web = Web { hosts: reach.hosts, tls: reach.tls };
    let found = metadata::discover(reach.url, &web).await?;
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| AuthError::Refused(format!("cannot listen on 127.0.0.1 for the redirect: {e}")))?;
    let port = listener.local_addr().map_err(|e| AuthError::Refused(e.to_string()))?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let scope = asked.scope.clone().or_else(|| scope_of(config, &found));
    let (client, registered) = client_of(&web, config, &found, (&redirect_uri, scope.as_deref())).await?;
    let client_id = client.id.clone();
    if let Some(line) = secret_words(config, &client, &found) {
        show(&line);
    }
    let verifier = pkce::random_token().map_err(AuthError::Refused)?;
    let state = pkce::random_token().map_err(AuthError::Refused)?;
    let challenge = pkce::challenge(&verifier);
    show(&format!("Open this URL in a browser to authorize engine for {}:", found.resource.resource));
    show(&authorization_url(&found, &client_id, (&redirect_uri, &state, &challenge), scope.as_deref()));
    show(&format!("Waiting for the redirect on {redirect_uri} (at most {} s)…", timeout.as_secs()));
    let code = match tokio::time::timeout(timeout, await_code(&listener, &state)).await {
        Ok(r) => r?,
        Err(_) => return Err(AuthError::Refused(format!("no redirect came within {} s", timeout.as_secs()))),
    };
    drop(listener);
    let grant = CodeGrant {
        token_endpoint: &found.server.token_endpoint,
        client: &client,
        code: &code,
        redirect_uri: &redirect_uri,
        verifier: &verifier,
        resource: &found.resource.resource,
    };
    let granted = grant::exchange_code(&web, &grant).await?;
    let server = canonical_resource(reach.url);
    let audience = (found.resource.resource != server).then(|| found.resource.resource.clone());
    let record = TokenRecord {
        resource: server,
        audience,
        issuer: found.server.issuer.clone(),
        token_endpoint: found.server.token_endpoint.clone(),
        client_id: client_id.clone(),
        client_secret: client.secret.as_ref().map(|(s, _)| s.clone()),
        token_auth: client.secret.as_ref().map(|(_, a)| *a),
        scope: granted.scope.clone().or(scope),
        access_token: granted.access_token,
        refresh_token: granted.refresh_token.clone(),
        expires_at: granted.expires_in.map(|s| now_s().saturating_add(s)),
        issued_at: now_s(),
    };
    let file = store.save(&record).map_err(AuthError::Refused)?;
    Ok(Authorized {
        resource: record.audience.unwrap_or(record.resource),
        issuer: record.issuer,
        client_id,
        client_auth: client.method(),
        registered,
        scope: record.scope,
        expires_in: granted.expires_in,
        refresh_token: granted.refresh_token.is_some(),
        file,
    })
}

/// The URL the person opens: the code flow with PKCE S256, a fresh
/// `state`, the `resource` (RFC 8707) and the scope.
fn authorization_url(
    found: &Discovered,
    client_id: &str,
    (redirect_uri, state, challenge): (&str, &str, &str),
    scope: Option<&str>,
) -> String {
    let mut fields = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("state", state),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("resource", found.resource.resource.as_str()),
    ];
    if let Some(s) = scope {
        fields.push(("scope", s));
    }
    let endpoint = &found.server.authorization_endpoint;
    let sep = if endpoint.contains('?') { '&' } else { '?' };
    format!("{endpoint}{sep}{}", form(&fields))
}

/// The client to authorize: the plan's (public, or with the secret read
/// from where the plan names it), else one registered now; and whether
/// it was registered now.
async fn client_of(
    web: &Web<'_>,
    config: &OAuthConfig,
    found: &Discovered,
    redirect: (&str, Option<&str>),
) -> Result<(Client, bool), AuthError> {
    let offered = found.server.token_auth_methods.as_deref();
    match (&config.client_id, &found.server.registration_endpoint) {
        (Some(id), _) => {
            let Some(source) = &config.client_secret else { return Ok((Client::public(id), false)) };
            let secret = source.read().map_err(AuthError::Refused)?;
            let auth = client::method_for_secret(offered).map_err(AuthError::Refused)?;
            Ok((Client { id: id.clone(), secret: Some((secret, auth)) }, false))
        }
        (None, Some(endpoint)) => Ok((grant::register(web, endpoint, redirect, offered).await?, true)),
        (None, None) => Err(AuthError::Refused(format!(
            "the plan gives no client_id and the authorization server {} offers no registration_endpoint",
            found.server.issuer
        ))),
    }
}

/// Where a pre-registered client's secret was read from and where it
/// goes: the person's to see, before it goes (never the secret).
fn secret_words(config: &OAuthConfig, client: &Client, found: &Discovered) -> Option<String> {
    let (Some(source), Some(_)) = (&config.client_secret, &client.secret) else { return None };
    Some(format!(
        "The secret of client `{}` is read from {} and goes to {} only ({}).",
        client.id,
        source.words(),
        found.server.token_endpoint,
        client.method()
    ))
}

/// The plan's scopes, else the server's challenge, else its metadata's
/// `scopes_supported` (the MCP specification's order).
fn scope_of(config: &OAuthConfig, found: &Discovered) -> Option<String> {
    if !config.scopes.is_empty() {
        return Some(config.scopes.join(" "));
    }
    found.challenged_scope.clone().or_else(|| {
        let s = &found.resource.scopes_supported;
        (!s.is_empty()).then(|| s.join(" "))
    })
}

/// Wait for `GET /callback?code=…&state=…`. A redirect whose `state` is
/// not ours ends the login: it was not asked for by this login.
async fn await_code(listener: &TcpListener, state: &str) -> Result<String, AuthError> {
    for _ in 0..STRAY_CONNECTIONS_MAX {
        let (mut conn, _) =
            listener.accept().await.map_err(|e| AuthError::Refused(format!("redirect listener: {e}")))?;
        let Some(target) = read_target(&mut conn).await else { continue };
        let Some(query) = target.strip_prefix("/callback?").or_else(|| (target == "/callback").then_some("")) else {
            answer(&mut conn, "404 Not Found", "Not the redirect.").await;
            continue;
        };
        let got_state = query_value(query, "state");
        if got_state.as_deref() != Some(state) {
            answer(&mut conn, "400 Bad Request", "Refused: this redirect's state is not the one engine sent.").await;
            return Err(AuthError::Refused(
                "the redirect's `state` is not the one this login sent: refused (a redirect this login did not ask for)"
                    .into(),
            ));
        }
        if let Some(error) = query_value(query, "error") {
            answer(&mut conn, "200 OK", "The authorization server refused; see the terminal.").await;
            let error: String = error.chars().take(200).collect();
            return Err(AuthError::Refused(format!("the authorization server answered `{error}`")));
        }
        let Some(code) = query_value(query, "code").filter(|c| !c.is_empty()) else {
            answer(&mut conn, "400 Bad Request", "No code in the redirect.").await;
            return Err(AuthError::Refused("the redirect carried no code".into()));
        };
        answer(&mut conn, "200 OK", "engine is authorized. You may close this window.").await;
        return Ok(code);
    }
    Err(AuthError::Refused(format!("{STRAY_CONNECTIONS_MAX} connections came, none the redirect")))
}

/// The request target of a `GET` (bounded in size and time).
async fn read_target(conn: &mut TcpStream) -> Option<String> {
    let started = Instant::now();
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REDIRECT_HEAD_BYTES_MAX {
        let left = REDIRECT_READ_TIMEOUT.checked_sub(started.elapsed())?;
        let n = tokio::time::timeout(left, conn.read(&mut buf)).await.ok()?.ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut words = line.lines().next()?.split(' ');
    (words.next()? == "GET").then(|| words.next().map(str::to_string))?
}

async fn answer(conn: &mut TcpStream, status: &str, text: &str) {
    let page = format!("<!doctype html><title>engine</title><p>{text}</p>\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}
