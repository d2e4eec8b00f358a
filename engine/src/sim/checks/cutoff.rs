//! Early cutoff and the workspace (issue 43), judged from the ledger's
//! attempts and outputs, never from the engine's decisions: at each intent
//! the checks note which completion of each upstream the attempt was made
//! from. After each plain run that ended, a task complete on an attempt
//! made from an upstream completion that has since been replaced (the
//! upstream ran again) stands only if that upstream can cut off (it
//! declares outputs and its effect is not `external`) and its new
//! completion recorded byte-identical outputs (same paths, bytes and
//! execute bits) — a task with an `external` effect aside, which stands
//! on a plain re-run; and each complete task whose upstreams are complete has
//! its recorded outputs in the workspace, byte for byte. A person's rerun
//! of the upstream alone (`engine rerun` without `--downstream`) keeps its
//! dependants by the person's act: for the run that re-ran it, and for
//! good when the upstream cannot cut off (nothing in the ledger tells its
//! dependants it ran).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{finding, Finding};
use crate::ids::{AttemptId, GoalId, Revision, Seq};
use crate::state::{AttemptKind, TaskState};
use crate::store::outputs::OutputFile;
use crate::store::{LedgerRead, Store};

use super::super::plan::Traits;

pub const CUTOFF_ON_IDENTICAL_OUTPUTS: &str =
    "a dependant is kept across its upstream's re-run only on byte-identical outputs";
pub const KEPT_OUTPUTS_IN_WORKSPACE: &str = "a kept task's recorded outputs are in its workspace";

/// Which upstream completions each attempt was made from.
pub struct Made {
    workspace: PathBuf,
    depends_on: BTreeMap<String, Vec<String>>,
    /// Each attempt: its intent's event, and each upstream's completing
    /// attempt then (`None`: not complete).
    from: BTreeMap<AttemptId, (Seq, BTreeMap<String, Option<AttemptId>>)>,
}

impl Made {
    pub fn new(workspace: PathBuf, depends_on: BTreeMap<String, Vec<String>>) -> Made {
        Made { workspace, depends_on, from: BTreeMap::new() }
    }

    /// `attempt` of `task` had its intent at event `seq`: what its
    /// upstreams' completions are now.
    pub fn intent(&mut self, store: &Store, goal: &GoalId, (task, attempt, seq): (&str, AttemptId, Seq)) {
        let Some(deps) = self.depends_on.get(task).filter(|d| !d.is_empty()) else { return };
        let read = store.read();
        let Ok(a) = read.attempt(attempt) else { return };
        let from = deps.iter().map(|d| (d.clone(), completed_by(&*read, goal, a.revision, d))).collect();
        self.from.insert(attempt, (seq, from));
    }

    /// A power loss took the events after `last`: the intents among them.
    pub fn power_lost(&mut self, last: Seq) {
        self.from.retain(|_, (seq, _)| *seq <= last);
    }
}

/// The attempt `task` is complete on in `revision`, as the ledger's rows
/// say: its last succeeded one, or the one a reuse names.
fn completed_by(read: &dyn LedgerRead, goal: &GoalId, revision: Revision, task: &str) -> Option<AttemptId> {
    let row = read.task(goal, revision, task).ok()??;
    match row.state {
        TaskState::Succeeded => read.completed_attempt(goal, revision, task).ok()?,
        TaskState::Reused => row.reused_from_attempt().map(AttemptId),
        _ => None,
    }
}

/// Each task's completing attempt, in the active revision.
pub struct AtStart {
    revision: Revision,
    done: BTreeMap<String, AttemptId>,
}

fn completions(read: &dyn LedgerRead, goal: &GoalId, tasks: &BTreeMap<String, Vec<String>>) -> Option<AtStart> {
    let revision = read.goal(goal).ok().flatten()?.active_revision;
    let done = tasks.keys().filter_map(|t| completed_by(read, goal, revision, t).map(|a| (t.clone(), a))).collect();
    Some(AtStart { revision, done })
}

/// What a plain run starts on.
pub fn at_start(store: &Store, goal: &GoalId, made: &Made) -> Option<AtStart> {
    completions(&*store.read(), goal, &made.depends_on)
}

