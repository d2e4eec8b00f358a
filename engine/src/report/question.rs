//! What an MCP server asked a person, in words: the question's mode and
//! message, the fields its form asks for (type, required) or the URL it
//! sends the person to — every word the server chose escaped, so a
//! question cannot move the cursor, clear the screen or forge a line.

use serde_json::Value;

/// `text` escaped and kept on one line (a newline in a server's message
/// would otherwise start a line that looks like the engine's own).
fn for_terminal(text: &str) -> String {
    super::escape::for_terminal(text).replace('\n', "\\n")
}

/// A task that waits on a person's answer, in words (indented by
/// `indent`) and as JSON: its questions and the command that answers.
pub fn waiting(task_ref: &str, detail: &Value, indent: &str) -> Option<(String, Value)> {
    let a = crate::run::AwaitingInput::of(task_ref, detail)?;
    let mut text = format!(
        "{indent}{}  awaiting_input: its MCP server asks a person (operation {})\n",
        for_terminal(task_ref),
        a.operation_id
    );
    for q in &a.questions {
        for line in lines(q) {
            text.push_str(&format!("{indent}  {line}\n"));
        }
    }
    text.push_str(&format!("{indent}  answer with: {}\n", a.answer_with));
    Some((text, serde_json::json!(a)))
}

/// The lines of one question (`{"key", "question"}`), without indent.
pub fn lines(q: &Value) -> Vec<String> {
    let key = q.get("key").and_then(Value::as_str).unwrap_or("?");
    let question = q.get("question").unwrap_or(&Value::Null);
    let mode = question.get("mode").and_then(Value::as_str).unwrap_or("form");
    let message = question.get("message").and_then(Value::as_str).unwrap_or("");
    let mut out = vec![format!("question {} ({mode}): \"{}\"", for_terminal(key), for_terminal(message))];
    if let Some(url) = question.get("url").and_then(Value::as_str) {
        out.push(format!("  go to: {}", for_terminal(url)));
    }
    let schema = question.get("requestedSchema").unwrap_or(&Value::Null);
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    for (name, p) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("string");
        let mut words = vec![kind.to_string()];
        if required.contains(&name.as_str()) {
            words.push("required".into());
        }
        if let Some(e) = p.get("enum").and_then(Value::as_array) {
            words.push(format!("one of {}", e.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")));
        }
        let said = p.get("description").or_else(|| p.get("title")).and_then(Value::as_str).unwrap_or("");
        let said = if said.is_empty() { String::new() } else { format!(": {}", for_terminal(said)) };
        out.push(format!("  field {} ({}){said}", for_terminal(name), for_terminal(&words.join(", "))));
    }
    if let Some(refused) = question.get("refused").and_then(Value::as_str) {
        out.push(format!("  not a question a person can answer here: {}", for_terminal(refused)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_question_is_shown_escaped() {
        let q = json!({"key": "q", "question": {"mode": "form", "message": "Name?\u{1b}[2J", "requestedSchema": {
            "properties": {"name": {"type": "string", "description": "yours\r"}, "n": {"type": "integer"}},
            "required": ["name"]}}});
        let got = lines(&q);
        assert_eq!(got[0], "question q (form): \"Name?\\x1b[2J\"");
        assert!(got.contains(&"  field name (string, required): yours\\r".to_string()), "{got:?}");
        assert!(got.contains(&"  field n (integer)".to_string()), "{got:?}");
        let u = json!({"key": "q1", "question": {"mode": "url", "message": "Grant", "url": "https://x.test/\u{7}"}});
        assert_eq!(lines(&u)[1], "  go to: https://x.test/\\x07");
        let forged = json!({"key": "q", "question": {"mode": "form", "message": "a\ngoal satisfied"}});
        assert_eq!(lines(&forged)[0], "question q (form): \"a\\ngoal satisfied\"");
    }
}
