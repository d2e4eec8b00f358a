use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::decide::budget::BudgetName;

/// A plan file from JSON (tests only).
fn plan(v: Value) -> PlanFile {
    serde_json::from_value(v).expect("a test plan parses")
}

fn base() -> Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "s",
                 "acceptance": [{"id": "A1", "statement": "tests pass", "check": {"run": ["make", "test"]}},
                                {"id": "A2", "statement": "stated only"}],
                 "constraints": ["stay tidy",
                                 {"id": "C1", "statement": "tests stay", "protect": ["tests/**", "setup.cfg"],
                                  "check": {"run": ["true"], "expect_exit": 0}}]},
        "budgets": {"max_cost": 1, "max_attempts_per_task": 3},
        "providers": {"sh": {"kind": "command", "sandbox": {"write": ["/opt/a"]}},
                      "raw": {"kind": "command", "sandbox": "none"},
                      "api": {"kind": "http", "endpoint": "http://127.0.0.1:9/pay"},
                      "fs": {"kind": "mcp", "command": ["srv"], "tools": ["read"]}},
        "tasks": [{"ref": "T1", "title": "t", "provider": "sh", "action": {"run": ["true"]}, "effect": "local",
                   "may_change": ["tests/data"], "outputs": ["dist/**"],
                   "validations": [{"id": "V1", "run": ["make", "check"]}]},
                  {"ref": "pay", "title": "pay", "provider": "api", "action": {"body": {"n": 1}},
                   "effect": "external", "cost": 1, "requires_approval": true}],
        "secrets": ["API_KEY"],
        "people": {"approve": ["alice"], "revise": ["alice"]}
    })
}

fn before_of(file: &PlanFile) -> Before<'_> {
    static NONE: BTreeMap<String, Standing> = BTreeMap::new();
    Before { file, in_force: &file.budgets, dropped: &NONE }
}

/// `base()` with `edit` applied, compared against `base()`.
fn diff(edit: impl FnOnce(&mut Value)) -> Vec<Loosening> {
    let before = plan(base());
    let mut after = base();
    edit(&mut after);
    loosenings(&before_of(&before), &plan(after), &[])
}

fn kinds(l: &[Loosening]) -> Vec<(Kind, String)> {
    l.iter().map(|l| (l.kind, l.at.clone())).collect()
}

fn remove(v: &mut Value, key: &str) {
    v.as_object_mut().expect("an object").remove(key);
}

#[test]
fn the_same_plan_loosens_nothing() {
    assert!(diff(|_| {}).is_empty());
    // Title, action, inputs, dependencies, timeout and context are no authority.
    let got = diff(|p| {
        p["tasks"][0]["title"] = json!("another title");
        p["tasks"][0]["action"] = json!({"run": ["make", "all"]});
        p["tasks"][0]["inputs"] = json!(["src/**"]);
        p["tasks"][0]["timeout_seconds"] = json!(9);
        p["tasks"][0]["context"] = json!({"py": ["python3", "--version"]});
        p["tasks"][1]["depends_on"] = json!(["T1"]);
        p["goal"]["statement"] = json!("another statement");
        p["providers"]["fs"]["concurrent"] = json!(true);
    });
    assert!(got.is_empty(), "{got:#?}");
}

#[test]
fn tightening_loosens_nothing() {
    let got = diff(|p| {
        p["budgets"]["max_cost"] = json!(0.5);
        p["providers"]["sh"]["sandbox"] = json!({"write": []});
        p["providers"]["raw"]["sandbox"] = json!({"write": []});
        p["providers"]["fs"]["tools"] = json!([]);
        p["people"]["approve"] = json!([]);
        p["people"]["settle"] = json!(["alice"]);
        p["goal"]["constraints"][1]["protect"] = json!(["tests/**", "setup.cfg", "pyproject.toml"]);
        p["goal"]["acceptance"][1]["check"] = json!({"run": ["true"]});
        p["tasks"][0]["may_change"] = json!([]);
        p["tasks"][0]["outputs"] = json!([]);
        p["tasks"][0]["effect"] = json!("external");
        p["tasks"][0]["requires_approval"] = json!(true);
        p["tasks"][0]["validations"].as_array_mut().unwrap().push(json!({"id": "V2", "run": ["lint"]}));
        p["tasks"][1]["cost"] = json!(2);
        p["secrets"] = json!(["API_KEY", "TOKEN"]);
    });
    assert!(got.is_empty(), "{got:#?}");
}

