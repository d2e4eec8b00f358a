//! The tests' read view of the ledger, through the engine's own store
//! interface (`engine::store`: `Store::open_ro`, its reads, and `Inspect`,
//! the whole ledger listed) — never raw SQL. Records are shown as the
//! tests compare them: states and kinds as their stable words, a
//! classification as its JSON.
//!
//! The exceptions say so, and are the only test code that names SQLite:
//! `tamper` and `load_dump`, for a test that simulates what the engine's
//! own commands cannot stage (a takeover, a conflicting row, an older
//! store); `integrity_check` and `hold_write_lock`, for the store tests
//! that check the file as SQLite sees it or hold its write lock.

use std::path::Path;
use std::time::Duration;

use engine::ids::{AttemptId, GoalId, Revision};
use engine::store::attempts::AttemptRecord;
use engine::store::inspect::{ApprovalRecord, BlobRow, CheckResultRow, LeaseRow, ReceiptRow, SettlementRecord};
use engine::store::Store;
use serde_json::{json, Value};

/// An opened store, read-only.
pub struct Ledger {
    store: Store,
}

/// An attempt, as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub id: i64,
    pub revision: i64,
    pub task_ref: String,
    pub operation_id: String,
    pub try_no: i64,
    pub kind: String,
    pub state: String,
    pub request_digest: String,
    pub intent_at_ms: i64,
    pub generation: i64,
    pub dispatched_at_ms: Option<i64>,
    pub dispatch_detail: Option<String>,
    pub unknown_reason: Option<String>,
    pub classification: Option<Value>,
    pub reusable: Option<bool>,
    pub checkpoint: Option<String>,
    pub instruction: Option<String>,
    pub cost: f64,
    /// The provider's handle for the request (an MCP task), as its JSON.
    pub handle: Option<Value>,
}

impl Attempt {
    fn of(a: AttemptRecord) -> Attempt {
        Attempt {
            id: a.id.get(),
            revision: a.revision.get(),
            task_ref: a.task_ref,
            operation_id: a.operation_id.to_string(),
            try_no: a.try_no,
            kind: a.kind.to_string(),
            state: a.state.to_string(),
            request_digest: a.request_digest.to_string(),
            intent_at_ms: a.intent_at_ms,
            generation: a.generation,
            dispatched_at_ms: a.dispatched_at_ms,
            dispatch_detail: a.dispatch_detail,
            unknown_reason: a.unknown_reason.map(|r| r.to_string()),
            classification: a.classification.map(|c| json!(c)),
            reusable: a.reusable,
            checkpoint: a.checkpoint,
            instruction: a.instruction,
            cost: a.cost.units(),
            handle: a.handle.map(|h| json!(h)),
        }
    }

    /// The failure class (`""` when it has none).
    pub fn class(&self) -> &str {
        self.classification.as_ref().and_then(|c| c["class"].as_str()).unwrap_or("")
    }

    /// The classification's rule (`""` when it has none).
    pub fn rule(&self) -> &str {
        self.classification.as_ref().and_then(|c| c["rule"].as_str()).unwrap_or("")
    }

    /// The pid in its dispatch detail ("pid N").
    pub fn dispatched_pid(&self) -> Option<i32> {
        self.dispatch_detail.as_deref()?.strip_prefix("pid ")?.trim().parse().ok()
    }
}

/// An event, as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub kind: String,
    pub task_ref: Option<String>,
    pub attempt_id: Option<i64>,
    pub data: Value,
}

fn ok<T>(what: &str, r: engine::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("reading the ledger ({what}): {e}"))
}

impl Ledger {
    /// Open the store at `path` read-only; fails the test if there is none.
    pub fn open(path: &Path) -> Ledger {
        Ledger::try_open(path).unwrap_or_else(|| panic!("no readable store at {}", path.display()))
    }

    /// `None` while the store does not exist or is not ready to read yet
    /// (for polling a store a running engine is creating).
    pub fn try_open(path: &Path) -> Option<Ledger> {
        Store::open_ro(path).ok().flatten().map(|store| Ledger { store })
    }

