//! `engine answer` to a question a run holds open during a call (an MCP
//! provider's `ask.wait_seconds`, `run::held`): the same person's act as
//! an answer to a task that waits (`answer::record`) — the same check
//! against the question (`decide::answer`, the form's defaults filled in),
//! the same permission (`people.answer`), on the act chain — recorded
//! beside the live run that holds the question (`Store::write_beside`:
//! fenced by that run, which must still hold the store), since that run
//! holds the store's lease. The run reads it and sends it to the server
//! in the call that waits; the task's state is the run's to change.
//!
//! A question whose wait ended (the server got `cancel`), or whose run
//! ended, takes no answer here: nothing is recorded, and the words say
//! what happens instead (the task waits for `engine answer` once the run
//! ends).

use providers::{InputAnswers, InputResponse, Question};
use serde_json::{json, Value};

use super::answer::{carried_by, Answer, Recorded};
use crate::clock::{now_ms, utc};
use crate::decide::answer::{self, Asked};
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, GoalId, Revision};
use crate::state::TaskState;
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::attempts::AttemptRecord;
use crate::store::events::{Event, EventKind, EventRecord};
use crate::store::lease::Holder;
use crate::store::{LedgerRead, Store};

/// A question a live run holds open now.
pub struct HeldOpen {
    /// The `input_held` event's seq: what the run reads the answer by.
    seq: i64,
    goal_id: GoalId,
    revision: Revision,
    task_ref: String,
    attempt: AttemptRecord,
    question: Question,
    until_ms: i64,
    /// The run that holds it.
    pub holder: Holder,
}

/// What became of the task's latest held question.
pub enum Held {
    /// Held open now: an answer goes to the call.
    Open(Box<HeldOpen>),
    /// Held, but no more (its wait ended, its call ended, or it was
    /// answered): why, in words.
    Over(String),
    /// The task has no held question (the usual path: `answer::record`).
    None,
}

/// The task's held question, if its latest call holds one open.
pub fn held(read: &dyn LedgerRead, goal: Option<&GoalId>, task_ref: &str) -> Result<Held> {
    let g = read.goal_or_latest(goal)?;
    let Some(task) = read.task(&g.id, g.active_revision, task_ref)? else { return Ok(Held::None) };
    if task.state != TaskState::Running {
        return Ok(Held::None);
    }
    let events = read.events_of_goal(&g.id, EventKind::InputHeld)?;
    let Some(e) = events.into_iter().rfind(|e| e.task_ref.as_deref() == Some(task_ref)) else {
        return Ok(Held::None);
    };
    let corrupt = |what: &str| Error::new(Code::StoreCorrupt, format!("task {task_ref}'s held question {what}"));
    let attempt_id = e.attempt_id.ok_or_else(|| corrupt("names no attempt"))?;
    let (question, until_ms, holder) = parts(&e).ok_or_else(|| corrupt("does not read"))?;
    let attempt = read.attempt(attempt_id)?;
    let answered = read
        .asks_of_goal(&g.id)?
        .iter()
        .any(|a| a.kind == AskKind::Answer && a.data.get("held").and_then(Value::as_i64) == Some(e.seq.0));
    let over = |why: String| {
        Ok(Held::Over(format!("task {task_ref}'s MCP server asked during its call (attempt {attempt_id}), and {why}")))
    };
    if answered {
        return over("a person answered that question already: nothing was recorded".into());
    }
    if !attempt.state.in_doubt() {
        return over("that call has ended: nothing was recorded".into());
    }
    if now_ms() > until_ms {
        return over(format!(
            "the run held the question open until {}; that wait ended and the server got `cancel`: nothing was recorded. Once the run ends the task waits for `engine answer` (`engine status` shows the question)",
            utc(until_ms)
        ));
    }
    let (goal_id, revision, seq) = (g.id, attempt.revision, e.seq.0);
    let task_ref = task_ref.to_string();
    Ok(Held::Open(Box::new(HeldOpen { seq, goal_id, revision, task_ref, attempt, question, until_ms, holder })))
}