/// Issue 36, case 1: each gate taken away is listed by field and task.
#[test]
fn every_gate_taken_away_is_listed_by_field_and_task() {
    let got = diff(|p| {
        remove(&mut p["tasks"][1], "requires_approval");
        p["tasks"][1]["cost"] = json!(0);
        p["tasks"][1]["effect"] = json!("none");
        p["tasks"][0]["validations"] = json!([]);
        p["goal"]["acceptance"][0]["check"] = json!({"run": ["true"]});
        p["tasks"][0]["provider"] = json!("raw");
    });
    let at: Vec<(Kind, String, Option<String>)> = got.iter().map(|l| (l.kind, l.at.clone(), l.task.clone())).collect();
    let t = |s: &str| Some(s.to_string());
    assert_eq!(
        at,
        vec![
            (Kind::Provider, "$.tasks[T1].provider".into(), t("T1")),
            (Kind::Validations, "$.tasks[T1].validations".into(), t("T1")),
            (Kind::Effect, "$.tasks[pay].effect".into(), t("pay")),
            (Kind::Cost, "$.tasks[pay].cost".into(), t("pay")),
            (Kind::RequiresApproval, "$.tasks[pay].requires_approval".into(), t("pay")),
            (Kind::Acceptance, "$.goal.acceptance[A1].check".into(), None),
        ]
    );
    assert!(got[0].what.contains("which runs unconfined"), "{}", got[0].what);
    assert_eq!(got[1].what, "validations dropped: V1");
    assert_eq!((got[3].before.clone(), got[3].after.clone()), (json!(1.0), json!(0.0)));
    assert!(got[5].line().starts_with("$.goal.acceptance[A1].check (acceptance): acceptance A1: its check is changed"));
}

#[test]
fn the_effect_is_ordered_none_local_external() {
    let to = |e: &str| diff(|p| p["tasks"][0]["effect"] = json!(e));
    assert_eq!(kinds(&to("none")), vec![(Kind::Effect, "$.tasks[T1].effect".into())]);
    assert!(to("external").is_empty(), "local -> external is more careful");
    let got = diff(|p| p["tasks"][1]["effect"] = json!("local"));
    assert_eq!(kinds(&got), vec![(Kind::Effect, "$.tasks[pay].effect".into())]);
}

#[test]
fn a_validation_changed_is_a_loosening_whatever_changed() {
    let got = diff(|p| p["tasks"][0]["validations"][0]["run"] = json!(["true"]));
    assert_eq!(got[0].what, "validations changed: V1");
    let got = diff(|p| p["tasks"][0]["validations"][0]["timeout_seconds"] = json!(1));
    assert_eq!(kinds(&got), vec![(Kind::Validations, "$.tasks[T1].validations".into())]);
    let got = diff(|p| p["tasks"][0]["validations"][0]["id"] = json!("V9"));
    assert_eq!(got[0].what, "validations dropped: V1", "a renamed validation is one dropped");
}

#[test]
fn flags_that_widen_when_on() {
    let got = diff(|p| {
        p["tasks"][0]["idempotent"] = json!(true);
        p["tasks"][0]["may_spend"] = json!(true);
    });
    assert_eq!(
        kinds(&got),
        vec![(Kind::Idempotent, "$.tasks[T1].idempotent".into()), (Kind::MaySpend, "$.tasks[T1].may_spend".into())]
    );
}

/// `may_spend` dropped is no tightening: the gate keeps room in the budget
/// only for a task that may spend (found by the property test).
#[test]
fn may_spend_dropped_is_a_loosening_too() {
    let mut with = base();
    with["tasks"][0]["may_spend"] = json!(true);
    let got = loosenings(&before_of(&plan(with)), &plan(base()), &[]);
    assert_eq!(kinds(&got), vec![(Kind::MaySpend, "$.tasks[T1].may_spend".into())]);
    assert!(got[0].what.contains("no longer need room in the budget"), "{}", got[0].what);
}

