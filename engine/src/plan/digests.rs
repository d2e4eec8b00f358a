//! The digests of SPEC.md's table, computed from a parsed plan.

use std::collections::HashMap;
use std::rc::Rc;

use serde::Serialize;
use serde_json::{json, Value};

use crate::digest::{canonical_json, Digester, Kind};
use crate::ids::{OperationId, RequestDigest, RequestFingerprint};
use crate::plan::model::{Constraint, Goal, PlanFile, ProviderSpec, Task};

#[derive(Debug, Clone, Serialize)]
pub struct TaskDigests {
    pub meaning: String,
    /// The meaning without the validations (`meaning_core`): not printed,
    /// used to tell a change to the validations alone.
    #[serde(skip)]
    pub meaning_core: String,
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
        // Each task's canonical parts once, shared by its three digests.
        let parts: Vec<Parts> = file
            .tasks
            .iter()
            .map(|t| Parts::of(t, &file.providers[t.provider.as_str()], &identities[t.provider.as_str()]))
            .collect();
        // The meaning, core and request are functions of the parts alone:
        // each distinct set of parts is digested once (a chain of one
        // command has one), the digests the same bytes as one by one.
        let mut shared: HashMap<&Parts, Rc<Shared>> = HashMap::new();
        let per_task: Vec<Rc<Shared>> =
            parts.iter().map(|p| Rc::clone(shared.entry(p).or_insert_with(|| Rc::new(Shared::of(p))))).collect();
        let meanings: HashMap<&str, String> =
            file.tasks.iter().zip(&per_task).map(|(t, s)| (t.task_ref.as_str(), s.meaning.clone())).collect();
        let tasks = file
            .tasks
            .iter()
            .zip(&per_task)
            .map(|(t, s)| {
                let digests = TaskDigests {
                    meaning: s.meaning.clone(),
                    meaning_core: s.core.clone(),
                    dependencies: dependency_digest(t, &meanings),
                    operation_id: operation_id(&goal.id, &t.task_ref, &s.request),
                    request: s.request.clone(),
                };
                (t.task_ref.clone(), digests)
            })
            .collect();
        PlanDigests { plan: plan_digest(file), goal_contract, tasks }
    }
}

/// The digests a task's parts decide alone (`PlanDigests::compute`).
struct Shared {
    meaning: String,
    core: String,
    request: RequestDigest,
}

impl Shared {
    fn of(p: &Parts) -> Shared {
        Shared { meaning: meaning_of(p), core: core_of(p), request: request_of(p, None) }
    }
}

/// The whole plan's content: everything but the tasks as one canonical
/// document, then each task's canonical JSON in ref order (file order is
/// not meaning). Built task by task, never as one whole-plan `Value`.
pub fn plan_digest(file: &PlanFile) -> String {
    let mut head = serde_json::to_value(file.clone_without_tasks()).expect("a plan serializes");
    if let Some(obj) = head.as_object_mut() {
        obj.remove("tasks");
        // For editors only: a plan that gains or changes its `$schema` is
        // the same plan.
        obj.remove("$schema");
    }
    let mut tasks: Vec<&Task> = file.tasks.iter().collect();
    tasks.sort_unstable_by(|a, b| a.task_ref.cmp(&b.task_ref));
    let mut d = Digester::new(Kind::Plan).json("plan", &head);
    let mut buf = Vec::with_capacity(512);
    for t in tasks {
        // A typed task serializes its fields in a fixed order; its one
        // free-form field (`action`) has sorted keys (`Plan::from_file`),
        // its context is a BTreeMap: so these bytes are canonical for it.
        debug_assert!(crate::digest::is_sorted(&t.action), "action keys are sorted at load");
        buf.clear();
        serde_json::to_writer(&mut buf, t).expect("a task serializes");
        d = d.bytes("task", &buf);
    }
    d.finish()
}

