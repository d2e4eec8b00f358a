//! A task writes only what it declares: which files an attempt created,
//! changed or removed in the workspace that its task's `outputs` (or
//! `may_change`) do not cover. Default deny: every change is the task's
//! unless it is declared; a VCS or tool folder (`.git`, `.hg`, `.jj`,
//! `.engine`, at any depth) is never an output. Pure: the run loop observes
//! the workspace (through the file-state cache), this compares.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::constraints::{covers, Files};
use crate::evidence::PathChange;
use crate::plan::Task;

/// Folders that are never a task's output, at any depth: what a person's
/// next VCS or engine command reads and runs (a `.git/commondir`, a
/// `git init` in a sub-folder whose `config` names a program).
pub const NEVER_OUTPUT: [&str; 4] = [".git", ".hg", ".jj", ".engine"];

/// At most this many paths are named in one attempt's evidence; the rest
/// are counted.
pub const NAMED_MAX: usize = 50;

/// Does `path` lie in (or name) a folder that is never an output?
pub fn never_output(path: &str) -> bool {
    path.split('/').any(|c| NEVER_OUTPUT.contains(&c))
}

/// What a task may write: its own declared paths and globs, and those of
/// the tasks that may run beside it (neither upstream nor downstream of it:
/// their writes land in the same window; each is judged by its own).
#[derive(Debug, Clone, Copy)]
pub struct Declared<'a> {
    pub own: &'a [String],
    pub beside: &'a [String],
}

impl Declared<'_> {
    fn covers(&self, path: &str) -> bool {
        !never_output(path) && self.own.iter().chain(self.beside).any(|g| covers(g, path))
    }
}

/// What every task that may run beside `task_ref` declares it writes
/// (`outputs`, `may_change`): neither
/// upstream of it (done before it starts) nor downstream (starts after it
/// ends).
pub fn beside(tasks: &[Task], index: &HashMap<String, usize>, task_ref: &str) -> Vec<String> {
    let mut dependants: HashMap<&str, Vec<&str>> = HashMap::new();
    for t in tasks {
        for d in &t.depends_on {
            dependants.entry(d.as_str()).or_default().push(t.task_ref.as_str());
        }
    }
    let up = reach(task_ref, |r| {
        index.get(r).and_then(|&i| tasks.get(i)).map(|t| t.depends_on.iter().map(String::as_str).collect())
    });
    let down = reach(task_ref, |r| dependants.get(r).cloned());
    let apart =
        |t: &&Task| t.task_ref != task_ref && !up.contains(t.task_ref.as_str()) && !down.contains(t.task_ref.as_str());
    tasks.iter().filter(apart).flat_map(|t| t.outputs.iter().chain(&t.may_change).cloned()).collect()
}

/// Every task reachable from `from` by `next` (not `from` itself).
fn reach<'a>(from: &'a str, next: impl Fn(&'a str) -> Option<Vec<&'a str>>) -> HashSet<&'a str> {
    let mut seen = HashSet::new();
    let mut stack = next(from).unwrap_or_default();
    while let Some(r) = stack.pop() {
        if seen.insert(r) {
            stack.extend(next(r).unwrap_or_default());
        }
    }
    seen
}

/// The files of `files` that `own` (a task's `outputs` and `may_change`)
/// does not cover: what an attempt of that task may not change. A stored
/// attempt keeps only these files' digest (`checkpoint::WORKSPACE_CONTEXT`),
/// so that after a restart its writes can still be judged, if not named.
pub fn outside_entries<'a>(
    files: &'a Files,
    own: &'a [String],
) -> impl Iterator<Item = (&'a String, &'a Option<String>)> + Clone {
    let declared = Declared { own, beside: &[] };
    files.iter().filter(move |(p, _)| !declared.covers(p))
}

/// An attempt's undeclared writes: the first `NAMED_MAX` in path order,
/// and how many more there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Undeclared {
    pub changes: Vec<PathChange>,
    pub more: usize,
}

/// Every file whose digest differs between `before` and `after` (created,
/// changed, removed) that `declared` does not cover, leaving out `judged`
/// (paths already judged as protected-path changes: each path is named
/// once).
pub fn undeclared(before: &Files, after: &Files, declared: Declared, judged: &BTreeSet<&str>) -> Undeclared {
    let mut out = Undeclared::default();
    for (path, b, a) in differing(before, after) {
        if judged.contains(path.as_str()) || declared.covers(path) {
            continue;
        }
        if out.changes.len() < NAMED_MAX {
            let (before, after) = (b.map(str::to_string), a.map(str::to_string));
            out.changes.push(PathChange { path: path.clone(), before, after, constraints: Vec::new() });
        } else {
            out.more += 1;
        }
    }
    out
}

