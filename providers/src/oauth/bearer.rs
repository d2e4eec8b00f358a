//! A run's token source for one MCP server: the kept access token while it
//! lives, a refreshed one when it expired or the server refused it. It
//! never asks a person for anything: without a usable token it says so
//! (`AuthError::Required`) and the request is not sent.

use std::sync::Arc;

use super::grant;
use super::metadata::canonical_resource;
use super::store::{TokenRecord, TokenStore};
use super::web::Web;
use super::{now_s, AuthError, OAuthConfig};
use crate::tls::Tls;

/// An access token this close to its expiry is refreshed first (or half
/// its lifetime, for a shorter-lived one).
const EXPIRY_MARGIN_S: u64 = 30;

pub struct Bearer {
    resource: String,
    config: OAuthConfig,
    /// The user's token folder, or why there is none.
    store: Result<TokenStore, String>,
    hosts: Vec<String>,
    tls: Arc<Tls>,
    kept: tokio::sync::Mutex<Option<TokenRecord>>,
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer").field("resource", &self.resource).finish_non_exhaustive()
    }
}

impl Bearer {
    pub fn new(
        url: &str,
        config: OAuthConfig,
        store: Result<TokenStore, String>,
        hosts: Vec<String>,
        tls: Arc<Tls>,
    ) -> Bearer {
        Bearer { resource: canonical_resource(url), config, store, hosts, tls, kept: Default::default() }
    }

    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The access token to send now.
    pub async fn token(&self) -> Result<String, AuthError> {
        let mut kept = self.kept.lock().await;
        let record = match kept.take() {
            Some(r) => r,
            None => self.load()?,
        };
        if !expired(&record) {
            let token = record.access_token.clone();
            *kept = Some(record);
            return Ok(token);
        }
        // A refused refresh keeps the record as it was (the next request
        // tries again, or a person logs in).
        let refreshed = self.refresh(&record).await;
        let fresh = match refreshed {
            Ok(fresh) => fresh,
            Err(e) => {
                *kept = Some(record);
                return Err(e);
            }
        };
        let token = fresh.access_token.clone();
        *kept = Some(fresh);
        Ok(token)
    }

    /// The server answered 401 to `sent`: refresh once (unless another
    /// request already did) and give the token to try again with.
    pub async fn refused(&self, sent: &str) -> Result<String, AuthError> {
        let mut kept = self.kept.lock().await;
        let record = match kept.take() {
            Some(r) => r,
            None => self.load()?,
        };
        if record.access_token != sent {
            let token = record.access_token.clone();
            *kept = Some(record);
            return Ok(token);
        }
        let fresh = self.refresh(&record).await?;
        let token = fresh.access_token.clone();
        *kept = Some(fresh);
        Ok(token)
    }

    /// The scope the kept token was granted (`None`: not said, or no token).
    pub fn granted_scope(&self) -> Option<String> {
        self.kept.try_lock().ok()?.as_ref().and_then(|r| r.scope.clone())
    }

    /// The token in hand, for a notification (never refreshed for one).
    pub fn current(&self) -> Option<String> {
        self.kept.try_lock().ok()?.as_ref().map(|r| r.access_token.clone())
    }

    fn load(&self) -> Result<TokenRecord, AuthError> {
        let store = self.store.as_ref().map_err(|e| AuthError::Required(e.clone()))?;
        let record = store.load(&self.resource).map_err(AuthError::Required)?;
        let record =
            record.ok_or_else(|| AuthError::Required(format!("no OAuth token is kept for {}", self.resource)))?;
        match &self.config.client_id {
            Some(id) if *id != record.client_id => Err(AuthError::Required(format!(
                "the token kept for {} was granted to client `{}`, not the plan's `{id}`",
                self.resource, record.client_id
            ))),
            _ => Ok(record),
        }
    }

    /// Refresh `record` (another engine may have done it already: the file
    /// is read first), keep the answer, the rotated refresh token included,
    /// before its access token is used.
    async fn refresh(&self, record: &TokenRecord) -> Result<TokenRecord, AuthError> {
        let store = self.store.as_ref().map_err(|e| AuthError::Required(e.clone()))?;
        if let Ok(Some(newer)) = store.load(&self.resource) {
            if newer.access_token != record.access_token && !expired(&newer) {
                return Ok(newer);
            }
        }
        let Some(refresh_token) = &record.refresh_token else {
            return Err(AuthError::Required(format!(
                "the access token for {} expired and no refresh token is kept",
                self.resource
            )));
        };
        let web = Web { hosts: &self.hosts, tls: &self.tls };
        let client = record.client();
        let granted = grant::refresh(&web, &record.token_endpoint, &client, refresh_token, record.audience())
            .await
            .map_err(|e| AuthError::Required(format!("refreshing the token for {} failed: {e}", self.resource)))?;
        let fresh = TokenRecord {
            access_token: granted.access_token,
            refresh_token: granted.refresh_token.or_else(|| record.refresh_token.clone()),
            expires_at: granted.expires_in.map(|s| now_s().saturating_add(s)),
            issued_at: now_s(),
            scope: granted.scope.or_else(|| record.scope.clone()),
            ..record.clone()
        };
        store.save(&fresh).map_err(|e| AuthError::Required(format!("the refreshed tokens could not be kept: {e}")))?;
        Ok(fresh)
    }
}

fn expired(record: &TokenRecord) -> bool {
    record.expires_at.is_some_and(|at| {
        let margin = EXPIRY_MARGIN_S.min(at.saturating_sub(record.issued_at) / 2);
        now_s().saturating_add(margin) >= at
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(issued_at: u64, expires_at: Option<u64>) -> TokenRecord {
        TokenRecord {
            resource: "r".into(),
            audience: None,
            issuer: "i".into(),
            token_endpoint: "t".into(),
            client_id: "c".into(),
            client_secret: None,
            token_auth: None,
            scope: None,
            access_token: "a".into(),
            refresh_token: None,
            expires_at,
            issued_at,
        }
    }

    #[test]
    fn expiry_keeps_a_margin_of_thirty_seconds_or_half_the_lifetime() {
        let now = now_s();
        assert!(!expired(&record(now, None)), "no stated lifetime: used until refused");
        assert!(!expired(&record(now, Some(now + 3600))));
        assert!(expired(&record(now - 3600, Some(now + 20))), "within 30 s of its end");
        assert!(!expired(&record(now, Some(now + 10))), "a 10 s token: refreshed after 5 s");
        assert!(expired(&record(now - 6, Some(now + 4))));
        assert!(expired(&record(now - 10, Some(now))));
    }
}