    /// Poll until the store can be read.
    pub fn wait_open(path: &Path) -> Ledger {
        super::wait_until(Duration::from_secs(30), "a readable store", || Ledger::try_open(path))
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        ok("attempts", self.store.inspect().all_attempts()).into_iter().map(Attempt::of).collect()
    }

    pub fn attempts_of(&self, task_ref: &str) -> Vec<Attempt> {
        self.attempts().into_iter().filter(|a| a.task_ref == task_ref).collect()
    }

    /// Every completion of `revision`, read at once (`completions`) and
    /// task by task (`completion`), each as its `Debug` text by task ref:
    /// the two reads must agree record for record.
    pub fn completions_both_ways(&self, goal: &str, revision: i64) -> (Vec<String>, Vec<String>) {
        let (read, goal, revision) = (self.store.read(), GoalId::new(goal), Revision(revision));
        let mut at_once: Vec<String> = ok("completions", read.completions(&goal, revision))
            .into_iter()
            .map(|(r, c)| format!("{r}: {c:?}"))
            .collect();
        at_once.sort();
        let mut alone = Vec::new();
        for t in ok("tasks", read.tasks(&goal, revision)) {
            if let Some(c) = ok("completion", read.completion(&goal, revision, &t.task_ref)) {
                alone.push(format!("{}: {c:?}", t.task_ref));
            }
        }
        alone.sort();
        (at_once, alone)
    }

    pub fn attempt(&self, id: i64) -> Attempt {
        Attempt::of(ok("attempt", self.store.read().attempt(AttemptId(id))))
    }

    /// (state, detail) of a task in a revision of the store's one goal.
    pub fn task(&self, revision: i64, task_ref: &str) -> (String, Value) {
        let rows = ok("tasks", self.store.inspect().all_tasks());
        let t = rows
            .into_iter()
            .find(|t| t.revision == Revision(revision) && t.task.task_ref == task_ref)
            .unwrap_or_else(|| panic!("task {task_ref} r{revision} is not in the ledger"));
        (t.task.state.to_string(), t.task.detail)
    }

    /// A task's state in the newest revision that has it.
    pub fn task_state(&self, task_ref: &str) -> String {
        let rows = ok("tasks", self.store.inspect().all_tasks());
        let t = rows.into_iter().filter(|t| t.task.task_ref == task_ref).max_by_key(|t| t.revision);
        t.unwrap_or_else(|| panic!("task {task_ref} is not in the ledger")).task.state.to_string()
    }

    /// A task's operation id, as its first revision registered it.
    pub fn op_of(&self, task_ref: &str) -> String {
        let rows = ok("tasks", self.store.inspect().all_tasks());
        let t = rows.into_iter().filter(|t| t.task.task_ref == task_ref).min_by_key(|t| t.revision);
        t.unwrap_or_else(|| panic!("task {task_ref} is not in the ledger")).task.operation_id.to_string()
    }

    /// The state of the store's one goal.
    pub fn goal_state(&self) -> String {
        let goals = ok("goals", self.store.inspect().goals());
        assert_eq!(goals.len(), 1, "one goal in the store: {goals:?}");
        goals[0].state.to_string()
    }

    pub fn goal(&self, id: &str) -> engine::store::goals::GoalRecord {
        ok("goal", self.store.read().goal(&GoalId::new(id))).unwrap_or_else(|| panic!("no goal {id}"))
    }

    pub fn revisions(&self) -> Vec<engine::store::goals::RevisionRecord> {
        ok("revisions", self.store.inspect().revisions())
    }

    /// The active revision of the store's one goal.
    pub fn goals_active_revision(&self) -> i64 {
        let goals = ok("goals", self.store.inspect().goals());
        assert_eq!(goals.len(), 1, "one goal in the store: {goals:?}");
        goals[0].active_revision.get()
    }

    pub fn task_count(&self, revision: i64) -> usize {
        ok("tasks", self.store.inspect().all_tasks()).iter().filter(|t| t.revision == Revision(revision)).count()
    }

    pub fn events(&self) -> Vec<Event> {
        ok("events", self.store.inspect().all_events())
            .into_iter()
            .map(|e| Event {
                seq: e.seq.get(),
                kind: e.kind.to_string(),
                task_ref: e.task_ref,
                attempt_id: e.attempt_id.map(AttemptId::get),
                data: e.data,
            })
            .collect()
    }

