//! Declared outputs: whether a task's output files fit its bounds, which
//! upstream tasks' outputs a task's run needs, and whether a file already
//! in the workspace is the one the ledger holds. Facts in, decisions out;
//! the run loop reads and writes the files (`run::outputs`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::decide::reuse::Refusal;
use crate::limits::{OUTPUT_FILES_MAX, OUTPUT_FILE_BYTES_MAX, OUTPUT_TASK_BYTES_MAX};
use crate::plan::{Effect, Task};

/// The bounds one task's outputs are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub files: usize,
    pub file_bytes: u64,
    pub task_bytes: u64,
}

impl Bounds {
    /// The engine's (`limits.rs`).
    pub const ENGINE: Bounds =
        Bounds { files: OUTPUT_FILES_MAX, file_bytes: OUTPUT_FILE_BYTES_MAX, task_bytes: OUTPUT_TASK_BYTES_MAX };
}

/// Which bound a task's outputs passed: the failure names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
pub enum OverLimit {
    /// More files than `OUTPUT_FILES_MAX`.
    Files { max: usize },
    /// One file larger than `OUTPUT_FILE_BYTES_MAX`.
    FileBytes { path: String, size: u64, max: u64 },
    /// All files together larger than `OUTPUT_TASK_BYTES_MAX`.
    TaskBytes { max: u64 },
}

impl OverLimit {
    /// The limit's name in `limits.rs` (stable: evidence carries it).
    pub fn limit(&self) -> &'static str {
        match self {
            OverLimit::Files { .. } => "OUTPUT_FILES_MAX",
            OverLimit::FileBytes { .. } => "OUTPUT_FILE_BYTES_MAX",
            OverLimit::TaskBytes { .. } => "OUTPUT_TASK_BYTES_MAX",
        }
    }

    /// What people read, naming the task and the limit.
    pub fn message(&self, task_ref: &str) -> String {
        match self {
            OverLimit::Files { max } => format!(
                "the `outputs` of task `{task_ref}` match more than {max} files (OUTPUT_FILES_MAX); \
                 name fewer files or pack them into one"
            ),
            OverLimit::FileBytes { path, size, max } => {
                format!("output `{path}` of task `{task_ref}` is {size} bytes, over {max} (OUTPUT_FILE_BYTES_MAX)")
            }
            OverLimit::TaskBytes { max } => {
                format!("the `outputs` of task `{task_ref}` hold more than {max} bytes in all (OUTPUT_TASK_BYTES_MAX)")
            }
        }
    }
}

/// The running count of a task's outputs as they are read: each file is
/// admitted (or the first bound it passes is named) before its bytes are.
#[derive(Debug, Clone)]
pub struct Tally {
    bounds: Bounds,
    files: usize,
    bytes: u64,
}

impl Tally {
    pub fn new(bounds: Bounds) -> Tally {
        Tally { bounds, files: 0, bytes: 0 }
    }

    /// Admit one more file of `size` bytes.
    pub fn admit(&mut self, path: &str, size: u64) -> Result<(), OverLimit> {
        if self.files >= self.bounds.files {
            return Err(OverLimit::Files { max: self.bounds.files });
        }
        if size > self.bounds.file_bytes {
            return Err(OverLimit::FileBytes { path: path.to_string(), size, max: self.bounds.file_bytes });
        }
        let bytes = self.bytes.saturating_add(size);
        if bytes > self.bounds.task_bytes {
            return Err(OverLimit::TaskBytes { max: self.bounds.task_bytes });
        }
        self.files += 1;
        self.bytes = bytes;
        Ok(())
    }

    pub fn files(&self) -> usize {
        self.files
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// The tasks whose outputs `task_ref`'s run needs: every ancestor (a
/// dependency, a dependency's dependency, …) that declares `outputs`,
/// dependencies before their dependents (a depth-first walk, each task
/// after everything it depends on), so that when two write the same path
/// the one nearer the task comes last and wins. `index`: ref → position
/// in `tasks`. Walks the ancestors only: O(ancestors) per call.
pub fn upstream_with_outputs<'a>(tasks: &'a [Task], index: &HashMap<String, usize>, task_ref: &str) -> Vec<&'a str> {
    let task = |r: &str| index.get(r).and_then(|&i| tasks.get(i));
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    // (task, whether its dependencies were pushed already)
    let mut stack: Vec<(&'a Task, bool)> = Vec::new();
    if let Some(t) = task(task_ref) {
        stack.extend(t.depends_on.iter().rev().filter_map(|d| task(d)).map(|t| (t, false)));
    }
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            if !t.outputs.is_empty() {
                out.push(t.task_ref.as_str());
            }
            continue;
        }
        if !seen.insert(t.task_ref.as_str()) {
            continue;
        }
        stack.push((t, true));
        stack.extend(t.depends_on.iter().rev().filter_map(|d| task(d)).map(|d| (d, false)));
    }
    out
}

/// What the workspace holds at an output's path, as far as the decision
/// needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Present {
    Absent,
    /// A regular file with this content digest.
    File {
        digest: String,
    },
    /// A symlink, a folder or anything else that is not a regular file.
    Other,
}

/// What to do with one output the ledger holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The right content is there: left alone (its mode too).
    LeaveAlone,
    /// Missing or different: written (temp file, then rename).
    Write,
    /// Something that is not a regular file stands there: refused, never
    /// followed or replaced.
    Refuse,
}

pub fn place(present: &Present, wanted_digest: &str) -> Place {
    match present {
        Present::File { digest } if digest == wanted_digest => Place::LeaveAlone,
        Present::Absent | Present::File { .. } => Place::Write,
        Present::Other => Place::Refuse,
    }
}

