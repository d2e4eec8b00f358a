//! `engine answer REF --field NAME=VALUE …`: a person's answer to what a
//! task's MCP server asked (the task is `awaiting_input`), as approve is a
//! person's approval: recorded on the act chain (a person's request of
//! kind `answer`, with the OS user), checked first against the question
//! the server put (`decide::answer`), and sent by the next `engine run`,
//! which carries it in the call that resumes the task.
//!
//! Architecture invariant: `record`, reached only from `engine answer`
//! (the CLI), is the only writer of an answer. The fields come from what
//! a person typed; the question comes from the ledger (the receipt's
//! transaction wrote it). Nothing a provider or model returns flows here,
//! and a provider never receives the store path, so it cannot record one.
//!
//! The call that carries an answer is a new request (the answers are part
//! of it, as a repair's instruction is): its own operation id, its own
//! intent; for a paid or external task it is a repeat, and the gate asks
//! for an approval as it does for any repeat — which `engine answer`
//! says (`Recorded::approval_first`).

use std::collections::HashMap;

use providers::{InputAnswers, InputAsk, InputResponse};
use serde::Serialize;
use serde_json::{json, Value};

use crate::decide::answer::{self, Asked, Said};
use crate::decide::people::Act;
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, Revision};
use crate::plan::{digests, Plan};
use crate::run::{AnswerExpiry, Answering};
use crate::state::TaskState;
use crate::store::acts::{AskKind, NewAsk, NewRequestId, Person};
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::{Durability, LeaseGuard, LedgerRead};

/// What `engine answer` recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    /// The attempt whose answer was the question.
    pub asked_by_attempt: AttemptId,
    /// The operation of the call that will carry the answer.
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    /// Each question's key and the `ElicitResult` sent back.
    pub answers: Vec<Value>,
    /// The call that carries them repeats paid or external work (or the
    /// task always needs one): the next run stops `APPROVAL_REQUIRED`
    /// until a person approves it.
    pub approval_first: bool,
    pub ask_id: i64,
    pub person: Person,
    /// An answer to a question a run holds open during the call (until
    /// this time, UTC): that run sends it now (`commands::held_answer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_until: Option<String>,
    /// When it expires (`--for`, the plan's `approvals.expire_after`):
    /// past it, it is never sent and the task asks again. `None`: never.
    pub expires_at_ms: Option<i64>,
}

/// What a person asked to answer.
pub struct Answer {
    pub goal: Option<GoalId>,
    pub task_ref: String,
    pub said: Said,
    /// `--for DURATION`, in milliseconds.
    pub for_ms: Option<u64>,
}

/// The task, its question and the attempt that brought it.
struct Waiting {
    goal_id: GoalId,
    revision: Revision,
    ask: InputAsk,
    attempt_id: AttemptId,
    /// The task's detail while it waits: put back if the answer expires.
    detail: Value,
}

fn waiting(read: &dyn LedgerRead, goal: Option<&GoalId>, task_ref: &str) -> Result<Waiting> {
    let g = read.goal_or_latest(goal)?;
    let task = read.task(&g.id, g.active_revision, task_ref)?.ok_or_else(|| {
        Error::new(Code::NothingToAnswer, format!("goal {} has no task {task_ref} in its active revision", g.id))
            .at(task_ref.to_string())
    })?;
    if task.state != TaskState::AwaitingInput {
        return Err(Error::new(
            Code::NothingToAnswer,
            format!(
                "task {task_ref} is {}, and waits on no answer: only a task whose MCP server asked a person (awaiting_input) can be answered; nothing was recorded",
                task.state
            ),
        )
        .at(task_ref.to_string()));
    }
    let corrupt = |what: &str| Error::new(Code::StoreCorrupt, format!("task {task_ref} awaits input but {what}"));
    let ask: InputAsk = serde_json::from_value(task.detail.get("input").cloned().unwrap_or(Value::Null))
        .map_err(|e| corrupt(&format!("its question does not read: {e}")))?;
    let attempt_id = task
        .detail
        .get("attempt_id")
        .and_then(Value::as_i64)
        .map(AttemptId)
        .ok_or_else(|| corrupt("names no attempt"))?;
    Ok(Waiting { goal_id: g.id, revision: g.active_revision, ask, attempt_id, detail: task.detail })
}

