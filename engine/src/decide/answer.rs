//! A person's answer to what an MCP server asked (`engine answer`), as a
//! pure decision: the `--field NAME=VALUE`s a person typed, checked
//! against each question's `requestedSchema`, become the `ElicitResult`s
//! the call that resumes the task carries. Nothing is guessed: an unknown
//! field, a required one missing, or a value of the wrong type is refused
//! with the field's name, and nothing is recorded.
//!
//! Fields name a property of the question's schema (`name=Ada`); when the
//! server asked several form questions, a field names its question's key
//! first (`q1.name=Ada`). A URL question is accepted by `--accept` (the
//! person went to the URL and did what it asks); `--decline` declines every
//! question. Values are typed by the schema: `string` as given (its
//! `enum`, `minLength`/`maxLength` checked), `integer` and `number`
//! (`minimum`/`maximum` checked), `boolean` (`true`/`false`).
//!
//! A form's declared defaults (SEP-1034) fill in each field the person
//! leaves out, as a form a person accepts as it stands would send them; a
//! field given wins over its default, and a default that does not fit its
//! own field (its type, `enum` or bounds) is not sent.

use serde_json::{json, Map, Value};

/// What the person said, as typed.
#[derive(Debug, Clone, Default)]
pub struct Said {
    /// `--field NAME=VALUE`, in the order given.
    pub fields: Vec<String>,
    /// `--accept`: accept the URL questions.
    pub accept: bool,
    /// `--decline`: decline every question.
    pub decline: bool,
}

/// Why an answer is refused: the field (or question) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The field as the person would type it (`name`, `q1.name`), or the
    /// question's key, or the flag.
    pub field: String,
    /// `unknown`, `missing`, `type`, `range`, `usage`.
    pub problem: &'static str,
    pub message: String,
}

fn refused(field: &str, problem: &'static str, message: String) -> Refused {
    Refused { field: field.to_string(), problem, message }
}

/// One question as the answer needs it: its key and the question as put.
#[derive(Debug, Clone)]
pub struct Asked<'a> {
    pub key: &'a str,
    pub question: &'a Value,
}

fn mode(q: &Value) -> &str {
    q.get("mode").and_then(Value::as_str).unwrap_or("form")
}

/// Which form question a `--field NAME` fills, and the field's name in
/// it: `KEY.NAME` where the server asked more than one.
fn form_of<'n>(forms: &[&Asked<'_>], name: &'n str) -> Result<(usize, &'n str), Refused> {
    let prefixed = forms.len() > 1;
    Ok(match (prefixed, name.split_once('.')) {
        (true, Some((key, prop))) => match forms.iter().position(|a| a.key == key) {
            Some(i) => (i, prop),
            None => return Err(refused(name, "unknown", format!("no form question has the key `{key}`"))),
        },
        (true, None) => {
            let keys: Vec<&str> = forms.iter().map(|a| a.key).collect();
            let m = format!(
                "the server asked {} form questions: name the field as KEY.{name} (keys: {})",
                forms.len(),
                keys.join(", ")
            );
            return Err(refused(name, "usage", m));
        }
        (false, _) if forms.is_empty() => {
            return Err(refused(
                name,
                "unknown",
                "no question asks for fields (a URL question is accepted with --accept)".into(),
            ))
        }
        (false, _) => (0, name),
    })
}

/// The answer to each question (its key and the `ElicitResult`), or why not.
pub fn decide(asked: &[Asked], said: &Said) -> Result<Vec<(String, Value)>, Refused> {
    if said.decline {
        if !said.fields.is_empty() || said.accept {
            return Err(refused(
                "--decline",
                "usage",
                "--decline declines every question: give no --field nor --accept with it".into(),
            ));
        }
        return Ok(asked.iter().map(|a| (a.key.to_string(), json!({"action": "decline"}))).collect());
    }
    let forms: Vec<&Asked> = asked.iter().filter(|a| mode(a.question) == "form").collect();
    let prefixed = forms.len() > 1;
    let mut given: Vec<Map<String, Value>> = vec![Map::new(); forms.len()];
    for field in &said.fields {
        let Some((name, text)) = field.split_once('=') else {
            return Err(refused(field, "usage", format!("--field `{field}` is not NAME=VALUE")));
        };
        let (at, prop) = form_of(&forms, name)?;
        let schema = forms[at].question.get("requestedSchema").unwrap_or(&Value::Null);
        let Some(prop_schema) = schema.pointer(&format!("/properties/{}", pointer_escape(prop))) else {
            let known = property_names(schema);
            return Err(refused(
                name,
                "unknown",
                format!("the question asks for no field `{prop}` (it asks for: {})", known.join(", ")),
            ));
        };
        if given[at].contains_key(prop) {
            return Err(refused(name, "usage", format!("--field {name} is given twice")));
        }
        given[at].insert(prop.to_string(), typed(name, prop_schema, text)?);
    }
    let mut answers = Vec::with_capacity(asked.len());
    let mut forms_seen = 0;
    for a in asked {
        if mode(a.question) != "form" {
            if !said.accept {
                let m = format!(
                    "question `{}` asks the person to go to a URL: answer it with --accept once done, or --decline",
                    a.key
                );
                return Err(refused(a.key, "missing", m));
            }
            answers.push((a.key.to_string(), json!({"action": "accept"})));
            continue;
        }
        let schema = a.question.get("requestedSchema").unwrap_or(&Value::Null);
        let content = with_defaults(std::mem::take(&mut given[forms_seen]), schema);
        forms_seen += 1;
        for req in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !content.contains_key(req) {
                let field = if prefixed { format!("{}.{req}", a.key) } else { req.to_string() };
                return Err(refused(
                    &field,
                    "missing",
                    format!("the question requires `{req}`: give --field {field}=VALUE"),
                ));
            }
        }
        answers.push((a.key.to_string(), json!({"action": "accept", "content": content})));
    }
    Ok(answers)
}

