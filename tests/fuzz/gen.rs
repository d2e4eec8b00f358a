//! What the fuzzer feeds the engine: plans built from their structure
//! (every field, with values valid, borderline and wrong, and fields the
//! schema does not know) and byte-level mutations of real plans.
//!
//! Commands in generated plans are drawn from `SAFE_PROGRAMS` only, so a
//! generated plan that passes `check` can be run without harm.

use proptest::prelude::*;
use serde_json::{json, Value};

/// The only programs a generated plan names (plus one that does not exist).
pub const SAFE_PROGRAMS: &[&str] = &["true", "false", "echo", "no-such-program-4b1d"];

/// Goal ids: mostly new ones (so an accepted plan runs), one the fuzzer
/// reuses and the existing store's goal (so a different plan under them is
/// `PLAN_CHANGED`), and anything.
pub fn goal_id(existing: &'static str) -> BoxedStrategy<String> {
    prop_oneof![
        4 => "fuzz-[a-z0-9]{10}",
        1 => prop::sample::select(vec!["fuzz-a".to_string(), existing.to_string()]),
        1 => text(),
    ]
    .boxed()
}

/// Strings people and programs write: plain, empty, blank, unicode,
/// control characters, path tricks, and now and then a very long one.
pub fn text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-zA-Z0-9_.-]{1,12}",
        1 => Just(String::new()),
        1 => Just("   ".to_string()),
        1 => "\\PC{0,16}",
        1 => "[\\x00-\\x1f\\x7f\u{1b}]{1,8}",
        1 => prop::sample::select(vec!["..", "/", "a/../../b", "/etc/passwd", "[", "**", "*", "~", "$HOME", "\u{202e}rtl"])
            .prop_map(str::to_string),
        // Lengths at the limits a careful engine has (a u16 width, a page).
        1 => (prop::sample::select(vec![256usize, 4096, 65_535, 65_536, 70_000]), prop::sample::select(vec!["x", "é"]))
            .prop_map(|(n, c)| c.repeat(n / c.len())),
    ]
    .boxed()
}

/// Numbers, including the ones a limit must refuse.
fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => (0u32..20).prop_map(|n| json!(n)),
        1 => Just(json!(-1)),
        1 => Just(json!(0.5)),
        1 => Just(json!(1e300)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(i64::MIN)),
        1 => Just(json!("3")),
        1 => Just(Value::Null),
    ]
    .boxed()
}

fn check() -> BoxedStrategy<Value> {
    (prop::sample::select(SAFE_PROGRAMS.to_vec()), prop::collection::vec("[a-z0-9 ]{0,6}", 0..2), 0i32..2)
        .prop_map(|(p, args, exit)| {
            let run: Vec<Value> = std::iter::once(json!(p)).chain(args.into_iter().map(Value::from)).collect();
            json!({"run": run, "expect_exit": exit})
        })
        .boxed()
}

/// A valid plan: tasks `T0..Tn` with dependencies on earlier tasks only,
/// each on a declared provider with an action of its shape.
fn valid_plan(existing_goal: &'static str) -> BoxedStrategy<Value> {
    let task = (
        prop::sample::select(vec!["sh", "sh", "sh", "agent", "web", "tools"]),
        check(),
        prop::sample::select(vec!["none", "local", "external"]),
        prop::collection::vec(check(), 0..3),
        any::<u64>(),
        (any::<bool>(), any::<bool>(), 0u8..3),
    );
    let goal = (goal_id(existing_goal), "[a-z ]{1,20}", prop::collection::vec(check(), 0..3));
    (goal, prop::collection::vec(task, 1..7), prop::option::of((1u32..5, 1u32..50, 0u32..10)))
        .prop_map(|((id, statement, checks), tasks, budgets)| {
            let acceptance: Vec<Value> = checks
                .into_iter()
                .enumerate()
                .map(|(i, c)| json!({"id": format!("A{i}"), "statement": "checked", "check": c}))
                .collect();
            let tasks: Vec<Value> = tasks
                .into_iter()
                .enumerate()
                .map(|(i, (provider, run, effect, validations, deps, (idempotent, gated, cost)))| {
                    let action = match provider {
                        "web" => json!({"body": {"doc": i}}),
                        "tools" => json!({"tool": "render", "arguments": {"doc": i}}),
                        _ => json!({"run": run["run"]}),
                    };
                    let depends: Vec<String> = (0..i).filter(|j| deps >> j & 1 == 1).map(|j| format!("T{j}")).collect();
                    let validations: Vec<Value> = validations
                        .into_iter()
                        .enumerate()
                        .map(|(k, mut v)| {
                            v["id"] = json!(format!("V{k}"));
                            v
                        })
                        .collect();
                    json!({"ref": format!("T{i}"), "title": format!("task {i}"), "provider": provider, "action": action,
                           "effect": effect, "depends_on": depends, "validations": validations,
                           "idempotent": idempotent, "requires_approval": gated && cost == 2, "cost": cost})
                })
                .collect();
            let mut p = json!({
                "version": 1,
                "goal": {"id": id, "statement": statement, "acceptance": acceptance},
                "providers": {
                    "sh": {"kind": "command"},
                    "agent": {"kind": "command", "protocol": "agent-json"},
                    "web": {"kind": "http", "endpoint": "http://127.0.0.1:9/render", "observe": "http://127.0.0.1:9/o/{operation_id}"},
                    "tools": {"kind": "mcp", "command": ["false"], "observe_tool": "status"}
                },
                "tasks": tasks,
            });
            if let Some((attempts, calls, cost)) = budgets {
                p["budgets"] = json!({"max_attempts_per_task": attempts, "max_provider_calls": calls, "max_cost": cost});
            }
            p
        })
        .boxed()
}