    /// Events of a kind, in ledger order: (task_ref, attempt_id, data).
    pub fn events_of(&self, kind: &str) -> Vec<(Option<String>, Option<i64>, Value)> {
        self.events().into_iter().filter(|e| e.kind == kind).map(|e| (e.task_ref, e.attempt_id, e.data)).collect()
    }

    pub fn event_kinds(&self) -> Vec<String> {
        self.events().into_iter().map(|e| e.kind).collect()
    }

    pub fn receipt_of(&self, attempt_id: i64) -> Option<Value> {
        ok("receipt", self.store.read().receipt(AttemptId(attempt_id)))
    }

    pub fn receipt_count(&self) -> usize {
        self.receipts().len()
    }

    pub fn receipts(&self) -> Vec<ReceiptRow> {
        ok("receipts", self.store.inspect().receipts())
    }

    /// Evidence of an attempt: (id, kind, data).
    pub fn evidence(&self, attempt_id: i64) -> Vec<(i64, String, Value)> {
        ok("evidence", self.store.inspect().all_evidence())
            .into_iter()
            .filter(|e| e.attempt_id == Some(AttemptId(attempt_id)))
            .map(|e| (e.id.get(), e.kind, e.data))
            .collect()
    }

    /// Claims of an attempt: (authority, data).
    pub fn claims(&self, attempt_id: i64) -> Vec<(String, Value)> {
        ok("claims", self.store.inspect().claims())
            .into_iter()
            .filter(|c| c.attempt_id == AttemptId(attempt_id))
            .map(|c| (c.authority, c.data))
            .collect()
    }

    pub fn approvals(&self) -> Vec<ApprovalRecord> {
        ok("approvals", self.store.inspect().approvals())
    }

    pub fn approval(&self, id: i64) -> ApprovalRecord {
        self.approvals().into_iter().find(|a| a.id.get() == id).unwrap_or_else(|| panic!("no approval {id}"))
    }

    pub fn settlements(&self) -> Vec<SettlementRecord> {
        ok("settlements", self.store.inspect().settlements())
    }

    pub fn check_results(&self) -> Vec<CheckResultRow> {
        ok("check results", self.store.inspect().check_results())
    }

    /// Passing validations of an attempt.
    pub fn validations_passed(&self, attempt_id: i64) -> usize {
        self.check_results()
            .iter()
            .filter(|c| c.attempt_id == Some(AttemptId(attempt_id)) && c.scope == "validation" && c.passed)
            .count()
    }

    pub fn checkpoints(&self) -> Vec<engine::checkpoint::Checkpoint> {
        ok("checkpoints", self.store.inspect().checkpoints())
    }

    pub fn blobs(&self) -> Vec<BlobRow> {
        ok("blobs", self.store.inspect().blobs())
    }

    /// The outputs a succeeded attempt recorded, by path.
    pub fn outputs_of(&self, attempt_id: i64) -> Vec<engine::store::outputs::OutputFile> {
        use engine::store::OutputsRead;
        ok("outputs", self.store.read().outputs_of_attempt(engine::ids::AttemptId(attempt_id)))
    }

    pub fn lease(&self) -> LeaseRow {
        ok("lease", self.store.inspect().lease()).expect("a lease row")
    }

    /// Everything a person-facing record holds, to show that a refused
    /// command wrote nothing.
    pub fn snapshot(&self) -> Value {
        let i = self.store.inspect();
        json!({
            "events": ok("events", i.all_events()),
            "attempts": ok("attempts", i.all_attempts()),
            "tasks": ok("tasks", i.all_tasks()),
            "goals": ok("goals", i.goals()),
            "budget_use": ok("goals", i.goals()).iter()
                .map(|g| ok("budget use", self.store.read().budget_use(&g.id)).calls)
                .collect::<Vec<_>>(),
            "receipts": ok("receipts", i.receipts()),
            "settlements": ok("settlements", i.settlements()),
            "approvals": ok("approvals", i.approvals()),
            "evidence": ok("evidence", i.all_evidence()),
        })
    }
}

/// Write the SQLite store directly: for a test that simulates what the
/// engine's own commands cannot stage. Returns the rows changed.
pub fn tamper(path: &Path, sql: &str) -> usize {
    let c = rusqlite::Connection::open(path).expect("store opens");
    c.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    c.execute(sql, []).expect("tamper statement")
}