/// Does the call that carries a person's answer wait for an approval
/// first? It repeats a call that was sent (the one the server answered
/// with its question), so it does whenever the task always needs one or
/// its work is paid or external (`decide::gate`).
pub fn approval_first(task: &crate::plan::Task) -> bool {
    let (always, paid_or_external) = super::gate::ApprovalFacts::of_task(task);
    always || paid_or_external
}

/// Each property the person left out that declares a `default` fitting
/// its own schema gets it.
fn with_defaults(mut content: Map<String, Value>, schema: &Value) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return content };
    for (name, prop) in properties {
        let Some(default) = prop.get("default") else { continue };
        if content.contains_key(name) || !fits(prop, default) {
            continue;
        }
        content.insert(name.clone(), default.clone());
    }
    content
}

/// A value of the property's type, within its `enum` and bounds.
fn fits(prop: &Value, value: &Value) -> bool {
    let typed = match prop.get("type").and_then(Value::as_str).unwrap_or("string") {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => false,
    };
    typed && in_range("", prop, value).is_ok()
}

/// `text` as the property's type says.
fn typed(field: &str, schema: &Value, text: &str) -> Result<Value, Refused> {
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("string");
    let bad = |what: &str| refused(field, "type", format!("`{text}` is not {what}"));
    let value = match kind {
        "string" => json!(text),
        "boolean" => match text {
            "true" => json!(true),
            "false" => json!(false),
            _ => return Err(bad("a boolean (true or false)")),
        },
        "integer" => json!(text.parse::<i64>().map_err(|_| bad("an integer"))?),
        "number" => {
            let n = text.parse::<f64>().ok().filter(|n| n.is_finite()).ok_or_else(|| bad("a number"))?;
            json!(n)
        }
        other => {
            return Err(refused(
                field,
                "type",
                format!("a field of type `{other}` cannot be given on the command line"),
            ))
        }
    };
    in_range(field, schema, &value)?;
    Ok(value)
}

/// The schema's `enum`, lengths and bounds.
fn in_range(field: &str, schema: &Value, value: &Value) -> Result<(), Refused> {
    let out = |m: String| Err(refused(field, "range", m));
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            let words: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return out(format!("{value} is not one of {}", words.join(", ")));
        }
    }
    if let Some(s) = value.as_str() {
        let n = s.chars().count() as u64;
        if schema.get("minLength").and_then(Value::as_u64).is_some_and(|min| n < min) {
            return out(format!("{n} characters, under its minLength"));
        }
        if schema.get("maxLength").and_then(Value::as_u64).is_some_and(|max| n > max) {
            return out(format!("{n} characters, over its maxLength"));
        }
    }
    if let Some(x) = value.as_f64().filter(|_| !value.is_string()) {
        if schema.get("minimum").and_then(Value::as_f64).is_some_and(|min| x < min) {
            return out(format!("{x} is under its minimum"));
        }
        if schema.get("maximum").and_then(Value::as_f64).is_some_and(|max| x > max) {
            return out(format!("{x} is over its maximum"));
        }
    }
    Ok(())
}

