use serde_json::json;

use super::*;

/// A plan file from JSON (tests only).
fn plan(v: Value) -> PlanFile {
    serde_json::from_value(v).expect("a test plan parses")
}

fn base() -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "s", "acceptance": [],
                 "constraints": ["stay tidy",
                                 {"id": "C1", "statement": "tests stay", "protect": ["tests/**", "setup.cfg"],
                                  "check": {"run": ["true"], "expect_exit": 0}}]},
        "budgets": {"max_cost": 1, "max_attempts_per_task": 3},
        "providers": {"sh": {"kind": "command", "sandbox": {"write": ["/opt/a"]}},
                      "fs": {"kind": "mcp", "command": ["srv"], "tools": ["read"]}},
        "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "action": {"run": ["true"]}, "effect": "local",
                   "may_change": ["tests/data"]}],
        "people": {"approve": ["alice"], "revise": ["alice"]}
    })
}

/// `base()` with `edit` applied, compared against `base()`.
fn diff(edit: impl FnOnce(&mut Value)) -> Vec<Loosening> {
    let before = plan(base());
    let mut after = base();
    edit(&mut after);
    loosenings(&before, &before.budgets, &plan(after), &[])
}

fn kinds(l: &[Loosening]) -> Vec<(Kind, String)> {
    l.iter().map(|l| (l.kind, l.at.clone())).collect()
}

#[test]
fn the_same_plan_loosens_nothing() {
    assert!(diff(|_| {}).is_empty());
}

