//! A completed task under a dependency that failed or runs again since:
//! said as what it is (`kept (upstream failed since)`, `stale`), never as a
//! plain `succeeded` — its completion was made from what that dependency
//! gave before. Pure: the plan's edges and the tasks' states go in; used by
//! `run`'s summary, `status` and the report.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::state::TaskState;

/// Why a completion no longer stands on its dependencies as they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "upstream", rename_all = "snake_case")]
pub enum Upstream {
    /// A dependency (this one, or further up) failed after the completion
    /// was made: the completion is kept, not re-made.
    FailedSince { task_ref: String, state: TaskState },
    /// A dependency runs again (pending, running, waiting on a person):
    /// the completion was made from its earlier output.
    Stale { task_ref: String, state: TaskState },
}

impl Upstream {
    /// The word in a state column: `kept` or `stale`.
    pub fn word(&self) -> &'static str {
        match self {
            Upstream::FailedSince { .. } => "kept",
            Upstream::Stale { .. } => "stale",
        }
    }

    /// The dependency named, and its state.
    pub fn task_ref_state(&self) -> (&str, TaskState) {
        match self {
            Upstream::FailedSince { task_ref, state } | Upstream::Stale { task_ref, state } => (task_ref, *state),
        }
    }

    /// `kept (upstream failed since: transform failed)`.
    pub fn words(&self) -> String {
        format!("{} ({})", self.word(), self.reason())
    }

    /// `upstream failed since: transform failed`.
    pub fn reason(&self) -> String {
        match self {
            Upstream::FailedSince { task_ref, state } => format!("upstream failed since: {task_ref} {state}"),
            Upstream::Stale { task_ref, state } => format!("upstream {task_ref} runs again: {state}"),
        }
    }
}

/// For a completed task (`succeeded`, `reused`), the first dependency in
/// plan order, nearest first, that failed since (or, failing none, that
/// runs again). `None` for any other task, and when every dependency
/// stands.
pub fn of<'a>(
    task_ref: &str,
    state: TaskState,
    depends_on: &dyn Fn(&str) -> &'a [String],
    state_of: &dyn Fn(&str) -> Option<TaskState>,
) -> Option<Upstream> {
    if !matches!(state, TaskState::Succeeded | TaskState::Reused) {
        return None;
    }
    let mut seen: HashSet<&str> = HashSet::new();
    let mut layer: Vec<&str> = depends_on(task_ref).iter().map(String::as_str).collect();
    let mut stale = None;
    while !layer.is_empty() {
        let mut next = Vec::new();
        for d in layer {
            if !seen.insert(d) {
                continue;
            }
            let Some(s) = state_of(d) else { continue };
            match s {
                TaskState::Failed | TaskState::EffectUnknown => {
                    return Some(Upstream::FailedSince { task_ref: d.to_string(), state: s })
                }
                TaskState::Succeeded | TaskState::Reused => {}
                _ if stale.is_none() => stale = Some(Upstream::Stale { task_ref: d.to_string(), state: s }),
                _ => {}
            }
            next.extend(depends_on(d).iter().map(String::as_str));
        }
        layer = next;
    }
    stale
}

/// Every task's, from its edges and states (a map of the tasks that have
/// one).
pub fn all<'a>(tasks: impl Iterator<Item = (&'a str, &'a [String], TaskState)> + Clone) -> HashMap<String, Upstream> {
    let edges: HashMap<&str, &[String]> = tasks.clone().map(|(r, d, _)| (r, d)).collect();
    let states: HashMap<&str, TaskState> = tasks.clone().map(|(r, _, s)| (r, s)).collect();
    let depends_on = |r: &str| -> &'a [String] { edges.get(r).copied().unwrap_or(&[]) };
    let state_of = |r: &str| states.get(r).copied();
    tasks.filter_map(|(r, _, s)| of(r, s, &depends_on, &state_of).map(|u| (r.to_string(), u))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(states: [TaskState; 3]) -> HashMap<String, Upstream> {
        let deps = [vec![], vec!["load".to_string()], vec!["transform".to_string()]];
        let refs = ["load", "transform", "publish"];
        all(refs.iter().zip(deps.iter()).zip(states).map(|((r, d), s)| (*r, d.as_slice(), s)))
    }

    #[test]
    fn a_completion_under_a_failed_dependency_is_kept_not_succeeded() {
        use TaskState::*;
        let got = chain([Succeeded, Failed, Succeeded]);
        assert_eq!(got["publish"].words(), "kept (upstream failed since: transform failed)");
        assert_eq!(got.len(), 1, "{got:?}");
        // Further up: the nearest that failed is named.
        let got = chain([EffectUnknown, Succeeded, Succeeded]);
        assert_eq!(got["publish"].word(), "kept");
        assert_eq!(got["transform"].words(), "kept (upstream failed since: load effect_unknown)");
    }

    #[test]
    fn a_completion_under_a_dependency_that_runs_again_is_stale() {
        use TaskState::*;
        let got = chain([Succeeded, Running, Succeeded]);
        assert_eq!(got["publish"].words(), "stale (upstream transform runs again: running)");
        assert!(chain([Succeeded, Succeeded, Succeeded]).is_empty());
        assert!(chain([Succeeded, Failed, Blocked]).is_empty(), "only a completion is judged");
    }
}