#[test]
fn outputs_and_may_change_grow() {
    let got = diff(|p| {
        p["tasks"][0]["outputs"] = json!(["dist/**", "src/**"]);
        p["tasks"][0]["may_change"] = json!(["tests/data", "tests/**"]);
    });
    assert_eq!(
        kinds(&got),
        vec![(Kind::Outputs, "$.tasks[T1].outputs".into()), (Kind::MayChange, "$.tasks[T1].may_change".into())]
    );
    assert_eq!(got[0].what, "paths it may write added: src/**");
}

#[test]
fn a_read_back_added_or_changed_is_a_loosening_dropped_is_not() {
    let rule = json!({"url": "http://127.0.0.1:9/ops/{operation_id}", "present_if": {"status": [200]}});
    let added = diff(|p| p["tasks"][1]["observe"] = rule.clone());
    assert_eq!(kinds(&added), vec![(Kind::Observe, "$.tasks[pay].observe".into())]);
    let on_provider = diff(|p| p["providers"]["api"]["observe"] = json!("http://127.0.0.1:9/ops/{operation_id}"));
    assert_eq!(kinds(&on_provider), vec![(Kind::Observe, "$.providers.api.observe".into())]);
    assert_eq!(on_provider[0].tasks, vec!["pay".to_string()], "the provider's tasks are named");
    let tool = diff(|p| p["providers"]["fs"]["observe_tool"] = json!("stat"));
    assert_eq!(kinds(&tool), vec![(Kind::Observe, "$.providers.fs.observe".into())]);
    // Dropped: a lost answer waits for a person again.
    let mut with = base();
    with["tasks"][1]["observe"] = rule.clone();
    let (before, after) = (plan(with), plan(base()));
    assert!(loosenings(&before_of(&before), &after, &[]).is_empty());
    // ...unless the provider's default takes its place.
    let mut default = base();
    default["providers"]["api"]["observe"] = json!("http://127.0.0.1:9/ops/{operation_id}");
    let mut with = default.clone();
    with["tasks"][1]["observe"] = rule;
    let got = loosenings(&before_of(&plan(with)), &plan(default), &[]);
    assert_eq!(kinds(&got), vec![(Kind::Observe, "$.tasks[pay].observe".into())]);
}

#[test]
fn what_a_provider_is_may_not_change_unseen() {
    let got = diff(|p| p["providers"]["api"]["endpoint"] = json!("https://elsewhere.example/pay"));
    assert_eq!(kinds(&got), vec![(Kind::Target, "$.providers.api.kind".into())]);
    let got = diff(|p| p["providers"]["fs"]["command"] = json!(["other-server"]));
    assert_eq!(kinds(&got), vec![(Kind::Target, "$.providers.fs.kind".into())]);
    let got = diff(|p| p["providers"]["sh"]["protocol"] = json!("agent-json"));
    assert_eq!(kinds(&got), vec![(Kind::Target, "$.providers.sh.kind".into())]);
    let got = diff(|p| p["providers"]["sh"] = json!({"kind": "http", "endpoint": "http://127.0.0.1:9/"}));
    assert_eq!(kinds(&got)[0], (Kind::Target, "$.providers.sh.kind".into()));
    let got = diff(|p| p["providers"]["api"]["ca_file"] = json!("ca.pem"));
    assert_eq!(kinds(&got), vec![(Kind::Target, "$.providers.api.ca_file".into())]);
}

#[test]
fn sandbox_off_or_wider_write_paths() {
    let off = diff(|p| p["providers"]["sh"]["sandbox"] = json!("none"));
    assert_eq!(kinds(&off), vec![(Kind::Sandbox, "$.providers.sh.sandbox".into())]);
    assert_eq!((off[0].before.clone(), off[0].after.clone()), (json!({"write": ["/opt/a"]}), json!("none")));
    assert!(off[0].line().contains("the sandbox is turned off"), "{}", off[0].line());
    assert!(off[0].line().contains("(provider sh, its tasks: T1)"), "{}", off[0].line());
    let wider = diff(|p| p["providers"]["sh"]["sandbox"] = json!({"write": ["/opt/a", "/"]}));
    assert_eq!(wider[0].what, "write paths added: /");
    // A new provider with its sandbox off is compared with the default.
    let new = diff(|p| p["providers"]["raw2"] = json!({"kind": "command", "sandbox": "none"}));
    assert_eq!(kinds(&new), vec![(Kind::Sandbox, "$.providers.raw2.sandbox".into())]);
    // Dropping the field goes back to the default: no wider.
    assert!(diff(|p| remove(&mut p["providers"]["sh"], "sandbox")).is_empty());
}

