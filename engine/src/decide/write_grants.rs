//! Which paths of the workspace the kernel lets a task's process write:
//! its declared `outputs` (and `may_change`), as Landlock can express them.
//! Landlock grants rights on an existing inode and everything beneath it,
//! and nothing can be carved back out. So each declared line gets the
//! smallest existing hierarchy that covers it:
//!
//! - a glob (`out/**`, `dist/*.js`): the folder before its first wildcard;
//! - a literal path that exists: that file (written in place) or folder;
//! - a literal path that does not exist yet: the folder it will be created
//!   in (creating a file needs rights on its folder);
//!
//! and when that folder does not exist yet either, the nearest existing one
//! above it. A line whose hierarchy would be the workspace's top level (a
//! glob like `*.md`, a top-level file not yet made) cannot be granted
//! narrowly: the top level holds `.git` and the plan file. The task then
//! gets the whole workspace as before, and its outputs are held only by the
//! check after the attempt (`decide::declared`), which says so. Pure: the
//! caller looks at the workspace (`Found`).

/// What the workspace holds at a relative path, symlinks followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    File,
    Folder,
    Missing,
    /// It resolves outside the workspace (a symlink): never granted.
    Outside,
}

/// The grants of one task's declared lines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants {
    /// (relative path, the declared line it serves), in declared order.
    pub rules: Vec<(String, String)>,
    /// `Some((line, why))`: the first line that needs the whole workspace.
    pub whole: Option<(String, String)>,
    /// Lines given no rule at all (they resolve outside the workspace, or
    /// name a folder that is never an output), with why.
    pub denied: Vec<(String, String)>,
}

/// The grants for `declared` (workspace-relative paths and globs), looking
/// at the workspace with `look`; `plan_file` (relative) is never granted.
pub fn grants(declared: &[String], plan_file: Option<&str>, look: &dyn Fn(&str) -> Found) -> Grants {
    let mut g = Grants::default();
    for line in declared {
        let parts: Vec<&str> = line.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        if crate::decide::declared::never_output(line) {
            g.denied.push((line.clone(), "it lies in a VCS or engine folder, never a task's output".into()));
            continue;
        }
        let wild = parts.iter().position(|p| p.contains(['*', '?', '[']));
        let (base, literal) = match wild {
            Some(i) => (parts.get(..i).unwrap_or_default(), false),
            None => (&parts[..], true),
        };
        match hierarchy(base, literal, look) {
            Ok(Some(path)) if holds(&path, plan_file) => {
                let why = format!("its nearest existing folder `{path}` holds the plan file");
                g.whole.get_or_insert((line.clone(), why));
            }
            Ok(Some(path)) => g.rules.push((path, line.clone())),
            Ok(None) => {
                let why = if literal {
                    "a top-level path that does not exist yet: creating it needs rights on the workspace's top level"
                } else {
                    "a glob over the workspace's top level (or over a folder not made yet)"
                };
                g.whole.get_or_insert((line.clone(), why.into()));
            }
            Err(at) => g.denied.push((line.clone(), format!("`{at}` resolves outside the workspace"))),
        }
    }
    g
}

/// The smallest existing hierarchy covering `base`: `Ok(None)` when that is
/// the top level, `Err(path)` when a path on the way resolves outside.
fn hierarchy(base: &[&str], literal: bool, look: &dyn Fn(&str) -> Found) -> Result<Option<String>, String> {
    for len in (1..=base.len()).rev() {
        let path = base.get(..len).unwrap_or_default().join("/");
        match look(&path) {
            Found::Folder => return Ok(Some(path)),
            // The literal itself may be a file; a file elsewhere on the way
            // is no folder to grant.
            Found::File if literal && len == base.len() => return Ok(Some(path)),
            Found::Outside => return Err(path),
            Found::File | Found::Missing => {}
        }
    }
    Ok(None)
}

/// Is `plan_file` at or beneath `path`?
fn holds(path: &str, plan_file: Option<&str>) -> bool {
    plan_file.is_some_and(|p| p == path || p.strip_prefix(path).is_some_and(|rest| rest.starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(path: &str) -> Found {
        match path {
            "out" | "src" | "src/gen" | "plans" => Found::Folder,
            "report.txt" | "src/main.rs" | "plans/plan.json" => Found::File,
            "link" => Found::Outside,
            _ => Found::Missing,
        }
    }

    fn of(declared: &[&str]) -> Grants {
        let declared: Vec<String> = declared.iter().map(|s| s.to_string()).collect();
        grants(&declared, Some("plans/plan.json"), &ws)
    }

    fn rules(g: &Grants) -> Vec<&str> {
        g.rules.iter().map(|(p, _)| p.as_str()).collect()
    }

    #[test]
    fn each_line_gets_the_smallest_existing_hierarchy() {
        let g = of(&["out/**", "src/main.rs", "src/gen/*.rs", "src/new/deep/x.rs", "report.txt", "out/new.txt"]);
        assert_eq!(rules(&g), vec!["out", "src/main.rs", "src/gen", "src", "report.txt", "out"]);
        assert_eq!(g.whole, None);
        assert!(g.denied.is_empty());
        assert_eq!(g.rules[1], ("src/main.rs".to_string(), "src/main.rs".to_string()));
    }

    #[test]
    fn what_needs_the_top_level_takes_the_whole_workspace_and_says_which_line() {
        for line in ["*.md", "**", "new.txt", "new/x.txt", "new/**"] {
            let g = of(&["out/**", line]);
            assert_eq!(g.whole.as_ref().map(|w| w.0.as_str()), Some(line), "{line}");
        }
        let g = of(&["plans/new/x.json"]);
        assert!(g.whole.as_ref().is_some_and(|w| w.1.contains("holds the plan file")), "{g:?}");
    }

    #[test]
    fn outside_and_never_outputs_get_no_rule() {
        let g = of(&["link/x.txt", ".git/config", "a/.jj/x", "out/**"]);
        assert_eq!(rules(&g), vec!["out"]);
        assert_eq!(g.denied.len(), 3, "{g:?}");
        assert!(g.denied[0].1.contains("`link` resolves outside"), "{g:?}");
        assert_eq!(g.whole, None);
    }
}