/// Statement, acceptance criteria (by id), constraints (in the order
/// written; each plain statement as its string, each checkable one as an
/// object of its kind: id, statement, protected paths sorted, check). Not
/// the goal id. A goal of plain statements digests as it always did.
pub fn goal_contract_digest(goal: &Goal) -> String {
    let mut acceptance: Vec<Value> =
        goal.acceptance.iter().map(|a| serde_json::to_value(a).expect("serializes")).collect();
    acceptance.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let constraints: Vec<Value> = goal.constraints.iter().map(constraint_contract).collect();
    Digester::new(Kind::GoalContract)
        .str("statement", &goal.statement)
        .json("acceptance", &Value::Array(acceptance))
        .json("constraints", &Value::Array(constraints))
        .finish()
}

/// One constraint as the goal contract sees it.
fn constraint_contract(c: &Constraint) -> Value {
    match c {
        Constraint::Statement(s) => Value::String(s.clone()),
        Constraint::Checked(c) => {
            let mut protect = c.protect.clone();
            protect.sort();
            protect.dedup();
            json!({"kind": "checked", "id": c.id, "statement": c.statement, "protect": protect, "check": c.check})
        }
    }
}

/// The provider as the task's meaning sees it: its name and its config —
/// without its sandbox (it changes where the provider may write, not what
/// it is asked, so opening a cache folder never makes a new operation), and
/// without an MCP provider's `tools` allow-list, which bounds what a plan
/// may ask and is checked before anything runs; it changes neither what a
/// task does nor the request it sends. Nor an MCP provider's `ask` (how
/// long a run holds the server's question open for a person): it changes
/// what the run waits for, never what is sent. Nor an HTTP provider's
/// `version_header` or an agent's pinned `model`.
pub fn provider_identity(name: &str, spec: &ProviderSpec) -> Value {
    let mut config = spec.provider_config();
    if let Some(keys) = config.as_object_mut() {
        keys.remove("ask");
        // What an answer is held to, never what is sent: a change of
        // either is judged as the tool's identity (`TOOL_CHANGED`).
        keys.remove("version_header");
        keys.remove("model");
    }
    json!({ "name": name, "config": config })
}

/// Provider identity and config, action, effect, inputs (sorted),
/// validations (by id), idempotent flag, and `may_change` and `outputs`
/// (sorted) when they are declared. Not ref, title or depends_on.
pub fn meaning_digest(task: &Task, spec: &ProviderSpec) -> String {
    let identity = canonical_json(&provider_identity(&task.provider, spec));
    meaning_of(&Parts::of(task, spec, &identity))
}

/// The meaning without the validations (its own digest kind): equal for
/// two definitions of a task that differ only in their validations.
pub fn meaning_core_digest(task: &Task, spec: &ProviderSpec) -> String {
    let identity = canonical_json(&provider_identity(&task.provider, spec));
    core_of(&Parts::of(task, spec, &identity))
}

/// A task's fields as the canonical JSON its digests take them in, each
/// written once (three digests share the action, two the inputs). Two
/// tasks with equal parts have the same meaning, core and request.
#[derive(PartialEq, Eq, Hash)]
struct Parts<'a> {
    /// The provider identity's canonical JSON.
    identity: &'a str,
    action: String,
    effect: &'static str,
    /// Sorted and without repeats.
    inputs: String,
    /// The validations by id, canonical JSON (the meaning's alone).
    validations: String,
    idempotent: bool,
    /// `None` when the task declares none: it then digests as it did
    /// before the field existed.
    may_change: Option<String>,
    /// The same for `outputs`.
    outputs: Option<String>,
    /// The network and environment its processes get (its provider's and
    /// its own, `plan::reach`); the same when none is declared.
    reach: Option<String>,
}

