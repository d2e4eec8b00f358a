//! `OUTPUT_UNDECLARED`: a task reads a file an upstream task evidently
//! writes, and that upstream task does not declare it in `outputs`, so a
//! worker in another workspace would run the task without the file.
//!
//! "Evidently writes" is what the plan says statically, nothing more: an
//! upstream task with `effect: local` whose command's argv names the path
//! (a word of it, split at spaces and shell punctuation, that looks like a
//! path: it holds a `/` or a `.`), or an upstream task whose `may_change`
//! covers it. Two paths "cover" one another when they are equal, one is
//! a folder holding the other, or one is a glob matching the other (two
//! globs: their fixed leading folders are one inside the other).

use std::collections::{HashMap, HashSet};

use super::{Warning, WarningCode};
use crate::plan::model::{Effect, PlanFile, ProviderSpec, Task};

/// One warning per input that an upstream task evidently writes without
/// declaring, naming the first such upstream task in plan order.
pub fn warnings(plan: &PlanFile) -> Vec<Warning> {
    let writers: Vec<(usize, Vec<String>)> =
        plan.tasks.iter().enumerate().map(|(i, t)| (i, written(plan, t))).filter(|(_, w)| !w.is_empty()).collect();
    if writers.is_empty() {
        return Vec::new();
    }
    let index: HashMap<&str, usize> = plan.tasks.iter().enumerate().map(|(i, t)| (t.task_ref.as_str(), i)).collect();
    let mut out = Vec::new();
    for (i, task) in plan.tasks.iter().enumerate().filter(|(_, t)| !t.inputs.is_empty()) {
        let mut ancestors: Option<HashSet<usize>> = None;
        for (j, input) in task.inputs.iter().enumerate() {
            let found = writers.iter().find(|(u, words)| {
                let Some(up) = plan.tasks.get(*u) else { return false };
                words.iter().any(|w| covers(w, input))
                    && !up.outputs.iter().any(|o| covers(o, input))
                    && ancestors.get_or_insert_with(|| ancestors_of(plan, &index, i)).contains(u)
            });
            if let Some(up) = found.and_then(|(u, _)| plan.tasks.get(*u)) {
                out.push(warning(task, up, input, i, j));
            }
        }
    }
    out
}

fn warning(task: &Task, up: &Task, input: &str, i: usize, j: usize) -> Warning {
    Warning {
        code: WarningCode::OutputUndeclared,
        path: format!("$.tasks[{i}].inputs[{j}]"),
        message: format!(
            "input `{input}` of task `{}` may need upstream task `{}`'s files: `{}` evidently writes `{input}` \
             (its command or `may_change` names it) but its `outputs` do not cover it; workers in separate \
             workspaces would run `{}` without it — declare \"outputs\": [\"{input}\"] on `{}`, or share one \
             filesystem between the workers",
            task.task_ref, up.task_ref, up.task_ref, task.task_ref, up.task_ref
        ),
    }
}

/// What a task evidently writes: its `may_change` globs, and for a
/// command of `effect: local` the path-like words of its argv.
pub fn written(plan: &PlanFile, task: &Task) -> Vec<String> {
    let mut out = task.may_change.clone();
    let command = matches!(plan.providers.get(&task.provider), Some(ProviderSpec::Command { .. }));
    if command && task.effect == Effect::Local {
        let run = task.action.get("run").and_then(|r| r.as_array()).map(Vec::as_slice).unwrap_or_default();
        out.extend(run.iter().filter_map(|a| a.as_str()).flat_map(path_words));
    }
    out
}

/// The words of an argv item that look like workspace paths.
pub fn path_words(item: &str) -> Vec<String> {
    item.split(|c: char| c.is_whitespace() || ";|&<>()'\"`=,".contains(c))
        .filter(|w| !w.starts_with('-') && (w.contains('/') || w.contains('.')))
        .filter(|w| crate::workspace::lexically_inside(w).is_ok() && !parts(w).is_empty())
        .map(str::to_string)
        .collect()
}

