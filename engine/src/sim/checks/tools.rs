//! Never reused across a changed tool without a person's act (issue 43):
//! the simulated HTTP service names its version in every answer
//! (`version_header`), and the session moves it on now and then. A plain
//! run starts on the completions the ledger holds; of those, a task still
//! complete at the run's end on the same completion (kept, not run again)
//! must have recorded the version the newest completion of its provider
//! recorded when the run began — unless a person ran it with
//! `--reuse-across-tool-change`, and then a `completion_kept` event names
//! that act for it. A task with an `external` effect stands on a plain
//! run whatever its tool (docs/states.md): left out. Read from the ledger
//! alone; the newest value is worked out here, not by the engine's code.

use std::collections::{BTreeMap, BTreeSet};

use super::{finding, Finding};
use crate::ids::{AttemptId, GoalId, Revision, Seq};
use crate::store::events::EventKind;
use crate::store::Store;

pub const NO_REUSE_ACROSS_TOOL_CHANGE: &str = "never reused across a changed tool without a person's act";

/// A run's start, as the ledger held it.
pub struct AtStart {
    seq: Seq,
    revision: Revision,
    /// Each completion: its attempt and the versions it recorded.
    completions: BTreeMap<String, (AttemptId, BTreeMap<String, String>)>,
    /// The newest recorded value of each `version:<provider>`, by attempt.
    newest: BTreeMap<String, (AttemptId, String)>,
    /// The person ran it with `--reuse-across-tool-change`.
    act: bool,
}

/// The versions each completion of the active revision recorded.
fn completions(
    store: &Store,
    goal: &GoalId,
) -> Option<(Revision, BTreeMap<String, (AttemptId, BTreeMap<String, String>)>)> {
    let read = store.read();
    let revision = read.goal(goal).ok().flatten()?.active_revision;
    let all = read.completions(goal, revision).ok()?;
    let out = all
        .into_iter()
        .map(|(task, c)| {
            let context = c.checkpoint.as_ref().and_then(|cp| cp.checkpoint()).map(|cp| cp.context).unwrap_or_default();
            let versions = context.into_iter().filter(|(n, _)| n.starts_with("version:")).collect();
            (task, (c.attempt_id, versions))
        })
        .collect();
    Some((revision, out))
}

/// What a plain run starts on (`seq`: the last event seen before it).
pub fn at_start(store: &Store, goal: &GoalId, seq: Seq, act: bool) -> Option<AtStart> {
    let (revision, completions) = completions(store, goal)?;
    let mut newest: BTreeMap<String, (AttemptId, String)> = BTreeMap::new();
    for (attempt, versions) in completions.values() {
        for (name, value) in versions {
            if newest.get(name).is_none_or(|(a, _)| a < attempt) {
                newest.insert(name.clone(), (*attempt, value.clone()));
            }
        }
    }
    Some(AtStart { seq, revision, completions, newest, act })
}

/// After the run: each task it kept on an older version was kept by a
/// person's act. `external`: the tasks whose effect is `external`.
pub fn after_run(
    store: &Store,
    goal: &GoalId,
    start: &AtStart,
    (external, depends_on): (&BTreeSet<String>, &BTreeMap<String, Vec<String>>),
) -> Vec<Finding> {
    let Some((revision, now)) = completions(store, goal) else { return Vec::new() };
    if revision != start.revision {
        return Vec::new();
    }
    let read = store.read();
    let Ok(states) = read.task_states(goal, revision) else { return Vec::new() };
    let kept_by_act: BTreeSet<String> = read
        .events_since(start.seq, 100_000)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.kind == EventKind::CompletionKept && e.data["act"] == "--reuse-across-tool-change")
        .filter_map(|e| e.task_ref)
        .collect();
    let mut out = Vec::new();
    // A completion put off for an upstream that did not complete again
    // (early cutoff) is not kept: it waits on that upstream, which decides it.
    let waits = |t: &String| {
        depends_on.get(t).into_iter().flatten().any(|d| !states.iter().any(|(r, s)| r == d && s.is_complete()))
    };
    for (task, state) in states.iter().filter(|(t, s)| s.is_complete() && !external.contains(t) && !waits(t)) {
        let (Some((then, versions)), Some((attempt, _))) = (start.completions.get(task), now.get(task)) else {
            continue;
        };
        if then != attempt {
            continue;
        }
        let changed = versions.iter().find(|(n, v)| start.newest.get(*n).is_some_and(|(_, newest)| newest != *v));
        let Some((name, old)) = changed else { continue };
        if start.act && kept_by_act.contains(task) {
            continue;
        }
        let new = start.newest.get(name).map(|(_, v)| v.as_str()).unwrap_or_default();
        out.push(finding(
            NO_REUSE_ACROSS_TOOL_CHANGE,
            format!(
                "task {task} is {state:?} on attempt {attempt}, which recorded {name} {old}, while the newest completion said {new} when the run began{}",
                if start.act { " (the person's act kept nothing for it)" } else { "" }
            ),
        ));
    }
    out
}