/// May `person` answer `task_ref` (the plan's `people.answer`)?
pub fn permitted(read: &dyn LedgerRead, goal: Option<&GoalId>, person: &Person) -> Result<()> {
    let g = read.goal_or_latest(goal)?;
    super::permitted(read, &g.id, Act::Answer, person)
}

/// `engine answer`: check the fields against the question and record the
/// answer, the task back to `pending`, the event and the request id — one
/// transaction.
pub fn record(
    ledger: &mut LeaseGuard,
    a: &Answer,
    person: &Person,
    request_id: Option<&NewRequestId>,
) -> Result<Recorded> {
    let read = ledger.read();
    let w = waiting(&*read, a.goal.as_ref(), &a.task_ref)?;
    let asked: Vec<Asked> = w.ask.questions.iter().map(|q| Asked { key: &q.key, question: &q.question }).collect();
    let results = answer::decide(&asked, &a.said).map_err(|r| {
        Error::new(Code::AnswerInvalid, format!("{}; nothing was recorded", r.message))
            .at(format!("--field {}", r.field))
            .with_details(json!({"field": r.field, "problem": r.problem, "task_ref": a.task_ref}))
    })?;
    let mut responses = carried(&*read, &w)?;
    for (key, result) in &results {
        let question = w.ask.questions.iter().find(|q| &q.key == key).map(|q| q.question.clone()).unwrap_or_default();
        responses.retain(|r| r.question != question);
        responses.push(InputResponse { key: key.clone(), question, result: result.clone() });
    }
    let answers =
        InputAnswers { task_id: w.ask.task_id.clone(), request_state: w.ask.request_state.clone(), responses };
    let plan = super::active_plan(&*read, &w.goal_id)?;
    let plan = Plan::from_file(plan, std::path::PathBuf::from(&read.revision(&w.goal_id, w.revision)?.workspace))?;
    let task = plan.task(&a.task_ref).cloned().ok_or_else(|| Error::internal("the answered task left the plan"))?;
    let answering = answering(&plan, &task, &w.goal_id, json!(answers));
    let expires_at_ms =
        super::approve::lasts(&*read, &w.goal_id, a.for_ms)?.map(|ms| crate::clock::now_ms().saturating_add(ms as i64));
    drop(read);
    let key = TaskKey { goal_id: &w.goal_id, revision: w.revision, task_ref: &a.task_ref };
    let answers_json: Vec<Value> = results.iter().map(|(k, r)| json!({"key": k, "result": r})).collect();
    let ask_id = ledger.write(Durability::Full, |tx| {
        let data = ask_data(&w, &answering, expires_at_ms);
        let ask_id = tx.insert_ask(&NewAsk {
            kind: AskKind::Answer,
            goal_id: key.goal_id,
            revision: key.revision,
            task_ref: Some(key.task_ref),
            operation_id: Some(&answering.operation_id),
            person,
            data: &data,
        })?;
        let detail =
            json!({"answered_by": ask_id, "operation_id": answering.operation_id, "asked_by_attempt": w.attempt_id});
        tx.set_task_state(key, TaskState::Pending, &detail)?;
        let e = json!({"ask_id": ask_id, "operation_id": answering.operation_id, "answers": answers_json,
                       "asked_by_attempt": w.attempt_id, "actor": person.actor, "uid": person.uid, "user": person.user,
                       "expires_at_ms": expires_at_ms});
        tx.append_event(&Event::goal(EventKind::InputAnswered, key.goal_id, key.revision, e).task(key.task_ref))?;
        if let Some(r) = request_id {
            tx.insert_request_id(r)?;
        }
        Ok(ask_id)
    })?;
    Ok(Recorded {
        goal_id: w.goal_id,
        revision: w.revision,
        task_ref: a.task_ref.clone(),
        asked_by_attempt: w.attempt_id,
        operation_id: answering.operation_id,
        request_digest: answering.request_digest,
        answers: answers_json,
        approval_first: answer::approval_first(&task),
        ask_id,
        person: person.clone(),
        held_until: None,
        expires_at_ms,
    })
}

