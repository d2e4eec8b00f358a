//! Property tests of plan digests and plan validation, through the engine
//! library (`engine::plan`): digests ignore key order, task order and
//! titles, and move with a task's meaning; random DAGs validate, and a
//! random injected cycle is reported as a real cycle of the graph.

use std::collections::{BTreeMap, HashMap, HashSet};

use engine::plan::{load, validate, Plan, PlanFile};
use engine::Code;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// One task's content, before refs and dependencies are assigned.
#[derive(Debug, Clone)]
struct Parts {
    title: String,
    argv: Vec<String>,
    effect: &'static str,
    inputs: Vec<&'static str>,
    validations: Vec<(Vec<String>, i32)>,
    provider: &'static str,
    idempotent: bool,
}

fn parts() -> impl Strategy<Value = Parts> {
    (
        "[a-zA-Z ]{0,10}",
        prop::collection::vec("[a-z0-9._-]{1,6}", 1..4),
        prop::sample::select(vec!["none", "local", "external"]),
        prop::sample::subsequence(vec!["a.txt", "src/b.py", "docs/*.md", "c/d"], 0..=4),
        prop::collection::vec((prop::collection::vec("[a-z]{1,5}", 1..3), 0..3i32), 0..3),
        prop::sample::select(vec!["sh", "sh2", "agent"]),
        any::<bool>(),
    )
        .prop_map(|(title, argv, effect, inputs, validations, provider, idempotent)| Parts {
            title,
            argv,
            effect,
            inputs,
            validations,
            provider,
            idempotent,
        })
}

/// A random DAG plan: task `t{i}` may depend only on `t{j}`, j < i (bit j
/// of `masks[i]`); the file lists the tasks in a shuffled order.
#[derive(Debug, Clone)]
struct Gen {
    tasks: Vec<Parts>,
    masks: Vec<u64>,
    seed: u64,
}

fn gen() -> impl Strategy<Value = Gen> {
    (prop::collection::vec(parts(), 1..9), prop::collection::vec(any::<u64>(), 9), any::<u64>())
        .prop_map(|(tasks, masks, seed)| Gen { tasks, masks, seed })
}

/// splitmix64: a small deterministic RNG driven by a proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

fn deps_of(g: &Gen, i: usize) -> Vec<String> {
    (0..i).filter(|j| g.masks[i] >> j & 1 == 1).map(|j| format!("t{j}")).collect()
}

fn task_json(p: &Parts, r: &str, deps: Vec<String>) -> Value {
    let validations: Vec<Value> = p
        .validations
        .iter()
        .enumerate()
        .map(|(k, (run, expect))| json!({"id": format!("V{k}"), "run": run, "expect_exit": expect}))
        .collect();
    json!({
        "ref": r, "title": p.title, "provider": p.provider, "action": {"run": p.argv},
        "effect": p.effect, "inputs": p.inputs, "depends_on": deps,
        "validations": validations, "idempotent": p.idempotent,
    })
}

/// The plan as JSON, tasks in the generator's shuffled file order.
fn plan_json(g: &Gen) -> Value {
    let mut tasks: Vec<Value> =
        g.tasks.iter().enumerate().map(|(i, p)| task_json(p, &format!("t{i}"), deps_of(g, i))).collect();
    Rng(g.seed).shuffle(&mut tasks);
    json!({
        "version": 1,
        "goal": {
            "id": "prop-goal", "statement": "digests are stable",
            "acceptance": [{"id": "A1", "statement": "passes", "check": {"run": ["true"], "expect_exit": 0}},
                           {"id": "A2", "statement": "also", "check": {"run": ["true", "x"]}}],
            "constraints": ["c1", "c2"],
        },
        "budgets": {"max_attempts_per_task": 3, "max_revisions": 2, "max_provider_calls": 10, "max_cost": 0, "deadline_seconds": 60},
        "providers": {
            "sh": {"kind": "command"},
            "sh2": {"kind": "command"},
            "agent": {"kind": "command", "protocol": "agent-json"},
        },
        "tasks": tasks,
    })
}

