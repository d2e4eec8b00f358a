//! Structural validation of a parsed plan: refs, providers, dependencies,
//! cycles, action shapes, and input paths that must stay in the workspace.
//! Pure apart from the symlink check on inputs, which asks the filesystem.

use std::collections::{HashMap, HashSet};

use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::Value;

use crate::cost::Cost;
use crate::error::{Code, Error, Result};
use crate::plan::adapters::{self, Adapter};
use crate::plan::model::{CheckedConstraint, PlanFile, ProviderSpec, Task};
use crate::workspace::lexically_inside;

/// Validate everything but the filesystem; returns task indices in a
/// topological order (dependencies first; ties by file order). The checks
/// run in this order, and the first failure is the one reported.
pub fn validate_structure(plan: &PlanFile) -> Result<Vec<usize>> {
    if plan.version != 1 {
        return Err(Error::new(
            Code::PlanInvalid,
            format!("unsupported plan version {}; this engine reads version 1", plan.version),
        )
        .at("$.version"));
    }
    super::bounds::check(plan)?;
    goal(plan)?;
    budgets(plan)?;
    let mut adapters = HashMap::with_capacity(plan.providers.len());
    for (name, spec) in &plan.providers {
        adapters.insert(name.as_str(), provider(name, spec)?);
        sandbox_writes(name, spec)?;
        super::reach::check_provider(name, spec)?;
    }
    people(plan)?;
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(plan.tasks.len());
    for (i, task) in plan.tasks.iter().enumerate() {
        let at = format!("$.tasks[{i}]");
        if task.task_ref.trim().is_empty() {
            return Err(Error::new(Code::PlanInvalid, "task ref is empty").at(format!("{at}.ref")));
        }
        if index.insert(task.task_ref.as_str(), i).is_some() {
            return Err(Error::new(Code::DuplicateTaskRef, format!("task ref `{}` is used twice", task.task_ref))
                .at(format!("{at}.ref")));
        }
        self::task(plan, task, &at)?;
        if let (Some(rule), Some(adapter)) = (&task.observe, adapters.get(task.provider.as_str())) {
            adapters::check_task_rule(adapter.provider(), rule, &at)?;
            if let (Some(ProviderSpec::Mcp { tools, .. }), Some(tool)) =
                (plan.providers.get(&task.provider), rule.get("tool").and_then(Value::as_str))
            {
                tool_allowed(&task.provider, tools.as_deref(), tool, &format!("{at}.observe.tool"))?;
            }
        }
    }
    topo_order(plan, &dependency_graph(plan, &index)?)
}

fn goal(plan: &PlanFile) -> Result<()> {
    let goal = plan.goal.as_ref().ok_or_else(|| Error::new(Code::GoalRequired, "the plan has no goal").at("$.goal"))?;
    if goal.id.trim().is_empty() {
        return Err(Error::new(Code::PlanInvalid, "goal id is empty").at("$.goal.id"));
    }
    if goal.statement.trim().is_empty() {
        return Err(Error::new(Code::GoalRequired, "the goal has no statement").at("$.goal.statement"));
    }
    unique_ids(goal.acceptance.iter().map(|a| a.id.as_str()), "$.goal.acceptance", "acceptance id")?;
    for (i, a) in goal.acceptance.iter().enumerate() {
        if let Some(check) = &a.check {
            non_empty_argv(&check.run, || format!("$.goal.acceptance[{i}].check.run"))?;
        }
    }
    let checked = goal.constraints.iter().enumerate().filter_map(|(i, c)| c.checked().map(|c| (i, c)));
    let mut ids = HashSet::new();
    for (i, c) in checked {
        let at = format!("$.goal.constraints[{i}]");
        if !ids.insert(c.id.as_str()) {
            return Err(
                Error::new(Code::PlanInvalid, format!("constraint id `{}` is used twice", c.id)).at(format!("{at}.id"))
            );
        }
        constraint(c, &at)?;
    }
    Ok(())
}

