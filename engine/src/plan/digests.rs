//! The digests of SPEC.md's table, computed from a parsed plan.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::digest::{canonical_json, Digester, Kind};
use crate::ids::{OperationId, RequestDigest};
use crate::plan::model::{Goal, PlanFile, ProviderSpec, Task};

#[derive(Debug, Clone, Serialize)]
pub struct TaskDigests {
    pub meaning: String,
    pub dependencies: String,
    pub request: RequestDigest,
    pub operation_id: OperationId,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanDigests {
    /// The whole plan file's content (canonical): decides `PLAN_CHANGED`.
    pub plan: String,
    pub goal_contract: String,
    /// By task ref.
    pub tasks: HashMap<String, TaskDigests>,
}

impl PlanDigests {
    pub fn compute(file: &PlanFile) -> PlanDigests {
        let goal = file.goal.as_ref().expect("validated plan has a goal");
        let goal_contract = goal_contract_digest(goal);
        // Each provider's canonical identity once, not once per task.
        let identities: HashMap<&str, String> = file
            .providers
            .iter()
            .map(|(name, spec)| (name.as_str(), canonical_json(&provider_identity(name, spec))))
            .collect();
        let meanings: HashMap<&str, String> = file
            .tasks
            .iter()
            .map(|t| (t.task_ref.as_str(), meaning_with(t, &identities[t.provider.as_str()])))
            .collect();
        let tasks = file
            .tasks
            .iter()
            .map(|t| {
                let request = request_with(&identities[t.provider.as_str()], &t.action, None);
                let digests = TaskDigests {
                    meaning: meanings[t.task_ref.as_str()].clone(),
                    dependencies: dependency_digest(t, &meanings),
                    operation_id: operation_id(&goal.id, &t.task_ref, &request),
                    request,
                };
                (t.task_ref.clone(), digests)
            })
            .collect();
        PlanDigests { plan: plan_digest(file), goal_contract, tasks }
    }
}

/// The whole plan's content: everything but the tasks as one canonical
/// document, then each task's canonical JSON in ref order (file order is
/// not meaning). Built task by task, never as one whole-plan `Value`.
pub fn plan_digest(file: &PlanFile) -> String {
    let mut head = serde_json::to_value(file.clone_without_tasks()).expect("a plan serializes");
    if let Some(obj) = head.as_object_mut() {
        obj.remove("tasks");
    }
    let mut tasks: Vec<&Task> = file.tasks.iter().collect();
    tasks.sort_unstable_by(|a, b| a.task_ref.cmp(&b.task_ref));
    let mut d = Digester::new(Kind::Plan).json("plan", &head);
    let mut buf = Vec::with_capacity(512);
    for t in tasks {
        // A typed task serializes its fields in a fixed order; its one
        // free-form field (`action`) has sorted keys (`Plan::from_file`),
        // its context is a BTreeMap: so these bytes are canonical for it.
        debug_assert!(is_sorted(&t.action), "action keys are sorted at load");
        buf.clear();
        serde_json::to_writer(&mut buf, t).expect("a task serializes");
        d = d.bytes("task", &buf);
    }
    d.finish()
}

fn is_sorted(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.keys().zip(m.keys().skip(1)).all(|(a, b)| a <= b) && m.values().all(is_sorted),
        Value::Array(items) => items.iter().all(is_sorted),
        _ => true,
    }
}

/// Statement, acceptance criteria (by id), constraints. Not the goal id.
pub fn goal_contract_digest(goal: &Goal) -> String {
    let mut acceptance: Vec<Value> =
        goal.acceptance.iter().map(|a| serde_json::to_value(a).expect("serializes")).collect();
    acceptance.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Digester::new(Kind::GoalContract)
        .str("statement", &goal.statement)
        .json("acceptance", &Value::Array(acceptance))
        .json("constraints", &json!(goal.constraints))
        .finish()
}

/// The provider as the task's meaning sees it: its name and its config.
/// The sandbox is left out: it changes where the provider may write, not
/// what it is asked, so opening a cache folder never makes a new operation.
pub fn provider_identity(name: &str, spec: &ProviderSpec) -> Value {
    let mut config = json!(spec);
    if let Some(c) = config.as_object_mut() {
        c.remove("sandbox");
    }
    json!({ "name": name, "config": config })
}

/// Provider identity and config, action, effect, inputs (sorted),
/// validations (by id), idempotent flag. Not ref, title or depends_on.
pub fn meaning_digest(task: &Task, spec: &ProviderSpec) -> String {
    meaning_with(task, &canonical_json(&provider_identity(&task.provider, spec)))
}

/// `identity`: the provider identity's canonical JSON.
fn meaning_with(task: &Task, identity: &str) -> String {
    let mut inputs = task.inputs.clone();
    inputs.sort();
    inputs.dedup();
    let mut validations: Vec<Value> =
        task.validations.iter().map(|v| serde_json::to_value(v).expect("serializes")).collect();
    validations.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Digester::new(Kind::TaskMeaning)
        .bytes("provider", identity.as_bytes())
        .json("action", &task.action)
        .str("effect", task.effect.as_str())
        .json("inputs", &json!(inputs))
        .json("validations", &Value::Array(validations))
        .str("idempotent", if task.idempotent { "true" } else { "false" })
        .finish()
}

/// The sorted list of (dependency ref, its meaning digest).
pub fn dependency_digest(task: &Task, meanings: &HashMap<&str, String>) -> String {
    let mut deps: Vec<(&str, &str)> =
        task.depends_on.iter().map(|d| (d.as_str(), meanings[d.as_str()].as_str())).collect();
    deps.sort_unstable();
    deps.dedup();
    // Each pair as two length-delimited fields: no JSON to build.
    let mut d = Digester::new(Kind::Dependencies).str("count", &deps.len().to_string());
    for (dep, meaning) in deps {
        d = d.str("ref", dep).str("meaning", meaning);
    }
    d.finish()
}

/// The exact request sent: provider identity, action, and a repair's
/// instruction when there is one (a new instruction is a new request).
pub fn request_digest(provider: &str, spec: &ProviderSpec, action: &Value, instruction: Option<&str>) -> RequestDigest {
    request_with(&canonical_json(&provider_identity(provider, spec)), action, instruction)
}

fn request_with(identity: &str, action: &Value, instruction: Option<&str>) -> RequestDigest {
    let mut d = Digester::new(Kind::Request).bytes("provider", identity.as_bytes()).json("action", action);
    if let Some(text) = instruction {
        d = d.str("instruction", text);
    }
    RequestDigest::new(d.finish())
}

/// Goal id + task ref + request digest: one logical operation, stable
/// across its tries. Short enough to type, long enough not to collide.
pub fn operation_id(goal_id: &str, task_ref: &str, request_digest: &RequestDigest) -> OperationId {
    let hex = Digester::new(Kind::Operation)
        .str("goal", goal_id)
        .str("task", task_ref)
        .str("request", request_digest.as_str())
        .finish();
    OperationId::new(format!("op_{}", &hex[..24]))
}