/// Every path of `before` or `after` (in path order) whose entry differs
/// between them (its content, or its mode where both recorded one:
/// `checkpoint::mode::same`), absent counting as no digest: one pass over the two
/// sorted maps, copying nothing (a look at a large workspace).
fn differing<'a>(
    before: &'a Files,
    after: &'a Files,
) -> impl Iterator<Item = (&'a String, Option<&'a str>, Option<&'a str>)> {
    let (mut b, mut a) = (before.iter().peekable(), after.iter().peekable());
    std::iter::from_fn(move || loop {
        // Each entry is taken from what was peeked, then its map advanced:
        // nothing here can end the comparison before both maps do (which
        // would pass every later change unseen).
        let (path, was, is) = match (b.peek().copied(), a.peek().copied()) {
            (None, None) => return None,
            (Some((pb, x)), Some((pa, y))) if pb == pa => {
                (b.next(), a.next());
                (pb, x.as_deref(), y.as_deref())
            }
            (Some((pb, _)), Some((pa, y))) if pb > pa => {
                a.next();
                (pa, None, y.as_deref())
            }
            (Some((pb, x)), _) => {
                b.next();
                (pb, x.as_deref(), None)
            }
            (None, Some((pa, y))) => {
                a.next();
                (pa, None, y.as_deref())
            }
        };
        if !crate::checkpoint::mode::same(was, is) {
            return Some((path, was, is));
        }
    })
}

