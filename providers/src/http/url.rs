//! URLs the HTTP client accepts: `http://` or `https://`, no user info, no
//! fragment, and a host that is loopback or listed in the provider's
//! `hosts`.

use std::net::IpAddr;

/// Where to connect and what to put on the request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `https://`: TLS over the connection.
    pub tls: bool,
    /// Host without brackets (`::1`, `127.0.0.1`, `localhost`).
    pub host: String,
    pub port: u16,
    /// `host[:port]` as written in the URL, for the Host header.
    pub authority: String,
    /// Path plus query, at least `/`.
    pub path: String,
    /// Host is loopback by name or address (so resolution must stay loopback).
    pub loopback: bool,
}

impl Target {
    pub fn parse(url: &str, allowed_hosts: &[String]) -> Result<Target, String> {
        if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err("URL contains whitespace or control characters".into());
        }
        let (tls, rest) = match scheme(url) {
            Some(found) => found,
            None => return Err(format!("only http:// and https:// URLs are supported, got `{url}`")),
        };
        if url.contains('#') {
            return Err("URL must not contain a fragment".into());
        }
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') {
            return Err("URL must not contain user info".into());
        }
        let (host, port) = split_authority(authority)?;
        let port = match port {
            None if tls => 443,
            None => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(format!("bad port in URL authority `{authority}`")),
            },
        };
        if host.is_empty() {
            return Err("URL has no host".into());
        }
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false);
        let allowed = allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(host));
        if !loopback && !allowed {
            return Err(format!("host `{host}` is not loopback (127.0.0.0/8, ::1, localhost) and not an allowed host"));
        }
        Ok(Target { tls, host: host.to_string(), port, authority: authority.to_string(), path, loopback })
    }

    /// `scheme://authority` (for messages).
    pub fn origin(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.authority)
    }
}

/// `(tls, rest after "scheme://")`, case-insensitive.
fn scheme(url: &str) -> Option<(bool, &str)> {
    for (prefix, tls) in [("http://", false), ("https://", true)] {
        if url.get(..prefix.len()).is_some_and(|s| s.eq_ignore_ascii_case(prefix)) {
            return url.get(prefix.len()..).map(|rest| (tls, rest));
        }
    }
    None
}

fn split_authority(authority: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("unclosed [ in URL host")?;
        return match after {
            "" => Ok((h, None)),
            _ => Ok((h, Some(after.strip_prefix(':').ok_or(format!("bad URL authority `{authority}`"))?))),
        };
    }
    Ok(match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    })
}

/// Percent-encode everything but RFC 3986 unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parsing() {
        let t = Target::parse("http://[::1]:8080/a?b=1", &[]).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str(), t.authority.as_str(), t.tls),
            ("::1", 8080, "/a?b=1", "[::1]:8080", false)
        );
        let t = Target::parse("http://localhost?q", &[]).unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/?q"));
        let t = Target::parse("HTTPS://127.0.0.1/x", &[]).unwrap();
        assert_eq!((t.tls, t.port, t.origin().as_str()), (true, 443, "https://127.0.0.1"));
        assert!(Target::parse("http://127.9.9.9/", &[]).is_ok());
        assert!(Target::parse("http://[::1]x/", &[]).is_err());
        assert!(Target::parse("http://svc.internal/", &[]).is_err());
        assert!(Target::parse("https://svc.internal/", &[]).is_err());
        assert!(Target::parse("https://svc.internal/", &["svc.internal".into()]).is_ok());
        assert!(Target::parse("ftp://localhost/", &[]).is_err());
        assert!(Target::parse("http:/", &[]).is_err());
    }

    #[test]
    fn encoding() {
        assert_eq!(percent_encode("op 1/x~"), "op%201%2Fx~");
    }
}
