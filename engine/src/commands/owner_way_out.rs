//! The way out when everyone a `people` list names is gone: the store's
//! owner (the owner of a SQLite store's folder, who chose where the ledger
//! lives and can read every byte of it anyway) records a revision that
//! changes `people`, and nothing else, with `engine revise PLAN --people
//! --reason WHY`. Anyone else is refused (`NOT_PERMITTED`); the revision's
//! request on the act chain holds both lists (`revise::record_ask`).

use std::path::Path;

use crate::decide::people;
use crate::error::{Code, Error, Result};
use crate::plan::PlanFile;
use crate::store::access;
use crate::store::acts::Person;

/// A refusal by the lists in force, naming the way out.
pub fn named(e: Error) -> Error {
    Error {
        message: format!(
            "{}; if everyone it names is gone, the store's owner may change `people` with `engine revise PLAN --people --reason WHY`",
            e.message
        ),
        ..e
    }
}

/// May `person` change `people` from `active` to `next` as the owner of
/// the store at `store`? Only on a SQLite store, only its owner, only a
/// change of `people`, and nothing else in the plan.
pub fn permitted(store: &Path, active: &PlanFile, next: &PlanFile, person: &Person) -> Result<()> {
    if crate::store::is_shared(store) {
        return Err(Error::usage(
            "--people is the way out on a SQLite store, whose owner is its folder's; on PostgreSQL, revise `people` as someone the lists in force name",
        )
        .at("--people"));
    }
    let owner = access::store_owner(store)?;
    if person.uid != owner {
        let name = crate::os::user_name(owner).unwrap_or_else(|| format!("uid {owner}"));
        let folder = store.parent().unwrap_or(store).display().to_string();
        return Err(Error::new(
            Code::NotPermitted,
            format!(
                "user `{}` may not revise `people` with --people: only the store's owner ({name}, uid {owner}, who owns {folder}) may; nothing was recorded",
                person.user
            ),
        )
        .at("--people"));
    }
    if !people::changes(active.people.as_ref(), next.people.as_ref()) {
        return Err(Error::usage(
            "--people: the plan's `people` is the same as the active revision's; nothing to change",
        )
        .at("$.people"));
    }
    if !only_people_differ(active, next)? {
        return Err(Error::usage(
            "--people records a change of `people` and nothing else: revise the rest of the plan as someone the lists name, before or after",
        )
        .at("$.people"));
    }
    Ok(())
}

/// Is `people` all that differs between the two plans?
fn only_people_differ(active: &PlanFile, next: &PlanFile) -> Result<bool> {
    let mut probe = next.clone();
    probe.people = active.people.clone();
    let value = |p: &PlanFile| serde_json::to_value(p).map_err(|e| Error::internal(format!("plan to JSON: {e}")));
    Ok(value(&probe)? == value(active)?)
}
