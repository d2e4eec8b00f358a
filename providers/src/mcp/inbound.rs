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
//! no request). The one call in flight whose plan holds questions open
//! (`Holding`: the provider's `ask.wait_seconds`) puts it to a person
//! instead, and replies when a person answered — `accept` … as the person
//! said — or, when the wait ended first, `cancel` and reports it as a
//! dismissed one. A note is sent at most every `NOTE_EVERY` per call (its
//! last one always), bounded (`NOTE_CHARS_MAX`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::input::{self, QUESTIONS_MAX};
use crate::{BoxFuture, Held, InputResponse, Note, Person, ProgressSender, Question, NOTE_CHARS_MAX};

/// A reply to a server's request: at once, or once a person answered (or
/// the wait ended).
pub(crate) enum Reply {
    Now(Value),
    Later(BoxFuture<'static, Value>),
}

impl Reply {
    /// The reply as it is, or once it is.
    pub async fn value(self) -> Value {
        match self {
            Reply::Now(v) => v,
            Reply::Later(f) => f.await,
        }
    }
}

/// A call whose server's questions are held open for a person: who
/// answers, the call's identity, the plan's wait and the call's deadline
/// (the wait never goes past it: it counts against the task's deadline).
#[derive(Clone)]
pub(crate) struct Holding {
    pub person: Arc<dyn Person>,
    pub operation_id: String,
    pub try_no: u32,
    pub wait: Duration,
    pub deadline: Option<Instant>,
}

impl Holding {
    /// How long a question asked now may be held: the wait, cut at the
    /// call's deadline.
    fn wait_now(&self) -> Duration {
        match self.deadline {
            Some(d) => self.wait.min(d.saturating_duration_since(Instant::now())),
            None => self.wait,
        }
    }
}

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
    /// The questions it was asked and could not answer (dismissed; a
    /// held one until a person answered it).
    asked: Mutex<Vec<Question>>,
    /// Questions put to this call so far (their keys: `q1`, `q2`, …).
    numbered: AtomicUsize,
    /// Its questions are held open for a person (`None`: dismissed at once).
    holding: Option<Holding>,
    last_note: Mutex<Option<Instant>>,
}

impl CallSide {
    pub fn new(token: String, progress: ProgressSender, answers: Vec<InputResponse>) -> Self {
        CallSide {
            token,
            progress,
            answers,
            asked: Mutex::default(),
            numbered: AtomicUsize::new(0),
            holding: None,
            last_note: Mutex::default(),
        }
    }

    /// Questions without an answer carried are held open for a person.
    pub fn holding(mut self, holding: Option<Holding>) -> Self {
        self.holding = holding;
        self
    }

    /// The questions dismissed during the call, in the order asked.
    pub fn asked(&self) -> Vec<Question> {
        lock(&self.asked).clone()
    }

    /// Record a question as dismissed; its key (`None`: over the bound,
    /// not recorded).
    fn ask(&self, question: Value, elicitation_id: Option<String>) -> Option<String> {
        let mut asked = lock(&self.asked);
        if asked.len() >= QUESTIONS_MAX {
            return None;
        }
        let key = format!("q{}", self.numbered.fetch_add(1, Ordering::SeqCst) + 1);
        asked.push(Question { key: key.clone(), question, elicitation_id });
        Some(key)
    }

    /// A held question a person answered: no longer a dismissed one.
    fn answered(&self, key: &str) {
        lock(&self.asked).retain(|q| q.key != key);
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

fn reply_to(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A question put to the one call in flight, held open for a person: it
/// counts as dismissed (recorded now) until a person's answer comes in
/// time; then that answer is the reply, else `cancel`. A question no
/// person can be shown, one over the bound, or one asked at the deadline
/// is dismissed at once, as without a wait.
fn hold(side: Arc<CallSide>, params: &Value, id: Value) -> Reply {
    let cancel = json!({"action": "cancel"});
    let Some(holding) = side.holding.clone() else { return Reply::Now(reply_to(&id, cancel)) };
    let (question, elicitation_id) = match input::question(params) {
        Ok(q) => q,
        Err(why) => {
            side.ask(json!({"method": "elicitation/create", "refused": why}), None);
            return Reply::Now(reply_to(&id, cancel));
        }
    };
    let Some(key) = side.ask(question.clone(), elicitation_id.clone()) else {
        return Reply::Now(reply_to(&id, cancel));
    };
    let wait = holding.wait_now();
    if wait.is_zero() {
        return Reply::Now(reply_to(&id, cancel));
    }
    let held = Held {
        operation_id: holding.operation_id.clone(),
        try_no: holding.try_no,
        question: Question { key: key.clone(), question, elicitation_id },
        wait,
    };
    let answer = holding.person.ask(held);
    Reply::Later(Box::pin(async move {
        // The person's side ends its own wait; this bound only guards
        // against one that would not.
        let result = match tokio::time::timeout(wait + HELD_GRACE, answer).await {
            Ok(Some(result)) => {
                side.answered(&key);
                result
            }
            _ => cancel,
        };
        reply_to(&id, result)
    }))
}

/// What a held question's reply may take past its wait (the person's side
/// reads the ledger once more at the end of it).
const HELD_GRACE: Duration = Duration::from_secs(2);

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
    pub fn request(&self, msg: &Value) -> Option<Reply> {
        if msg.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            return None;
        }
        let id = msg.get("id")?.clone();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let calls = lock(&self.calls).clone();
        let answering: Vec<&Arc<CallSide>> =
            calls.iter().filter(|c| input::reply(&params, &c.answers).1.is_none()).collect();
        let result = match (answering.as_slice(), calls.as_slice()) {
            ([one], _) => input::reply(&params, &one.answers).0,
            (_, [one]) if one.holding.is_some() => return Some(hold(Arc::clone(one), &params, id)),
            (_, [one]) => self.dismiss(&params, std::slice::from_ref(one)),
            (_, all) => self.dismiss(&params, all),
        };
        Some(Reply::Now(reply_to(&id, result)))
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

    fn now(reply: Option<Reply>) -> Value {
        match reply {
            Some(Reply::Now(v)) => v,
            Some(Reply::Later(_)) => panic!("held, not answered at once"),
            None => panic!("not answered here"),
        }
    }

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
        let reply = now(inbound.request(&elicit(7, "Name?")));
        assert_eq!((reply["id"].as_i64(), reply["result"]["action"].as_str()), (Some(7), Some("accept")));
        assert!(a.side.asked().is_empty() && b.side.asked().is_empty());
        // Nobody answers this one: dismissed, reported to both calls in flight.
        let reply = now(inbound.request(&elicit(8, "Other?")));
        assert_eq!(reply["result"], json!({"action": "cancel"}));
        assert_eq!(a.side.asked().len(), 1);
        assert_eq!(b.side.asked()[0].question["message"], "Other?");
        drop(a);
        // One call in flight: its own.
        now(inbound.request(&elicit(9, "Third?")));
        assert_eq!(b.side.asked().iter().map(|q| q.key.as_str()).collect::<Vec<_>>(), ["q1", "q2"]);
        assert!(inbound.request(&json!({"id": 1, "method": "ping"})).is_none(), "answered elsewhere");
    }

    /// A person's side that answers `answer` after `after`; keeps what it
    /// was asked.
    struct Answers(Option<Value>, Duration, Mutex<Vec<Held>>);

    impl Person for Answers {
        fn ask(&self, held: Held) -> BoxFuture<'static, Option<Value>> {
            lock(&self.2).push(held);
            let (answer, after) = (self.0.clone(), self.1);
            Box::pin(async move {
                tokio::time::sleep(after).await;
                answer
            })
        }
    }

