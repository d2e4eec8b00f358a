//! Input a server asks for before it answers (MCP elicitation), as data
//! and pure decisions: which questions a server put (a 2026-07-28
//! `inputRequests` map, a 2025-11-25 `elicitation/create`, a `-32042`
//! URL-elicitation error), each bounded and normalized so that the same
//! question asked again is recognized; the answers a resumed call carries,
//! and the reply to a question a 2025-11-25 server puts during a call.
//!
//! The engine declares form and URL elicitation, and answers nothing on
//! anyone's behalf: a question without a person's answer is dismissed
//! (`{"action": "cancel"}`: nobody made a choice) and reported with the
//! receipt, so the task waits for a person's `engine answer`.

use serde_json::{json, Map, Value};

use crate::{InputAnswers, InputAsk, Question};

/// Bounds on what a server may ask in one answer (more is refused, not cut).
pub const QUESTIONS_MAX: usize = 16;
pub const MESSAGE_CHARS_MAX: usize = 4096;
/// A question's JSON (its schema included).
pub const QUESTION_BYTES_MAX: usize = 64 * 1024;
pub const KEY_CHARS_MAX: usize = 128;
pub const REQUEST_STATE_BYTES_MAX: usize = 64 * 1024;
pub const URL_CHARS_MAX: usize = 8192;

/// The JSON-RPC error code of a 2025-11-25 server that needs a URL
/// elicitation completed before it can answer (`UrlElicitationRequired`).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// An `elicitation/create`'s params as a question: method, mode, message,
/// and the requested schema (form) or the URL (url); its elicitation id
/// apart. `Err`: why it cannot be put to a person.
pub fn question(params: &Value) -> Result<(Value, Option<String>), String> {
    let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
    let message = params.get("message").and_then(Value::as_str).unwrap_or("");
    if message.chars().count() > MESSAGE_CHARS_MAX {
        return Err(format!("a question's message is over {MESSAGE_CHARS_MAX} characters"));
    }
    let id = params.get("elicitationId").and_then(Value::as_str).map(str::to_string);
    let q = match mode {
        "form" => {
            let schema = params.get("requestedSchema").cloned().unwrap_or_else(|| json!({"type": "object"}));
            if !schema.is_object() {
                return Err("a form question's requestedSchema is not an object".into());
            }
            json!({"method": "elicitation/create", "mode": "form", "message": message, "requestedSchema": schema})
        }
        "url" => {
            let url = params.get("url").and_then(Value::as_str).filter(|u| !u.is_empty());
            let url = url.ok_or("a URL question names no url")?;
            if url.chars().count() > URL_CHARS_MAX {
                return Err(format!("a question's url is over {URL_CHARS_MAX} characters"));
            }
            json!({"method": "elicitation/create", "mode": "url", "message": message, "url": url})
        }
        other => return Err(format!("a question of mode `{}`, which this client does not know", clip(other))),
    };
    if q.to_string().len() > QUESTION_BYTES_MAX {
        return Err(format!("a question is over {QUESTION_BYTES_MAX} bytes"));
    }
    Ok((q, id))
}

/// A 2026-07-28 `input_required` result (or a task's `inputRequests`) as
/// what it asks. `Err`: the server asks something no person can answer
/// here (sampling, roots, another method), or past a bound.
pub fn ask_of(result: &Value, task_id: Option<&str>) -> Result<InputAsk, String> {
    let requests = result.get("inputRequests").and_then(Value::as_object);
    let Some(requests) = requests.filter(|r| !r.is_empty()) else {
        return Err("an input_required answer without inputRequests (requestState only): nothing to ask".into());
    };
    if requests.len() > QUESTIONS_MAX {
        return Err(format!("{} input requests, over the {QUESTIONS_MAX} a call may ask", requests.len()));
    }
    let request_state = match result.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() <= REQUEST_STATE_BYTES_MAX => Some(s.clone()),
        Some(Value::String(_)) => return Err(format!("a requestState over {REQUEST_STATE_BYTES_MAX} bytes")),
        Some(_) => return Err("a requestState that is not a string".into()),
    };
    let mut questions = Vec::with_capacity(requests.len());
    for (key, r) in requests {
        if key.is_empty() || key.chars().count() > KEY_CHARS_MAX {
            return Err(format!("an input request key of {} characters", key.chars().count()));
        }
        match r.get("method").and_then(Value::as_str) {
            Some("elicitation/create") => {}
            Some(m) => {
                return Err(format!("input request `{}` asks for {}, which only a client can do", clip(key), clip(m)))
            }
            None => return Err(format!("input request `{}` names no method", clip(key))),
        }
        let (question, elicitation_id) = question(r.get("params").unwrap_or(&Value::Null))
            .map_err(|m| format!("input request `{}`: {m}", clip(key)))?;
        questions.push(Question { key: key.clone(), question, elicitation_id });
    }
    Ok(InputAsk { task_id: task_id.map(str::to_string), request_state, questions })
}

