//! Discovery: from the MCP server's URL to the authorization server's
//! endpoints, and the checks that make them trusted.
//!
//! 1. The server's 401 names its protected resource metadata
//!    (`WWW-Authenticate: Bearer resource_metadata="…"`); without it, the
//!    well-known URIs of RFC 9728 (`/.well-known/oauth-protected-resource`
//!    with the server's path, then at the root).
//! 2. That metadata's `resource` must be the resource the URL it was read
//!    from was made for (RFC 9728 §3.3): this server's URI for the
//!    challenge's URL and the well-known URI with the server's path; the
//!    server's origin — a resource at its root, which covers the server —
//!    for the well-known URI at the root (this server's own URI is taken
//!    there too). A document naming another resource is refused, so a
//!    token meant for one server is never asked for another. The resource
//!    named is the token's audience (RFC 8707's `resource`).
//! 3. Its first `authorization_servers` entry is the issuer; its metadata is
//!    read from RFC 8414's well-known URI, then OpenID discovery's two
//!    (the order the MCP specification gives).
//! 4. That metadata's `issuer` must be the issuer asked (RFC 8414 §3.3), its
//!    endpoints on the issuer's origin (a token endpoint elsewhere would
//!    receive the code and the refresh token), and PKCE `S256` offered
//!    (the MCP specification: a client must refuse to go on without it).
//!
//! The checks are pure functions of the documents (`check_*`).

use serde_json::Value;

use super::web::Web;
use super::AuthError;

/// What a protected resource's metadata says, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// The resource it names (canonical): the tokens' audience, sent as
    /// `resource` on every authorization and token request.
    pub resource: String,
    pub issuer: String,
    pub scopes_supported: Vec<String>,
}

/// An authorization server's endpoints, checked to be on its issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    /// How the token endpoint takes a client's credentials
    /// (`token_endpoint_auth_methods_supported`; `None`: not said).
    pub token_auth_methods: Option<Vec<String>>,
}

/// Everything discovery found.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub resource: Resource,
    pub server: Server,
    /// The scope the server's challenge asked for, if it did.
    pub challenged_scope: Option<String>,
}

/// The canonical URI of an MCP server (RFC 8707, the MCP specification):
/// scheme and host lower-cased, no fragment, no trailing `/` alone.
pub fn canonical_resource(url: &str) -> String {
    let url = url.split('#').next().unwrap_or(url);
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    let path = if path == "/" { "" } else { path };
    format!("{}://{}{path}", scheme.to_ascii_lowercase(), authority.to_ascii_lowercase())
}

/// `scheme://authority`, lower-cased.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    (!authority.is_empty()).then(|| format!("{}://{}", scheme.to_ascii_lowercase(), authority.to_ascii_lowercase()))
}

/// The path of a URL (without its query), `""` for the root.
fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    match rest.find('/') {
        Some(i) if &rest[i..] != "/" => &rest[i..],
        _ => "",
    }
}

/// `Bearer k="v", k=v` → the value of `key` (quoted or a token).
pub fn challenge_param(header: &str, key: &str) -> Option<String> {
    let rest = header.trim_start();
    let rest = rest.get(..6).filter(|s| s.eq_ignore_ascii_case("bearer")).map(|_| &rest[6..])?;
    let mut s = rest;
    loop {
        s = s.trim_start_matches([' ', ',', '\t']);
        let eq = s.find('=')?;
        let name = s[..eq].trim();
        s = s[eq + 1..].trim_start();
        let value = if let Some(q) = s.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => out.extend(chars.next().map(|(_, c)| c)),
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => out.push(c),
                }
            }
            s = &q[end.min(q.len())..];
            out
        } else {
            let end = s.find([',', ' ']).unwrap_or(s.len());
            let v = s[..end].to_string();
            s = &s[end..];
            v
        };
        if name.eq_ignore_ascii_case(key) {
            return Some(value);
        }
    }
}

/// Where a protected resource's metadata may be read, and the resource the
/// document there must name (RFC 9728 §3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataUrl {
    pub url: String,
    /// The resources the document may name (canonical).
    pub names: Vec<String>,
}

/// RFC 9728 §3.1's well-known URIs of a server: with its path (the
/// document names the server), then at the root (it names the origin, a
/// resource that covers the server, or the server itself).
pub fn resource_metadata_urls(server: &str) -> Vec<MetadataUrl> {
    let Some(origin) = origin(server) else { return Vec::new() };
    let own = canonical_resource(server);
    let path = path_of(server);
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(MetadataUrl {
            url: format!("{origin}/.well-known/oauth-protected-resource{path}"),
            names: vec![own.clone()],
        });
    }
    let mut names = vec![origin.clone()];
    if own != origin {
        names.push(own);
    }
    urls.push(MetadataUrl { url: format!("{origin}/.well-known/oauth-protected-resource"), names });
    urls
}