#[test]
fn network_hosts_and_env_wider() {
    let got = diff(|p| p["providers"]["sh"]["network"] = json!({"connect": ["api.example.com:443"]}));
    assert_eq!(got[0].what, "network access added: api.example.com:443");
    let got = diff(|p| p["tasks"][0]["network"] = json!({"connect": ["127.0.0.1:8080"]}));
    assert_eq!(kinds(&got), vec![(Kind::Network, "$.tasks[T1].network".into())], "absent is no network");
    let got = diff(|p| p["providers"]["api"]["hosts"] = json!(["x.example"]));
    assert_eq!(kinds(&got), vec![(Kind::Network, "$.providers.api.hosts".into())]);
    assert!(diff(|p| p["providers"]["sh"]["env"] = json!(["PATH", "HOME"])).is_empty(), "within the default set");
    let got = diff(|p| p["providers"]["sh"]["env"] = json!(["AWS_SECRET_ACCESS_KEY"]));
    assert_eq!(got[0].what, "variables added: AWS_SECRET_ACCESS_KEY");
    let got = diff(|p| p["tasks"][0]["env"] = json!(["PATH"]));
    assert_eq!(kinds(&got), vec![(Kind::Env, "$.tasks[T1].env".into())], "a task's own list adds to its provider's");
}

#[test]
fn a_new_task_is_compared_with_the_defaults() {
    let task = |extra: Value| {
        let mut t = json!({"ref": "N", "title": "n", "provider": "sh", "action": {"run": ["true"]}});
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        diff(move |p| p["tasks"].as_array_mut().unwrap().push(t))
    };
    assert!(
        task(json!({"effect": "none", "outputs": ["x"], "validations": []})).is_empty(),
        "new work is no loosening"
    );
    let got = task(json!({"may_spend": true, "network": {"connect": ["*:443"]}, "env": ["K"], "may_change": ["a"]}));
    assert_eq!(
        kinds(&got),
        vec![
            (Kind::MaySpend, "$.tasks[N].may_spend".into()),
            (Kind::MayChange, "$.tasks[N].may_change".into()),
            (Kind::Network, "$.tasks[N].network".into()),
            (Kind::Env, "$.tasks[N].env".into()),
        ]
    );
    let got = task(json!({"provider": "raw"}));
    assert_eq!(kinds(&got), vec![(Kind::Sandbox, "$.tasks[N].provider".into())]);
    assert!(got[0].what.contains("runs unconfined"));
}

#[test]
fn a_task_dropped_before_its_work_was_done_takes_its_gates_with_it() {
    let before = plan(base());
    let mut after = base();
    after["tasks"].as_array_mut().unwrap().pop();
    let after = plan(after);
    let dropped = |standing: Standing| {
        let map = BTreeMap::from([("pay".to_string(), standing)]);
        loosenings(&Before { file: &before, in_force: &before.budgets, dropped: &map }, &after, &[])
    };
    let got = dropped(Standing::default());
    assert_eq!(kinds(&got), vec![(Kind::TaskDropped, "$.tasks[pay]".into())]);
    assert!(got[0].what.contains("a person's approval of every call") && got[0].what.contains("a cost of 1"));
    assert!(dropped(Standing { done: true, sent: true }).is_empty(), "its gates did their work");
    // Without gates, and never sent: nothing stood in front of its work.
    let mut bare = base();
    bare["tasks"][1] = json!({"ref": "pay", "title": "p", "provider": "api", "action": {"body": {}}});
    let bare = plan(bare);
    let map = BTreeMap::from([("pay".to_string(), Standing::default())]);
    assert!(loosenings(&Before { file: &bare, in_force: &bare.budgets, dropped: &map }, &after, &[]).is_empty());
    let map = BTreeMap::from([("pay".to_string(), Standing { done: false, sent: true })]);
    let got = loosenings(&Before { file: &bare, in_force: &bare.budgets, dropped: &map }, &after, &[]);
    assert!(got[0].what.contains("a repeat of external work already sent"), "{got:#?}");
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
    assert!(loosenings(&before_of(&before), &plan(after.clone()), &[raise]).is_empty());
    // Against the limit in force: a person's earlier raise already allows it.
    let in_force = Budgets { max_cost: 100.0, ..before.budgets.clone() };
    let none = BTreeMap::new();
    assert!(loosenings(&Before { file: &before, in_force: &in_force, dropped: &none }, &plan(after), &[]).is_empty());
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
    assert_eq!(check[0].what, "constraint C1: its check is changed (now `false`)");
    let gone = diff(|p| remove(&mut p["goal"]["constraints"][1], "check"));
    assert_eq!(gone[0].what, "constraint C1: its check is dropped");
}

