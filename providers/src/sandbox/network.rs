//! What a provider process may connect to, as the plan declares it
//! (`"network": {"connect": ["api.example.com:443", "127.0.0.1:*"]}`), and
//! what the kernel lets the engine enforce of it.
//!
//! Two mechanisms, neither of which filters by host:
//!
//! - **No network at all** (nothing declared): the process joins a network
//!   namespace the engine made for the run, which has no interface but a
//!   loopback of its own. No TCP, no UDP, no DNS: nothing leaves it.
//! - **Declared connections**: the process stays in the machine's network
//!   and Landlock (ABI 4, Linux 6.7) allows TCP `connect` to the declared
//!   *ports* only. `api.example.com:443` and `10.0.0.1:443` both reduce to
//!   "TCP port 443 anywhere"; a `*` port allows every TCP port. UDP (DNS
//!   included), ICMP and other protocols are not restricted by Landlock.
//!
//! The recorded [`NetStatus`] says which of these held for a process, so no
//! word claims host filtering the engine does not do.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One declared `HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// As written: a host name, an IPv4 address, `[IPv6]`, or `*`.
    pub host: String,
    pub port: Port,
}

/// A declared port: a number, or `*` (every port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Port {
    Any,
    Number(u16),
}

impl Endpoint {
    /// Parse `HOST:PORT`: host a DNS name (letters, digits, `-`, `.`, `_`),
    /// an IPv4 address, `[IPv6]` or `*`; port 1-65535 or `*`. The error
    /// says what is wrong, for `PLAN_INVALID`.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let (host, port) =
            text.rsplit_once(':').ok_or_else(|| format!("{text:?} is not HOST:PORT (for every port write HOST:*)"))?;
        let port = match port {
            "*" => Port::Any,
            p => match p.parse::<u16>() {
                Ok(n) if n > 0 && !p.starts_with('+') => Port::Number(n),
                _ => return Err(format!("{text:?}: the port must be 1-65535 or *")),
            },
        };
        if !valid_host(host) {
            return Err(format!("{text:?}: the host must be a name, an IPv4 address, [an IPv6 address] or *"));
        }
        Ok(Endpoint { host: host.to_owned(), port })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Port::Any => write!(f, "{}:*", self.host),
            Port::Number(n) => write!(f, "{}:{n}", self.host),
        }
    }
}

/// A host as a plan may write it. Bounded by the plan's own string bounds.
fn valid_host(host: &str) -> bool {
    if host == "*" {
        return true;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    host.len() <= 253 && host.split('.').all(label) && !host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// What a process may reach: nothing, or TCP connections to declared
/// endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// Nothing declared: no network.
    #[default]
    None,
    /// `connect` entries (never empty).
    Connect(Vec<Endpoint>),
}

impl Network {
    /// The declared entries, each parsed; an empty list is no network.
    pub fn connect(entries: &[String]) -> Result<Network, (usize, String)> {
        let parsed = entries
            .iter()
            .enumerate()
            .map(|(i, e)| Endpoint::parse(e).map_err(|m| (i, m)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if parsed.is_empty() { Network::None } else { Network::Connect(parsed) })
    }

    /// The TCP ports Landlock is to allow, sorted: `None` when a `*` port
    /// allows every one (Landlock then restricts no TCP connect at all).
    pub fn ports(&self) -> Option<Vec<u16>> {
        match self {
            Network::None => Some(Vec::new()),
            Network::Connect(all) => {
                let mut ports = Vec::with_capacity(all.len());
                for e in all {
                    match e.port {
                        Port::Any => return None,
                        Port::Number(n) => ports.push(n),
                    }
                }
                ports.sort_unstable();
                ports.dedup();
                Some(ports)
            }
        }
    }
}

/// How a process's network was restricted: recorded on every attempt
/// (`{"state": "enforced", "by": "namespace"}`, `{"state": "partial", "by":
/// "landlock", "tcp_connect_ports": [443]}`, `{"state": "open"}`,
/// `{"state": "unavailable", "reason": "..."}`, `{"state": "disabled"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum NetStatus {
    /// No network at all, as the plan asks: a network namespace of its
    /// own, with only a loopback.
    Enforced { by: NetBy },
    /// TCP `connect` only to these ports, anywhere (Landlock filters ports,
    /// not hosts); `bind` refused too when nothing was declared. UDP and
    /// other protocols are not restricted.
    Partial { by: NetBy, tcp_connect_ports: Vec<u16> },
    /// The plan declares a `*` port: every TCP port is allowed, and with
    /// Landlock filtering ports only, nothing is restricted.
    Open,
    /// The plan asks for a restriction this kernel or these privileges
    /// cannot make: the process has the machine's whole network.
    Unavailable { reason: String },
    /// `"sandbox": "none"`: unconfined.
    Disabled,
}

/// The mechanism that restricted a process's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetBy {
    Namespace,
    Landlock,
}

