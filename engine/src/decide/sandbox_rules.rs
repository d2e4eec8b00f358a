//! Which of a plan's declared write rules (`"sandbox": {"write": [...]}`)
//! the engine refuses: a rule that covers, or lies inside, a place no
//! provider may ever write — a cgroup tree (a process that writes one
//! moves itself out of its cgroup, and a stop, a timeout or a takeover no
//! longer finds it), the store's folder (the ledger), or the engine's
//! state folder (every workspace's store, the OAuth tokens). A Landlock
//! rule on a folder covers everything beneath it, so both directions
//! count. The same answer for `engine check` and `run`: the places are
//! gathered once (`run::sandboxes`), the judgement is this pure function.

use std::path::{Path, PathBuf};

/// What a guarded place is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarded {
    CgroupTree,
    StoreFolder,
    EngineState,
}

impl Guarded {
    fn words(self) -> &'static str {
        match self {
            Guarded::CgroupTree => {
                "the cgroup tree mounted at {}: a provider's process could move itself out of its cgroup and outlive \
                 the run, unseen by a stop, a timeout or a takeover"
            }
            Guarded::StoreFolder => "the store's folder {}: a provider could write the ledger",
            Guarded::EngineState => "the engine's state folder {} (every workspace's store, the OAuth tokens)",
        }
    }
}

/// A place no provider may write, resolved (absolute, symlinks followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub what: Guarded,
    pub path: PathBuf,
}

/// A declared write rule: its provider, its index in `write`, as written,
/// and resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule<'a> {
    pub provider: &'a str,
    pub index: usize,
    pub as_written: &'a str,
    pub path: PathBuf,
}

impl Rule<'_> {
    /// The rule's JSON path in the plan.
    pub fn place(&self) -> String {
        format!("$.providers.{}.sandbox.write[{}]", self.provider, self.index)
    }
}

/// The first rule (in plan order) that reaches a guarded place: the rule
/// and why, in words — naming the widest place it covers, or else the
/// narrowest it lies inside.
pub fn refused<'a, 'r>(rules: &'r [Rule<'a>], places: &[Place]) -> Option<(&'r Rule<'a>, String)> {
    rules.iter().find_map(|rule| {
        let covered = places.iter().filter(|p| p.path.starts_with(&rule.path));
        let widest = covered.min_by_key(|p| p.path.components().count());
        let around = places.iter().filter(|p| rule.path.starts_with(&p.path));
        let place = widest.or_else(|| around.max_by_key(|p| p.path.components().count()))?;
        let how = if place.path.starts_with(&rule.path) { "covers" } else { "lies inside" };
        let what = place.what.words().replacen("{}", &place.path.display().to_string(), 1);
        let resolved = match Path::new(rule.as_written) == rule.path {
            true => String::new(),
            false => format!(" ({})", rule.path.display()),
        };
        Some((
            rule,
            format!(
                "sandbox write rule {:?}{resolved} {how} {what}; refused: no provider may write there (docs/sandbox.md)",
                rule.as_written
            ),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(i: usize, path: &str) -> Rule<'static> {
        let leaked: &'static str = Box::leak(path.to_string().into_boxed_str());
        Rule { provider: "sh", index: i, as_written: leaked, path: PathBuf::from(path) }
    }

    fn places() -> Vec<Place> {
        vec![
            Place { what: Guarded::CgroupTree, path: "/sys/fs/cgroup/unified".into() },
            Place { what: Guarded::StoreFolder, path: "/srv/engine/docs".into() },
            Place { what: Guarded::EngineState, path: "/home/a/.local/state/engine".into() },
        ]
    }

    #[test]
    fn a_rule_above_on_or_inside_a_guarded_place_is_refused_naming_it() {
        for (path, words) in [
            ("/sys/fs/cgroup", "covers the cgroup tree mounted at /sys/fs/cgroup/unified"),
            ("/sys/fs/cgroup/unified/engine-1", "lies inside the cgroup tree"),
            ("/", "covers the store's folder /srv/engine/docs"),
            ("/srv/engine", "covers the store's folder /srv/engine/docs"),
            ("/srv/engine/docs/sub", "lies inside the store's folder"),
            ("/home/a", "covers the engine's state folder"),
            ("/home/a/.local/state/engine/oauth", "lies inside the engine's state folder"),
        ] {
            let rules = [rule(0, "/home/a/.npm"), rule(1, path)];
            let (r, why) = refused(&rules, &places()).unwrap_or_else(|| panic!("{path} passed"));
            assert_eq!(r.place(), "$.providers.sh.sandbox.write[1]");
            assert!(why.contains(words), "{path}: {why}");
            assert!(why.contains(&format!("{path:?}")), "{path}: names the rule as written: {why}");
        }
    }

    #[test]
    fn the_widest_place_a_rule_covers_is_named_else_the_narrowest_it_is_in() {
        let places = vec![
            Place { what: Guarded::EngineState, path: "/s/engine".into() },
            Place { what: Guarded::StoreFolder, path: "/s/engine/stores/k".into() },
        ];
        for (path, words) in [
            ("/s", "covers the engine's state folder"),
            ("/s/engine/stores/k", "covers the store's folder"),
            ("/s/engine/stores/k/sub", "lies inside the store's folder"),
            ("/s/engine/oauth", "lies inside the engine's state folder"),
        ] {
            let (_, why) = refused(&[rule(0, path)], &places).unwrap_or_else(|| panic!("{path} passed"));
            assert!(why.contains(words), "{path}: {why}");
        }
    }

    #[test]
    fn a_rule_beside_a_guarded_place_passes() {
        let rules = [
            rule(0, "/home/a/.npm"),
            rule(1, "/sys/fs/cgroupx"),
            rule(2, "/srv/engine/docs2"),
            rule(3, "/dev/nvidia0"),
        ];
        assert_eq!(refused(&rules, &places()), None);
    }
}
