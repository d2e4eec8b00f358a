//! A real PostgreSQL server for a test: the machine's server binaries
//! (`initdb`, `pg_ctl` under `/usr/lib/postgresql/*/bin`, or
//! `$ENGINE_TEST_PG_BIN`), a data folder in a temporary folder, listening
//! on a free loopback port only. Run as an unprivileged user: as root,
//! through `runuser -u postgres` (PostgreSQL refuses to run as root).
//! Stopped (`-m immediate`) and removed on drop. `.ci/run` installs the
//! `postgresql` package when the binaries are missing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tempfile::TempDir;

pub struct Pg {
    tmp: TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    /// Started with `ssl=on` and a `hostssl`-only `pg_hba.conf`.
    tls: bool,
}

/// The newest server binaries on the machine.
fn server_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("ENGINE_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (or $ENGINE_TEST_PG_BIN): \
             `.ci/run` installs the `postgresql` package"
        ),
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    l.local_addr().expect("its address").port()
}

impl Pg {
    /// Start a fresh server (a new cluster; its superuser is `engine`,
    /// trusted on loopback only).
    pub fn start() -> Pg {
        Pg::start_with(None)
    }

    /// A fresh server that takes TLS connections only (`ssl=on`, the
    /// certificate and key given as PEM, and a `pg_hba.conf` whose only
    /// TCP entry is `hostssl`; a plaintext connection is rejected).
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> Pg {
        Pg::start_with(Some((cert_pem, key_pem)))
    }

    fn start_with(tls: Option<(&str, &str)>) -> Pg {
        let bin = server_bin();
        let tmp = tempfile::Builder::new().prefix("engine-pg-").tempdir().expect("temp dir");
        // SAFETY: geteuid has no preconditions.
        let as_postgres = unsafe { libc::geteuid() } == 0;
        if as_postgres {
            chown_postgres(tmp.path());
        }
        let pg = Pg { tmp, bin, port: 0, as_postgres, tls: tls.is_some() };
        let init = pg.run(
            "initdb",
            &["-D", &pg.data(), "-U", "engine", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
        );
        assert!(init.status.success(), "initdb failed: {}", String::from_utf8_lossy(&init.stderr));
        if let Some((cert, key)) = tls {
            pg.install_tls(cert, key);
        }
        let mut pg = pg;
        for _ in 0..5 {
            pg.port = free_port();
            if pg.try_start() {
                pg.wait_ready();
                return pg;
            }
        }
        panic!("PostgreSQL did not start: {}", pg.log());
    }

    /// The server's certificate and key beside its data, readable by the
    /// server's user only; TCP connections must use TLS.
    fn install_tls(&self, cert: &str, key: &str) {
        use std::os::unix::fs::PermissionsExt;
        for (name, pem) in [("server.crt", cert), ("server.key", key)] {
            let path = self.tmp.path().join(name);
            std::fs::write(&path, pem).expect("write the server's TLS files");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            if self.as_postgres {
                chown_postgres(&path);
            }
        }
        let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 0.0.0.0/0 reject\n";
        std::fs::write(self.tmp.path().join("data").join("pg_hba.conf"), hba).expect("write pg_hba.conf");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn data(&self) -> String {
        self.tmp.path().join("data").display().to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("server.log")).unwrap_or_default()
    }

    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.current_dir(self.tmp.path()).stdin(Stdio::null());
        cmd
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        self.command(tool).args(args).output().unwrap_or_else(|e| panic!("cannot run {tool}: {e}"))
    }

