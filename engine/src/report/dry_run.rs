//! What `engine run PLAN --dry-run` prints: each task's line as a run
//! would decide it now, what it would spend, and that nothing was done.

use std::path::Path;

use serde_json::json;

use super::Output;
use crate::run::DryRun;

pub fn render(d: &DryRun, store: Option<&Path>) -> Output {
    let revision = match d.revision {
        Some(r) => format!("revision {r}"),
        None => "not registered yet: the run would register it as revision 1".to_string(),
    };
    let mut text = format!(
        "goal {} ({revision}) — a dry run: nothing was started, sent or written\n",
        super::escape::for_terminal(d.goal_id.as_str())
    );
    let width = d.tasks.iter().map(|t| t.task_ref.chars().count()).max().unwrap_or(4).max(4);
    for t in &d.tasks {
        let spend = match t.verdict {
            "would run" => format!("  (1 provider call, cost {})", t.cost),
            _ => String::new(),
        };
        let why = t.why.as_deref().map(|w| format!("  ({})", super::escape::for_terminal(w))).unwrap_or_default();
        text.push_str(&format!(
            "  {}  {}{spend}{why}\n",
            super::pad(&super::escape::for_terminal(&t.task_ref), width),
            t.verdict
        ));
    }
    let b = &d.budgets;
    text.push_str(&format!(
        "would spend: {} (used {} of {}), cost {} (used {} of {})\n",
        super::count(d.provider_calls as usize, "provider call"),
        b["max_provider_calls"]["used"],
        b["max_provider_calls"]["limit"],
        d.cost,
        b["max_cost"]["used"],
        b["max_cost"]["limit"]
    ));
    text.push_str(&match d.acceptance_checks {
        Some(n) => format!("acceptance: {} would run once every task completes\n", super::count(n, "check")),
        None => "acceptance: not reached (some task would not complete)\n".to_string(),
    });
    if !d.not_observed.is_empty() {
        text.push_str(&format!(
            "not observed: {} (a context command computes their checkpoint; a dry run starts no process)\n",
            d.not_observed.join(", ")
        ));
    }
    match store {
        Some(p) => text.push_str(&format!("store read (not written): {}\n", p.display())),
        None => text.push_str("no store yet: the run would make one\n"),
    }
    let mut j = json!(d);
    j["dry_run"] = json!(true);
    j["store"] = json!(store);
    Output { text, json: j, exit_code: 0 }
}