#[test]
fn acceptance_checks_dropped_or_changed() {
    let got = diff(|p| p["goal"]["acceptance"] = json!([]));
    assert_eq!(kinds(&got), vec![(Kind::Acceptance, "$.goal.acceptance[A1].check".into())], "A2 had no check");
    assert_eq!(got[0].what, "acceptance A1: its check is dropped");
    let got = diff(|p| p["goal"]["acceptance"][0]["check"]["expect_exit"] = json!(1));
    assert_eq!(kinds(&got), vec![(Kind::Acceptance, "$.goal.acceptance[A1].check".into())]);
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
fn secrets_dropped() {
    let got = diff(|p| p["secrets"] = json!([]));
    assert_eq!(kinds(&got), vec![(Kind::Secrets, "$.secrets".into())]);
    assert_eq!(got[0].what, "secrets (redacted from every output) dropped: API_KEY");
}

#[test]
fn people_widened() {
    let got = diff(|p| p["people"]["approve"] = json!(["alice", "mallory"]));
    assert_eq!(kinds(&got), vec![(Kind::People, "$.people.approve".into())]);
    assert_eq!(got[0].what, "people who may approve added: mallory");
    let got = diff(|p| remove(p, "people"));
    assert_eq!(kinds(&got).len(), 2, "both lists dropped: {got:?}");
    assert!(got[0].what.contains("list is dropped"));
}

#[test]
fn tool_allow_list_widened() {
    let got = diff(|p| p["providers"]["fs"]["tools"] = json!(["read", "write"]));
    assert_eq!(kinds(&got), vec![(Kind::ToolAllowList, "$.providers.fs.tools".into())]);
    let got = diff(|p| remove(&mut p["providers"]["fs"], "tools"));
    assert!(got[0].what.contains("list is dropped"), "{got:?}");
    // A new MCP provider widens no list that was in force.
    assert!(diff(|p| p["providers"]["fs2"] = json!({"kind": "mcp", "command": ["srv"]})).is_empty());
}

/// A task dropped and one added with exactly its request (provider and
/// action) is a rename: compared field by field with the one it replaces.
#[test]
fn a_rename_is_compared_with_the_task_it_replaces() {
    let before = plan(base());
    let renamed = |edit: &dyn Fn(&mut Value)| {
        let mut after = base();
        after["tasks"][1]["ref"] = json!("pay2");
        edit(&mut after["tasks"][1]);
        let none = BTreeMap::new();
        loosenings(&Before { file: &before, in_force: &before.budgets, dropped: &none }, &plan(after), &[])
    };
    assert!(renamed(&|_| {}).is_empty(), "the same gates under another ref");
    let got = renamed(&|t| remove(t, "requires_approval"));
    assert_eq!(kinds(&got), vec![(Kind::RequiresApproval, "$.tasks[pay2].requires_approval".into())]);
    // Another request under the new ref: the old one is dropped, gates and all.
    let got = renamed(&|t| t["action"] = json!({"body": {"n": 2}}));
    assert_eq!(kinds(&got), vec![(Kind::TaskDropped, "$.tasks[pay]".into())]);
}
