//! Plans and workers for the shared-store tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::postgres::{self, Pg};
use crate::support::{Running, Ws};

pub const GOAL: &str = "wide";

/// A test's ledger database and the server it is on: the test process's
/// one server (`Shared::new`: an `initdb` and a server start per test
/// cost about 1 CPU-s and 3 s, issue 35), or one of the test's own
/// (`Shared::own`: a test that crashes its server, or needs TLS). SQL and
/// URLs name the test's database `ledger`, whatever it is called.
pub struct Db {
    server: Server,
    name: String,
}

enum Server {
    Process(&'static Pg),
    Own(Pg),
}

impl Db {
    /// A new database on the process's server.
    pub fn on_process_server() -> Db {
        let name = postgres::unique_name("ledger");
        let pg = postgres::process_server();
        pg.database(&name);
        Db { server: Server::Process(pg), name }
    }

    /// `ledger` on a server of its own (created by the caller when `create`
    /// is false).
    pub fn own(pg: Pg, create: bool) -> Db {
        if create {
            pg.database("ledger");
        }
        Db { server: Server::Own(pg), name: "ledger".into() }
    }

    fn pg(&self) -> &Pg {
        match &self.server {
            Server::Process(pg) => pg,
            Server::Own(pg) => pg,
        }
    }

    /// The real name of `db` (`ledger`: the test's; others: its own,
    /// prefixed with the test's on the shared server).
    fn name(&self, db: &str) -> String {
        match (db, &self.server) {
            ("ledger", _) => self.name.clone(),
            ("postgres", _) | (_, Server::Own(_)) => db.to_string(),
            (_, Server::Process(_)) => format!("{}_{db}", self.name),
        }
    }

    pub fn psql(&self, db: &str, sql: &str) -> String {
        self.pg().psql(&self.name(db), sql)
    }

    pub fn try_psql(&self, db: &str, sql: &str) -> String {
        self.pg().try_psql(&self.name(db), sql)
    }

    pub fn url(&self, db: &str) -> String {
        self.pg().url(&self.name(db))
    }

    pub fn port(&self) -> u16 {
        self.pg().port()
    }

    pub fn database_from(&self, db: &str, template: &str) -> String {
        self.pg().database_from(&self.name(db), &self.name(template))
    }

    /// Crash and restart the server: only one of the test's own.
    pub fn crash_and_restart(&self, down: Duration) {
        match &self.server {
            Server::Own(pg) => pg.crash_and_restart(down),
            Server::Process(_) => panic!("the process's server is shared: crash one of the test's own (Shared::own)"),
        }
    }
}

/// On the process's server, the test's database and its own copies are
/// dropped when the test is done (a server of the test's own goes with
/// its folder); best effort, and never while a panic unwinds (a panic in
/// a drop then would abort the test binary).
impl Drop for Db {
    fn drop(&mut self) {
        let Server::Process(pg) = &self.server else { return };
        if std::thread::panicking() {
            return;
        }
        let mine =
            format!("SELECT datname FROM pg_database WHERE datname = '{0}' OR datname LIKE '{0}\\_%'", self.name);
        for name in pg.try_psql("postgres", &mine).lines().filter(|n| n.starts_with(&self.name)) {
            pg.try_psql("postgres", &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        }
    }
}

/// A server, a database, and a workspace holding the plan.
pub struct Shared {
    pub pg: Db,
    pub url: String,
    pub ws: Ws,
}

impl Shared {
    /// The ledger a database of its own on the process's server.
    pub fn new(plan: &Value) -> Shared {
        Shared::on(Db::on_process_server(), plan)
    }

    /// The ledger on a server of the test's own.
    pub fn own(plan: &Value) -> Shared {
        Shared::on(Db::own(Pg::start(), true), plan)
    }

    fn on(pg: Db, plan: &Value) -> Shared {
        let url = pg.url("ledger");
        let ws = Ws::new();
        ws.write_plan("plan.json", plan);
        Shared { pg, url, ws }
    }

    /// `engine ARGS --store URL` in the plan's workspace.
    pub fn engine(&self, args: &[&str]) -> crate::support::Out {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--store", &self.url]);
        self.ws.engine(&all)
    }

