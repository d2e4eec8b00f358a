//! `engine stores --prune`: may a default store be removed? Only when its
//! workspace is gone, no live engine holds it, and nothing in it waits on
//! a person — an operation whose effect may have happened and no one has
//! settled is the one record of that, and is kept unless the person says
//! `--force`. A store whose workspace still exists (or cannot be known)
//! is never removed, `--force` or not.

/// What `engine stores` found out about one store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub workspace: Workspace,
    /// The pid of a live engine holding the store's lease.
    pub in_use_by: Option<i64>,
    pub outcomes: Outcomes,
}

/// The workspace a store belongs to, as its `workspace` file records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workspace {
    /// The recorded folder is there.
    Present,
    /// Nothing is at the recorded path any more.
    Gone,
    /// No `workspace` file (or one that cannot be read): whose store it is
    /// cannot be told.
    Unrecorded,
}

/// The operations of a store no one knows the outcome of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcomes {
    /// `unknown`: `effect_unknown`, waiting on a settlement; `in_doubt`:
    /// left between intent and receipt.
    Read { unknown: u64, in_doubt: u64 },
    /// The store could not be read (damaged, newer, …): the reason.
    Unreadable(String),
}

/// Why a store stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    WorkspaceExists,
    WorkspaceUnrecorded,
    InUse { pid: i64 },
    Unsettled { unknown: u64, in_doubt: u64 },
    Unreadable(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Remove it; `forced`: only because the person said `--force` (it
    /// holds unsettled operations, or could not be read).
    Remove {
        forced: bool,
    },
    Keep(Kept),
}

/// The verdict on one store, the rules in order.
pub fn decide(facts: &Facts, force: bool) -> Verdict {
    match facts.workspace {
        Workspace::Present => return Verdict::Keep(Kept::WorkspaceExists),
        Workspace::Unrecorded => return Verdict::Keep(Kept::WorkspaceUnrecorded),
        Workspace::Gone => {}
    }
    if let Some(pid) = facts.in_use_by {
        return Verdict::Keep(Kept::InUse { pid });
    }
    let held_back = match &facts.outcomes {
        Outcomes::Read { unknown: 0, in_doubt: 0 } => None,
        Outcomes::Read { unknown, in_doubt } => Some(Kept::Unsettled { unknown: *unknown, in_doubt: *in_doubt }),
        Outcomes::Unreadable(why) => Some(Kept::Unreadable(why.clone())),
    };
    match held_back {
        None => Verdict::Remove { forced: false },
        Some(_) if force => Verdict::Remove { forced: true },
        Some(kept) => Verdict::Keep(kept),
    }
}

impl Kept {
    /// Why, in words, with what a person can do about it.
    pub fn why(&self) -> String {
        match self {
            Kept::WorkspaceExists => "its workspace exists".into(),
            Kept::WorkspaceUnrecorded => {
                "it records no workspace, so whose it is cannot be told (remove its folder by hand if you know)".into()
            }
            Kept::InUse { pid } => format!("engine process {pid} holds it now"),
            Kept::Unsettled { unknown, in_doubt } => {
                let ops = if *unknown == 1 { "operation" } else { "operations" };
                format!("{unknown} {ops} with an unknown outcome and {in_doubt} in doubt wait on a person")
            }
            Kept::Unreadable(why) => format!("it cannot be read ({why}), so what it waits on cannot be told"),
        }
    }

    /// A stable word for `--json`.
    pub fn code(&self) -> &'static str {
        match self {
            Kept::WorkspaceExists => "workspace_exists",
            Kept::WorkspaceUnrecorded => "workspace_unrecorded",
            Kept::InUse { .. } => "in_use",
            Kept::Unsettled { .. } => "unsettled_operations",
            Kept::Unreadable(_) => "unreadable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(workspace: Workspace, in_use_by: Option<i64>, outcomes: Outcomes) -> Facts {
        Facts { workspace, in_use_by, outcomes }
    }

    const CLEAN: Outcomes = Outcomes::Read { unknown: 0, in_doubt: 0 };

    #[test]
    fn only_a_store_whose_workspace_is_gone_is_removed() {
        for force in [false, true] {
            assert_eq!(decide(&facts(Workspace::Present, None, CLEAN), force), Verdict::Keep(Kept::WorkspaceExists));
            assert_eq!(
                decide(&facts(Workspace::Unrecorded, None, CLEAN), force),
                Verdict::Keep(Kept::WorkspaceUnrecorded)
            );
            assert_eq!(decide(&facts(Workspace::Gone, Some(7), CLEAN), force), Verdict::Keep(Kept::InUse { pid: 7 }));
        }
        assert_eq!(decide(&facts(Workspace::Gone, None, CLEAN), false), Verdict::Remove { forced: false });
        assert_eq!(decide(&facts(Workspace::Gone, None, CLEAN), true), Verdict::Remove { forced: false });
    }

    #[test]
    fn unsettled_or_unreadable_stores_go_only_with_force() {
        for outcomes in [
            Outcomes::Read { unknown: 1, in_doubt: 0 },
            Outcomes::Read { unknown: 0, in_doubt: 2 },
            Outcomes::Unreadable("STORE_CORRUPT".into()),
        ] {
            let f = facts(Workspace::Gone, None, outcomes.clone());
            match decide(&f, false) {
                Verdict::Keep(k) => assert!(matches!(k, Kept::Unsettled { .. } | Kept::Unreadable(_)), "{k:?}"),
                other => panic!("{outcomes:?} kept without --force, not {other:?}"),
            }
            assert_eq!(decide(&f, true), Verdict::Remove { forced: true }, "{outcomes:?}");
        }
        let why = Kept::Unsettled { unknown: 1, in_doubt: 2 }.why();
        assert!(why.contains("1 operation with an unknown outcome and 2 in doubt"), "{why}");
    }
}