/// A checkable constraint: an id, a statement, and something to check.
fn constraint(c: &CheckedConstraint, at: &str) -> Result<()> {
    if c.id.trim().is_empty() {
        return Err(Error::new(Code::PlanInvalid, "constraint id is empty").at(format!("{at}.id")));
    }
    if c.statement.trim().is_empty() {
        return Err(Error::new(Code::PlanInvalid, "constraint statement is empty").at(format!("{at}.statement")));
    }
    if c.protect.is_empty() && c.check.is_none() {
        return Err(Error::new(
            Code::PlanInvalid,
            format!(
                "constraint `{}` has neither `protect` nor `check`: the engine would check nothing; \
                 write a constraint it does not check as a plain string",
                c.id
            ),
        )
        .at(at.to_string()));
    }
    path_globs(&c.protect, &format!("{at}.protect"), &format!("protected path of constraint `{}`", c.id))?;
    if let Some(check) = &c.check {
        non_empty_argv(&check.run, || format!("{at}.check.run"))?;
    }
    Ok(())
}

/// Paths or globs that must name places inside the workspace.
fn path_globs(list: &[String], at: &str, what: &str) -> Result<()> {
    for (j, p) in list.iter().enumerate() {
        let here = || format!("{at}[{j}]");
        if p.trim().is_empty() {
            return Err(Error::new(Code::PlanInvalid, format!("{what} is empty")).at(here()));
        }
        lexically_inside(p)
            .map_err(|why| Error::new(Code::InputOutsideWorkspace, format!("{what} `{p}` {why}")).at(here()))?;
        if p.contains(['*', '?', '[']) {
            glob::Pattern::new(p).map_err(|e| {
                Error::new(Code::PlanInvalid, format!("{what} `{p}` is not a valid glob: {}", e.msg)).at(here())
            })?;
        }
    }
    Ok(())
}

/// No `outputs` path names a VCS or tool folder (`.git`, `.hg`, `.jj`,
/// `.engine`, at any depth): those are never a task's outputs
/// (`decide::declared`).
fn never_outputs(task: &Task, at: &str) -> Result<()> {
    for (j, p) in task.outputs.iter().enumerate() {
        if crate::decide::declared::never_output(p) {
            return Err(Error::new(
                Code::PlanInvalid,
                format!(
                    "`outputs` path `{p}` of task `{}` lies in a VCS or engine folder: `.git`, `.hg`, `.jj` and \
                     `.engine` are never a task's outputs",
                    task.task_ref
                ),
            )
            .at(format!("{at}.outputs[{j}]")));
        }
    }
    Ok(())
}

/// A provider's config, through the providers' own parser, and its URLs
/// against the scheme and host policy; the files it names are read later,
/// with the workspace (`Plan::from_file`). Returns the parsed adapter, which
/// checks its tasks' read-back rules.
fn provider(name: &str, spec: &ProviderSpec) -> Result<Adapter> {
    if let ProviderSpec::Mcp { command: Some(command), .. } = spec {
        non_empty_argv(command, || format!("$.providers.{name}.command"))?;
    }
    let adapter = Adapter::parse(spec, None).map_err(|e| adapters::at_provider(name, e))?;
    Adapter::check_urls(spec).map_err(|e| adapters::at_provider(name, e))?;
    if let ProviderSpec::Mcp { observe_tool, observe, tools, .. } = spec {
        allow_list(name, tools.as_deref(), observe_tool.as_deref(), observe.as_ref())?;
    }
    if let ProviderSpec::Command { protocol, model: Some(m), .. } = spec {
        let why = match protocol {
            None => Some("only an `agent-json` provider reports a model to hold to it"),
            Some(_) if m.trim().is_empty() || m.chars().count() > 256 => Some("must be 1 to 256 characters"),
            Some(_) => None,
        };
        if let Some(why) = why {
            return Err(Error::new(Code::PlanInvalid, format!("`model` of provider `{name}`: {why}"))
                .at(format!("$.providers.{name}.model")));
        }
    }
    Ok(adapter)
}

/// An MCP provider's `tools` allow-list: no empty name, and the tool its
/// read-back calls (`observe_tool`, or its `observe` rule's `tool`) on it.
fn allow_list(name: &str, tools: Option<&[String]>, observe_tool: Option<&str>, observe: Option<&Value>) -> Result<()> {
    if let Some(j) = tools.unwrap_or_default().iter().position(|t| t.trim().is_empty()) {
        return Err(Error::new(Code::PlanInvalid, "a tool name is empty").at(format!("$.providers.{name}.tools[{j}]")));
    }
    if let Some(t) = observe_tool {
        tool_allowed(name, tools, t, &format!("$.providers.{name}.observe_tool"))?;
    }
    if let Some(t) = observe.and_then(|r| r.get("tool")).and_then(Value::as_str) {
        tool_allowed(name, tools, t, &format!("$.providers.{name}.observe.tool"))?;
    }
    Ok(())
}

