//! The client as the token endpoint knows it: its id, and how it proves it
//! is that client (RFC 6749 §2.3.1, OAuth 2.1 §2.4): a public client
//! proves nothing (its PKCE verifier binds the code to it); a confidential
//! one sends its secret, in an HTTP Basic header (`client_secret_basic`)
//! or in the form (`client_secret_post`), as the authorization server's
//! metadata offers (`token_endpoint_auth_methods_supported`; absent: Basic,
//! RFC 8414 §2). The secret never appears in a message nor in `Debug`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::http::url::percent_encode;

/// How a confidential client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuth {
    ClientSecretBasic,
    ClientSecretPost,
}

impl TokenAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenAuth::ClientSecretBasic => "client_secret_basic",
            TokenAuth::ClientSecretPost => "client_secret_post",
        }
    }

    fn named(name: &str) -> Option<TokenAuth> {
        match name {
            "client_secret_basic" => Some(TokenAuth::ClientSecretBasic),
            "client_secret_post" => Some(TokenAuth::ClientSecretPost),
            _ => None,
        }
    }
}

/// Named values a request carries (form fields, or headers).
pub type Pairs = Vec<(&'static str, String)>;

/// A client: public (`secret: None`) or confidential.
#[derive(Clone, PartialEq, Eq)]
pub struct Client {
    pub id: String,
    pub secret: Option<(String, TokenAuth)>,
}

/// Never the secret, whatever prints it.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("auth", &self.secret.as_ref().map(|(_, a)| a.as_str()))
            .finish()
    }
}

impl Client {
    pub fn public(id: &str) -> Client {
        Client { id: id.to_string(), secret: None }
    }

    /// How it authenticates, in words (`none` for a public client).
    pub fn method(&self) -> &'static str {
        self.secret.as_ref().map_or("none", |(_, a)| a.as_str())
    }

    /// What a token request carries to authenticate: form fields (the
    /// `client_id` of a public or `client_secret_post` client, the secret
    /// of the latter) and headers (`Authorization: Basic`).
    pub fn credentials(&self) -> (Pairs, Pairs) {
        match &self.secret {
            None => (vec![("client_id", self.id.clone())], Vec::new()),
            Some((secret, TokenAuth::ClientSecretPost)) => {
                (vec![("client_id", self.id.clone()), ("client_secret", secret.clone())], Vec::new())
            }
            // The id and the secret are form-encoded before they are joined
            // (RFC 6749 §2.3.1).
            Some((secret, TokenAuth::ClientSecretBasic)) => {
                let pair = format!("{}:{}", percent_encode(&self.id), percent_encode(secret));
                (Vec::new(), vec![("Authorization", format!("Basic {}", STANDARD.encode(pair)))])
            }
        }
    }
}

/// How a client with a secret authenticates, given what the authorization
/// server offers (`None`: it says nothing, so Basic, RFC 8414 §2).
pub fn method_for_secret(offered: Option<&[String]>) -> Result<TokenAuth, String> {
    let Some(offered) = offered else { return Ok(TokenAuth::ClientSecretBasic) };
    [TokenAuth::ClientSecretBasic, TokenAuth::ClientSecretPost]
        .into_iter()
        .find(|m| offered.iter().any(|o| o == m.as_str()))
        .ok_or_else(|| {
            format!(
                "the authorization server takes a client's secret neither as client_secret_basic nor as \
                 client_secret_post (it offers {})",
                offered.join(", ")
            )
        })
}

/// What a dynamic registration asks for (RFC 7591
/// `token_endpoint_auth_method`): a public client (`none`, PKCE) unless
/// the server offers only secrets.
pub fn registration_method(offered: Option<&[String]>) -> Result<&'static str, String> {
    match offered {
        Some(list) if !list.iter().any(|m| m == "none") => method_for_secret(Some(list)).map(TokenAuth::as_str),
        _ => Ok("none"),
    }
}