/// The metadata URIs of an issuer, in the MCP specification's order.
pub fn server_metadata_urls(issuer: &str) -> Vec<String> {
    let Some(origin) = origin(issuer) else { return Vec::new() };
    match path_of(issuer) {
        "" => vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ],
        path => vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ],
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The protected resource metadata, checked against the resources the URL
/// it was read from allows (`names`, canonical; the first is the server's
/// own URI or its origin).
pub fn check_resource(doc: &Value, server: &str, names: &[String]) -> Result<Resource, AuthError> {
    let named = doc.get("resource").and_then(Value::as_str).unwrap_or("");
    let resource = canonical_resource(named);
    if named.is_empty() || !names.contains(&resource) {
        return Err(AuthError::Metadata(format!(
            "the protected resource metadata names resource `{named}`, not this server `{server}`{}: refused \
             (a token for it would be a token for another audience)",
            match names {
                [_, _, ..] => format!(" nor its origin `{}`", names[0]),
                _ => String::new(),
            }
        )));
    }
    let issuer = strings(doc.get("authorization_servers")).into_iter().next().ok_or_else(|| {
        AuthError::Metadata(format!("the protected resource metadata of `{server}` names no authorization_servers"))
    })?;
    Ok(Resource { resource, issuer, scopes_supported: strings(doc.get("scopes_supported")) })
}

/// An authorization server's metadata, checked against its issuer.
pub fn check_server(doc: &Value, issuer: &str) -> Result<Server, AuthError> {
    let bad = |m: String| Err(AuthError::Metadata(m));
    let named = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
    if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return bad(format!("the authorization server metadata names issuer `{named}`, not `{issuer}`: refused"));
    }
    let own = origin(issuer);
    let endpoint = |field: &str| -> Result<Option<String>, AuthError> {
        match doc.get(field).and_then(Value::as_str) {
            None => Ok(None),
            Some(u) if own.is_some() && origin(u) == own => Ok(Some(u.to_string())),
            Some(u) => Err(AuthError::Metadata(format!(
                "the authorization server's {field} `{u}` is not on its issuer `{issuer}`: refused"
            ))),
        }
    };
    let (Some(authorization_endpoint), Some(token_endpoint)) =
        (endpoint("authorization_endpoint")?, endpoint("token_endpoint")?)
    else {
        return bad(format!("the metadata of `{issuer}` lacks authorization_endpoint or token_endpoint"));
    };
    if !strings(doc.get("code_challenge_methods_supported")).iter().any(|m| m == "S256") {
        return bad(format!("the authorization server `{issuer}` does not offer PKCE S256: refused"));
    }
    let registration_endpoint = endpoint("registration_endpoint")?;
    let token_auth_methods = doc.get("token_endpoint_auth_methods_supported").map(|m| strings(Some(m)));
    Ok(Server {
        issuer: issuer.to_string(),
        authorization_endpoint,
        token_endpoint,
        registration_endpoint,
        token_auth_methods,
    })
}

/// The whole discovery for the MCP server at `url`.
pub async fn discover(url: &str, web: &Web<'_>) -> Result<Discovered, AuthError> {
    let refused = |m: String| AuthError::Refused(m);
    // An unauthenticated request: a server that wants a token says where
    // its metadata is.
    let ping = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "ping"});
    let probe =
        web.post_json(url, &ping, &[("Accept", "application/json, text/event-stream")]).await.map_err(refused)?;
    let challenge = probe.www_authenticate.filter(|_| probe.status == 401);
    // The challenge's URL was given for this very server: its document
    // names the server.
    let mut urls: Vec<MetadataUrl> = challenge
        .as_deref()
        .and_then(|h| challenge_param(h, "resource_metadata"))
        .map(|u| MetadataUrl { url: u, names: vec![canonical_resource(url)] })
        .into_iter()
        .collect();
    urls.extend(resource_metadata_urls(url));
    let plain: Vec<String> = urls.iter().map(|u| u.url.clone()).collect();
    let (doc, at) = first_json(web, &plain, "protected resource metadata").await?;
    let names = urls.iter().find(|u| u.url == at).map(|u| u.names.as_slice()).unwrap_or_default();
    let resource = check_resource(&doc, url, names)?;
    let (doc, _) = first_json(web, &server_metadata_urls(&resource.issuer), "authorization server metadata").await?;
    let server = check_server(&doc, &resource.issuer)?;
    let challenged_scope = challenge.as_deref().and_then(|h| challenge_param(h, "scope"));
    Ok(Discovered { resource, server, challenged_scope })
}