/// A 2025-11-25 `-32042` error's URL elicitations as questions (`None`:
/// not such an error, or none usable).
pub fn ask_of_error(error: &Value) -> Option<InputAsk> {
    if error.get("code").and_then(Value::as_i64) != Some(URL_ELICITATION_REQUIRED) {
        return None;
    }
    let list = error.pointer("/data/elicitations")?.as_array()?;
    let mut questions = Vec::new();
    for (i, e) in list.iter().take(QUESTIONS_MAX).enumerate() {
        let (question, elicitation_id) = question(e).ok()?;
        questions.push(Question { key: format!("q{}", i + 1), question, elicitation_id });
    }
    (!questions.is_empty()).then_some(InputAsk { task_id: None, request_state: None, questions })
}

/// The answers a resumed call carries (the engine's `answers` key in the
/// request); `Ok(None)` for a call that carries none.
pub fn answers_of(request: &Value) -> Result<Option<InputAnswers>, String> {
    match request.get("answers") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| format!("the call's answers: {e}")),
    }
}

/// `inputResponses`: each answer's result under its question's key.
pub fn input_responses(answers: &InputAnswers) -> Value {
    let map: Map<String, Value> = answers.responses.iter().map(|r| (r.key.clone(), r.result.clone())).collect();
    Value::Object(map)
}

/// The reply to a 2025-11-25 `elicitation/create` (its params): the
/// person's answer to this very question if the call carries one, else a
/// dismissal (`cancel`: nobody chose), with the question to report.
pub fn reply(params: &Value, answers: &[crate::InputResponse]) -> (Value, Option<(Value, Option<String>)>) {
    let dismissed = json!({"action": "cancel"});
    match question(params) {
        Ok((q, id)) => match answers.iter().find(|a| a.question == q) {
            Some(a) => (a.result.clone(), None),
            None => (dismissed, Some((q, id))),
        },
        // A question no person can be shown is dismissed and reported as
        // what it is.
        Err(why) => (dismissed, Some((json!({"method": "elicitation/create", "refused": why}), None))),
    }
}