/// What the workspace holds of a completion's recorded outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Here {
    /// Each one, with its recorded digest (or the task declares none).
    All,
    /// Some are missing or differ; the ledger holds their bytes.
    Restorable,
    /// This one is missing or differs, and the ledger holds no bytes for
    /// it; or (`why`) the ledger kept no record of the outputs at all.
    Missing { path: String, why: Option<String> },
}

/// What becomes of a completion that stands by its checkpoint, by what
/// this workspace holds of its recorded outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// It stands; `restore`: with its outputs written back from the
    /// ledger once the pass has decided.
    Stands { restore: bool },
    /// Stale (`OUTPUTS_MISSING`), like any other refusal: the pass goes on
    /// to decide it (a person's keep, an upstream's cutoff).
    Stale(Refusal),
    /// An external task's: stale as it is, never put off for an upstream's
    /// cutoff — its new call, a repeat of external work, waits for a
    /// person's approval.
    StaleAsIs(Refusal),
}

pub fn standing(here: Here, effect: Effect) -> Standing {
    match here {
        Here::All => Standing::Stands { restore: false },
        Here::Restorable => Standing::Stands { restore: true },
        Here::Missing { path, why } => {
            let refusal = Refusal::OutputsMissing { path, why };
            if effect == Effect::External {
                Standing::StaleAsIs(refusal)
            } else {
                Standing::Stale(refusal)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_stands_with_its_outputs_here_and_an_external_one_is_stale_as_it_is() {
        assert_eq!(standing(Here::All, Effect::External), Standing::Stands { restore: false });
        assert_eq!(standing(Here::Restorable, Effect::Local), Standing::Stands { restore: true });
        let missing = || Here::Missing { path: "out/a".into(), why: None };
        let refusal = Refusal::OutputsMissing { path: "out/a".into(), why: None };
        assert_eq!(standing(missing(), Effect::Local), Standing::Stale(refusal.clone()));
        assert_eq!(standing(missing(), Effect::None), Standing::Stale(refusal.clone()));
        assert_eq!(standing(missing(), Effect::External), Standing::StaleAsIs(refusal));
    }

    const SMALL: Bounds = Bounds { files: 2, file_bytes: 10, task_bytes: 15 };

    #[test]
    fn a_tally_names_the_first_bound_passed() {
        let mut t = Tally::new(SMALL);
        t.admit("a", 10).unwrap();
        assert_eq!(t.admit("b", 11), Err(OverLimit::FileBytes { path: "b".into(), size: 11, max: 10 }));
        assert_eq!(t.admit("b", 6), Err(OverLimit::TaskBytes { max: 15 }));
        t.admit("b", 5).unwrap();
        assert_eq!((t.files(), t.bytes()), (2, 15), "at the bounds is within them");
        assert_eq!(t.admit("c", 0), Err(OverLimit::Files { max: 2 }));
    }

    #[test]
    fn the_message_names_the_task_and_the_limit() {
        let m = OverLimit::TaskBytes { max: 15 }.message("BUILD");
        assert!(m.contains("`BUILD`") && m.contains("OUTPUT_TASK_BYTES_MAX") && m.contains("15"), "{m}");
        let m = OverLimit::Files { max: 2 }.message("BUILD");
        assert!(m.contains("OUTPUT_FILES_MAX"), "{m}");
    }

    fn task(r: &str, deps: &[&str], outputs: &[&str]) -> Task {
        serde_json::from_value(serde_json::json!({
            "ref": r, "provider": "p", "action": {}, "depends_on": deps, "outputs": outputs,
        }))
        .unwrap()
    }

    #[test]
    fn every_ancestor_with_outputs_dependencies_first() {
        let tasks = vec![
            task("A", &[], &["a/**"]),
            task("B", &["A"], &[]),
            task("C", &["B"], &["c.txt"]),
            task("D", &["C"], &[]),
            task("E", &[], &["e"]),
        ];
        let index: HashMap<String, usize> = tasks.iter().enumerate().map(|(i, t)| (t.task_ref.clone(), i)).collect();
        assert_eq!(upstream_with_outputs(&tasks, &index, "D"), vec!["A", "C"], "transitive, not E");
        assert_eq!(upstream_with_outputs(&tasks, &index, "B"), vec!["A"]);
        assert!(upstream_with_outputs(&tasks, &index, "A").is_empty(), "not itself");
        assert!(upstream_with_outputs(&tasks, &index, "nope").is_empty());
        // A diamond: each once, every dependency before its dependents.
        let diamond = vec![
            task("R", &[], &["r"]),
            task("L", &["R"], &["l"]),
            task("M", &["R"], &["m"]),
            task("J", &["M", "L"], &["j"]),
            task("END", &["J", "R"], &[]),
        ];
        let index: HashMap<String, usize> = diamond.iter().enumerate().map(|(i, t)| (t.task_ref.clone(), i)).collect();
        let up = upstream_with_outputs(&diamond, &index, "END");
        assert_eq!(up.len(), 4, "{up:?}");
        let at = |r: &str| up.iter().position(|u| *u == r).unwrap();
        assert!(at("R") < at("L") && at("R") < at("M") && at("L") < at("J") && at("M") < at("J"), "{up:?}");
    }

    #[test]
    fn only_the_right_regular_file_is_left_alone() {
        assert_eq!(place(&Present::File { digest: "d".into() }, "d"), Place::LeaveAlone);
        assert_eq!(place(&Present::File { digest: "x".into() }, "d"), Place::Write);
        assert_eq!(place(&Present::Absent, "d"), Place::Write);
        assert_eq!(place(&Present::Other, "d"), Place::Refuse);
    }
}
