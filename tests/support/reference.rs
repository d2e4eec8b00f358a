//! The reference plans (`fixtures/reference/plans/`), set up in a fresh
//! workspace: placeholders filled in, each task's operation id read from
//! `engine digest`, and the delivery logs that are the ground truth of
//! what each provider did.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::fixtures::{read_json_lines, repo_root, Receiver};
use super::workspace::Ws;

/// Every reference plan, by file name (without `.json`).
pub const PLANS: &[&str] = &["command", "agent", "http-observe", "http-blind", "mcp-observe", "mcp-blind"];

/// What the checks need to know of a task.
#[derive(Debug, Clone)]
pub struct TaskFacts {
    pub task_ref: String,
    pub operation_id: String,
    pub effect: String,
    pub cost: f64,
    pub idempotent: bool,
    pub requires_approval: bool,
}

impl TaskFacts {
    /// How many deliveries its operation may have: a task safe to re-send
    /// (effect `none`, or idempotent local work) any number; otherwise the
    /// first plus one per person's act that allows a repeat — an approval
    /// for paid or external work (which a `requires_approval` task needs
    /// even for its first), a retry for local work.
    pub fn deliveries_allowed(&self, approvals: u32, retries: u32) -> Option<u32> {
        let gated = self.effect == "external" || self.cost > 0.0;
        if self.requires_approval {
            Some(approvals)
        } else if gated {
            Some(1 + approvals)
        } else if self.effect == "none" || self.idempotent {
            None
        } else {
            Some(1 + retries)
        }
    }
}

/// A reference plan in its own workspace.
pub struct Instance {
    pub name: &'static str,
    pub ws: Ws,
    pub tasks: Vec<TaskFacts>,
    /// The command and agent tools' delivery log (outside the workspace).
    pub effects_log: PathBuf,
    /// The MCP fixture's delivery log (outside the workspace).
    pub mcp_log: PathBuf,
    _outside: TempDir,
}

/// One delivery, from whichever log holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub key: String,
    pub try_no: i64,
    pub log: &'static str,
    pub record: Value,
}

impl Instance {
    /// Plan `name` with goal id suffix `run` (operation ids derive from the
    /// goal id, so instances sharing a receiver never share an operation).
    pub fn new(name: &'static str, rcv: &Receiver, run: &str) -> Instance {
        let ws = Ws::new();
        let outside = tempfile::tempdir().expect("tempdir");
        let effects_log = outside.path().join("effects.jsonl");
        let mcp_log = outside.path().join("mcp.jsonl");
        let root = repo_root();
        let template = std::fs::read_to_string(root.join(format!("fixtures/reference/plans/{name}.json")))
            .expect("a reference plan");
        // Each value as the inside of a JSON string: a clone's path may hold
        // a quote or a backslash.
        let json = |path: &std::path::Path| {
            let quoted = serde_json::to_string(&path.to_string_lossy()).expect("a string");
            quoted[1..quoted.len() - 1].to_string()
        };
        let text = template
            .replace("@RUN@", run)
            .replace("@TOOLS@", &json(&root.join("fixtures/reference/tools")))
            .replace("@EFFECTS_LOG@", &json(&effects_log))
            .replace("@RECEIVER@", &rcv.base())
            .replace("@MCP_SERVER@", &json(&root.join("fixtures/mcp/server.py")))
            .replace("@MCP_LOG@", &json(&mcp_log));
        let plan: Value = serde_json::from_str(&text).expect("a reference plan is JSON");
        ws.write_plan("plan.json", &plan);
        let digest = ws.engine_json(&["digest", "plan.json"]);
        digest.expect(0, None);
        let ops = digest.json();
        let tasks = plan["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| {
                let task_ref = t["ref"].as_str().expect("ref").to_string();
                let d = ops["tasks"].as_array().expect("digest tasks").iter().find(|d| d["ref"] == task_ref.as_str());
                TaskFacts {
                    operation_id: d.and_then(|d| d["operation_id"].as_str()).expect("an operation id").to_string(),
                    effect: t["effect"].as_str().unwrap_or("external").to_string(),
                    cost: t["cost"].as_f64().unwrap_or(0.0),
                    idempotent: t["idempotent"].as_bool().unwrap_or(false),
                    requires_approval: t["requires_approval"].as_bool().unwrap_or(false),
                    task_ref,
                }
            })
            .collect();
        Instance { name, ws, tasks, effects_log, mcp_log, _outside: outside }
    }

    pub fn task_of_op(&self, op: &str) -> Option<&TaskFacts> {
        self.tasks.iter().find(|t| t.operation_id == op)
    }

    pub fn op_of(&self, task_ref: &str) -> Option<&str> {
        self.tasks.iter().find(|t| t.task_ref == task_ref).map(|t| t.operation_id.as_str())
    }

    /// Every delivery of this plan's operations, from the receiver's log
    /// (shared, so filtered), the tools' and the MCP server's.
    pub fn deliveries(&self, rcv: &Receiver) -> Vec<Delivery> {
        let mut out = Vec::new();
        let sources = [
            ("receiver", rcv.deliveries()),
            ("tools", read_json_lines(&self.effects_log)),
            ("mcp", read_json_lines(&self.mcp_log)),
        ];
        for (log, records) in sources {
            for r in records {
                let key = r["key"].as_str().unwrap_or_default().to_string();
                if self.task_of_op(&key).is_some() {
                    out.push(Delivery { key, try_no: r["try"].as_i64().unwrap_or(0), log, record: r });
                }
            }
        }
        out
    }

    pub fn delivered(&self, rcv: &Receiver, op: &str, try_no: i64) -> bool {
        self.deliveries(rcv).iter().any(|d| d.key == op && d.try_no == try_no)
    }

    /// Wait up to `grace` for `(op, try)` to show: a request written just
    /// before the engine died may still be on its way through a provider.
    pub fn delivered_within(&self, rcv: &Receiver, op: &str, try_no: i64, grace: Duration) -> bool {
        let start = Instant::now();
        loop {
            if self.delivered(rcv, op, try_no) {
                return true;
            }
            if start.elapsed() >= grace {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
