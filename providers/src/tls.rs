//! TLS client settings for `https://` endpoints (HTTP providers, MCP over
//! Streamable HTTP): the system's root certificates, plus a provider's
//! `ca_file` (PEM) for a private CA.
//!
//! What the engine's "did any byte leave?" guarantee needs from TLS: the
//! handshake carries none of the request (0-RTT early data stays off, as in
//! rustls' default), so a failed handshake is "not dispatched"; after it,
//! the bytes that count are the plaintext bytes the TLS stream accepted
//! (see `http::wire`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

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

/// A client config trusting the system roots plus `ca_file`'s certificates.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(system_roots().iter().cloned());
    if let Some(path) = ca_file {
        for cert in read_ca_file(path)? {
            roots.add(cert).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // We speak HTTP/1.1 only; say so, so a server never picks h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Stated, not assumed: no request byte may travel in the handshake.
    config.enable_early_data = false;
    Ok(Arc::new(config))
}

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