/// A provider's declared writable paths: absolute, `~` or `~/…` (the
/// sandbox expands `~` to the home folder when the run starts).
fn sandbox_writes(name: &str, spec: &ProviderSpec) -> Result<()> {
    for (i, w) in spec.declared_writes().iter().enumerate() {
        let why = if w.is_empty() {
            Some("is empty")
        } else if w.starts_with('~') && w != "~" && !w.starts_with("~/") {
            Some("~user is not supported; write the absolute path")
        } else if !w.starts_with('~') && !w.starts_with('/') {
            Some("must be absolute or start with ~/")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Error::new(Code::PlanInvalid, format!("sandbox write path {w:?} {why}"))
                .at(format!("$.providers.{name}.sandbox.write[{i}]")));
        }
    }
    Ok(())
}

/// `approvals.expire_after`: a duration (`decide::expiry`).
fn approvals(plan: &PlanFile) -> Result<()> {
    let Some(after) = plan.approvals.as_ref().and_then(|a| a.expire_after.as_deref()) else { return Ok(()) };
    crate::decide::expiry::parse(after)
        .map(|_| ())
        .map_err(|why| Error::new(Code::PlanInvalid, why).at("$.approvals.expire_after"))
}

/// `people`: every user name is a name (not empty, no whitespace).
fn people(plan: &PlanFile) -> Result<()> {
    approvals(plan)?;
    let Some(people) = &plan.people else { return Ok(()) };
    for (act, names) in people.lists() {
        for (i, n) in names.iter().enumerate() {
            if n.is_empty() || n.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(Error::new(Code::PlanInvalid, format!("{n:?} is not an operating-system user name"))
                    .at(format!("$.people.{act}[{i}]")));
            }
        }
    }
    Ok(())
}

/// How many declared providers an unknown provider's error names.
const PROVIDERS_NAMED_MAX: usize = 20;

/// `declared: `a`, `b``, sorted (and `… N more` past the bound), or that
/// there is none.
fn declared<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    if names.is_empty() {
        return "the plan declares no provider".to_string();
    }
    names.sort_unstable();
    let more = names.len().saturating_sub(PROVIDERS_NAMED_MAX);
    let shown: Vec<String> = names.iter().take(PROVIDERS_NAMED_MAX).map(|n| format!("`{n}`")).collect();
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("declared: {}{more}", shown.join(", "))
}

/// One task's provider, action, validations, cost and inputs.
fn task(plan: &PlanFile, task: &Task, at: &str) -> Result<()> {
    let spec = plan.providers.get(&task.provider).ok_or_else(|| {
        Error::new(
            Code::UnknownProvider,
            format!(
                "task `{}` names provider `{}`, which `providers` does not declare{} ({})",
                task.task_ref,
                task.provider,
                super::suggest::did_you_mean(&task.provider, plan.providers.keys().map(String::as_str)),
                declared(plan.providers.keys().map(String::as_str))
            ),
        )
        .at(format!("{at}.provider"))
    })?;
    action_shape(task, spec, at)?;
    super::reach::check_task(task, spec, at)?;
    if let (ProviderSpec::Mcp { tools, .. }, Some(tool)) = (spec, task.action.get("tool").and_then(|t| t.as_str())) {
        tool_allowed(&task.provider, tools.as_deref(), tool, &format!("{at}.action.tool"))?;
    }
    task_lists(task, at)?;
    for (j, v) in task.validations.iter().enumerate() {
        non_empty_argv(&v.run, || format!("{at}.validations[{j}].run"))?;
    }
    if let Err(why) = Cost::from_units(task.cost) {
        return Err(Error::new(Code::PlanInvalid, format!("cost {why}")).at(format!("{at}.cost")));
    }
    if task.may_spend && !matches!(spec, ProviderSpec::Command { protocol: Some(_), .. }) {
        return Err(Error::new(
            Code::PlanInvalid,
            format!(
                "task `{}` says it may spend, but provider `{}` reports no spending: only a command provider speaking `agent-json` does (its report's `spent`); the calls the engine makes itself count their `cost`",
                task.task_ref, task.provider
            ),
        )
        .at(format!("{at}.may_spend")));
    }
    for (j, input) in task.inputs.iter().enumerate() {
        lexically_inside(input).map_err(|why| {
            Error::new(Code::InputOutsideWorkspace, format!("input `{input}` of task `{}` {why}", task.task_ref))
                .at(format!("{at}.inputs[{j}]"))
        })?;
        if input.contains(['*', '?', '[']) {
            glob::Pattern::new(input).map_err(|e| {
                Error::new(
                    Code::PlanInvalid,
                    format!("input `{input}` of task `{}` is not a valid glob: {}", task.task_ref, e.msg),
                )
                .at(format!("{at}.inputs[{j}]"))
            })?;
        }
    }
    Ok(())
}