/// Every object's keys in a random order (arrays keep theirs).
fn shuffle_keys(v: &Value, rng: &mut Rng) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.iter().map(|(k, v)| (k.clone(), shuffle_keys(v, rng))).collect();
            rng.shuffle(&mut entries);
            Value::Object(entries.into_iter().collect::<Map<String, Value>>())
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| shuffle_keys(v, rng)).collect()),
        other => other.clone(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Digests {
    plan: String,
    goal_contract: String,
    /// ref → (meaning, dependencies, request, operation_id)
    tasks: BTreeMap<String, (String, String, String, String)>,
}

/// Parse the file's bytes as the engine does and compute every digest.
fn digests_of(plan: &Value) -> Digests {
    let bytes = serde_json::to_vec(plan).unwrap();
    let file = load::parse_plan(&bytes, "plan.json").unwrap_or_else(|e| panic!("{e}\n{plan:#}"));
    let dir = tempfile::tempdir().unwrap();
    let p = Plan::from_file(file, dir.path().canonicalize().unwrap()).unwrap_or_else(|e| panic!("{e}\n{plan:#}"));
    Digests {
        plan: p.digests().plan.clone(),
        goal_contract: p.digests().goal_contract.clone(),
        tasks: p
            .digests()
            .tasks
            .iter()
            .map(|(r, d)| {
                (
                    r.clone(),
                    (d.meaning.clone(), d.dependencies.clone(), d.request.to_string(), d.operation_id.to_string()),
                )
            })
            .collect(),
    }
}

/// The index in the file of the task with this ref.
fn at(plan: &Value, r: &str) -> usize {
    plan["tasks"].as_array().unwrap().iter().position(|t| t["ref"] == r).unwrap()
}

fn parse_file(plan: &Value) -> PlanFile {
    serde_json::from_value(plan.clone()).unwrap_or_else(|e| panic!("{e}\n{plan:#}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Reordering keys anywhere, or tasks in the file, changes no digest.
    #[test]
    fn digests_ignore_key_and_task_order(g in gen(), key_seed in any::<u64>(), task_seed in any::<u64>()) {
        let plan = plan_json(&g);
        let base = digests_of(&plan);
        prop_assert_eq!(base.tasks.len(), g.tasks.len());

        let reordered_keys = shuffle_keys(&plan, &mut Rng(key_seed));
        prop_assert_eq!(&digests_of(&reordered_keys), &base);

        let mut reordered_tasks = plan.clone();
        Rng(task_seed).shuffle(reordered_tasks["tasks"].as_array_mut().unwrap());
        prop_assert_eq!(&digests_of(&reordered_tasks), &base);

        // Whitespace and key order together, as a person might reformat.
        let pretty = serde_json::to_string_pretty(&shuffle_keys(&reordered_tasks, &mut Rng(!key_seed))).unwrap();
        let file = load::parse_plan(pretty.as_bytes(), "p.json").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = Plan::from_file(file, dir.path().canonicalize().unwrap()).unwrap();
        prop_assert_eq!(&p.digests().plan, &base.plan);
    }

    /// A title is not meaning: only the whole-plan digest moves.
    #[test]
    fn title_changes_leave_meaning_alone(g in gen(), pick in any::<prop::sample::Index>(), suffix in "[a-z]{1,5}") {
        let plan = plan_json(&g);
        let base = digests_of(&plan);
        let r = format!("t{}", pick.index(g.tasks.len()));
        let mut edited = plan.clone();
        let i = at(&edited, &r);
        let title = format!("{} {suffix}", edited["tasks"][i]["title"].as_str().unwrap());
        edited["tasks"][i]["title"] = json!(title);
        let after = digests_of(&edited);
        prop_assert_eq!(&after.tasks, &base.tasks, "task digests moved with a title");
        prop_assert_eq!(&after.goal_contract, &base.goal_contract);
        prop_assert_ne!(&after.plan, &base.plan, "the plan digest covers the whole file (PLAN_CHANGED)");
    }

    /// Action, inputs, validations, provider, effect and the idempotent flag
    /// are meaning: the task's meaning digest moves, its dependents'
    /// dependency digests move, and no other task's meaning does.
    #[test]
    fn meaning_changes_move_the_meaning_digest(g in gen(), pick in any::<prop::sample::Index>(), kind in 0usize..8) {
        let plan = plan_json(&g);
        let base = digests_of(&plan);
        let k = pick.index(g.tasks.len());
        let r = format!("t{k}");
        let mut edited = plan.clone();
        let t = &mut edited["tasks"][at(&plan, &r)];
        let what = match kind {
            0 => { t["action"]["run"].as_array_mut().unwrap().push(json!("--extra")); "action" }
            1 => { t["inputs"].as_array_mut().unwrap().push(json!("new/input.txt")); "input" }
            2 => {
                let v = t["validations"].as_array_mut().unwrap();
                match v.first_mut() {
                    Some(first) => first["run"].as_array_mut().unwrap().push(json!("-v")),
                    None => v.push(json!({"id": "VX", "run": ["true"]})),
                }
                "validation run"
            }
            3 => {
                let v = t["validations"].as_array_mut().unwrap();
                match v.first_mut() {
                    Some(first) => first["expect_exit"] = json!(first["expect_exit"].as_i64().unwrap() + 7),
                    None => v.push(json!({"id": "VY", "run": ["false"], "expect_exit": 1})),
                }
                "validation expect_exit"
            }
            4 => {
                // Same config under another name is another provider too.
                let next = match t["provider"].as_str().unwrap() { "sh" => "sh2", "sh2" => "agent", _ => "sh" };
                t["provider"] = json!(next);
                "provider"
            }
            5 => {
                let next = match t["effect"].as_str().unwrap() { "none" => "local", "local" => "external", _ => "none" };
                t["effect"] = json!(next);
                "effect"
            }
            6 => { t["idempotent"] = json!(!t["idempotent"].as_bool().unwrap()); "idempotent" }
            _ => {
                let v = t["validations"].as_array_mut().unwrap();
                v.push(json!({"id": "VNEW", "run": ["true"]}));
                "added validation"
            }
        };
        let after = digests_of(&edited);
        prop_assert_ne!(&after.tasks[&r].0, &base.tasks[&r].0, "{} change did not move the meaning digest", what);
        for (other, d) in &base.tasks {
            if *other == r {
                continue;
            }
            prop_assert_eq!(&after.tasks[other].0, &d.0, "{}'s meaning moved with {}'s {}", other, r, what);
            let depends = g.tasks.iter().enumerate().any(|(i, _)| format!("t{i}") == *other && deps_of(&g, i).contains(&r));
            if depends {
                prop_assert_ne!(&after.tasks[other].1, &d.1, "{} depends on {}: its dependency digest must move", other, r);
            } else {
                prop_assert_eq!(&after.tasks[other].1, &d.1);
            }
        }
        prop_assert_eq!(&after.goal_contract, &base.goal_contract);
    }

    /// `depends_on` is not meaning; it is the dependency digest.
    #[test]
    fn dependencies_move_only_the_dependency_digest(g in gen(), pick in any::<prop::sample::Index>()) {
        prop_assume!(g.tasks.len() >= 2);
        let plan = plan_json(&g);
        let base = digests_of(&plan);
        // The last task in topological numbering may depend on any other.
        let last = g.tasks.len() - 1;
        let dep = format!("t{}", pick.index(last));
        let r = format!("t{last}");
        let mut edited = plan.clone();
        let i = at(&edited, &r);
        let deps = edited["tasks"][i]["depends_on"].as_array_mut().unwrap();
        let had = deps.contains(&json!(dep));
        if had { deps.retain(|d| *d != json!(dep)); } else { deps.push(json!(dep)); }
        let after = digests_of(&edited);
        prop_assert_eq!(&after.tasks[&r].0, &base.tasks[&r].0, "meaning moved with depends_on");
        prop_assert_eq!(&after.tasks[&r].3, &base.tasks[&r].3, "operation id moved with depends_on");
        prop_assert_ne!(&after.tasks[&r].1, &base.tasks[&r].1, "dependency digest ignored depends_on");
    }

    /// Random DAGs validate, and the order puts every dependency first.
    #[test]
    fn random_dags_validate_in_dependency_order(g in gen()) {
        let plan = plan_json(&g);
        let file = parse_file(&plan);
        let order = validate::validate_structure(&file).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut sorted = order.clone();
        sorted.sort();
        prop_assert_eq!(sorted, (0..file.tasks.len()).collect::<Vec<_>>(), "order is a permutation");
        let pos: HashMap<&str, usize> = order.iter().enumerate().map(|(p, &i)| (file.tasks[i].task_ref.as_str(), p)).collect();
        for t in &file.tasks {
            for d in &t.depends_on {
                prop_assert!(pos[d.as_str()] < pos[t.task_ref.as_str()], "{} runs before its dependency {}", t.task_ref, d);
            }
        }
    }

    /// A cycle injected into a random DAG is PLAN_CYCLE, and the reported
    /// cycle is a real cycle of the graph, read dependency -> dependent.
    #[test]
    fn injected_cycles_are_reported_as_real_cycles(g in gen(), cycle_seed in any::<u64>(), len in 1usize..9) {
        let n = g.tasks.len();
        let mut rng = Rng(cycle_seed);
        let mut nodes: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut nodes);
        let members: Vec<String> = nodes[..len.min(n)].iter().map(|i| format!("t{i}")).collect();
        let mut plan = plan_json(&g);
        // members[j+1] depends on members[j], and members[0] on the last.
        for j in 0..members.len() {
            let (dependent, dependency) = (&members[(j + 1) % members.len()], &members[j]);
            let i = at(&plan, dependent);
            let deps = plan["tasks"][i]["depends_on"].as_array_mut().unwrap();
            if !deps.contains(&json!(dependency)) {
                deps.push(json!(dependency));
            }
        }
        let file = parse_file(&plan);
        let e = match validate::validate_structure(&file) {
            Ok(order) => return Err(TestCaseError::fail(format!("a cycle through {members:?} validated: {order:?}"))),
            Err(e) => e,
        };
        prop_assert_eq!(e.code, Code::PlanCycle, "{}", e);
        let cycle: Vec<String> = serde_json::from_value(e.details["cycle"].clone()).map_err(|x| TestCaseError::fail(format!("details.cycle: {x}: {}", e.details)))?;
        prop_assert!(cycle.len() >= 2, "{:?}", cycle);
        prop_assert_eq!(cycle.first(), cycle.last(), "the cycle is closed");
        let inner = &cycle[..cycle.len() - 1];
        prop_assert_eq!(inner.iter().collect::<HashSet<_>>().len(), inner.len(), "no node twice: {:?}", cycle);
        let deps: HashMap<&str, &Vec<String>> = file.tasks.iter().map(|t| (t.task_ref.as_str(), &t.depends_on)).collect();
        for w in cycle.windows(2) {
            let (dependency, dependent) = (&w[0], &w[1]);
            prop_assert!(
                deps.get(dependent.as_str()).is_some_and(|d| d.contains(dependency)),
                "{} -> {} is not an edge: {} does not depend on {} (cycle {:?})", dependency, dependent, dependent, dependency, cycle
            );
        }
        let first = file.tasks.iter().position(|t| t.task_ref == cycle[0]).unwrap();
        let want_place = format!("$.tasks[{first}].depends_on");
        prop_assert_eq!(e.place.as_deref(), Some(want_place.as_str()));
        for r in inner {
            prop_assert!(e.message.contains(r.as_str()), "the message names the cycle: {}", e.message);
        }
    }
}
