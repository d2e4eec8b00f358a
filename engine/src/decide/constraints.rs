//! The goal's protected paths as decisions: which protected files changed
//! in an attempt's window that its task may not change, and the state an
//! attempt is judged against. Pure: the run loop observes the files (through
//! the file-state cache), this compares what it observed.

use std::collections::{BTreeMap, BTreeSet};

use crate::evidence::PathChange;

/// Workspace-relative files and their content digests (`None`: absent), as
/// one observation saw them; a look's entries carry each path's mode too
/// (`checkpoint::mode`: a mode change is a change).
pub type Files = BTreeMap<String, Option<String>>;

/// One checkable constraint's protected paths (paths or globs).
#[derive(Debug, Clone, Copy)]
pub struct Protected<'a> {
    pub id: &'a str,
    pub globs: &'a [String],
}

/// The constraint ids of the engine's own protected paths. A plan's ids
/// cannot hold `:`, so none collides with a goal's constraint.
pub const PLAN_FILE: &str = "engine:plan_file";
pub const GIT: &str = "engine:git";
pub const ENGINE_CONFIG: &str = "engine:config";

/// How the workspace's `.git` is, as the run found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Git {
    /// A repository's folder: its `config` and `hooks` are protected (what a
    /// person's next git command reads and runs); its objects, refs, index
    /// and logs are what a task's `git commit` writes.
    Folder,
    /// A worktree's or submodule's pointer file (`gitdir: …`): protected.
    File,
    Absent,
}

/// What the engine protects from providers that start processes (command,
/// agent and stdio MCP providers), besides the goal's constraints, as
/// (constraint id, workspace-relative paths): the plan file when it lies in
/// the workspace (`plan_file`, relative), the repository's config and hooks,
/// and the engine's own folder (`.engine`). The store never lies in a path
/// a provider may write (the sandbox refuses such a store).
pub fn engine_protected(plan_file: Option<&str>, git: Git) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    if let Some(p) = plan_file.map(plain).filter(|p| !p.is_empty()) {
        out.push((PLAN_FILE.to_string(), vec![p]));
    }
    match git {
        Git::Folder => out.push((GIT.to_string(), vec![".git/config".to_string(), ".git/hooks".to_string()])),
        Git::File => out.push((GIT.to_string(), vec![".git".to_string()])),
        Git::Absent => {}
    }
    out.push((ENGINE_CONFIG.to_string(), vec![".engine".to_string()]));
    out
}

/// `.` and empty components dropped (`./tests//a` is `tests/a`); `..` never
/// reaches here (plan validation refuses it).
fn plain(path: &str) -> String {
    path.split('/').filter(|p| !p.is_empty() && *p != ".").collect::<Vec<_>>().join("/")
}

/// Does `glob` cover `path`: name it, or name a folder it lies in — the
/// files a declared path or glob expands to, and only those (`*` does not
/// cross `/`, and matches no leading dot, as when inputs are expanded).
pub fn covers(glob: &str, path: &str) -> bool {
    let (glob, path) = (plain(glob), plain(path));
    if !glob.contains(['*', '?', '[']) {
        return path == glob || path.strip_prefix(&glob).is_some_and(|rest| rest.starts_with('/'));
    }
    let Ok(pattern) = glob::Pattern::new(&glob) else { return false };
    let opts =
        glob::MatchOptions { require_literal_separator: true, require_literal_leading_dot: true, ..Default::default() };
    // The path itself, then each folder it lies in (a glob naming a folder
    // covers what is in it).
    let mut at = path.as_str();
    loop {
        if pattern.matches_with(at, opts) {
            return true;
        }
        match at.rfind('/') {
            Some(i) => at = &at[..i],
            None => return false,
        }
    }
}

/// Every file whose entry differs between `before` and `after` (changed —
/// its content or its mode —, created or deleted) under some constraint's protected paths, and not
/// covered by the task's `may_change`; in path order, each naming the
/// constraints that protect it.
pub fn changes(before: &Files, after: &Files, protected: &[Protected], may_change: &[String]) -> Vec<PathChange> {
    let paths: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut out = Vec::new();
    for path in paths {
        let (b, a) = (before.get(path).cloned().flatten(), after.get(path).cloned().flatten());
        if crate::checkpoint::mode::same(b.as_deref(), a.as_deref()) || may_change.iter().any(|g| covers(g, path)) {
            continue;
        }
        let constraints: Vec<String> =
            protected.iter().filter(|p| p.globs.iter().any(|g| covers(g, path))).map(|p| p.id.to_string()).collect();
        if !constraints.is_empty() {
            out.push(PathChange { path: path.clone(), before: b, after: a, constraints });
        }
    }
    out
}

