//! The plan of a seed: a small DAG of tasks with every effect, with and
//! without idempotence, paid or free, observable or blind, with or without
//! validations, over HTTP or an MCP server's tool, under small budgets;
//! and how each task's provider behaves in the simulated world (`Traits`).
//! The plan is a real plan file: the engine loads, checks and digests it
//! as any other.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::rng::Rng;

/// How a task's simulated provider behaves.
#[derive(Debug, Clone)]
pub struct Traits {
    /// `none`, `local` or `external` (the plan's word).
    pub effect: &'static str,
    pub idempotent: bool,
    pub paid: bool,
    /// Its effect can be read back (the plan declares `observe`, on its
    /// provider or on the task itself).
    pub observable: bool,
    /// It calls a tool of an MCP server (`tools`): the run asks the server
    /// for its tools before its first intent.
    pub mcp: bool,
    /// Its provider names accepted requests (as an MCP task server does):
    /// a lost answer may be fetched by its handle.
    pub handles: bool,
    /// In a hundred calls, how many go wrong one way or another.
    pub flaky: u64,
    /// In a hundred, how often each of its validations passes.
    pub passes: u64,
    /// The task's deadline, if it has one (ms).
    pub timeout_ms: Option<i64>,
    /// Every call waits on a person's approval (`requires_approval`).
    pub approval: bool,
    /// The tasks it depends on (the plan's `depends_on`).
    pub depends_on: Vec<String>,
    /// It declares an input a person edits now and then (`files`), and an
    /// output its provider writes (`outputs`).
    pub input: bool,
    pub output: bool,
}

impl Traits {
    /// Free `none`/`local` work needing no approval: its records are
    /// committed without waiting for the disk (`decide::durability`), and
    /// a power loss may make it run again.
    pub fn replayable(&self) -> bool {
        self.effect != "external" && !self.paid && !self.approval
    }
}

/// A generated plan: its file, and its tasks' providers.
pub struct Generated {
    pub plan: Value,
    pub traits: BTreeMap<String, Traits>,
}

/// The plan of `seed`.
pub fn generate(rng: &mut Rng, seed: u64) -> Generated {
    let n = rng.range(1, 5) as usize;
    let mut tasks = Vec::with_capacity(n);
    let mut traits = BTreeMap::new();
    for i in 0..n {
        let r = format!("T{}", i + 1);
        let mut t = task_traits(rng);
        let task = task(rng, seed, (i, &r), &mut t);
        t.depends_on = task["depends_on"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str())
            .map(str::to_string)
            .collect();
        tasks.push(task);
        traits.insert(r, t);
    }
    Generated { plan: plan(rng, seed, tasks), traits }
}

/// A task's traits, drawn (its approval is drawn with the task).
fn task_traits(rng: &mut Rng) -> Traits {
    let effect = ["none", "local", "external"][rng.weighted(&[2, 3, 5])];
    let mcp = rng.chance(20);
    Traits {
        effect,
        idempotent: rng.chance(25),
        paid: rng.chance(20),
        // A tool's effect is read back only by another tool: blind here.
        observable: !mcp && rng.chance(50),
        mcp,
        handles: rng.chance(20),
        flaky: rng.range(0, 60),
        passes: rng.range(70, 100),
        timeout_ms: rng.chance(30).then(|| rng.range(1, 3) as i64 * 1000),
        approval: false,
        depends_on: Vec::new(),
        input: false,
        output: false,
    }
}

/// Task `i` (ref `r`) of the plan, as its traits say: its dependencies on
/// earlier tasks and its validations drawn.
fn task(rng: &mut Rng, seed: u64, (i, r): (usize, &str), t: &mut Traits) -> Value {
    let depends_on: Vec<String> = (0..i).filter(|_| rng.chance(35)).map(|d| format!("T{}", d + 1)).collect();
    let validations: Vec<Value> =
        (0..rng.range(0, 2)).map(|v| json!({"id": format!("V{}", v + 1), "run": ["true"], "expect_exit": 0})).collect();
    let (provider, action) = match (t.mcp, t.observable) {
        (true, _) => ("tools", json!({"tool": "act", "arguments": {"task": r, "seed": seed}})),
        (false, true) => ("seen", json!({"body": {"task": r, "seed": seed}})),
        (false, false) => ("blind", json!({"body": {"task": r, "seed": seed}})),
    };
    let mut task = json!({
        "ref": r, "title": format!("simulated task {r}"), "provider": provider,
        "effect": t.effect, "action": action,
        "depends_on": depends_on, "validations": validations,
    });
    if t.observable && rng.chance(30) {
        // The task's own rule: a person's retry reads it back first.
        task["observe"] = json!({"url": "http://127.0.0.1:9/sim/{operation_id}",
                                 "present_if": {"status": [200]}, "absent_if": {"status": [404]}});
    }
    if t.idempotent {
        task["idempotent"] = json!(true);
    }
    if t.paid {
        task["cost"] = json!(1);
    }
    if let Some(ms) = t.timeout_ms {
        task["timeout_seconds"] = json!(ms / 1000);
    }
    if rng.chance(5) {
        task["requires_approval"] = json!(true);
        t.approval = true;
    }
    task
}

/// The plan around its tasks: acceptance checks, budgets and approvals'
/// time drawn.
fn plan(rng: &mut Rng, seed: u64, tasks: Vec<Value>) -> Value {
    let acceptance: Vec<Value> = (0..rng.range(0, 2))
        .map(|a| {
            json!({"id": format!("A{}", a + 1), "statement": "the simulated goal holds",
                   "check": {"run": ["true"], "expect_exit": 0}})
        })
        .collect();
    let mut plan = json!({
        "version": 1,
        "goal": {"id": format!("sim-{seed}"), "statement": "a simulated goal", "acceptance": acceptance},
        "budgets": {
            "max_attempts_per_task": rng.range(1, 4),
            "max_provider_calls": rng.range(2, 16),
            "max_cost": rng.range(0, 4),
            "deadline_seconds": 3600,
        },
        "providers": {
            // Each answer names the service's version (`world`'s, which a
            // seed may move on between runs): the tool's identity.
            "seen": {"kind": "http", "endpoint": "http://127.0.0.1:9/sim", "version_header": "X-Sim-Version",
                     "observe": {"url": "http://127.0.0.1:9/sim/{operation_id}",
                                 "present_if": {"status": [200]}, "absent_if": {"status": [404]}}},
            "blind": {"kind": "http", "endpoint": "http://127.0.0.1:9/sim", "version_header": "X-Sim-Version"},
            "tools": {"kind": "mcp", "command": ["sim-tools"]},
        },
        "tasks": tasks,
    });
    if rng.chance(10) {
        // Approvals given without `--for` end after a while.
        let after = ["3s", "30s", "5m"][rng.below(3) as usize];
        plan["approvals"] = json!({ "expire_after": after });
    }
    plan
}

/// The same plan with `task_ref`'s action changed (a person's revision):
/// a new request, so a new operation.
pub fn revised(plan: &Value, task_ref: &str, n: u64) -> Value {
    let mut plan = plan.clone();
    if let Some(tasks) = plan["tasks"].as_array_mut() {
        for t in tasks.iter_mut().filter(|t| t["ref"] == task_ref) {
            let what = if t["provider"] == "tools" { "arguments" } else { "body" };
            t["action"][what]["revision"] = json!(n);
        }
    }
    plan
}