/// The first of `urls` that answers 200 with a JSON object.
async fn first_json(web: &Web<'_>, urls: &[String], what: &str) -> Result<(Value, String), AuthError> {
    let mut tried = Vec::new();
    for url in urls {
        match web.get(url).await {
            Ok(r) if r.status == 200 => match r.json(what) {
                Ok(doc) => return Ok((doc, url.clone())),
                Err(e) => tried.push(format!("{url}: {e}")),
            },
            Ok(r) => tried.push(format!("{url}: HTTP {}", r.status)),
            Err(e) => tried.push(e),
        }
    }
    Err(AuthError::Refused(format!("no {what} found ({})", tried.join("; "))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_uris_and_well_known_places() {
        assert_eq!(canonical_resource("HTTP://127.0.0.1:8/MCP"), "http://127.0.0.1:8/MCP");
        assert_eq!(canonical_resource("https://Mcp.Example.com/"), "https://mcp.example.com");
        let urls = resource_metadata_urls("http://127.0.0.1:8/mcp");
        let at: Vec<&str> = urls.iter().map(|u| u.url.as_str()).collect();
        assert_eq!(
            at,
            [
                "http://127.0.0.1:8/.well-known/oauth-protected-resource/mcp",
                "http://127.0.0.1:8/.well-known/oauth-protected-resource"
            ]
        );
        // With the server's path, the document names the server; at the
        // root, the origin (or the server itself).
        assert_eq!(urls[0].names, ["http://127.0.0.1:8/mcp"]);
        assert_eq!(urls[1].names, ["http://127.0.0.1:8", "http://127.0.0.1:8/mcp"]);
        let root = resource_metadata_urls("http://127.0.0.1:8/");
        assert_eq!((root.len(), root[0].names.as_slice()), (1, &["http://127.0.0.1:8".to_string()][..]));
        assert_eq!(
            server_metadata_urls("https://as.example/tenant"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant",
                "https://as.example/.well-known/openid-configuration/tenant",
                "https://as.example/tenant/.well-known/openid-configuration"
            ]
        );
        assert_eq!(server_metadata_urls("https://as.example").len(), 2);
    }

    #[test]
    fn the_challenge_names_its_metadata_and_scope() {
        let h = r#"Bearer error="invalid_token", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", scope="a b""#;
        assert_eq!(
            challenge_param(h, "resource_metadata").as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(challenge_param(h, "scope").as_deref(), Some("a b"));
        assert_eq!(challenge_param("Bearer realm=x", "realm").as_deref(), Some("x"));
        assert_eq!(challenge_param("Basic realm=x", "realm"), None);
        assert_eq!(challenge_param("Bearer", "scope"), None);
    }

    #[test]
    fn a_resource_document_for_another_server_is_refused() {
        let server = "http://127.0.0.1:8/mcp";
        let own = |s: &str| vec![canonical_resource(s)];
        let doc = json!({"resource": "http://127.0.0.1:8/mcp", "authorization_servers": ["http://127.0.0.1:9"]});
        let r = check_resource(&doc, server, &own(server)).unwrap();
        assert_eq!((r.issuer.as_str(), r.resource.as_str()), ("http://127.0.0.1:9", server));
        let e = check_resource(&doc, "http://127.0.0.1:8/other", &own("http://127.0.0.1:8/other")).unwrap_err();
        assert!(matches!(e, AuthError::Metadata(ref m) if m.contains("not this server")), "{e:?}");
        let none = json!({"resource": "http://127.0.0.1:8/mcp"});
        assert!(matches!(check_resource(&none, server, &own(server)), Err(AuthError::Metadata(_))));
        // RFC 9728 §3.3: read at the root, the document names the origin:
        // accepted there (the audience is the origin), refused where the
        // URL was made for the server's own path.
        let at_root = json!({"resource": "http://127.0.0.1:8", "authorization_servers": ["http://127.0.0.1:9"]});
        let root = resource_metadata_urls(server).pop().unwrap();
        assert_eq!(check_resource(&at_root, server, &root.names).unwrap().resource, "http://127.0.0.1:8");
        assert!(check_resource(&at_root, server, &own(server)).is_err());
        // Another origin is never one of them.
        let elsewhere = json!({"resource": "http://127.0.0.1:7", "authorization_servers": ["http://127.0.0.1:9"]});
        let e = check_resource(&elsewhere, server, &root.names).unwrap_err();
        assert!(matches!(e, AuthError::Metadata(ref m) if m.contains("nor its origin")), "{e:?}");
    }

    #[test]
    fn endpoints_off_the_issuer_or_no_s256_are_refused() {
        let good = json!({"issuer": "http://127.0.0.1:9", "authorization_endpoint": "http://127.0.0.1:9/authorize",
                          "token_endpoint": "http://127.0.0.1:9/token", "code_challenge_methods_supported": ["S256"]});
        let s = check_server(&good, "http://127.0.0.1:9").unwrap();
        assert_eq!((s.token_endpoint.as_str(), s.registration_endpoint), ("http://127.0.0.1:9/token", None));
        let mut elsewhere = good.clone();
        elsewhere["token_endpoint"] = json!("http://127.0.0.1:10/token");
        let e = check_server(&elsewhere, "http://127.0.0.1:9").unwrap_err();
        assert!(
            matches!(e, AuthError::Metadata(ref m) if m.contains("token_endpoint") && m.contains("not on its issuer"))
        );
        let mut other_issuer = good.clone();
        other_issuer["issuer"] = json!("http://127.0.0.1:11");
        assert!(matches!(check_server(&other_issuer, "http://127.0.0.1:9"), Err(AuthError::Metadata(_))));
        let mut plain = good.clone();
        plain["code_challenge_methods_supported"] = json!(["plain"]);
        assert!(
            matches!(check_server(&plain, "http://127.0.0.1:9"), Err(AuthError::Metadata(ref m)) if m.contains("S256"))
        );
    }
}