/// An `input_held` event's question, until when, and the run that holds it.
fn parts(e: &EventRecord) -> Option<(Question, i64, Holder)> {
    let question: Question = serde_json::from_value(e.data.get("question")?.clone()).ok()?;
    let until_ms = e.data.get("until_ms")?.as_i64()?;
    let h = e.data.get("holder")?;
    let holder = Holder {
        pid: h.get("pid")?.as_i64()?,
        host: h.get("host")?.as_str()?.to_string(),
        proc_start: None,
        generation: h.get("generation")?.as_i64()?,
    };
    Some((question, until_ms, holder))
}

/// Check the fields against the held question and record the answer, its
/// event and the request id beside the run — one transaction, fenced by
/// that run. The task's state stays the run's.
pub fn record(
    store: &Store,
    a: &Answer,
    person: &Person,
    h: &HeldOpen,
    request_id: Option<&NewRequestId>,
) -> Result<Recorded> {
    let asked = [Asked { key: &h.question.key, question: &h.question.question }];
    let results = answer::decide(&asked, &a.said).map_err(|r| {
        Error::new(Code::AnswerInvalid, format!("{}; nothing was recorded", r.message))
            .at(format!("--field {}", r.field))
            .with_details(json!({"field": r.field, "problem": r.problem, "task_ref": a.task_ref}))
    })?;
    // What the call carried already goes with it: a server that asks
    // again on a later call asks from its first question.
    let mut responses = carried_by(&*store.read(), &h.goal_id, &h.attempt.operation_id)?;
    for (key, result) in &results {
        responses.retain(|r| r.question != h.question.question);
        responses.push(InputResponse {
            key: key.clone(),
            question: h.question.question.clone(),
            result: result.clone(),
        });
    }
    let answers = InputAnswers { task_id: None, request_state: None, responses };
    let answers_json: Vec<Value> = results.iter().map(|(k, r)| json!({"key": k, "result": r})).collect();
    let attempt_id: AttemptId = h.attempt.id;
    let ask_id = store
        .write_beside(&h.holder, |tx| {
            // Inside the transaction: the call still waits.
            if !tx.attempt_state(attempt_id)?.in_doubt() {
                return Err(Error::new(Code::NothingToAnswer, "the call that held the question has ended"));
            }
            let data = json!({"held": h.seq, "asked_by_attempt": attempt_id, "answers": answers});
            let ask_id = tx.insert_ask(&NewAsk {
                kind: AskKind::Answer,
                goal_id: &h.goal_id,
                revision: h.revision,
                task_ref: Some(&h.task_ref),
                operation_id: Some(&h.attempt.operation_id),
                person,
                data: &data,
            })?;
            let e = json!({"ask_id": ask_id, "operation_id": h.attempt.operation_id, "answers": answers_json,
                           "asked_by_attempt": attempt_id, "held": h.seq,
                           "actor": person.actor, "uid": person.uid, "user": person.user});
            let event = Event::goal(EventKind::InputAnswered, &h.goal_id, h.revision, e);
            tx.append_event(&event.task(&h.task_ref).attempt(attempt_id))?;
            if let Some(r) = request_id {
                tx.insert_request_id(r)?;
            }
            Ok(ask_id)
        })
        .map_err(|e| run_ended(e, &h.task_ref))?;
    Ok(Recorded {
        goal_id: h.goal_id.clone(),
        revision: h.revision,
        task_ref: h.task_ref.clone(),
        asked_by_attempt: attempt_id,
        operation_id: h.attempt.operation_id.clone(),
        request_digest: h.attempt.request_digest.clone(),
        answers: answers_json,
        approval_first: false,
        ask_id,
        person: person.clone(),
        held_until: Some(utc(h.until_ms)),
        // Sent at once, to the call that holds the question open.
        expires_at_ms: None,
    })
}

/// A write beside a run that no longer holds the store: that run ended.
fn run_ended(e: Error, task_ref: &str) -> Error {
    match e.code {
        Code::StaleGeneration => Error::new(
            Code::NothingToAnswer,
            format!("the run that held task {task_ref}'s question has ended; nothing was recorded"),
        )
        .at(task_ref.to_string()),
        _ => e,
    }
}