/// The state an attempt is judged against: what was observed before it,
/// except that each path an earlier attempt of the same task changed in
/// violation keeps the digest it had before that violation. So a repair
/// that restores the file changes nothing, and one that leaves it changed
/// is judged the same violation again — never a clean start on a broken
/// workspace.
pub fn baseline(mut observed: Files, earlier_violation: &[PathChange]) -> Files {
    for c in earlier_violation {
        observed.insert(c.path.clone(), c.before.clone());
    }
    observed
}

/// What of an earlier violation a new attempt is still judged against
/// (`baseline`): every path, except the plan file when a revision was
/// recorded since (`recorded_since`): a person's `engine revise` read the
/// file as it then was and recorded it, so that content is the plan's now,
/// and an attempt that leaves it so changes nothing. A path also under a
/// goal's own constraint stays carried: a revise accepts no such change.
pub fn carried(earlier: Vec<PathChange>, recorded_since: bool) -> Vec<PathChange> {
    earlier.into_iter().filter(|c| !(recorded_since && c.constraints.iter().all(|id| id == PLAN_FILE))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_file_a_revise_recorded_is_no_longer_carried() {
        let change = |path: &str, ids: &[&str]| PathChange {
            path: path.into(),
            before: Some("old".into()),
            after: Some("new".into()),
            constraints: ids.iter().map(|s| s.to_string()).collect(),
        };
        let earlier = vec![
            change("plan.json", &[PLAN_FILE]),
            change("tests/a.py", &["C1"]),
            change("p.json", &[PLAN_FILE, "C2"]),
        ];
        assert_eq!(carried(earlier.clone(), false).len(), 3, "in the same revision: a repair is judged the same");
        let paths: Vec<String> = carried(earlier, true).into_iter().map(|c| c.path).collect();
        assert_eq!(paths, vec!["tests/a.py", "p.json"], "a revise accepts the plan file, nothing else");
    }

    fn files(list: &[(&str, Option<&str>)]) -> Files {
        list.iter().map(|(p, d)| (p.to_string(), d.map(str::to_string))).collect()
    }

    fn globs(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_engine_protects_the_plan_file_git_and_its_own_folder() {
        let all = engine_protected(Some("./plans/plan.json"), Git::Folder);
        let ids: Vec<(&str, Vec<&str>)> =
            all.iter().map(|(id, g)| (id.as_str(), g.iter().map(String::as_str).collect())).collect();
        assert_eq!(
            ids,
            vec![
                (PLAN_FILE, vec!["plans/plan.json"]),
                (GIT, vec![".git/config", ".git/hooks"]),
                (ENGINE_CONFIG, vec![".engine"]),
            ]
        );
        // A plan file outside the workspace, a worktree's `.git` file, none.
        let some = engine_protected(None, Git::File);
        assert_eq!(some[0], (GIT.to_string(), vec![".git".to_string()]));
        assert_eq!(engine_protected(None, Git::Absent).len(), 1);
        // A commit's objects and refs are not protected; hooks and config are.
        let git = &all[1].1;
        assert!(covers(&git[1], ".git/hooks/pre-commit") && covers(&git[0], ".git/config"));
        assert!(!git.iter().any(|g| covers(g, ".git/objects/ab/cdef") || covers(g, ".git/refs/heads/main")));
    }

    #[test]
    fn covers_paths_folders_and_globs_as_inputs_expand() {
        assert!(covers("tests/**", "tests/test_money.py"));
        assert!(covers("tests/**", "tests/unit/deep/test_x.py"));
        assert!(covers("tests", "tests/unit/test_x.py"), "a folder covers what is in it");
        assert!(covers("./tests/", "tests/a.py"));
        assert!(covers("pyproject.toml", "pyproject.toml"));
        assert!(covers("tests/*.py", "tests/a.py"));
        assert!(covers("tests/*", "tests/unit/a.py"), "a glob naming a folder covers what is in it");
        assert!(!covers("tests/*.py", "tests/unit/a.py"), "`*` does not cross `/`");
        assert!(!covers("tests", "tests2/a.py"));
        assert!(!covers("tests/*.py", "tests/.hidden.py"), "no leading dot, as inputs expand");
        assert!(!covers("money.py", "money.pyc"));
        assert!(!covers("[", "["), "an invalid glob covers nothing (validation refuses it first)");
    }

    #[test]
    fn names_every_changed_created_and_deleted_protected_file() {
        let c1 = globs(&["tests/**"]);
        let c2 = globs(&["pyproject.toml", "tests/test_a.py"]);
        let protected = [Protected { id: "C1", globs: &c1 }, Protected { id: "C2", globs: &c2 }];
        let before = files(&[
            ("tests/test_a.py", Some("a1")),
            ("tests/test_b.py", Some("b1")),
            ("pyproject.toml", None),
            ("money.py", Some("m1")),
        ]);
        let after = files(&[
            ("tests/test_a.py", Some("a2")),
            ("tests/test_c.py", Some("c1")),
            ("pyproject.toml", Some("p1")),
            ("money.py", Some("m2")),
        ]);
        let got = changes(&before, &after, &protected, &[]);
        let seen: Vec<(&str, &str, Vec<String>)> =
            got.iter().map(|c| (c.path.as_str(), c.what(), c.constraints.clone())).collect();
        assert_eq!(
            seen,
            vec![
                ("pyproject.toml", "created", vec!["C2".to_string()]),
                ("tests/test_a.py", "changed", vec!["C1".to_string(), "C2".to_string()]),
                ("tests/test_b.py", "deleted", vec!["C1".to_string()]),
                ("tests/test_c.py", "created", vec!["C1".to_string()]),
            ],
            "money.py is not protected"
        );
        assert_eq!((got[1].before.as_deref(), got[1].after.as_deref()), (Some("a1"), Some("a2")));
        // Nothing changed: nothing to say.
        assert!(changes(&before, &before, &protected, &[]).is_empty());
    }

    /// A mode change of a protected file is a change; a baseline stored
    /// before modes were recorded (an intent's, judged after an upgrade)
    /// compares on content only: never a false violation.
    #[test]
    fn a_mode_change_is_judged_and_an_old_baseline_compares_on_content() {
        let c1 = globs(&["check.sh"]);
        let protected = [Protected { id: "C1", globs: &c1 }];
        let before = files(&[("check.sh", Some("c1;mode=0644"))]);
        let chmod = files(&[("check.sh", Some("c1;mode=0000"))]);
        let got = changes(&before, &chmod, &protected, &[]);
        assert_eq!(got.iter().map(|c| (c.path.as_str(), c.what())).collect::<Vec<_>>(), vec![("check.sh", "changed")]);
        assert!(changes(&before, &chmod, &protected, &globs(&["check.sh"])).is_empty(), "may_change covers it");
        let old = files(&[("check.sh", Some("c1"))]);
        assert!(changes(&old, &chmod, &protected, &[]).is_empty(), "no mode recorded: content only");
        assert_eq!(changes(&old, &files(&[("check.sh", Some("c2;mode=0644"))]), &protected, &[]).len(), 1);
    }

    #[test]
    fn may_change_allows_exactly_what_it_covers() {
        let c1 = globs(&["tests/**"]);
        let protected = [Protected { id: "C1", globs: &c1 }];
        let before = files(&[("tests/test_a.py", Some("a1")), ("tests/data/x.json", Some("x1"))]);
        let after = files(&[("tests/test_a.py", Some("a2")), ("tests/data/x.json", Some("x2"))]);
        let got = changes(&before, &after, &protected, &globs(&["tests/data"]));
        assert_eq!(got.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), vec!["tests/test_a.py"]);
        assert!(changes(&before, &after, &protected, &globs(&["tests/**"])).is_empty());
    }

    #[test]
    fn a_violation_is_judged_against_the_state_before_it() {
        let c1 = globs(&["tests/**"]);
        let protected = [Protected { id: "C1", globs: &c1 }];
        // Attempt 1 changed a1 -> a2 (a violation).
        let first =
            changes(&files(&[("tests/t.py", Some("a1"))]), &files(&[("tests/t.py", Some("a2"))]), &protected, &[]);
        assert_eq!(first.len(), 1);
        // The repair starts on the changed workspace, judged against a1.
        let base = baseline(files(&[("tests/t.py", Some("a2")), ("tests/u.py", Some("u1"))]), &first);
        assert_eq!(base, files(&[("tests/t.py", Some("a1")), ("tests/u.py", Some("u1"))]));
        // It restores the file: no change. It leaves it: the same violation.
        assert!(changes(&base, &files(&[("tests/t.py", Some("a1")), ("tests/u.py", Some("u1"))]), &protected, &[])
            .is_empty());
        let again = changes(&base, &files(&[("tests/t.py", Some("a2")), ("tests/u.py", Some("u1"))]), &protected, &[]);
        assert_eq!(again, first);
        // A deleted file restored by the repair: created in the window, but
        // back to its state before the violation, so no change.
        let deleted = vec![PathChange {
            path: "tests/t.py".into(),
            before: Some("a1".into()),
            after: None,
            constraints: vec!["C1".into()],
        }];
        let base = baseline(files(&[]), &deleted);
        assert!(changes(&base, &files(&[("tests/t.py", Some("a1"))]), &protected, &[]).is_empty());
    }
}