    fn held_by(person: &Arc<Answers>, wait: Duration, deadline: Option<Instant>) -> Option<Holding> {
        let person: Arc<dyn Person> = person.clone();
        Some(Holding { person, operation_id: "op_1".into(), try_no: 2, wait, deadline })
    }

    fn later(reply: Option<Reply>) -> BoxFuture<'static, Value> {
        match reply {
            Some(Reply::Later(f)) => f,
            _ => panic!("not held"),
        }
    }

    #[tokio::test]
    async fn a_held_question_gets_the_persons_answer_in_the_call() {
        let inbound = Arc::new(Inbound::default());
        let (tx, _rx) = progress_channel();
        let accept = json!({"action": "accept", "content": {"name": "Ada"}});
        let person = Arc::new(Answers(Some(accept.clone()), Duration::from_millis(50), Mutex::default()));
        let side = CallSide::new("a".into(), tx, vec![]).holding(held_by(&person, Duration::from_secs(5), None));
        let c = inbound.enter(side);
        let reply = later(inbound.request(&elicit(3, "Name?")));
        assert_eq!(c.side.asked().len(), 1, "counted as dismissed until a person answers");
        let reply = reply.await;
        assert_eq!((reply["id"].as_i64(), &reply["result"]), (Some(3), &accept));
        assert!(c.side.asked().is_empty(), "answered in the call: nothing left to ask");
        let held = lock(&person.2).clone();
        assert_eq!((held[0].operation_id.as_str(), held[0].try_no), ("op_1", 2));
        assert_eq!((held[0].question.key.as_str(), &held[0].question.question["message"]), ("q1", &json!("Name?")));
        // The next question is numbered on: keys never repeat in a call.
        let _ = later(inbound.request(&elicit(4, "Again?"))).await;
        assert_eq!(lock(&person.2)[1].question.key, "q2");
    }

    #[tokio::test]
    async fn a_held_question_nobody_answers_is_cancelled_and_reported_within_the_deadline() {
        let inbound = Arc::new(Inbound::default());
        let (tx, _rx) = progress_channel();
        let person = Arc::new(Answers(None, Duration::from_millis(10), Mutex::default()));
        // The wait is cut at the call's deadline.
        let deadline = Some(Instant::now() + Duration::from_millis(300));
        let side =
            CallSide::new("a".into(), tx.clone(), vec![]).holding(held_by(&person, Duration::from_secs(60), deadline));
        let c = inbound.enter(side);
        let reply = later(inbound.request(&elicit(5, "Name?"))).await;
        assert_eq!(reply["result"], json!({"action": "cancel"}));
        assert!(lock(&person.2)[0].wait <= Duration::from_millis(300), "never past the deadline");
        assert_eq!(c.side.asked()[0].question["message"], "Name?", "reported with the receipt");
        drop(c);
        // Asked at the deadline: `cancel` at once, the person not asked.
        let past = Some(Instant::now());
        let c = inbound.enter(CallSide::new("b".into(), tx, vec![]).holding(held_by(
            &person,
            Duration::from_secs(60),
            past,
        )));
        assert_eq!(now(inbound.request(&elicit(6, "Late?")))["result"], json!({"action": "cancel"}));
        assert_eq!(lock(&person.2).len(), 1);
        assert_eq!(c.side.asked().len(), 1);
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
