//! `engine check`, `engine digest`, `engine graph`.

use serde_json::json;

use super::Output;
use crate::plan::warnings::Warning;
use crate::plan::Plan;

pub fn check(p: &Plan, warnings: &[Warning]) -> Output {
    let goal = p.goal();
    let checks = goal.acceptance.iter().filter(|a| a.check.is_some()).count();
    let mut text = format!(
        "plan ok: goal `{}`, {} task(s), {} provider(s), {checks} acceptance check(s)",
        goal.id,
        p.file.tasks.len(),
        p.file.providers.len(),
    );
    if !warnings.is_empty() {
        text.push_str(&format!(", {} warning(s) (on stderr)", warnings.len()));
    }
    text.push('\n');
    Output {
        text,
        json: json!({"ok": true, "goal_id": goal.id, "tasks": p.file.tasks.len(),
            "order": p.order.iter().map(|&i| &p.file.tasks[i].task_ref).collect::<Vec<_>>(), "warnings": warnings}),
        exit_code: 0,
    }
}

/// One warning as stderr shows it.
pub fn warning_line(w: &Warning) -> String {
    format!("warning: {}: {} (at {})", w.code, w.message, w.path)
}

pub fn digests(p: &Plan) -> Output {
    let goal = p.goal();
    let mut text =
        format!("plan_digest           {}\ngoal_contract_digest  {}\n", p.digests.plan, p.digests.goal_contract);
    let mut tasks = Vec::new();
    for &i in &p.order {
        let t = &p.file.tasks[i];
        let d = &p.digests.tasks[&t.task_ref];
        text.push_str(&format!(
            "\ntask {}\n  meaning_digest     {}\n  dependency_digest  {}\n  request_digest     {}\n  operation_id       {}\n",
            t.task_ref, d.meaning, d.dependencies, d.request, d.operation_id
        ));
        tasks.push(json!({"ref": t.task_ref, "meaning_digest": d.meaning, "dependency_digest": d.dependencies,
            "request_digest": d.request, "operation_id": d.operation_id}));
    }
    Output {
        text,
        json: json!({"goal_id": goal.id, "plan_digest": p.digests.plan, "goal_contract_digest": p.digests.goal_contract, "tasks": tasks}),
        exit_code: 0,
    }
}

fn edges(p: &Plan) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    for &i in &p.order {
        let t = &p.file.tasks[i];
        for d in &t.depends_on {
            out.push((d.as_str(), t.task_ref.as_str()));
        }
    }
    out
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

pub fn dot(p: &Plan) -> Output {
    let mut text = String::from("digraph plan {\n  rankdir=LR;\n");
    for &i in &p.order {
        let t = &p.file.tasks[i];
        let label = if t.title.is_empty() { t.task_ref.clone() } else { format!("{}: {}", t.task_ref, t.title) };
        text.push_str(&format!("  {} [label={}];\n", quote(&t.task_ref), quote(&label)));
    }
    for (a, b) in edges(p) {
        text.push_str(&format!("  {} -> {};\n", quote(a), quote(b)));
    }
    text.push_str("}\n");
    Output { json: json!({"format": "dot", "graph": text}), text, exit_code: 0 }
}

pub fn mermaid(p: &Plan) -> Output {
    // Mermaid ids must be simple: number the nodes, label them with refs.
    let id: std::collections::HashMap<&str, usize> =
        p.order.iter().enumerate().map(|(n, &i)| (p.file.tasks[i].task_ref.as_str(), n)).collect();
    let mut text = String::from("flowchart LR\n");
    for &i in &p.order {
        let t = &p.file.tasks[i];
        let label = t.task_ref.replace('"', "#quot;");
        text.push_str(&format!("  t{}[\"{}\"]\n", id[t.task_ref.as_str()], label));
    }
    for (a, b) in edges(p) {
        text.push_str(&format!("  t{} --> t{}\n", id[a], id[b]));
    }
    Output { json: json!({"format": "mermaid", "graph": text}), text, exit_code: 0 }
}