/// One thing wrong (or merely odd) with a plan; positions are picked by
/// `at` modulo what is there.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Replace a task's ref (long, empty, unicode, control characters).
    Ref {
        at: usize,
        text: String,
    },
    DuplicateRef {
        at: usize,
    },
    /// A dependency on a later task (a cycle when the later one depends back).
    DependOnLater {
        at: usize,
    },
    DependOnSelf {
        at: usize,
    },
    DependOnUnknown {
        at: usize,
        text: String,
    },
    UnknownProvider {
        at: usize,
    },
    Input {
        at: usize,
        text: String,
    },
    /// A field's value replaced: (JSON pointer choice, value).
    Value {
        at: usize,
        value: Value,
    },
    /// A field the schema does not know, at some level.
    UnknownField {
        at: usize,
    },
    /// A string field set to any text (valid where any text is).
    Text {
        at: usize,
        text: String,
    },
    RemoveGoal,
    /// The same plan, tasks in reverse order (valid: order is not meaning).
    Reverse,
}

/// Where `Fault::Value`, `Fault::UnknownField` and `Fault::Text` land.
const POINTERS: &[&str] = &[
    "/version",
    "/goal/id",
    "/goal/statement",
    "/goal/acceptance",
    "/budgets/max_cost",
    "/budgets/max_attempts_per_task",
    "/budgets/deadline_seconds",
    "/providers/sh",
    "/providers/web/endpoint",
    "/providers/tools/command",
    "/tasks",
    "/tasks/0/effect",
    "/tasks/0/action",
    "/tasks/0/action/run",
    "/tasks/0/cost",
    "/tasks/0/validations",
    "/tasks/0/timeout_seconds",
    "/tasks/0/inputs",
    "/tasks/0/title",
    "/goal/acceptance/0/check/run",
];
const OBJECTS: &[&str] =
    &["", "/goal", "/budgets", "/providers/sh", "/tasks/0", "/tasks/0/action", "/goal/acceptance/0"];
const TEXTS: &[&str] =
    &["/goal/statement", "/tasks/0/title", "/goal/id", "/goal/acceptance/0/statement", "/tasks/0/action/run/0"];

fn fault() -> BoxedStrategy<Fault> {
    let at = 0usize..64;
    prop_oneof![
        3 => (at.clone(), text()).prop_map(|(at, text)| Fault::Ref { at, text }),
        1 => at.clone().prop_map(|at| Fault::DuplicateRef { at }),
        2 => at.clone().prop_map(|at| Fault::DependOnLater { at }),
        1 => at.clone().prop_map(|at| Fault::DependOnSelf { at }),
        1 => (at.clone(), text()).prop_map(|(at, text)| Fault::DependOnUnknown { at, text }),
        1 => at.clone().prop_map(|at| Fault::UnknownProvider { at }),
        2 => (at.clone(), text()).prop_map(|(at, text)| Fault::Input { at, text }),
        3 => (at.clone(), prop_oneof![number(), text().prop_map(Value::from), Just(json!([])), Just(json!({})), Just(json!(true))])
            .prop_map(|(at, value)| Fault::Value { at, value }),
        1 => at.clone().prop_map(|at| Fault::UnknownField { at }),
        3 => (at, text()).prop_map(|(at, text)| Fault::Text { at, text }),
        1 => Just(Fault::RemoveGoal),
        1 => Just(Fault::Reverse),
    ]
    .boxed()
}

