//! `engine stores [--prune] [--force]`: the default stores in the state
//! folder, each with what `--prune` would do to it (`decide::prune`); with
//! `--prune`, those it may remove are removed, one folder at a time.

use std::path::PathBuf;

use crate::decide::prune::{self, Facts, Kept, Outcomes, Verdict, Workspace};
use crate::error::Result;
use crate::store::location;
use crate::store::state_folder::{self, StoreFolder};

/// What became of one store.
#[derive(Debug, Clone)]
pub enum Fate {
    /// Listed only: what `--prune` would do.
    Would(Verdict),
    Removed {
        forced: bool,
    },
    Kept(Kept),
    /// `--prune` would have removed it, but its folder could not be.
    NotRemoved(String),
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub store: StoreFolder,
    pub fate: Fate,
}

#[derive(Debug, Clone)]
pub struct Listing {
    /// The state folder's stores root.
    pub root: PathBuf,
    pub entries: Vec<Entry>,
    /// Stores past `STORES_LISTED_MAX`, not examined.
    pub left_out: usize,
    pub pruned: bool,
}

pub fn stores(prune: bool, force: bool) -> Result<Listing> {
    let root = location::state_home()?;
    let (found, left_out) = state_folder::list(&root)?;
    let entries = found
        .into_iter()
        .map(|store| {
            let verdict = prune::decide(&facts(&store), force);
            let fate = match (prune, verdict) {
                (false, verdict) => Fate::Would(verdict),
                (true, Verdict::Keep(kept)) => Fate::Kept(kept),
                (true, Verdict::Remove { forced }) => match state_folder::remove(&store.folder) {
                    Ok(()) => Fate::Removed { forced },
                    Err(e) => Fate::NotRemoved(e.to_string()),
                },
            };
            Entry { store, fate }
        })
        .collect();
    Ok(Listing { root, entries, left_out, pruned: prune })
}

fn facts(store: &StoreFolder) -> Facts {
    let workspace = match (&store.workspace, store.workspace_exists) {
        (None, _) => Workspace::Unrecorded,
        (Some(_), true) => Workspace::Present,
        (Some(_), false) => Workspace::Gone,
    };
    let outcomes = match &store.unsettled {
        Ok(u) => Outcomes::Read { unknown: u.unknown, in_doubt: u.in_doubt },
        Err(why) => Outcomes::Unreadable(why.clone()),
    };
    Facts { workspace, in_use_by: store.in_use_by, outcomes }
}
