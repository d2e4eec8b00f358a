//! A person's acts on a goal — approvals, settlements, and the retries,
//! repairs and revisions a person asked for — each with who gave it: the
//! `--actor` label and the operating-system user and uid the engine ran
//! as. For `engine status` (the goal's latest) and `engine explain` (a
//! task's). An act row the act chain does not vouch for is shown as what
//! it is — `STORE_TAMPERED`, naming the row — never as a person's act.

use serde_json::{json, Value};

use super::acts::who_recorded;
use crate::clock::utc;
use crate::error::Result;
use crate::ids::GoalId;
use crate::store::acts::{ActRef, AskRecord, Tampered};
use crate::store::LedgerRead;

/// The acts `engine status` lists: the latest this many (all of a task's
/// in `explain`, which is bounded by its attempts).
pub const ACTS_SHOWN_MAX: usize = 20;

/// One act, as shown.
struct Line {
    at_ms: i64,
    task_ref: Option<String>,
    text: String,
    json: Value,
}

impl Line {
    /// A row the chain does not vouch for: its words say so first, and
    /// what it claims to be only as its claim.
    fn marked(mut self, tampered: &[Tampered], act: ActRef) -> Line {
        if let Some(t) = tampered.iter().find(|t| t.act == act) {
            self.text = format!("{}; the row claims: {}", t.words(), self.text);
            self.json["store_tampered"] = json!(t);
        }
        self
    }
}

fn lines(ledger: &dyn LedgerRead, goal: &GoalId, tampered: &[Tampered]) -> Result<Vec<Line>> {
    let mut out = approvals(ledger, goal, tampered)?;
    out.extend(settlements(ledger, goal, tampered)?);
    for a in ledger.asks_of_goal(goal)? {
        let what = match (&a.task_ref, &a.operation_id) {
            (Some(t), Some(op)) => format!("{} of task {t} ({op})", a.kind.as_str()),
            (Some(t), None) => format!("{} of task {t}", a.kind.as_str()),
            _ if a.kind == crate::store::acts::AskKind::ReuseAcrossToolChange => {
                format!("a run with --reuse-across-tool-change in revision {}", a.revision)
            }
            _ => format!("{} to revision {}", a.kind.as_str(), a.revision),
        };
        let (fate, expired) = answer_fate(ledger, goal, &a)?;
        out.push(
            Line {
                at_ms: a.at_ms,
                task_ref: a.task_ref.clone(),
                text: format!("{what} asked by {}{fate}", who_recorded(&a.actor, Some(&a.user), Some(a.uid))),
                json: json!({"act": a.kind, "id": a.id, "revision": a.revision, "task_ref": a.task_ref,
                "operation_id": a.operation_id, "actor": a.actor, "user": a.user, "uid": a.uid, "data": a.data,
                "at_ms": a.at_ms, "expired": expired}),
            }
            .marked(tampered, ActRef::Ask(a.id)),
        );
    }
    out.sort_by_key(|l| l.at_ms);
    Ok(out)
}

/// An answer given `--for` a time: sent, not sent yet (and how long it
/// has left), or expired and never sent. Nothing for other acts.
fn answer_fate(ledger: &dyn LedgerRead, goal: &GoalId, a: &AskRecord) -> Result<(String, bool)> {
    let at = a.data.get("expires_at_ms").and_then(Value::as_i64);
    let (Some(at), Some(task_ref), Some(op)) = (at, &a.task_ref, &a.operation_id) else {
        return Ok((String::new(), false));
    };
    let sent = ledger.attempts_of_task(goal, task_ref)?.iter().any(|x| &x.operation_id == op);
    let now = crate::clock::now_ms();
    Ok(match sent {
        true => (", sent".to_string(), false),
        false if now >= at => (format!(", expired at {} UTC: never sent; the task asks again", utc(at)), true),
        false => (format!(", not sent yet ({})", crate::decide::expiry::words(at, now)), false),
    })
}

