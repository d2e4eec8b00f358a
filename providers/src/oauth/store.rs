//! The token file: one per protected resource, `<state>/engine/oauth/
//! <key>.json`, mode 0600 in a folder of mode 0700, where `<state>` is
//! `$XDG_STATE_HOME` or `~/.local/state` (the stores' own root's parent,
//! so the sandbox that hides the stores hides this folder too). Written
//! whole to a temporary file and renamed, so a crash leaves the old
//! tokens or the new ones, never half of either.
//!
//! Never in a workspace, the ledger or a log: the engine reads it only to
//! put the access token on a request's `Authorization` header.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::client::{Client, TokenAuth};

/// Bound on a token file read back (tokens are small; a huge file is not ours).
const FILE_BYTES_MAX: u64 = 64 * 1024;

/// What is kept for one resource.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The MCP server's canonical URI: what the record is kept under, and
    /// the `resource` of every token request unless `audience` says more.
    pub resource: String,
    /// The resource the tokens are for when it is not the server's own
    /// URI: a resource at the server's root that covers it (RFC 9728).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    pub issuer: String,
    /// Checked to be on the issuer when it was read from its metadata.
    pub token_endpoint: String,
    pub client_id: String,
    /// A confidential client's secret (a pre-registered one, read at login
    /// from where the plan names it; or the one registration gave) and how
    /// the token endpoint takes it. Kept here, beside the tokens, and
    /// nowhere else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_auth: Option<TokenAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds after which the access token is not used; `None`: the
    /// server gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Unix seconds when the access token was granted.
    #[serde(default)]
    pub issued_at: u64,
}

impl TokenRecord {
    /// The client the tokens were granted to, as the token endpoint knows it.
    pub fn client(&self) -> Client {
        let secret = match (&self.client_secret, self.token_auth) {
            (Some(s), Some(auth)) => Some((s.clone(), auth)),
            _ => None,
        };
        Client { id: self.client_id.clone(), secret }
    }

    /// The `resource` its token requests name.
    pub fn audience(&self) -> &str {
        self.audience.as_deref().unwrap_or(&self.resource)
    }
}

/// Never the tokens themselves, whatever prints it.
impl std::fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRecord")
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// The folder of token files.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

impl TokenStore {
    pub fn at(dir: impl Into<PathBuf>) -> TokenStore {
        TokenStore { dir: dir.into() }
    }

    /// `$XDG_STATE_HOME/engine/oauth`, else `~/.local/state/engine/oauth`
    /// (a relative `XDG_STATE_HOME` is ignored, as the XDG spec says).
    pub fn default_dir() -> Option<PathBuf> {
        let absolute = |v: &str| std::env::var_os(v).map(PathBuf::from).filter(|p| p.is_absolute());
        let base = absolute("XDG_STATE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".local").join("state")))?;
        Some(base.join("engine").join("oauth"))
    }

    /// The user's token folder. Without a state folder (no absolute
    /// `XDG_STATE_HOME` or `HOME`) there is no place for tokens at all.
    pub fn user() -> Result<TokenStore, String> {
        TokenStore::default_dir()
            .map(TokenStore::at)
            .ok_or_else(|| "no place for OAuth tokens: neither XDG_STATE_HOME nor HOME is an absolute path".into())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of one resource: a digest of its URI, so no URI spells a path.
    pub fn path_of(&self, resource: &str) -> PathBuf {
        let digest = ring::digest::digest(&ring::digest::SHA256, resource.as_bytes());
        let hex: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.json"))
    }

    /// The kept tokens of `resource`, if any. A file others may read, or
    /// one that is not ours, is refused rather than used.
    pub fn load(&self, resource: &str) -> Result<Option<TokenRecord>, String> {
        let path = self.path_of(resource);
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("token file {}: {e}", path.display())),
        };
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if !meta.is_file() || meta.mode() & 0o077 != 0 || meta.uid() != me || meta.len() > FILE_BYTES_MAX {
            return Err(format!(
                "token file {} is not a private file of this user (mode {:o}): remove it and log in again",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        let text = fs::read_to_string(&path).map_err(|e| format!("token file {}: {e}", path.display()))?;
        let record: TokenRecord = serde_json::from_str(&text)
            .map_err(|e| format!("token file {} is not a token record: {e}", path.display()))?;
        Ok((record.resource == resource).then_some(record))
    }

    /// Keep `record` (atomically: a 0600 temporary file renamed over the old).
    pub fn save(&self, record: &TokenRecord) -> Result<PathBuf, String> {
        let fail = |what: &str, e: std::io::Error| format!("keeping the tokens in {}: {what}: {e}", self.dir.display());
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir).map_err(|e| fail("create folder", e))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700)).map_err(|e| fail("folder mode", e))?;
        let path = self.path_of(&record.resource);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| fail("create file", e))?;
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| format!("token record: {e}"))?;
        f.write_all(&bytes).and_then(|()| f.sync_all()).map_err(|e| fail("write", e))?;
        fs::rename(&tmp, &path).map_err(|e| fail("rename", e))?;
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> TokenRecord {
        TokenRecord {
            resource: "http://127.0.0.1:1/mcp".into(),
            audience: None,
            issuer: "http://127.0.0.1:2".into(),
            token_endpoint: "http://127.0.0.1:2/token".into(),
            client_id: "c".into(),
            client_secret: Some("SECRET-CLIENT".into()),
            token_auth: Some(TokenAuth::ClientSecretBasic),
            scope: None,
            access_token: "SECRET-ACCESS".into(),
            refresh_token: Some("SECRET-REFRESH".into()),
            expires_at: Some(1),
            issued_at: 0,
        }
    }

    #[test]
    fn kept_private_read_back_and_never_debug_printed() {
        let tmp = tempfile::tempdir().unwrap();
        let store = TokenStore::at(tmp.path().join("engine/oauth"));
        assert_eq!(store.load("http://127.0.0.1:1/mcp").unwrap(), None);
        let path = store.save(&record()).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(store.dir()).unwrap().mode() & 0o777, 0o700);
        assert_eq!(store.load("http://127.0.0.1:1/mcp").unwrap(), Some(record()));
        assert_eq!(store.load("http://127.0.0.1:1/other").unwrap(), None);
        let shown = format!("{:?}", record());
        assert!(!shown.contains("SECRET"), "{shown}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let refused = store.load("http://127.0.0.1:1/mcp").unwrap_err();
        assert!(refused.contains("not a private file"), "{refused}");
    }
}