    fn try_start(&self) -> bool {
        let mut opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200",
            self.port,
            self.tmp.path().display()
        );
        if self.tls {
            let dir = self.tmp.path().display();
            opts.push_str(&format!(" -c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key"));
        }
        let log = self.tmp.path().join("server.log").display().to_string();
        let out = self.run("pg_ctl", &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "-t", "30", "start"]);
        out.status.success()
    }

    fn wait_ready(&self) {
        let port = self.port.to_string();
        for _ in 0..300 {
            let out = self.run("pg_isready", &["-h", "127.0.0.1", "-p", &port, "-U", "engine", "-d", "postgres"]);
            if out.status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("PostgreSQL never became ready: {}", self.log());
    }

    /// A new, empty database; its URL. From PostgreSQL 15 on, copied
    /// from `template1` file by file (`STRATEGY FILE_COPY`) rather than
    /// through the write-ahead log (15's default, `WAL_LOG`): the same
    /// empty database for a third of the server's CPU and wall time (20
    /// databases on 15 here: 2.6 against 0.8 CPU-s, 6 against 2 s; the
    /// PostgreSQL pass makes one per test workspace, issue 35).
    pub fn database(&self, name: &str) -> String {
        self.database_from(name, "template1")
    }

    /// A new database copied from `template` (nobody may be connected to
    /// it), the same way; its URL.
    pub fn database_from(&self, name: &str, template: &str) -> String {
        let strategy = if self.major() >= 15 { " STRATEGY FILE_COPY" } else { "" };
        self.psql("postgres", &format!("CREATE DATABASE {name} TEMPLATE {template}{strategy}"));
        self.url(name)
    }

    /// The server's major version, from its data folder's `PG_VERSION`.
    fn major(&self) -> u32 {
        let file = self.tmp.path().join("data").join("PG_VERSION");
        std::fs::read_to_string(file).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://engine@127.0.0.1:{}/{db}", self.port)
    }

    /// Run SQL with `psql` (what the engine's own commands cannot stage).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let port = self.port.to_string();
        let out = self.run("psql", &["-h", "127.0.0.1", "-p", &port, "-U", "engine", "-d", db, "-Atq", "-c", sql]);
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `psql -c SQL` that may fail: what it printed, stdout and stderr.
    pub fn try_psql(&self, db: &str, sql: &str) -> String {
        let port = self.port.to_string();
        let out = self.run("psql", &["-h", "127.0.0.1", "-p", &port, "-U", "engine", "-d", db, "-Atq", "-c", sql]);
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    /// Crash the server (`pg_ctl stop -m immediate`: no clean shutdown,
    /// recovery at the next start), wait `down`, start it again.
    pub fn crash_and_restart(&self, down: Duration) {
        let out = self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(down);
        assert!(self.try_start(), "PostgreSQL did not start again: {}", self.log());
        self.wait_ready();
    }
}

impl Pg {
    /// Stop the server (`-m immediate`) and remove its folder.
    fn stop(&self) {
        let _ = self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(self.tmp.path());
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Give the folder to the `postgres` user (the server refuses root).
fn chown_postgres(dir: &Path) {
    let status = Command::new("chown").args(["postgres:", &dir.display().to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "chown postgres {}", dir.display());
}

/// The test process's server under `ENGINE_TEST_STORE=postgres`.
static SERVER: OnceLock<Pg> = OnceLock::new();

/// SQL straight into a test workspace's PostgreSQL ledger (`url`), as
/// something holding the database's credentials could write it, not
/// through the engine; the rows it changed.
pub fn tamper_test_store(url: &str, sql: &str) -> usize {
    let pg = SERVER.get().expect("the test store's server is running");
    let db = url.rsplit('/').next().expect("a database in the URL");
    let port = pg.port.to_string();
    let out = pg.run("psql", &["-h", "127.0.0.1", "-p", &port, "-U", "engine", "-d", db, "-At", "-c", sql]);
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    said.lines().last().and_then(|l| l.split_whitespace().last()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// `ENGINE_TEST_STORE=postgres`: every workspace of this test process
/// keeps its ledger on PostgreSQL instead of SQLite, so a suite written
/// for SQLite runs unchanged against the shared store. One server per
/// test process (started at the first workspace, stopped when the
/// process exits), one new database per workspace; its URL. `None`
/// unless the variable says `postgres`.
pub fn test_store_database() -> Option<String> {
    if std::env::var("ENGINE_TEST_STORE").ok()? != "postgres" {
        return None;
    }
    let pg = process_server();
    Some(pg.database(&unique_name("ws")))
}

/// The test process's one server (started at the first call, stopped
/// when the process exits): the test store's, and the `postgres::` tests'
/// that need no server of their own, each in a database of its own.
pub fn process_server() -> &'static Pg {
    extern "C" fn stop_test_server() {
        if let Some(pg) = SERVER.get() {
            pg.stop();
        }
    }
    SERVER.get_or_init(|| {
        let pg = Pg::start();
        // SAFETY: registers a plain `extern "C"` function once; it only
        // reads the server's static.
        unsafe { libc::atexit(stop_test_server) };
        pg
    })
}

/// A database name no other of this process (or another test process
/// on the machine's servers) has: `PREFIX_PID_N`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    format!("{prefix}_{}_{n}", std::process::id())
}