/// Each approval with its fate: spent, voided, waiting to be spent, or
/// stale (a revision changed what it binds).
fn approvals(ledger: &dyn LedgerRead, goal: &GoalId, tampered: &[Tampered]) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    let approvals = ledger.approvals_of_goal(goal)?;
    // What an open approval must still bind to pay for its call.
    let active = match approvals.iter().any(|a| a.consumed_by.is_none() && a.voided_by.is_none()) {
        true => {
            let revision = ledger.goal_or_latest(Some(goal))?.active_revision;
            Some((revision, ledger.revision_plan_digest(goal, revision)?))
        }
        false => None,
    };
    let now = crate::clock::now_ms();
    for a in approvals {
        let stale = match &active {
            Some((revision, digest)) => crate::commands::advice::stale(&a, (*revision, digest)),
            None => Vec::new(),
        };
        let expired = a.expires_at_ms.filter(|at| a.consumed_by.is_none() && a.voided_by.is_none() && now >= *at);
        let fate = match (a.consumed_by, a.voided_by) {
            // Its words are the chain's verdict (`marked`), never a fate.
            _ if tampered.iter().any(|t| t.act == ActRef::Approval(a.id)) => String::new(),
            (Some(by), _) => format!(", spent by {}", super::explain::attempt_words(ledger, Some(by.get()))),
            (None, Some(by)) => format!(", voided by {}", super::explain::attempt_words(ledger, Some(by.get()))),
            (None, None) if expired.is_some() => format!(
                ", expired at {} UTC: never spent; the call waits for a new approval",
                crate::clock::utc(expired.unwrap_or_default())
            ),
            (None, None) if stale.is_empty() => match a.expires_at_ms {
                Some(at) => format!(", not spent yet ({})", crate::decide::expiry::words(at, now)),
                None => ", not spent yet".to_string(),
            },
            (None, None) => format!(", stale ({}): never spent, and it pays for no call now", stale.join("; ")),
        };
        out.push(
            Line {
                at_ms: a.at_ms,
                task_ref: Some(a.task_ref.clone()),
                text: format!(
                    "approval {} of {} (task {}) by {}{fate}",
                    a.id,
                    a.operation_id,
                    a.task_ref,
                    who_recorded(&a.actor, a.user.as_deref(), a.uid)
                ),
                json: json!({"act": "approval", "id": a.id, "operation_id": a.operation_id, "task_ref": a.task_ref,
                "actor": a.actor, "user": a.user, "uid": a.uid, "note": a.note, "at_ms": a.at_ms,
                "consumed_by": a.consumed_by, "voided_by": a.voided_by,
                "stale": (!stale.is_empty()).then(|| stale.join("; ")),
                "expires_at_ms": a.expires_at_ms, "expired": expired.is_some()}),
            }
            .marked(tampered, ActRef::Approval(a.id)),
        );
    }
    Ok(out)
}

fn settlements(ledger: &dyn LedgerRead, goal: &GoalId, tampered: &[Tampered]) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    for s in ledger.settlements_of_goal(goal)? {
        let task_ref = ledger.attempt(s.attempt_id)?.task_ref;
        let number = ledger.attempt_number(s.attempt_id)?;
        out.push(Line {
            at_ms: s.at_ms,
            task_ref: Some(task_ref.clone()),
            text: format!(
                "settlement of {} (task {task_ref}, attempt {number}) as {} by {}",
                s.operation_id,
                s.outcome,
                who_recorded(&s.actor, s.user.as_deref(), s.uid)
            ),
            json: json!({"act": "settlement", "id": s.id, "operation_id": s.operation_id, "attempt_id": s.attempt_id, "attempt": number,
                "task_ref": task_ref, "outcome": s.outcome, "actor": s.actor, "user": s.user, "uid": s.uid,
                "note": s.note, "at_ms": s.at_ms}),
        }
        .marked(tampered, ActRef::Settlement(s.id)));
    }
    Ok(out)
}

/// The goal's latest acts (appended to `text` under a heading) and their
/// JSON, with how many there are in all. `tampered`: the goal's act rows
/// the chain does not vouch for (`LedgerRead::unvouched_acts`).
pub fn of_goal(ledger: &dyn LedgerRead, goal: &GoalId, tampered: &[Tampered], text: &mut String) -> Result<Value> {
    let all = lines(ledger, goal, tampered)?;
    let skip = all.len().saturating_sub(ACTS_SHOWN_MAX);
    if !all.is_empty() {
        text.push_str("\na person's acts");
        if skip > 0 {
            text.push_str(&format!(" (the latest {ACTS_SHOWN_MAX} of {})", all.len()));
        }
        text.push('\n');
    }
    let shown: Vec<&Line> = all.iter().skip(skip).collect();
    for l in &shown {
        text.push_str(&format!("  {}  {}\n", utc(l.at_ms), l.text));
    }
    Ok(json!({"count": all.len(), "latest": shown.iter().map(|l| l.json.clone()).collect::<Vec<_>>()}))
}

/// A task's acts, in words (appended to `text`) and as JSON.
pub fn of_task(ledger: &dyn LedgerRead, goal: &GoalId, task_ref: &str, text: &mut String) -> Result<Value> {
    let tampered = ledger.unvouched_acts(Some(goal))?;
    let mine: Vec<Line> =
        lines(ledger, goal, &tampered)?.into_iter().filter(|l| l.task_ref.as_deref() == Some(task_ref)).collect();
    if !mine.is_empty() {
        text.push_str("\na person's acts\n");
    }
    for l in &mine {
        text.push_str(&format!("  {}  {}\n", utc(l.at_ms), l.text));
    }
    Ok(json!(mine.iter().map(|l| l.json.clone()).collect::<Vec<_>>()))
}