impl NetStatus {
    pub fn word(&self) -> &'static str {
        match self {
            NetStatus::Enforced { .. } => "enforced",
            NetStatus::Partial { .. } => "partial",
            NetStatus::Open => "open",
            NetStatus::Unavailable { .. } => "unavailable",
            NetStatus::Disabled => "disabled",
        }
    }
}

impl fmt::Display for NetStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetStatus::Enforced { .. } => f.write_str("none (a network namespace of its own: only a loopback)"),
            NetStatus::Partial { tcp_connect_ports, .. } if tcp_connect_ports.is_empty() => f.write_str(
                "partial (Landlock refuses every TCP connect and bind; UDP and other protocols are not restricted)",
            ),
            NetStatus::Partial { tcp_connect_ports, .. } => {
                let ports: Vec<String> = tcp_connect_ports.iter().map(u16::to_string).collect();
                write!(
                    f,
                    "partial (TCP connect to port {} on any host: Landlock filters ports, not hosts; UDP and other protocols are not restricted)",
                    ports.join(", ")
                )
            }
            NetStatus::Open => f.write_str("open (a declared * port allows every TCP port; nothing is restricted)"),
            NetStatus::Unavailable { reason } => write!(f, "unavailable ({reason}): not restricted"),
            NetStatus::Disabled => f.write_str("disabled by the plan (sandbox none)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_parse_hosts_and_ports_and_refuse_the_rest() {
        for ok in ["api.example.com:443", "127.0.0.1:*", "[::1]:8080", "*:5432", "localhost:1", "a_b.internal:65535"] {
            assert!(Endpoint::parse(ok).is_ok(), "{ok}");
        }
        let e = Endpoint::parse("api.example.com:443").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("api.example.com", Port::Number(443)));
        assert_eq!(e.to_string(), "api.example.com:443");
        for bad in [
            "api.example.com",
            "api.example.com:0",
            "api.example.com:65536",
            "api.example.com:+80",
            "api.example.com:http",
            ":443",
            "ex ample.com:443",
            "::1:80",
            "[::1:80",
            "-bad.com:80",
            "1.2.3:80",
            "http://x.com:80",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_reduce_the_declaration_and_a_star_port_opens_every_one() {
        let net = |e: &[&str]| Network::connect(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        assert_eq!(net(&[]), Network::None);
        assert_eq!(net(&[]).ports(), Some(vec![]));
        assert_eq!(net(&["b.com:443", "a.com:443", "127.0.0.1:8080"]).ports(), Some(vec![443, 8080]));
        assert_eq!(net(&["b.com:443", "127.0.0.1:*"]).ports(), None);
        let err = Network::connect(&["ok.com:1".into(), "bad".into()]).unwrap_err();
        assert_eq!(err.0, 1, "the index of the bad entry");
    }

    #[test]
    fn the_recorded_words_are_stable_and_claim_no_host_filtering() {
        let cases = [
            (NetStatus::Enforced { by: NetBy::Namespace }, json!({"state": "enforced", "by": "namespace"})),
            (
                NetStatus::Partial { by: NetBy::Landlock, tcp_connect_ports: vec![443] },
                json!({"state": "partial", "by": "landlock", "tcp_connect_ports": [443]}),
            ),
            (NetStatus::Open, json!({"state": "open"})),
            (NetStatus::Disabled, json!({"state": "disabled"})),
        ];
        for (status, expected) in cases {
            let value = serde_json::to_value(&status).unwrap();
            assert_eq!(value, expected);
            assert_eq!(value["state"], status.word());
            assert_eq!(serde_json::from_value::<NetStatus>(value).unwrap(), status);
        }
        let text = NetStatus::Partial { by: NetBy::Landlock, tcp_connect_ports: vec![443, 8080] }.to_string();
        assert!(text.contains("port 443, 8080 on any host") && text.contains("not hosts"), "{text}");
    }
}
