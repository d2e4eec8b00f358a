//! The token endpoint (authorization code and refresh grants, RFC 6749
//! §4.1.3 and §6, with PKCE's `code_verifier` and RFC 8707's `resource` on
//! every request) and dynamic client registration (RFC 7591). A public
//! client (`none`) is bound to its code by PKCE alone; a confidential one
//! also sends its secret as the server takes it (`client::Client`).
//!
//! An answer's message names the server's `error` and description only,
//! never the body: a body may hold a token.

use serde_json::{json, Value};

use super::client::{self, Client};
use super::web::{Reply, Web};
use super::AuthError;

/// A token endpoint's answer.
#[derive(Clone, PartialEq, Eq)]
pub struct Granted {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: Option<u64>,
    pub scope: Option<String>,
}

/// Never the tokens, whatever prints it.
impl std::fmt::Debug for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted").field("expires_in", &self.expires_in).finish_non_exhaustive()
    }
}

/// Bound on a token as kept (a larger one is refused, not cut).
const TOKEN_CHARS_MAX: usize = 16 * 1024;

/// The answer of a token request, judged.
pub fn read_token_answer(reply: &Reply, what: &str) -> Result<Granted, String> {
    let doc = serde_json::from_str::<Value>(&reply.body).unwrap_or(Value::Null);
    if reply.status != 200 {
        return Err(format!("{what}: HTTP {}{}", reply.status, oauth_error(&doc)));
    }
    let text = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_string);
    let token_type = text("token_type").unwrap_or_default();
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(format!("{what}: token_type `{token_type}` is not Bearer"));
    }
    let access_token = text("access_token").filter(|t| sane(t)).ok_or(format!("{what}: no usable access_token"))?;
    let refresh_token = text("refresh_token").filter(|t| sane(t));
    let expires_in = doc.get("expires_in").and_then(Value::as_u64);
    Ok(Granted { access_token, refresh_token, expires_in, scope: text("scope") })
}

fn sane(token: &str) -> bool {
    !token.is_empty() && token.len() <= TOKEN_CHARS_MAX && token.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

/// `: invalid_grant (the description)` from an OAuth error body.
fn oauth_error(doc: &Value) -> String {
    let short = |k: &str| doc.get(k).and_then(Value::as_str).map(|s| s.chars().take(200).collect::<String>());
    match (short("error"), short("error_description")) {
        (Some(e), Some(d)) => format!(": {e} ({d})"),
        (Some(e), None) => format!(": {e}"),
        _ => String::new(),
    }
}

pub struct CodeGrant<'a> {
    pub token_endpoint: &'a str,
    pub client: &'a Client,
    pub code: &'a str,
    pub redirect_uri: &'a str,
    pub verifier: &'a str,
    pub resource: &'a str,
}

/// A token request: its grant's fields, with the client's credentials.
async fn token_request(
    web: &Web<'_>,
    endpoint: &str,
    client: &Client,
    grant: &[(&str, &str)],
) -> Result<super::web::Reply, String> {
    let (fields, headers) = client.credentials();
    let mut all: Vec<(&str, &str)> = grant.to_vec();
    all.extend(fields.iter().map(|(k, v)| (*k, v.as_str())));
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    web.post_form(endpoint, &all, &headers).await
}

pub async fn exchange_code(web: &Web<'_>, g: &CodeGrant<'_>) -> Result<Granted, AuthError> {
    let grant = [
        ("grant_type", "authorization_code"),
        ("code", g.code),
        ("redirect_uri", g.redirect_uri),
        ("code_verifier", g.verifier),
        ("resource", g.resource),
    ];
    let reply = token_request(web, g.token_endpoint, g.client, &grant).await.map_err(AuthError::Refused)?;
    read_token_answer(&reply, "the token endpoint refused the authorization code").map_err(AuthError::Refused)
}

/// A refresh; the answer's refresh token, if any, replaces the old one
/// (rotation), which the caller keeps before using the access token.
pub async fn refresh(
    web: &Web<'_>,
    token_endpoint: &str,
    client: &Client,
    refresh_token: &str,
    resource: &str,
) -> Result<Granted, String> {
    let grant = [("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("resource", resource)];
    let reply = token_request(web, token_endpoint, client, &grant).await?;
    read_token_answer(&reply, "the token endpoint refused the refresh token")
}

/// RFC 7591: a client for this redirect URI — public when the server
/// offers `none`, else with the secret method it offers (`offered`: its
/// `token_endpoint_auth_methods_supported`) — as the server registered it.
pub async fn register(
    web: &Web<'_>,
    endpoint: &str,
    (redirect_uri, scope): (&str, Option<&str>),
    offered: Option<&[String]>,
) -> Result<Client, AuthError> {
    let asked = client::registration_method(offered).map_err(AuthError::Refused)?;
    let mut doc = json!({"client_name": "engine", "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": asked});
    if let Some(s) = scope {
        doc["scope"] = json!(s);
    }
    let reply = web.post_json(endpoint, &doc, &[("Accept", "application/json")]).await.map_err(AuthError::Refused)?;
    let answer = serde_json::from_str::<Value>(&reply.body).unwrap_or(Value::Null);
    if !(200..300).contains(&reply.status) {
        return Err(AuthError::Refused(format!(
            "client registration at {endpoint}: HTTP {}{}",
            reply.status,
            oauth_error(&answer)
        )));
    }
    client::registered(&answer, asked)
        .map_err(|m| AuthError::Refused(format!("client registration at {endpoint}: {m}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str) -> Reply {
        Reply { status, www_authenticate: None, body: body.into() }
    }

    #[test]
    fn token_answers_are_judged_and_errors_never_echo_the_body() {
        let ok = reply(200, r#"{"access_token":"A","token_type":"bearer","expires_in":60,"refresh_token":"R"}"#);
        let g = read_token_answer(&ok, "x").unwrap();
        assert_eq!((g.access_token.as_str(), g.refresh_token.as_deref(), g.expires_in), ("A", Some("R"), Some(60)));
        let mac = reply(200, r#"{"access_token":"A","token_type":"mac"}"#);
        assert!(read_token_answer(&mac, "x").unwrap_err().contains("not Bearer"));
        let bad = reply(400, r#"{"error":"invalid_grant","error_description":"PKCE","access_token":"LEAK"}"#);
        let e = read_token_answer(&bad, "x").unwrap_err();
        assert_eq!(e, "x: HTTP 400: invalid_grant (PKCE)");
    }
}