/// A task's path lists and validation ids. The places and words are
/// written only for a list there is (an empty one has nothing to
/// refuse): seven strings a task were most of the check's time in a plan
/// of thousands of tasks.
fn task_lists(task: &Task, at: &str) -> Result<()> {
    if !task.may_change.is_empty() {
        path_globs(
            &task.may_change,
            &format!("{at}.may_change"),
            &format!("`may_change` path of task `{}`", task.task_ref),
        )?;
    }
    if !task.outputs.is_empty() {
        path_globs(&task.outputs, &format!("{at}.outputs"), &format!("`outputs` path of task `{}`", task.task_ref))?;
    }
    never_outputs(task, at)?;
    if !task.validations.is_empty() {
        unique_ids(task.validations.iter().map(|v| v.id.as_str()), &format!("{at}.validations"), "validation id")?;
    }
    Ok(())
}

/// A tool the plan calls on an MCP provider with a `tools` allow-list must
/// be on it (no list: any tool the server offers, checked before the run).
fn tool_allowed(provider: &str, allowed: Option<&[String]>, tool: &str, at: &str) -> Result<()> {
    match allowed {
        Some(list) if !list.iter().any(|t| t == tool) => Err(Error::new(
            Code::ToolNotAllowed,
            format!("tool `{tool}` is not in provider `{provider}`'s `tools` allow-list {list:?}"),
        )
        .at(at.to_string())
        .with_details(serde_json::json!({"provider": provider, "tool": tool, "allowed": list}))),
        _ => Ok(()),
    }
}

/// The tasks as a graph, an edge from each dependency to its dependant.
fn dependency_graph(plan: &PlanFile, index: &HashMap<&str, usize>) -> Result<DiGraph<usize, ()>> {
    let mut graph: DiGraph<usize, ()> = DiGraph::with_capacity(plan.tasks.len(), plan.tasks.len());
    let nodes: Vec<NodeIndex> = (0..plan.tasks.len()).map(|i| graph.add_node(i)).collect();
    for (i, task) in plan.tasks.iter().enumerate() {
        let mut seen = HashSet::new();
        for (j, dep) in task.depends_on.iter().enumerate() {
            let &d = index.get(dep.as_str()).ok_or_else(|| {
                Error::new(
                    Code::UnknownDependency,
                    format!(
                        "task `{}` depends on `{dep}`, which is not a task of this plan{}",
                        task.task_ref,
                        super::suggest::did_you_mean(dep, index.keys().copied())
                    ),
                )
                .at(format!("$.tasks[{i}].depends_on[{j}]"))
            })?;
            if seen.insert(d) {
                graph.add_edge(nodes[d], nodes[i], ());
            }
        }
    }
    Ok(graph)
}

fn budgets(plan: &PlanFile) -> Result<()> {
    let b = &plan.budgets;
    if let Err(why) = Cost::from_units(b.max_cost) {
        return Err(Error::new(Code::PlanInvalid, format!("max_cost {why}")).at("$.budgets.max_cost"));
    }
    if b.max_attempts_per_task == 0 {
        return Err(Error::new(Code::PlanInvalid, "max_attempts_per_task must be at least 1")
            .at("$.budgets.max_attempts_per_task"));
    }
    Ok(())
}

fn unique_ids<'a>(ids: impl Iterator<Item = &'a str>, at: &str, what: &str) -> Result<()> {
    let mut seen = HashSet::new();
    for (i, id) in ids.enumerate() {
        if id.trim().is_empty() {
            return Err(Error::new(Code::PlanInvalid, format!("{what} is empty")).at(format!("{at}[{i}].id")));
        }
        if !seen.insert(id) {
            return Err(
                Error::new(Code::PlanInvalid, format!("{what} `{id}` is used twice")).at(format!("{at}[{i}].id"))
            );
        }
    }
    Ok(())
}

/// `at` is written only when the argv is refused.
fn non_empty_argv(argv: &[String], at: impl FnOnce() -> String) -> Result<()> {
    program_named(argv.first().map(String::as_str), at)
}

