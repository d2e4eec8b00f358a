//! `engine goals`: the goals a store holds, the most recently changed
//! first, each with its state, active revision and last change.

use serde_json::json;

use super::Output;
use crate::clock::utc;
use crate::error::Result;
use crate::limits::GOALS_LISTED_MAX;
use crate::store::Store;

pub fn render(store: &Store) -> Result<Output> {
    let (goals, count) = store.snapshot(|l| Ok((l.goal_summaries(GOALS_LISTED_MAX)?, l.goal_count()?)))?;
    let width = goals.iter().map(|g| g.id.as_str().chars().count()).max().unwrap_or(4).max(4);
    let mut text = if goals.is_empty() {
        format!("no goal in {} yet: `engine run PLAN` registers one\n", store.path().display())
    } else {
        format!("  {}  {:<16}  {:>8}  {:<20}  STATEMENT\n", super::pad("GOAL", width), "STATE", "REVISION", "UPDATED")
    };
    for g in &goals {
        text.push_str(&format!(
            "  {}  {:<16}  {:>8}  {:<20}  {}\n",
            super::pad(g.id.as_str(), width),
            g.state.as_str(),
            g.active_revision.get(),
            utc(g.updated_at_ms),
            first_line(&g.statement)
        ));
    }
    let left_out = count - goals.len() as i64;
    if left_out > 0 {
        let goals = super::count(usize::try_from(left_out).unwrap_or(usize::MAX), "goal");
        text.push_str(&format!("  … and {goals} changed earlier, not listed\n"));
    }
    let rows: Vec<_> = goals
        .iter()
        .map(|g| {
            json!({"id": g.id, "state": g.state, "active_revision": g.active_revision, "statement": g.statement,
                   "first_run_at": utc(g.first_run_at_ms), "updated_at": utc(g.updated_at_ms)})
        })
        .collect();
    let json = json!({"store": store.path(), "goals": rows, "count": count});
    Ok(Output { text, json, exit_code: 0 })
}

/// A statement on one line, at most 60 characters.
fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}