fn parts(p: &str) -> Vec<&str> {
    p.split('/').filter(|s| !s.is_empty() && *s != ".").collect()
}

fn is_glob(p: &str) -> bool {
    p.contains(['*', '?', '['])
}

/// Do `a` and `b` (workspace paths, folders or globs) name some file in
/// common, as far as their text tells?
pub fn covers(a: &str, b: &str) -> bool {
    let (pa, pb) = (parts(a), parts(b));
    let fixed = |p: &[&str]| -> usize { p.iter().position(|s| is_glob(s)).unwrap_or(p.len()) };
    let (fa, fb) = (fixed(&pa), fixed(&pb));
    // The fixed leading parts: one must lead into the other.
    let n = fa.min(fb);
    if pa[..n] != pb[..n] {
        return false;
    }
    match (fa == pa.len(), fb == pb.len()) {
        // Two literal paths: equal, or one a folder of the other.
        (true, true) => true,
        (false, true) => matches(&pa.join("/"), &pb.join("/"), fb, fa),
        (true, false) => matches(&pb.join("/"), &pa.join("/"), fa, fb),
        (false, false) => true,
    }
}

/// Does the glob `pattern` match the literal `path` or a file under it
/// (the literal is shorter than the glob's fixed part: it is a folder of it)?
fn matches(pattern: &str, path: &str, path_len: usize, fixed_len: usize) -> bool {
    if path_len <= fixed_len {
        return true;
    }
    let opts = glob::MatchOptions { require_literal_separator: true, ..Default::default() };
    let pattern = pattern.strip_suffix("/**").map(|p| format!("{p}/**/*")).unwrap_or(pattern.to_string());
    glob::Pattern::new(&pattern).is_ok_and(|g| g.matches_with(path, opts))
        || glob::Pattern::new(&format!("{pattern}/**/*")).is_ok_and(|g| g.matches_with(path, opts))
}

/// Every task `i` depends on, directly or through others.
fn ancestors_of(plan: &PlanFile, index: &HashMap<&str, usize>, i: usize) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = deps(plan, index, i);
    while let Some(u) = stack.pop() {
        if seen.insert(u) {
            stack.extend(deps(plan, index, u));
        }
    }
    seen
}

fn deps(plan: &PlanFile, index: &HashMap<&str, usize>, i: usize) -> Vec<usize> {
    let Some(t) = plan.tasks.get(i) else { return Vec::new() };
    t.depends_on.iter().filter_map(|d| index.get(d.as_str()).copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cover_each_other_by_text() {
        assert!(covers("dist/out.txt", "dist/out.txt"));
        assert!(covers("./dist//out.txt", "dist/out.txt"), "normalized");
        assert!(covers("dist", "dist/out.txt") && covers("dist/out.txt", "dist"), "a folder of it");
        assert!(covers("dist/**", "dist/out.txt") && covers("dist/out.txt", "dist/**"));
        assert!(covers("dist/**", "dist/a/b/c.txt"));
        assert!(covers("dist/*.txt", "dist/out.txt"));
        assert!(!covers("dist/*.txt", "dist/out.bin"));
        assert!(!covers("dist/*.txt", "dist/a/out.txt"), "* stays in its folder");
        assert!(covers("dist/*", "dist"), "the folder the glob is in");
        assert!(covers("**/*.txt", "dist/*.md"), "two globs: fixed parts lead into each other");
        assert!(!covers("src/*.rs", "dist/*.txt"));
        assert!(!covers("dist/out.txt", "dist/out.txt.bak"));
        assert!(!covers("distribution/x", "dist/x"));
    }

    #[test]
    fn path_words_are_the_path_like_words_of_a_shell_line() {
        assert_eq!(path_words("mkdir -p dist && echo built > dist/out.txt"), vec!["dist/out.txt"]);
        assert_eq!(path_words("cp a.txt b/"), vec!["a.txt", "b/"]);
        assert!(path_words("echo --out=/etc/x ../up .").is_empty(), "absolute, `..` and `.` are not workspace paths");
        assert!(path_words("true").is_empty());
    }
}
