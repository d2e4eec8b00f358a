//! `engine log [--follow] [--goal ID] [--task REF]`: the event log in
//! ledger order. For a person, one line per event — its sequence number,
//! time, task and attempt (numbered as the task counts them), and what
//! happened in words, digests cut short; `--json` keeps the raw events.
//! The act rows the act chain does not vouch for (`STORE_TAMPERED`) are
//! listed after the events, and an event announcing such an act is marked
//! on its line.

mod line;

use serde_json::json;

use super::Output;
use crate::error::Result;
use crate::ids::{GoalId, Revision, Seq};
use crate::limits::{LOG_FOLLOW_POLL, LOG_PAGE_EVENTS};
use crate::store::acts::{ActRef, Tampered};
use crate::store::events::{EventKind, EventRecord};
use crate::store::{LedgerRead, Store};

/// The act an event announces, by its row.
fn act_of(e: &EventRecord) -> Option<ActRef> {
    let id = |key: &str| e.data.get(key).and_then(serde_json::Value::as_i64);
    match e.kind {
        EventKind::ApprovalRecorded => id("approval_id").map(|i| ActRef::Approval(crate::ids::ApprovalId(i))),
        EventKind::RetryRequested | EventKind::RepairRequested => id("ask_id").map(ActRef::Ask),
        _ => None,
    }
}

/// An event's line, marked when the act it announces is not vouched for.
fn marked(mut shown: String, e: &EventRecord, tampered: &[Tampered]) -> String {
    if let Some(t) = act_of(e).and_then(|act| tampered.iter().find(|t| t.act == act)) {
        shown.push_str(&format!("  [{}]", t.words()));
    }
    shown
}

/// Which events a person asked for.
pub struct Which {
    pub after: Seq,
    pub goal: Option<GoalId>,
    pub task_ref: Option<String>,
    pub follow: bool,
}

/// The numbers of the attempts the log has named so far, each task's read
/// once (and again when an attempt new to it shows up in `--follow`).
#[derive(Default)]
struct Numbering {
    known: line::Numbers,
}

impl Numbering {
    /// The numbers of every attempt `e` names. An attempt the ledger cannot
    /// find is left out (the line says its ledger id).
    fn of(&mut self, l: &dyn LedgerRead, e: &EventRecord) -> Result<&line::Numbers> {
        for id in line::attempts_named(e) {
            if self.known.contains_key(&id) {
                continue;
            }
            let Ok(a) = l.attempt(id) else { continue };
            for (a, n) in l.attempts_of_task(&a.goal_id, &a.task_ref)?.into_iter().zip(1..) {
                self.known.insert(a.id, n);
            }
        }
        Ok(&self.known)
    }
}

/// One page of events after `cursor`: every goal's, or one goal's.
fn page(store: &Store, goal: Option<&GoalId>, cursor: Seq) -> Result<Vec<EventRecord>> {
    match goal {
        Some(g) => store.read().goal_events_since(g, cursor, LOG_PAGE_EVENTS),
        None => store.read().events_since(cursor, LOG_PAGE_EVENTS),
    }
}

/// The goal a `--task` belongs to (`--goal`, else the latest), checked to
/// have had a task of that ref in some revision.
fn task_goal(store: &Store, goal: Option<&GoalId>, task_ref: &str) -> Result<GoalId> {
    let read = store.read();
    let g = read.goal_or_latest(goal)?;
    for r in 1..=g.active_revision.get() {
        if read.tasks(&g.id, Revision(r))?.iter().any(|t| t.task_ref == task_ref) {
            return Ok(g.id);
        }
    }
    let known = read.tasks(&g.id, g.active_revision)?;
    Err(crate::commands::no_task(&g.id, g.active_revision, task_ref, known.iter().map(|t| t.task_ref.as_str())))
}

pub fn render(store: &Store, which: &Which, as_json: bool) -> Result<Output> {
    let goal = match (&which.task_ref, &which.goal) {
        (Some(t), g) => Some(task_goal(store, g.as_ref(), t)?),
        (None, Some(g)) => {
            // A misspelt id would otherwise follow nothing, forever.
            store.read().goal_or_latest(Some(g))?;
            Some(g.clone())
        }
        (None, None) => None,
    };
    let keep = |e: &EventRecord| which.task_ref.as_ref().is_none_or(|t| e.task_ref.as_ref() == Some(t));
    let show_goal = goal.is_none() && store.read().goal_count()? > 1;
    let mut numbering = Numbering::default();
    let tampered = store.read().unvouched_acts(goal.as_ref())?;
    if !which.follow {
        let mut all = Vec::new();
        let mut cursor = which.after;
        loop {
            let page = page(store, goal.as_ref(), cursor)?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            all.extend(page.into_iter().filter(keep));
        }
        let mut text = String::new();
        if !as_json {
            let read = store.read();
            for e in &all {
                text.push_str(&marked(line::line(e, numbering.of(&*read, e)?, show_goal), e, &tampered));
                text.push('\n');
            }
            for t in &tampered {
                text.push_str(&format!("{}\n", t.words()));
            }
        }
        return Ok(Output { text, json: json!({"events": all, "store_tampered": tampered}), exit_code: 0 });
    }
    // Said once, on stderr, so the followed stream stays one event a line.
    for t in &tampered {
        crate::say_line!("{}", t.words());
    }
    // --follow: print as events arrive, one JSON object per line with --json.
    let mut cursor = which.after;
    loop {
        for e in page(store, goal.as_ref(), cursor)? {
            cursor = e.seq;
            if !keep(&e) {
                continue;
            }
            let text = if as_json {
                super::escape::json_line(&e)
            } else {
                let shown = marked(line::line(&e, numbering.of(&*store.read(), &e)?, show_goal), &e, &tampered);
                super::paint::text(&super::escape::for_terminal(&shown))
            };
            if !super::emit(&format!("{text}\n")) {
                // The reader is gone: stop following.
                return Ok(Output { text: String::new(), json: json!(null), exit_code: 0 });
            }
        }
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}
