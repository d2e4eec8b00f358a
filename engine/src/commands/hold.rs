//! `engine hold REF|--goal --reason WHY` and `engine release REF|--goal`:
//! a person's act (`people.hold`, default the `retry` people) that keeps a
//! task, or every task of the goal, from being started or retried until a
//! person releases it (`decide::hold`). Both are recorded on the act chain
//! with their event, in one transaction; they run nothing. A held task's
//! dependants wait on it; the rest of the goal goes on; a run with only
//! held work left ends `HELD` (exit 4).

use serde::Serialize;
use serde_json::json;

use crate::decide::hold::{self, Refused, Target};
use crate::decide::people::Act;
use crate::error::{Error, Result};
use crate::ids::{GoalId, Revision};
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::events::{Event, EventKind};
use crate::store::{Durability, LeaseGuard, LedgerRead};

/// What a person named: a task ref of a goal (default: the store's
/// latest), or the goal itself (`--goal`).
pub struct Named<'a> {
    /// `None`: the goal.
    pub task_ref: Option<&'a str>,
    pub goal: Option<&'a GoalId>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    /// `hold` or `release`.
    pub act: &'static str,
    pub goal_id: GoalId,
    pub revision: Revision,
    /// `None`: the whole goal.
    pub task_ref: Option<String>,
    pub reason: String,
    pub person: Person,
    /// The target was held already: nothing new was recorded.
    pub already_held: bool,
    /// The command that undoes it (`engine release …`), or goes on.
    pub next: String,
}

/// The goal and revision a hold names, and the task checked to exist.
fn target(read: &dyn LedgerRead, named: &Named) -> Result<(GoalId, Revision, Target)> {
    let g = read.goal_or_latest(named.goal)?;
    let Some(r) = named.task_ref else { return Ok((g.id, g.active_revision, Target::Goal)) };
    let tasks = read.tasks(&g.id, g.active_revision)?;
    if !tasks.iter().any(|t| t.task_ref == r) {
        return Err(super::no_task(&g.id, g.active_revision, r, tasks.iter().map(|t| t.task_ref.as_str())));
    }
    Ok((g.id, g.active_revision, Target::Task(r.to_string())))
}

/// May `person` hold or release what `named` names (`NOT_PERMITTED`)?
pub fn permitted(read: &dyn LedgerRead, named: &Named, person: &Person) -> Result<()> {
    let (goal, _, _) = target(read, named)?;
    super::permitted(read, &goal, Act::Hold, person)
}

fn words(goal: &GoalId, t: &Target) -> String {
    match t {
        Target::Goal => format!("goal `{goal}`"),
        Target::Task(r) => format!("task `{r}` of goal `{goal}`"),
    }
}

fn release_command(goal: &GoalId, t: &Target) -> String {
    match t {
        Target::Goal => format!("engine release --goal {}", crate::decide::advice::shell_word(goal.as_str())),
        Target::Task(r) => format!("engine release {}", crate::decide::advice::shell_word(r)),
    }
}

/// `engine hold` (`hold`) or `engine release` (`!hold`): recorded on the
/// act chain with its event and the request id, in one transaction.
pub fn record(
    ledger: &mut LeaseGuard,
    named: &Named,
    (hold, reason): (bool, &str),
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<Recorded> {
    if hold && reason.trim().is_empty() {
        return Err(Error::usage("a hold needs a reason (--reason WHY): say what it waits for"));
    }
    let read = ledger.read();
    let (goal_id, revision, t) = target(&*read, named)?;
    let holds = crate::run::holds::holds(&*read, &goal_id)?;
    let run =
        format!("engine run {}", crate::decide::advice::shell_word(&read.revision(&goal_id, revision)?.plan_path));
    drop(read);
    let place = named.task_ref.map_or_else(|| "--goal".to_string(), str::to_string);
    let recorded = |already_held: bool, reason: String| Recorded {
        act: if hold { "hold" } else { "release" },
        goal_id: goal_id.clone(),
        revision,
        task_ref: named.task_ref.map(str::to_string),
        reason,
        person: person.clone(),
        already_held,
        next: if hold { release_command(&goal_id, &t) } else { run.clone() },
    };
    match hold::may(&holds, &t, hold) {
        Ok(()) => {}
        Err(Refused::AlreadyHeld(h)) => return Ok(recorded(true, h.reason)),
        Err(Refused::NotHeld) => {
            let covered = matches!(t, Target::Task(_)) && holds.goal.is_some();
            let also = if covered {
                format!(" (the goal's hold covers it: `{}`)", release_command(&goal_id, &Target::Goal))
            } else {
                String::new()
            };
            return Err(
                Error::usage(format!("{} is not held: nothing was recorded{also}", words(&goal_id, &t))).at(place)
            );
        }
    }
    ledger.write(Durability::Full, |tx| {
        let data = json!({"reason": reason});
        let kind = if hold { AskKind::Hold } else { AskKind::Release };
        let ask = NewAsk {
            kind,
            goal_id: &goal_id,
            revision,
            task_ref: named.task_ref,
            operation_id: None,
            person,
            data: &data,
        };
        let ask_id = tx.insert_ask(&ask)?;
        let data = json!({"ask_id": ask_id, "goal": named.task_ref.is_none(), "reason": reason,
            "actor": person.actor, "uid": person.uid, "user": person.user});
        let kind = if hold { EventKind::Held } else { EventKind::Released };
        let mut event = Event::goal(kind, &goal_id, revision, data);
        if let Some(r) = named.task_ref {
            event = event.task(r);
        }
        tx.append_event(&event)?;
        match request_id {
            Some(r) => tx.insert_request_id(r),
            None => Ok(()),
        }
    })?;
    Ok(recorded(false, reason.to_string()))
}

/// `HELD` (exit 4) when a person holds `task_ref` (or its goal): `engine
/// retry`, `repair` and `rerun` send nothing for it, and say how to go on.
pub fn refuse_if_held(read: &dyn LedgerRead, goal: &GoalId, task_ref: &str, command: &str) -> Result<()> {
    let holds = crate::run::holds::holds(read, goal)?;
    let Some(h) = holds.of(task_ref) else { return Ok(()) };
    let target = if holds.tasks.contains_key(task_ref) { Target::Task(task_ref.to_string()) } else { Target::Goal };
    Err(Error::new(
        crate::error::Code::Held,
        format!(
            "{} is held by {}: {}; `engine {command}` sends nothing for it until `{}`",
            words(goal, &target),
            h.by,
            h.reason,
            release_command(goal, &target)
        ),
    )
    .at(task_ref.to_string()))
}