fn program_named(program: Option<&str>, at: impl FnOnce() -> String) -> Result<()> {
    match program {
        Some(p) if !p.is_empty() => Ok(()),
        _ => Err(Error::new(Code::PlanInvalid, "argv must name a program").at(at())),
    }
}

/// The action must have the shape its provider kind reads.
fn action_shape(task: &Task, spec: &ProviderSpec, at: &str) -> Result<()> {
    let obj = task
        .action
        .as_object()
        .ok_or_else(|| Error::new(Code::PlanInvalid, "action must be an object").at(format!("{at}.action")))?;
    let allowed: &[&str] = match spec {
        ProviderSpec::Command { .. } => &["run"],
        ProviderSpec::Http { .. } => &["body", "method", "headers"],
        ProviderSpec::Mcp { .. } => &["tool", "arguments"],
        ProviderSpec::Builtin {} => &["op", "ms"],
    };
    if let Some(key) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::new(
            Code::PlanInvalid,
            format!(
                "unknown field `{key}` for a {} provider's action, expected one of {allowed:?}{}",
                kind_name(spec),
                super::suggest::did_you_mean(key, allowed.iter().copied())
            ),
        )
        .at(format!("{at}.action.{key}")));
    }
    match spec {
        ProviderSpec::Command { .. } => command_action(obj, at),
        ProviderSpec::Http { .. } => http_action(obj, at),
        ProviderSpec::Builtin {} => providers::builtin::Op::parse(&task.action).map(|_| ()).map_err(|e| {
            let place = if e.path.is_empty() { format!("{at}.action") } else { format!("{at}.action.{}", e.path) };
            Error::new(Code::PlanInvalid, e.message).at(place)
        }),
        ProviderSpec::Mcp { .. } => {
            let tool = obj.get("tool").and_then(|t| t.as_str()).unwrap_or("");
            if tool.trim().is_empty() {
                return Err(Error::new(Code::PlanInvalid, "an mcp action needs `tool` (a non-empty string)")
                    .at(format!("{at}.action.tool")));
            }
            if obj.get("arguments").is_some_and(|a| !a.is_object()) {
                return Err(
                    Error::new(Code::PlanInvalid, "`arguments` must be an object").at(format!("{at}.action.arguments"))
                );
            }
            Ok(())
        }
    }
}

/// A command provider's action: `run`, an argv array naming a program.
fn command_action(obj: &serde_json::Map<String, serde_json::Value>, at: &str) -> Result<()> {
    let run = obj.get("run").ok_or_else(|| {
        Error::new(Code::PlanInvalid, "a command action needs `run` (an argv array)").at(format!("{at}.action"))
    })?;
    // Looked at in place: no copy of the argv made to be checked.
    let argv = run.as_array().filter(|a| a.iter().all(serde_json::Value::is_string)).ok_or_else(|| {
        Error::new(Code::PlanInvalid, "`run` must be an array of strings").at(format!("{at}.action.run"))
    })?;
    program_named(argv.first().and_then(serde_json::Value::as_str), || format!("{at}.action.run"))
}

/// An http provider's action: a `body`, and a string `method` and string
/// `headers` where given.
fn http_action(obj: &serde_json::Map<String, serde_json::Value>, at: &str) -> Result<()> {
    if !obj.contains_key("body") {
        return Err(Error::new(Code::PlanInvalid, "an http action needs `body`").at(format!("{at}.action")));
    }
    if let Some(m) = obj.get("method") {
        if !m.is_string() {
            return Err(Error::new(Code::PlanInvalid, "`method` must be a string").at(format!("{at}.action.method")));
        }
    }
    if let Some(h) = obj.get("headers") {
        let ok = h.as_object().is_some_and(|h| h.values().all(|v| v.is_string()));
        if !ok {
            return Err(
                Error::new(Code::PlanInvalid, "`headers` must map names to strings").at(format!("{at}.action.headers"))
            );
        }
    }
    Ok(())
}

fn kind_name(spec: &ProviderSpec) -> &'static str {
    match spec {
        ProviderSpec::Command { .. } => "command",
        ProviderSpec::Http { .. } => "http",
        ProviderSpec::Mcp { .. } => "mcp",
        ProviderSpec::Builtin {} => "builtin",
    }
}

