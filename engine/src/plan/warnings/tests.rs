use std::collections::HashSet;

use serde_json::json;

use super::*;

/// A probe that knows a fixed set of programs and files.
struct Fake {
    programs: HashSet<&'static str>,
    files: HashSet<&'static str>,
}

impl Probe for Fake {
    fn finds_executable(&self, program: &str) -> bool {
        self.programs.contains(program)
    }
    fn matches_a_file(&self, input: &str) -> bool {
        self.files.contains(input)
    }
}

fn everything_there() -> Fake {
    Fake { programs: ["sh", "python3", "mcp-server"].into(), files: ["money.py", "src/*.py"].into() }
}

fn plan(v: serde_json::Value) -> PlanFile {
    serde_json::from_value(v).unwrap()
}

/// A plan with no trap at all.
fn clean() -> serde_json::Value {
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "s",
                 "acceptance": [{"id": "A1", "statement": "ok", "check": {"run": ["python3", "-c", "pass"]}}]},
        "budgets": {"max_cost": 1.5},
        "providers": {"sh": {"kind": "command"}, "tools": {"kind": "mcp", "command": ["mcp-server"]}},
        "tasks": [
            {"ref": "T1", "provider": "sh", "action": {"run": ["sh", "-c", "true"]}, "effect": "local",
             "inputs": ["money.py", "src/*.py"], "cost": 1.5, "outputs": ["out.txt"],
             "validations": [{"id": "V1", "run": ["python3", "-m", "unittest"]}],
             "context": {"py": ["python3", "--version"]}}
        ]
    })
}

fn codes(w: &[Warning]) -> Vec<(&'static str, &str)> {
    w.iter().map(|w| (w.code.as_str(), w.path.as_str())).collect()
}

#[test]
fn a_plan_without_traps_has_no_warning() {
    assert_eq!(warnings(&plan(clean()), &[true], &everything_there()), vec![]);
}

#[test]
fn a_task_that_may_write_with_no_outputs_is_named() {
    let mut p = clean();
    p["tasks"][0]["outputs"] = json!([]);
    let w = warnings(&plan(p.clone()), &[true], &everything_there());
    assert_eq!(codes(&w), vec![("NO_OUTPUTS_DECLARED", "$.tasks[0].outputs")]);
    assert!(w[0].message.contains("undeclared_write"), "{}", w[0].message);
    // Reads only, or a provider that starts no process: nothing to say.
    p["tasks"][0]["effect"] = json!("none");
    assert_eq!(warnings(&plan(p.clone()), &[true], &everything_there()), vec![]);
    p["tasks"][0]["effect"] = json!("local");
    p["tasks"][0]["provider"] = json!("web");
    p["tasks"][0]["action"] = json!({"body": {}});
    p["providers"]["web"] = json!({"kind": "http", "endpoint": "https://example.com/x"});
    assert_eq!(warnings(&plan(p), &[true], &everything_there()).len(), 0);
}

#[test]
fn a_missing_effect_is_named_with_what_it_costs() {
    let w = warnings(&plan(clean()), &[false], &everything_there());
    assert_eq!(codes(&w), vec![("EFFECT_DEFAULTED", "$.tasks[0].effect")]);
    assert!(w[0].message.contains("external") && w[0].message.contains("approve"), "{}", w[0].message);
    // An unknown list (a scan that failed) never invents the warning.
    assert_eq!(warnings(&plan(clean()), &[], &everything_there()), vec![]);
}

#[test]
fn every_program_is_looked_up_where_it_is_named() {
    let none = Fake { programs: HashSet::new(), files: ["money.py", "src/*.py"].into() };
    let w = warnings(&plan(clean()), &[true], &none);
    assert_eq!(
        codes(&w),
        vec![
            ("EXECUTABLE_NOT_FOUND", "$.providers.tools.command[0]"),
            ("EXECUTABLE_NOT_FOUND", "$.goal.acceptance[0].check.run[0]"),
            ("EXECUTABLE_NOT_FOUND", "$.tasks[0].action.run[0]"),
        ],
        "each program once, at its first place: python3 is the acceptance check's"
    );
    assert!(w[2].message.contains("`sh`") && w[2].message.contains("on PATH"), "{}", w[2].message);
    assert!(w[1].message.ends_with("; 2 more places name it"), "the validation and the context: {}", w[1].message);
    assert!(!w[2].message.contains("more place"), "{}", w[2].message);
}

