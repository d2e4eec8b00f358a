//! `engine check`, `engine digest`, `engine graph`.

use serde_json::json;

use super::Output;
use crate::plan::warnings::Warning;
use crate::plan::Plan;

pub fn check(p: &Plan, warnings: &[Warning]) -> Output {
    let goal = p.goal();
    let checks = goal.acceptance.iter().filter(|a| a.check.is_some()).count();
    let mut text = format!(
        "plan ok: goal `{}`, {}, {}, {}",
        goal.id,
        super::count(p.file.tasks.len(), "task"),
        super::count(p.file.providers.len(), "provider"),
        super::count(checks, "acceptance check"),
    );
    if !warnings.is_empty() {
        text.push_str(&format!(", {} (on stderr)", super::count(warnings.len(), "warning")));
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
    let all = p.digests();
    let mut text = format!("plan_digest           {}\ngoal_contract_digest  {}\n", all.plan, all.goal_contract);
    let mut tasks = Vec::new();
    // Every task in `order` has its digests (both come from the same
    // validated plan): `get`, so that nothing here can panic.
    let ordered = p.order.iter().filter_map(|&i| p.file.tasks.get(i));
    for (t, d) in ordered.filter_map(|t| Some((t, all.tasks.get(&t.task_ref)?))) {
        text.push_str(&format!(
            "\ntask {}\n  meaning_digest     {}\n  dependency_digest  {}\n  request_digest     {}\n  operation_id       {}\n",
            t.task_ref, d.meaning, d.dependencies, d.request, d.operation_id
        ));
        tasks.push(json!({"ref": t.task_ref, "meaning_digest": d.meaning, "dependency_digest": d.dependencies,
            "request_digest": d.request, "operation_id": d.operation_id}));
    }
    Output {
        text,
        json: json!({"goal_id": goal.id, "plan_digest": all.plan, "goal_contract_digest": all.goal_contract, "tasks": tasks}),
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

/// A JSON syntax error's source line, for a person: the line (cut around
/// the column, `…` where it was cut, control characters escaped) and a
/// caret under the column. From the error's `details` (`plan::load`);
/// `None` when it has no source line.
///
/// ```text
///    14 |     {"ref": "T1", "effect": "none" "inputs": []}
///       |                                    ^
/// ```
pub fn source_excerpt(details: &serde_json::Value) -> Option<String> {
    let line = details.get("line")?.as_u64()?;
    let source = details.get("source")?;
    let text = source.get("text")?.as_str()?;
    let caret = usize::try_from(source.get("caret")?.as_u64()?).ok()?;
    let cut = |key: &str| source.get(key).and_then(serde_json::Value::as_bool).unwrap_or(false);
    let mut shown = String::new();
    let mut under = 0;
    if cut("cut_before") {
        shown.push('…');
        under += 1;
    }
    for (i, c) in text.chars().enumerate() {
        let mut one = [0u8; 4];
        let escaped = super::escape::for_terminal(c.encode_utf8(&mut one));
        // A tab is layout elsewhere; here it would move the caret.
        let escaped = if c == '\t' { "\\t".into() } else { escaped };
        if i < caret {
            under += escaped.chars().count();
        }
        shown.push_str(&escaped);
    }
    if cut("cut_after") {
        shown.push('…');
    }
    let gutter = line.to_string().len() + 2;
    Some(format!("{:>gutter$} | {shown}\n{:>gutter$} | {}^", line, "", super::pad("", under), gutter = gutter))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::source_excerpt;

    #[test]
    fn the_caret_stands_under_the_column_whatever_was_escaped_or_cut() {
        let d = json!({"line": 14, "source": {"text": "{\"a\": 1 \"b\"}", "caret": 8}});
        assert_eq!(source_excerpt(&d).unwrap(), "  14 | {\"a\": 1 \"b\"}\n     |         ^");
        let d = json!({"line": 3, "source": {"text": "\u{1b}[2J\t\"x\"", "caret": 5, "cut_before": true, "cut_after": true}});
        assert_eq!(source_excerpt(&d).unwrap(), "  3 | …\\x1b[2J\\t\"x\"…\n    |           ^");
        assert_eq!(source_excerpt(&json!({"line": 1, "source": null})), None);
    }
}