/// The same, for several statements at once.
pub fn tamper_batch(path: &Path, sql: &str) {
    let c = rusqlite::Connection::open(path).expect("store opens");
    c.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    c.execute_batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A value as a test writes it into a column, whatever the column's type
/// (SQLite keeps what it is given): text may be bytes that are not UTF-8.
#[derive(Debug, Clone)]
pub enum Stored {
    Null,
    Int(i64),
    Text(Vec<u8>),
    Bytes(Vec<u8>),
}

/// Every TEXT and BLOB column of the store's tables that hold a row, as
/// (table, column), in schema order.
pub fn value_columns(path: &Path) -> Vec<(String, String)> {
    let c = rusqlite::Connection::open(path).expect("store opens");
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut out = Vec::new();
    for t in tables {
        let rows: i64 = c.query_row(&format!("SELECT COUNT(*) FROM \"{t}\""), [], |r| r.get(0)).unwrap();
        if rows == 0 {
            continue;
        }
        let mut st = c.prepare("SELECT name, type FROM pragma_table_info(?1) ORDER BY cid").unwrap();
        let cols = st.query_map([&t], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).unwrap();
        for (name, kind) in cols.map(Result::unwrap) {
            if kind == "TEXT" || kind == "BLOB" {
                out.push((t.clone(), name));
            }
        }
    }
    out
}

/// Set `column` of the first row (by rowid) of `table` to `value`, as a
/// writer outside the engine would (no trigger bypassed: an append-only
/// table refuses, and the function returns `false`).
pub fn set_first(path: &Path, table: &str, column: &str, value: &Stored) -> bool {
    let c = rusqlite::Connection::open(path).expect("store opens");
    c.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    let sql = |expr: &str| {
        format!("UPDATE \"{table}\" SET \"{column}\" = {expr} WHERE rowid = (SELECT MIN(rowid) FROM \"{table}\")")
    };
    let done = match value {
        Stored::Null => c.execute(&sql("NULL"), []),
        Stored::Int(i) => c.execute(&sql("?1"), [i]),
        Stored::Text(bytes) => c.execute(&sql("CAST(?1 AS TEXT)"), [bytes]),
        Stored::Bytes(bytes) => c.execute(&sql("?1"), [bytes]),
    };
    done.is_ok()
}

/// A digest of every row of every table of the SQLite file, in order, and
/// its schema version: equal digests, equal stores (a plan the engine
/// refused must leave the store exactly as it was).
pub fn row_digest(path: &Path) -> String {
    let db = rusqlite::Connection::open(path).expect("store opens");
    let tables: Vec<String> = {
        let mut st = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    };
    let mut h = blake3::Hasher::new();
    let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    h.update(format!("user_version {version}\n").as_bytes());
    for t in tables {
        let mut st = db.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let mut rows: Vec<String> = st
            .query_map([], |r| {
                let cells: Vec<String> =
                    (0..n).map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap())).collect();
                Ok(cells.join("\u{1f}"))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.sort();
        h.update(format!("table {t} {}\n{}\n", rows.len(), rows.join("\n")).as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// Build a store at `path` from a SQL dump (a fixture of an older schema),
/// with the folder and file modes the engine gives its own.
pub fn load_dump(path: &Path, sql: &str) {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = path.parent().expect("a store folder");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).expect("store folder");
    let c = rusqlite::Connection::open(path).expect("store opens");
    c.execute_batch(sql).expect("the dump loads");
    drop(c);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("store mode");
}

/// SQLite's own `PRAGMA integrity_check` of the store at `path` (`None`:
/// it does not open or the check cannot run).
pub fn integrity_check(path: &Path) -> Option<String> {
    let c = rusqlite::Connection::open(path).ok()?;
    c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0)).ok()
}

/// The store's write lock, held (as another process would) until dropped.
pub struct WriteLock(rusqlite::Connection);

pub fn hold_write_lock(path: &Path) -> WriteLock {
    let c = rusqlite::Connection::open(path).expect("store opens");
    c.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    WriteLock(c)
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.0.execute_batch("ROLLBACK");
    }
}