impl Fault {
    pub fn apply(&self, p: &mut Value) {
        let n = p["tasks"].as_array().map_or(0, Vec::len);
        let task = |at: &usize| if n == 0 { None } else { Some(at % n) };
        match self {
            Fault::Ref { at, text } => {
                if let Some(i) = task(at) {
                    p["tasks"][i]["ref"] = json!(text);
                }
            }
            Fault::DuplicateRef { at } => {
                if let (Some(i), true) = (task(at), n > 1) {
                    let other = p["tasks"][(i + 1) % n]["ref"].clone();
                    p["tasks"][i]["ref"] = other;
                }
            }
            Fault::DependOnLater { at } | Fault::DependOnSelf { at } => {
                if let Some(i) = task(at) {
                    let j = if matches!(self, Fault::DependOnSelf { .. }) { i } else { n - 1 };
                    let r = p["tasks"][j]["ref"].clone();
                    if let Some(d) = p["tasks"][i]["depends_on"].as_array_mut() {
                        d.push(r);
                    }
                }
            }
            Fault::DependOnUnknown { at, text } => {
                if let Some(d) = task(at).and_then(|i| p["tasks"][i]["depends_on"].as_array_mut()) {
                    d.push(json!(text));
                }
            }
            Fault::UnknownProvider { at } => {
                if let Some(i) = task(at) {
                    p["tasks"][i]["provider"] = json!("ghost");
                }
            }
            Fault::Input { at, text } => {
                if let Some(i) = task(at) {
                    p["tasks"][i]["inputs"] = json!([text]);
                }
            }
            Fault::Value { at, value } => set(p, POINTERS[at % POINTERS.len()], value.clone()),
            Fault::UnknownField { at } => {
                if let Some(o) = p.pointer_mut(OBJECTS[at % OBJECTS.len()]).and_then(Value::as_object_mut) {
                    o.insert("colour".into(), json!("red"));
                }
            }
            Fault::Text { at, text } => set(p, TEXTS[at % TEXTS.len()], json!(text)),
            Fault::RemoveGoal => {
                p.as_object_mut().map(|o| o.remove("goal"));
            }
            Fault::Reverse => {
                if let Some(t) = p["tasks"].as_array_mut() {
                    t.reverse();
                }
            }
        }
    }
}

/// Set the value at `pointer` if its parent exists.
fn set(p: &mut Value, pointer: &str, value: Value) {
    if let Some(slot) = p.pointer_mut(pointer) {
        *slot = value;
        return;
    }
    let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    if let Some(o) = p.pointer_mut(parent).and_then(Value::as_object_mut) {
        o.insert(key.to_string(), value);
    }
}

/// A whole plan file, as JSON: a valid plan with none, one or a few faults.
pub fn plan(existing_goal: &'static str) -> BoxedStrategy<Value> {
    (valid_plan(existing_goal), prop::collection::vec(fault(), 0..3))
        .prop_map(|(mut p, faults)| {
            for f in &faults {
                f.apply(&mut p);
            }
            p
        })
        .boxed()
}

/// One edit of a plan's bytes; positions are fractions of the length, so a
/// mutation applies to any base.
#[derive(Debug, Clone)]
pub enum Edit {
    Flip { at: u32, bit: u8 },
    Insert { at: u32, bytes: Vec<u8> },
    Delete { at: u32, len: u16 },
    Duplicate { at: u32, len: u16 },
    Truncate { at: u32 },
}

/// Tokens that make JSON interesting when dropped in.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "null",
    "-1",
    "1e999",
    "0.0000001",
    "\"\\u0000\"",
    "\\",
    "true",
    "99999999999999999999",
    "\"\\ud800\"",
    "{\"a\":",
    "\u{feff}",
    "\n",
    "\"ref\": \"T1\"",
    "\"depends_on\": [\"T1\"]",
];

pub fn edits() -> BoxedStrategy<Vec<Edit>> {
    let at = any::<u32>();
    let edit = prop_oneof![
        3 => (at, 0u8..8).prop_map(|(at, bit)| Edit::Flip { at, bit }),
        3 => (at, prop_oneof![prop::sample::select(TOKENS.to_vec()).prop_map(|t| t.as_bytes().to_vec()), prop::collection::vec(any::<u8>(), 1..4)])
            .prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        2 => (at, 1u16..64).prop_map(|(at, len)| Edit::Delete { at, len }),
        1 => (at, 1u16..256).prop_map(|(at, len)| Edit::Duplicate { at, len }),
        1 => at.prop_map(|at| Edit::Truncate { at }),
    ];
    prop::collection::vec(edit, 1..8).boxed()
}

/// Apply the edits to `base`.
pub fn mutate(base: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = base.to_vec();
    let pos =
        |at: u32, len: usize| if len == 0 { 0 } else { (at as u64 * len as u64 / (u32::MAX as u64 + 1)) as usize };
    for e in edits {
        match e {
            Edit::Flip { at, bit } if !b.is_empty() => {
                let i = pos(*at, b.len());
                b[i] ^= 1 << bit;
            }
            Edit::Insert { at, bytes } => {
                let i = pos(*at, b.len() + 1);
                b.splice(i..i, bytes.iter().copied());
            }
            Edit::Delete { at, len } if !b.is_empty() => {
                let i = pos(*at, b.len());
                let end = (i + *len as usize).min(b.len());
                b.drain(i..end);
            }
            Edit::Duplicate { at, len } if !b.is_empty() => {
                let i = pos(*at, b.len());
                let end = (i + *len as usize).min(b.len());
                let piece: Vec<u8> = b[i..end].to_vec();
                b.splice(end..end, piece);
            }
            Edit::Truncate { at } => {
                let i = pos(*at, b.len() + 1);
                b.truncate(i);
            }
            _ => {}
        }
    }
    b
}