impl<'a> Parts<'a> {
    fn of(task: &Task, spec: &ProviderSpec, identity: &'a str) -> Parts<'a> {
        Parts {
            identity,
            action: canonical_json(&task.action),
            effect: task.effect.as_str(),
            inputs: sorted(&task.inputs),
            validations: validations_of(task),
            idempotent: task.idempotent,
            may_change: (!task.may_change.is_empty()).then(|| sorted(&task.may_change)),
            outputs: (!task.outputs.is_empty()).then(|| sorted(&task.outputs)),
            reach: super::reach::Reach::of_task(task, spec).meaning(),
        }
    }
}

/// The validations sorted by id, as canonical JSON (what
/// `Digester::json` writes for them).
fn validations_of(task: &Task) -> String {
    if task.validations.is_empty() {
        return "[]".to_string();
    }
    let mut validations: Vec<Value> =
        task.validations.iter().map(|v| serde_json::to_value(v).expect("serializes")).collect();
    validations.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    canonical_json(&Value::Array(validations))
}

/// A list of strings as canonical JSON: sorted, without repeats.
fn sorted(list: &[String]) -> String {
    let mut v: Vec<&str> = list.iter().map(String::as_str).collect();
    v.sort_unstable();
    v.dedup();
    serde_json::to_string(&v).unwrap_or_default()
}

fn meaning_of(p: &Parts) -> String {
    let d = Digester::new(Kind::TaskMeaning)
        .bytes("provider", p.identity.as_bytes())
        .bytes("action", p.action.as_bytes())
        .str("effect", p.effect)
        .bytes("inputs", p.inputs.as_bytes())
        .bytes("validations", p.validations.as_bytes())
        .str("idempotent", if p.idempotent { "true" } else { "false" });
    with_may_change(d, p).finish()
}

fn core_of(p: &Parts) -> String {
    let d = Digester::new(Kind::TaskMeaningCore)
        .bytes("provider", p.identity.as_bytes())
        .bytes("action", p.action.as_bytes())
        .str("effect", p.effect)
        .bytes("inputs", p.inputs.as_bytes())
        .str("idempotent", if p.idempotent { "true" } else { "false" });
    with_may_change(d, p).finish()
}

/// `may_change`, `outputs` and the network and environment, each only when
/// declared: a task without them digests as it did before the fields
/// existed.
fn with_may_change(d: Digester, p: &Parts) -> Digester {
    let d = match &p.may_change {
        Some(list) => d.bytes("may_change", list.as_bytes()),
        None => d,
    };
    let d = match &p.outputs {
        Some(list) => d.bytes("outputs", list.as_bytes()),
        None => d,
    };
    match &p.reach {
        Some(reach) => d.bytes("reach", reach.as_bytes()),
        None => d,
    }
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
    request_with(&canonical_json(&provider_identity(provider, spec)), &canonical_json(action), instruction)
}

fn request_of(p: &Parts, instruction: Option<&str>) -> RequestDigest {
    request_with(p.identity, &p.action, instruction)
}

/// `identity` and `action`: canonical JSON.
fn request_with(identity: &str, action: &str, instruction: Option<&str>) -> RequestDigest {
    let mut d = Digester::new(Kind::Request).bytes("provider", identity.as_bytes()).bytes("action", action.as_bytes());
    if let Some(text) = instruction {
        d = d.str("instruction", text);
    }
    RequestDigest::new(d.finish())
}

/// A request known by its content: where it goes and what it carries —
/// an HTTP provider's `endpoint` and the `body`; an MCP server (its
/// `command` or `url`), the `tool` and its `arguments` (and a person's
/// answers, when the call carries them); a command's `run` (and, for an
/// `agent-json` agent, the task's title and a repair's instruction, which
/// its request document carries). Never the task ref, the goal id or the
/// provider's name, nor what does not change what is sent (an HTTP
/// method or header aside: the same body to the same endpoint is the
/// same request). `None` for the builtin provider, which sends nothing.
pub fn request_fingerprint(
    spec: &ProviderSpec,
    task: &Task,
    instruction: Option<&str>,
    answers: Option<&Value>,
) -> Option<RequestFingerprint> {
    let content = match spec {
        ProviderSpec::Http { endpoint, .. } => {
            json!({"kind": "http", "endpoint": endpoint, "body": task.action.get("body")})
        }
        ProviderSpec::Mcp { command, url, .. } => {
            json!({"kind": "mcp", "server": command.as_ref().map(|c| json!(c)).or(url.as_ref().map(|u| json!(u))),
            "tool": task.action.get("tool"), "arguments": task.action.get("arguments").cloned().unwrap_or(json!({})),
            "answers": answers})
        }
        ProviderSpec::Command { protocol: Some(_), .. } => json!({"kind": "agent", "run": task.action.get("run"),
            "title": task.title, "instruction": instruction}),
        ProviderSpec::Command { protocol: None, .. } => json!({"kind": "command", "run": task.action.get("run")}),
        ProviderSpec::Builtin {} => return None,
    };
    Some(RequestFingerprint::new(Digester::new(Kind::RequestContent).json("request", &content).finish()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of the shape every plan had before checkable constraints,
    /// `may_change` and `tools` (plain constraints, an MCP provider).
    fn before() -> serde_json::Value {
        json!({
            "version": 1,
            "goal": {
                "id": "money-totals",
                "statement": "total() returns the sum in cents of a list of price strings",
                "acceptance": [{"id": "A1", "statement": "all money tests pass",
                    "check": {"run": ["python3", "-m", "unittest", "-q"], "expect_exit": 0}}],
                "constraints": ["test expectations are not edited", "no network"]
            },
            "providers": {
                "sh": {"kind": "command"},
                "fs": {"kind": "mcp", "command": ["node", "server.js"], "observe_tool": "stat"}
            },
            "tasks": [
                {"ref": "T1", "title": "convert", "provider": "sh",
                 "action": {"run": ["python3", "tools/apply.py", "cents"]},
                 "effect": "local", "inputs": ["money.py", "tests/test_cents.py"],
                 "validations": [{"id": "V1", "run": ["python3", "-m", "unittest"], "expect_exit": 0}]},
                {"ref": "T2", "provider": "fs", "action": {"tool": "write_file", "arguments": {"path": "x"}},
                 "effect": "external", "depends_on": ["T1"]}
            ]
        })
    }

    fn digests(v: serde_json::Value) -> PlanDigests {
        let mut file: PlanFile = serde_json::from_value(v).unwrap();
        file.tasks.iter_mut().for_each(|t| crate::digest::sort_keys(&mut t.action));
        PlanDigests::compute(&file)
    }

    /// The figures `engine digest` printed for `before()` on main before
    /// this change: stores of such plans keep their goals and reuse.
    #[test]
    fn digests_of_plans_without_the_new_fields_are_unchanged() {
        let d = digests(before());
        assert_eq!(d.plan, "4d8cc4df5dbbade71cc98c7a798bad5e6ad8df3bd158f1bf7677942ac2b3ed98");
        assert_eq!(d.goal_contract, "c83e11596b02f57f54c003186e9225a4013434255df55df09a5ab61547d6817f");
        let t1 = &d.tasks["T1"];
        assert_eq!(t1.meaning, "7b4dc9e5d3d9a434bcac84bf5008cca787a80dcaf56e7169b751a578f2999bcc");
        assert_eq!(t1.dependencies, "26bad650d99f0de475e99301e85cf8d5784bb2f04677b2bd554b8fd938264ff4");
        assert_eq!(t1.request.as_str(), "38af4f96ae7ffe6afe8375219242b3823e408400ae79d2fa2241b92b8fc39bcf");
        assert_eq!(t1.operation_id.as_str(), "op_891942b118141fe2318ba90f");
        let t2 = &d.tasks["T2"];
        assert_eq!(t2.meaning, "4d31519a39d5b5f911573f34826e1caa5d0a8e7317bf9502439e2f934a0896c5");
        assert_eq!(t2.dependencies, "8266fba1b85a2ef537108d01285f691b94935c47609dddc86419b4841c443afd");
        assert_eq!(t2.request.as_str(), "84e54907b1ded89de2fe16c9e531c2d73585547b27d50b7ec10fba5063b34753");
        assert_eq!(t2.operation_id.as_str(), "op_5a23007b0ab183874788f6e0");
    }

    /// Tasks with equal parts share their meaning, core and request
    /// (`PlanDigests::compute` digests each distinct set once); every field
    /// of the parts still tells them apart: each task's digests are the
    /// ones computed for it alone.
    #[test]
    fn shared_parts_give_each_task_the_digests_it_has_alone() {
        let mut p = before();
        let base = p["tasks"][0].clone();
        let variants = [
            json!({}),
            json!({"title": "another title"}),
            json!({"validations": []}),
            json!({"validations": [{"id": "V2", "run": ["true"], "expect_exit": 0}]}),
            json!({"effect": "none"}),
            json!({"inputs": ["money.py"]}),
            json!({"inputs": ["tests/test_cents.py", "money.py", "money.py"]}),
            json!({"idempotent": true}),
            json!({"may_change": ["dist/**"]}),
            json!({"outputs": ["dist/**"]}),
            json!({"env": ["API_KEY"]}),
            json!({"action": {"run": ["python3", "tools/apply.py", "euros"]}}),
            json!({"provider": "sh2"}),
            json!({"provider": "sh3"}),
            json!({"network": {"connect": ["api.example.com:443"]}}),
            json!({"depends_on": ["T2"]}),
        ];
        p["providers"]["sh2"] = json!({"kind": "command", "sandbox": "none"});
        p["providers"]["sh3"] = json!({"kind": "command", "network": {"connect": ["api.example.com:443"]}});
        let mut tasks = vec![base.clone(), p["tasks"][1].clone()];
        for (i, v) in variants.iter().chain(variants.iter()).enumerate() {
            let mut t = base.clone();
            for (k, x) in v.as_object().unwrap() {
                t[k] = x.clone();
            }
            t["ref"] = json!(format!("V{i}"));
            tasks.push(t);
        }
        p["tasks"] = json!(tasks);
        let mut file: PlanFile = serde_json::from_value(p).unwrap();
        file.tasks.iter_mut().for_each(|t| crate::digest::sort_keys(&mut t.action));
        let d = PlanDigests::compute(&file);
        let meanings: HashMap<&str, String> =
            file.tasks.iter().map(|t| (t.task_ref.as_str(), meaning_digest(t, &file.providers[&t.provider]))).collect();
        let mut distinct = std::collections::HashSet::new();
        for t in &file.tasks {
            let spec = &file.providers[&t.provider];
            let got = &d.tasks[&t.task_ref];
            assert_eq!(got.meaning, meanings[t.task_ref.as_str()], "{}", t.task_ref);
            assert_eq!(got.meaning_core, meaning_core_digest(t, spec), "{}", t.task_ref);
            let request = request_digest(&t.provider, spec, &t.action, None);
            assert_eq!(got.request, request, "{}", t.task_ref);
            assert_eq!(got.operation_id, operation_id("money-totals", &t.task_ref, &request));
            assert_eq!(got.dependencies, dependency_digest(t, &meanings));
            distinct.insert(got.meaning.clone());
        }
        // The title alone, the inputs' order and repeats and the
        // dependencies are no meaning (the dependency digest, per task, is).
        assert_eq!(distinct.len(), variants.len() - 3 + 1, "the variants' meanings (T1's the first), and T2's");
        let on_t2 = &d.tasks["V15"];
        assert_ne!(
            on_t2.dependencies, d.tasks["V0"].dependencies,
            "depends_on shares the parts, not the dependency digest"
        );
        assert_eq!(on_t2.meaning, d.tasks["V0"].meaning);
    }

    #[test]
    fn constraint_kinds_are_part_of_the_goal_contract() {
        let base = digests(before()).goal_contract;
        let with = |c: serde_json::Value| {
            let mut p = before();
            p["goal"]["constraints"] = c;
            digests(p).goal_contract
        };
        let protect = json!([{"id": "C1", "statement": "test expectations are not edited", "protect": ["tests/**"]}]);
        let a = with(protect.clone());
        assert_ne!(a, base);
        assert_ne!(a, with(json!(["test expectations are not edited"])), "a statement is not a checked constraint");
        // The order protected globs are written in is not meaning; the globs are.
        let two = |g: serde_json::Value| with(json!([{"id": "C1", "statement": "s", "protect": g}]));
        assert_eq!(two(json!(["a", "b"])), two(json!(["b", "a", "a"])));
        assert_ne!(two(json!(["a"])), two(json!(["a", "b"])));
        let check = json!([{"id": "C1", "statement": "test expectations are not edited", "protect": ["tests/**"],
                            "check": {"run": ["true"], "expect_exit": 0}}]);
        assert_ne!(with(check), a, "a check is part of the contract");
        let renamed = json!([{"id": "C2", "statement": "test expectations are not edited", "protect": ["tests/**"]}]);
        assert_ne!(with(renamed), a);
    }

    #[test]
    fn outputs_are_meaning_and_an_empty_list_digests_as_before() {
        let base = digests(before());
        let mut p = before();
        p["tasks"][0]["outputs"] = json!([]);
        assert_eq!(digests(p).tasks["T1"].meaning, base.tasks["T1"].meaning, "no outputs: the old digest");
        let with = |o: serde_json::Value| {
            let mut p = before();
            p["tasks"][0]["outputs"] = o;
            digests(p)
        };
        let d = with(json!(["dist/**"]));
        assert_ne!(d.tasks["T1"].meaning, base.tasks["T1"].meaning);
        assert_ne!(d.tasks["T1"].meaning_core, base.tasks["T1"].meaning_core);
        assert_eq!(d.tasks["T1"].request, base.tasks["T1"].request, "outputs are not sent");
        assert_eq!(with(json!(["a", "b"])).tasks["T1"].meaning, with(json!(["b", "a", "a"])).tasks["T1"].meaning);
        let mut p = before();
        p["tasks"][0]["may_change"] = json!(["dist/**"]);
        assert_ne!(digests(p).tasks["T1"].meaning, d.tasks["T1"].meaning, "not the same field as may_change");
    }

    #[test]
    fn may_change_is_meaning_and_validations_are_not_core() {
        let base = digests(before());
        let mut p = before();
        p["tasks"][0]["may_change"] = json!(["tests/**"]);
        let d = digests(p);
        assert_ne!(d.tasks["T1"].meaning, base.tasks["T1"].meaning);
        assert_ne!(d.tasks["T1"].meaning_core, base.tasks["T1"].meaning_core);
        assert_eq!(d.tasks["T1"].request, base.tasks["T1"].request, "may_change is not sent");

        let mut p = before();
        p["tasks"][0]["validations"] = json!([]);
        let d = digests(p);
        assert_ne!(d.tasks["T1"].meaning, base.tasks["T1"].meaning);
        assert_eq!(d.tasks["T1"].meaning_core, base.tasks["T1"].meaning_core, "validations alone");
        assert_ne!(d.tasks["T1"].meaning_core, d.tasks["T1"].meaning, "its own digest kind");
    }

    #[test]
    fn network_and_env_are_meaning_not_request_and_none_digests_as_before() {
        let base = digests(before());
        let mut p = before();
        p["providers"]["sh"]["network"] = json!({"connect": []});
        assert_eq!(digests(p).tasks["T1"].meaning, base.tasks["T1"].meaning, "no entry: the old digest");
        let with = |provider: serde_json::Value, task: serde_json::Value| {
            let mut p = before();
            for (k, v) in provider.as_object().unwrap() {
                p["providers"]["sh"][k] = v.clone();
            }
            for (k, v) in task.as_object().unwrap() {
                p["tasks"][0][k] = v.clone();
            }
            digests(p).tasks["T1"].clone()
        };
        let net = with(json!({"network": {"connect": ["api.example.com:443"]}}), json!({}));
        assert_ne!(net.meaning, base.tasks["T1"].meaning);
        assert_ne!(net.meaning_core, base.tasks["T1"].meaning_core);
        assert_eq!(net.request, base.tasks["T1"].request, "not sent: the request and operation stay");
        assert_eq!(net.operation_id, base.tasks["T1"].operation_id);
        let env = with(json!({"env": ["API_KEY"]}), json!({}));
        assert_ne!(env.meaning, base.tasks["T1"].meaning);
        assert_ne!(env.meaning, net.meaning);
        // Declared on the provider or on the task: the same reach, the same meaning.
        assert_eq!(with(json!({}), json!({"env": ["API_KEY"]})).meaning, env.meaning);
        let wider = with(json!({"network": {"connect": ["api.example.com:443", "127.0.0.1:*"]}}), json!({}));
        assert_ne!(wider.meaning, net.meaning, "a wider network is another meaning");
    }

    #[test]
    fn a_tools_allow_list_changes_neither_meaning_nor_request() {
        let base = digests(before());
        let mut p = before();
        p["providers"]["fs"]["tools"] = json!(["write_file", "stat"]);
        let d = digests(p);
        assert_eq!(d.tasks["T2"].meaning, base.tasks["T2"].meaning);
        assert_eq!(d.tasks["T2"].operation_id, base.tasks["T2"].operation_id);
        assert_ne!(d.plan, base.plan, "the plan file did change");
    }

    /// Issue 36, case 4: a request is known by its content, not by who
    /// sends it.
    #[test]
    fn a_request_fingerprint_is_its_target_and_body_not_its_ref_goal_or_provider_name() {
        let task = |r: &str, provider: &str, action: Value| -> Task {
            serde_json::from_value(json!({"ref": r, "title": "t", "provider": provider, "action": action})).unwrap()
        };
        let spec = |v: Value| -> ProviderSpec { serde_json::from_value(v).unwrap() };
        let http = spec(json!({"kind": "http", "endpoint": "http://127.0.0.1:9/send"}));
        let fp = |s: &ProviderSpec, t: &Task| request_fingerprint(s, t, None, None);
        let send = fp(&http, &task("send", "r", json!({"body": {"doc": 1}})));
        assert!(send.is_some());
        assert_eq!(send, fp(&http, &task("send_again", "other-name", json!({"body": {"doc": 1}}))));
        let post = json!({"body": {"doc": 1}, "method": "PUT", "headers": {"X-Try": "2"}});
        assert_eq!(send, fp(&http, &task("x", "r", post)), "method and headers do not make another request");
        assert_ne!(send, fp(&http, &task("send", "r", json!({"body": {"doc": 2}}))));
        let elsewhere = spec(json!({"kind": "http", "endpoint": "http://127.0.0.1:9/other"}));
        assert_ne!(send, fp(&elsewhere, &task("send", "r", json!({"body": {"doc": 1}}))));
        let mcp = spec(json!({"kind": "mcp", "command": ["srv"]}));
        let call = task("c", "m", json!({"tool": "pay", "arguments": {"n": 1}}));
        assert_ne!(fp(&mcp, &call), fp(&mcp, &task("c", "m", json!({"tool": "refund", "arguments": {"n": 1}}))));
        assert_ne!(fp(&mcp, &call), request_fingerprint(&mcp, &call, None, Some(&json!({"ok": true}))));
        let builtin = spec(json!({"kind": "builtin"}));
        assert_eq!(fp(&builtin, &task("b", "b", json!({"op": "noop"}))), None, "the builtin provider sends nothing");
    }
}
