//! The plan field: an MCP provider over Streamable HTTP declares
//! `"auth": {"oauth": {"client_id"?: "...", "client_secret"?: {"env":
//! NAME} | {"file": PATH}, "scopes"?: ["..."]}}`. A client secret is never
//! in the plan: the plan names where a person keeps it (an environment
//! variable of `engine login`, or a file), and `engine login` reads it and
//! keeps it beside the tokens (the 0600 token file), so a run needs
//! neither.

use std::path::PathBuf;

use serde_json::Value;

use crate::observe::ConfigError;

/// Bounds on what a plan may say (a client id, a scope, how many scopes).
const CLIENT_ID_CHARS_MAX: usize = 512;
const SCOPE_CHARS_MAX: usize = 256;
const SCOPES_MAX: usize = 64;
/// Bound on a client secret as read (a longer one is refused, not cut).
const SECRET_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthConfig {
    /// A client registered beforehand; `None`: dynamic client registration.
    pub client_id: Option<String>,
    /// Where the pre-registered client's secret is (a confidential client).
    pub client_secret: Option<SecretSource>,
    /// The scopes to ask for; empty: what the server's challenge or its
    /// metadata names.
    pub scopes: Vec<String>,
}

/// Where a client secret is kept: never in the plan itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// An environment variable of `engine login`.
    Env(String),
    /// A file (relative to the workspace); its first line.
    File(PathBuf),
}

impl SecretSource {
    fn from_json(v: &Value) -> Result<SecretSource, ConfigError> {
        let place = "oauth.client_secret";
        let shape =
            || ConfigError::new(place, "must be {\"env\": NAME} or {\"file\": PATH}: a secret is never in the plan");
        let obj = v.as_object().filter(|o| o.len() == 1).ok_or_else(shape)?;
        match (obj.get("env"), obj.get("file")) {
            (Some(Value::String(name)), None) if env_name(name) => Ok(SecretSource::Env(name.clone())),
            (Some(_), None) => {
                Err(ConfigError::new(format!("{place}.env"), "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)"))
            }
            (None, Some(Value::String(p))) if !p.is_empty() => Ok(SecretSource::File(PathBuf::from(p))),
            (None, Some(_)) => Err(ConfigError::new(format!("{place}.file"), "must be a path")),
            _ => Err(shape()),
        }
    }

    /// Where it is, in words (never the secret).
    pub fn words(&self) -> String {
        match self {
            SecretSource::Env(name) => format!("environment variable {name}"),
            SecretSource::File(p) => format!("file {}", p.display()),
        }
    }

    /// The secret itself: the variable's value, or the file's first line;
    /// visible ASCII only, at most `SECRET_BYTES_MAX` bytes.
    pub fn read(&self) -> Result<String, String> {
        let text = match self {
            SecretSource::Env(name) => std::env::var(name).map_err(|_| format!("{} is not set", self.words()))?,
            SecretSource::File(p) => {
                let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", self.words()))?;
                if meta.len() > SECRET_BYTES_MAX as u64 + 2 {
                    return Err(format!("{} is over {SECRET_BYTES_MAX} bytes", self.words()));
                }
                let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", self.words()))?;
                text.lines().next().unwrap_or("").to_string()
            }
        };
        if text.is_empty() || text.len() > SECRET_BYTES_MAX || !text.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(format!(
                "the client secret in {} is not 1 to {SECRET_BYTES_MAX} visible ASCII characters",
                self.words()
            ));
        }
        Ok(text)
    }
}

fn env_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c == b'_' || c.is_ascii_alphabetic()) && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
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
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "client_id" | "client_secret" | "scopes")) {
            return Err(ConfigError::new(
                format!("oauth.{k}"),
                "unknown field in oauth (client_id, client_secret, scopes)",
            ));
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
        let client_secret = o.get("client_secret").map(SecretSource::from_json).transpose()?;
        if client_secret.is_some() && client_id.is_none() {
            return Err(ConfigError::new(
                "oauth.client_secret",
                "a client secret belongs to a pre-registered client: give its client_id too",
            ));
        }
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
        Ok(OAuthConfig { client_id, client_secret, scopes })
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

    #[test]
    fn a_client_secret_is_named_never_given() {
        let c = OAuthConfig::from_json(&json!({"oauth": {"client_id": "a", "client_secret": {"env": "MY_SECRET"}}}));
        assert_eq!(c.unwrap().client_secret, Some(SecretSource::Env("MY_SECRET".into())));
        let c = OAuthConfig::from_json(&json!({"oauth": {"client_id": "a", "client_secret": {"file": "s.txt"}}}));
        assert_eq!(c.unwrap().client_secret, Some(SecretSource::File("s.txt".into())));
        let place = |v: Value| OAuthConfig::from_json(&v).unwrap_err().path;
        assert_eq!(place(json!({"oauth": {"client_id": "a", "client_secret": "hunter2"}})), "oauth.client_secret");
        assert_eq!(
            place(json!({"oauth": {"client_id": "a", "client_secret": {"env": "1X"}}})),
            "oauth.client_secret.env"
        );
        assert_eq!(
            place(json!({"oauth": {"client_id": "a", "client_secret": {"env": "A", "file": "b"}}})),
            "oauth.client_secret"
        );
        assert_eq!(place(json!({"oauth": {"client_secret": {"env": "A"}}})), "oauth.client_secret");
        // Read where it is kept; a file's first line; never control characters.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("secret");
        std::fs::write(&f, "s3cret-value\n").unwrap();
        assert_eq!(SecretSource::File(f.clone()).read().unwrap(), "s3cret-value");
        std::fs::write(&f, "bad secret\n").unwrap();
        assert!(SecretSource::File(f).read().unwrap_err().contains("visible ASCII"));
        let missing = SecretSource::Env("ENGINE_TEST_SURELY_UNSET_SECRET".into()).read().unwrap_err();
        assert!(missing.contains("is not set") && !missing.contains("s3cret"), "{missing}");
    }
}
