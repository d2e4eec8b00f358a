//! What a server sends besides its answers, routed to the calls in
//! flight: its questions (a 2025-11-25 `elicitation/create` during a
//! call) and its progress (`notifications/progress`, matched by the
//! call's `progressToken`). One per session, shared by its links; a call
//! enters it for as long as it is out (`enter`), and leaves it when it
//! ends, whichever way.
//!
//! A question goes to the one call in flight that carries its answer,
//! else to the one call in flight; with several calls and no answer it
//! is dismissed and reported to each of them (a server's question names
//! no request). A note is sent at most every `NOTE_EVERY` per call (its
//! last one always), bounded (`NOTE_CHARS_MAX`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::input::{self, QUESTIONS_MAX};
use crate::{InputResponse, Note, ProgressSender, Question, NOTE_CHARS_MAX};

/// The shortest time between two notes of one call.
const NOTE_EVERY: Duration = Duration::from_millis(100);

#[derive(Default)]
pub(crate) struct Inbound {
    calls: Mutex<Vec<Arc<CallSide>>>,
}

/// One call's side of what the server sends.
pub(crate) struct CallSide {
    /// The `progressToken` the call sent.
    pub token: String,
    progress: ProgressSender,
    /// The person's answers it carries (to a 2025-11-25 server's questions).
    answers: Vec<InputResponse>,
    /// The questions it was asked and could not answer (dismissed).
    asked: Mutex<Vec<Question>>,
    last_note: Mutex<Option<Instant>>,
}

impl CallSide {
    pub fn new(token: String, progress: ProgressSender, answers: Vec<InputResponse>) -> Self {
        CallSide { token, progress, answers, asked: Mutex::default(), last_note: Mutex::default() }
    }

    /// The questions dismissed during the call, in the order asked.
    pub fn asked(&self) -> Vec<Question> {
        lock(&self.asked).clone()
    }

    fn ask(&self, question: Value, elicitation_id: Option<String>) {
        let mut asked = lock(&self.asked);
        if asked.len() < QUESTIONS_MAX {
            let key = format!("q{}", asked.len() + 1);
            asked.push(Question { key, question, elicitation_id });
        }
    }

    fn note(&self, params: &Value) {
        let Some(progress) = params.get("progress").and_then(Value::as_f64) else { return };
        let total = params.get("total").and_then(Value::as_f64);
        let last = total.is_some_and(|t| progress >= t);
        {
            let mut at = lock(&self.last_note);
            if at.is_some_and(|t| t.elapsed() < NOTE_EVERY) && !last {
                return;
            }
            *at = Some(Instant::now());
        }
        let message =
            params.get("message").and_then(Value::as_str).map(|m| m.chars().take(NOTE_CHARS_MAX).collect::<String>());
        crate::note(&self.progress, Note { progress, total, message });
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A call's place in the session's inbound routing; leaving it (on drop)
/// takes the call out.
pub(crate) struct Entered {
    inbound: Arc<Inbound>,
    pub side: Arc<CallSide>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        lock(&self.inbound.calls).retain(|c| !Arc::ptr_eq(c, &self.side));
    }
}

impl Inbound {
    pub fn enter(self: &Arc<Self>, side: CallSide) -> Entered {
        let side = Arc::new(side);
        lock(&self.calls).push(Arc::clone(&side));
        Entered { inbound: Arc::clone(self), side }
    }