    pub fn submit(&self) {
        self.engine(&["--json", "submit", "plan.json"]).expect_code(0);
    }

    /// A worker's own workspace (a checkout of its own, outside the plan's).
    pub fn workspace(&self, name: &str) -> PathBuf {
        let dir = self.ws.root().join(name);
        std::fs::create_dir_all(&dir).expect("worker workspace");
        dir
    }

    /// `engine --json worker --goal GOAL --jobs N` in workspace `name`.
    pub fn worker(&self, name: &str, jobs: usize, env: &[(&str, &str)]) -> Running {
        let dir = self.workspace(name);
        let jobs = jobs.to_string();
        let dir = dir.display().to_string();
        let mut cmd = self.ws.command(&[
            "--json",
            "worker",
            "--goal",
            GOAL,
            "--jobs",
            &jobs,
            "--store",
            &self.url,
            "--workspace",
            &dir,
        ]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.ws.spawn(cmd)
    }

    /// Every provider call in `$SIDE/calls.log`: (task, phase, worker pid).
    pub fn calls(&self) -> Vec<(String, String, i32)> {
        std::fs::read_to_string(self.ws.side.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.to_string(), w.next()?.to_string(), w.next()?.parse().ok()?))
            })
            .collect()
    }

    /// How many times each task's provider started.
    pub fn starts(&self) -> BTreeMap<String, usize> {
        let mut n = BTreeMap::new();
        for (t, phase, _) in self.calls() {
            if phase == "start" {
                *n.entry(t).or_insert(0) += 1;
            }
        }
        n
    }

    pub fn wait_started(&self, task: &str) {
        crate::support::wait_until(Duration::from_secs(30), &format!("{task} started"), || {
            self.starts().contains_key(task).then_some(())
        });
    }
}

/// A command that logs its start (with its parent: the worker), sleeps,
/// and logs its end.
pub fn logged(task: &str, sleep_s: f64) -> Value {
    json!([
        "sh",
        "-c",
        format!(
        "echo \"$0 start $PPID\" >> \"$SIDE/calls.log\"; sleep {sleep_s}; echo \"$0 end $PPID\" >> \"$SIDE/calls.log\""
    ),
        task
    ])
}

pub fn task(r: &str, effect: &str, sleep_s: f64, deps: &[&str]) -> Value {
    json!({"ref": r, "title": r, "provider": "sh", "action": {"run": logged(r, sleep_s)},
           "effect": effect, "inputs": [], "depends_on": deps})
}

/// A task `PAY` (paid external work) that needs a person's approval, with
/// `more` tasks beside it, submitted and asked once by worker `w0`: the
/// store and the operation id to approve.
pub fn approval_asked(more: Vec<Value>) -> (Shared, String) {
    let mut t = task("PAY", "external", 0.0, &[]);
    t["requires_approval"] = json!(true);
    let s = Shared::new(&plan([vec![t], more].concat()));
    s.submit();
    let asked = s.worker("w0", 1, &[]).wait(crate::support::RUN_DEADLINE);
    asked.expect(4, Some("APPROVAL_REQUIRED"));
    let op = asked.json()["awaiting_approval"][0]["operation_id"].as_str().expect("the operation").to_string();
    (s, op)
}

pub fn plan(tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": GOAL, "statement": "every task once",
                 "acceptance": [{"id": "A1", "statement": "runs", "check": {"run": ["true"], "expect_exit": 0}}],
                 "constraints": []},
        "budgets": {"max_attempts_per_task": 3, "max_revisions": 3, "max_provider_calls": 1000, "max_cost": 0, "deadline_seconds": 3600},
        "providers": {"sh": {"kind": "command", "env": ["SIDE"]}},
        "tasks": tasks
    })
}

/// `n` independent tasks and one that depends on them all.
pub fn wide(n: usize, sleep_s: f64) -> Value {
    let mut tasks: Vec<Value> = (0..n).map(|i| task(&format!("T{i:02}"), "none", sleep_s, &[])).collect();
    let refs: Vec<String> = (0..n).map(|i| format!("T{i:02}")).collect();
    let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
    tasks.push(task("Z", "none", 0.0, &refs));
    plan(tasks)
}
