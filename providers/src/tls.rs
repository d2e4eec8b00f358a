//! TLS client settings for `https://` endpoints (HTTP providers, MCP over
//! Streamable HTTP): the system's root certificates, plus a provider's
//! `ca_file` (PEM): a private CA, or the server's own certificate, pinned.
//!
//! Pinning: a server whose certificate is, byte for byte, one of the
//! `ca_file`'s is trusted as that server even when the chain rules refuse
//! it — typically a self-signed certificate `openssl req -x509` made, which
//! says `CA:TRUE` and so cannot be an end-entity certificate by those
//! rules (`CaUsedAsEndEntity`). Everything else still holds: the handshake
//! is signed with that certificate's key (rustls checks it, through the
//! same webpki code as for any certificate), and the name the provider
//! connects to must be one the certificate names (its subjectAltName).
//! Its validity dates are not checked: pinned bytes are trusted until the
//! `ca_file` changes. Any other certificate goes through the chain rules
//! as before (system roots plus the `ca_file`'s certificates as CAs), and
//! a refusal names the `ca_file`.
//!
//! What the engine's "did any byte leave?" guarantee needs from TLS: the
//! handshake carries none of the request (0-RTT early data stays off, as in
//! rustls' default), so a failed handshake is "not dispatched"; after it,
//! the bytes that count are the plaintext bytes the TLS stream accepted
//! (see `http::wire`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};

/// Bound on the certificates read from one `ca_file`.
const CA_FILE_CERTS_MAX: usize = 256;
/// Bound on a `ca_file`'s size.
const CA_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// The system's roots, loaded once per process (a few hundred certificates).
/// (The engine's TLS to PostgreSQL trusts the same.)
pub fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    // Unreadable system stores are skipped (`errors`): a private CA in
    // `ca_file` still works without them.
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// The certificates of a PEM file; an error names the file and the reason.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
    if !meta.is_file() || meta.len() > CA_FILE_BYTES_MAX {
        return Err(format!("ca_file {}: not a regular file of at most {CA_FILE_BYTES_MAX} bytes", path.display()));
    }
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
    let mut certs = Vec::new();
    for cert in iter.take(CA_FILE_CERTS_MAX + 1) {
        certs.push(cert.map_err(|e| format!("ca_file {}: {e}", path.display()))?);
    }
    match certs.len() {
        0 => Err(format!("ca_file {}: no PEM certificate in it", path.display())),
        n if n > CA_FILE_CERTS_MAX => Err(format!("ca_file {}: over {CA_FILE_CERTS_MAX} certificates", path.display())),
        _ => Ok(certs),
    }
}

/// A client config trusting the system roots plus `ca_file`'s certificates
/// (as CAs, and each as a pinned server certificate).
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(system_roots().iter().cloned());
    let mut pinned = Vec::new();
    if let Some(path) = ca_file {
        for cert in read_ca_file(path)? {
            roots.add(cert.clone()).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
            pinned.push(cert);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .build()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let mut config = match ca_file {
        Some(path) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned { chain, pinned, ca_file: path.to_path_buf() }))
            .with_no_client_auth(),
        None => builder.with_webpki_verifier(chain).with_no_client_auth(),
    };
    // We speak HTTP/1.1 only; say so, so a server never picks h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Stated, not assumed: no request byte may travel in the handshake.
    config.enable_early_data = false;
    Ok(Arc::new(config))
}

/// The server certificate verifier of a provider with a `ca_file`: the
/// chain rules first; then, for a certificate they refuse, an exact match
/// with one of the `ca_file`'s and its name checked (see the top of this
/// file). Handshake signatures are checked by the chain verifier's own
/// code in either case.
#[derive(Debug)]
struct Pinned {
    chain: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    ca_file: PathBuf,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        let file = self.ca_file.display();
        if !self.pinned.iter().any(|p| p.as_ref() == end_entity.as_ref()) {
            return Err(explained(format!(
                "the server's certificate is not one of ca_file {file}'s, and is not signed by a CA it or the system trusts ({refused})"
            )));
        }
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name).map_err(|e| {
            explained(format!(
                "the server's certificate is the one pinned in ca_file {file}, but it is not for {} ({e})",
                server_name.to_str()
            ))
        })?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

/// A refused certificate, with the reason in words.
fn explained(message: String) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(Refusal(message)))))
}

#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// A provider's TLS settings, built on first use and kept.
#[derive(Debug, Default)]
pub struct Tls {
    ca_file: Option<PathBuf>,
    config: OnceLock<Result<Arc<ClientConfig>, String>>,
}

impl Tls {
    pub fn new(ca_file: Option<PathBuf>) -> Self {
        Tls { ca_file, config: OnceLock::new() }
    }

    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    pub fn config(&self) -> Result<Arc<ClientConfig>, String> {
        self.config.get_or_init(|| client_config(self.ca_file.as_deref())).clone()
    }
}

impl Clone for Tls {
    fn clone(&self) -> Self {
        Tls::new(self.ca_file.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.pem");
        assert!(read_ca_file(&missing).unwrap_err().contains("none.pem"));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        assert!(read_ca_file(&empty).unwrap_err().contains("no PEM certificate"));
        assert!(client_config(Some(&empty)).is_err());
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, cert.cert.pem()).unwrap();
        assert_eq!(read_ca_file(&good).unwrap().len(), 1);
        let c = client_config(Some(&good)).unwrap();
        assert!(!c.enable_early_data);
    }
}
