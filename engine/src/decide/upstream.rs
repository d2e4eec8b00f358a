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
    let troubled = troubled(&edges, &states);
    tasks
        .filter(|(r, _, _)| troubled.contains(r))
        .filter_map(|(r, _, s)| of(r, s, &depends_on, &state_of).map(|u| (r.to_string(), u)))
        .collect()
}

/// The tasks `of` can find something under: those from which a task that
/// does not stand (a state other than `succeeded`/`reused`) is reached
/// through dependencies that have a state, as `of` walks them. One walk
/// back from those tasks over the reversed edges, linear in the edges: a
/// chain whose every task stands is not walked once a task (quadratic).
fn troubled<'a>(edges: &HashMap<&'a str, &'a [String]>, states: &HashMap<&'a str, TaskState>) -> HashSet<&'a str> {
    let mut dependents: HashMap<&str, Vec<&'a str>> = HashMap::new();
    for (&r, &deps) in edges {
        for d in deps {
            dependents.entry(d.as_str()).or_default().push(r);
        }
    }
    let stands = |s: TaskState| matches!(s, TaskState::Succeeded | TaskState::Reused);
    let mut layer: Vec<&'a str> = states.iter().filter(|(_, &s)| !stands(s)).map(|(&r, _)| r).collect();
    let mut seen: HashSet<&str> = layer.iter().copied().collect();
    let mut out: HashSet<&'a str> = HashSet::new();
    while let Some(below) = layer.pop() {
        for &up in dependents.get(below).map_or(&[][..], Vec::as_slice) {
            out.insert(up);
            // `of` walks on through a dependency only when it has a state.
            if states.contains_key(up) && seen.insert(up) {
                layer.push(up);
            }
        }
    }
    out
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

    /// `all` walks only the tasks `troubled` names: on random DAGs with
    /// random states (some tasks without one), it answers as a walk from
    /// every task would.
    #[test]
    fn only_the_troubled_tasks_are_walked_and_the_answers_are_a_walk_from_each() {
        use TaskState::*;
        let pick = [Succeeded, Reused, Succeeded, Failed, Pending, Running, EffectUnknown, Blocked, Reused];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        for _ in 0..300 {
            let n = 1 + next(12) as usize;
            let refs: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
            let deps: Vec<Vec<String>> =
                (0..n).map(|i| (0..i).filter(|_| next(3) == 0).map(|j| refs[j].clone()).collect()).collect();
            let states: Vec<Option<TaskState>> =
                (0..n).map(|_| (next(6) != 0).then(|| pick[next(pick.len() as u64) as usize])).collect();
            let rows: Vec<(&str, &[String], TaskState)> =
                (0..n).filter_map(|i| states[i].map(|s| (refs[i].as_str(), deps[i].as_slice(), s))).collect();
            let edges: HashMap<&str, &[String]> = rows.iter().map(|&(r, d, _)| (r, d)).collect();
            let by: HashMap<&str, TaskState> = rows.iter().map(|&(r, _, s)| (r, s)).collect();
            let depends_on = |r: &str| -> &[String] { edges.get(r).copied().unwrap_or(&[]) };
            let state_of = |r: &str| by.get(r).copied();
            let walked: HashMap<String, Upstream> = rows
                .iter()
                .filter_map(|&(r, _, s)| of(r, s, &depends_on, &state_of).map(|u| (r.to_string(), u)))
                .collect();
            assert_eq!(all(rows.iter().copied()), walked, "{rows:?}");
        }
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