/// After a plain run that ended: every complete task stands on its
/// upstreams' outputs as they are, and has its outputs here.
pub fn after_run(
    store: &Store,
    goal: &GoalId,
    (start, made): (&AtStart, &Made),
    traits: &BTreeMap<String, Traits>,
) -> Vec<Finding> {
    let read = store.read();
    let Some(end) = completions(&*read, goal, &made.depends_on) else { return Vec::new() };
    if end.revision != start.revision {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (task, attempt) in &end.done {
        let Some(t) = traits.get(task) else { continue };
        // An `external` task stands on a plain re-run, whatever ran above
        // it (docs/states.md): its call is never made again on a look.
        let judged = made.from.get(attempt).filter(|_| t.effect != "external");
        if let Some((_, from)) = judged {
            for (upstream, then) in from {
                let Some(then) = *then else { continue };
                let f = stands_on(&*read, (task, *attempt), (upstream, then), (start, &end), traits);
                out.extend(f);
            }
        }
        if t.output && t.depends_on.iter().all(|d| end.done.contains_key(d)) {
            out.extend(outputs_here(&*read, &made.workspace, task, *attempt));
        }
    }
    out
}

/// `task`, complete on `attempt`, made from `upstream`'s completion
/// `then`: does it stand on what `upstream` is complete on now?
fn stands_on(
    read: &dyn LedgerRead,
    (task, attempt): (&str, AttemptId),
    (upstream, then): (&str, AttemptId),
    (start, end): (&AtStart, &AtStart),
    traits: &BTreeMap<String, Traits>,
) -> Option<Finding> {
    let now = *end.done.get(upstream)?;
    if now == then {
        return None;
    }
    let up = traits.get(upstream)?;
    let why_not = match (up.effect == "external", up.output) {
        (true, _) => Some("has an `external` effect"),
        (false, false) => Some("declares no outputs"),
        (false, true) => None,
    };
    let run_here = start.done.get(upstream) != Some(&now);
    if rerun_alone(read, upstream, now) && (why_not.is_some() || run_here) {
        return None;
    }
    let changed = match why_not {
        Some(why) => format!("it {why}, so it cuts nothing off"),
        None => match differ(read, then, now) {
            Some(d) => format!("its outputs differ: {d}"),
            None => return None,
        },
    };
    Some(finding(
        CUTOFF_ON_IDENTICAL_OUTPUTS,
        format!(
            "{task} is complete on attempt {attempt}, made from {upstream}'s attempt {then}; {upstream} ran again \
             (complete on attempt {now}) and {changed}"
        ),
    ))
}

/// Is `attempt` of `task` a person's rerun (the rerun's operation, any
/// of its tries)? Only then may its dependants keep theirs without a look.
fn rerun_alone(read: &dyn LedgerRead, task: &str, attempt: AttemptId) -> bool {
    let Ok(a) = read.attempt(attempt) else { return false };
    let Ok(all) = read.attempts_of_task(&a.goal_id, task) else { return false };
    all.iter().any(|b| b.operation_id == a.operation_id && b.kind == AttemptKind::Rerun)
}

/// How two attempts' recorded outputs differ, if they do.
fn differ(read: &dyn LedgerRead, a: AttemptId, b: AttemptId) -> Option<String> {
    let (Ok(x), Ok(y)) = (read.outputs_of_attempt(a), read.outputs_of_attempt(b)) else { return None };
    let paths = |v: &[OutputFile]| v.iter().map(|f| (f.path.clone(), f.executable)).collect::<Vec<_>>();
    if paths(&x) != paths(&y) {
        return Some(format!("files {:?} then, {:?} now", paths(&x), paths(&y)));
    }
    // The recorded content digests (what the blobs are keyed by): two
    // outputs whose bytes the ledger did not keep still compare.
    x.iter().zip(&y).find(|(f, g)| f.digest != g.digest).map(|(f, _)| format!("{} has other bytes", f.path))
}

/// `task`'s outputs recorded by `attempt` are in `workspace`, byte for byte.
fn outputs_here(read: &dyn LedgerRead, workspace: &Path, task: &str, attempt: AttemptId) -> Option<Finding> {
    let files = read.outputs_of_attempt(attempt).ok()?;
    for f in files {
        // Judged by the recorded content digest, so an output whose bytes
        // the ledger did not keep is checked too.
        let path = workspace.join(&f.path);
        let here = std::fs::read(&path).ok();
        let executable = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o100 != 0).unwrap_or(false);
        let wrong = match here {
            None => "is missing",
            Some(b) if crate::digest::content(&b) != f.digest => "holds other bytes",
            Some(_) if executable != f.executable => "has another execute bit",
            Some(_) => continue,
        };
        return Some(finding(
            KEPT_OUTPUTS_IN_WORKSPACE,
            format!("{task} is complete on attempt {attempt}, whose output {} {wrong} in the workspace", f.path),
        ));
    }
    None
}