#[test]
fn a_program_with_a_slash_is_looked_for_in_the_workspace() {
    let mut p = clean();
    p["tasks"][0]["action"]["run"] = json!(["./tools/apply.sh"]);
    let w = warnings(&plan(p), &[true], &everything_there());
    assert_eq!(codes(&w), vec![("EXECUTABLE_NOT_FOUND", "$.tasks[0].action.run[0]")]);
    assert!(w[0].message.contains("in the workspace"), "{}", w[0].message);
}

#[test]
fn an_input_that_matches_nothing_is_named() {
    let only_money = Fake { programs: everything_there().programs, files: ["money.py"].into() };
    let w = warnings(&plan(clean()), &[true], &only_money);
    assert_eq!(codes(&w), vec![("INPUT_MATCHES_NOTHING", "$.tasks[0].inputs[1]")]);
}

#[test]
fn a_cost_above_max_cost_is_named_and_the_boundary_is_not() {
    let mut p = clean();
    p["tasks"][0]["cost"] = json!(1.500001);
    let w = warnings(&plan(p), &[true], &everything_there());
    assert_eq!(codes(&w), vec![("COST_OVER_BUDGET", "$.tasks[0].cost")]);
    // The default max_cost is 0: any cost is over it.
    let mut p = clean();
    p["budgets"] = json!({});
    p["tasks"][0]["cost"] = json!(0.01);
    assert_eq!(codes(&warnings(&plan(p), &[true], &everything_there())), vec![("COST_OVER_BUDGET", "$.tasks[0].cost")]);
}

#[test]
fn a_goal_without_acceptance_checks_is_named() {
    let mut p = clean();
    p["goal"]["acceptance"] = json!([]);
    assert_eq!(
        codes(&warnings(&plan(p), &[true], &everything_there())),
        vec![("NO_ACCEPTANCE_CHECK", "$.goal.acceptance")]
    );
    // Criteria without a check are no check either.
    let mut p = clean();
    p["goal"]["acceptance"] = json!([{"id": "A1", "statement": "it reads well"}]);
    assert_eq!(
        codes(&warnings(&plan(p), &[true], &everything_there())),
        vec![("NO_ACCEPTANCE_CHECK", "$.goal.acceptance")]
    );
    // One checked, one not: the unchecked one is named.
    let mut p = clean();
    p["goal"]["acceptance"].as_array_mut().unwrap().push(json!({"id": "A2", "statement": "it reads well"}));
    assert_eq!(
        codes(&warnings(&plan(p), &[true], &everything_there())),
        vec![("ACCEPTANCE_UNCHECKED", "$.goal.acceptance[1]")]
    );
}

#[test]
fn codes_are_stable_and_distinct() {
    let words: HashSet<&str> = WarningCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(words.len(), WarningCode::ALL.len());
    assert!(words.iter().all(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_')));
}

#[test]
fn a_plain_statement_constraint_is_named_as_not_checked() {
    let mut p = clean();
    p["goal"]["constraints"] = json!(["stay tidy", {"id": "C1", "statement": "s", "protect": ["tests"]}]);
    let w = warnings(&plan(p), &[true], &everything_there());
    assert_eq!(codes(&w), vec![("CONSTRAINT_UNCHECKED", "$.goal.constraints[0]")]);
    assert!(w[0].message.contains("goal completed (N constraints not checked)"), "{}", w[0].message);
}

#[test]
fn a_task_that_names_a_host_without_a_network_is_warned_once_with_the_line_to_add() {
    let mut p = clean();
    p["tasks"][0]["action"]["run"] = json!(["sh", "-c", "curl -s http://127.0.0.1:8765/load > out.json"]);
    let w = warnings(&plan(p.clone()), &[true], &everything_there());
    assert_eq!(codes(&w), vec![("NETWORK_UNDECLARED", "$.tasks[0].network")]);
    assert!(w[0].message.contains("`\"network\": {\"connect\": [\"127.0.0.1:8765\"]}`"), "{}", w[0].message);
    // Declared on the task or on its provider: nothing to say.
    let mut declared = p.clone();
    declared["tasks"][0]["network"] = json!({"connect": ["127.0.0.1:8765"]});
    assert_eq!(codes(&warnings(&plan(declared), &[true], &everything_there())), vec![]);
    p["providers"]["sh"]["network"] = json!({"connect": ["127.0.0.1:*"]});
    assert_eq!(codes(&warnings(&plan(p), &[true], &everything_there())), vec![]);
}
