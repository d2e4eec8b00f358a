//! A server's question held open for a person during a call (an MCP
//! provider's `ask.wait_seconds`): the run's side of it. The provider
//! hands the question over (`providers::Person`) and waits; here the run
//! records it (`input_held`: the attempt, the question, until when, and
//! the run that holds it), shows it on stderr with the exact `engine
//! answer` command, and reads the ledger for a person's answer to it —
//! recorded by `engine answer` from another terminal, on the act chain,
//! beside this run (`Store::write_beside`, `commands::held_answer`) —
//! until the wait ends. The answer found is the reply the server gets
//! (the form's defaults applied by `engine answer`, as always); none in
//! time: `None`, and the server gets `cancel` and the question is
//! reported with the receipt, as without a wait.
//!
//! The wait counts against the task's deadline (the provider never holds
//! a question past it). A store shared by workers (PostgreSQL) holds no
//! question: a run there has no person's side, and answers `cancel` at
//! once.
//!
//! Nothing here decides the answer: `engine answer` checked it against
//! the question (`decide::answer`) before it was recorded; this reads it
//! back by the held question's event and passes it on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use providers::{BoxFuture, Held, Person};
use serde_json::{json, Value};

use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::ids::GoalId;
use crate::plan::Plan;
use crate::store::acts::AskKind;
use crate::store::events::{Event, EventKind};
use crate::store::lease::{hostname, Holder};
use crate::store::{LeaseGuard, LedgerRead, Store};

/// How often the ledger is read for a person's answer while a question is held.
const POLL: Duration = Duration::from_millis(200);

/// The run's side of the questions its MCP servers put during calls.
#[derive(Clone)]
pub struct Asker {
    location: PathBuf,
    /// This run, as the lease names it: what a write beside it is fenced by.
    holder: Holder,
    goal_id: GoalId,
}

impl Asker {
    /// The person's side of this run, when a provider of its plan holds
    /// questions open and the store can take an answer beside the run
    /// (SQLite); `None` otherwise.
    pub fn for_run(ledger: &LeaseGuard, plan: &Plan) -> Option<Arc<dyn Person>> {
        let holds = plan.file.providers.values().any(|p| p.holds_questions());
        if !holds || ledger.shared() {
            return None;
        }
        let holder = Holder {
            pid: i64::from(std::process::id()),
            host: hostname(),
            proc_start: None,
            generation: ledger.fence().generation(),
        };
        let location = ledger.store().location().to_path_buf();
        Some(Arc::new(Asker { location, holder, goal_id: GoalId::new(&plan.goal().id) }))
    }

    /// Record the question, show it, and read the ledger for its answer
    /// until the wait ends (once more at its end).
    fn wait_for_answer(&self, held: &Held) -> Result<Option<Value>> {
        let until = Instant::now() + held.wait;
        let until_ms = now_ms() + i64::try_from(held.wait.as_millis()).unwrap_or(i64::MAX / 2);
        let store = Store::open_ro(&self.location)?.ok_or_else(|| Error::internal("the run's store is gone"))?;
        let attempt = store
            .read()
            .attempts_in_doubt(&self.goal_id)?
            .into_iter()
            .find(|a| a.operation_id.as_str() == held.operation_id && a.try_no == i64::from(held.try_no))
            .ok_or_else(|| Error::internal("a question held for a call the ledger does not show in flight"))?;
        let data = json!({
            "operation_id": held.operation_id, "try": held.try_no, "question": held.question,
            "until_ms": until_ms, "wait_seconds": held.wait.as_secs(),
            "holder": {"pid": self.holder.pid, "host": self.holder.host, "generation": self.holder.generation},
            "authority": "provider",
        });
        let seq = store.write_beside(&self.holder, |tx| {
            let e = Event::goal(EventKind::InputHeld, &self.goal_id, attempt.revision, data.clone());
            tx.append_event(&e.task(&attempt.task_ref).attempt(attempt.id))
        })?;
        show(&attempt.task_ref, held);
        loop {
            if let Some(result) = answer_to(&*store.read(), &self.goal_id, seq.0, &held.question.key)? {
                return Ok(Some(result));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(POLL.min(left));
        }
    }
}

impl Person for Asker {
    fn ask(&self, held: Held) -> BoxFuture<'static, Option<Value>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let me = self.clone();
        let task = held.operation_id.clone();
        // The ledger is read on a thread of its own: the run's loop goes on.
        let spawned = std::thread::Builder::new().name("held-question".into()).spawn(move || {
            let answer = me.wait_for_answer(&held).unwrap_or_else(|e| {
                crate::say_line!("engine: a question of operation {task}'s server could not be held open for a person ({e}); it is answered `cancel`");
                None
            });
            let _ = tx.send(answer);
        });
        Box::pin(async move {
            match spawned {
                Ok(_) => rx.await.ok().flatten(),
                Err(_) => None,
            }
        })
    }
}

/// The result a person's answer to the held question `seq` gives it, if one
/// is recorded.
fn answer_to(read: &dyn LedgerRead, goal: &GoalId, seq: i64, key: &str) -> Result<Option<Value>> {
    let ask = read
        .asks_of_goal(goal)?
        .into_iter()
        .rfind(|a| a.kind == AskKind::Answer && a.data.get("held").and_then(Value::as_i64) == Some(seq));
    let Some(ask) = ask else { return Ok(None) };
    let responses = ask.data.pointer("/answers/responses").and_then(Value::as_array);
    let found = responses.into_iter().flatten().find(|r| r.get("key").and_then(Value::as_str) == Some(key));
    Ok(found.and_then(|r| r.get("result")).cloned())
}

/// The question and the command that answers it, on stderr (every word
/// the server chose escaped).
fn show(task_ref: &str, held: &Held) {
    let q = json!({"key": held.question.key, "question": held.question.question});
    let asked = [crate::decide::answer::Asked { key: &held.question.key, question: &held.question.question }];
    let mut text = format!(
        "{}: its MCP server asks a person, and the call waits up to {} s for an answer (counted in the task's deadline):\n",
        crate::report::escape::for_terminal(task_ref),
        held.wait.as_secs()
    );
    for line in crate::report::question::lines(&q) {
        text.push_str(&format!("  {line}\n"));
    }
    text.push_str(&format!(
        "  answer from another terminal: {}\n  (no answer in time: the server gets `cancel`, and the task waits for `engine answer`)\n",
        crate::decide::answer::command(task_ref, &asked)
    ));
    crate::say_text!("{text}");
}
