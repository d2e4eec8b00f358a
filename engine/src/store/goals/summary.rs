//! What a run's report shows of each task (`GoalsRead::task_summaries`):
//! its ref, state and operation, and three words of its JSON detail. A
//! report of 1,000 tasks read every row whole and built each detail as a
//! `serde_json::Value` to look up three keys; here the detail's keys are
//! read as they stream by and only those three strings are kept.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::TaskRecord;
use crate::ids::OperationId;
use crate::state::TaskState;

/// A task as a run's report lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSummary {
    pub task_ref: String,
    pub state: TaskState,
    pub operation_id: OperationId,
    /// `TaskRecord::class`.
    pub class: Option<String>,
    /// `TaskRecord::why`.
    pub why: Option<String>,
    /// `TaskRecord::pending_operation`.
    pub pending_operation: Option<String>,
}

impl TaskSummary {
    /// The summary of a task row read whole.
    pub fn of(t: &TaskRecord) -> TaskSummary {
        TaskSummary {
            task_ref: t.task_ref.clone(),
            state: t.state,
            operation_id: t.operation_id.clone(),
            class: t.class().map(str::to_string),
            why: t.why().map(str::to_string),
            pending_operation: t.pending_operation().map(str::to_string),
        }
    }

    /// The summary of a task row's columns, `detail` its JSON text: the
    /// same words `TaskRecord`'s accessors find in it (a key's last
    /// string value; nothing when the text is not a JSON object).
    pub fn from_row(task_ref: String, state: TaskState, operation_id: OperationId, detail: &str) -> TaskSummary {
        let words = serde_json::from_str::<Words>(detail).unwrap_or_default();
        TaskSummary {
            task_ref,
            state,
            operation_id,
            class: words.class,
            why: words.why,
            pending_operation: words.operation_id,
        }
    }
}

/// The three keys of a detail the report shows, each kept only when its
/// value is a string (`Value::as_str`).
#[derive(Default)]
struct Words {
    class: Option<String>,
    why: Option<String>,
    operation_id: Option<String>,
}

impl<'de> Deserialize<'de> for Words {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Words, D::Error> {
        d.deserialize_any(WordsVisitor)
    }
}

struct WordsVisitor;

impl<'de> Visitor<'de> for WordsVisitor {
    type Value = Words;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Words, A::Error> {
        let mut words = Words::default();
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::Class => &mut words.class,
                Key::Why => &mut words.why,
                Key::OperationId => &mut words.operation_id,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            // A repeated key: its last value stands, as in a `Value`.
            *slot = map.next_value::<StrOrOther>()?.0;
        }
        Ok(words)
    }

    // Any other JSON value: no object, so no key to find.
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Words, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Words::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Words, E> {
        Ok(Words::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Words, E> {
        Ok(Words::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Words, E> {
        Ok(Words::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Words, E> {
        Ok(Words::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Words, E> {
        Ok(Words::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Words, E> {
        Ok(Words::default())
    }
}

/// A key of the detail: one of the three, or another (not copied).
enum Key {
    Class,
    Why,
    OperationId,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, k: &str) -> Result<Key, E> {
                Ok(match k {
                    "class" => Key::Class,
                    "why" => Key::Why,
                    "operation_id" => Key::OperationId,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// A value: its text when it is a string, nothing otherwise.
struct StrOrOther(Option<String>);

impl<'de> Deserialize<'de> for StrOrOther {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StrOrOther, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrOrOther;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StrOrOther, E> {
                Ok(StrOrOther(Some(s.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrOrOther, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(StrOrOther(None))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<StrOrOther, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(StrOrOther(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<StrOrOther, E> {
                Ok(StrOrOther(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<StrOrOther, E> {
                Ok(StrOrOther(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<StrOrOther, E> {
                Ok(StrOrOther(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<StrOrOther, E> {
                Ok(StrOrOther(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<StrOrOther, E> {
                Ok(StrOrOther(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RequestDigest;

    /// Whatever the detail's text, the words are the ones a `TaskRecord`
    /// with that detail (as the store parses it) gives.
    #[test]
    fn finds_the_words_a_task_record_finds() {
        let details = [
            r#"{}"#,
            r#"{"attempt_id":1,"checkpoint":"e6bedd","reusable":true}"#,
            r#"{"class":"transient","why":"exit 1","operation_id":"op_1","x":[1,{"class":"no"}]}"#,
            r#"{"class":7,"why":null,"operation_id":{"a":"b"},"waits_on_attempt":3}"#,
            r#"{"class":"a","class":"b","why":"w","why":false}"#,
            r#"{"why":"line\nnext \"quoted\" \u00e9 \u0007","stale":"CHECKPOINT_CHANGED","detail":"first differing: a"}"#,
            r#"{"operation_id":["op"],"class":1.5,"why":-2}"#,
            r#"{"reused_from":{"revision":1,"attempt_id":4,"class":"x"}}"#,
            r#"["class","why"]"#,
            r#""class""#,
            "null",
            "true",
            "12",
            "",
            "{",
            r#"{"class":"a","why":}"#,
            r#"{"class":"a"} trailing"#,
            r#"{"class":"\ud800"}"#,
        ];
        for detail in details {
            let record = TaskRecord {
                task_ref: "T".into(),
                state: TaskState::Succeeded,
                operation_id: OperationId::new("op_t"),
                request_digest: RequestDigest::new("r"),
                meaning: "m".into(),
                dependencies: "d".into(),
                detail: serde_json::from_str(detail).unwrap_or(serde_json::Value::Null),
            };
            let read = TaskSummary::from_row("T".into(), TaskState::Succeeded, OperationId::new("op_t"), detail);
            assert_eq!(read, TaskSummary::of(&record), "{detail}");
        }
    }
}
