//! A checkpoint as the ledger holds it, read for a reuse decision: the
//! decision compares digests, and needs the checkpoint's files only to
//! name the first differing path when they differ. So its JSON is checked
//! (it must parse as a `Checkpoint` would, or the checkpoint is absent, as
//! before) without building its maps, and parsed only when asked.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::Checkpoint;

/// A recorded checkpoint: its digest, and its JSON or its parsed form
/// (which of the two is not part of what it is: both compare and print as
/// the checkpoint they hold).
#[derive(Clone)]
pub struct RecordedCheckpoint {
    digest: String,
    body: Body,
}

#[derive(Clone)]
enum Body {
    /// Checked to parse as a `Checkpoint`; parsed when its files are read.
    Json(String),
    Parsed(Checkpoint),
}

impl RecordedCheckpoint {
    /// The checkpoint stored as `json`, or `None` when `json` would not
    /// parse as a `Checkpoint` (exactly as `serde_json::from_str` has it).
    pub fn from_json(json: String) -> Option<RecordedCheckpoint> {
        let shape: Shape = serde_json::from_str(&json).ok()?;
        Some(RecordedCheckpoint { digest: shape.digest, body: Body::Json(json) })
    }

    /// The digest recorded with it: what reuse compares.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The checkpoint itself, parsed (`None` only if its JSON, checked
    /// when it was read, no longer parses: it cannot).
    pub fn checkpoint(&self) -> Option<Checkpoint> {
        match &self.body {
            Body::Json(json) => serde_json::from_str(json).ok(),
            Body::Parsed(cp) => Some(cp.clone()),
        }
    }

    /// Whether its context may hold one of `names` (cheap: the JSON is
    /// searched, not parsed; `false` means it holds none of them).
    pub fn may_name(&self, names: &[String]) -> bool {
        match &self.body {
            Body::Json(json) => names.iter().any(|n| serde_json::to_string(n).is_ok_and(|q| json.contains(&q))),
            Body::Parsed(cp) => names.iter().any(|n| cp.context.contains_key(n)),
        }
    }

    /// `Checkpoint::first_difference` against what is observed now.
    pub fn first_difference(&self, now: &Checkpoint) -> Option<String> {
        match &self.body {
            Body::Json(json) => serde_json::from_str::<Checkpoint>(json).ok()?.first_difference(now),
            Body::Parsed(cp) => cp.first_difference(now),
        }
    }
}

impl PartialEq for RecordedCheckpoint {
    fn eq(&self, other: &RecordedCheckpoint) -> bool {
        self.digest == other.digest && self.checkpoint() == other.checkpoint()
    }
}

impl Eq for RecordedCheckpoint {}

impl fmt::Debug for RecordedCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedCheckpoint")
            .field("digest", &self.digest)
            .field("checkpoint", &self.checkpoint())
            .finish()
    }
}

impl From<Checkpoint> for RecordedCheckpoint {
    fn from(cp: Checkpoint) -> RecordedCheckpoint {
        RecordedCheckpoint { digest: cp.digest.clone(), body: Body::Parsed(cp) }
    }
}

/// `Checkpoint`'s fields, their strings looked at but not kept (the
/// digest's aside): the same derive, so the same fields required, the same
/// duplicates refused and unknown ones ignored.
#[derive(Deserialize)]
struct Shape {
    #[allow(dead_code)]
    files: StrMap<true>,
    #[allow(dead_code)]
    context: StrMap<false>,
    digest: String,
}

/// A JSON string, not copied.
struct Str;

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Str, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Str;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Str, E> {
                Ok(Str)
            }
        }
        d.deserialize_string(V)
    }
}

/// A map of strings to strings (or, `NULLABLE`, to strings or nulls), as
/// a `BTreeMap<String, String>` (`Option<String>`) would take it.
struct StrMap<const NULLABLE: bool>;

