//! TLS to the database: a server that takes TLS connections only
//! (`ssl=on`, a certificate made here, `hostssl` the only TCP entry of its
//! `pg_hba.conf`). The engine runs a plan over `sslmode=verify-full` with
//! the test's CA; a wrong CA, a certificate that does not name the host,
//! or no TLS at all is refused before anything is recorded; the password
//! of the URL is in no message.

use std::path::PathBuf;

use super::common::{plan, task, Db, Shared};
use crate::support::postgres::Pg;
use crate::support::Ws;

/// A CA called `ca_name` and a server certificate it signed for
/// `127.0.0.1` only (no DNS name): (CA PEM, server certificate PEM, server
/// key PEM).
fn certificates(ca_name: &str) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, ca_name);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.distinguished_name.push(rcgen::DnType::CommonName, "engine test server");
    let leaf = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    (ca_cert.pem(), leaf.pem(), key.serialize_pem())
}

const PASSWORD: &str = "s3cret-pw";

struct TlsServer {
    s: Shared,
    ca: PathBuf,
    wrong_ca: PathBuf,
}

impl TlsServer {
    fn start() -> TlsServer {
        let (ca, cert, key) = certificates("engine test CA");
        let (wrong_ca, _, _) = certificates("another CA");
        let pg = Pg::start_tls(&cert, &key);
        pg.psql("postgres", "CREATE DATABASE ledger");
        let ws = Ws::new();
        ws.write_plan("plan.json", &plan(vec![task("A", "none", 0.0, &[]), task("B", "none", 0.0, &["A"])]));
        let (ca_file, wrong_file) = (ws.side.join("ca.pem"), ws.side.join("wrong-ca.pem"));
        std::fs::write(&ca_file, ca).unwrap();
        std::fs::write(&wrong_file, wrong_ca).unwrap();
        let url = String::new();
        TlsServer { s: Shared { pg: Db::own(pg, false), url, ws }, ca: ca_file, wrong_ca: wrong_file }
    }

    /// The URL of database `db` at `host`, with a password (the server
    /// trusts loopback TLS connections, so it is never checked, only carried).
    fn url(&self, host: &str, db: &str, query: &str) -> String {
        format!("postgres://engine:{PASSWORD}@{host}:{}/{db}?{query}", self.s.pg.port())
    }

    fn run(&self, url: &str) -> crate::support::Out {
        self.s.ws.engine(&["--json", "run", "plan.json", "--store", url])
    }

    /// Nothing of the engine's in database `db`: no table was made.
    fn untouched(&self, db: &str) {
        assert_eq!(self.s.pg.psql(db, "SELECT to_regclass('schema_meta') IS NULL"), "t", "nothing recorded in {db}");
    }

    fn no_password(&self, out: &crate::support::Out) {
        assert!(!out.stdout.contains(PASSWORD) && !out.stderr.contains(PASSWORD), "{}", out.describe());
    }
}

#[test]
fn verify_full_with_the_ca_runs_a_plan_and_verifies_the_ledger() {
    let t = TlsServer::start();
    let url = t.url("127.0.0.1", "ledger", &format!("sslmode=verify-full&sslrootcert={}", t.ca.display()));
    let out = t.run(&url);
    out.expect_code(0);
    t.no_password(&out);
    assert_eq!(
        t.s.pg.psql("ledger", "SELECT string_agg(state, ',' ORDER BY task_ref) FROM tasks"),
        "succeeded,succeeded"
    );
    let verified = t.s.ws.engine(&["--json", "verify", "--store", &url]);
    verified.expect_code(0);
    t.no_password(&verified);
    // `require` verifies the chain too, and passes here.
    let required = t.url("127.0.0.1", "ledger", &format!("sslmode=require&sslrootcert={}", t.ca.display()));
    t.s.ws.engine(&["--json", "status", "--store", &required]).expect_code(0);
}

#[test]
fn a_wrong_ca_is_refused_and_nothing_is_recorded() {
    let t = TlsServer::start();
    for mode in ["verify-full", "require"] {
        let url = t.url("127.0.0.1", "ledger", &format!("sslmode={mode}&sslrootcert={}", t.wrong_ca.display()));
        let out = t.run(&url);
        out.expect(2, Some("USAGE_ERROR"));
        let message = out.json()["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains("cannot connect to PostgreSQL"), "{mode}: {}", out.describe());
        assert!(
            message.contains("invalid peer certificate: UnknownIssuer"),
            "the certificate is named as the reason ({mode}): {message}"
        );
        t.no_password(&out);
    }
    // The system's roots do not know the test's CA either.
    let out = t.run(&t.url("127.0.0.1", "ledger", "sslmode=verify-full"));
    out.expect(2, Some("USAGE_ERROR"));
    t.untouched("ledger");
}

/// The certificate names 127.0.0.1 only: `verify-full` to `localhost` is
/// refused for the name; `require` (the chain only) connects.
#[test]
fn verify_full_checks_the_host_name_and_require_does_not() {
    let t = TlsServer::start();
    let root = format!("sslrootcert={}", t.ca.display());
    let out = t.run(&t.url("localhost", "ledger", &format!("sslmode=verify-full&{root}")));
    out.expect(2, Some("USAGE_ERROR"));
    let message = out.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("not valid for name"), "{}", out.describe());
    t.untouched("ledger");
    t.run(&t.url("localhost", "ledger", &format!("sslmode=require&{root}"))).expect_code(0);
}

#[test]
fn a_hostssl_only_server_refuses_no_tls_and_prefer_is_refused_by_name() {
    let t = TlsServer::start();
    for query in ["sslmode=disable", ""] {
        let out = t.run(&t.url("127.0.0.1", "ledger", query));
        out.expect(2, Some("USAGE_ERROR"));
        let said = out.json()["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(said.contains("pg_hba.conf rejects connection"), "{query:?}: {}", out.describe());
        t.no_password(&out);
    }
    let out = t.run(&t.url("127.0.0.1", "ledger", "sslmode=prefer"));
    out.expect(2, Some("USAGE_ERROR"));
    assert!(out.stdout.contains("sslmode=prefer is not supported"), "{}", out.describe());
    t.no_password(&out);
    t.untouched("ledger");
}
