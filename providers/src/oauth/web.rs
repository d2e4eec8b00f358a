//! The few HTTP requests OAuth needs (metadata GETs, token and registration
//! POSTs, the unauthenticated probe), on the HTTP provider's own wire: the
//! same host policy (loopback or the provider's `hosts`), the same rustls
//! and `ca_file`. Each is bounded in time and size.

use std::time::Duration;

use serde_json::Value;

use crate::capture::Bounded;
use crate::http::url::{percent_encode, Target};
use crate::http::wire::{self, Track};
use crate::tls::Tls;

/// Bound on one OAuth request, connection to last byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one answer's body (metadata and token answers are small).
const BODY_BYTES_MAX: usize = 256 * 1024;

/// Where requests may go and how TLS is verified: the provider's.
#[derive(Clone)]
pub struct Web<'a> {
    pub hosts: &'a [String],
    pub tls: &'a Tls,
}

/// A complete answer.
pub struct Reply {
    pub status: u16,
    pub www_authenticate: Option<String>,
    pub body: String,
}

impl Reply {
    /// The body as a JSON object, or why not.
    pub fn json(&self, what: &str) -> Result<Value, String> {
        match serde_json::from_str::<Value>(&self.body) {
            Ok(v) if v.is_object() => Ok(v),
            _ => Err(format!("{what}: HTTP {} with a body that is not a JSON object", self.status)),
        }
    }
}

impl Web<'_> {
    pub async fn get(&self, url: &str) -> Result<Reply, String> {
        self.send("GET", url, &[("Accept", "application/json")], b"").await
    }

    /// `application/x-www-form-urlencoded` (token requests), with `extra`
    /// headers (a client's `Authorization: Basic`).
    pub async fn post_form(&self, url: &str, fields: &[(&str, &str)], extra: &[(&str, &str)]) -> Result<Reply, String> {
        let body = form(fields);
        let mut headers = vec![("Accept", "application/json"), ("Content-Type", "application/x-www-form-urlencoded")];
        headers.extend_from_slice(extra);
        self.send("POST", url, &headers, body.as_bytes()).await
    }

    pub async fn post_json(&self, url: &str, body: &Value, extra: &[(&str, &str)]) -> Result<Reply, String> {
        let mut headers = vec![("Content-Type", "application/json")];
        headers.extend_from_slice(extra);
        self.send("POST", url, &headers, body.to_string().as_bytes()).await
    }

    async fn send(&self, method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Reply, String> {
        let target = Target::parse(url, self.hosts).map_err(|m| format!("{url}: {m}"))?;
        if !plain_allowed(&target) {
            return Err(format!("{url}: OAuth goes over https:// (plain http:// only to loopback)"));
        }
        let mut head = format!("{method} {} HTTP/1.1\r\nHost: {}\r\n", target.path, target.authority);
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        let exchange = async {
            let mut track = Track::default();
            let mut conn = wire::send(&target, self.tls, &bytes, &mut track).await?;
            let head = conn.head(&mut track).await?;
            let mut kept = Bounded::new(BODY_BYTES_MAX);
            conn.body(&head, &mut kept).await?;
            Ok::<_, wire::Failure>((head, kept.finish()))
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Err(_) => Err(format!("{method} {url}: no answer within {REQUEST_TIMEOUT:?}")),
            Ok(Err(f)) => Err(format!("{method} {url}: {}", f.message())),
            Ok(Ok((_, body))) if body.truncated => Err(format!("{method} {url}: answer over {BODY_BYTES_MAX} bytes")),
            Ok(Ok((head, body))) => Ok(Reply {
                status: head.status,
                www_authenticate: head.header("www-authenticate").map(str::to_string),
                body: body.text,
            }),
        }
    }
}

/// Tokens, codes and verifiers cross the network only under TLS (OAuth 2.1
/// §1.5); loopback is the machine itself.
pub fn plain_allowed(target: &Target) -> bool {
    target.tls || target.loopback
}

/// `k=v&k=v`, each percent-encoded.
pub fn form(fields: &[(&str, &str)]) -> String {
    fields.iter().map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v))).collect::<Vec<_>>().join("&")
}

/// The value of `key` in a query string or form body, percent-decoded.
pub fn query_value(query: &str, key: &str) -> Option<String> {
    query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| decode(k) == key).map(|(_, v)| decode(v))
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_plain_http_but_to_loopback() {
        let tls = Tls::new(None);
        let hosts = vec!["as.example".to_string()];
        let web = Web { hosts: &hosts, tls: &tls };
        let e = web.get("http://as.example/.well-known/oauth-authorization-server").await.err().unwrap();
        assert!(e.contains("https://"), "{e}");
    }

    #[test]
    fn forms_and_queries_round_trip() {
        let body = form(&[("redirect_uri", "http://127.0.0.1:9/callback"), ("scope", "a b")]);
        assert_eq!(body, "redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcallback&scope=a%20b");
        assert_eq!(query_value(&body, "redirect_uri").as_deref(), Some("http://127.0.0.1:9/callback"));
        assert_eq!(query_value("code=x+y&state=%7E", "state").as_deref(), Some("~"));
        assert_eq!(query_value("code=x+y", "code").as_deref(), Some("x y"));
        assert_eq!(query_value("a=%4", "a").as_deref(), Some("%4"));
        assert_eq!(query_value("a=1", "b"), None);
    }
}
