//! The plan field: an MCP provider over Streamable HTTP declares
//! `"auth": {"oauth": {"client_id"?: "...", "scopes"?: ["..."]}}`.

use serde_json::Value;

use crate::observe::ConfigError;

/// Bounds on what a plan may say (a client id, a scope, how many scopes).
const CLIENT_ID_CHARS_MAX: usize = 512;
const SCOPE_CHARS_MAX: usize = 256;
const SCOPES_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthConfig {
    /// A client registered beforehand; `None`: dynamic client registration.
    pub client_id: Option<String>,
    /// The scopes to ask for; empty: what the server's challenge or its
    /// metadata names.
    pub scopes: Vec<String>,
}

impl OAuthConfig {
    /// Parse `auth` (paths relative to it: `oauth.scopes[1]`).
    pub fn from_json(auth: &Value) -> Result<OAuthConfig, ConfigError> {
        let obj = auth.as_object().ok_or_else(|| ConfigError::new("", "must be {\"oauth\": {...}}"))?;
        if let Some(k) = obj.keys().find(|k| k.as_str() != "oauth") {
            return Err(ConfigError::new(k.as_str(), "unknown field in auth (the one scheme is `oauth`)"));
        }
        let oauth = obj.get("oauth").ok_or_else(|| ConfigError::new("", "needs `oauth`"))?;
        let o = oauth.as_object().ok_or_else(|| ConfigError::new("oauth", "must be an object"))?;
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "client_id" | "scopes")) {
            return Err(ConfigError::new(format!("oauth.{k}"), "unknown field in oauth (client_id, scopes)"));
        }
        let client_id = match o.get("client_id") {
            None => None,
            Some(Value::String(s)) if token_like(s, CLIENT_ID_CHARS_MAX) => Some(s.clone()),
            Some(_) => {
                return Err(ConfigError::new(
                    "oauth.client_id",
                    format!("must be a non-empty string of visible ASCII, at most {CLIENT_ID_CHARS_MAX} characters"),
                ))
            }
        };
        let mut scopes = Vec::new();
        match o.get("scopes") {
            None => {}
            Some(Value::Array(list)) if list.len() <= SCOPES_MAX => {
                for (i, s) in list.iter().enumerate() {
                    // RFC 6749 §3.3: scope tokens are visible ASCII but `"` and `\`.
                    match s.as_str() {
                        Some(s) if token_like(s, SCOPE_CHARS_MAX) && !s.contains(['"', '\\']) => {
                            scopes.push(s.to_string())
                        }
                        _ => {
                            return Err(ConfigError::new(
                                format!("oauth.scopes[{i}]"),
                                "a scope is visible ASCII without spaces, quotes or backslashes",
                            ))
                        }
                    }
                }
            }
            Some(_) => {
                return Err(ConfigError::new("oauth.scopes", format!("must be a list of at most {SCOPES_MAX} scopes")))
            }
        }
        Ok(OAuthConfig { client_id, scopes })
    }
}

fn token_like(s: &str, chars_max: usize) -> bool {
    !s.is_empty() && s.len() <= chars_max && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_plan_field_and_its_places() {
        let c = OAuthConfig::from_json(&json!({"oauth": {"client_id": "abc", "scopes": ["mcp:tools"]}})).unwrap();
        assert_eq!((c.client_id.as_deref(), c.scopes.as_slice()), (Some("abc"), &["mcp:tools".to_string()][..]));
        assert_eq!(OAuthConfig::from_json(&json!({"oauth": {}})).unwrap(), OAuthConfig::default());
        let place = |v: Value| OAuthConfig::from_json(&v).unwrap_err().path;
        assert_eq!(place(json!({"basic": {}})), "basic");
        assert_eq!(place(json!({"oauth": {"secret": "x"}})), "oauth.secret");
        assert_eq!(place(json!({"oauth": {"client_id": ""}})), "oauth.client_id");
        assert_eq!(place(json!({"oauth": {"scopes": ["a", "b c"]}})), "oauth.scopes[1]");
        assert_eq!(place(json!({"oauth": {"scopes": "a"}})), "oauth.scopes");
        assert_eq!(place(json!({"oauth": 1})), "oauth");
        assert_eq!(place(json!([])), "");
    }
}