/// What the act records: the answers, the request that carries them, and
/// with an end (`--for`) that end and the question, asked again if the
/// answer expires unsent — on the chain with the act.
fn ask_data(w: &Waiting, answering: &Answering, expires_at_ms: Option<i64>) -> Value {
    let mut data = json!({"asked_by_attempt": w.attempt_id, "answers": answering.answers,
                          "request_digest": answering.request_digest});
    if let Some(at) = expires_at_ms {
        data["expires_at_ms"] = json!(at);
        data["question"] = w.detail.clone();
    }
    data
}

/// The answers the asking call carried (the answer whose operation it
/// was): a 2025-11-25 server asks again on the new call from the first
/// question, so the answers given before go with the new ones. None for a
/// 2026-07-28 question (its `requestState` or task carries the state).
fn carried(read: &dyn LedgerRead, w: &Waiting) -> Result<Vec<InputResponse>> {
    if w.ask.request_state.is_some() || w.ask.task_id.is_some() {
        return Ok(Vec::new());
    }
    let before = read.attempt(w.attempt_id)?;
    carried_by(read, &w.goal_id, &before.operation_id)
}

/// The answers a call of `operation` carried: the latest answer recorded
/// for it (the one that made it, or one a person gave while it held a
/// question open, which holds those before it too).
pub(super) fn carried_by(read: &dyn LedgerRead, goal: &GoalId, operation: &OperationId) -> Result<Vec<InputResponse>> {
    let carried = read
        .asks_of_goal(goal)?
        .into_iter()
        .rfind(|x| x.kind == AskKind::Answer && x.operation_id.as_ref() == Some(operation))
        .and_then(|x| x.data.get("answers").cloned())
        .map(serde_json::from_value::<InputAnswers>);
    Ok(match carried {
        Some(Ok(c)) => c.responses,
        _ => Vec::new(),
    })
}

/// The call that carries `answers`: the task's action with them, its own
/// request digest and operation id.
fn answering(plan: &Plan, task: &crate::plan::Task, goal_id: &GoalId, answers: Value) -> Answering {
    let mut action = task.action.clone();
    // A task's action is an object (the plan's validation): the answers
    // become one more of its keys.
    if let Some(keys) = action.as_object_mut() {
        keys.insert("answers".into(), answers.clone());
    }
    let request_digest = digests::request_digest(&task.provider, plan.provider_of(task), &action, None);
    let operation_id = digests::operation_id(goal_id.as_str(), &task.task_ref, &request_digest);
    Answering { operation_id, request_digest, answers, expires: None }
}

/// The answers in force for a revision's tasks, for the run that sends
/// them: per task, a person's latest answer, unless the task's server has
/// asked again since (a newer attempt ended `input_asked`).
pub fn in_force(read: &dyn LedgerRead, goal: &GoalId, revision: Revision) -> Result<HashMap<String, Answering>> {
    let mut out = HashMap::new();
    for ask in read.asks_of_goal(goal)?.into_iter().filter(|a| a.kind == AskKind::Answer && a.revision == revision) {
        let (Some(task_ref), Some(operation_id)) = (ask.task_ref.clone(), ask.operation_id.clone()) else { continue };
        let asked_by = ask.data.get("asked_by_attempt").and_then(Value::as_i64).unwrap_or(0);
        let asked_since = read
            .attempts_of_task(goal, &task_ref)?
            .iter()
            .any(|a| a.state == crate::state::AttemptState::InputAsked && a.id.0 > asked_by);
        if asked_since {
            out.remove(&task_ref);
            continue;
        }
        let request_digest = match ask.data.get("request_digest").and_then(Value::as_str) {
            Some(d) => RequestDigest::new(d.to_string()),
            None => continue,
        };
        let answers = ask.data.get("answers").cloned().unwrap_or(Value::Null);
        let expires = ask.data.get("expires_at_ms").and_then(Value::as_i64).map(|at_ms| AnswerExpiry {
            ask_id: ask.id,
            at_ms,
            question: ask.data.get("question").cloned().unwrap_or(Value::Null),
        });
        out.insert(task_ref, Answering { operation_id, request_digest, answers, expires });
    }
    Ok(out)
}