/// Kahn's algorithm with a min-heap so the order is stable (file order among
/// ready tasks). On a cycle, names one concrete cycle.
fn topo_order(plan: &PlanFile, graph: &DiGraph<usize, ()>) -> Result<Vec<usize>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = graph.node_count();
    let mut indegree: Vec<usize> = vec![0; n];
    for e in graph.raw_edges() {
        indegree[e.target().index()] += 1;
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for next in graph.neighbors(NodeIndex::new(i)) {
            let j = next.index();
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    let cycle = find_cycle(graph, &indegree);
    let refs: Vec<&str> = cycle.iter().map(|&i| plan.tasks[i].task_ref.as_str()).collect();
    let first = cycle[0];
    Err(Error::new(Code::PlanCycle, format!("dependency cycle: {}", refs.join(" -> ")))
        .at(format!("$.tasks[{first}].depends_on"))
        .with_details(serde_json::json!({ "cycle": refs })))
}

/// Every node left with indegree > 0 after Kahn lies on or behind a cycle.
/// Walking backwards along edges from such a node (each has a predecessor
/// that is also left) must revisit a node: that loop is a cycle.
fn find_cycle(graph: &DiGraph<usize, ()>, indegree: &[usize]) -> Vec<usize> {
    let start = (0..indegree.len()).find(|&i| indegree[i] > 0).expect("a node is left on a cycle");
    let mut pos: HashMap<usize, usize> = HashMap::new();
    let mut path = Vec::new();
    let mut cur = start;
    loop {
        if let Some(&p) = pos.get(&cur) {
            // path[p..] runs backwards along edges; reverse it to read
            // "dependency -> dependent" and close the loop.
            let mut cycle: Vec<usize> = path[p..].to_vec();
            cycle.reverse();
            cycle.push(cycle[0]);
            return cycle;
        }
        pos.insert(cur, path.len());
        path.push(cur);
        cur = graph
            .neighbors_directed(NodeIndex::new(cur), petgraph::Direction::Incoming)
            .map(|n| n.index())
            .find(|&i| indegree[i] > 0)
            .expect("a node left by Kahn has a predecessor left too");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The error `validate_structure` gives for a plan whose one task is
    /// `task` (a command provider `sh`): its code, message and place.
    fn refused(task: Value) -> (Code, String, Option<String>) {
        let plan = json!({"version": 1, "goal": {"id": "g", "statement": "s"},
                          "providers": {"sh": {"kind": "command"}}, "tasks": [task]});
        let file: PlanFile = serde_json::from_value(plan).unwrap();
        let e = validate_structure(&file).unwrap_err();
        (e.code, e.message, e.place)
    }

    fn task(fields: Value) -> Value {
        let mut t = json!({"ref": "T1", "title": "t", "provider": "sh", "action": {"run": ["true"]}});
        for (k, v) in fields.as_object().unwrap() {
            t[k] = v.clone();
        }
        t
    }

    /// The places of a refused task's fields, written only when refused,
    /// are the ones they always were.
    #[test]
    fn a_refused_field_of_a_task_is_named_at_its_place() {
        let argv = (Code::PlanInvalid, "argv must name a program".to_string(), Some("$.tasks[0].action.run".into()));
        assert_eq!(refused(task(json!({"action": {"run": []}}))), argv);
        assert_eq!(refused(task(json!({"action": {"run": [""]}}))), argv);
        let shape =
            (Code::PlanInvalid, "`run` must be an array of strings".to_string(), Some("$.tasks[0].action.run".into()));
        assert_eq!(refused(task(json!({"action": {"run": "true"}}))), shape);
        assert_eq!(refused(task(json!({"action": {"run": ["true", 1]}}))), shape);
        let (code, message, place) = refused(task(json!({"may_change": ["a", " "]})));
        assert_eq!((code, place.as_deref()), (Code::PlanInvalid, Some("$.tasks[0].may_change[1]")));
        assert_eq!(message, "`may_change` path of task `T1` is empty");
        let (_, message, place) = refused(task(json!({"outputs": ["../x"]})));
        assert_eq!(place.as_deref(), Some("$.tasks[0].outputs[0]"), "{message}");
        let twice = json!([{"id": "V", "run": ["true"]}, {"id": "V", "run": ["true"]}]);
        let (_, message, place) = refused(task(json!({"validations": twice})));
        assert_eq!(
            (message.as_str(), place.as_deref()),
            ("validation id `V` is used twice", Some("$.tasks[0].validations[1].id"))
        );
        let (_, message, place) = refused(task(json!({"validations": [{"id": "V", "run": []}]})));
        assert_eq!(
            (message.as_str(), place.as_deref()),
            ("argv must name a program", Some("$.tasks[0].validations[0].run"))
        );
    }
}