#[test]
fn tightening_loosens_nothing() {
    let got = diff(|p| {
        p["budgets"]["max_cost"] = json!(0.5);
        p["providers"]["sh"]["sandbox"] = json!({"write": []});
        p["providers"]["fs"]["tools"] = json!([]);
        p["people"]["approve"] = json!([]);
        p["goal"]["constraints"][1]["protect"] = json!(["tests/**", "setup.cfg", "pyproject.toml"]);
        p["tasks"][0]["may_change"] = json!([]);
    });
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn sandbox_off_or_wider_write_paths() {
    let off = diff(|p| p["providers"]["sh"]["sandbox"] = json!("none"));
    assert_eq!(kinds(&off), vec![(Kind::Sandbox, "$.providers.sh.sandbox".into())]);
    assert_eq!((off[0].before.clone(), off[0].after.clone()), (json!({"write": ["/opt/a"]}), json!("none")));
    assert!(off[0].line().contains("the sandbox is turned off"), "{}", off[0].line());
    let wider = diff(|p| p["providers"]["sh"]["sandbox"] = json!({"write": ["/opt/a", "/"]}));
    assert_eq!(wider[0].what, "write paths added: /");
    // A new provider with its sandbox off is compared with the default.
    let new = diff(|p| p["providers"]["raw"] = json!({"kind": "command", "sandbox": "none"}));
    assert_eq!(kinds(&new), vec![(Kind::Sandbox, "$.providers.raw.sandbox".into())]);
    // Dropping the field goes back to the default: no wider.
    assert!(diff(|p| p["providers"]["sh"].as_object_mut().unwrap().remove("sandbox").map(|_| ()).unwrap()).is_empty());
}

#[test]
fn network_wider() {
    let before = json!({"connect": ["127.0.0.1:8080"]});
    let after = json!({"connect": ["127.0.0.1:8080", "api.example.com:443"]});
    let mut out = Vec::new();
    network(&mut out, "$.providers.sh.network".into(), &before, &after);
    assert_eq!(out[0].what, "network access added: api.example.com:443");
    let mut out = Vec::new();
    network(&mut out, "$.tasks[T1].network".into(), &Value::Null, &before);
    assert_eq!(out[0].kind, Kind::Network, "absent is no network");
    let mut out = Vec::new();
    network(&mut out, "x".into(), &after, &before);
    network(&mut out, "x".into(), &before, &Value::Null);
    assert!(out.is_empty(), "narrower or dropped: {out:?}");
    let mut out = Vec::new();
    network(&mut out, "x".into(), &before, &json!("any"));
    assert_eq!(out[0].what, "network access changed", "an unknown form that changes is a loosening");
    // HTTP hosts beyond loopback are network too.
    let hosts = diff(|p| p["providers"]["api"] = json!({"kind": "http", "endpoint": "https://x", "hosts": ["x"]}));
    assert_eq!(kinds(&hosts), vec![(Kind::Network, "$.providers.api.hosts".into())]);
}

#[test]
fn env_wider() {
    let mut out = Vec::new();
    env(&mut out, "$.providers.sh.env".into(), &Value::Null, &json!(["PATH", "HOME"]), true);
    assert!(out.is_empty(), "within the default set");
    env(&mut out, "$.providers.sh.env".into(), &Value::Null, &json!(["PATH", "AWS_SECRET_ACCESS_KEY"]), true);
    assert_eq!(out[0].what, "variables added: AWS_SECRET_ACCESS_KEY");
    let mut out = Vec::new();
    env(&mut out, "$.tasks[T1].env".into(), &Value::Null, &json!(["PATH"]), false);
    assert_eq!(out.len(), 1, "a task's own list adds to its provider's");
}

#[test]
fn budgets_up_unless_a_raise_asked_now_covers_them() {
    let got = diff(|p| p["budgets"]["max_cost"] = json!(100));
    assert_eq!(kinds(&got), vec![(Kind::Budget, "$.budgets.max_cost".into())]);
    assert_eq!((got[0].before.clone(), got[0].after.clone()), (json!(1.0), json!(100.0)));
    let before = plan(base());
    let mut after = base();
    after["budgets"]["max_cost"] = json!(100);
    let raise = Raise { budget: BudgetName::MaxCost, to: 100.0 };
    assert!(loosenings(&before, &before.budgets, &plan(after.clone()), &[raise]).is_empty());
    // Against the limit in force: a person's earlier raise already allows it.
    let in_force = Budgets { max_cost: 100.0, ..before.budgets.clone() };
    assert!(loosenings(&before, &in_force, &plan(after), &[]).is_empty());
    // `max_revisions` is lifted only by `--raise` (a plan's own is ignored).
    assert!(diff(|p| p["budgets"]["max_revisions"] = json!(99)).is_empty());
}

#[test]
fn constraints_dropped_or_their_check_changed() {
    let got = diff(|p| p["goal"]["constraints"] = json!([]));
    assert_eq!(
        kinds(&got),
        vec![(Kind::Constraint, "$.goal.constraints[0]".into()), (Kind::Constraint, "$.goal.constraints[1]".into())]
    );
    assert_eq!(got[1].what, "constraint C1 is dropped");
    let check = diff(|p| p["goal"]["constraints"][1]["check"] = json!({"run": ["false"], "expect_exit": 1}));
    assert_eq!(check[0].what, "constraint C1: its check is changed");
    let gone = diff(|p| p["goal"]["constraints"][1].as_object_mut().unwrap().remove("check").map(|_| ()).unwrap());
    assert_eq!(gone[0].what, "constraint C1: its check is dropped");
}

#[test]
fn protected_paths_dropped_or_may_change_wider() {
    let got = diff(|p| p["goal"]["constraints"][1]["protect"] = json!(["setup.cfg"]));
    assert_eq!(kinds(&got), vec![(Kind::ProtectedPath, "$.goal.constraints[1].protect".into())]);
    assert_eq!(got[0].what, "constraint C1: protected paths dropped: tests/**");
    let got = diff(|p| p["tasks"][0]["may_change"] = json!(["tests/data", "tests/**"]));
    assert_eq!(kinds(&got), vec![(Kind::MayChange, "$.tasks[T1].may_change".into())]);
}

#[test]
fn may_spend_added() {
    let mut out = Vec::new();
    may_spend(&mut out, "$.tasks[T1].may_spend".into(), &Value::Null, &json!(true));
    assert_eq!(kinds(&out), vec![(Kind::MaySpend, "$.tasks[T1].may_spend".into())]);
    may_spend(&mut out, "x".into(), &json!(true), &json!(true));
    may_spend(&mut out, "x".into(), &json!(true), &json!(false));
    assert_eq!(out.len(), 1, "kept or dropped is no wider");
}

#[test]
fn people_widened() {
    let got = diff(|p| p["people"]["approve"] = json!(["alice", "mallory"]));
    assert_eq!(kinds(&got), vec![(Kind::People, "$.people.approve".into())]);
    assert_eq!(got[0].what, "people who may approve added: mallory");
    let got = diff(|p| p.as_object_mut().unwrap().remove("people").map(|_| ()).unwrap());
    assert_eq!(kinds(&got).len(), 2, "both lists dropped: {got:?}");
    assert!(got[0].what.contains("list is dropped"));
    // A list where there was none narrows.
    assert!(diff(|p| p["people"]["settle"] = json!(["alice"])).is_empty());
}

#[test]
fn tool_allow_list_widened() {
    let got = diff(|p| p["providers"]["fs"]["tools"] = json!(["read", "write"]));
    assert_eq!(kinds(&got), vec![(Kind::ToolAllowList, "$.providers.fs.tools".into())]);
    let got = diff(|p| p["providers"]["fs"].as_object_mut().unwrap().remove("tools").map(|_| ()).unwrap());
    assert!(got[0].what.contains("list is dropped"), "{got:?}");
}