impl<'de, const NULLABLE: bool> Deserialize<'de> for StrMap<NULLABLE> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const N: bool>;
        impl<'de, const N: bool> Visitor<'de> for V<N> {
            type Value = StrMap<N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrMap<N>, A::Error> {
                while map.next_key::<Str>()?.is_some() {
                    if N {
                        map.next_value::<Option<Str>>()?;
                    } else {
                        map.next_value::<Str>()?;
                    }
                }
                Ok(StrMap)
            }
        }
        d.deserialize_map(V::<NULLABLE>)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Whatever the JSON, it is a recorded checkpoint exactly when it
    /// parses as a `Checkpoint`, with that checkpoint's digest.
    #[test]
    fn accepts_what_a_checkpoint_parse_accepts() {
        let cases = [
            r#"{"files":{"a":"d1","b":null},"context":{"k":"v"},"digest":"c1"}"#,
            r#"{"files":{},"context":{},"digest":""}"#,
            r#"{"files":{"a\"q\\b\n":"d\u00e9"},"context":{"\u0001":"x"},"digest":"c\"2"}"#,
            r#"{"digest":"c3","context":{},"files":{"a":"x"},"extra":[1,{"y":2}]}"#,
            r#"{"files":{"a":"x","a":"y"},"context":{},"digest":"dup keys"}"#,
            r#" {"files":{"a":"x"},"context":{},"digest":"c4"} "#,
            r#"{"files":{"a":"x"},"context":{},"digest":"c5","digest":"c6"}"#,
            r#"{"files":{"a":"x"},"context":{}}"#,
            r#"{"files":{"a":1},"context":{},"digest":"c"}"#,
            r#"{"files":{"a":"x"},"context":{"k":null},"digest":"c"}"#,
            r#"{"files":["a"],"context":{},"digest":"c"}"#,
            r#"{"files":null,"context":{},"digest":"c"}"#,
            r#"{"files":{"a":"x"},"context":{},"digest":7}"#,
            r#"{"files":{"a":"x"},"context":{},"digest":null}"#,
            r#"{"files":{"a":"x"},"context":{},"digest":"c"} x"#,
            r#"{"files":{"a":"x"},"context":{},"digest":"c""#,
            r#"{"files":{"a":"\ud800"},"context":{},"digest":"c"}"#,
            r#"["files","context","digest"]"#,
            r#"[{"a":"x"},{"k":"v"},"c7"]"#,
            "",
            "null",
        ];
        for json in cases {
            let parsed = serde_json::from_str::<Checkpoint>(json).ok();
            let recorded = RecordedCheckpoint::from_json(json.to_string());
            assert_eq!(recorded.as_ref().map(|r| r.digest().to_string()), parsed.as_ref().map(|c| c.digest.clone()));
            assert_eq!(recorded.and_then(|r| r.checkpoint()), parsed, "{json}");
        }
    }

    #[test]
    fn names_the_first_difference_as_the_checkpoint_does() {
        let files = |b: &str| BTreeMap::from([("a".into(), Some("x".into())), ("b".into(), Some(b.to_string()))]);
        let then = Checkpoint::of(files("1"), BTreeMap::new());
        let now = Checkpoint::of(files("2"), BTreeMap::new());
        let json = serde_json::to_string(&then).unwrap();
        let recorded = RecordedCheckpoint::from_json(json).unwrap();
        assert_eq!(recorded.digest(), then.digest);
        assert_eq!(recorded.first_difference(&now), Some("b".into()));
        assert_eq!(RecordedCheckpoint::from(then.clone()).first_difference(&now), Some("b".into()));
        assert_eq!(recorded.first_difference(&then), None);
        assert_eq!(recorded.checkpoint(), Some(then.clone()));
        // Read as JSON or made from a checkpoint: the same, to compare and to print.
        let made = RecordedCheckpoint::from(then);
        assert_eq!(recorded, made);
        assert_eq!(format!("{recorded:?}"), format!("{made:?}"));
        assert_ne!(recorded, RecordedCheckpoint::from(now));
    }
}