/// The questions of an ask in words: each key, mode and message.
pub fn words(ask: &InputAsk) -> String {
    let words: Vec<String> = ask
        .questions
        .iter()
        .map(|q| {
            let mode = q.question.get("mode").and_then(Value::as_str).unwrap_or("form");
            let message: String =
                q.question.get("message").and_then(Value::as_str).unwrap_or("").chars().take(200).collect();
            format!("{}: {mode} \"{message}\"", q.key)
        })
        .collect();
    words.join("; ")
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InputResponse;

    fn form() -> Value {
        json!({"mode": "form", "message": "Your name?", "requestedSchema": {"type": "object",
               "properties": {"name": {"type": "string"}}, "required": ["name"]}})
    }

    #[test]
    fn a_question_is_the_same_whatever_the_server_names_it() {
        let (a, id_a) = question(&json!({"mode": "url", "message": "Consent", "url": "https://x.test/c",
                                         "elicitationId": "e1"}))
        .unwrap();
        let (b, id_b) = question(&json!({"mode": "url", "message": "Consent", "url": "https://x.test/c",
                                         "elicitationId": "e2"}))
        .unwrap();
        assert_eq!(a, b, "the elicitation id is kept apart");
        assert_eq!((id_a.as_deref(), id_b.as_deref()), (Some("e1"), Some("e2")));
        // Form is the default mode; the method is always named.
        let (f, _) = question(&json!({"message": "m", "requestedSchema": {"type": "object"}})).unwrap();
        assert_eq!(f["mode"], "form");
        assert_eq!(f["method"], "elicitation/create");
    }

    #[test]
    fn what_no_person_can_answer_is_refused_with_why() {
        assert!(question(&json!({"mode": "url", "message": "m"})).unwrap_err().contains("no url"));
        assert!(question(&json!({"mode": "telepathy"})).unwrap_err().contains("telepathy"));
        let long = "x".repeat(MESSAGE_CHARS_MAX + 1);
        assert!(question(&json!({"message": long})).unwrap_err().contains("4096"));
        let sampling = json!({"inputRequests": {"s": {"method": "sampling/createMessage", "params": {}}}});
        assert!(ask_of(&sampling, None).unwrap_err().contains("sampling/createMessage"));
        assert!(ask_of(&json!({"requestState": "x"}), None).unwrap_err().contains("nothing to ask"));
        let many: Map<String, Value> = (0..=QUESTIONS_MAX)
            .map(|i| (format!("k{i}"), json!({"method": "elicitation/create", "params": form()})))
            .collect();
        assert!(ask_of(&json!({"inputRequests": many}), None).unwrap_err().contains("over the 16"));
        let big_state = json!({"inputRequests": {"q": {"method": "elicitation/create", "params": form()}},
                               "requestState": "s".repeat(REQUEST_STATE_BYTES_MAX + 1)});
        assert!(ask_of(&big_state, None).is_err());
    }

    #[test]
    fn an_input_required_result_and_its_answers() {
        let result = json!({"resultType": "input_required", "requestState": "st",
                            "inputRequests": {"q": {"method": "elicitation/create", "params": form()}}});
        let ask = ask_of(&result, None).unwrap();
        assert_eq!(ask.request_state.as_deref(), Some("st"));
        assert_eq!(ask.questions.len(), 1);
        assert_eq!(words(&ask), "q: form \"Your name?\"");
        let answers = InputAnswers {
            task_id: None,
            request_state: ask.request_state.clone(),
            responses: vec![InputResponse {
                key: "q".into(),
                question: ask.questions[0].question.clone(),
                result: json!({"action": "accept", "content": {"name": "Ada"}}),
            }],
        };
        assert_eq!(input_responses(&answers), json!({"q": {"action": "accept", "content": {"name": "Ada"}}}));
        let request = json!({"tool": "t", "answers": answers});
        assert_eq!(answers_of(&request).unwrap(), Some(answers.clone()));
        assert_eq!(answers_of(&json!({"tool": "t"})).unwrap(), None);
        assert!(answers_of(&json!({"answers": 3})).is_err());
        // A 2025-11-25 server asking the same question gets the answer;
        // another question is dismissed and reported.
        let (r, asked) = reply(&form(), &answers.responses);
        assert_eq!((r["action"].as_str(), asked), (Some("accept"), None));
        let (r, asked) = reply(&json!({"message": "Another?"}), &answers.responses);
        assert_eq!(r, json!({"action": "cancel"}));
        assert_eq!(asked.unwrap().0["message"], "Another?");
    }

    #[test]
    fn a_url_elicitation_error_is_a_question() {
        let e = json!({"code": -32042, "message": "needs consent", "data": {"elicitations": [
            {"mode": "url", "message": "Grant", "url": "https://x.test/g", "elicitationId": "e9"}]}});
        let ask = ask_of_error(&e).unwrap();
        assert_eq!(ask.questions[0].key, "q1");
        assert_eq!(ask.questions[0].question["url"], "https://x.test/g");
        assert_eq!(ask.questions[0].elicitation_id.as_deref(), Some("e9"));
        assert_eq!(ask_of_error(&json!({"code": -32602, "message": "no"})), None);
    }
}