/// The task's `outputs` with the named paths that may be declared added:
/// the exact line a person puts in the plan (`None`: none of them may be
/// declared — they lie in a VCS or tool folder).
pub fn outputs_line(outputs: &[String], changes: &[PathChange]) -> Option<Vec<String>> {
    let mut line = outputs.to_vec();
    let mut added = false;
    for c in changes.iter().filter(|c| !never_output(&c.path)) {
        if !line.iter().any(|g| covers(g, &c.path)) {
            line.push(c.path.clone());
            added = true;
        }
    }
    added.then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, Option<&str>)]) -> Files {
        list.iter().map(|(p, d)| (p.to_string(), d.map(str::to_string))).collect()
    }

    fn globs(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn outside_leaves_out_what_the_task_declares_but_never_a_vcs_folder() {
        let all = files(&[("dist/x", Some("x")), ("src/a.py", Some("a")), ("dist/.git/config", Some("g"))]);
        let own = globs(&["dist/**"]);
        let kept: Vec<String> = outside_entries(&all, &own).map(|(p, _)| p.clone()).collect();
        assert_eq!(kept, vec!["dist/.git/config".to_string(), "src/a.py".to_string()]);
    }

    /// The one-pass comparison against the union of both maps' paths, as
    /// it was: every path, in order, absent and recorded-absent alike.
    #[test]
    fn differing_is_every_path_whose_digest_moved_in_path_order() {
        let slow = |b: &Files, a: &Files| -> Vec<(String, Option<String>, Option<String>)> {
            let paths: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            let get = |f: &Files, p: &String| f.get(p).cloned().flatten();
            paths.into_iter().map(|p| (p.clone(), get(b, p), get(a, p))).filter(|(_, x, y)| x != y).collect()
        };
        let digests = [None, Some("1"), Some("2")];
        for seed in 0..400u32 {
            let pick = |k: u32| -> Files {
                (0..6u32)
                    .filter_map(|i| {
                        let r = seed.wrapping_mul(2654435761).rotate_left(i * 5 + k) % 4;
                        (r < 3).then(|| (format!("p{i}"), digests[r as usize].map(str::to_string)))
                    })
                    .collect()
            };
            let (b, a) = (pick(0), pick(3));
            let fast: Vec<_> =
                differing(&b, &a).map(|(p, x, y)| (p.clone(), x.map(str::to_string), y.map(str::to_string))).collect();
            assert_eq!(fast, slow(&b, &a), "{b:?} {a:?}");
        }
    }

    #[test]
    fn names_every_undeclared_creation_change_and_removal() {
        let before = files(&[("src/a.py", Some("a1")), ("README", Some("r1")), ("old.txt", Some("o1"))]);
        let after = files(&[
            ("src/a.py", Some("a2")),
            ("README", Some("r1")),
            ("dist/x.whl", Some("x1")),
            ("notes.txt", Some("n1")),
        ]);
        let own = globs(&["dist/**", "src/*.py"]);
        let got = undeclared(&before, &after, Declared { own: &own, beside: &[] }, &BTreeSet::new());
        let seen: Vec<(&str, &str)> = got.changes.iter().map(|c| (c.path.as_str(), c.what())).collect();
        assert_eq!(seen, vec![("notes.txt", "created"), ("old.txt", "deleted")]);
        assert_eq!(got.more, 0);
        // A path judged already as a protected change is named once.
        let judged: BTreeSet<&str> = ["notes.txt"].into_iter().collect();
        let got = undeclared(&before, &after, Declared { own: &own, beside: &[] }, &judged);
        assert_eq!(got.changes.len(), 1);
        // A task beside it declares one: not this task's to answer for.
        let beside = globs(&["notes.txt"]);
        let got = undeclared(&before, &after, Declared { own: &own, beside: &beside }, &BTreeSet::new());
        assert_eq!(got.changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), vec!["old.txt"]);
    }

    /// An undeclared file's `chmod` is a write; a declared one's is not; a
    /// baseline without modes (an older engine's) compares on content.
    #[test]
    fn a_mode_change_outside_the_declared_paths_is_an_undeclared_write() {
        let before = files(&[("data.txt", Some("d;mode=0644")), ("out.txt", Some("o;mode=0644"))]);
        let after = files(&[("data.txt", Some("d;mode=0755")), ("out.txt", Some("o;mode=0700"))]);
        let own = globs(&["out.txt"]);
        let got = undeclared(&before, &after, Declared { own: &own, beside: &[] }, &BTreeSet::new());
        let seen: Vec<(&str, &str)> = got.changes.iter().map(|c| (c.path.as_str(), c.what())).collect();
        assert_eq!(seen, vec![("data.txt", "changed")]);
        let old = files(&[("data.txt", Some("d")), ("out.txt", Some("o"))]);
        assert!(undeclared(&old, &after, Declared { own: &own, beside: &[] }, &BTreeSet::new()).changes.is_empty());
    }

    #[test]
    fn a_vcs_or_tool_folder_is_never_an_output_even_when_declared() {
        let before = files(&[]);
        let after = files(&[(".git/commondir", Some("c")), ("sub/.git/config", Some("g")), ("sub/a.txt", Some("a"))]);
        let own = globs(&["**", ".git", "sub"]);
        let got = undeclared(&before, &after, Declared { own: &own, beside: &[] }, &BTreeSet::new());
        let paths: Vec<&str> = got.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, vec![".git/commondir", "sub/.git/config"]);
        for p in [".git", "a/.hg/hgrc", ".jj/repo", "x/.engine/y"] {
            assert!(never_output(p), "{p}");
        }
        assert!(!never_output("a.git/x") && !never_output(".github/workflows/ci.yml"));
        assert_eq!(outputs_line(&own, &got.changes), None, "nothing there may be declared");
    }

    #[test]
    fn beside_is_what_the_tasks_apart_in_the_graph_declare() {
        let task = |r: &str, deps: &[&str], out: &[&str], may: &[&str]| -> Task {
            serde_json::from_value(serde_json::json!({"ref": r, "provider": "sh", "action": {"run": ["true"]},
                "depends_on": deps, "outputs": out, "may_change": may}))
            .unwrap()
        };
        let tasks = vec![
            task("A", &[], &["a"], &[]),
            task("B", &["A"], &["b"], &[]),
            task("C", &[], &["c"], &["c.log"]),
            task("D", &["B"], &["d"], &[]),
        ];
        let index: HashMap<String, usize> = tasks.iter().enumerate().map(|(i, t)| (t.task_ref.clone(), i)).collect();
        assert_eq!(beside(&tasks, &index, "B"), globs(&["c", "c.log"]), "A is upstream, D downstream");
        assert_eq!(beside(&tasks, &index, "C"), globs(&["a", "b", "d"]));
    }

    #[test]
    fn caps_the_named_paths_and_counts_the_rest() {
        let after: Files = (0..NAMED_MAX + 7).map(|i| (format!("f{i:03}"), Some("d".to_string()))).collect();
        let got = undeclared(&Files::new(), &after, Declared { own: &[], beside: &[] }, &BTreeSet::new());
        assert_eq!((got.changes.len(), got.more), (NAMED_MAX, 7));
    }

    #[test]
    fn the_outputs_line_adds_what_is_missing_to_what_is_declared() {
        let c = |p: &str| PathChange { path: p.into(), before: None, after: Some("d".into()), constraints: vec![] };
        let line = outputs_line(&globs(&["dist/**"]), &[c("dist/a"), c("notes.txt"), c(".git/x"), c("b/c.txt")]);
        assert_eq!(line, Some(globs(&["dist/**", "notes.txt", "b/c.txt"])));
        assert_eq!(outputs_line(&globs(&["dist/**"]), &[c("dist/a")]), None);
    }
}
