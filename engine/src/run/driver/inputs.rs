//! A run's first look at the workspace, for a plan whose inputs the load
//! left to it (`plan::Inputs::ToCheck`: the plan cache vouched for the
//! file's bytes). Under the lease and before the run writes anything, every
//! input is checked to stay inside the workspace, refused as a full load
//! refuses it; one expansion of each input serves both that check and,
//! for a task complete now, the reuse pass's observation (`refresh.rs`).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use crate::checkpoint::{self, Expanded};
use crate::error::Result;
use crate::plan::{self, Inputs, Plan, Task};
use crate::workspace::Expander;

/// What the first look read of each complete task's inputs, by the task's
/// index in the plan file: kept for the reuse pass only while nothing else
/// ran — a provider asked or an attempt reconciled drops it (`Action::Forget`).
pub type FirstLook = HashMap<usize, Expanded>;

/// Check every input of a plan that needs it (`Inputs::ToCheck`): the
/// first one outside the workspace refuses the run with the load's error
/// (INPUT_OUTSIDE_WORKSPACE at `$.tasks[i].inputs[j]`). A task the reuse
/// pass will observe (`observed`: complete now, on a store of one writer,
/// its effect not external) is expanded as observing does (a `statx` per
/// file, kept); any other only checked (its folders' listings). Many
/// inputs are looked at in two halves on two threads (`halves`): the look
/// is mostly `statx`, and two of them run side by side. Called once, at
/// the run's start, before the run writes anything.
pub fn check_inputs(plan: &Plan, observed: impl Fn(&Task) -> bool) -> Result<Option<FirstLook>> {
    if plan.inputs == Inputs::Checked {
        return Ok(None);
    }
    let tasks = &plan.file.tasks;
    let observed: Vec<bool> = tasks.iter().map(observed).collect();
    let workspace = &plan.workspace;
    let (first, second) = halves(tasks);
    let observed = &observed;
    let (first, second) = std::thread::scope(|s| {
        // No thread to be had (a process limit): the second half is
        // looked at after the first, on this one.
        let rest = second.clone();
        let side = (!second.is_empty())
            .then(|| std::thread::Builder::new().spawn_scoped(s, move || look(workspace, tasks, observed, rest)))
            .and_then(std::io::Result::ok);
        let first = look(workspace, tasks, observed, first);
        let second = match side {
            Some(h) => Some(h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
            None if !second.is_empty() => Some(look(workspace, tasks, observed, second)),
            None => None,
        };
        (first, second)
    });
    // The first refusal in the plan's order: the first half's, if any.
    let refused = |r: Refused| match r {
        Refused::Workspace(why) => plan::workspace_unusable(workspace, &why),
        Refused::Input { task, input, why } => plan::input_refused(&plan.file, task, input, &why),
    };
    let mut looked = first.map_err(refused)?;
    if let Some(second) = second {
        looked.extend(second.map_err(refused)?);
    }
    Ok(Some(looked))
}

/// Why the first look refused a run.
enum Refused {
    Workspace(String),
    Input { task: usize, input: usize, why: String },
}

/// Below this many inputs in all, the first look stays on one thread (a
/// thread's start would cost more than it saves).
const SPLIT_INPUTS_MIN: usize = 512;

/// The plan's tasks in two ranges of about as many inputs each (the
/// second empty when there are few).
fn halves(tasks: &[Task]) -> (Range<usize>, Range<usize>) {
    let total: usize = tasks.iter().map(|t| t.inputs.len()).sum();
    if total < SPLIT_INPUTS_MIN {
        return (0..tasks.len(), tasks.len()..tasks.len());
    }
    let mut seen = 0;
    let mid = tasks
        .iter()
        .position(|t| {
            seen += t.inputs.len();
            seen >= total / 2
        })
        .map_or(tasks.len(), |i| i + 1);
    (0..mid, mid..tasks.len())
}

/// Look at the inputs of `tasks[range]` through an `Expander` of its own:
/// a task observed next (`observed[i]`) expanded and kept, any other
/// checked; the first refusal in the range's order ends the look.
fn look(workspace: &Path, tasks: &[Task], observed: &[bool], range: Range<usize>) -> Result<FirstLook, Refused> {
    let mut expander = Expander::new(workspace).map_err(Refused::Workspace)?;
    let mut looked = FirstLook::new();
    let in_range = tasks.iter().zip(observed).enumerate().skip(range.start).take(range.len());
    for (i, (task, &observed)) in in_range {
        if observed {
            let expanded = checkpoint::expand_inputs(&mut expander, task).map_err(|(input, why)| Refused::Input {
                task: i,
                input,
                why,
            })?;
            looked.insert(i, expanded);
            continue;
        }
        for (j, input) in task.inputs.iter().enumerate() {
            expander.check(input).map_err(|why| Refused::Input { task: i, input: j, why })?;
        }
    }
    Ok(looked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks(inputs: &[usize]) -> Vec<Task> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let inputs: Vec<String> = (0..n).map(|j| format!("t{i}/f{j}")).collect();
                serde_json::from_value(serde_json::json!({
                    "ref": format!("t{i}"), "provider": "sh", "action": {"run": ["true"]}, "inputs": inputs,
                }))
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn many_inputs_split_in_two_halves_of_about_as_many_and_few_stay_whole() {
        assert_eq!(halves(&tasks(&[10; 4])), (0..4, 4..4), "40 inputs: one thread");
        assert_eq!(halves(&tasks(&[])), (0..0, 0..0));
        assert_eq!(halves(&tasks(&[10; 100])), (0..50, 50..100));
        assert_eq!(halves(&tasks(&[600, 1, 1])), (0..1, 1..3), "one large task first");
        assert_eq!(halves(&tasks(&[1, 1, 600])), (0..3, 3..3), "one large task last: all in the first");
        let (a, b) = halves(&tasks(&[3, 9, 1, 200, 50, 400, 7]));
        assert_eq!((a.start, a.end, b.end), (0, 6, 7));
    }

    #[test]
    fn each_half_refuses_at_its_own_first_escape() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = dir.path();
        let plan = tasks(&[300, 300]);
        for t in &plan {
            for rel in &t.inputs {
                let p = w.join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, "x").unwrap();
            }
        }
        let observed = vec![true, false];
        let look_all = |plan: &[Task]| {
            let (a, b) = halves(plan);
            assert!(!b.is_empty(), "two halves");
            (look(w, plan, &observed, a), look(w, plan, &observed, b))
        };
        let (a, b) = look_all(&plan);
        assert!(a.is_ok_and(|l| l.contains_key(&0)), "the observed task's files kept");
        assert!(b.is_ok_and(|l| l.is_empty()), "a checked task keeps nothing");
        // A file of each half turned into a link out: each half names its own.
        for (i, j) in [(1, 7), (0, 42)] {
            let p = w.join(&plan[i].inputs[j]);
            std::fs::remove_file(&p).unwrap();
            std::os::unix::fs::symlink(outside.path(), &p).unwrap();
        }
        let (a, b) = look_all(&plan);
        assert!(matches!(a, Err(Refused::Input { task: 0, input: 42, .. })));
        assert!(matches!(b, Err(Refused::Input { task: 1, input: 7, .. })));
    }
}