    /// The reply to a server's request, if it is one this routing answers
    /// (`elicitation/create`); `None`: answered elsewhere (`ping`, or a
    /// method not found).
    pub fn request(&self, msg: &Value) -> Option<Value> {
        if msg.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            return None;
        }
        let id = msg.get("id")?;
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let calls = lock(&self.calls).clone();
        let answering: Vec<&Arc<CallSide>> =
            calls.iter().filter(|c| input::reply(&params, &c.answers).1.is_none()).collect();
        let result = match (answering.as_slice(), calls.as_slice()) {
            ([one], _) => input::reply(&params, &one.answers).0,
            (_, [one]) => self.dismiss(&params, std::slice::from_ref(one)),
            (_, all) => self.dismiss(&params, all),
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn dismiss(&self, params: &Value, to: &[Arc<CallSide>]) -> Value {
        let (reply, asked) = input::reply(params, &[]);
        if let Some((q, id)) = asked {
            for c in to {
                c.ask(q.clone(), id.clone());
            }
        }
        reply
    }

    /// A server's notification: progress goes to the call that sent its token.
    pub fn notification(&self, msg: &Value) {
        if msg.get("method").and_then(Value::as_str) != Some("notifications/progress") {
            return;
        }
        let Some(params) = msg.get("params") else { return };
        let token = match params.get("progressToken") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return,
        };
        let call = lock(&self.calls).iter().find(|c| c.token == token).cloned();
        if let Some(c) = call {
            c.note(params);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{progress_channel, Progress};

    fn elicit(id: i64, message: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create",
               "params": {"message": message, "requestedSchema": {"type": "object"}}})
    }

    #[test]
    fn a_question_goes_to_the_call_that_answers_it_else_it_is_dismissed_and_reported() {
        let inbound = Arc::new(Inbound::default());
        let (tx, _rx) = progress_channel();
        let (q, _) = input::question(&elicit(1, "Name?")["params"]).unwrap();
        let answer =
            InputResponse { key: "q1".into(), question: q, result: json!({"action": "accept", "content": {}}) };
        let a = inbound.enter(CallSide::new("a".into(), tx.clone(), vec![answer]));
        let b = inbound.enter(CallSide::new("b".into(), tx, vec![]));
        let reply = inbound.request(&elicit(7, "Name?")).unwrap();
        assert_eq!((reply["id"].as_i64(), reply["result"]["action"].as_str()), (Some(7), Some("accept")));
        assert!(a.side.asked().is_empty() && b.side.asked().is_empty());
        // Nobody answers this one: dismissed, reported to both calls in flight.
        let reply = inbound.request(&elicit(8, "Other?")).unwrap();
        assert_eq!(reply["result"], json!({"action": "cancel"}));
        assert_eq!(a.side.asked().len(), 1);
        assert_eq!(b.side.asked()[0].question["message"], "Other?");
        drop(a);
        // One call in flight: its own.
        inbound.request(&elicit(9, "Third?")).unwrap();
        assert_eq!(b.side.asked().iter().map(|q| q.key.as_str()).collect::<Vec<_>>(), ["q1", "q2"]);
        assert_eq!(inbound.request(&json!({"id": 1, "method": "ping"})), None, "answered elsewhere");
    }

    #[tokio::test]
    async fn notes_reach_their_call_bounded_and_spaced() {
        let inbound = Arc::new(Inbound::default());
        let (tx, mut rx) = progress_channel();
        let _c = inbound.enter(CallSide::new("op#1".into(), tx, vec![]));
        let note = |p: f64, m: &str| {
            json!({"method": "notifications/progress",
                   "params": {"progressToken": "op#1", "progress": p, "total": 3.0, "message": m}})
        };
        inbound.notification(&note(1.0, &"x".repeat(500)));
        inbound.notification(&note(2.0, "too soon: dropped"));
        inbound.notification(&note(3.0, "the last one always"));
        inbound.notification(&json!({"method": "notifications/progress",
                                     "params": {"progressToken": "other", "progress": 1}}));
        let mut got = Vec::new();
        while let Ok(Progress::Note(n)) = rx.try_recv() {
            got.push(n);
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].message.as_ref().map(|m| m.chars().count()), Some(NOTE_CHARS_MAX));
        assert_eq!((got[1].progress, got[1].total), (3.0, Some(3.0)));
    }

    #[test]
    fn notes_never_take_the_places_the_ledgers_messages_need() {
        let (tx, _rx) = progress_channel();
        let n = || Note { progress: 1.0, total: None, message: None };
        let mut sent = 0;
        while crate::note(&tx, n()) {
            sent += 1;
        }
        assert_eq!(sent, crate::PROGRESS_MESSAGES_MAX - crate::PROGRESS_RESERVED);
        for _ in 0..crate::PROGRESS_RESERVED {
            assert!(tx.try_send(Progress::Dispatched { detail: String::new() }).is_ok());
        }
    }
}
