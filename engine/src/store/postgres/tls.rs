//! TLS to the database: what a `postgres://` URL's `sslmode` and
//! `sslrootcert` ask for, and the connector that does it (`rustls`
//! through `tokio-postgres-rustls`, with the same crypto provider, `ring`,
//! as the providers' HTTPS).
//!
//! The modes, and what each verifies:
//! - none given, or `disable`: no TLS;
//! - `require` (or `verify-ca`, the same): TLS or no connection; the
//!   server's certificate chain is verified against the system's roots or,
//!   with `sslrootcert=FILE`, against that file's certificates only; the
//!   host name is not checked;
//! - `verify-full`: as `require`, and the certificate must name the host
//!   of the URL (a DNS name or an IP address).
//!
//! `allow` and `prefer` are refused (`USAGE_ERROR`): they fall back to
//! plaintext without a word, and a shared ledger's traffic must not change
//! its protection behind a person's back. `tokio-postgres` knows neither
//! `verify-*` nor `sslrootcert`, so both are taken out of the URL here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// What the URL asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mode {
    Disable,
    /// TLS; the chain verified, not the host name.
    Require,
    /// TLS; the chain and the host name verified.
    VerifyFull,
}

impl Mode {
    fn parse(word: Option<&str>) -> Result<Mode> {
        match word {
            None | Some("disable") => Ok(Mode::Disable),
            Some("require" | "verify-ca") => Ok(Mode::Require),
            Some("verify-full") => Ok(Mode::VerifyFull),
            Some(w @ ("allow" | "prefer")) => Err(Error::usage(format!(
                "sslmode={w} is not supported: it falls back to plaintext silently; use sslmode=verify-full (or require, or disable) (docs/postgres.md)"
            ))),
            Some(w) => Err(Error::usage(format!(
                "sslmode={w} is not a mode the engine knows: disable, require, verify-ca or verify-full (docs/postgres.md)"
            ))),
        }
    }

    pub fn ssl_mode(&self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Require | Mode::VerifyFull => SslMode::Require,
        }
    }
}

/// How a connection is made: plain, or TLS with its verifier.
#[derive(Clone)]
pub(super) enum Tls {
    Off,
    On(MakeRustlsConnect),
}

/// A URL's TLS settings, taken out; the URL left for `tokio-postgres`.
pub(super) struct Asked {
    pub mode: Mode,
    pub rootcert: Option<PathBuf>,
    pub rest: String,
}

/// Take `sslmode` and `sslrootcert` out of the URL's query.
pub(super) fn asked(url: &str) -> Result<Asked> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut mode, mut rootcert, mut kept) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(decode(value)),
            "sslrootcert" => rootcert = Some(decode(value)),
            _ => kept.push(pair),
        }
    }
    let mode = Mode::parse(mode.as_deref())?;
    // libpq's word for "the system's roots": the same as no file.
    let rootcert = rootcert.filter(|f| f != "system").map(PathBuf::from);
    if rootcert.is_some() && mode == Mode::Disable {
        return Err(Error::usage("sslrootcert is given but no TLS is asked for: add sslmode=verify-full (or require)"));
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok(Asked { mode, rootcert, rest })
}

/// `%XX` escapes of a URL's query value.
fn decode(value: &str) -> String {
    percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned()
}

/// The connector for what was asked.
pub(super) fn connector(mode: &Mode, rootcert: Option<&Path>) -> Result<Tls> {
    if *mode == Mode::Disable {
        return Ok(Tls::Off);
    }
    let roots = Arc::new(roots(rootcert)?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal(format!("TLS setup: {e}")))?;
    let config = match mode {
        Mode::VerifyFull => builder.with_root_certificates(roots).with_no_client_auth(),
        _ => {
            let chain = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| Error::internal(format!("TLS setup: {e}")))?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(chain))).with_no_client_auth()
        }
    };
    Ok(Tls::On(MakeRustlsConnect::new(config)))
}

/// The system's roots, or `sslrootcert`'s certificates only.
fn roots(rootcert: Option<&Path>) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match rootcert {
        Some(file) => {
            let certs = providers::tls::read_ca_file(file)
                .map_err(|why| Error::usage(format!("sslrootcert: {}", why.trim_start_matches("ca_file "))))?;
            for cert in certs {
                roots.add(cert).map_err(|e| Error::usage(format!("sslrootcert {}: {e}", file.display())))?;
            }
        }
        None => {
            roots.add_parsable_certificates(providers::tls::system_roots().iter().cloned());
        }
    }
    Ok(roots)
}

/// `require`: the chain verified as `verify-full` does, the host name not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        // The name is checked after the chain: a name error means the
        // chain verified.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_words_are_taken_out_of_the_url() {
        let a =
            asked("postgres://u:pw@h:5/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x").unwrap();
        assert_eq!(a.mode, Mode::VerifyFull);
        assert_eq!(a.rootcert, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(a.rest, "postgres://u:pw@h:5/db?application_name=x");
        let a = asked("postgres://h/db?sslmode=require").unwrap();
        assert_eq!((a.mode, a.rootcert, a.rest.as_str()), (Mode::Require, None, "postgres://h/db"));
        assert_eq!(asked("postgres://h/db").unwrap().mode, Mode::Disable);
        assert_eq!(asked("postgres://h/db?sslmode=verify-ca&sslrootcert=system").unwrap().rootcert, None);
    }

    #[test]
    fn a_mode_that_falls_back_or_is_unknown_is_refused_by_name() {
        for (url, word) in [
            ("postgres://h/db?sslmode=prefer", "sslmode=prefer"),
            ("postgres://h/db?sslmode=allow", "sslmode=allow"),
            ("postgres://h/db?sslmode=verify_full", "sslmode=verify_full"),
        ] {
            let e = asked(url).err().unwrap();
            assert_eq!(e.code, crate::error::Code::UsageError, "{url}");
            assert!(e.message.contains(word), "{}", e.message);
        }
        let e = asked("postgres://h/db?sslrootcert=/ca.pem").err().unwrap();
        assert!(e.message.contains("sslrootcert"), "{}", e.message);
    }
}
