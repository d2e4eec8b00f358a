//! Completions that know the store: `COMPLETE=SHELL engine` prints a
//! shell's registration, which calls the engine back at every Tab
//! (clap_complete's dynamic completion, `CompleteEnv`); the arguments that
//! name a task offer the refs of the goal's active revision, those that
//! name an operation the operation ids a person can act on, each with its
//! task and state beside it.
//!
//! The store is read, never written, migrated or created: a folder with
//! no store, a shared (PostgreSQL) store, a store that does not open —
//! every failure offers nothing and prints nothing. `engine completions
//! SHELL` still prints the script the build wrote (no store there).

use std::ffi::OsStr;
use std::path::PathBuf;

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::CompleteEnv;

use crate::ids::GoalId;
use crate::state::TaskState;
use crate::store::location::Location;
use crate::store::Store;

/// When the shell asks (`COMPLETE` set), answer and say the exit code;
/// `None` otherwise: the command line is the engine's to run.
pub fn answer_if_asked() -> Option<i32> {
    let cwd = std::env::current_dir().ok();
    match CompleteEnv::with_factory(completing).try_complete(std::env::args_os(), cwd.as_deref()) {
        Ok(true) => Some(0),
        Ok(false) => None,
        // Silent: a completion never prints an error into the shell.
        Err(_) => Some(1),
    }
}

/// What each command's argument offers.
#[derive(Clone, Copy)]
enum Offer {
    /// The refs of the goal's tasks.
    Refs,
    /// The operations waiting on a person's approval.
    Approvals,
    /// The operations whose outcome is unknown, to settle.
    Unknowns,
    /// A ref, or an operation a retry can name.
    RefsAndOperations,
}

/// Which command's argument (by its id in `args`) offers what.
const OFFERS: &[(&str, &str, Offer)] = &[
    ("explain", "task_ref", Offer::Refs),
    ("output", "task_ref", Offer::Refs),
    ("log", "task_ref", Offer::Refs),
    ("answer", "task_ref", Offer::Refs),
    ("hold", "task_ref", Offer::Refs),
    ("release", "task_ref", Offer::Refs),
    ("repair", "task_ref", Offer::Refs),
    ("rerun", "task_ref", Offer::Refs),
    ("retry", "task_ref", Offer::RefsAndOperations),
    ("approve", "operation_id", Offer::Approvals),
    ("settle", "operation_id", Offer::Unknowns),
];

/// The command line with a completer on each argument of `OFFERS`.
fn completing() -> clap::Command {
    let mut command = super::command();
    for &(name, arg, offer) in OFFERS {
        let has = |c: &clap::Command| c.get_arguments().any(|a| a.get_id() == arg);
        if command.find_subcommand(name).is_some_and(has) {
            command = command.mut_subcommand(name, |c| {
                c.mut_arg(arg, |a| a.add(ArgValueCompleter::new(move |now: &OsStr| offered(offer, now))))
            });
        }
    }
    command
}

/// The candidates starting with what is typed so far.
fn offered(offer: Offer, now: &OsStr) -> Vec<CompletionCandidate> {
    let typed = now.to_string_lossy();
    let mut all = read(offer).unwrap_or_default();
    all.retain(|(value, _)| value.starts_with(typed.as_ref()));
    all.into_iter().map(|(value, help)| CompletionCandidate::new(value).help(Some(help.into()))).collect()
}

/// `--store`, `--workspace` and `--goal` as typed on the line completed
/// (after the `--` the shell's registration puts before it).
#[derive(Default)]
struct Typed {
    store: Option<PathBuf>,
    workspace: Option<PathBuf>,
    goal: Option<String>,
}

fn typed() -> Typed {
    let words: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let line: &[String] = match words.iter().position(|w| w == "--") {
        Some(i) => words.get(i + 1..).unwrap_or_default(),
        None => &[],
    };
    let mut t = Typed::default();
    for (i, w) in line.iter().enumerate() {
        // `--flag VALUE` or `--flag=VALUE`.
        let value = |flag: &str| match w.strip_prefix(flag) {
            Some("") => line.get(i + 1).cloned(),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        };
        if let Some(v) = value("--store") {
            t.store = Some(v.into());
        } else if let Some(v) = value("--workspace") {
            t.workspace = Some(v.into());
        } else if let Some(v) = value("--goal") {
            t.goal = Some(v);
        }
    }
    t
}

/// The store, opened for reading only if it is there (a local file).
fn store(t: &Typed) -> Option<Store> {
    let start = t.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let at = Location::find(t.store.as_deref(), &start).ok()??;
    if at.shared() {
        return None;
    }
    Store::open_ro(&at.path).ok()?
}

/// Every (value, what it is) the offer holds, from the store.
fn read(offer: Offer) -> Option<Vec<(String, String)>> {
    let t = typed();
    let store = store(&t)?;
    let ledger = store.read();
    let goal = ledger.goal_or_latest(t.goal.map(GoalId::new).as_ref()).ok()?;
    let tasks = ledger.tasks(&goal.id, goal.active_revision).ok()?;
    let operation = |t: &crate::store::goals::TaskRecord| {
        (t.operation_id.as_str().to_string(), format!("task {} ({})", t.task_ref, t.state))
    };
    let waits = |s: TaskState| matches!(s, TaskState::AwaitingApproval);
    let unknown = |s: TaskState| matches!(s, TaskState::EffectUnknown);
    let retried = |s: TaskState| matches!(s, TaskState::Failed | TaskState::EffectUnknown);
    let refs = tasks.iter().map(|t| (t.task_ref.clone(), t.state.to_string()));
    Some(match offer {
        Offer::Refs => refs.collect(),
        Offer::Approvals => tasks.iter().filter(|t| waits(t.state)).map(operation).collect(),
        Offer::Unknowns => tasks.iter().filter(|t| unknown(t.state)).map(operation).collect(),
        Offer::RefsAndOperations => refs.chain(tasks.iter().filter(|t| retried(t.state)).map(operation)).collect(),
    })
}

#[cfg(test)]
mod tests {
    /// A renamed argument would silently lose its completer.
    #[test]
    fn every_offer_names_an_argument_of_its_command() {
        let command = super::super::command();
        for &(name, arg, _) in super::OFFERS {
            let sub = command.find_subcommand(name);
            assert!(sub.is_some_and(|c| c.get_arguments().any(|a| a.get_id() == arg)), "engine {name} has no {arg}");
        }
    }
}