fn property_names(schema: &Value) -> Vec<String> {
    schema.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default()
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// The command that answers `asked` for task `task_ref`: every required
/// field named (`VALUE` for the person to fill in), `--accept` for a URL.
pub fn command(task_ref: &str, asked: &[Asked]) -> String {
    let forms = asked.iter().filter(|a| mode(a.question) == "form").count();
    let mut words = vec!["engine answer".to_string(), super::advice::shell_word(task_ref)];
    let mut url = false;
    for a in asked {
        if mode(a.question) != "form" {
            url = true;
            continue;
        }
        let schema = a.question.get("requestedSchema").unwrap_or(&Value::Null);
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let names: Vec<String> = if required.is_empty() {
            property_names(schema).into_iter().take(1).collect()
        } else {
            required.iter().map(|s| s.to_string()).collect()
        };
        for n in names {
            let field = if forms > 1 { format!("{}.{n}", a.key) } else { n };
            words.push(format!("--field {}", super::advice::shell_word(&format!("{field}=VALUE"))));
        }
    }
    if url {
        words.push("--accept".into());
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({"mode": "form", "message": "Who?", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "agree": {"type": "boolean"},
            "color": {"type": "string", "enum": ["red", "green"]},
            "ratio": {"type": "number"}},
            "required": ["name"]}})
    }

    fn url() -> Value {
        json!({"mode": "url", "message": "Consent", "url": "https://x.test/c"})
    }

    fn said(fields: &[&str]) -> Said {
        Said { fields: fields.iter().map(|s| s.to_string()).collect(), ..Said::default() }
    }

    #[test]
    fn fields_are_typed_by_the_schema() {
        let q = form();
        let asked = [Asked { key: "q", question: &q }];
        let got = decide(&asked, &said(&["name=Ada", "count=3", "agree=true", "color=red", "ratio=0.5"])).unwrap();
        assert_eq!(
            got,
            vec![(
                "q".to_string(),
                json!({"action": "accept", "content": {"name": "Ada", "count": 3, "agree": true, "color": "red", "ratio": 0.5}})
            )]
        );
        // A value may hold `=`.
        let got = decide(&asked, &said(&["name=a=b"])).unwrap();
        assert_eq!(got[0].1["content"]["name"], "a=b");
    }

    #[test]
    fn every_bad_answer_names_its_field() {
        let q = form();
        let asked = [Asked { key: "q", question: &q }];
        let cases: &[(&[&str], &str, &str)] = &[
            (&["name=Ada", "nmae=x"], "nmae", "unknown"),
            (&["count=3"], "name", "missing"),
            (&["name=Ada", "count=three"], "count", "type"),
            (&["name=Ada", "count=11"], "count", "range"),
            (&["name=Ada", "agree=yes"], "agree", "type"),
            (&["name=Ada", "color=blue"], "color", "range"),
            (&["name="], "name", "range"),
            (&["name=Ada", "ratio=NaN"], "ratio", "type"),
            (&["name=Ada", "name=Bob"], "name", "usage"),
            (&["name"], "name", "usage"),
        ];
        for (fields, field, problem) in cases {
            let r = decide(&asked, &said(fields)).unwrap_err();
            assert_eq!((r.field.as_str(), r.problem), (*field, *problem), "{fields:?}: {}", r.message);
        }
    }

    #[test]
    fn several_questions_name_their_key_and_urls_need_accept() {
        let (a, b, u) = (form(), form(), url());
        let asked =
            [Asked { key: "q1", question: &a }, Asked { key: "q2", question: &b }, Asked { key: "q3", question: &u }];
        assert_eq!(decide(&asked, &said(&["name=x"])).unwrap_err().problem, "usage");
        let r = decide(&asked, &said(&["q1.name=x", "q2.name=y"])).unwrap_err();
        assert_eq!((r.field.as_str(), r.problem), ("q3", "missing"));
        let mut s = said(&["q1.name=x", "q2.name=y"]);
        s.accept = true;
        let got = decide(&asked, &s).unwrap();
        assert_eq!(got[1].1["content"]["name"], "y");
        assert_eq!(got[2].1, json!({"action": "accept"}));
        assert_eq!(decide(&asked, &said(&["q9.name=x"])).unwrap_err().problem, "unknown");
        let declined = decide(&asked, &Said { decline: true, ..Said::default() }).unwrap();
        assert!(declined.iter().all(|(_, r)| r == &json!({"action": "decline"})));
        assert_eq!(
            decide(&asked, &Said { decline: true, accept: true, ..Said::default() }).unwrap_err().problem,
            "usage"
        );
    }

    #[test]
    fn a_forms_defaults_fill_what_the_person_leaves_out() {
        // SEP-1034: the form as the server fills it in; what the person
        // gives wins; a default that breaks its own field's schema is not sent.
        let q = json!({"mode": "form", "message": "Who?", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "bad": {"type": "integer", "default": "thirty"},
            "off": {"type": "string", "enum": ["a"], "default": "b"},
            "none": {"type": "string"}},
            "required": ["name"]}});
        let asked = [Asked { key: "q", question: &q }];
        let got = decide(&asked, &said(&[])).unwrap();
        assert_eq!(
            got[0].1,
            json!({"action": "accept", "content": {"name": "John Doe", "age": 30, "score": 95.5,
                   "status": "active", "verified": true}})
        );
        let got = decide(&asked, &said(&["name=Ada", "verified=false"])).unwrap();
        assert_eq!((&got[0].1["content"]["name"], &got[0].1["content"]["verified"]), (&json!("Ada"), &json!(false)));
        assert_eq!(got[0].1["content"]["age"], 30);
        // Declined: nothing of the form is sent, defaults neither.
        assert_eq!(
            decide(&asked, &Said { decline: true, ..Said::default() }).unwrap()[0].1,
            json!({"action": "decline"})
        );
    }

    #[test]
    fn the_command_names_what_is_required() {
        let (q, u) = (form(), url());
        assert_eq!(command("T1", &[Asked { key: "q", question: &q }]), "engine answer T1 --field name=VALUE");
        assert_eq!(command("T 1", &[Asked { key: "q", question: &u }]), "engine answer 'T 1' --accept");
    }
}