/// The client a registration's answer describes: its `client_id`, and its
/// secret with the method the server settled on (`asked` when it names
/// none). `Err`: an answer this client cannot use.
pub fn registered(answer: &serde_json::Value, asked: &str) -> Result<Client, String> {
    let text = |k: &str| answer.get(k).and_then(serde_json::Value::as_str);
    let id = text("client_id").filter(|c| sane(c)).ok_or("the registration gave no client_id")?;
    let method = text("token_endpoint_auth_method").unwrap_or(asked);
    if method == "none" {
        return Ok(Client::public(id));
    }
    let auth = TokenAuth::named(method).ok_or_else(|| {
        format!(
            "the registration settled on token_endpoint_auth_method `{}`, which this client does not speak",
            clip(method)
        )
    })?;
    let secret = text("client_secret").filter(|s| sane(s)).ok_or("the registration gave no usable client_secret")?;
    Ok(Client { id: id.to_string(), secret: Some((secret.to_string(), auth)) })
}

fn sane(s: &str) -> bool {
    !s.is_empty() && s.len() <= 4096 && s.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_method_follows_what_the_server_offers() {
        assert_eq!(method_for_secret(None), Ok(TokenAuth::ClientSecretBasic), "RFC 8414's default");
        assert_eq!(method_for_secret(Some(&list(&["client_secret_post"]))), Ok(TokenAuth::ClientSecretPost));
        assert_eq!(method_for_secret(Some(&list(&["none", "client_secret_basic"]))), Ok(TokenAuth::ClientSecretBasic));
        assert!(method_for_secret(Some(&list(&["private_key_jwt"]))).unwrap_err().contains("private_key_jwt"));
        assert_eq!(registration_method(None), Ok("none"));
        assert_eq!(registration_method(Some(&list(&["none", "client_secret_post"]))), Ok("none"));
        assert_eq!(registration_method(Some(&list(&["client_secret_post"]))), Ok("client_secret_post"));
    }

    #[test]
    fn credentials_by_method_and_never_a_secret_in_debug() {
        let basic = Client {
            id: "pre-registered-client".into(),
            secret: Some(("hunter2:a b".into(), TokenAuth::ClientSecretBasic)),
        };
        let (fields, headers) = basic.credentials();
        assert!(fields.is_empty());
        let encoded = headers[0].1.strip_prefix("Basic ").unwrap();
        let decoded = String::from_utf8(STANDARD.decode(encoded).unwrap()).unwrap();
        assert_eq!(decoded, "pre-registered-client:hunter2%3Aa%20b", "form-encoded, then joined");
        let post = Client { id: "c".into(), secret: Some(("x".into(), TokenAuth::ClientSecretPost)) };
        assert_eq!(post.credentials().0, vec![("client_id", "c".to_string()), ("client_secret", "x".to_string())]);
        assert_eq!(Client::public("c").credentials(), (vec![("client_id", "c".to_string())], vec![]));
        assert!(!format!("{basic:?}").contains("hunter2"), "{basic:?}");
    }

    #[test]
    fn a_registration_answer_names_its_method() {
        let basic = registered(
            &json!({"client_id": "c", "client_secret": "s", "token_endpoint_auth_method": "client_secret_basic"}),
            "none",
        );
        assert_eq!(basic.unwrap().secret, Some(("s".into(), TokenAuth::ClientSecretBasic)));
        let public = registered(&json!({"client_id": "c", "client_secret": "s"}), "none").unwrap();
        assert_eq!(public.secret, None, "a public client keeps no secret");
        let asked = registered(&json!({"client_id": "c", "client_secret": "s"}), "client_secret_post").unwrap();
        assert_eq!(asked.method(), "client_secret_post");
        assert!(registered(&json!({"client_id": "c", "token_endpoint_auth_method": "client_secret_basic"}), "none")
            .is_err());
        assert!(registered(
            &json!({"client_id": "c", "client_secret": "s", "token_endpoint_auth_method": "tls_client_auth"}),
            "none"
        )
        .is_err());
    }
}
